//! The `/etc/hosts` each pod sees: how pods find Services and each other without a DNS server.
//!
//! A real cluster answers `<svc>.<ns>.svc.<domain>` from cluster DNS and expands short names with
//! the search path in `resolv.conf`. Hosts files have no search path, so every form a client may
//! use is listed: `<svc>` (same namespace only), `<svc>.<ns>`, `<svc>.<ns>.svc` and
//! `<svc>.<ns>.svc.<domain>`, and for headless Services each endpoint pod's
//! `<hostname>.<subdomain>` in the same forms. The file is rewritten in place (same inode) because
//! it is bind-mounted into the pod's mount namespace: replacing it would leave the pod on the old
//! file.

use std::fmt::Write as _;
use std::io::Write as _;
use std::net::Ipv4Addr;
use std::path::Path;

/// One Service as the hosts files show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceNames {
    pub namespace: String,
    pub name: String,
    /// The virtual IP (None for headless Services).
    pub vip: Option<Ipv4Addr>,
    /// Headless Services: the published endpoint pods.
    pub endpoints: Vec<EndpointNames>,
}

/// An endpoint pod of a headless Service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointNames {
    pub ip: Ipv4Addr,
    /// `spec.hostname` (StatefulSet pods: the pod name) when `spec.subdomain` names the Service.
    pub hostname: Option<String>,
}

/// The pod whose file it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodNames {
    pub namespace: String,
    pub hostname: String,
    pub subdomain: Option<String>,
    pub ip: Option<Ipv4Addr>,
    /// `spec.hostAliases`: address and names.
    pub aliases: Vec<(String, Vec<String>)>,
}

/// The names a short name `short` (e.g. `web` or `web-0.web`) in namespace `ns` is known by.
fn forms(short: &str, ns: &str, domain: &str, same_namespace: bool) -> Vec<String> {
    let mut names = vec![
        format!("{short}.{ns}.svc.{domain}"),
        format!("{short}.{ns}.svc"),
        format!("{short}.{ns}"),
    ];
    if same_namespace {
        names.push(short.to_owned());
    }
    names
}

/// The whole file for `pod`.
pub fn render(
    pod: &PodNames,
    services: &[ServiceNames],
    api_server: Option<Ipv4Addr>,
    domain: &str,
) -> String {
    let mut out = String::from(
        "# Kubernetes-managed hosts file (kcp-node-agent).\n\
         127.0.0.1\tlocalhost\n\
         ::1\tlocalhost ip6-localhost ip6-loopback\n\
         fe00::0\tip6-localnet\n\
         fe00::0\tip6-mcastprefix\n\
         fe00::1\tip6-allnodes\n\
         fe00::2\tip6-allrouters\n",
    );
    if let Some(ip) = pod.ip {
        match &pod.subdomain {
            Some(subdomain) => {
                let _ = writeln!(
                    out,
                    "{ip}\t{}.{subdomain}.{}.svc.{domain}\t{}",
                    pod.hostname, pod.namespace, pod.hostname
                );
            }
            None => {
                let _ = writeln!(out, "{ip}\t{}", pod.hostname);
            }
        }
    }
    let mut lines: Vec<(String, Vec<String>)> = Vec::new();
    let defines_kubernetes = services
        .iter()
        .any(|s| s.namespace == "default" && s.name == "kubernetes");
    if let (Some(ip), false) = (api_server, defines_kubernetes) {
        lines.push((
            ip.to_string(),
            forms("kubernetes", "default", domain, pod.namespace == "default"),
        ));
    }
    let mut services: Vec<&ServiceNames> = services.iter().collect();
    services.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    for service in services {
        let same = service.namespace == pod.namespace;
        if let Some(vip) = service.vip {
            lines.push((
                vip.to_string(),
                forms(&service.name, &service.namespace, domain, same),
            ));
            continue;
        }
        let mut endpoints = service.endpoints.clone();
        endpoints.sort_by_key(|e| e.ip);
        for endpoint in &endpoints {
            lines.push((
                endpoint.ip.to_string(),
                forms(&service.name, &service.namespace, domain, same),
            ));
        }
        for endpoint in &endpoints {
            if let Some(hostname) = &endpoint.hostname {
                let short = format!("{hostname}.{}", service.name);
                lines.push((
                    endpoint.ip.to_string(),
                    forms(&short, &service.namespace, domain, same),
                ));
            }
        }
    }
    for (ip, names) in lines {
        let _ = writeln!(out, "{ip}\t{}", names.join(" "));
    }
    if !pod.aliases.is_empty() {
        out.push_str("# Entries added by HostAliases.\n");
        for (ip, names) in &pod.aliases {
            let _ = writeln!(out, "{ip}\t{}", names.join("\t"));
        }
    }
    out
}

