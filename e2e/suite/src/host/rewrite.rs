//! Kubeconfigs written for in-cluster clients name service addresses such as
//! `https://root-rootshard.kcp.svc.cluster.local:6443`. From outside the cluster the suite
//! connects to another address (a service's virtual IP, a port-forward) and keeps the original
//! host name as the TLS server name, so certificate verification is exactly what an in-cluster
//! client gets.

use serde_json::Value;

/// `<service>.<namespace>` of a URL host `<service>.<namespace>.svc[.<domain>]`.
pub fn service_of(host: &str) -> Option<(String, String)> {
    let mut parts = host.split('.');
    let service = parts.next()?;
    let namespace = parts.next()?;
    (parts.next()? == "svc").then(|| (service.to_owned(), namespace.to_owned()))
}

/// Splits `https://host:port/path` into (host, port, path).
pub fn split_url(url: &str) -> Option<(String, u16, String)> {
    let rest = url.strip_prefix("https://")?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    let (host, port) = match authority.rsplit_once(':') {
        Some((host, port)) => (host, port.parse().ok()?),
        None => (authority, 443),
    };
    Some((host.to_owned(), port, path.to_owned()))
}

/// Rewrites every cluster's server with `connect(host, port) -> (host, port)`, setting
/// `tls-server-name` to the original host when it changes.
pub fn rewrite_servers(
    kubeconfig: &str,
    mut connect: impl FnMut(&str, u16) -> Result<(String, u16), String>,
) -> Result<String, String> {
    let mut config: Value =
        yaml_serde::from_str(kubeconfig).map_err(|e| format!("kubeconfig is not YAML: {e}"))?;
    let clusters = config
        .get_mut("clusters")
        .and_then(Value::as_array_mut)
        .ok_or("kubeconfig without clusters")?;
    for entry in clusters {
        let cluster = &mut entry["cluster"];
        let Some(server) = cluster["server"].as_str().map(str::to_owned) else {
            continue;
        };
        let (host, port, path) =
            split_url(&server).ok_or_else(|| format!("unexpected server URL {server}"))?;
        let (to_host, to_port) = connect(&host, port)?;
        if to_host != host || to_port != port {
            cluster["server"] = Value::from(format!("https://{to_host}:{to_port}{path}"));
            cluster["tls-server-name"] = Value::from(host);
        }
    }
    yaml_serde::to_string(&config).map_err(|e| format!("writing kubeconfig: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_hosts_are_recognised() {
        assert_eq!(
            service_of("root-rootshard.kcp.svc.cluster.local"),
            Some(("root-rootshard".into(), "kcp".into()))
        );
        assert_eq!(service_of("api.example.com"), None);
    }

    #[test]
    fn servers_are_rewritten_with_the_original_name_kept_for_tls() {
        let config = "clusters:\n- name: a\n  cluster:\n    server: https://s.ns.svc.cluster.local:6443/clusters/root\n";
        let out = rewrite_servers(config, |_, _| Ok(("10.0.0.9".into(), 7000))).expect("rewritten");
        let value: Value = yaml_serde::from_str(&out).expect("yaml");
        assert_eq!(
            value["clusters"][0]["cluster"]["server"],
            "https://10.0.0.9:7000/clusters/root"
        );
        assert_eq!(
            value["clusters"][0]["cluster"]["tls-server-name"],
            "s.ns.svc.cluster.local"
        );
    }
}
