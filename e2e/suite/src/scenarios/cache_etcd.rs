//! Scenario 16: a second CacheServer, this one with `etcd.managed` (one member) as the RootShard
//! of scenario 2 has, becomes Available next to the first: its etcd StatefulSet runs, its
//! certificates (the cache server's CA, serving and client certificates, the etcd's CA, server,
//! peer and client certificates) exist, its Deployment points `--etcd-servers` at that etcd, and
//! the cache server answers `/readyz` through its Service with the client certificate shards
//! use. Deleted, everything the operator made for it is garbage-collected but the etcd volume,
//! kept by design (`whenDeleted: Retain`), which the scenario then deletes itself. It needs only
//! the operator: without scenario 2 it makes the `kcp` namespace itself and removes it at the end.

use std::time::{Duration, Instant};

use super::deletion::KINDS;
use super::rootshard::{FIRST_VERSION, wait_kind_available};
use super::{NAMESPACE, POLL, Suite, ensure_namespace};
use crate::Outcome;
use crate::cluster::{Cluster, eventually};

/// The CacheServer this scenario makes and deletes.
const NAME: &str = "cache-managed";
/// The port of a cache server's Service.
const CACHE_PORT: u16 = 6443;

fn manifest() -> String {
    format!(
        r#"apiVersion: operator.kcp.io/v1alpha1
kind: CacheServer
metadata:
  name: {NAME}
  namespace: {NAMESPACE}
spec:
  replicas: 1
  image:
    tag: {FIRST_VERSION}
  etcd:
    managed:
      replicas: 1
      storage:
        size: 1Gi
"#
    )
}

pub fn managed_etcd(suite: &mut Suite) -> Outcome {
    let admin = suite.host.admin();
    let workload = format!("{NAME}-cacheserver");
    let etcd = format!("{workload}-etcd");
    suite.narrator.step(&format!(
        "kubectl apply CacheServer {NAME} with managed etcd (1 member)"
    ));
    // Its own namespace if scenario 2 did not run (`E2E_SCENARIOS=1,16`), removed at the end.
    let made_namespace = ensure_namespace(&admin)?;
    let began = Instant::now();
    admin.apply(&manifest())?;
    wait_kind_available(&admin, "cacheserver", NAME, Duration::from_secs(120))?;
    suite.narrator.step(&format!(
        "CacheServer {NAME} Available ({:.1}s after the apply)",
        began.elapsed().as_secs_f64()
    ));

    let statefulset = admin
        .get(&["statefulset", "-n", NAMESPACE, &etcd])?
        .ok_or_else(|| format!("no etcd StatefulSet {etcd}"))?;
    if statefulset["status"]["readyReplicas"] != 1 {
        return Err(format!(
            "etcd StatefulSet {etcd} not ready: {}",
            statefulset["status"]
        ));
    }
    for suffix in [
        "ca",
        "server",
        "client",
        "etcd-ca",
        "etcd-server",
        "etcd-peer",
        "etcd-client",
    ] {
        let name = format!("{workload}-{suffix}");
        let secret = admin
            .get(&["secret", "-n", NAMESPACE, &name])?
            .ok_or_else(|| format!("no certificate Secret {name}"))?;
        if secret["type"] != "kubernetes.io/tls" {
            return Err(format!("Secret {name} is of type {}", secret["type"]));
        }
    }
    let deployment = admin
        .get(&["deployment", "-n", NAMESPACE, &workload])?
        .ok_or_else(|| format!("no Deployment {workload}"))?;
    let args = deployment
        .pointer("/spec/template/spec/containers/0/args")
        .and_then(|v| v.as_array())
        .cloned()
        .unwrap_or_default();
    let servers = args
        .iter()
        .filter_map(|arg| arg.as_str())
        .find_map(|arg| arg.strip_prefix("--etcd-servers="))
        .ok_or_else(|| format!("{workload} runs without --etcd-servers: {args:?}"))?;
    if !servers.contains(&etcd) {
        return Err(format!("{workload} uses etcd {servers}, not {etcd}"));
    }
    suite.narrator.step(&format!(
        "etcd StatefulSet {etcd} ready, its and the cache server's certificates exist; --etcd-servers={servers}"
    ));

    let kubeconfig = client_kubeconfig(suite, &admin, &workload)?;
    let ready = eventually(
        "the cache server answers /readyz",
        Duration::from_secs(30),
        POLL,
        || Cluster::new(&kubeconfig).run(&["get", "--raw", "/readyz"]),
    )?;
    if ready.trim() != "ok" {
        return Err(format!("/readyz answered {ready:?}"));
    }
    suite
        .narrator
        .step("/readyz through its Service with the shards' client certificate: ok");

    let made = objects_of(&admin, &workload)?;
    if !made.iter().any(|o| o == &format!("statefulsets/{etcd}")) {
        return Err(format!("the etcd StatefulSet is not among {made:?}"));
    }
    suite.narrator.step(&format!(
        "kubectl delete cacheserver {NAME} ({} objects made for it)",
        made.len()
    ));
    admin.run(&[
        "delete",
        "cacheserver",
        "-n",
        NAMESPACE,
        NAME,
        "--wait=false",
    ])?;
    eventually(
        "the CacheServer and everything made for it gone",
        Duration::from_secs(90),
        POLL,
        || {
            let mut left = objects_of(&admin, &workload)?;
            if admin
                .get(&["cacheserver", "-n", NAMESPACE, NAME])?
                .is_some()
            {
                left.push(format!("cacheserver/{NAME}"));
            }
            if left.is_empty() {
                Ok(())
            } else {
                Err(left.join(", "))
            }
        },
    )?;
    let claim = format!("data-{etcd}-0");
    if admin
        .get(&["persistentvolumeclaim", "-n", NAMESPACE, &claim])?
        .is_none()
    {
        return Err(format!(
            "the etcd volume {claim} is gone although the operator retains it"
        ));
    }
    suite.narrator.step(&format!(
        "everything it made is gone but the etcd volume {claim} (whenDeleted: Retain); deleting it"
    ));
    admin.run(&[
        "delete",
        "persistentvolumeclaim",
        "-n",
        NAMESPACE,
        &claim,
        "--wait=false",
    ])?;
    if made_namespace {
        admin.run(&["delete", "namespace", NAMESPACE, "--wait=false"])?;
    }
    Ok(())
}

