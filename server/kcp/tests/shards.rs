//! Shard identity (issue 19, part 1): the root shard registers its own `Shard` in `root`
//! (upstream's `shards.core.kcp.io`, readable with `kubectl get shards`), keeps its `Ready`
//! heartbeat and `status.capacity` up to date, and a full shard (`--max-logical-clusters`) leaves
//! new workspaces `Scheduling` with `WorkspaceScheduled=False` until a deletion frees room. A
//! second shard process (`--shard-name=shard-1 --root-shard-kubeconfig-file=<root's admin
//! kubeconfig>`) registers itself in root over HTTPS. A non-root shard without the root shard's
//! or the cache's kubeconfig, one whose credentials root refuses, one whose root shard does not
//! answer, and a second live process under a name already held (root's, a non-root shard's) are
//! refused with messages naming the cause.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use kcp_testing::{EtcdProcess, KcpProcess, Kubectl, Patience, temp_dir};
use reqwest::Method;
use serde_json::{Value, json};

const SHARD: &str = "/clusters/root/apis/core.kcp.io/v1alpha1/shards/root";
const WORKSPACES: &str = "/clusters/root/apis/tenancy.kcp.io/v1alpha1/workspaces";
const PATIENCE: Patience = Patience::new(Duration::from_secs(60), Duration::from_millis(200));
/// A heartbeat comes every 30 s; allow for two.
const HEARTBEAT_PATIENCE: Patience = Patience::new(Duration::from_secs(75), Duration::from_secs(1));

fn binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_kcp"))
}

async fn shard(kcp: &KcpProcess) -> Value {
    let response = kcp.get(SHARD).await;
    assert_eq!(response.status, 200, "{}", response.text());
    response.json()
}

async fn create_workspace(kcp: &KcpProcess, name: &str) {
    let created = kcp
        .send_json(
            Method::POST,
            WORKSPACES,
            &json!({"metadata": {"name": name}}),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.text());
}

async fn wait_ready(kcp: &KcpProcess, name: &str) {
    kcp.wait_for(
        &format!("workspace {name} Ready"),
        &format!("{WORKSPACES}/{name}"),
        |r| r.status == 200 && r.json()["status"]["phase"] == "Ready",
    )
    .await;
}

async fn wait_capacity(kcp: &KcpProcess, logical_clusters: u64) {
    PATIENCE
        .eventually(&format!("{logical_clusters} logical clusters"), || async {
            let shard = shard(kcp).await;
            if shard["status"]["capacity"]["logicalClusters"] == logical_clusters {
                Ok(())
            } else {
                Err(shard["status"].to_string())
            }
        })
        .await
}

