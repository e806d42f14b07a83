//! A sharded kcp used only through its front-proxy (issue 20's topology test): `kcp sharded`
//! with root, shard-1, shard-2, its cache server and the front-proxy, driven through the
//! `front-proxy` context of its admin kubeconfig (current, user `kcp-admin` in
//! `system:kcp:admin`), as users of a managed kcp drive it:
//!
//! - kubectl 1.27 and 1.33 with the `kubectl ws` plugin do the workspace workflow across the
//!   shards: a workspace pinned on every shard (each found owned by that shard, asking the shards
//!   directly), entered with `kubectl ws use`, objects created and read back in each, a workspace
//!   nested in one on shard-2, `kubectl ws tree` showing them all; workspace URLs name the proxy;
//! - watches through the proxy stay open while all that happens: kubectl's watch of root's
//!   workspaces sees every workspace created on every shard, and a watch of ConfigMaps in a
//!   workspace on shard-2 sees each one created there;
//! - the topology's `system:masters` certificate is admin at a shard directly and nobody through
//!   the proxy (the group is dropped); a path that does not exist and a workspace a user may not
//!   enter both answer 403 through the proxy, never 404.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Duration;

use kcp_testing::identities::CertificateAuthority;
use kcp_testing::plugins::plugin_dir;
use kcp_testing::{AdminCredentials, Caller, Kubectl, Patience, ShardedKcp};
use serde_json::json;

const PATIENCE: Patience = Patience::new(Duration::from_secs(60), Duration::from_millis(200));
const SHARDS: [&str; 3] = ["root", "shard-1", "shard-2"];
const SETTLED_WITHIN: Duration = Duration::from_secs(60);

fn binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_kcp"))
}

/// A Workspace manifest pinned on `shard` by its `name` label.
fn pinned_manifest(name: &str, shard: &str) -> String {
    format!(
        "apiVersion: tenancy.kcp.io/v1alpha1\nkind: Workspace\nmetadata:\n  name: {name}\n\
         spec:\n  location:\n    selector:\n      matchLabels:\n        name: {shard}\n"
    )
}

