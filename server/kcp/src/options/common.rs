//! Flags `kcp start` and `kcp cache-server` share, spelled and checked once: the secure port
//! (`--bind-address`, `--secure-port`, `--tls-cert-file`, `--tls-private-key-file`), the etcd
//! connection (`--etcd-servers`, its TLS files, `--etcd-compaction-interval`; each server keeps its
//! own `--etcd-prefix` default) and logging (`--logging-format`, `-v`). Both servers take them with
//! upstream's syntax because both upstream servers take k8s.io/apiserver's etcd and log options.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;
use kcp_apimachinery::duration;
use kcp_storage::StorageConfig;
use kcp_storage::etcd::EtcdConfig;

use super::{EMBEDDED_STORE_FILE, OptionsError, StorageBackend, non_empty, values};
use crate::logging::LoggingFormat;

/// The secure port's flags.
#[derive(Debug, Clone, Args)]
pub struct ServingFlags {
    /// IP address to listen on (0.0.0.0 or :: for all interfaces).
    #[arg(long, default_value = "0.0.0.0", help_heading = "Secure serving")]
    pub bind_address: IpAddr,
    /// HTTPS port (0 picks a free port).
    #[arg(long, default_value_t = 6443, help_heading = "Secure serving")]
    pub secure_port: u16,
    /// Serving certificate (PEM, leaf first); generated under --root-directory when not given.
    #[arg(long, value_parser = values::path, help_heading = "Secure serving")]
    pub tls_cert_file: Option<PathBuf>,
    /// Private key of --tls-cert-file.
    #[arg(long, value_parser = values::path, help_heading = "Secure serving")]
    pub tls_private_key_file: Option<PathBuf>,
}

impl ServingFlags {
    /// `--tls-cert-file` with `--tls-private-key-file`, when both are given.
    pub fn cert_key_files(&self) -> Option<super::CertKeyFiles> {
        let cert_file = self.tls_cert_file.clone()?;
        let key_file = self.tls_private_key_file.clone()?;
        Some(super::CertKeyFiles {
            cert_file,
            key_file,
        })
    }
}

/// The etcd flags.
#[derive(Debug, Clone, Args)]
pub struct EtcdFlags {
    /// Comma-separated etcd URLs; selects etcd instead of the embedded store.
    #[arg(long, value_delimiter = ',', value_parser = values::etcd_server, help_heading = "Storage")]
    pub etcd_servers: Vec<String>,
    /// CA bundle of the etcd servers.
    #[arg(long, value_parser = values::path, help_heading = "Storage")]
    pub etcd_cafile: Option<PathBuf>,
    /// Client certificate for etcd.
    #[arg(long, value_parser = values::path, help_heading = "Storage")]
    pub etcd_certfile: Option<PathBuf>,
    /// Client key for etcd.
    #[arg(long, value_parser = values::path, help_heading = "Storage")]
    pub etcd_keyfile: Option<PathBuf>,
    /// How often old revisions are compacted (0 disables).
    #[arg(long, default_value = "5m", value_parser = duration::parse, help_heading = "Storage")]
    pub etcd_compaction_interval: Duration,
}

impl EtcdFlags {
    /// The store these flags (and `--storage-backend`, where a server has it) select: etcd at
    /// `--etcd-servers`, else the embedded file under `root_directory`.
    pub fn storage_config(
        &self,
        backend: Option<StorageBackend>,
        root_directory: Option<&Path>,
    ) -> Result<StorageConfig, OptionsError> {
        let servers: Vec<String> = self
            .etcd_servers
            .iter()
            .filter(|server| !server.is_empty())
            .cloned()
            .collect();
        let backend = match (backend, servers.is_empty()) {
            (Some(StorageBackend::Etcd3), true) => return Err(OptionsError::EtcdWithoutServers),
            (Some(StorageBackend::Embedded), false) => {
                return Err(OptionsError::EmbeddedWithEtcdServers);
            }
            (_, true) => StorageBackend::Embedded,
            (_, false) => StorageBackend::Etcd3,
        };
        match backend {
            StorageBackend::Etcd3 => Ok(StorageConfig::Etcd(EtcdConfig {
                servers,
                ca_file: non_empty(self.etcd_cafile.as_ref()),
                cert_file: non_empty(self.etcd_certfile.as_ref()),
                key_file: non_empty(self.etcd_keyfile.as_ref()),
            })),
            StorageBackend::Embedded => {
                for (flag, path) in [
                    ("etcd-cafile", &self.etcd_cafile),
                    ("etcd-certfile", &self.etcd_certfile),
                    ("etcd-keyfile", &self.etcd_keyfile),
                ] {
                    if non_empty(path.as_ref()).is_some() {
                        return Err(OptionsError::EtcdFlagWithoutEtcd(flag));
                    }
                }
                let directory = root_directory.ok_or(OptionsError::EmbeddedWithoutRootDirectory)?;
                Ok(StorageConfig::Embedded {
                    path: directory.join(EMBEDDED_STORE_FILE),
                })
            }
        }
    }
}

/// The logging flags.
#[derive(Debug, Clone, Args)]
pub struct LoggingFlags {
    /// Log format.
    #[arg(
        long = "logging-format",
        default_value = "text",
        help_heading = "Logging"
    )]
    pub format: LoggingFormat,
    /// Log verbosity (0-1 info, 2-4 debug, 5+ trace); RUST_LOG overrides it.
    #[arg(
        short = 'v',
        long = "v",
        value_name = "LEVEL",
        default_value_t = 0,
        help_heading = "Logging"
    )]
    pub verbosity: u32,
}
