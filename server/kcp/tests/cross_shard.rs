//! Scheduling and paths across shards (issue 19, parts 3 and 4), with real processes: a root
//! shard and a second shard (`shard-1`) that share one serving CA and one client CA (placed in
//! their root directories before they start, so one admin credential works on both), each with
//! `--logical-cluster-admin-kubeconfig` and `--shard-external-url`.
//!
//! Workspaces created in root land on the shard with most headroom or the one their
//! `spec.location.selector` picks, become Ready, carry that shard's URL, and hold objects
//! created through the owning shard; root answers 429 with `Retry-After: 1` for a path whose
//! logical cluster is on shard-1, 404 for an unknown one. A workspace nested in one on shard-1
//! is scheduled by shard-1 to root, and deleting its parent deletes it across both shards. Every shard full leaves a workspace
//! `WorkspaceScheduled=False` naming them. Deleting a workspace whose logical cluster is on
//! shard-1 completes. A workspace created while its target shard is down (killed) converges to
//! Ready with exactly one LogicalCluster once the shard is back, and a WorkspaceType created in
//! root meanwhile reaches it through the cache (read back after its restart). A shard that refuses the
//! scheduler's credentials is named on the Workspace.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use kcp_testing::identities::{
    CertificateAuthority, KubeconfigUser, self_signed_ca_pem, write_kubeconfig,
};
use kcp_testing::{Caller, KcpProcess, Patience, free_port, temp_dir};
use reqwest::Method;
use serde_json::{Value, json};
use tempfile::TempDir;

const WORKSPACES: &str = "/clusters/root/apis/tenancy.kcp.io/v1alpha1/workspaces";
const LOGICAL_CLUSTERS: &str = "apis/core.kcp.io/v1alpha1/logicalclusters";
const PATIENCE: Patience = Patience::new(Duration::from_secs(60), Duration::from_millis(200));

fn binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_kcp"))
}

/// A serving CA and a client CA every shard reuses, and the logical-cluster-admin kubeconfig
/// (a client certificate of that client CA in upstream's `system:kcp:logical-cluster-admin`
/// group, trusting that serving CA).
struct SharedPki {
    dir: TempDir,
}

const CA_FILES: [&str; 4] = ["ca.crt", "ca.key", "client-ca.crt", "client-ca.key"];

impl SharedPki {
    fn generate() -> SharedPki {
        SharedPki::with_scheduler_groups(&["system:kcp:logical-cluster-admin"])
    }

    /// A PKI whose logical-cluster-admin is in `groups`.
    fn with_scheduler_groups(groups: &[&str]) -> SharedPki {
        let dir = temp_dir("cross-shard-pki");
        let (server_ca, server_key) = self_signed_ca_pem("kcp-server-ca");
        let (client_ca, client_key) = self_signed_ca_pem("kcp-client-ca");
        for (name, pem) in CA_FILES
            .iter()
            .zip([&server_ca, &server_key, &client_ca, &client_key])
        {
            std::fs::write(dir.path().join(name), pem).unwrap();
        }
        let clients = CertificateAuthority::read(
            &dir.path().join("client-ca.crt"),
            &dir.path().join("client-ca.key"),
        );
        let admin = clients.client("logical-cluster-admin", groups);
        // The server is not used: each shard is reached at its Shard's baseURL.
        write_kubeconfig(
            &dir.path().join("logical-cluster-admin.kubeconfig"),
            "https://127.0.0.1:1",
            server_ca.as_bytes(),
            KubeconfigUser::Certificate(&admin),
        );
        SharedPki { dir }
    }

    fn admin_kubeconfig(&self) -> PathBuf {
        self.dir.path().join("logical-cluster-admin.kubeconfig")
    }

    /// Places the CAs in a shard's root directory before it starts.
    fn seed(&self, root: &Path) {
        for name in CA_FILES {
            std::fs::copy(self.dir.path().join(name), root.join(name)).unwrap();
        }
    }

    /// Starts a shard on a port of its own (its external URL names it) with `flags`.
    async fn start(&self, label: &str, flags: &[String]) -> KcpProcess {
        let port = free_port();
        let mut all = vec![
            format!("--secure-port={port}"),
            format!("--shard-external-url=https://127.0.0.1:{port}"),
            format!(
                "--logical-cluster-admin-kubeconfig={}",
                self.admin_kubeconfig().display()
            ),
        ];
        all.extend_from_slice(flags);
        KcpProcess::start_prepared(binary(), label, &all, |root| self.seed(root)).await
    }

