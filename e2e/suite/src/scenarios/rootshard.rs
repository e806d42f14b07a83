//! Scenario 2, the user's promise: `kubectl apply` a CacheServer and a RootShard with managed etcd
//! whose `cache.ref` names it, get a `Kubeconfig` for it, and use kcp with kubectl: a workspace, a
//! CRD in it, objects of that CRD.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::Value;

use super::{CACHE_SERVER, NAMESPACE, POLL, ROOT_SHARD, Suite, ensure_namespace};
use crate::Outcome;
use crate::cluster::{Cluster, eventually, is_true};

/// The Kubeconfig object (and its Secret) the scenarios use to reach kcp as an admin.
pub const ADMIN_KUBECONFIG: &str = "e2e-admin";
/// The workspace scenario 2 creates and later scenarios check.
pub const WORKSPACE: &str = "e2e";
/// How many objects of the CRD scenario 2 creates.
pub const WIDGETS: usize = 3;

/// The CacheServer of the scenarios (embedded store) at image tag `tag`.
pub fn cache_server_manifest(tag: &str) -> String {
    format!(
        r#"apiVersion: operator.kcp.io/v1alpha1
kind: CacheServer
metadata:
  name: {CACHE_SERVER}
  namespace: {NAMESPACE}
spec:
  image:
    tag: {tag}
"#
    )
}

/// The RootShard of the scenarios at image tag `tag`, `replicas` server replicas and `members`
/// managed etcd members, replicating into the CacheServer.
pub fn root_shard_manifest(tag: &str, replicas: u32, members: u32) -> String {
    format!(
        r#"apiVersion: operator.kcp.io/v1alpha1
kind: RootShard
metadata:
  name: {ROOT_SHARD}
  namespace: {NAMESPACE}
spec:
  external:
    hostname: kcp.e2e.test
    port: 6443
  certificates: {{}}
  cache:
    ref:
      name: {CACHE_SERVER}
  replicas: {replicas}
  image:
    tag: {tag}
  etcd:
    managed:
      replicas: {members}
      storage:
        size: 1Gi
"#
    )
}

const CRD: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.e2e.kcp.io
spec:
  group: e2e.kcp.io
  names: {kind: Widget, plural: widgets, singular: widget}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer, minimum: 1}
"#;

/// The namespace, the CacheServer and the RootShard applied and Available (the time is a
/// figure); what scenario 2 and `kcp-managed up` start from.
pub fn deploy(suite: &mut Suite) -> Outcome {
    let admin = suite.host.admin();
    suite.narrator.step(&format!("namespace {NAMESPACE}"));
    ensure_namespace(&admin)?;

    suite.narrator.step(
        "kubectl apply CacheServer (embedded store) and RootShard (managed etcd, 1 member, cache.ref)",
    );
    let began = Instant::now();
    admin.apply(&cache_server_manifest(FIRST_VERSION))?;
    admin.apply(&root_shard_manifest(FIRST_VERSION, 1, 1))?;
    wait_available(suite, Duration::from_secs(240))?;
    wait_kind_available(&admin, "cacheserver", CACHE_SERVER, Duration::from_secs(60))?;
    let took = began.elapsed();
    suite.figures.root_shard_available = Some(took);
    suite.narrator.step(&format!(
        "RootShard Available after {:.1}s",
        took.as_secs_f64()
    ));
    Ok(())
}

pub fn apply_and_use(suite: &mut Suite) -> Outcome {
    deploy(suite)?;

    let kubeconfig = admin_kubeconfig(suite, ADMIN_KUBECONFIG, Target::RootShard(ROOT_SHARD))?;
    suite.kcp_kubeconfig = Some(kubeconfig.clone());
    let kcp = Cluster::new(&kubeconfig);

    suite.narrator.step(&format!(
        "kubectl (with that kubeconfig): create workspace {WORKSPACE}"
    ));
    kcp.apply(&format!(
        "apiVersion: tenancy.kcp.io/v1alpha1\nkind: Workspace\nmetadata:\n  name: {WORKSPACE}\n"
    ))?;
    eventually("workspace Ready", Duration::from_secs(60), POLL, || {
        let ws = kcp.get(&["workspace", WORKSPACE])?.ok_or("no workspace")?;
        if ws["status"]["phase"] == "Ready" {
            Ok(())
        } else {
            Err(ws["status"].to_string())
        }
    })?;

    let inside = Cluster::new(&in_workspace(
        &kubeconfig,
        &format!("root:{WORKSPACE}"),
        suite.dir.path(),
    )?);
    suite
        .narrator
        .step("in the workspace: a CRD, then objects of it");
    inside.apply(CRD)?;
    eventually(
        "CRD established",
        Duration::from_secs(60),
        POLL,
        || match inside.get(&["crd", "widgets.e2e.kcp.io"])? {
            Some(crd) if is_true(&crd, "Established") => Ok(()),
            other => Err(format!("{other:?}")),
        },
    )?;
    for i in 1..=WIDGETS {
        inside.apply(&format!(
            "apiVersion: e2e.kcp.io/v1\nkind: Widget\nmetadata:\n  name: w{i}\n  namespace: default\nspec:\n  size: {i}\n"
        ))?;
    }
    check_data(&inside)?;
    suite
        .narrator
        .step(&format!("{WIDGETS} widgets listed back"));
    Ok(())
}

