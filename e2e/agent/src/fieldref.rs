//! The downward API: a pod's own fields (`fieldRef`) and its containers' resources
//! (`resourceFieldRef`), shared by environment variables and downwardAPI volumes.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use k8s_openapi::api::core::v1::{Container, Pod};

/// What a field path is resolved against.
pub struct PodFacts<'a> {
    pub pod: &'a Pod,
    pub pod_ip: Option<Ipv4Addr>,
    pub host_ip: Ipv4Addr,
    pub node_name: &'a str,
}

impl PodFacts<'_> {
    /// The pod's namespace (`metadata.namespace`).
    pub fn namespace(&self) -> String {
        self.pod.metadata.namespace.clone().unwrap_or_default()
    }
}

/// `metadata.labels` / `metadata.annotations` as a downwardAPI file shows them: sorted
/// `key="value"` lines, values quoted as Go's `%q` does.
pub fn format_map(map: &BTreeMap<String, String>) -> String {
    map.iter()
        .map(|(k, v)| {
            let quoted = serde_json::to_string(v).unwrap_or_else(|_| format!("\"{v}\""));
            format!("{k}={quoted}\n")
        })
        .collect()
}

/// `metadata.labels['key']` -> `("labels", "key")`.
fn subscript<'p>(path: &'p str, field: &str) -> Option<&'p str> {
    let rest = path
        .strip_prefix(field)?
        .strip_prefix('[')?
        .strip_suffix(']')?;
    rest.strip_prefix('\'')
        .and_then(|r| r.strip_suffix('\''))
        .or_else(|| rest.strip_prefix('"').and_then(|r| r.strip_suffix('"')))
}

/// The value of `fieldRef.fieldPath`.
pub fn field(path: &str, facts: &PodFacts<'_>) -> Result<String, String> {
    let meta = &facts.pod.metadata;
    let spec = facts.pod.spec.as_ref();
    let empty = BTreeMap::new();
    let labels = meta.labels.as_ref().unwrap_or(&empty);
    let annotations = meta.annotations.as_ref().unwrap_or(&empty);
    if let Some(key) = subscript(path, "metadata.labels") {
        return Ok(labels.get(key).cloned().unwrap_or_default());
    }
    if let Some(key) = subscript(path, "metadata.annotations") {
        return Ok(annotations.get(key).cloned().unwrap_or_default());
    }
    let ip = |ip: Option<Ipv4Addr>| ip.map(|ip| ip.to_string()).unwrap_or_default();
    Ok(match path {
        "metadata.name" => meta.name.clone().unwrap_or_default(),
        "metadata.namespace" => facts.namespace(),
        "metadata.uid" => meta.uid.clone().unwrap_or_default(),
        "metadata.labels" => format_map(labels),
        "metadata.annotations" => format_map(annotations),
        "spec.nodeName" => spec
            .and_then(|s| s.node_name.clone())
            .unwrap_or_else(|| facts.node_name.to_owned()),
        "spec.serviceAccountName" => service_account(facts.pod),
        "status.hostIP" | "status.hostIPs" => facts.host_ip.to_string(),
        "status.podIP" | "status.podIPs" => ip(facts.pod_ip),
        other => return Err(format!("unsupported fieldRef path {other:?}")),
    })
}

/// The pod's service account (`default` when none is named).
pub fn service_account(pod: &Pod) -> String {
    pod.spec
        .as_ref()
        .and_then(|s| {
            s.service_account_name
                .clone()
                .or_else(|| s.service_account.clone())
        })
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "default".into())
}

/// A Kubernetes quantity (`500m`, `2`, `128Mi`, `1G`) as a number.
pub fn parse_quantity(text: &str) -> Option<f64> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+'))
        .unwrap_or(text.len());
    let (number, suffix) = text.split_at(split);
    let number: f64 = number.parse().ok()?;
    let factor = match suffix {
        "" => 1.0,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024.0,
        "Mi" => 1024.0 * 1024.0,
        "Gi" => 1024.0 * 1024.0 * 1024.0,
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        _ => return None,
    };
    Some(number * factor)
}

/// What the node has, standing in for unset limits (as kubelet uses node allocatable).
fn node_capacity(resource: &str) -> f64 {
    match resource {
        "cpu" => std::thread::available_parallelism().map_or(1.0, |n| n.get() as f64),
        "memory" => {
            // SAFETY: sysconf has no preconditions.
            let pages = unsafe { libc::sysconf(libc::_SC_PHYS_PAGES) };
            // SAFETY: as above.
            let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
            (pages.max(0) as f64) * (size.max(0) as f64)
        }
        _ => 0.0,
    }
}

