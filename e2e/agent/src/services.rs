//! Services: which virtual IP a Service has, which pods are its endpoints and on which ports.
//!
//! The host API stores Services but allocates no cluster IPs, and its addresses (if a manifest
//! sets one) mean nothing on this machine. The agent gives each non-headless Service an address
//! from the top of the pod subnet: written to `spec.clusterIP`/`spec.clusterIPs` when those are
//! empty, or recorded in the annotation `e2e.kcp.io/virtual-ip` when the Service already names an
//! address outside the subnet. Endpoints are pods selected by the Service that are ready (or merely
//! running, for `publishNotReadyAddresses`), with target ports resolved by number or container
//! port name. Everything here is pure; the proxies live in `proxy`.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};

use k8s_openapi::api::core::v1::{Container, Service, ServicePort};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::env::ServiceLink;
use crate::ipam::Subnet;
use crate::selector;

/// Where the agent records a virtual IP it could not write to `spec.clusterIP`.
pub const VIP_ANNOTATION: &str = "e2e.kcp.io/virtual-ip";

/// `namespace/name`.
pub fn key(service: &Service) -> String {
    format!(
        "{}/{}",
        service.metadata.namespace.as_deref().unwrap_or_default(),
        service.metadata.name.as_deref().unwrap_or_default()
    )
}

pub fn is_headless(service: &Service) -> bool {
    service.spec.as_ref().and_then(|s| s.cluster_ip.as_deref()) == Some("None")
}

pub fn is_external_name(service: &Service) -> bool {
    service.spec.as_ref().and_then(|s| s.type_.as_deref()) == Some("ExternalName")
}

/// Whether the agent gives `service` a virtual IP and proxies.
pub fn wants_vip(service: &Service) -> bool {
    !is_headless(service) && !is_external_name(service)
}

/// The address the Service asks for (`spec.clusterIP`), when it is an IPv4 address.
pub fn requested_ip(service: &Service) -> Option<Ipv4Addr> {
    service
        .spec
        .as_ref()
        .and_then(|s| s.cluster_ip.as_deref())
        .and_then(|ip| ip.parse().ok())
}

/// The virtual IP the Service has on this node (annotation first, then `spec.clusterIP`), when
/// it is in the subnet.
pub fn effective_vip(service: &Service, subnet: Subnet) -> Option<Ipv4Addr> {
    let annotated = service
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(VIP_ANNOTATION))
        .and_then(|ip| ip.parse::<Ipv4Addr>().ok());
    annotated
        .or_else(|| requested_ip(service))
        .filter(|ip| subnet.contains(*ip))
}

/// How the agent records `vip` for `service`: a patch of `spec.clusterIP(s)` when the Service
/// asks for no address, of the annotation otherwise; None when the object already says so.
pub fn vip_patch(service: &Service, vip: Ipv4Addr) -> Option<serde_json::Value> {
    let requested = service
        .spec
        .as_ref()
        .and_then(|s| s.cluster_ip.clone())
        .unwrap_or_default();
    if requested.is_empty() {
        return Some(serde_json::json!({
            "spec": { "clusterIP": vip.to_string(), "clusterIPs": [vip.to_string()] }
        }));
    }
    if requested == vip.to_string() {
        return None;
    }
    let annotated = service
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(VIP_ANNOTATION));
    if annotated.map(String::as_str) == Some(vip.to_string().as_str()) {
        return None;
    }
    Some(serde_json::json!({
        "metadata": { "annotations": { VIP_ANNOTATION: vip.to_string() } }
    }))
}

/// The TCP ports of a Service: (name, port, protocol).
fn ports(service: &Service) -> Vec<&ServicePort> {
    service
        .spec
        .as_ref()
        .and_then(|s| s.ports.as_ref())
        .map(|ports| ports.iter().collect())
        .unwrap_or_default()
}

/// The Service as environment variables describe it.
pub fn service_link(service: &Service, subnet: Subnet) -> Option<ServiceLink> {
    if !wants_vip(service) {
        return None;
    }
    let ip = effective_vip(service, subnet)?;
    Some(ServiceLink {
        name: service.metadata.name.clone()?,
        ip,
        ports: ports(service)
            .into_iter()
            .filter_map(|p| {
                Some((
                    p.name.clone(),
                    u16::try_from(p.port).ok()?,
                    p.protocol.clone().unwrap_or_else(|| "TCP".into()),
                ))
            })
            .collect(),
    })
}

/// A pod as endpoint selection sees it.
#[derive(Debug, Clone)]
pub struct PodView {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub labels: BTreeMap<String, String>,
    pub ip: Ipv4Addr,
    pub ready: bool,
    pub alive: bool,
    pub hostname: String,
    pub subdomain: Option<String>,
    pub containers: Vec<Container>,
}