/// `<kind>/<name>` of every object of [`KINDS`] whose name starts with `prefix`.
fn objects_of(admin: &Cluster, prefix: &str) -> Result<Vec<String>, String> {
    let mut found = Vec::new();
    for kind in KINDS {
        let list = admin.get(&[kind, "-n", NAMESPACE])?.unwrap_or_default();
        for item in list["items"].as_array().into_iter().flatten() {
            let name = item["metadata"]["name"].as_str().unwrap_or_default();
            if name.starts_with(prefix) {
                found.push(format!("{kind}/{name}"));
            }
        }
    }
    Ok(found)
}

/// A kubeconfig (reachable from here) for the cache server's Service with the client
/// certificate the operator issued for shards (`<workload>-client`).
fn client_kubeconfig(
    suite: &mut Suite,
    admin: &Cluster,
    workload: &str,
) -> Result<std::path::PathBuf, String> {
    let name = format!("{workload}-client");
    let secret = admin
        .get(&["secret", "-n", NAMESPACE, &name])?
        .ok_or_else(|| format!("no Secret {name}"))?;
    let field = |key: &str| {
        secret["data"][key]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| format!("Secret {name} has no {key}"))
    };
    let text = format!(
        r#"apiVersion: v1
kind: Config
clusters:
- name: cache
  cluster:
    server: https://{workload}.{NAMESPACE}.svc.cluster.local:{CACHE_PORT}
    certificate-authority-data: {ca}
users:
- name: cache
  user:
    client-certificate-data: {cert}
    client-key-data: {key}
contexts:
- name: cache
  context:
    cluster: cache
    user: cache
current-context: cache
"#,
        ca = field("ca.crt")?,
        cert = field("tls.crt")?,
        key = field("tls.key")?,
    );
    suite
        .host
        .reachable(&text, suite.dir.path(), "cache-managed.kubeconfig")
}
