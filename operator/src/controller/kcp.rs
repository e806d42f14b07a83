//! Connections into kcp itself rather than the host cluster: the Shard finalizer deletes the
//! shard's registration in the root shard, Kubeconfigs manage ClusterRoleBindings in their
//! workspace. The operator authenticates with its own client certificate (the root shard's
//! `kcp-operator` certificate, group `system:kcp:admin`) and trusts the root shard's server CA.
//!
//! Reaching kcp goes through a [`Connector`], so tests hand out a client of a mock API instead.

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use kube::Client;
use serde_json::json;
use x509_parser::pem::Pem;

use crate::naming::Certificate;
use crate::validate::RootShardFacts;

use super::certificates::read_material;
use super::{Context, Error};

/// Connections into kcp give up quickly: an unreachable root shard must not stall a reconcile.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const READ_TIMEOUT: Duration = Duration::from_secs(30);

/// Where and as whom to talk to kcp.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// Server URL including `/clusters/<workspace>`.
    pub url: String,
    pub ca_pem: String,
    pub cert_pem: String,
    pub key_pem: String,
}

/// Turns an endpoint into a client.
pub trait Connector: Send + Sync {
    fn connect(&self, endpoint: &Endpoint) -> Result<Client, Error>;
}

/// Connects over the network with the endpoint's certificates.
#[derive(Clone, Copy, Debug, Default)]
pub struct Direct;

impl Connector for Direct {
    fn connect(&self, endpoint: &Endpoint) -> Result<Client, Error> {
        let url = endpoint
            .url
            .parse()
            .map_err(|_| Error::Invalid(format!("invalid kcp URL {:?}", endpoint.url)))?;
        let mut config = kube::Config::new(url);
        config.root_cert = Some(
            Pem::iter_from_buffer(endpoint.ca_pem.as_bytes())
                .filter_map(Result::ok)
                .map(|pem| pem.contents)
                .collect(),
        );
        config.auth_info = serde_json::from_value(json!({
            "client-certificate-data": STANDARD.encode(&endpoint.cert_pem),
            "client-key-data": STANDARD.encode(&endpoint.key_pem),
        }))
        .map_err(Error::Serialize)?;
        config.connect_timeout = Some(CONNECT_TIMEOUT);
        config.read_timeout = Some(READ_TIMEOUT);
        identify(&mut config);
        Client::try_from(config).map_err(Error::Kube)
    }
}

/// The endpoint for `workspace` behind `base_url`, with the operator's certificate of `root`.
pub async fn endpoint(
    ctx: &Context,
    root: &RootShardFacts,
    base_url: &str,
    workspace: &str,
) -> Result<Endpoint, Error> {
    let namespace = &root.names.namespace;
    let material = |name: String| async move {
        match read_material(&ctx.client, namespace, &name).await? {
            Some((_, Some(material))) => Ok(material),
            Some((_, None)) => Err(Error::BrokenCa(name)),
            None => Err(Error::MissingSecret(name)),
        }
    };
    let server_ca = material(root.names.certificate_secret(Certificate::ServerCa)).await?;
    let operator = material(root.names.certificate_secret(Certificate::Operator)).await?;
    Ok(Endpoint {
        url: format!("{}/clusters/{workspace}", base_url.trim_end_matches('/')),
        ca_pem: server_ca.cert_pem,
        cert_pem: operator.cert_pem,
        key_pem: operator.key_pem,
    })
}

/// Makes every request of a client from `config` carry the operator's User-Agent.
pub fn identify(config: &mut kube::Config) {
    config
        .headers
        .retain(|(name, _)| name != http::header::USER_AGENT);
    config.headers.push((
        http::header::USER_AGENT,
        http::HeaderValue::from_static(crate::naming::USER_AGENT),
    ));
}

/// Whether a kcp answer means the object is not there (any more).
pub fn is_not_found(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 404)
}

#[cfg(test)]
mod tests {
    use jiff::Timestamp;

    use super::*;
    use crate::pki::{Authority, CertificateRequest};

    fn endpoint(url: &str) -> Endpoint {
        let now = Timestamp::now();
        let ca = Authority::generate_root(&CertificateRequest::ca("ca"), now).expect("ca");
        let client = ca
            .issue(
                &CertificateRequest::client("system:kcp-operator", Vec::new()),
                now,
            )
            .expect("certificate");
        Endpoint {
            url: url.into(),
            ca_pem: ca.cert_pem().into(),
            cert_pem: client.cert_pem,
            key_pem: client.key_pem,
        }
    }

    #[tokio::test]
    async fn the_operator_certificate_makes_a_client() {
        let endpoint = endpoint("https://root.kcp.svc:6443/clusters/root");
        let client = Direct.connect(&endpoint).expect("client");
        assert_eq!(client.default_namespace(), "default");
    }

    /// Every request carries `kcp-operator/<version>`: a client from [`identify`]'s config sends
    /// one request to a loopback listener that reads its headers.
    #[tokio::test]
    async fn requests_carry_the_operator_user_agent() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let address = listener.local_addr().expect("address");
        let server = tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.expect("accept");
            let mut head = Vec::new();
            let mut buffer = [0u8; 1024];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                let read = stream.read(&mut buffer).await.expect("read");
                if read == 0 {
                    break;
                }
                head.extend_from_slice(&buffer[..read]);
            }
            let body = br#"{"kind":"Status","apiVersion":"v1","code":404,"message":"gone","reason":"NotFound","status":"Failure"}"#;
            let answer = format!(
                "HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            );
            stream.write_all(answer.as_bytes()).await.expect("write");
            stream.write_all(body).await.expect("write");
            String::from_utf8_lossy(&head).to_lowercase()
        });
        let mut config = kube::Config::new(format!("http://{address}").parse().expect("url"));
        identify(&mut config);
        let client = Client::try_from(config).expect("client");
        let api: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
            kube::Api::namespaced(client, "kcp");
        let _ = api.get_opt("x").await;
        let head = server.await.expect("server");
        let expected = format!("user-agent: kcp-operator/{}\r\n", env!("CARGO_PKG_VERSION"));
        assert!(head.contains(&expected), "{head}");
    }

    #[tokio::test]
    async fn a_malformed_url_is_refused() {
        let Err(error) = Direct.connect(&endpoint("not a url")) else {
            panic!("a malformed URL makes no client");
        };
        assert_eq!(error.reason(), "InvalidSpec");
    }
}
