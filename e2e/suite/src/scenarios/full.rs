//! Scenario 8, the whole deployment: next to the CacheServer and RootShard of scenario 2, a Shard
//! (`rootShard.ref`, managed etcd) and a FrontProxy become Available; then kcp is used through
//! the FrontProxy only, with a `Kubeconfig` whose target is the FrontProxy: workspaces are created
//! until some land on every shard (the scheduler's `core.kcp.io/shard` annotation says where),
//! each gets an object that is read back, a watch of root's workspaces open throughout sees every
//! one become Ready, and `kubectl ws tree` shows them.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kcp_testing::Kubectl;
use kcp_testing::binaries::workspace_binary;
use serde_json::Value;

use super::rootshard::{
    FIRST_VERSION, Target, admin_kubeconfig, in_workspace, wait_available, wait_kind_available,
};
use super::{CACHE_SERVER, FRONT_PROXY, NAMESPACE, POLL, ROOT_SHARD, SHARD, SHARD_KIND, Suite};
use crate::Outcome;
use crate::cluster::{Cluster, KUBECTL_VERSION, Watch, eventually};

/// The Kubeconfig (and Secret) that reaches kcp through the FrontProxy as an admin.
pub const PROXY_KUBECONFIG: &str = "e2e-proxy";
/// The annotation the workspace scheduler records its choice of shard in.
const SHARD_ANNOTATION: &str = "core.kcp.io/shard";
/// At most this many workspaces are created while waiting for every shard to get one; with the
/// scheduler choosing at random among equals, missing a shard that often is a bug.
const MAX_WORKSPACES: usize = 12;

/// A Shard of the RootShard with its own managed etcd (one member), one replica.
pub fn shard_manifest(name: &str, tag: &str) -> String {
    shard_manifest_of(NAMESPACE, name, ROOT_SHARD, tag)
}

/// A Shard `name` in `namespace` of RootShard `root`, with its own managed etcd (one member),
/// one replica.
pub fn shard_manifest_of(namespace: &str, name: &str, root: &str, tag: &str) -> String {
    format!(
        r#"apiVersion: operator.kcp.io/v1alpha1
kind: Shard
metadata:
  name: {name}
  namespace: {namespace}
spec:
  rootShard:
    ref:
      name: {root}
  replicas: 1
  image:
    tag: {tag}
  etcd:
    managed:
      replicas: 1
      storage:
        size: 1Gi
"#
    )
}

/// The FrontProxy; its external name is its own Service, so kubeconfigs made for it work inside
/// the host cluster and, rewritten, from here.
pub fn front_proxy_manifest(tag: &str, replicas: u32) -> String {
    format!(
        r#"apiVersion: operator.kcp.io/v1alpha1
kind: FrontProxy
metadata:
  name: {FRONT_PROXY}
  namespace: {NAMESPACE}
spec:
  rootShard:
    ref:
      name: {ROOT_SHARD}
  replicas: {replicas}
  image:
    tag: {tag}
  external:
    hostname: {FRONT_PROXY}-frontproxy.{NAMESPACE}.svc.cluster.local
    port: 6443
"#
    )
}

/// The Shard and the FrontProxy applied next to the CacheServer and RootShard, and all four
/// Available (the time is a figure); what scenario 8 and `kcp-managed up` build on.
pub fn deploy(suite: &mut Suite) -> Outcome {
    let admin = suite.host.admin();
    suite.narrator.step(&format!(
        "kubectl apply Shard {SHARD} (managed etcd) and FrontProxy {FRONT_PROXY} (1 replica)"
    ));
    let began = Instant::now();
    admin.apply(&shard_manifest(SHARD, FIRST_VERSION))?;
    admin.apply(&front_proxy_manifest(FIRST_VERSION, 1))?;
    let within = Duration::from_secs(300);
    wait_kind_available(&admin, SHARD_KIND, SHARD, within)?;
    wait_kind_available(&admin, "frontproxy", FRONT_PROXY, within)?;
    wait_kind_available(&admin, "cacheserver", CACHE_SERVER, within)?;
    wait_available(suite, within)?;
    let took = began.elapsed();
    suite.figures.full_deployment_available = Some(took);
    suite.narrator.step(&format!(
        "CacheServer, RootShard, Shard and FrontProxy Available ({:.1}s after the apply)",
        took.as_secs_f64()
    ));
    Ok(())
}

