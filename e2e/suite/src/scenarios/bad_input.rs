//! Scenario 7: custom resources that cannot work say why (a condition with a reason, a Warning
//! event) and recover by themselves once the user fixes them: a RootShard references a CA Secret
//! that does not exist yet, another names etcd endpoints that are not URLs, a Shard references a
//! RootShard that does not exist, a FrontProxy maps a path the front-proxy would refuse.

use std::time::Duration;

use kcp_testing::identities::self_signed_ca_pem;
use serde_json::Value;

use super::full::shard_manifest_of;
use super::rootshard::FIRST_VERSION;
use super::{POLL, SHARD_KIND, Suite};
use crate::Outcome;
use crate::cluster::{Cluster, eventually, is_true};

const NAMESPACE: &str = "kcp-bad";

fn root_shard(name: &str, certificates: &str, etcd: &str) -> String {
    format!(
        r#"apiVersion: operator.kcp.io/v1alpha1
kind: RootShard
metadata:
  name: {name}
  namespace: {NAMESPACE}
spec:
  external:
    hostname: {name}.e2e.test
    port: 6443
  certificates: {certificates}
  etcd: {etcd}
"#
    )
}

const MANAGED_ETCD: &str = "{managed: {replicas: 1, storage: {size: 1Gi}}}";

/// A FrontProxy of `bad-etcd` with one more mapping at `path`, to that root shard.
fn front_proxy(name: &str, path: &str) -> String {
    format!(
        r#"apiVersion: operator.kcp.io/v1alpha1
kind: FrontProxy
metadata:
  name: {name}
  namespace: {NAMESPACE}
spec:
  rootShard: {{ref: {{name: bad-etcd}}}}
  replicas: 1
  additionalPathMappings:
  - path: "{path}"
    backend: https://bad-etcd-rootshard.{NAMESPACE}.svc.cluster.local:6443
    backend_server_ca: /etc/kcp/tls/ca/tls.crt
    proxy_client_cert: /etc/kcp-front-proxy/requestheader-client/tls.crt
    proxy_client_key: /etc/kcp-front-proxy/requestheader-client/tls.key
"#
    )
}

pub fn report_and_recover(suite: &mut Suite) -> Outcome {
    let admin = suite.host.admin();
    admin.apply(&format!(
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {NAMESPACE}\n"
    ))?;

    suite
        .narrator
        .step("RootShard bad-ca: caSecretRef names a Secret that does not exist");
    admin.apply(&root_shard(
        "bad-ca",
        "{caSecretRef: {name: bad-ca-root}}",
        MANAGED_ETCD,
    ))?;
    reported(
        suite,
        &admin,
        ("rootshard", "bad-ca"),
        "ReferenceNotFound",
        "bad-ca-root",
    )?;
    suite
        .narrator
        .step("the Secret appears (a CA brought by the user); the RootShard recovers");
    admin.apply(&ca_secret("bad-ca-root"))?;
    recovered(suite, &admin, ("rootshard", "bad-ca"))?;

    suite
        .narrator
        .step("RootShard bad-etcd: etcd endpoints that are not URLs");
    admin.apply(&root_shard(
        "bad-etcd",
        "{}",
        "{endpoints: [\"not a url\"]}",
    ))?;
    reported(
        suite,
        &admin,
        ("rootshard", "bad-etcd"),
        "InvalidSpec",
        "not a url",
    )?;
    suite
        .narrator
        .step("fixed: managed etcd instead; the RootShard recovers");
    // A server-side apply that no longer names `endpoints` removes them (the suite owns them).
    admin.apply(&root_shard("bad-etcd", "{}", MANAGED_ETCD))?;
    recovered(suite, &admin, ("rootshard", "bad-etcd"))?;

    suite
        .narrator
        .step("Shard orphan: rootShard.ref names a RootShard that does not exist");
    admin.apply(&shard_manifest_of(
        NAMESPACE,
        "orphan",
        "missing-root",
        FIRST_VERSION,
    ))?;
    reported(
        suite,
        &admin,
        (SHARD_KIND, "orphan"),
        "ReferenceNotFound",
        "missing-root",
    )?;
    suite
        .narrator
        .step("fixed: rootShard.ref names bad-etcd; the Shard recovers");
    admin.apply(&shard_manifest_of(
        NAMESPACE,
        "orphan",
        "bad-etcd",
        FIRST_VERSION,
    ))?;
    recovered(suite, &admin, (SHARD_KIND, "orphan"))?;

    suite
        .narrator
        .step("FrontProxy bad-mapping: an additional path mapping without a leading '/'");
    admin.apply(&front_proxy("bad-mapping", "extra/"))?;
    reported(
        suite,
        &admin,
        ("frontproxy", "bad-mapping"),
        "InvalidSpec",
        "must start with '/'",
    )?;
    suite
        .narrator
        .step("fixed: the path is /extra/; the FrontProxy recovers");
    admin.apply(&front_proxy("bad-mapping", "/extra/"))?;
    recovered(suite, &admin, ("frontproxy", "bad-mapping"))?;

    suite.narrator.step("clean up");
    // Shards and FrontProxies first: their RootShard must still be there to deregister from.
    for kind in [SHARD_KIND, "frontproxy", "rootshard"] {
        admin.run(&[
            "delete",
            kind,
            "-n",
            NAMESPACE,
            "--all",
            "--wait=true",
            "--timeout=120s",
        ])?;
    }
    admin.run(&["delete", "namespace", NAMESPACE, "--wait=false"])?;
    Ok(())
}