    /// A second shard named `name` that registers in `root`.
    async fn start_shard(
        &self,
        label: &str,
        name: &str,
        root: &KcpProcess,
        flags: &[&str],
    ) -> KcpProcess {
        let root_kubeconfig = root.kubeconfig().display().to_string();
        let mut all = vec![
            format!("--shard-name={name}"),
            format!("--root-shard-kubeconfig-file={root_kubeconfig}"),
            format!("--cache-kubeconfig={root_kubeconfig}"),
        ];
        all.extend(flags.iter().map(|f| f.to_string()));
        self.start(label, &all).await
    }
}

/// The `--shard-external-url` [`SharedPki::start`] gave `kcp` (its kubeconfig says `localhost`).
fn external_url(kcp: &KcpProcess) -> String {
    kcp.base_url().replace("://localhost:", "://127.0.0.1:")
}

async fn create_workspace(kcp: &KcpProcess, name: &str, selector: Option<Value>) {
    let mut body = json!({"metadata": {"name": name}});
    if let Some(selector) = selector {
        body["spec"] = json!({"location": {"selector": selector}});
    }
    let created = kcp.send_json(Method::POST, WORKSPACES, &body).await;
    assert_eq!(created.status, 201, "{}", created.text());
}

fn on_shard(shard: &str) -> Option<Value> {
    Some(json!({"matchLabels": {"name": shard}}))
}

async fn wait_ready(kcp: &KcpProcess, name: &str) -> Value {
    kcp.wait_for(
        &format!("workspace {name} Ready"),
        &format!("{WORKSPACES}/{name}"),
        |r| r.status == 200 && r.json()["status"]["phase"] == "Ready",
    )
    .await
    .json()
}

/// Waits until root's `Shard` named `shard` reports `count` logical clusters.
async fn wait_capacity(root: &KcpProcess, shard: &str, count: u64) {
    let path = format!("/clusters/root/apis/core.kcp.io/v1alpha1/shards/{shard}");
    PATIENCE
        .eventually(&format!("{shard} holds {count}"), || async {
            let object = root.get(&path).await.json();
            if object["status"]["capacity"]["logicalClusters"] == count {
                Ok(())
            } else {
                Err(object["status"].to_string())
            }
        })
        .await
}

async fn create_config_map(kcp: &KcpProcess, path: &str, name: &str) {
    let created = kcp
        .send_json(
            Method::POST,
            &format!("/clusters/{path}/api/v1/namespaces/default/configmaps"),
            &json!({"metadata": {"name": name}, "data": {"on": path}}),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.text());
}