/// The image tag everything is deployed at first.
pub const FIRST_VERSION: &str = "v0.1.0";

/// Waits until the RootShard reports Available.
pub fn wait_available(suite: &Suite, within: Duration) -> Result<Value, String> {
    wait_kind_available(&suite.host.admin(), "rootshard", ROOT_SHARD, within)
}

/// Waits until the custom resource `kind`/`name` reports Available.
pub fn wait_kind_available(
    admin: &Cluster,
    kind: &str,
    name: &str,
    within: Duration,
) -> Result<Value, String> {
    wait_for(admin, kind, name, within, |object| {
        is_true(object, "Available")
    })
}

/// Waits until the custom resource `kind`/`name` (in the scenarios' namespace) satisfies `done`;
/// the error shows its last status.
pub fn wait_for(
    admin: &Cluster,
    kind: &str,
    name: &str,
    within: Duration,
    done: impl Fn(&Value) -> bool,
) -> Result<Value, String> {
    eventually(&format!("{kind} {name}"), within, POLL, || {
        let object = admin
            .get(&[kind, "-n", NAMESPACE, name])?
            .ok_or_else(|| format!("no {kind} {name}"))?;
        if done(&object) {
            Ok(object)
        } else {
            Err(object["status"].to_string())
        }
    })
}