fn ready_condition(shard: &Value) -> Value {
    shard["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Ready")
        .cloned()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_root_shard_registers_itself_and_respects_its_capacity() {
    // root plus two workspaces.
    let kcp = KcpProcess::start(
        binary(),
        "shards-root",
        &["--max-logical-clusters=3".to_owned()],
    )
    .await;
    let registered = shard(&kcp).await;
    assert_eq!(registered["metadata"]["labels"]["name"], "root");
    assert_eq!(registered["spec"]["baseURL"], kcp.base_url());
    assert_eq!(registered["spec"]["externalURL"], kcp.base_url());
    assert_eq!(registered["spec"]["virtualWorkspaceURL"], kcp.base_url());
    assert_eq!(ready_condition(&registered)["status"], "True");
    assert_eq!(
        registered["status"]["capacity"],
        json!({"logicalClusters": 1, "maxLogicalClusters": 3})
    );
    let first_beat = ready_condition(&registered)["lastHeartbeatTime"].clone();

    let kubectl = Kubectl::new("1.33", &kcp.kubeconfig());
    let table = kubectl.ok(&["get", "shards"]);
    assert!(table.contains("EXTERNAL URL"), "{table}");
    assert!(
        table.contains("root") && table.contains(kcp.base_url()),
        "{table}"
    );
    let labelled = kubectl.ok(&["get", "shards", "-l", "name=root", "-o", "name"]);
    assert_eq!(labelled.trim(), "shard.core.kcp.io/root");

    create_workspace(&kcp, "first").await;
    create_workspace(&kcp, "second").await;
    wait_ready(&kcp, "first").await;
    wait_ready(&kcp, "second").await;
    wait_capacity(&kcp, 3).await;

    // Shards live in root only.
    let elsewhere = kcp
        .get("/clusters/root:first/apis/core.kcp.io/v1alpha1/shards")
        .await;
    assert_eq!(elsewhere.status, 404, "{}", elsewhere.text());

    // The shard is full: the third waits, saying why.
    create_workspace(&kcp, "third").await;
    let waiting = kcp
        .wait_for_condition_status(
            &format!("{WORKSPACES}/third"),
            "WorkspaceScheduled",
            "False",
        )
        .await;
    assert_eq!(waiting["status"]["phase"], "Scheduling", "{waiting}");
    let condition = &waiting["status"]["conditions"][0];
    assert_eq!(condition["reason"], "Unschedulable", "{waiting}");
    let message = condition["message"].as_str().unwrap();
    assert!(
        message.contains("shard \"root\" is full (3 of 3"),
        "{message}"
    );

    // Room frees up: it is scheduled without anyone touching it.
    let deleted = kcp
        .send(
            Method::DELETE,
            &format!("{WORKSPACES}/first"),
            "application/json",
            "",
        )
        .await;
    assert!(deleted.status < 300, "{}", deleted.text());
    wait_ready(&kcp, "third").await;
    let scheduled = kcp.get(&format!("{WORKSPACES}/third")).await.json();
    assert_eq!(
        scheduled["status"]["conditions"][0]["status"], "True",
        "{scheduled}"
    );

    // The heartbeat moves on its own (every 30 s), not only when the capacity changes.
    wait_capacity(&kcp, 3).await;
    let settled_beat = ready_condition(&shard(&kcp).await)["lastHeartbeatTime"].clone();
    HEARTBEAT_PATIENCE
        .eventually("a newer heartbeat", || async {
            let beat = ready_condition(&shard(&kcp).await)["lastHeartbeatTime"].clone();
            if beat != settled_beat && beat != first_beat {
                Ok(())
            } else {
                Err(beat.to_string())
            }
        })
        .await;
}

/// Runs `kcp start` with `flags` in a fresh directory, expecting it to stop with an error.
async fn refused(label: &str, flags: &[String]) -> String {
    let dir = temp_dir(label);
    let mut args = vec![
        "start".to_owned(),
        format!("--root-directory={}", dir.path().join("root").display()),
        "--secure-port=0".to_owned(),
        "--bind-address=127.0.0.1".to_owned(),
    ];
    args.extend_from_slice(flags);
    let mut child = Command::new(binary())
        .args(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut status = None;
    for _ in 0..600 {
        status = child.try_wait().unwrap();
        if status.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let Some(status) = status else {
        let _ = child.kill();
        panic!("kcp start {args:?} did not stop");
    };
    assert!(!status.success(), "kcp start {args:?} was accepted");
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    stderr
}

#[tokio::test(flavor = "multi_thread")]
async fn a_non_root_shard_needs_the_root_and_cache_kubeconfigs() {
    let stderr = refused("shards-no-root", &["--shard-name=shard-1".to_owned()]).await;
    assert!(stderr.contains("--root-shard-kubeconfig-file"), "{stderr}");

    let dir = temp_dir("shards-kubeconfig");
    let kubeconfig = dir.path().join("root.kubeconfig");
    std::fs::write(&kubeconfig, "apiVersion: v1\nkind: Config\n").unwrap();
    let stderr = refused(
        "shards-no-cache",
        &[
            "--shard-name=shard-1".to_owned(),
            format!("--root-shard-kubeconfig-file={}", kubeconfig.display()),
        ],
    )
    .await;
    assert!(stderr.contains("--cache-kubeconfig"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_second_live_process_cannot_take_a_shard_name() {
    let etcd = EtcdProcess::start(false).await;
    let flags = etcd.kcp_flags();
    let first = KcpProcess::start(binary(), "shards-first", &flags).await;
    let holder =
        shard(&first).await["metadata"]["annotations"]["internal.core.kcp.io/shard-process"]
            .as_str()
            .unwrap()
            .to_owned();
    assert!(holder.contains(&format!("_{}_", first.pid())), "{holder}");

    let stderr = refused("shards-second", &flags).await;
    assert!(
        stderr.contains("shard \"root\" is registered by another live process"),
        "{stderr}"
    );
    // The first keeps its name.
    let after = shard(&first).await;
    assert_eq!(
        after["metadata"]["annotations"]["internal.core.kcp.io/shard-process"],
        holder
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_crashed_shard_restarted_on_its_directory_takes_its_name_back_at_once() {
    let mut root = KcpProcess::start(binary(), "shards-crash", &[]).await;
    let holder =
        shard(&root).await["metadata"]["annotations"]["internal.core.kcp.io/shard-process"].clone();
    // Killed with a fresh heartbeat: another directory's process would be refused for 90 s,
    // this one's restart is the same shard.
    root.kill();
    root.start_again().await;
    let after = shard(&root).await;
    assert_eq!(
        after["metadata"]["annotations"]["internal.core.kcp.io/shard-process"],
        holder
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_non_root_shard_registers_itself_in_the_root_shard() {
    let root = KcpProcess::start(binary(), "shards-registry-root", &[]).await;
    let root_kubeconfig = root.kubeconfig().display().to_string();
    let shard_1 = KcpProcess::start(
        binary(),
        "shards-shard-1",
        &[
            "--shard-name=shard-1".to_owned(),
            format!("--root-shard-kubeconfig-file={root_kubeconfig}"),
            format!("--cache-kubeconfig={root_kubeconfig}"),
            "--max-logical-clusters=10".to_owned(),
        ],
    )
    .await;
    let response = root
        .get("/clusters/root/apis/core.kcp.io/v1alpha1/shards/shard-1")
        .await;
    assert_eq!(response.status, 200, "{}", response.text());
    let registered = response.json();
    assert_eq!(registered["metadata"]["labels"]["name"], "shard-1");
    assert_eq!(registered["spec"]["baseURL"], shard_1.base_url());
    assert_eq!(ready_condition(&registered)["status"], "True");
    assert_eq!(
        registered["status"]["capacity"]["maxLogicalClusters"], 10,
        "{registered}"
    );
    let table = Kubectl::new("1.33", &root.kubeconfig()).ok(&["get", "shards", "-o", "name"]);
    assert_eq!(
        table.lines().collect::<Vec<_>>(),
        ["shard.core.kcp.io/root", "shard.core.kcp.io/shard-1"]
    );

    // Credentials the root shard does not accept are refused before serving.
    let mut anonymous = kcp_kubeconfig::Kubeconfig::read(&root.kubeconfig()).unwrap();
    for user in &mut anonymous.users {
        user.user = kcp_kubeconfig::User::default();
    }
    let dir = temp_dir("shards-anonymous");
    let anonymous_path = dir.path().join("anonymous.kubeconfig");
    anonymous.write(&anonymous_path).unwrap();
    let stderr = refused(
        "shards-wrong-kubeconfig",
        &[
            "--shard-name=shard-2".to_owned(),
            format!("--root-shard-kubeconfig-file={}", anonymous_path.display()),
            format!("--cache-kubeconfig={root_kubeconfig}"),
        ],
    )
    .await;
    assert!(
        stderr.contains("registering shard \"shard-2\": the root shard answered 40"),
        "{stderr}"
    );

    // A root kubeconfig naming a server nobody answers at: refused before serving, saying so.
    let mut nobody = kcp_kubeconfig::Kubeconfig::read(&root.kubeconfig()).unwrap();
    for cluster in &mut nobody.clusters {
        cluster.cluster.server = format!("https://127.0.0.1:{}", kcp_testing::free_port());
    }
    let nobody_path = dir.path().join("nobody.kubeconfig");
    nobody.write(&nobody_path).unwrap();
    let stderr = refused(
        "shards-root-unreachable",
        &[
            "--shard-name=shard-2".to_owned(),
            format!("--root-shard-kubeconfig-file={}", nobody_path.display()),
            format!("--cache-kubeconfig={root_kubeconfig}"),
        ],
    )
    .await;
    assert!(
        stderr.contains("registering shard \"shard-2\": "),
        "{stderr}"
    );

    // A second process under a name a live shard holds is refused, naming the name.
    let stderr = refused(
        "shards-duplicate-name",
        &[
            "--shard-name=shard-1".to_owned(),
            format!("--root-shard-kubeconfig-file={root_kubeconfig}"),
            format!("--cache-kubeconfig={root_kubeconfig}"),
        ],
    )
    .await;
    assert!(
        stderr.contains("shard \"shard-1\" is registered by another live process"),
        "{stderr}"
    );
}
