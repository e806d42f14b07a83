//! Two `kcp` replicas on one etcd with `--enable-leader-election`: both serve requests, exactly
//! one runs the controllers (it holds the `kcp-controllers` Lease in `system:admin`'s kube-system), and when
//! it stops the other takes the Lease over and workspaces keep becoming Ready.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Duration;

use kcp_testing::{EtcdProcess, KcpProcess, Patience};
use reqwest::Method;
use serde_json::{Value, json};

const LEASE: &str = "/clusters/system:admin/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kcp-controllers";
const WORKSPACES: &str = "/clusters/root/apis/tenancy.kcp.io/v1alpha1/workspaces";
const PATIENCE: Patience = Patience::new(Duration::from_secs(60), Duration::from_millis(200));

fn binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_kcp"))
}

async fn holder(kcp: &KcpProcess) -> Result<String, String> {
    let response = kcp.get(LEASE).await;
    if response.status != 200 {
        return Err(format!("{} {}", response.status, response.text()));
    }
    let lease: Value = response.json();
    lease["spec"]["holderIdentity"]
        .as_str()
        .filter(|h| !h.is_empty())
        .map(str::to_owned)
        .ok_or_else(|| lease.to_string())
}

async fn ready_workspace(kcp: &KcpProcess, name: &str) {
    let created = kcp
        .send_json(
            Method::POST,
            WORKSPACES,
            &json!({"metadata": {"name": name}}),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.text());
    kcp.wait_for(
        &format!("workspace {name} Ready"),
        &format!("{WORKSPACES}/{name}"),
        |r| r.status == 200 && r.json()["status"]["phase"] == "Ready",
    )
    .await;
}

#[tokio::test]
async fn one_replica_runs_the_controllers_and_another_takes_over() {
    let etcd = EtcdProcess::start(false).await;
    let mut flags = etcd.kcp_flags();
    flags.push("--enable-leader-election".to_owned());
    let mut first = KcpProcess::start(binary(), "election-a", &flags).await;
    let second = KcpProcess::start(binary(), "election-b", &flags).await;

    let leader = PATIENCE.eventually("a leader", || holder(&first)).await;
    let first_leads = leader.contains(&format!("_{}_", first.pid()));
    let second_leads = leader.contains(&format!("_{}_", second.pid()));
    assert!(
        first_leads != second_leads,
        "exactly one replica holds the lease: {leader}"
    );
    // Either replica serves; the leader's controllers make the workspace Ready.
    ready_workspace(&second, "elected-one").await;

    // Stop the first replica (leader or not); the second must lead afterwards.
    first.stop_cleanly().await;
    let survivor = format!("_{}_", second.pid());
    PATIENCE
        .eventually("the second replica leads", || async {
            let now = holder(&second).await?;
            if now.contains(&survivor) {
                Ok(())
            } else {
                Err(now)
            }
        })
        .await;
    ready_workspace(&second, "elected-two").await;
}

const OLDER_LEASE: &str =
    "/clusters/root/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kcp-controllers";

/// The Lease older releases kept in `root`, as such a replica leading now writes it (`holder`,
/// renewed now for `seconds`).
fn older_lease(holder: &str, seconds: u64) -> Value {
    json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "kcp-controllers", "namespace": "kube-system"},
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": seconds,
            "renewTime": kcp_apimachinery::time::now_micro_rfc3339()},
    })
}

/// `renewTime` of the replicas' Lease in `system:admin`.
async fn renewed(kcp: &KcpProcess) -> Result<String, String> {
    let lease: Value = kcp.get(LEASE).await.json();
    lease["spec"]["renewTime"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| lease.to_string())
}

/// Waits until the replica has renewed its Lease twice: it has read the older Lease in between.
async fn two_renewals(kcp: &KcpProcess) {
    for _ in 0..2 {
        let before = renewed(kcp).await;
        PATIENCE
            .eventually("the Lease renewed", || async {
                let now = renewed(kcp).await?;
                if Ok(&now) != before.as_ref() {
                    Ok(())
                } else {
                    Err(now)
                }
            })
            .await;
    }
}

#[tokio::test]
async fn a_replica_defers_to_an_older_release_leading_in_root_and_fences_it_out() {
    let etcd = EtcdProcess::start(false).await;
    let mut flags = etcd.kcp_flags();
    flags.push("--enable-leader-election".to_owned());
    let kcp = KcpProcess::start(binary(), "election-older", &flags).await;
    let identity = PATIENCE.eventually("a leader", || holder(&kcp)).await;

    // An older replica (a release that kept the Lease in root) leads: this one stops its
    // controllers and leaves that Lease alone.
    let namespace = kcp
        .send_json(
            Method::POST,
            "/clusters/root/api/v1/namespaces",
            &json!({"metadata": {"name": "kube-system"}}),
        )
        .await;
    assert!(
        matches!(namespace.status, 201 | 409),
        "{}",
        namespace.text()
    );
    let created = kcp
        .send_json(
            Method::POST,
            "/clusters/root/apis/coordination.k8s.io/v1/namespaces/kube-system/leases",
            &older_lease("kcp-1.0-older", 3600),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.text());
    two_renewals(&kcp).await;
    let workspace = kcp
        .send_json(
            Method::POST,
            WORKSPACES,
            &json!({"metadata": {"name": "while-older-leads"}}),
        )
        .await;
    assert_eq!(workspace.status, 201, "{}", workspace.text());
    two_renewals(&kcp).await;
    let older: Value = kcp.get(OLDER_LEASE).await.json();
    assert_eq!(older["spec"]["holderIdentity"], "kcp-1.0-older", "{older}");
    let waiting: Value = kcp
        .get(&format!("{WORKSPACES}/while-older-leads"))
        .await
        .json();
    assert_ne!(
        waiting["status"]["phase"], "Ready",
        "no controllers run while the older replica leads: {waiting}"
    );

    // The older replica stops (its Lease released): this one takes both and leads.
    let mut released = older.clone();
    released["spec"]["holderIdentity"] = json!("");
    released["spec"]["renewTime"] = json!("1970-01-01T00:00:00.000000Z");
    let update = kcp.send_json(Method::PUT, OLDER_LEASE, &released).await;
    assert_eq!(update.status, 200, "{}", update.text());
    PATIENCE
        .eventually("this replica holds the older Lease too", || async {
            let older: Value = kcp.get(OLDER_LEASE).await.json();
            if older["spec"]["holderIdentity"] == identity.as_str() {
                Ok(())
            } else {
                Err(older["spec"].to_string())
            }
        })
        .await;
    kcp.wait_for(
        "workspace while-older-leads Ready",
        &format!("{WORKSPACES}/while-older-leads"),
        |r| r.status == 200 && r.json()["status"]["phase"] == "Ready",
    )
    .await;
}
