//! Scenario 7: custom resources that cannot work say why (a condition with a reason, a Warning
//! event) and recover by themselves once the user fixes them: a RootShard references a CA Secret
//! that does not exist yet, another names etcd endpoints that are not URLs, a Shard references a
//! RootShard that does not exist, a FrontProxy maps a path the front-proxy would refuse, a
//! CacheServer names an etcd endpoint nothing listens on.

use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

use kcp_testing::identities::self_signed_ca_pem;
use serde_json::Value;

use super::full::{place_until, shard_manifest_of, use_workspace};
use super::rootshard::{FIRST_VERSION, Target, admin_kubeconfig_in};
use super::{POLL, SHARD_KIND, Suite};
use crate::Outcome;
use crate::cluster::{Cluster, eventually, is_true};

const NAMESPACE: &str = "kcp-bad";

fn root_shard(name: &str, certificates: &str, etcd: &str) -> String {
    root_shard_with(name, certificates, etcd, "")
}

/// [`root_shard`] with `line` (one more field) at the end of its spec.
fn root_shard_with(name: &str, certificates: &str, etcd: &str, line: &str) -> String {
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
  {line}
"#
    )
}

const MANAGED_ETCD: &str = "{managed: {replicas: 1, storage: {size: 1Gi}}}";

/// An etcd endpoint nothing listens on, wherever the operator runs (port 1 of its loopback).
const DEAD_ETCD: &str = "http://127.0.0.1:1";

/// A CacheServer with one replica and `etcd` as its `spec.etcd` (none: the embedded store), as
/// JSON.
fn cache_server(name: &str, etcd: Option<Value>) -> String {
    let mut spec = serde_json::json!({"replicas": 1, "image": {"tag": FIRST_VERSION}});
    if let Some(etcd) = etcd {
        spec["etcd"] = etcd;
    }
    serde_json::json!({
        "apiVersion": "operator.kcp.io/v1alpha1", "kind": "CacheServer",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": spec
    })
    .to_string()
}

/// The Secret holding the CA the suite brings (`tls.crt`, `tls.key`): `bad-ca`'s `caSecretRef`.
const EXTERNAL_CA: &str = "bad-ca-root";
/// The Secret with that CA's certificate only (`tls.crt`, upstream's `caBundleSecretRef` form).
const CA_BUNDLE: &str = "external-ca-bundle";
/// `bad-ca`'s `certificates`.
const CA_SECRET_REF: &str = "{caSecretRef: {name: bad-ca-root}}";
/// `caBundleSecretRef` as a line of a spec.
const CA_BUNDLE_REF: &str = "caBundleSecretRef: {name: external-ca-bundle}";