/// The LogicalClusters of `kcp` that a workspace named `owner` owns.
async fn owned_logical_clusters(kcp: &KcpProcess, owner: &str) -> Vec<Value> {
    let list = kcp.get(&format!("/clusters/*/{LOGICAL_CLUSTERS}")).await;
    assert_eq!(list.status, 200, "{}", list.text());
    list.json()["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|lc| lc["spec"]["owner"]["name"] == owner)
        .cloned()
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn workspaces_are_placed_on_both_shards_and_reached_through_their_own() {
    let pki = SharedPki::generate();
    // A limit on root leaves shard-1 (unlimited) the most headroom.
    let root = pki
        .start(
            "cross-shard-root",
            &["--max-logical-clusters=100".to_owned()],
        )
        .await;
    let shard_1 = pki
        .start_shard("cross-shard-1", "shard-1", &root, &[])
        .await;

    // Pinned by its selector to shard-1, which root's list of shards may not show yet: it
    // waits until it does.
    create_workspace(&root, "pinned", on_shard("shard-1")).await;
    let pinned = wait_ready(&root, "pinned").await;
    assert_eq!(
        pinned["spec"]["URL"],
        format!("{}/clusters/root:pinned", external_url(&shard_1))
    );
    create_workspace(&root, "roomy", None).await;
    create_workspace(&root, "picked", on_shard("root")).await;
    let roomy = wait_ready(&root, "roomy").await;
    let picked = wait_ready(&root, "picked").await;
    assert_eq!(
        roomy["metadata"]["annotations"]["core.kcp.io/shard"], "shard-1",
        "{roomy}"
    );
    assert_eq!(
        roomy["spec"]["URL"],
        format!("{}/clusters/root:roomy", external_url(&shard_1))
    );
    assert_eq!(
        picked["metadata"]["annotations"]["core.kcp.io/shard"], "root",
        "{picked}"
    );
    assert_eq!(
        picked["spec"]["URL"],
        format!("{}/clusters/root:picked", external_url(&root))
    );
    // The LogicalCluster on shard-1 carries what root resolved: type, path, owner.
    let remote = owned_logical_clusters(&shard_1, "roomy").await;
    assert_eq!(remote.len(), 1, "{remote:?}");
    let remote = &remote[0];
    assert_eq!(
        remote["metadata"]["annotations"]["kcp.io/path"],
        "root:roomy"
    );
    assert_eq!(
        remote["metadata"]["annotations"]["kcp.io/cluster"],
        roomy["spec"]["cluster"]
    );
    assert_eq!(remote["spec"]["owner"]["uid"], roomy["metadata"]["uid"]);
    assert_eq!(remote["status"]["phase"], "Ready");
    assert!(owned_logical_clusters(&root, "roomy").await.is_empty());

    // Each workspace takes objects through the shard that owns it.
    create_config_map(&shard_1, "root:roomy", "here").await;
    create_config_map(&root, "root:picked", "here").await;
    let read = shard_1
        .get("/clusters/root:roomy/api/v1/namespaces/default/configmaps/here")
        .await;
    assert_eq!(read.status, 200, "{}", read.text());

    // Root knows the Workspace but not its logical cluster: 429, as upstream.
    let elsewhere = root
        .get("/clusters/root:roomy/api/v1/namespaces/default/configmaps")
        .await;
    assert_eq!(elsewhere.status, 429, "{}", elsewhere.text());
    assert_eq!(elsewhere.text(), "Not found on this shard\n");
    let retry = root
        .admin()
        .client()
        .get(root.url("/clusters/root:roomy/api/v1/namespaces"))
        .send()
        .await
        .unwrap();
    assert_eq!(retry.status(), 429);
    assert_eq!(retry.headers()["retry-after"], "1");
    // Unknown paths, and paths below a workspace of another shard, stay 404.
    for path in ["root:nowhere", "root:roomy:below", "root:nowhere:below"] {
        let missing = root
            .get(&format!("/clusters/{path}/api/v1/namespaces"))
            .await;
        assert_eq!(missing.status, 404, "{path}: {}", missing.text());
    }
    let unknown_there = shard_1.get("/clusters/root:picked/api/v1/namespaces").await;
    assert_eq!(unknown_there.status, 404, "{}", unknown_there.text());

    // A workspace nested in roomy, created through shard-1 (which owns roomy) and pinned to
    // root: shard-1 schedules it to root, each shard serves the path it owns.
    let nested = "/clusters/root:roomy/apis/tenancy.kcp.io/v1alpha1/workspaces";
    let created = shard_1
        .send_json(
            Method::POST,
            nested,
            &json!({"metadata": {"name": "child"},
                "spec": {"location": {"selector": {"matchLabels": {"name": "root"}}}}}),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.text());
    let child = shard_1
        .wait_for("child Ready", &format!("{nested}/child"), |r| {
            r.status == 200 && r.json()["status"]["phase"] == "Ready"
        })
        .await
        .json();
    assert_eq!(
        child["spec"]["URL"],
        format!("{}/clusters/root:roomy:child", external_url(&root))
    );
    create_config_map(&root, "root:roomy:child", "deep").await;
    let elsewhere = shard_1
        .get("/clusters/root:roomy:child/api/v1/namespaces")
        .await;
    assert_eq!(elsewhere.status, 429, "{}", elsewhere.text());
    assert_eq!(owned_logical_clusters(&root, "child").await.len(), 1);

    // Deleting a workspace whose logical cluster is on shard-1 completes there and here, the
    // child on root included.
    let deleted = root
        .send(
            Method::DELETE,
            &format!("{WORKSPACES}/roomy"),
            "application/json",
            "",
        )
        .await;
    assert!(deleted.status < 300, "{}", deleted.text());
    root.wait_for("roomy gone", &format!("{WORKSPACES}/roomy"), |r| {
        r.status == 404
    })
    .await;
    assert!(owned_logical_clusters(&shard_1, "roomy").await.is_empty());
    PATIENCE
        .eventually("child's LogicalCluster gone from root", || async {
            let left = owned_logical_clusters(&root, "child").await;
            if left.is_empty() {
                Ok(())
            } else {
                Err(format!("{left:?}"))
            }
        })
        .await;
    let gone = shard_1
        .get("/clusters/root:roomy/api/v1/namespaces/default/configmaps/here")
        .await;
    assert_eq!(gone.status, 404, "{}", gone.text());
    let after = root.get("/clusters/root:roomy/api/v1/namespaces").await;
    assert_eq!(after.status, 404, "{}", after.text());
}

#[tokio::test(flavor = "multi_thread")]
async fn every_shard_full_leaves_the_workspace_unscheduled_saying_why() {
    let pki = SharedPki::generate();
    // Room for one workspace on each shard: the root shard also holds root, shard-1 holds no
    // root (only the root shard does).
    let root = pki
        .start(
            "cross-shard-full-root",
            &["--max-logical-clusters=2".to_owned()],
        )
        .await;
    let shard_1 = pki
        .start_shard(
            "cross-shard-full-1",
            "shard-1",
            &root,
            &["--max-logical-clusters=1"],
        )
        .await;
    wait_capacity(&root, "shard-1", 0).await;
    create_workspace(&root, "first", None).await;
    wait_ready(&root, "first").await;
    create_workspace(&root, "second", None).await;
    let second = wait_ready(&root, "second").await;
    let first = root.get(&format!("{WORKSPACES}/first")).await.json();
    // The one with more room took each: one per shard.
    let shards = [&first, &second].map(|w| {
        w["metadata"]["annotations"]["core.kcp.io/shard"]
            .as_str()
            .unwrap()
            .to_owned()
    });
    assert_ne!(shards[0], shards[1], "{first}\n{second}");
    wait_capacity(&root, "root", 2).await;
    wait_capacity(&root, "shard-1", 1).await;

    create_workspace(&root, "third", None).await;
    let third = format!("{WORKSPACES}/third");
    let waiting = root
        .wait_for_condition_status(&third, "WorkspaceScheduled", "False")
        .await;
    let condition = &waiting["status"]["conditions"][0];
    assert_eq!(
        (&waiting["status"]["phase"], &condition["reason"]),
        (&json!("Scheduling"), &json!("Unschedulable")),
        "{waiting}"
    );
    let message = condition["message"].as_str().unwrap();
    assert!(message.starts_with("no shard has room: "), "{message}");
    // Placements of the last seconds count against a shard until its capacity shows them; the
    // message settles on the shards' own counts.
    root.wait_for("the message names both full shards", &third, |r| {
        let message = r.json()["status"]["conditions"][0]["message"].clone();
        let message = message.as_str().unwrap_or_default();
        message.contains("shard \"root\" is full (2 of 2 logical clusters, ")
            && message.contains("shard \"shard-1\" is full (1 of 1 logical clusters, ")
    })
    .await;

    // A full shard refuses a new LogicalCluster from another shard's scheduler (one whose view
    // of its capacity had not caught up) with 429; an existing one is still a conflict, so a
    // retry learns it exists.
    let refused = shard_1
        .send_json(
            Method::POST,
            &format!("/clusters/latecomer/{LOGICAL_CLUSTERS}"),
            &json!({"metadata": {"name": "cluster"}}),
        )
        .await;
    assert_eq!(refused.status, 429, "{}", refused.text());
    assert!(
        refused.json()["message"]
            .as_str()
            .unwrap()
            .contains("this shard is full (1 of 1 logical clusters"),
        "{}",
        refused.text()
    );
    let placed = owned_logical_clusters(&shard_1, "first")
        .await
        .into_iter()
        .chain(owned_logical_clusters(&shard_1, "second").await)
        .next()
        .unwrap();
    let existing = placed["metadata"]["annotations"]["kcp.io/cluster"]
        .as_str()
        .unwrap();
    let again = shard_1
        .send_json(
            Method::POST,
            &format!("/clusters/{existing}/{LOGICAL_CLUSTERS}"),
            &json!({"metadata": {"name": "cluster"}}),
        )
        .await;
    assert_eq!(again.status, 409, "{}", again.text());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_workspace_scheduled_to_a_shard_that_is_down_converges_when_it_returns() {
    let pki = SharedPki::generate();
    let root = pki.start("cross-shard-crash-root", &[]).await;
    // Under a Lease the shard keeps its identity across a crash, so it may take its name back
    // at once (a new process identity would wait for the old heartbeat to go stale).
    let mut shard_1 = pki
        .start_shard(
            "cross-shard-crash-1",
            "shard-1",
            &root,
            &["--enable-leader-election"],
        )
        .await;
    create_workspace(&root, "warmup", on_shard("shard-1")).await;
    wait_ready(&root, "warmup").await;

    // Down before the workspace comes (its heartbeat is still fresh, so it is chosen), and
    // before a WorkspaceType created in root, which reaches shard-1 through the cache after.
    shard_1.kill();
    create_workspace(&root, "patient", on_shard("shard-1")).await;
    let late = json!({"apiVersion": "tenancy.kcp.io/v1alpha1", "kind": "WorkspaceType",
        "metadata": {"name": "late"},
        "spec": {"extend": {"with": [{"name": "universal", "path": "root"}]}}});
    let created = root
        .send_json(
            Method::POST,
            "/clusters/root/apis/tenancy.kcp.io/v1alpha1/workspacetypes",
            &late,
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.text());
    let recorded = root
        .wait_for(
            "the choice recorded",
            &format!("{WORKSPACES}/patient"),
            |r| {
                r.status == 200
                    && r.json()["metadata"]["annotations"]["internal.tenancy.kcp.io/cluster"]
                        .is_string()
            },
        )
        .await
        .json();
    assert_eq!(
        recorded["metadata"]["annotations"]["core.kcp.io/shard"],
        "shard-1"
    );
    assert_eq!(recorded["status"]["phase"], "Scheduling", "{recorded}");
    assert!(recorded["spec"]["cluster"].is_null(), "{recorded}");

    shard_1.start_again().await;
    let ready = wait_ready(&root, "patient").await;
    assert_eq!(
        ready["spec"]["cluster"],
        recorded["metadata"]["annotations"]["internal.tenancy.kcp.io/cluster"]
    );
    let created = owned_logical_clusters(&shard_1, "patient").await;
    assert_eq!(created.len(), 1, "{created:?}");
    create_config_map(&shard_1, "root:patient", "after").await;

    let of_type_late = json!({"metadata": {"name": "late-child"},
        "spec": {"type": {"name": "late", "path": "root"}}});
    PATIENCE
        .wait_created(
            "root:late usable on shard-1",
            &Caller::admin(&shard_1),
            "/clusters/root:warmup/apis/tenancy.kcp.io/v1alpha1/workspaces",
            &of_type_late,
        )
        .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_shard_refusing_the_scheduler_is_named_on_the_workspace() {
    // The scheduler's credentials are signed by the right CA but in no privileged group.
    let pki = SharedPki::with_scheduler_groups(&[]);
    let root = pki.start("cross-shard-refused-root", &[]).await;
    let _shard_1 = pki
        .start_shard("cross-shard-refused-1", "shard-1", &root, &[])
        .await;
    create_workspace(&root, "refused", on_shard("shard-1")).await;
    let path = format!("{WORKSPACES}/refused");
    let waiting = root
        .wait_for("the refusal on the workspace", &path, |r| {
            r.json()["status"]["conditions"][0]["message"]
                .as_str()
                .is_some_and(|m| m.contains("refused"))
        })
        .await
        .json();
    let condition = &waiting["status"]["conditions"][0];
    assert_eq!(
        (
            &condition["type"],
            &condition["status"],
            &waiting["status"]["phase"]
        ),
        (
            &json!("WorkspaceScheduled"),
            &json!("False"),
            &json!("Scheduling")
        ),
        "{waiting}"
    );
    let message = condition["message"].as_str().unwrap();
    assert!(
        message.starts_with("shard \"shard-1\" refused the LogicalCluster: shard https://")
            && message.contains("answered 403"),
        "{message}"
    );
    // Workspaces this shard takes itself do not need those credentials.
    create_workspace(&root, "local", on_shard("root")).await;
    wait_ready(&root, "local").await;
}
