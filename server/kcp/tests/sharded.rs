//! `kcp sharded` (issues 19 and 20) as people run it: a real `kcp sharded --shards 2
//! --secure-port 0` process (`kcp_testing::ShardedKcp`) whose admin kubeconfig (context
//! `front-proxy` current, and one per shard) reaches both shards with kubectl (`--context root get shards` shows root and shard-1 Ready, `--context shard-1 get
//! --raw /readyz`), that stops every process it printed on SIGTERM and exits 0, keeps PKI and data
//! across a re-run on the same directory, fails naming a child that dies (after stopping the
//! others) or cannot start, stops on SIGINT (Ctrl-C) as on SIGTERM, puts every shard under its own prefix on one etcd with `--etcd-servers`, and starts the
//! standalone cache server (or, with `--cache in-process`, none: the root shard serves it).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::TcpListener;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use kcp_testing::{
    AdminCredentials, ChildGuard, EtcdProcess, Kubectl, Patience, ShardedKcp, temp_dir,
};
use serde_json::{Value, json};

const PATIENCE: Patience = Patience::new(Duration::from_secs(120), Duration::from_millis(200));
const KUBECTL: &str = "1.33";
/// One line per shard: `<name>=<status of its Ready condition>`.
const READY_JSONPATH: &str = "jsonpath={range .items[*]}{.metadata.name}={.status.conditions[?(@.type==\"Ready\")].status}{\"\\n\"}{end}";

async fn start(label: &str, flags: &[String]) -> ShardedKcp {
    ShardedKcp::start(Path::new(env!("CARGO_BIN_EXE_kcp")), label, 2, flags).await
}

fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

fn pids(sharded: &ShardedKcp) -> Vec<(String, u32)> {
    sharded
        .children()
        .into_iter()
        .map(|child| (child.name, child.pid))
        .collect()
}