/// A pod backing a Service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub pod: String,
    pub uid: String,
    pub ip: Ipv4Addr,
    pub ready: bool,
    /// Set when the pod's subdomain is the Service (headless per-pod names).
    pub hostname: Option<String>,
    /// Service port -> target port on this pod (ports that do not resolve are left out).
    pub ports: BTreeMap<u16, u16>,
}

/// The target port of `port` on a pod with `containers`.
pub fn target_port(port: &ServicePort, containers: &[Container]) -> Option<u16> {
    match &port.target_port {
        None => u16::try_from(port.port).ok(),
        Some(IntOrString::Int(0)) => u16::try_from(port.port).ok(),
        Some(IntOrString::Int(n)) => u16::try_from(*n).ok(),
        Some(IntOrString::String(name)) => containers
            .iter()
            .flat_map(|c| c.ports.iter().flatten())
            .find(|p| p.name.as_deref() == Some(name.as_str()))
            .and_then(|p| u16::try_from(p.container_port).ok()),
    }
}

/// The endpoints of `service` among `pods`, sorted by IP.
pub fn endpoints(service: &Service, pods: &[PodView]) -> Vec<Endpoint> {
    let Some(spec) = &service.spec else {
        return Vec::new();
    };
    let Some(selector) = spec.selector.as_ref().filter(|s| !s.is_empty()) else {
        return Vec::new();
    };
    let namespace = service.metadata.namespace.as_deref().unwrap_or_default();
    let name = service.metadata.name.as_deref().unwrap_or_default();
    let publish_not_ready = spec.publish_not_ready_addresses.unwrap_or(false);
    let mut result: Vec<Endpoint> = pods
        .iter()
        .filter(|p| {
            p.namespace == namespace && p.alive && selector::map_matches(selector, &p.labels)
        })
        .map(|p| Endpoint {
            pod: p.name.clone(),
            uid: p.uid.clone(),
            ip: p.ip,
            ready: p.ready || publish_not_ready,
            hostname: (p.subdomain.as_deref() == Some(name)).then(|| p.hostname.clone()),
            ports: ports(service)
                .into_iter()
                .filter_map(|sp| {
                    Some((
                        u16::try_from(sp.port).ok()?,
                        target_port(sp, &p.containers)?,
                    ))
                })
                .collect(),
        })
        .collect();
    result.sort_by_key(|e| e.ip);
    result
}

/// For each Service port (TCP), the ready backends.
pub fn backends(service: &Service, endpoints: &[Endpoint]) -> BTreeMap<u16, Vec<SocketAddr>> {
    ports(service)
        .into_iter()
        .filter(|p| p.protocol.as_deref().unwrap_or("TCP") == "TCP")
        .filter_map(|p| u16::try_from(p.port).ok())
        .map(|port| {
            let list = endpoints
                .iter()
                .filter(|e| e.ready)
                .filter_map(|e| e.ports.get(&port).map(|t| SocketAddr::from((e.ip, *t))))
                .collect();
            (port, list)
        })
        .collect()
}

/// Ready and not-ready addresses of one Endpoints subset.
type Addresses = (Vec<serde_json::Value>, Vec<serde_json::Value>);