/// The pod's `/etc/resolv.conf`. There is no cluster DNS server: every cluster name is in the
/// hosts file, and the only nameserver is the pod's own loopback, so an unknown name fails at
/// once instead of timing out or leaving the machine. `spec.dnsConfig` adds to it.
pub fn resolv_conf(
    namespace: &str,
    domain: &str,
    dns: Option<&k8s_openapi::api::core::v1::PodDNSConfig>,
) -> String {
    let mut nameservers = vec!["127.0.0.1".to_owned()];
    let mut searches = vec![
        format!("{namespace}.svc.{domain}"),
        format!("svc.{domain}"),
        domain.to_owned(),
    ];
    let mut options = vec!["ndots:5".to_owned()];
    if let Some(dns) = dns {
        nameservers.extend(dns.nameservers.iter().flatten().cloned());
        searches.extend(dns.searches.iter().flatten().cloned());
        options.extend(dns.options.iter().flatten().map(|o| match &o.value {
            Some(value) => format!("{}:{value}", o.name.as_deref().unwrap_or_default()),
            None => o.name.clone().unwrap_or_default(),
        }));
    }
    let mut out =
        String::from("# kcp-node-agent: no cluster DNS; cluster names are in /etc/hosts.\n");
    for server in nameservers {
        let _ = writeln!(out, "nameserver {server}");
    }
    let _ = writeln!(out, "search {}", searches.join(" "));
    let _ = writeln!(out, "options {}", options.join(" "));
    out
}

/// Replaces the content of `path` in place (same inode), creating it when missing.
pub fn write_in_place(path: &Path, content: &str) -> std::io::Result<()> {
    if std::fs::read_to_string(path).is_ok_and(|old| old == content) {
        return Ok(());
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)?;
    file.write_all(content.as_bytes())?;
    file.flush()
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::MetadataExt;

    use super::*;

    fn pod(subdomain: Option<&str>) -> PodNames {
        PodNames {
            namespace: "ns".into(),
            hostname: "etcd-0".into(),
            subdomain: subdomain.map(str::to_owned),
            ip: Some(Ipv4Addr::new(10, 0, 0, 2)),
            aliases: vec![("10.9.9.9".into(), vec!["a.example".into(), "b".into()])],
        }
    }

    #[test]
    fn services_and_headless_pods() {
        let services = vec![
            ServiceNames {
                namespace: "ns".into(),
                name: "web".into(),
                vip: Some(Ipv4Addr::new(10, 0, 0, 254)),
                endpoints: vec![],
            },
            ServiceNames {
                namespace: "other".into(),
                name: "api".into(),
                vip: Some(Ipv4Addr::new(10, 0, 0, 253)),
                endpoints: vec![],
            },
            ServiceNames {
                namespace: "ns".into(),
                name: "etcd".into(),
                vip: None,
                endpoints: vec![
                    EndpointNames {
                        ip: Ipv4Addr::new(10, 0, 0, 3),
                        hostname: Some("etcd-1".into()),
                    },
                    EndpointNames {
                        ip: Ipv4Addr::new(10, 0, 0, 2),
                        hostname: Some("etcd-0".into()),
                    },
                ],
            },
        ];
        let text = render(
            &pod(Some("etcd")),
            &services,
            Some(Ipv4Addr::new(10, 0, 0, 1)),
            "cluster.local",
        );
        let expected = "# Kubernetes-managed hosts file (kcp-node-agent).
127.0.0.1\tlocalhost
::1\tlocalhost ip6-localhost ip6-loopback
fe00::0\tip6-localnet
fe00::0\tip6-mcastprefix
fe00::1\tip6-allnodes
fe00::2\tip6-allrouters
10.0.0.2\tetcd-0.etcd.ns.svc.cluster.local\tetcd-0
10.0.0.1\tkubernetes.default.svc.cluster.local kubernetes.default.svc kubernetes.default
10.0.0.2\tetcd.ns.svc.cluster.local etcd.ns.svc etcd.ns etcd
10.0.0.3\tetcd.ns.svc.cluster.local etcd.ns.svc etcd.ns etcd
10.0.0.2\tetcd-0.etcd.ns.svc.cluster.local etcd-0.etcd.ns.svc etcd-0.etcd.ns etcd-0.etcd
10.0.0.3\tetcd-1.etcd.ns.svc.cluster.local etcd-1.etcd.ns.svc etcd-1.etcd.ns etcd-1.etcd
10.0.0.254\tweb.ns.svc.cluster.local web.ns.svc web.ns web
10.0.0.253\tapi.other.svc.cluster.local api.other.svc api.other
# Entries added by HostAliases.
10.9.9.9\ta.example\tb
";
        // Services are sorted by namespace then name: ns/etcd, ns/web, other/api.
        assert_eq!(text, expected);
        let plain = render(&pod(None), &[], None, "cluster.local");
        assert!(plain.contains("10.0.0.2\tetcd-0\n"), "{plain}");
    }

    #[test]
    fn resolver_points_nowhere() {
        let text = resolv_conf("ns", "cluster.local", None);
        assert_eq!(
            text,
            "# kcp-node-agent: no cluster DNS; cluster names are in /etc/hosts.\n\
             nameserver 127.0.0.1\n\
             search ns.svc.cluster.local svc.cluster.local cluster.local\n\
             options ndots:5\n"
        );
    }

    #[test]
    fn rewrites_keep_the_inode() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("hosts");
        write_in_place(&path, "a long first version\n").expect("first");
        let inode = std::fs::metadata(&path).expect("meta").ino();
        write_in_place(&path, "short\n").expect("second");
        assert_eq!(std::fs::metadata(&path).expect("meta").ino(), inode);
        assert_eq!(std::fs::read_to_string(&path).expect("read"), "short\n");
    }
}