pub fn deploy_and_use(suite: &mut Suite) -> Outcome {
    deploy(suite)?;
    let admin = suite.host.admin();
    if admin
        .get(&["pdb", "-n", NAMESPACE, &format!("{FRONT_PROXY}-frontproxy")])?
        .is_some()
    {
        return Err("a FrontProxy of one replica has a PodDisruptionBudget".into());
    }

    let kubeconfig = admin_kubeconfig(suite, PROXY_KUBECONFIG, Target::FrontProxy(FRONT_PROXY))?;
    let text = std::fs::read_to_string(&kubeconfig).map_err(|e| e.to_string())?;
    if !text.contains(&format!("{FRONT_PROXY}-frontproxy.{NAMESPACE}.svc")) {
        return Err(format!(
            "the Kubeconfig does not name the FrontProxy:\n{text}"
        ));
    }
    suite.proxy_kubeconfig = Some(kubeconfig.clone());
    let kcp = Cluster::new(&kubeconfig);
    let shards = registered_shards(&kcp)?;
    for shard in [ROOT_SHARD, SHARD] {
        if !shards.iter().any(|s| s == shard) {
            return Err(format!("shard {shard} not registered: {shards:?}"));
        }
    }
    suite.narrator.step(&format!(
        "through the FrontProxy: shards {shards:?}; watching root's workspaces"
    ));
    let mut watch = watch_workspaces(&kcp)?;

    let placed = place_until(suite, &kcp, "ws", &[ROOT_SHARD, SHARD])?;
    suite.narrator.step(&format!("placed: {placed:?}"));
    for (workspace, shard) in &placed {
        use_workspace(&kubeconfig, workspace, shard, suite.dir.path())?;
    }
    suite
        .narrator
        .step("an object in each workspace, read back through the FrontProxy");
    watched_ready(&mut watch, &placed)?;
    suite
        .narrator
        .step("the watch, open throughout, saw every workspace become Ready");
    let tree = ws_tree(&kubeconfig)?;
    for (workspace, _) in &placed {
        if !tree.contains(workspace.as_str()) {
            return Err(format!("kubectl ws tree misses {workspace}:\n{tree}"));
        }
    }
    suite
        .narrator
        .step(&format!("kubectl ws tree:\n{}", tree.trim_end()));
    suite.placed = placed;
    Ok(())
}

/// The admin kubeconfig through the FrontProxy that scenario 8 made, and kubectl with it.
pub fn through_proxy(suite: &Suite) -> Result<(PathBuf, Cluster), String> {
    let kubeconfig = suite
        .proxy_kubeconfig
        .clone()
        .ok_or("scenario 8 left no FrontProxy kubeconfig")?;
    let kcp = Cluster::new(&kubeconfig);
    Ok((kubeconfig, kcp))
}

/// A workspace scenario 8 placed on the Shard: its name, and a kubeconfig into it through the
/// FrontProxy (reachable from here).
pub fn shard_workspace_through_proxy(suite: &Suite) -> Result<(String, PathBuf), String> {
    let (proxy_kubeconfig, _) = through_proxy(suite)?;
    let (on_shard, _) = suite
        .placed
        .iter()
        .find(|(_, shard)| shard == SHARD)
        .cloned()
        .ok_or("scenario 8 left no workspace on the Shard")?;
    let inside = in_workspace(
        &proxy_kubeconfig,
        &format!("root:{on_shard}"),
        suite.dir.path(),
    )?;
    Ok((on_shard, inside))
}

/// The names of the `core.kcp.io` Shards registered in root.
pub fn registered_shards(kcp: &Cluster) -> Result<Vec<String>, String> {
    let list = kcp.get(&["shards"])?.ok_or("no shards list")?;
    Ok(list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s["metadata"]["name"].as_str().map(str::to_owned))
        .collect())
}

/// A watch of root's workspaces printing `<name> <phase>` per event.
pub fn watch_workspaces(kcp: &Cluster) -> Result<Watch, String> {
    kcp.watch(&[
        "get",
        "workspaces",
        "--watch",
        "--no-headers",
        "-o",
        "custom-columns=NAME:.metadata.name,PHASE:.status.phase",
    ])
}

/// Every workspace of `placed` was seen Ready by `watch`, which is still running.
pub fn watched_ready(watch: &mut Watch, placed: &[(String, String)]) -> Outcome {
    eventually(
        "the watch shows every workspace Ready",
        Duration::from_secs(30),
        POLL,
        || {
            let lines = watch.lines();
            let missing: Vec<&String> = placed
                .iter()
                .map(|(workspace, _)| workspace)
                .filter(|workspace| {
                    !lines.iter().any(|line| {
                        let mut fields = line.split_whitespace();
                        fields.next() == Some(workspace.as_str()) && fields.next() == Some("Ready")
                    })
                })
                .collect();
            if missing.is_empty() {
                Ok(())
            } else {
                Err(format!("not seen Ready: {missing:?}; lines: {lines:?}"))
            }
        },
    )?;
    if watch.running() {
        Ok(())
    } else {
        Err("the watch ended early".into())
    }
}