/// What a `Kubeconfig` points at: its `spec.target`.
#[derive(Clone, Copy, Debug)]
pub enum Target<'a> {
    RootShard(&'a str),
    Shard(&'a str),
    FrontProxy(&'a str),
}

impl Target<'_> {
    /// The `spec.target` field and the referenced name.
    fn field(&self) -> (&'static str, &str) {
        match self {
            Target::RootShard(name) => ("rootShardRef", name),
            Target::Shard(name) => ("shardRef", name),
            Target::FrontProxy(name) => ("frontProxyRef", name),
        }
    }
}

/// A `Kubeconfig` manifest for user `name` in `groups` (plus `kubeconfig:<name>`, added by the
/// operator), with ClusterRoleBindings of `cluster_roles` in `root` when there are any.
pub fn kubeconfig_manifest(
    name: &str,
    target: Target<'_>,
    groups: &[&str],
    cluster_roles: &[&str],
) -> String {
    kubeconfig_manifest_in(NAMESPACE, name, target, groups, cluster_roles)
}

/// [`kubeconfig_manifest`] in `namespace` (its target in the same namespace).
pub fn kubeconfig_manifest_in(
    namespace: &str,
    name: &str,
    target: Target<'_>,
    groups: &[&str],
    cluster_roles: &[&str],
) -> String {
    let (field, reference) = target.field();
    let authorization = if cluster_roles.is_empty() {
        String::new()
    } else {
        format!(
            "  authorization:\n    clusterRoleBindings:\n      clusterRoles: {cluster_roles:?}\n"
        )
    };
    format!(
        r#"apiVersion: operator.kcp.io/v1alpha1
kind: Kubeconfig
metadata:
  name: {name}
  namespace: {namespace}
spec:
  target:
    {field}:
      name: {reference}
  username: {name}
  groups: {groups:?}
  validity: 24h
  secretRef:
    name: {name}-kubeconfig
{authorization}"#
    )
}

/// Creates a `Kubeconfig` in `system:masters` for `target` (whose shards take that group;
/// through a FrontProxy, which drops it, the user is in `system:kcp:admin` instead) and returns
/// a file reachable from here once kcp answers with it.
pub fn admin_kubeconfig(
    suite: &mut Suite,
    name: &str,
    target: Target<'_>,
) -> Result<PathBuf, String> {
    admin_kubeconfig_in(suite, NAMESPACE, name, target)
}

/// [`admin_kubeconfig`] in `namespace` (its target in the same namespace).
pub fn admin_kubeconfig_in(
    suite: &mut Suite,
    namespace: &str,
    name: &str,
    target: Target<'_>,
) -> Result<PathBuf, String> {
    suite
        .narrator
        .step(&format!("Kubeconfig {name} for {target:?}"));
    let group = match target {
        Target::FrontProxy(_) => "system:kcp:admin",
        Target::RootShard(_) | Target::Shard(_) => "system:masters",
    };
    let path = issue_kubeconfig_in(
        suite,
        namespace,
        &kubeconfig_manifest_in(namespace, name, target, &[group], &[]),
        name,
    )?;
    let kcp = Cluster::new(&path);
    eventually(
        "kcp answers with the new kubeconfig",
        Duration::from_secs(60),
        POLL,
        || kcp.run(&["get", "namespaces"]).map(|_| ()),
    )?;
    Ok(path)
}

/// Applies the `Kubeconfig` `manifest` (named `name`, Secret `<name>-kubeconfig`) and returns
/// the kubeconfig it yields as a file reachable from here.
pub fn issue_kubeconfig(suite: &mut Suite, manifest: &str, name: &str) -> Result<PathBuf, String> {
    issue_kubeconfig_in(suite, NAMESPACE, manifest, name)
}

/// [`issue_kubeconfig`] for a `Kubeconfig` in `namespace`.
fn issue_kubeconfig_in(
    suite: &mut Suite,
    namespace: &str,
    manifest: &str,
    name: &str,
) -> Result<PathBuf, String> {
    let text = kubeconfig_text_in(suite, namespace, manifest, name)?;
    let dir = suite.dir.path().to_owned();
    suite
        .host
        .reachable(&text, &dir, &format!("{name}.kubeconfig"))
}

/// Applies the `Kubeconfig` `manifest` (named `name`, Secret `<name>-kubeconfig`) and returns
/// the kubeconfig it yields as the operator wrote it (in-cluster addresses).
pub fn kubeconfig_text(suite: &mut Suite, manifest: &str, name: &str) -> Result<String, String> {
    kubeconfig_text_in(suite, NAMESPACE, manifest, name)
}

/// [`kubeconfig_text`] for a `Kubeconfig` in `namespace`.
fn kubeconfig_text_in(
    suite: &mut Suite,
    namespace: &str,
    manifest: &str,
    name: &str,
) -> Result<String, String> {
    let admin = suite.host.admin();
    admin.apply(manifest)?;
    eventually(
        "kubeconfig Secret written",
        Duration::from_secs(60),
        POLL,
        || {
            let secret = admin
                .get(&["secret", "-n", namespace, &format!("{name}-kubeconfig")])?
                .ok_or("no Secret yet")?;
            let data = secret["data"]["kubeconfig"]
                .as_str()
                .ok_or("no kubeconfig key yet")?;
            let bytes = STANDARD.decode(data).map_err(|e| e.to_string())?;
            String::from_utf8(bytes).map_err(|e| e.to_string())
        },
    )
}

/// A copy of `kubeconfig` whose servers point at workspace `path` (`/clusters/<path>`).
pub fn in_workspace(kubeconfig: &Path, path: &str, dir: &Path) -> Result<PathBuf, String> {
    let text = std::fs::read_to_string(kubeconfig).map_err(|e| e.to_string())?;
    let mut config: Value = yaml_serde::from_str(&text).map_err(|e| e.to_string())?;
    for cluster in config["clusters"].as_array_mut().ok_or("no clusters")? {
        let server = cluster["cluster"]["server"]
            .as_str()
            .ok_or("no server")?
            .to_owned();
        let base = server
            .split("/clusters/")
            .next()
            .unwrap_or(&server)
            .to_owned();
        cluster["cluster"]["server"] = Value::from(format!("{base}/clusters/{path}"));
    }
    let out = dir.join(format!("{}.kubeconfig", path.replace(':', "_")));
    std::fs::write(
        &out,
        yaml_serde::to_string(&config).map_err(|e| e.to_string())?,
    )
    .map_err(|e| e.to_string())?;
    Ok(out)
}

/// The objects of scenario 2 are all there, read with `kubeconfig` (pointed at the workspace).
pub fn check_workspace_data(kubeconfig: &Path, dir: &Path) -> Outcome {
    let inside = Cluster::new(&in_workspace(
        kubeconfig,
        &format!("root:{WORKSPACE}"),
        dir,
    )?);
    check_data(&inside)
}

/// The objects of scenario 2 are all there.
pub fn check_data(inside: &Cluster) -> Outcome {
    let list = inside
        .get(&["widgets", "-n", "default"])?
        .ok_or("no widgets list")?;
    let names: Vec<&str> = list["items"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|i| i["metadata"]["name"].as_str())
                .collect()
        })
        .unwrap_or_default();
    if names.len() == WIDGETS {
        Ok(())
    } else {
        Err(format!("expected {WIDGETS} widgets, found {names:?}"))
    }
}