/// A condition with `reason` (status not True) whose message names `detail`, and a Warning event.
fn reported(
    suite: &Suite,
    admin: &Cluster,
    (kind, name): (&str, &str),
    reason: &str,
    detail: &str,
) -> Outcome {
    eventually(
        &format!("{name}: condition {reason}"),
        Duration::from_secs(60),
        POLL,
        || {
            let object = admin
                .get(&[kind, "-n", NAMESPACE, name])?
                .ok_or_else(|| format!("no {kind} {name}"))?;
            let conditions = object
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            conditions
                .iter()
                .find(|c| {
                    c["reason"] == reason
                        && c["status"] != "True"
                        && c["message"].as_str().is_some_and(|m| m.contains(detail))
                })
                .map(|c| {
                    suite.narrator.step(&format!(
                        "condition {}: {} ({})",
                        c["type"], c["reason"], c["message"]
                    ))
                })
                .ok_or_else(|| format!("conditions: {conditions:?}"))
        },
    )?;
    eventually(
        &format!("{name}: Warning event {reason}"),
        Duration::from_secs(60),
        POLL,
        || {
            let events = admin
                .get(&["events.events.k8s.io", "-n", NAMESPACE])?
                .unwrap_or_default();
            events["items"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|e| {
                    e["reason"] == reason
                        && e["type"] == "Warning"
                        && e["regarding"]["name"] == name
                })
                .map(|e| {
                    suite
                        .narrator
                        .step(&format!("event {}: {}", e["reason"], e["note"]))
                })
                .ok_or_else(|| format!("events: {}", events["items"]))
        },
    )?;
    Ok(())
}

fn recovered(suite: &Suite, admin: &Cluster, (kind, name): (&str, &str)) -> Outcome {
    eventually(
        &format!("{name} Available"),
        Duration::from_secs(240),
        POLL,
        || {
            let object = admin
                .get(&[kind, "-n", NAMESPACE, name])?
                .ok_or_else(|| format!("no {kind} {name}"))?;
            if is_true(&object, "Available") {
                Ok(())
            } else {
                Err(object["status"].to_string())
            }
        },
    )?;
    suite.narrator.step(&format!("{name} Available"));
    Ok(())
}

/// A `kubernetes.io/tls` Secret with a fresh self-signed CA.
fn ca_secret(name: &str) -> String {
    let (cert, key) = self_signed_ca_pem("e2e brought CA");
    serde_json::json!({
        "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "stringData": {"tls.crt": cert, "tls.key": key}
    })
    .to_string()
}