/// Creates workspaces `<prefix>-1`, `<prefix>-2`, ... in root (through `kcp`) until every shard
/// of `wanted` holds at least one; returns each workspace with its shard.
pub fn place_until(
    suite: &Suite,
    kcp: &Cluster,
    prefix: &str,
    wanted: &[&str],
) -> Result<Vec<(String, String)>, String> {
    let mut placed: Vec<(String, String)> = Vec::new();
    for i in 1..=MAX_WORKSPACES {
        let name = format!("{prefix}-{i}");
        kcp.apply(&format!(
            "apiVersion: tenancy.kcp.io/v1alpha1\nkind: Workspace\nmetadata:\n  name: {name}\n"
        ))?;
        let shard = ready_on(kcp, &name)?;
        suite
            .narrator
            .step(&format!("workspace {name} Ready on {shard}"));
        placed.push((name, shard));
        if wanted
            .iter()
            .all(|shard| placed.iter().any(|(_, s)| s == shard))
        {
            return Ok(placed);
        }
    }
    Err(format!(
        "{MAX_WORKSPACES} workspaces did not reach every shard of {wanted:?}: {placed:?}; \
         the Shards as the scheduler reads them: {}",
        shards_as_scheduled(kcp)
    ))
}

/// Each registered Shard's `Ready` heartbeat and `status.capacity`, what placement decides on
/// (for a failure message).
fn shards_as_scheduled(kcp: &Cluster) -> String {
    let list = match kcp.get(&["shards"]) {
        Ok(Some(list)) => list,
        Ok(None) => return "no shards list".into(),
        Err(e) => return e,
    };
    let shards: Vec<String> = list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|shard| {
            let ready = shard["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|c| c["type"] == "Ready");
            format!(
                "{} (Ready {} at {}, capacity {})",
                shard["metadata"]["name"],
                ready.map_or(&Value::Null, |c| &c["status"]),
                ready.map_or(&Value::Null, |c| &c["lastHeartbeatTime"]),
                shard["status"]["capacity"]
            )
        })
        .collect();
    shards.join(", ")
}

/// Waits until workspace `name` (in root) is Ready; the shard the scheduler placed it on.
pub fn ready_on(kcp: &Cluster, name: &str) -> Result<String, String> {
    eventually(
        &format!("workspace {name} Ready"),
        Duration::from_secs(60),
        POLL,
        || {
            let ws = kcp.get(&["workspace", name])?.ok_or("no workspace")?;
            let shard = ws["metadata"]["annotations"][SHARD_ANNOTATION].as_str();
            match (ws["status"]["phase"].as_str(), shard) {
                (Some("Ready"), Some(shard)) => Ok(shard.to_owned()),
                _ => Err(ws["status"].to_string()),
            }
        },
    )
}

/// The ConfigMap each placed workspace holds.
fn config_map_name(workspace: &str) -> String {
    format!("e2e-{workspace}")
}

/// kubectl in `root:<workspace>` through `kubeconfig`.
fn in_root_workspace(kubeconfig: &Path, workspace: &str, dir: &Path) -> Result<Cluster, String> {
    in_workspace(kubeconfig, &format!("root:{workspace}"), dir).map(|path| Cluster::new(&path))
}

/// Creates a ConfigMap naming `shard` in `workspace` (through `kubeconfig`) and reads it back.
pub fn use_workspace(kubeconfig: &Path, workspace: &str, shard: &str, dir: &Path) -> Outcome {
    let inside = in_root_workspace(kubeconfig, workspace, dir)?;
    let name = config_map_name(workspace);
    inside.apply(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: default\ndata:\n  shard: {shard}\n"
    ))?;
    check_workspace(kubeconfig, workspace, shard, dir)
}

/// The ConfigMap of [`use_workspace`] is there in `workspace`, naming `shard`.
pub fn check_workspace(kubeconfig: &Path, workspace: &str, shard: &str, dir: &Path) -> Outcome {
    let inside = in_root_workspace(kubeconfig, workspace, dir)?;
    let name = config_map_name(workspace);
    let object = inside
        .get(&["configmap", "-n", "default", &name])?
        .ok_or_else(|| format!("no ConfigMap {name} in root:{workspace}"))?;
    if object["data"]["shard"] == shard {
        Ok(())
    } else {
        Err(format!("ConfigMap {name} in root:{workspace}: {object}"))
    }
}

/// `kubectl ws tree` with this build's plugin, from root through `kubeconfig` (whose
/// `tls-server-name`, which the host needs when it reaches an in-cluster Service at another
/// address, the plugin honours as kubectl does).
pub fn ws_tree(kubeconfig: &Path) -> Result<String, String> {
    let plugin = workspace_binary("kcp-kubectl-plugins", "kubectl-ws");
    let plugins: PathBuf = plugin
        .parent()
        .ok_or("the plugin has no directory")?
        .to_owned();
    let kubectl = Kubectl::with_plugins(KUBECTL_VERSION, kubeconfig, &plugins);
    let run = kubectl.run(&["ws", "tree"]);
    if run.status.success() {
        Ok(run.stdout)
    } else {
        Err(format!("kubectl ws tree: {}{}", run.stderr, run.stdout))
    }
}
