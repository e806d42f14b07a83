//! Scenario 2, the user's promise: `kubectl apply` a RootShard with managed etcd, get a
//! `Kubeconfig` for it, and use kcp with kubectl: a workspace, a CRD in it, objects of that CRD.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::Value;

use super::{NAMESPACE, POLL, ROOT_SHARD, Suite};
use crate::Outcome;
use crate::cluster::{Cluster, eventually, is_true};

/// The Kubeconfig object (and its Secret) the scenarios use to reach kcp as an admin.
pub const ADMIN_KUBECONFIG: &str = "e2e-admin";
/// The workspace scenario 2 creates and later scenarios check.
pub const WORKSPACE: &str = "e2e";
/// How many objects of the CRD scenario 2 creates.
pub const WIDGETS: usize = 3;

/// The RootShard of the scenarios at image tag `tag`, `replicas` server replicas and `members`
/// managed etcd members.
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

pub fn apply_and_use(suite: &mut Suite) -> Outcome {
    let admin = suite.host.admin();
    suite.narrator.step(&format!("namespace {NAMESPACE}"));
    admin.apply(&format!(
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {NAMESPACE}\n"
    ))?;

    suite
        .narrator
        .step("kubectl apply RootShard (managed etcd, 1 member)");
    let began = Instant::now();
    admin.apply(&root_shard_manifest("v0.1.0", 1, 1))?;
    wait_available(suite, Duration::from_secs(240))?;
    let took = began.elapsed();
    suite.figures.root_shard_available = Some(took);
    suite.narrator.step(&format!(
        "RootShard Available after {:.1}s",
        took.as_secs_f64()
    ));

    let kubeconfig = admin_kubeconfig(suite, ADMIN_KUBECONFIG)?;
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

/// Waits until the RootShard reports Available.
pub fn wait_available(suite: &Suite, within: Duration) -> Result<Value, String> {
    let admin = suite.host.admin();
    eventually("RootShard Available", within, POLL, || {
        let root = admin
            .get(&["rootshard", "-n", NAMESPACE, ROOT_SHARD])?
            .ok_or("no RootShard")?;
        if is_true(&root, "Available") {
            Ok(root)
        } else {
            Err(root["status"].to_string())
        }
    })
}

/// Creates a `Kubeconfig` (admin: `system:masters`) for the root shard and returns a file
/// reachable from here.
pub fn admin_kubeconfig(suite: &mut Suite, name: &str) -> Result<PathBuf, String> {
    suite
        .narrator
        .step(&format!("Kubeconfig {name} for the RootShard"));
    let admin = suite.host.admin();
    admin.apply(&format!(
        r#"apiVersion: operator.kcp.io/v1alpha1
kind: Kubeconfig
metadata:
  name: {name}
  namespace: {NAMESPACE}
spec:
  target:
    rootShardRef:
      name: {ROOT_SHARD}
  username: {name}
  groups: ["system:masters"]
  validity: 24h
  secretRef:
    name: {name}-kubeconfig
"#
    ))?;
    let text = eventually(
        "kubeconfig Secret written",
        Duration::from_secs(60),
        POLL,
        || {
            let secret = admin
                .get(&["secret", "-n", NAMESPACE, &format!("{name}-kubeconfig")])?
                .ok_or("no Secret yet")?;
            let data = secret["data"]["kubeconfig"]
                .as_str()
                .ok_or("no kubeconfig key yet")?;
            let bytes = STANDARD.decode(data).map_err(|e| e.to_string())?;
            String::from_utf8(bytes).map_err(|e| e.to_string())
        },
    )?;
    let dir = suite.dir.path().to_owned();
    let path = suite
        .host
        .reachable(&text, &dir, &format!("{name}.kubeconfig"))?;
    let kcp = Cluster::new(&path);
    eventually(
        "kcp answers with the new kubeconfig",
        Duration::from_secs(60),
        POLL,
        || kcp.run(&["get", "namespaces"]).map(|_| ()),
    )?;
    Ok(path)
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