/// The value of `resourceFieldRef` (`limits.cpu`, `requests.memory`, ...) with its divisor,
/// rounded up as kubelet does.
pub fn resource(
    container: &Container,
    resource: &str,
    divisor: Option<&str>,
) -> Result<String, String> {
    let (kind, name) = resource
        .split_once('.')
        .ok_or_else(|| format!("unsupported resource {resource:?}"))?;
    let resources = container.resources.as_ref();
    let lookup = |which: Option<
        &BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
    >| {
        which
            .and_then(|m| m.get(name))
            .and_then(|q| parse_quantity(&q.0))
    };
    let limits = lookup(resources.and_then(|r| r.limits.as_ref()));
    let requests = lookup(resources.and_then(|r| r.requests.as_ref()));
    let value = match kind {
        "limits" => limits.unwrap_or_else(|| node_capacity(name)),
        "requests" => requests.or(limits).unwrap_or(0.0),
        _ => return Err(format!("unsupported resource {resource:?}")),
    };
    let divisor = divisor
        .map(|d| parse_quantity(d).ok_or_else(|| format!("bad divisor {d:?}")))
        .transpose()?
        .filter(|d| *d > 0.0)
        .unwrap_or(1.0);
    Ok(format!("{}", (value / divisor).ceil() as i64))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{PodSpec, ResourceRequirements};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn pod() -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some("web-0".into()),
                namespace: Some("ns".into()),
                uid: Some("u-1".into()),
                labels: Some(BTreeMap::from([
                    ("app".to_owned(), "web".to_owned()),
                    ("tier".to_owned(), "a \"b\"".to_owned()),
                ])),
                annotations: Some(BTreeMap::from([("note".to_owned(), "x".to_owned())])),
                ..Default::default()
            },
            spec: Some(PodSpec {
                service_account_name: Some("runner".into()),
                node_name: Some("node-1".into()),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn fields() {
        let pod = pod();
        let facts = PodFacts {
            pod: &pod,
            pod_ip: Some(Ipv4Addr::new(10, 0, 0, 2)),
            host_ip: Ipv4Addr::new(10, 0, 0, 1),
            node_name: "agent",
        };
        let get = |path: &str| field(path, &facts).expect(path);
        assert_eq!(get("metadata.name"), "web-0");
        assert_eq!(get("metadata.namespace"), "ns");
        assert_eq!(get("metadata.uid"), "u-1");
        assert_eq!(get("metadata.labels['app']"), "web");
        assert_eq!(get("metadata.labels['missing']"), "");
        assert_eq!(get("metadata.annotations['note']"), "x");
        assert_eq!(
            get("metadata.labels"),
            "app=\"web\"\ntier=\"a \\\"b\\\"\"\n"
        );
        assert_eq!(get("spec.nodeName"), "node-1");
        assert_eq!(get("spec.serviceAccountName"), "runner");
        assert_eq!(get("status.podIP"), "10.0.0.2");
        assert_eq!(get("status.hostIP"), "10.0.0.1");
        assert!(field("spec.containers", &facts).is_err());
    }

    #[test]
    fn resources() {
        let container = Container {
            name: "c".into(),
            resources: Some(ResourceRequirements {
                limits: Some(BTreeMap::from([
                    ("cpu".to_owned(), Quantity("1500m".into())),
                    ("memory".to_owned(), Quantity("128Mi".into())),
                ])),
                requests: Some(BTreeMap::from([(
                    "cpu".to_owned(),
                    Quantity("250m".into()),
                )])),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(resource(&container, "limits.cpu", None), Ok("2".into()));
        assert_eq!(
            resource(&container, "limits.cpu", Some("1m")),
            Ok("1500".into())
        );
        assert_eq!(
            resource(&container, "requests.cpu", Some("1m")),
            Ok("250".into())
        );
        assert_eq!(
            resource(&container, "limits.memory", Some("1Mi")),
            Ok("128".into())
        );
        assert_eq!(
            resource(&container, "requests.memory", None),
            Ok("134217728".into())
        );
        assert!(resource(&container, "bogus", None).is_err());
        assert_eq!(parse_quantity("1Gi"), Some(1073741824.0));
        assert_eq!(parse_quantity("x"), None);
    }
}