/// The `subsets` of the Endpoints object (grouped by identical port mappings, as the endpoints
/// controller does).
pub fn endpoints_subsets(service: &Service, endpoints: &[Endpoint]) -> serde_json::Value {
    let service_ports = ports(service);
    let mut groups: BTreeMap<Vec<(u16, u16)>, Addresses> = BTreeMap::new();
    for endpoint in endpoints {
        let mapping: Vec<(u16, u16)> = endpoint.ports.iter().map(|(k, v)| (*k, *v)).collect();
        if mapping.is_empty() {
            continue;
        }
        let mut address = serde_json::json!({
            "ip": endpoint.ip.to_string(),
            "targetRef": {
                "kind": "Pod",
                "name": endpoint.pod,
                "namespace": service.metadata.namespace,
                "uid": endpoint.uid,
            },
        });
        if let Some(hostname) = &endpoint.hostname {
            address["hostname"] = serde_json::json!(hostname);
        }
        let group = groups.entry(mapping).or_default();
        if endpoint.ready {
            group.0.push(address);
        } else {
            group.1.push(address);
        }
    }
    let subsets: Vec<serde_json::Value> = groups
        .into_iter()
        .map(|(mapping, (ready, not_ready))| {
            let ports: Vec<serde_json::Value> = mapping
                .iter()
                .filter_map(|(port, target)| {
                    let sp = service_ports
                        .iter()
                        .find(|p| u16::try_from(p.port).ok() == Some(*port))?;
                    let mut entry = serde_json::json!({
                        "port": target,
                        "protocol": sp.protocol.clone().unwrap_or_else(|| "TCP".into()),
                    });
                    if let Some(name) = sp.name.as_ref().filter(|n| !n.is_empty()) {
                        entry["name"] = serde_json::json!(name);
                    }
                    Some(entry)
                })
                .collect();
            let mut subset = serde_json::json!({ "ports": ports });
            if !ready.is_empty() {
                subset["addresses"] = serde_json::json!(ready);
            }
            if !not_ready.is_empty() {
                subset["notReadyAddresses"] = serde_json::json!(not_ready);
            }
            subset
        })
        .collect();
    serde_json::json!(subsets)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{ContainerPort, ServiceSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn service(cluster_ip: Option<&str>, publish_not_ready: bool) -> Service {
        Service {
            metadata: ObjectMeta {
                name: Some("web".into()),
                namespace: Some("ns".into()),
                ..Default::default()
            },
            spec: Some(ServiceSpec {
                cluster_ip: cluster_ip.map(str::to_owned),
                selector: Some(BTreeMap::from([("app".to_owned(), "web".to_owned())])),
                publish_not_ready_addresses: Some(publish_not_ready),
                ports: Some(vec![
                    ServicePort {
                        name: Some("http".into()),
                        port: 80,
                        target_port: Some(IntOrString::String("http".into())),
                        ..Default::default()
                    },
                    ServicePort {
                        name: Some("metrics".into()),
                        port: 9090,
                        ..Default::default()
                    },
                ]),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn pod(name: &str, last: u8, ready: bool, subdomain: Option<&str>) -> PodView {
        PodView {
            namespace: "ns".into(),
            name: name.into(),
            uid: format!("uid-{name}"),
            labels: BTreeMap::from([("app".to_owned(), "web".to_owned())]),
            ip: Ipv4Addr::new(10, 0, 0, last),
            ready,
            alive: true,
            hostname: name.into(),
            subdomain: subdomain.map(str::to_owned),
            containers: vec![Container {
                name: "c".into(),
                ports: Some(vec![ContainerPort {
                    name: Some("http".into()),
                    container_port: 8080,
                    ..Default::default()
                }]),
                ..Default::default()
            }],
        }
    }

    #[test]
    fn vip_recording() {
        let subnet = Subnet::parse("10.0.0.0/24").expect("subnet");
        let vip = Ipv4Addr::new(10, 0, 0, 254);
        let empty = service(None, false);
        assert_eq!(
            vip_patch(&empty, vip),
            Some(
                serde_json::json!({"spec": {"clusterIP": "10.0.0.254", "clusterIPs": ["10.0.0.254"]}})
            )
        );
        let outside = service(Some("10.96.0.10"), false);
        assert_eq!(
            vip_patch(&outside, vip),
            Some(serde_json::json!({"metadata": {"annotations": {VIP_ANNOTATION: "10.0.0.254"}}}))
        );
        assert_eq!(effective_vip(&outside, subnet), None);
        let mut annotated = outside.clone();
        annotated.metadata.annotations = Some(BTreeMap::from([(
            VIP_ANNOTATION.to_owned(),
            "10.0.0.254".to_owned(),
        )]));
        assert_eq!(vip_patch(&annotated, vip), None);
        assert_eq!(effective_vip(&annotated, subnet), Some(vip));
        let inside = service(Some("10.0.0.254"), false);
        assert_eq!(vip_patch(&inside, vip), None);
        assert!(!wants_vip(&service(Some("None"), false)));
    }

    #[test]
    fn endpoints_and_backends() {
        let svc = service(Some("10.0.0.254"), false);
        let pods = vec![
            pod("b", 3, false, None),
            pod("a", 2, true, Some("web")),
            PodView {
                namespace: "other".into(),
                ..pod("x", 9, true, None)
            },
        ];
        let eps = endpoints(&svc, &pods);
        assert_eq!(eps.len(), 2);
        assert_eq!(eps[0].ip, Ipv4Addr::new(10, 0, 0, 2));
        assert_eq!(eps[0].hostname.as_deref(), Some("a"));
        assert_eq!(eps[0].ports, BTreeMap::from([(80, 8080), (9090, 9090)]));
        assert!(!eps[1].ready);
        let backends = backends(&svc, &eps);
        assert_eq!(
            backends[&80],
            vec!["10.0.0.2:8080".parse::<SocketAddr>().expect("addr")]
        );
        assert_eq!(backends[&9090].len(), 1);
        // publishNotReadyAddresses makes the not-ready pod an endpoint.
        let eps = endpoints(&service(Some("None"), true), &pods);
        assert!(eps.iter().all(|e| e.ready));
        let subsets = endpoints_subsets(&svc, &endpoints(&svc, &pods));
        assert_eq!(subsets[0]["addresses"][0]["ip"], "10.0.0.2");
        assert_eq!(subsets[0]["notReadyAddresses"][0]["ip"], "10.0.0.3");
        assert_eq!(subsets[0]["ports"][0]["port"], 8080);
        assert_eq!(subsets[0]["ports"][0]["name"], "http");
    }
}
