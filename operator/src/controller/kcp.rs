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

    #[tokio::test]
    async fn a_malformed_url_is_refused() {
        let Err(error) = Direct.connect(&endpoint("not a url")) else {
            panic!("a malformed URL makes no client");
        };
        assert_eq!(error.reason(), "InvalidSpec");
    }
}
