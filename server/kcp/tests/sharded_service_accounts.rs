//! A service-account token of a workspace on one shard, used at every door of a sharded kcp
//! (`kcp sharded` with root, shard-1, its cache server and the front-proxy): at shard-1, which
//! holds the workspace; at the root shard directly, which does not and looks the service account
//! up through the front-proxy (`--external-logical-cluster-admin-kubeconfig`, as upstream's
//! shards do); and through the proxy. Each door sees the same user, groups and extra. Once the
//! ServiceAccount is deleted, the token is refused at every door (polled: the lookups' kept
//! answers expire within seconds).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Duration;

use kcp_testing::{Caller, Patience, ShardedKcp};
use serde_json::{Value, json};

const PATIENCE: Patience = Patience::new(Duration::from_secs(90), Duration::from_millis(500));
const WORKSPACE: &str = "robots";

fn binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_kcp"))
}

/// `status.userInfo` of a SelfSubjectReview `caller` makes in `cluster` without its `uid` (the
/// proxy vouches with user, groups and extra only, as upstream's), or the status code.
async fn who(caller: &Caller, cluster: &str) -> Result<Value, u16> {
    let answer = caller.whoami_in(cluster).await;
    match answer.status {
        201 => {
            let mut user = answer.json()["status"]["userInfo"].clone();
            if let Some(fields) = user.as_object_mut() {
                fields.remove("uid");
            }
            Ok(user)
        }
        code => Err(code),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_service_account_token_is_the_same_user_at_every_shard_and_through_the_proxy() {
    let sharded = ShardedKcp::start(binary(), "sa-tokens", 2, &[]).await;
    let proxy = sharded.front_proxy();
    let admin = Caller::admin_of(&proxy);

    // A workspace pinned on shard-1.
    admin
        .create(
            "/clusters/root/apis/tenancy.kcp.io/v1alpha1/workspaces",
            &json!({"apiVersion": "tenancy.kcp.io/v1alpha1", "kind": "Workspace",
                "metadata": {"name": WORKSPACE},
                "spec": {"location": {"selector": {"matchLabels": {"name": "shard-1"}}}}}),
        )
        .await;
    let path = format!("root:{WORKSPACE}");
    PATIENCE
        .eventually("the workspace on shard-1 is ready", || async {
            let answer = admin
                .get(&format!(
                    "/clusters/root/apis/tenancy.kcp.io/v1alpha1/workspaces/{WORKSPACE}"
                ))
                .await;
            let phase = answer.json()["status"]["phase"].clone();
            (phase == "Ready")
                .then_some(())
                .ok_or_else(|| answer.text())
        })
        .await;
    let at_shard_1 = Caller::admin_of(&sharded.admin("shard-1"));
    let held = at_shard_1
        .get(&format!("/clusters/{path}/api/v1/namespaces/default"))
        .await;
    assert_eq!(held.status, 200, "shard-1 holds {path}: {}", held.text());

    let token = admin.service_account_token(&path, "robot").await;
    let accounts = format!("/clusters/{path}/api/v1/namespaces/default/serviceaccounts");

    let door = |credentials: kcp_testing::AdminCredentials, name: &str| {
        Caller::at(&credentials.server, credentials.anonymous_client(), name).bearer(&token)
    };
    let through_proxy = door(proxy.clone(), "robot via the proxy");
    let at_root = door(sharded.admin("root"), "robot at root");
    let at_holder = door(sharded.admin("shard-1"), "robot at shard-1");

    // In its own workspace (shard-1 directly and through the proxy), and in root (the root
    // shard directly, which does not hold the token's workspace, and through the proxy).
    let seen = [
        who(&at_holder, &path).await,
        who(&through_proxy, &path).await,
        who(&at_root, "root").await,
        who(&through_proxy, "root").await,
    ];
    let first = seen[0].clone().expect("the token works at shard-1");
    assert_eq!(
        first["username"], "system:serviceaccount:default:robot",
        "{first}"
    );
    for (door, user) in [
        "shard-1 in its workspace",
        "the proxy in its workspace",
        "root directly",
        "the proxy in root",
    ]
    .iter()
    .zip(&seen)
    {
        assert_eq!(user.as_ref(), Ok(&first), "at {door}");
    }

    let deleted = admin.delete(&format!("{accounts}/robot")).await;
    assert_eq!(deleted.status, 200, "{}", deleted.text());
    PATIENCE
        .eventually(
            "the deleted service account's token is refused at every door",
            || async {
                let codes = [
                    who(&at_holder, &path).await.err(),
                    who(&through_proxy, &path).await.err(),
                    who(&at_root, "root").await.err(),
                ];
                (codes == [Some(401); 3])
                    .then_some(())
                    .ok_or_else(|| format!("{codes:?}"))
            },
        )
        .await;
}