/// A FrontProxy of `bad-ca` with one more mapping at `path`, to that root shard; its serving
/// certificate, like every certificate of `bad-ca`, chains up to the CA the suite brought, which
/// its `caBundleSecretRef` trusts for the backends; its external name is its own Service.
fn front_proxy(name: &str, path: &str) -> String {
    format!(
        r#"apiVersion: operator.kcp.io/v1alpha1
kind: FrontProxy
metadata:
  name: {name}
  namespace: {NAMESPACE}
spec:
  rootShard: {{ref: {{name: bad-ca}}}}
  replicas: 1
  external:
    hostname: {name}-frontproxy.{NAMESPACE}.svc.cluster.local
    port: 6443
  caBundleSecretRef: {{name: {CA_BUNDLE}}}
  additionalPathMappings:
  - path: "{path}"
    backend: https://bad-ca-rootshard.{NAMESPACE}.svc.cluster.local:6443
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
    admin.apply(&root_shard("bad-ca", CA_SECRET_REF, MANAGED_ETCD))?;
    reported(
        suite,
        &admin,
        ("rootshard", "bad-ca"),
        "ReferenceNotFound",
        EXTERNAL_CA,
    )?;
    suite.narrator.step(
        "the Secret appears (a CA brought by the user, and its certificate alone as the \
         caBundleSecretRef of the RootShard, the Shard and the FrontProxy); the RootShard recovers",
    );
    let (ca_cert, ca_key) = self_signed_ca_pem("e2e external CA");
    admin.apply(&ca_secrets(&ca_cert, &ca_key))?;
    admin.apply(&root_shard_with(
        "bad-ca",
        CA_SECRET_REF,
        MANAGED_ETCD,
        CA_BUNDLE_REF,
    ))?;
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
        .step("CacheServer dead-etcd: its etcd endpoint has nothing listening");
    admin.apply(&cache_server(
        "dead-etcd",
        Some(serde_json::json!({"endpoints": [DEAD_ETCD]})),
    ))?;
    reported(
        suite,
        &admin,
        ("cacheserver", "dead-etcd"),
        "EtcdUnreachable",
        DEAD_ETCD,
    )?;
    suite
        .narrator
        .step("fixed: the embedded store instead; the CacheServer recovers");
    admin.apply(&cache_server("dead-etcd", None))?;
    recovered(suite, &admin, ("cacheserver", "dead-etcd"))?;

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
        .step("fixed: rootShard.ref names bad-ca (and the CA bundle); the Shard recovers");
    admin.apply(&format!(
        "{}  {CA_BUNDLE_REF}\n",
        shard_manifest_of(NAMESPACE, "orphan", "bad-ca", FIRST_VERSION)
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
    through_external_ca(suite, &admin, &ca_cert)?;

    suite.narrator.step("clean up");
    // The Shard holds a workspace made through the FrontProxy: without the annotation its
    // finalizer would wait for it.
    admin.run(&[
        "annotate",
        SHARD_KIND,
        "-n",
        NAMESPACE,
        "orphan",
        "operator.kcp.io/force-delete=true",
    ])?;
    // Shards and FrontProxies first: their RootShard must still be there to deregister from.
    for kind in [SHARD_KIND, "frontproxy", "rootshard", "cacheserver"] {
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

/// The CA as a `kubernetes.io/tls` Secret ([`EXTERNAL_CA`]) and its certificate alone as an
/// Opaque Secret with `tls.crt` ([`CA_BUNDLE`]), as a `List`.
fn ca_secrets(cert: &str, key: &str) -> String {
    serde_json::json!({
        "apiVersion": "v1", "kind": "List",
        "items": [
            {
                "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
                "metadata": {"name": EXTERNAL_CA, "namespace": NAMESPACE},
                "stringData": {"tls.crt": cert, "tls.key": key}
            },
            {
                "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                "metadata": {"name": CA_BUNDLE, "namespace": NAMESPACE},
                "stringData": {"tls.crt": cert}
            }
        ]
    })
    .to_string()
}

/// Through the FrontProxy `bad-mapping` only, with a kubeconfig that trusts nothing but the
/// brought CA: workspaces until one lands on the root shard `bad-ca` and one on the Shard
/// `orphan`, an object written and read back in each; then no pod of the namespace logged a
/// TLS error.
fn through_external_ca(suite: &mut Suite, admin: &Cluster, ca_cert: &str) -> Outcome {
    let issued = admin_kubeconfig_in(
        suite,
        NAMESPACE,
        "bad-ca-proxy",
        Target::FrontProxy("bad-mapping"),
    )?;
    let kubeconfig = trusting_only(&issued, ca_cert, suite.dir.path())?;
    let kcp = Cluster::new(&kubeconfig);
    let placed = place_until(suite, &kcp, "external-ca", &["root", "orphan"])?;
    for (workspace, shard) in &placed {
        use_workspace(&kubeconfig, workspace, shard, suite.dir.path())?;
    }
    suite.narrator.step(&format!(
        "through the FrontProxy, trusting only the brought CA: an object written and read back \
         in {placed:?}"
    ));
    let pods = admin
        .get(&["pods", "-n", NAMESPACE])?
        .ok_or("no pod list")?;
    let names: Vec<String> = pods["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|pod| pod["metadata"]["name"].as_str().map(str::to_owned))
        .collect();
    for pod in &names {
        let log = admin.run(&["logs", "-n", NAMESPACE, pod, "--all-containers"])?;
        if let Some(line) = log.lines().find(|line| is_tls_error(line)) {
            return Err(format!("pod {pod} logged a TLS error: {line}"));
        }
    }
    suite.narrator.step(&format!(
        "no TLS error in the logs of {} pods ({})",
        names.len(),
        names.join(", ")
    ));
    Ok(())
}

/// A copy of `kubeconfig` whose clusters trust `ca_cert` only (not what the operator wrote).
fn trusting_only(kubeconfig: &Path, ca_cert: &str, dir: &Path) -> Result<PathBuf, String> {
    let text = std::fs::read_to_string(kubeconfig).map_err(|e| e.to_string())?;
    let mut config: Value = yaml_serde::from_str(&text).map_err(|e| e.to_string())?;
    for cluster in config["clusters"].as_array_mut().ok_or("no clusters")? {
        let fields = cluster["cluster"]
            .as_object_mut()
            .ok_or("a cluster without fields")?;
        fields.remove("certificate-authority");
        fields.insert(
            "certificate-authority-data".into(),
            Value::from(STANDARD.encode(ca_cert)),
        );
    }
    let out = dir.join("external-ca-only.kubeconfig");
    let written = yaml_serde::to_string(&config).map_err(|e| e.to_string())?;
    std::fs::write(&out, written).map_err(|e| e.to_string())?;
    Ok(out)
}

/// A log line of a failed TLS handshake or certificate check, as rustls (this project's images)
/// or Go's crypto/tls (upstream's) word it.
fn is_tls_error(line: &str) -> bool {
    const MARKS: &[&str] = &[
        "invalid peer certificate",
        "unknownissuer",
        "notvalidforname",
        "badcertificate",
        "certificate verify",
        "handshake fail",
        "handshake error",
        "x509:",
        "remote error: tls",
        "tls: bad certificate",
        "tls: failed to verify",
        "unknown authority",
    ];
    let line = line.to_ascii_lowercase();
    MARKS.iter().any(|mark| line.contains(mark))
}

#[cfg(test)]
mod tests {
    use super::is_tls_error;

    #[test]
    fn tls_errors_are_recognised_and_ordinary_lines_are_not() {
        assert!(is_tls_error(
            "WARN backend did not answer error=invalid peer certificate: UnknownIssuer"
        ));
        assert!(is_tls_error(
            "E1126 x509: certificate signed by unknown authority"
        ));
        assert!(is_tls_error("http: TLS handshake error from 10.0.0.1: EOF"));
        assert!(is_tls_error(
            "rejected connection from 10.0.0.2 (error \"remote error: tls: bad certificate\")"
        ));
        assert!(!is_tls_error("INFO serving on https://0.0.0.0:6443"));
        assert!(!is_tls_error(
            "embed: peerTLS: cert = /etc/etcd/pki/peer/tls.crt, client-cert-auth = true"
        ));
        assert!(!is_tls_error("--tls-cert-file=/etc/kcp/tls/server/tls.crt"));
    }
}
