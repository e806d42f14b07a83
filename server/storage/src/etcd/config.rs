//! Turning the server's etcd flags into a connection: endpoints, TLS and client certificates.
//!
//! Mirrors kube-apiserver: `--etcd-servers` lists `http://` or `https://` endpoints, and for https
//! `--etcd-cafile` names the CA that signed the servers while `--etcd-certfile`/`--etcd-keyfile`
//! name the client certificate etcd's `--client-cert-auth` asks for. Mistakes here are reported as
//! [`StorageError::Config`] before any connection is tried.

use std::path::{Path, PathBuf};
use std::time::Duration;

use etcd_client::{Certificate, ConnectOptions, Identity, TlsOptions};
use tracing::warn;

use crate::{Result, StorageError};

/// How long establishing a connection to one endpoint may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// HTTP/2 keep-alive: a silent dead connection is noticed within interval + timeout.
const KEEP_ALIVE_INTERVAL: Duration = Duration::from_secs(10);
const KEEP_ALIVE_TIMEOUT: Duration = Duration::from_secs(20);

/// Where etcd is and how to authenticate to it (`--etcd-servers`, `--etcd-cafile`,
/// `--etcd-certfile`, `--etcd-keyfile`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EtcdConfig {
    /// Client URLs, `http://host:port` or `https://host:port`, all of one scheme.
    pub servers: Vec<String>,
    /// PEM bundle of the CA(s) that signed the servers' certificates; required for https.
    pub ca_file: Option<PathBuf>,
    /// PEM client certificate, for etcd's client certificate authentication.
    pub cert_file: Option<PathBuf>,
    /// PEM private key of `cert_file`.
    pub key_file: Option<PathBuf>,
}

impl EtcdConfig {
    /// The connect options these flags call for.
    pub(super) async fn connect_options(&self) -> Result<ConnectOptions> {
        if self.servers.is_empty() {
            return Err(StorageError::Config("no etcd servers given".to_owned()));
        }
        let secure = self
            .servers
            .iter()
            .filter(|s| s.starts_with("https://"))
            .count();
        let plain = self
            .servers
            .iter()
            .filter(|s| s.starts_with("http://"))
            .count();
        if secure + plain != self.servers.len() || (secure > 0 && plain > 0) {
            return Err(StorageError::Config(format!(
                "etcd servers must all be http:// or all https:// URLs: {:?}",
                self.servers
            )));
        }
        let options = ConnectOptions::new()
            .with_connect_timeout(CONNECT_TIMEOUT)
            .with_keep_alive(KEEP_ALIVE_INTERVAL, KEEP_ALIVE_TIMEOUT);
        if secure == 0 {
            if self.ca_file.is_some() || self.cert_file.is_some() || self.key_file.is_some() {
                warn!("etcd TLS files are ignored: the etcd servers are http:// URLs");
            }
            return Ok(options);
        }
        Ok(options.with_tls(self.tls().await?))
    }

    async fn tls(&self) -> Result<TlsOptions> {
        let Some(ca_file) = &self.ca_file else {
            return Err(StorageError::Config(
                "https etcd servers need a CA file (--etcd-cafile)".to_owned(),
            ));
        };
        let tls = TlsOptions::new().ca_certificate(Certificate::from_pem(read(ca_file).await?));
        match (&self.cert_file, &self.key_file) {
            (Some(cert), Some(key)) => {
                Ok(tls.identity(Identity::from_pem(read(cert).await?, read(key).await?)))
            }
            (None, None) => Ok(tls),
            _ => Err(StorageError::Config(
                "an etcd client certificate needs both --etcd-certfile and --etcd-keyfile"
                    .to_owned(),
            )),
        }
    }
}

async fn read(path: &Path) -> Result<Vec<u8>> {
    tokio::fs::read(path)
        .await
        .map_err(|e| StorageError::Config(format!("cannot read {}: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn servers(urls: &[&str]) -> EtcdConfig {
        EtcdConfig {
            servers: urls.iter().map(|s| (*s).to_owned()).collect(),
            ..EtcdConfig::default()
        }
    }

    async fn refused(config: EtcdConfig) -> String {
        match config.connect_options().await {
            Err(StorageError::Config(message)) => message,
            other => panic!("expected a configuration error, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn endpoints_must_be_given_and_share_one_scheme() {
        assert!(refused(servers(&[])).await.contains("no etcd servers"));
        assert!(
            refused(servers(&["http://a:2379", "https://b:2379"]))
                .await
                .contains("all be")
        );
        assert!(
            refused(servers(&["127.0.0.1:2379"]))
                .await
                .contains("all be")
        );
        assert!(
            servers(&["http://a:2379", "http://b:2379"])
                .connect_options()
                .await
                .is_ok()
        );
    }

    #[tokio::test]
    async fn https_needs_a_ca_and_a_complete_client_certificate() {
        assert!(
            refused(servers(&["https://a:2379"]))
                .await
                .contains("CA file")
        );

        let dir = tempfile::tempdir().unwrap();
        let pem = dir.path().join("some.pem");
        std::fs::write(&pem, "not checked before connecting").unwrap();
        let with = |cert: Option<&Path>, key: Option<&Path>| EtcdConfig {
            ca_file: Some(pem.clone()),
            cert_file: cert.map(Path::to_owned),
            key_file: key.map(Path::to_owned),
            ..servers(&["https://a:2379"])
        };
        assert!(refused(with(Some(&pem), None)).await.contains("both"));
        assert!(refused(with(None, Some(&pem))).await.contains("both"));
        assert!(
            refused(with(Some(&dir.path().join("absent.pem")), Some(&pem)))
                .await
                .contains("absent.pem")
        );
        assert!(with(Some(&pem), Some(&pem)).connect_options().await.is_ok());
        assert!(with(None, None).connect_options().await.is_ok());
    }

    #[tokio::test]
    async fn tls_files_are_ignored_for_plain_http() {
        let config = EtcdConfig {
            ca_file: Some("/nonexistent".into()),
            ..servers(&["http://a:2379"])
        };
        assert!(config.connect_options().await.is_ok());
    }
}
