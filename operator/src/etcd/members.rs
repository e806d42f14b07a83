//! The members API of a managed etcd, reached with the owner's etcd client certificate.
//!
//! Only the three calls the scaling planner needs: list, add, remove. Every call has a short
//! timeout so an unreachable cluster turns into "members unknown" instead of a stuck reconcile.

use std::time::Duration;

use etcd_client::{Certificate, ConnectOptions, Identity, TlsOptions};

use crate::naming::Names;
use crate::pki::TlsMaterial;

use super::scaling::Member;

const TIMEOUT: Duration = Duration::from_secs(5);

/// A failed members API call.
#[derive(Debug, thiserror::Error)]
#[error("etcd members API call failed")]
pub struct Error(#[from] etcd_client::Error);

/// A connection to the members API of the etcd `names` owns.
pub struct Members {
    client: etcd_client::Client,
}

impl Members {
    /// Connects to the first `replicas` members with `client_certificate` (its `ca.crt` is the etcd CA).
    pub async fn connect(
        names: &Names,
        replicas: i32,
        client_certificate: &TlsMaterial,
    ) -> Result<Self, Error> {
        let endpoints: Vec<String> = (0..replicas.max(1))
            .map(|ordinal| names.etcd_client_url(ordinal))
            .collect();
        let tls = TlsOptions::new()
            .ca_certificate(Certificate::from_pem(&client_certificate.ca_pem))
            .identity(Identity::from_pem(
                &client_certificate.cert_pem,
                &client_certificate.key_pem,
            ));
        let options = ConnectOptions::new()
            .with_tls(tls)
            .with_timeout(TIMEOUT)
            .with_connect_timeout(TIMEOUT);
        let client = etcd_client::Client::connect(endpoints, Some(options)).await?;
        Ok(Self { client })
    }

    pub async fn list(&mut self) -> Result<Vec<Member>, Error> {
        let response = self.client.member_list().await?;
        Ok(response
            .members()
            .iter()
            .map(|member| Member {
                id: member.id(),
                name: member.name().to_owned(),
                peer_urls: member.peer_urls().to_vec(),
            })
            .collect())
    }

    pub async fn add(&mut self, peer_url: &str) -> Result<(), Error> {
        self.client.member_add([peer_url], None).await?;
        Ok(())
    }

    pub async fn remove(&mut self, id: u64) -> Result<(), Error> {
        self.client.member_remove(id).await?;
        Ok(())
    }
}