async fn shards_ready(kubectl: &Kubectl) {
    PATIENCE
        .eventually("root and shard-1 Ready", || async {
            let run = kubectl.run(&["--context", "root", "get", "shards", "-o", READY_JSONPATH]);
            let lines: Vec<&str> = run.stdout.lines().collect();
            if lines == ["root=True", "shard-1=True"] {
                Ok(())
            } else {
                Err(format!("{}{}", run.stdout, run.stderr))
            }
        })
        .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn two_shards_answer_stop_on_sigterm_and_come_back_with_their_data() {
    let mut sharded = start("sharded", &[]).await;
    let kubectl = Kubectl::new(KUBECTL, &sharded.kubeconfig());
    assert_eq!(
        kubectl
            .ok(&["config", "get-contexts", "-o", "name"])
            .lines()
            .collect::<Vec<_>>(),
        ["front-proxy", "root", "shard-1"]
    );
    assert_eq!(
        kubectl.ok(&["config", "current-context"]).trim(),
        "front-proxy"
    );
    shards_ready(&kubectl).await;
    assert_eq!(
        kubectl.ok(&["--context", "shard-1", "get", "--raw", "/readyz"]),
        "ok"
    );
    assert_eq!(
        sharded.admin("shard-1").server,
        sharded.child("shard-1").url
    );
    kubectl.ok(&[
        "--context",
        "root",
        "create",
        "configmap",
        "kept",
        "--from-literal=a=b",
    ]);
    let pids = pids(&sharded);
    let names: Vec<&str> = pids.iter().map(|(name, _)| name.as_str()).collect();
    assert!(
        names.ends_with(&["root", "shard-1", "front-proxy"]),
        "{names:?}"
    );
    assert!(pids.iter().all(|(_, pid)| alive(*pid)), "{pids:?}");
    let ca = std::fs::read(sharded.directory().join("pki/ca.crt")).unwrap();

    // SIGTERM (exit 0 is checked), then the same directory again: same CA, same data, the
    // kubeconfig rewritten for the new ports.
    sharded.restart().await;
    for (name, pid) in &pids {
        assert!(!alive(*pid), "{name} (pid {pid}) outlived kcp sharded");
    }
    assert_eq!(
        std::fs::read(sharded.directory().join("pki/ca.crt")).unwrap(),
        ca
    );
    shards_ready(&kubectl).await;
    assert_eq!(
        kubectl.ok(&[
            "--context",
            "root",
            "get",
            "configmap",
            "kept",
            "-o",
            "jsonpath={.data.a}"
        ]),
        "b"
    );
    let status = sharded.stop().await;
    assert!(status.success(), "{status}\n{}", sharded.output());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_child_that_dies_stops_the_others_and_is_named() {
    let mut sharded = start("sharded-death", &[]).await;
    let pids = pids(&sharded);
    let victim = sharded.child("shard-1").pid;
    let killed = Command::new("kill")
        .args(["-KILL", &victim.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());

    let status = sharded.wait().await;
    assert!(!status.success(), "{}", sharded.output());
    let output = sharded.output();
    assert!(
        output.contains(&format!("shard-1 (pid {victim}) exited (signal: 9")),
        "{output}"
    );
    let log = sharded.directory().join("shard-1.log");
    assert!(
        output.contains(&format!("Last lines of {}", log.display())),
        "{output}"
    );
    for (name, pid) in &pids {
        assert!(!alive(*pid), "{name} (pid {pid}) outlived kcp sharded");
    }
}

/// How many keys etcd holds under `prefix` (its JSON gateway, keys in base64).
async fn etcd_keys(etcd: &EtcdProcess, prefix: &str) -> u64 {
    let mut end = prefix.as_bytes().to_vec();
    *end.last_mut().unwrap() += 1;
    let body = json!({
        "key": STANDARD.encode(prefix),
        "range_end": STANDARD.encode(&end),
        "count_only": true,
    });
    let answer: Value = reqwest::Client::new()
        .post(format!("{}/v3/kv/range", etcd.client_url()))
        .json(&body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    answer["count"]
        .as_str()
        .map_or(0, |count| count.parse().unwrap())
}

#[tokio::test(flavor = "multi_thread")]
async fn with_etcd_every_shard_has_its_own_prefix() {
    let etcd = EtcdProcess::start(false).await;
    let mut sharded = start(
        "sharded-etcd",
        &[format!("--etcd-servers={}", etcd.client_url())],
    )
    .await;
    shards_ready(&Kubectl::new(KUBECTL, &sharded.kubeconfig())).await;
    for shard in ["root", "shard-1"] {
        let keys = etcd_keys(&etcd, &format!("/shard/{shard}/")).await;
        assert!(keys > 0, "nothing under /shard/{shard}/ in etcd");
        assert!(
            !sharded.directory().join(shard).join("store.redb").exists(),
            "{shard} has an embedded store besides etcd"
        );
    }
    assert_eq!(etcd_keys(&etcd, "/registry").await, 0);
    // Ctrl-C in a terminal: SIGINT.
    let pids = pids(&sharded);
    let interrupted = Command::new("kill")
        .args(["-INT", &sharded.pid().to_string()])
        .status()
        .unwrap();
    assert!(interrupted.success());
    let status = sharded.wait().await;
    assert!(status.success(), "{status}\n{}", sharded.output());
    for (name, pid) in &pids {
        assert!(!alive(*pid), "{name} (pid {pid}) outlived kcp sharded");
    }
}

/// The root shard's port is taken: the root shard fails to start, and `kcp sharded` exits 1
/// naming it and quoting its log, with nothing left running.
#[tokio::test(flavor = "multi_thread")]
async fn a_shard_that_cannot_start_is_named() {
    let dir = temp_dir("sharded-taken");
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let topology = dir.path().join("topology");
    let mut command = Command::new(env!("CARGO_BIN_EXE_kcp"));
    command.args([
        "sharded".to_owned(),
        "--shards=2".to_owned(),
        format!("--secure-port={port}"),
        format!("--root-directory={}", topology.display()),
    ]);
    let mut sharded = ChildGuard::spawn("kcp sharded", &mut command, &dir.path().join("out.log"));
    let status = sharded.wait(Duration::from_secs(300)).await;
    let output = sharded.log();
    assert_eq!(status.code(), Some(1), "{output}");
    assert!(
        output.contains("error: kcp sharded: root (pid "),
        "{output}"
    );
    assert!(
        output.contains(&format!(
            "Last lines of {}",
            topology.join("root.log").display()
        )),
        "{output}"
    );
    assert!(!topology.join("admin.kubeconfig").exists());
    drop(taken);
}

/// Fails while this build has no `kcp cache-server`: the topology needs its standalone cache.
#[tokio::test(flavor = "multi_thread")]
async fn the_standalone_cache_server_is_started() {
    let mut sharded = start("sharded-cache", &[]).await;
    let cache = sharded.children().into_iter().find(|c| c.name == "cache");
    assert!(
        cache.as_ref().is_some_and(|cache| alive(cache.pid)),
        "no running cache server:\n{}",
        sharded.output()
    );
    let cache_kubeconfig = sharded.directory().join("cache.kubeconfig");
    assert_eq!(
        Kubectl::new(KUBECTL, &cache_kubeconfig).ok(&["get", "--raw", "/readyz"]),
        "ok"
    );
    let pids = pids(&sharded);
    let status = sharded.stop().await;
    assert!(status.success(), "{status}\n{}", sharded.output());
    assert!(pids.iter().all(|(_, pid)| !alive(*pid)));
}

/// `--cache in-process`: no cache server process; the root shard serves the cache at
/// `/services/cache/` and `cache.kubeconfig` names it. Fails while this build's root shard has no
/// in-process cache.
#[tokio::test(flavor = "multi_thread")]
async fn in_process_the_root_shard_serves_the_cache() {
    let mut sharded = start("sharded-in-process", &["--cache=in-process".to_owned()]).await;
    let names: Vec<String> = sharded.children().into_iter().map(|c| c.name).collect();
    assert_eq!(
        names,
        ["root", "shard-1", "front-proxy"],
        "{}",
        sharded.output()
    );
    shards_ready(&Kubectl::new(KUBECTL, &sharded.kubeconfig())).await;
    let cache =
        AdminCredentials::read_cluster(&sharded.directory().join("cache.kubeconfig"), "cache")
            .unwrap();
    assert_eq!(cache.server, sharded.child("root").url);
    let list = cache
        .client()
        .get(format!(
            "{}/services/cache/shards/*/clusters/*/apis/core.kcp.io/v1alpha1/shards",
            cache.server
        ))
        .send()
        .await
        .unwrap();
    let status = list.status();
    assert_eq!(status, 200, "{}", list.text().await.unwrap());
    let status = sharded.stop().await;
    assert!(status.success(), "{status}\n{}", sharded.output());
}
