//! `kcp sharded` (issue 19, item 5) as people run it: a real `kcp sharded --shards 2
//! --secure-port 0` process whose admin kubeconfig reaches both shards with kubectl (`--context
//! root get shards` shows root and shard-1 Ready, `--context shard-1 get --raw /readyz`), that
//! stops every process it printed on SIGTERM and exits 0, keeps PKI and data across a re-run on the
//! same directory, fails naming a child that dies (after stopping the others), puts every shard
//! under its own prefix on one etcd with `--etcd-servers`, and starts the standalone cache server.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use kcp_testing::{ChildGuard, EtcdProcess, Kubectl, Patience, temp_dir};
use serde_json::{Value, json};
use tempfile::TempDir;

/// Three processes, each waited for in turn (the supervisor allows each 120 s).
const STARTED_WITHIN: Duration = Duration::from_secs(300);
const PATIENCE: Patience = Patience::new(Duration::from_secs(120), Duration::from_millis(200));
/// Every child may take the supervisor's grace period (45 s) to stop.
const STOP_WITHIN: Duration = Duration::from_secs(150);
const KUBECTL: &str = "1.33";
/// One line per shard: `<name>=<status of its Ready condition>`.
const READY_JSONPATH: &str = "jsonpath={range .items[*]}{.metadata.name}={.status.conditions[?(@.type==\"Ready\")].status}{\"\\n\"}{end}";

/// A running `kcp sharded`, its directory and what it printed.
struct Sharded {
    process: ChildGuard,
    dir: PathBuf,
    log: PathBuf,
}

