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