/// The shard whose own API serves `path` (the others answer 429 for it), asked directly.
async fn owner(sharded: &ShardedKcp, path: &str) -> String {
    PATIENCE
        .eventually(&format!("the owner of {path}"), || async {
            let mut owners = Vec::new();
            for shard in SHARDS {
                let answer = Caller::admin_of(&sharded.admin(shard))
                    .get(&format!("/clusters/{path}/api/v1/namespaces/default"))
                    .await;
                if answer.status == 200 {
                    owners.push(shard);
                }
            }
            match owners.as_slice() {
                [one] => Ok(one.to_string()),
                other => Err(format!("served by {other:?}")),
            }
        })
        .await
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sharded_kcp_through_its_front_proxy_only() {
    let sharded = ShardedKcp::start(binary(), "front-proxy", 3, &[]).await;
    let proxy = sharded.front_proxy();
    let plugins = plugin_dir(binary());

    let plain = Kubectl::new("1.33", &sharded.kubeconfig());
    assert_eq!(
        plain.ok(&["config", "current-context"]).trim(),
        "front-proxy"
    );
    // Shards are listed through the proxy (root's RBAC makes kcp-admin an admin).
    let shards = plain.ok(&["get", "shards", "-o", "name"]);
    for shard in SHARDS {
        assert!(
            shards.contains(&format!("shard.core.kcp.io/{shard}")),
            "{shards}"
        );
    }
    // Open for the whole run: every workspace created in root, whichever shard it lands on.
    let mut root_watch = plain.background(&["get", "workspaces", "-w", "-o", "name"]);

    for version in ["1.33", "1.27"] {
        let kubectl = Kubectl::with_plugins(version, &sharded.kubeconfig(), &plugins);
        let v = version.replace('.', "-");
        let mut on_shard = Vec::new();
        for shard in SHARDS {
            let name = format!("v{v}-on-{shard}");
            let file = kubectl.home().join(format!("{name}.yaml"));
            std::fs::write(&file, pinned_manifest(&name, shard)).unwrap();
            kubectl.ok(&["create", "-f", file.to_str().unwrap()]);
            on_shard.push((name, shard));
        }
        for (name, shard) in &on_shard {
            kubectl.wait_for_output(
                &["get", "workspace", name, "-o", "jsonpath={.status.phase}"],
                "Ready",
                SETTLED_WITHIN,
            );
            assert_eq!(owner(&sharded, &format!("root:{name}")).await, *shard);
            let url = kubectl.ok(&["get", "workspace", name, "-o", "jsonpath={.spec.URL}"]);
            assert_eq!(
                url.trim(),
                format!("{}/clusters/root:{name}", proxy.server),
                "kubectl {version}: workspace URLs name the proxy"
            );
            root_watch.wait_for_line(name, |line| {
                line.trim() == format!("workspace.tenancy.kcp.io/{name}")
            });
        }

        // A watch of ConfigMaps in the workspace on shard-2, through the proxy.
        let (on_2, _) = &on_shard[2];
        let mut configmaps = plain.background(&[
            "--server",
            &format!("{}/clusters/root:{on_2}", proxy.server),
            "get",
            "configmaps",
            "-n",
            "default",
            "-w",
            "-o",
            "name",
        ]);

        // Each workspace entered with the plugin holds its own objects.
        for (name, shard) in &on_shard {
            let out = kubectl.ok(&["ws", "use", &format!(":root:{name}")]);
            assert!(
                out.contains(&format!("Current workspace is 'root:{name}'")),
                "kubectl {version} ws use: {out}"
            );
            kubectl.ok(&[
                "create",
                "configmap",
                &format!("on-{shard}"),
                "-n",
                "default",
                &format!("--from-literal=shard={shard}"),
            ]);
            let listed = kubectl.ok(&["get", "configmaps", "-n", "default", "-o", "name"]);
            let ours: Vec<&str> = listed
                .lines()
                .filter(|line| line.starts_with("configmap/on-"))
                .collect();
            assert_eq!(
                ours,
                [format!("configmap/on-{shard}")],
                "kubectl {version}: the ConfigMaps of root:{name}"
            );
        }
        configmaps.wait_for_line("on-shard-2", |line| line.trim() == "configmap/on-shard-2");

        // A workspace nested in the one on shard-2, created and entered with the plugin.
        kubectl.ok(&["ws", "use", &format!(":root:{on_2}")]);
        let out = kubectl.ok(&["ws", "create", "nested", "--enter"]);
        assert!(
            out.contains(&format!("Current workspace is 'root:{on_2}:nested'")),
            "kubectl {version} ws create nested --enter: {out}"
        );
        kubectl.ok(&["create", "configmap", "deep", "-n", "default"]);
        kubectl.ok(&["get", "configmap", "deep", "-n", "default"]);
        owner(&sharded, &format!("root:{on_2}:nested")).await;

        kubectl.ok(&["ws", ":root"]);
        let tree = kubectl.ok(&["ws", "tree"]);
        for (name, _) in &on_shard {
            assert!(
                tree.contains(name.as_str()),
                "kubectl {version} ws tree:\n{tree}"
            );
        }
        assert!(
            tree.contains("nested"),
            "kubectl {version} ws tree:\n{tree}"
        );
    }

    // system:masters is dropped at the proxy: the shard-admin certificate is nobody there.
    let masters = sharded.admin("root");
    let direct = Caller::admin_of(&masters);
    assert_eq!(
        direct.get("/clusters/root/api/v1/namespaces").await.status,
        200
    );
    let through_proxy = Caller::admin_of(&AdminCredentials {
        server: proxy.server.clone(),
        ..masters.clone()
    });
    let answer = through_proxy.get("/clusters/root/api/v1/namespaces").await;
    assert_eq!(answer.status, 403, "{}", answer.text());

    // 403, never 404, for a path that does not exist and for a workspace a user may not enter.
    let ca_dir = sharded.directory().join("pki");
    let clients =
        CertificateAuthority::read(&ca_dir.join("client-ca.crt"), &ca_dir.join("client-ca.key"));
    let alice = Caller::admin_of(&clients.client("alice", &[]).credentials(&proxy));
    let missing = alice
        .get("/clusters/root:does-not-exist/api/v1/namespaces")
        .await;
    let hidden = alice
        .get("/clusters/root:v1-33-on-shard-1/api/v1/namespaces")
        .await;
    assert_eq!((missing.status, hidden.status), (403, 403));
    // The proxy's answer for the path it does not know is the shard's for the workspace alice
    // may not enter, byte for byte: neither tells whether the workspace exists.
    assert_eq!(missing.json(), hidden.json());
    assert_eq!(missing.json()["kind"], json!("Status"));
    assert!(
        missing.json()["message"]
            .as_str()
            .unwrap()
            .ends_with("workspace access not permitted"),
        "{}",
        missing.text()
    );
}