impl Sharded {
    /// Starts `kcp sharded --shards 2 --secure-port 0` on `dir` and waits for its summary.
    async fn start(dir: &Path, label: &str, extra: &[String]) -> Sharded {
        let log = dir.join(format!("{label}.out"));
        let data = dir.join("topology");
        let mut command = Command::new(env!("CARGO_BIN_EXE_kcp"));
        command
            .args(["sharded", "--shards=2", "--secure-port=0"])
            .arg(format!("--root-directory={}", data.display()))
            .args(extra);
        let mut process = ChildGuard::spawn(label, &mut command, &log);
        let deadline = Instant::now() + STARTED_WITHIN;
        loop {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            if let Some(status) = process.exited() {
                panic!("kcp sharded exited ({status}) while starting:\n{text}");
            }
            if text.contains("\nadmin kubeconfig: ") {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "kcp sharded printed no summary within {STARTED_WITHIN:?}:\n{text}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        assert!(data.join("admin.kubeconfig").is_file());
        Sharded {
            process,
            dir: data,
            log,
        }
    }

    fn output(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap()
    }

    /// The processes the summary lists with a PID: name and PID, in start order.
    fn printed_pids(&self) -> Vec<(String, u32)> {
        let output = self.output();
        let summary = &output[output.rfind("kcp sharded is running:").unwrap()..];
        summary
            .lines()
            .filter_map(|line| {
                let fields: Vec<&str> = line.split_whitespace().collect();
                let pid = fields.get(2)?.strip_prefix("pid=")?.parse().ok()?;
                Some((fields[0].to_owned(), pid))
            })
            .collect()
    }

    fn pid_of(&self, name: &str) -> u32 {
        self.printed_pids()
            .into_iter()
            .find(|(printed, _)| printed == name)
            .unwrap_or_else(|| panic!("{name} not printed:\n{}", self.output()))
            .1
    }

    fn kubectl(&self) -> Kubectl {
        Kubectl::new(KUBECTL, &self.dir.join("admin.kubeconfig"))
    }

    async fn sigterm(&mut self) -> ExitStatus {
        self.process.stop(STOP_WITHIN).await
    }
}

fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
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
    let dir = temp_dir("sharded");
    let mut sharded = Sharded::start(dir.path(), "first", &[]).await;
    let kubectl = sharded.kubectl();
    assert_eq!(
        kubectl
            .ok(&["config", "get-contexts", "-o", "name"])
            .lines()
            .collect::<Vec<_>>(),
        ["root", "shard-1"]
    );
    assert_eq!(kubectl.ok(&["config", "current-context"]).trim(), "root");
    shards_ready(&kubectl).await;
    assert_eq!(
        kubectl.ok(&["--context", "shard-1", "get", "--raw", "/readyz"]),
        "ok"
    );
    kubectl.ok(&[
        "--context",
        "root",
        "create",
        "configmap",
        "kept",
        "--from-literal=a=b",
    ]);
    let pids = sharded.printed_pids();
    let names: Vec<&str> = pids.iter().map(|(name, _)| name.as_str()).collect();
    assert!(names.ends_with(&["root", "shard-1"]), "{names:?}");
    assert!(pids.iter().all(|(_, pid)| alive(*pid)), "{pids:?}");
    let ca = std::fs::read(sharded.dir.join("pki/ca.crt")).unwrap();

    let status = sharded.sigterm().await;
    assert!(status.success(), "{status}\n{}", sharded.output());
    for (name, pid) in &pids {
        assert!(!alive(*pid), "{name} (pid {pid}) outlived kcp sharded");
    }

    // The same directory again: same CA, same data, the kubeconfig rewritten for the new ports.
    let mut again = Sharded::start(dir.path(), "second", &[]).await;
    assert_eq!(std::fs::read(again.dir.join("pki/ca.crt")).unwrap(), ca);
    let kubectl = again.kubectl();
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
    let status = again.sigterm().await;
    assert!(status.success(), "{status}\n{}", again.output());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_child_that_dies_stops_the_others_and_is_named() {
    let dir = temp_dir("sharded-death");
    let mut sharded = Sharded::start(dir.path(), "death", &[]).await;
    let pids = sharded.printed_pids();
    let victim = sharded.pid_of("shard-1");
    let killed = Command::new("kill")
        .args(["-KILL", &victim.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());

    let status = sharded.process.wait(STOP_WITHIN).await;
    assert!(!status.success(), "{}", sharded.output());
    let output = sharded.output();
    assert!(
        output.contains(&format!("shard-1 (pid {victim}) exited (signal: 9")),
        "{output}"
    );
    assert!(
        output.contains(&format!(
            "Last lines of {}",
            sharded.dir.join("shard-1.log").display()
        )),
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
    let dir: TempDir = temp_dir("sharded-etcd");
    let mut sharded = Sharded::start(
        dir.path(),
        "etcd",
        &[format!("--etcd-servers={}", etcd.client_url())],
    )
    .await;
    shards_ready(&sharded.kubectl()).await;
    for shard in ["root", "shard-1"] {
        let keys = etcd_keys(&etcd, &format!("/shard/{shard}/")).await;
        assert!(keys > 0, "nothing under /shard/{shard}/ in etcd");
        assert!(
            !sharded.dir.join(shard).join("store.redb").exists(),
            "{shard} has an embedded store besides etcd"
        );
    }
    assert_eq!(etcd_keys(&etcd, "/registry").await, 0);
    let status = sharded.sigterm().await;
    assert!(status.success(), "{status}\n{}", sharded.output());
}

/// Fails while this build has no `kcp cache-server`: the topology needs its standalone cache.
#[tokio::test(flavor = "multi_thread")]
async fn the_standalone_cache_server_is_started() {
    let dir = temp_dir("sharded-cache");
    let mut sharded = Sharded::start(dir.path(), "cache", &[]).await;
    let output = sharded.output();
    let pids = sharded.printed_pids();
    let cache = pids.iter().find(|(name, _)| name == "cache");
    assert!(
        cache.is_some_and(|(_, pid)| alive(*pid)),
        "no running cache server:\n{output}"
    );
    let cache_kubeconfig = sharded.dir.join("cache.kubeconfig");
    assert_eq!(
        Kubectl::new(KUBECTL, &cache_kubeconfig).ok(&["get", "--raw", "/readyz"]),
        "ok"
    );
    let status = sharded.sigterm().await;
    assert!(status.success(), "{status}\n{}", sharded.output());
    assert!(pids.iter().all(|(_, pid)| !alive(*pid)));
}
