//! Whether an external etcd answers at all, so a component that never becomes ready because its
//! etcd is unreachable says so in its conditions instead of only "0 of 1 replicas ready".
//!
//! Upstream kcp-operator reports nothing about external etcd; the kcp server itself fails its
//! start-up with "context deadline exceeded" against etcd, visible only in the pod's log. The
//! probe is a plain TCP connect from the operator's network (no TLS, no etcd request): it tells a
//! wrong host or port, or a firewall, apart from a slow start; it cannot see what only the pods'
//! network sees. [`targets`] is the pure part (which host and port each endpoint names),
//! [`probe`] the I/O.

use std::time::Duration;

use http::uri::{Scheme, Uri};
use tokio::net::TcpStream;

/// How long one endpoint gets to accept a connection.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// etcd's client port, used when an endpoint names none.
const DEFAULT_CLIENT_PORT: u16 = 2379;

/// One endpoint as the probe dials it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// The endpoint as written in the spec, for messages.
    pub endpoint: String,
    /// Host name or IP address (IPv6 without brackets).
    pub host: String,
    pub port: u16,
}

/// The host and port of every `http(s)://host[:port][/]` endpoint (validated by the spec's
/// validation, parsed as a URI by `http`); anything else, a path included, is left out.
pub fn targets(endpoints: &[String]) -> Vec<Target> {
    endpoints
        .iter()
        .filter_map(|endpoint| {
            let uri: Uri = endpoint.parse().ok()?;
            let plain = uri.scheme() == Some(&Scheme::HTTP) || uri.scheme() == Some(&Scheme::HTTPS);
            let bare = uri.path() == "/" && uri.query().is_none();
            let host = uri.host()?;
            let host = host
                .strip_prefix('[')
                .and_then(|inner| inner.strip_suffix(']'))
                .unwrap_or(host);
            (plain && bare && !host.is_empty()).then(|| Target {
                endpoint: endpoint.clone(),
                host: host.to_owned(),
                port: uri.port_u16().unwrap_or(DEFAULT_CLIENT_PORT),
            })
        })
        .collect()
}

/// `Ok` as soon as one target accepts a TCP connection; otherwise a message naming every
/// endpoint and why it failed. No targets is `Ok`: there is nothing to complain about.
pub async fn probe(targets: &[Target], timeout: Duration) -> Result<(), String> {
    let mut failures = Vec::with_capacity(targets.len());
    for target in targets {
        let connect = TcpStream::connect((target.host.as_str(), target.port));
        match tokio::time::timeout(timeout, connect).await {
            Ok(Ok(_stream)) => return Ok(()),
            Ok(Err(error)) => failures.push(format!("{}: {error}", target.endpoint)),
            Err(_) => failures.push(format!(
                "{}: no answer within {} s",
                target.endpoint,
                timeout.as_secs()
            )),
        }
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "no etcd endpoint accepts connections from the operator: {}",
            failures.join("; ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(endpoint: &str, host: &str, port: u16) -> Target {
        Target {
            endpoint: endpoint.into(),
            host: host.into(),
            port,
        }
    }

    #[test]
    fn targets_name_host_and_port_with_the_etcd_default() {
        let endpoints: Vec<String> = [
            "https://etcd.kcp.svc.cluster.local:2379",
            "http://127.0.0.1:12379/",
            "https://etcd",
            "https://[::1]:2380",
            "https://[::1]",
            "not a url",
            "https://etcd:2379/prefix",
            "unix:///run/etcd.sock",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(
            targets(&endpoints),
            vec![
                target(
                    "https://etcd.kcp.svc.cluster.local:2379",
                    "etcd.kcp.svc.cluster.local",
                    2379
                ),
                target("http://127.0.0.1:12379/", "127.0.0.1", 12379),
                target("https://etcd", "etcd", 2379),
                target("https://[::1]:2380", "::1", 2380),
                target("https://[::1]", "::1", 2379),
            ]
        );
    }

    #[tokio::test]
    async fn probe_tells_a_listening_socket_from_a_closed_one() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let open = listener.local_addr().expect("addr").port();
        let closed = {
            let gone = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
            gone.local_addr().expect("addr").port()
        };
        let closed_endpoint = format!("http://127.0.0.1:{closed}");
        let open_endpoint = format!("http://127.0.0.1:{open}");

        let error = probe(
            &targets(std::slice::from_ref(&closed_endpoint)),
            PROBE_TIMEOUT,
        )
        .await
        .expect_err("nothing listens on a closed port");
        assert!(error.contains(&closed_endpoint), "{error}");
        assert!(error.contains("refused"), "{error}");

        probe(&targets(&[closed_endpoint, open_endpoint]), PROBE_TIMEOUT)
            .await
            .expect("one listening endpoint is enough");
        assert_eq!(probe(&[], PROBE_TIMEOUT).await, Ok(()));
    }
}
