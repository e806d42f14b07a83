//! The flags of `kcp start`, spelled as upstream kcp spells them, and their validation.
//!
//! Compatibility is the point: kcp-operator renders a fixed set of flags into every shard Deployment
//! (`kcp-operator.md` sections 2.5-2.6), users add their own through `extraArgs`, and both must start
//! this server unchanged. So every such flag parses here with upstream's syntax (`--flag=value` and
//! `--flag value`, Go booleans, comma lists, Go durations, last occurrence wins) and unknown flags
//! fail, as in upstream. Flags whose features are not built yet are still validated and reported
//! (see [`inactive`]).
//!
//! Parsing (clap) checks each value's syntax; [`StartOptions::validate`] checks what needs several
//! flags or the file system and yields the [`ValidatedOptions`] the rest of the server reads.

mod authentication;
pub mod batteries;
mod common;
mod inactive;
pub mod values;

pub use authentication::{AuthenticationArgs, RequestHeaderArgs};
pub use common::{EtcdFlags, LoggingFlags, ServingFlags};

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::parser::ValueSource;
use clap::{ArgAction, ArgMatches, Args, FromArgMatches, ValueEnum};
use http::Uri;
use kcp_apimachinery::duration;
use kcp_apiserver::WebhookConfig;
use kcp_authn::OidcConfig;
use kcp_pod_streaming::KubeletClientFiles;
use kcp_storage::StorageConfig;

use batteries::{Batteries, BatteriesError, Battery};

/// File name of the embedded store under `--root-directory`.
pub const EMBEDDED_STORE_FILE: &str = "store.redb";
/// File name of the admin kubeconfig under `--root-directory` (unless `--kubeconfig-path`).
pub const ADMIN_KUBECONFIG_FILE: &str = "admin.kubeconfig";

/// `--storage-backend`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StorageBackend {
    /// A single file under `--root-directory`.
    Embedded,
    /// An etcd v3 cluster at `--etcd-servers`.
    Etcd3,
}

/// `--tls-min-version`, with Go's names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TlsVersion {
    #[value(name = "VersionTLS10")]
    Tls10,
    #[value(name = "VersionTLS11")]
    Tls11,
    #[value(name = "VersionTLS12")]
    Tls12,
    #[value(name = "VersionTLS13")]
    Tls13,
}

/// API version of a SubjectAccessReview or TokenReview webhook.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum WebhookVersion {
    V1beta1,
    V1,
}

impl WebhookVersion {
    /// The API version as it appears in `apiVersion` (`authorization.k8s.io/<this>`).
    pub fn as_str(self) -> &'static str {
        match self {
            WebhookVersion::V1beta1 => "v1beta1",
            WebhookVersion::V1 => "v1",
        }
    }
}

/// `--audit-webhook-mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AuditWebhookMode {
    Batch,
    Blocking,
    BlockingStrict,
}

/// Every flag of `kcp start`. Field docs are the help texts.
#[derive(Debug, Clone, Args)]
pub struct StartOptions {
    // ---- secure serving ----
    #[command(flatten)]
    pub serving: ServingFlags,
    /// Directory for generated serving certificates (not used yet: they go to --root-directory).
    #[arg(long, value_parser = values::path, help_heading = "Secure serving")]
    pub cert_dir: Option<PathBuf>,
    /// Lowest TLS version to accept.
    #[arg(long, help_heading = "Secure serving")]
    pub tls_min_version: Option<TlsVersion>,
    /// Comma-separated TLS cipher suites (Go names).
    #[arg(long, value_delimiter = ',', value_parser = values::cipher_suite, help_heading = "Secure serving")]
    pub tls_cipher_suites: Vec<String>,
    /// Time to keep serving after SIGTERM before shutting down.
    #[arg(long, default_value = "0s", value_parser = duration::parse, help_heading = "Secure serving")]
    pub shutdown_delay_duration: Duration,

    // ---- authentication ----
    #[command(flatten)]
    pub authentication: AuthenticationArgs,
    /// Treat unauthenticated requests as system:anonymous.
    #[arg(long, default_value = "true", value_name = "BOOL", value_parser = values::go_bool, num_args = 0..=1,
        require_equals = true, default_missing_value = "true", action = ArgAction::Set, help_heading = "Authentication")]
    pub anonymous_auth: bool,
    /// Private key the service account controller signs tokens with.
    #[arg(long, value_parser = values::path, help_heading = "Service accounts")]
    pub service_account_private_key_file: Option<PathBuf>,
    /// Private key the token issuer signs service account tokens with.
    #[arg(long, value_parser = values::path, help_heading = "Service accounts")]
    pub service_account_signing_key_file: Option<PathBuf>,
    /// Check that a service account token's objects still exist.
    #[arg(long, default_value = "true", value_name = "BOOL", value_parser = values::go_bool, num_args = 0..=1,
        require_equals = true, default_missing_value = "true", action = ArgAction::Set, help_heading = "Service accounts")]
    pub service_account_lookup: bool,
    /// CA put into service account token secrets as ca.crt.
    #[arg(long, value_parser = values::path, help_heading = "Service accounts")]
    pub root_ca_file: Option<PathBuf>,

    // ---- authorization ----
    /// Comma-separated paths anyone may request.
    #[arg(long, value_delimiter = ',', default_values = ["/healthz", "/readyz", "/livez"],
        help_heading = "Authorization")]
    pub authorization_always_allow_paths: Vec<String>,
    /// Kubeconfig of a SubjectAccessReview webhook.
    #[arg(long, value_parser = values::path, help_heading = "Authorization")]
    pub authorization_webhook_config_file: Option<PathBuf>,
    /// SubjectAccessReview API version of the webhook.
    #[arg(long, default_value = "v1beta1", help_heading = "Authorization")]
    pub authorization_webhook_version: WebhookVersion,
    /// How long to cache allowed webhook answers.
    #[arg(long, default_value = "5m", value_parser = duration::parse, help_heading = "Authorization")]
    pub authorization_webhook_cache_authorized_ttl: Duration,
    /// How long to cache denied webhook answers.
    #[arg(long, default_value = "30s", value_parser = duration::parse, help_heading = "Authorization")]
    pub authorization_webhook_cache_unauthorized_ttl: Duration,

    // ---- kubelet (pods/log, exec, attach, portforward: pods served as a CRD) ----
    /// Client certificate presented to the kubelet port of a pod's node.
    #[arg(long, value_parser = values::path, help_heading = "Kubelet")]
    pub kubelet_client_certificate: Option<PathBuf>,
    /// Key of --kubelet-client-certificate.
    #[arg(long, value_parser = values::path, help_heading = "Kubelet")]
    pub kubelet_client_key: Option<PathBuf>,
    /// CA that verifies kubelets' serving certificates (without it they are not verified).
    #[arg(long, value_parser = values::path, help_heading = "Kubelet")]
    pub kubelet_certificate_authority: Option<PathBuf>,

    // ---- audit ----
    /// Audit policy file.
    #[arg(long, value_parser = values::path, help_heading = "Auditing")]
    pub audit_policy_file: Option<PathBuf>,
    /// Audit log file ("-" for stdout).
    #[arg(long, value_parser = values::path, help_heading = "Auditing")]
    pub audit_log_path: Option<PathBuf>,
    /// Kubeconfig of the audit webhook.
    #[arg(long, value_parser = values::path, help_heading = "Auditing")]
    pub audit_webhook_config_file: Option<PathBuf>,
    /// How audit events reach the webhook.
    #[arg(long, default_value = "batch", help_heading = "Auditing")]
    pub audit_webhook_mode: AuditWebhookMode,
    /// Events buffered before batching.
    #[arg(long, default_value_t = 10000, help_heading = "Auditing")]
    pub audit_webhook_batch_buffer_size: u32,
    /// Largest batch.
    #[arg(long, default_value_t = 400, help_heading = "Auditing")]
    pub audit_webhook_batch_max_size: u32,
    /// Longest wait before sending a partial batch.
    #[arg(long, default_value = "30s", value_parser = duration::parse, help_heading = "Auditing")]
    pub audit_webhook_batch_max_wait: Duration,
    /// Throttle batch sending.
    #[arg(long, default_value = "true", value_name = "BOOL", value_parser = values::go_bool, num_args = 0..=1,
        require_equals = true, default_missing_value = "true", action = ArgAction::Set, help_heading = "Auditing")]
    pub audit_webhook_batch_throttle_enable: bool,
    /// Batches per second when throttled.
    #[arg(long, default_value_t = 10.0, help_heading = "Auditing")]
    pub audit_webhook_batch_throttle_qps: f32,
    /// Batch burst when throttled.
    #[arg(long, default_value_t = 15, help_heading = "Auditing")]
    pub audit_webhook_batch_throttle_burst: u32,
    /// First retry backoff.
    #[arg(long, default_value = "10s", value_parser = duration::parse, help_heading = "Auditing")]
    pub audit_webhook_initial_backoff: Duration,
    /// Truncate events and batches that are too large.
    #[arg(long, default_value = "false", value_name = "BOOL", value_parser = values::go_bool, num_args = 0..=1,
        require_equals = true, default_missing_value = "true", action = ArgAction::Set, help_heading = "Auditing")]
    pub audit_webhook_truncate_enabled: bool,
    /// Largest batch in bytes when truncating.
    #[arg(long, default_value_t = 10_485_760, help_heading = "Auditing")]
    pub audit_webhook_truncate_max_batch_size: u32,
    /// Largest event in bytes when truncating. (`--audit-webhook-truncate-max-event-sizes` is
    /// accepted too: kcp-operator renders that misspelling.)
    #[arg(
        long,
        default_value_t = 102_400,
        alias = "audit-webhook-truncate-max-event-sizes",
        help_heading = "Auditing"
    )]
    pub audit_webhook_truncate_max_event_size: u32,
    /// Event API version sent to the webhook.
    #[arg(long, default_value = "audit.k8s.io/v1", value_parser = values::audit_version,
        help_heading = "Auditing")]
    pub audit_webhook_version: String,

    // ---- storage ----
    /// Storage backend; defaults to embedded without --etcd-servers and etcd3 with them.
    #[arg(long, help_heading = "Storage")]
    pub storage_backend: Option<StorageBackend>,
    #[command(flatten)]
    pub etcd: EtcdFlags,
    /// First segment of every storage key.
    #[arg(long, default_value = "/registry", help_heading = "Storage")]
    pub etcd_prefix: String,

    // ---- kcp ----
    /// Directory for generated files (store, certificates, admin kubeconfig); empty generates none.
    #[arg(long, value_parser = values::path, default_value = ".kcp", help_heading = "kcp")]
    pub root_directory: PathBuf,
    /// Where to write the admin kubeconfig (default <root-directory>/admin.kubeconfig).
    #[arg(long, value_parser = values::path, help_heading = "kcp")]
    pub kubeconfig_path: Option<PathBuf>,
    /// Comma-separated batteries (admin, metrics-viewer, user, workspace-types), or +x/-x changes to
    /// the defaults.
    #[arg(long, value_delimiter = ',', default_values = ["admin", "workspace-types"], help_heading = "kcp")]
    pub batteries_included: Vec<String>,
    /// Comma-separated Name=true|false feature gates.
    #[arg(long, value_delimiter = ',', value_parser = values::feature_gate, help_heading = "kcp")]
    pub feature_gates: Vec<(String, bool)>,
    /// Name of this shard; "root" hosts the root workspace.
    #[arg(long, default_value = "root", help_heading = "Sharding")]
    pub shard_name: String,
    /// URL other shards and the front-proxy use to reach this shard.
    #[arg(long, value_parser = values::url, help_heading = "Sharding")]
    pub shard_base_url: Option<Uri>,
    /// URL users see for workspaces on this shard (usually the front-proxy).
    #[arg(long, value_parser = values::url, help_heading = "Sharding")]
    pub shard_external_url: Option<Uri>,
    /// URL of this shard's virtual workspaces.
    #[arg(long, value_parser = values::url, help_heading = "Sharding")]
    pub shard_virtual_workspace_url: Option<Uri>,
    /// CA bundle of an external virtual workspace server.
    #[arg(long, value_parser = values::path, help_heading = "Sharding")]
    pub shard_virtual_workspace_ca_file: Option<PathBuf>,
    /// Client certificate towards other shards and components.
    #[arg(long, value_parser = values::path, help_heading = "Sharding")]
    pub shard_client_cert_file: Option<PathBuf>,
    /// Key of --shard-client-cert-file.
    #[arg(long, value_parser = values::path, help_heading = "Sharding")]
    pub shard_client_key_file: Option<PathBuf>,
    /// Public host name of kcp (also added to the generated serving certificate).
    #[arg(long, value_parser = values::hostname, help_heading = "Sharding")]
    pub external_hostname: Option<String>,
    /// Kubeconfig of an external cache server (default: in-process).
    #[arg(long, value_parser = values::path, alias = "cache-server-kubeconfig-file", help_heading = "Sharding")]
    pub cache_kubeconfig: Option<PathBuf>,
    /// Admin kubeconfig of the root shard (non-root shards).
    #[arg(long, value_parser = values::path, help_heading = "Sharding")]
    pub root_shard_kubeconfig_file: Option<PathBuf>,
    /// Kubeconfig with credentials for peer shards.
    #[arg(long, value_parser = values::path, help_heading = "Sharding")]
    pub shard_kubeconfig_file: Option<PathBuf>,
    /// The most logical clusters this shard holds (root and workspaces; system ones not counted);
    /// unlimited when not given. A full shard leaves new workspaces Scheduling.
    #[arg(long, value_name = "N", help_heading = "Sharding")]
    pub max_logical_clusters: Option<u64>,
    /// Kubeconfig the workspace scheduler uses to create logical clusters on target shards.
    #[arg(long, value_parser = values::path, help_heading = "Sharding")]
    pub logical_cluster_admin_kubeconfig: Option<PathBuf>,
    /// Kubeconfig pointing at the front-proxy for cross-shard operations: reading the service
    /// accounts of tokens whose logical cluster is on another shard.
    #[arg(long, value_parser = values::path, help_heading = "Sharding")]
    pub external_logical_cluster_admin_kubeconfig: Option<PathBuf>,
    /// Client certificate for re-entering the front-proxy for mounted workspaces.
    #[arg(long, value_parser = values::path, help_heading = "Sharding")]
    pub mount_proxy_client_cert_file: Option<PathBuf>,
    /// Key of --mount-proxy-client-cert-file.
    #[arg(long, value_parser = values::path, help_heading = "Sharding")]
    pub mount_proxy_client_key_file: Option<PathBuf>,
    /// Serve virtual workspaces in this process.
    #[arg(long, default_value = "true", value_name = "BOOL", value_parser = values::go_bool, num_args = 0..=1,
        require_equals = true, default_missing_value = "true", action = ArgAction::Set, help_heading = "Sharding")]
    pub run_virtual_workspaces: bool,

    // ---- controllers ----
    /// Run the in-process controllers.
    #[arg(long, default_value = "true", value_name = "BOOL", value_parser = values::go_bool, num_args = 0..=1,
        require_equals = true, default_missing_value = "true", action = ArgAction::Set, help_heading = "Controllers")]
    pub run_controllers: bool,
    /// Elect one replica to run the controllers.
    #[arg(long, default_value = "false", value_name = "BOOL", value_parser = values::go_bool, num_args = 0..=1,
        require_equals = true, default_missing_value = "true", action = ArgAction::Set, help_heading = "Controllers")]
    pub enable_leader_election: bool,
    /// Namespace of the leader election lease.
    #[arg(long, default_value = "kube-system", help_heading = "Controllers")]
    pub leader_election_namespace: String,
    /// Name of the leader election lease.
    #[arg(long, default_value = "kcp-controllers", help_heading = "Controllers")]
    pub leader_election_name: String,
    /// Create home workspaces for users on first access.
    #[arg(long, default_value = "true", value_name = "BOOL", value_parser = values::go_bool, num_args = 0..=1,
        require_equals = true, default_missing_value = "true", action = ArgAction::Set, help_heading = "Controllers")]
    pub enable_home_workspaces: bool,

    // ---- admission ----
    /// The most objects (all types together) a logical cluster other than root and system ones may
    /// hold; 0 disables. The LogicalCluster annotation core.kcp.io/max-total-objects overrides it.
    #[arg(long, default_value_t = 0, help_heading = "Admission")]
    pub logical_cluster_total_object_limit: u64,
    /// How often the objects of every logical cluster are counted in storage.
    #[arg(long, default_value = "60s", value_parser = duration::parse, help_heading = "Admission")]
    pub logical_cluster_object_count_scan_interval: Duration,

    #[command(flatten)]
    pub logging: LoggingFlags,

    /// Long names of the flags given on the command line (filled by [`StartOptions::from_matches`]).
    #[arg(skip)]
    given: BTreeSet<String>,
}

/// Why the flags of `kcp start` do not make a runnable configuration.
#[derive(Debug, thiserror::Error)]
pub enum OptionsError {
    #[error("--{flag}={}: {source}", path.display())]
    Unreadable {
        flag: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("--{flag}={}: not a file", path.display())]
    NotAFile { flag: &'static str, path: PathBuf },
    #[error("--{given} needs --{missing} too")]
    Unpaired {
        given: &'static str,
        missing: &'static str,
    },
    #[error("--batteries-included: {0}")]
    Batteries(#[from] BatteriesError),
    #[error("--storage-backend=etcd3 needs --etcd-servers")]
    EtcdWithoutServers,
    #[error("--storage-backend=embedded conflicts with --etcd-servers")]
    EmbeddedWithEtcdServers,
    #[error("--{0} is only used with --etcd-servers")]
    EtcdFlagWithoutEtcd(&'static str),
    #[error(
        "the embedded store lives under --root-directory, which is empty: give a directory or --etcd-servers"
    )]
    EmbeddedWithoutRootDirectory,
    #[error("--shard-name must not be empty")]
    EmptyShardName,
    #[error(
        "shard {0:?} is not the root shard and needs --root-shard-kubeconfig-file (the root shard's admin kubeconfig, where it registers its Shard)"
    )]
    NonRootWithoutRootKubeconfig(String),
    #[error("shard {0:?} is not the root shard and needs --cache-kubeconfig")]
    NonRootWithoutCache(String),
    #[error("--logical-cluster-admin-kubeconfig needs --shard-external-url")]
    LogicalClusterAdminWithoutExternalUrl,
    #[error("--oidc-issuer-url and --oidc-client-id must be given together")]
    OidcIncomplete,
    #[error("--audit-webhook-batch-throttle-qps must be greater than 0")]
    AuditThrottleQps,
    #[error("--logical-cluster-object-count-scan-interval must be greater than 0")]
    ObjectCountScanInterval,
}

impl StartOptions {
    /// Reads the options from `start`'s matches and records which flags the command line gave.
    pub fn from_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        let mut options = Self::from_arg_matches(matches)?;
        let command = Self::augment_args(clap::Command::new("start"));
        options.given = command
            .get_arguments()
            .filter(|arg| {
                matches.value_source(arg.get_id().as_str()) == Some(ValueSource::CommandLine)
            })
            .filter_map(|arg| arg.get_long().map(str::to_owned))
            .collect();
        Ok(options)
    }

    /// Checks everything clap cannot: files, flags that need each other, the storage choice.
    pub fn validate(self) -> Result<ValidatedOptions, OptionsError> {
        self.check_files()?;
        for (cert, key) in [
            ("tls-cert-file", "tls-private-key-file"),
            ("shard-client-cert-file", "shard-client-key-file"),
            (
                "mount-proxy-client-cert-file",
                "mount-proxy-client-key-file",
            ),
            ("etcd-certfile", "etcd-keyfile"),
            ("kubelet-client-certificate", "kubelet-client-key"),
        ] {
            self.check_pair(cert, key)?;
        }
        let batteries = Batteries::resolve(&self.batteries_included)?;
        let root_directory = non_empty(Some(&self.root_directory));
        let storage = self.storage_config(root_directory.as_deref())?;

        let shard_name = self.shard_name.trim().to_owned();
        if shard_name.is_empty() {
            return Err(OptionsError::EmptyShardName);
        }
        if shard_name != "root" && non_empty(self.root_shard_kubeconfig_file.as_ref()).is_none() {
            return Err(OptionsError::NonRootWithoutRootKubeconfig(shard_name));
        }
        if shard_name != "root" && non_empty(self.cache_kubeconfig.as_ref()).is_none() {
            return Err(OptionsError::NonRootWithoutCache(shard_name));
        }
        if non_empty(self.logical_cluster_admin_kubeconfig.as_ref()).is_some()
            && self.shard_external_url.is_none()
        {
            return Err(OptionsError::LogicalClusterAdminWithoutExternalUrl);
        }
        let authentication = self
            .authentication
            .validate(self.anonymous_auth, self.service_account_lookup)?;
        if self.audit_webhook_batch_throttle_enable && self.audit_webhook_batch_throttle_qps <= 0.0
        {
            return Err(OptionsError::AuditThrottleQps);
        }
        if self.logical_cluster_object_count_scan_interval.is_zero() {
            return Err(OptionsError::ObjectCountScanInterval);
        }

        let admin_kubeconfig_path = if batteries.contains(Battery::Admin) {
            non_empty(self.kubeconfig_path.as_ref()).or_else(|| {
                root_directory
                    .as_ref()
                    .map(|dir| dir.join(ADMIN_KUBECONFIG_FILE))
            })
        } else {
            None
        };
        let tls = match (
            non_empty(self.serving.tls_cert_file.as_ref()),
            non_empty(self.serving.tls_private_key_file.as_ref()),
        ) {
            (Some(cert_file), Some(key_file)) => Some(CertKeyFiles {
                cert_file,
                key_file,
            }),
            _ => None,
        };
        Ok(ValidatedOptions {
            run_controllers: self.run_controllers,
            leader_election: self.enable_leader_election.then(|| {
                (
                    self.leader_election_namespace.clone(),
                    self.leader_election_name.clone(),
                )
            }),
            bind_address: self.serving.bind_address,
            secure_port: self.serving.secure_port,
            tls,
            client_ca_file: non_empty(self.authentication.client_ca_file.as_ref()),
            root_directory,
            admin_kubeconfig_path,
            shard_name,
            shard_base_url: self.shard_base_url,
            shard_external_url: self.shard_external_url,
            shard_virtual_workspace_url: self.shard_virtual_workspace_url,
            run_virtual_workspaces: self.run_virtual_workspaces,
            max_logical_clusters: self.max_logical_clusters,
            root_shard_kubeconfig_file: non_empty(self.root_shard_kubeconfig_file.as_ref()),
            cache_kubeconfig: non_empty(self.cache_kubeconfig.as_ref()),
            logical_cluster_admin_kubeconfig: non_empty(
                self.logical_cluster_admin_kubeconfig.as_ref(),
            ),
            external_logical_cluster_admin_kubeconfig: non_empty(
                self.external_logical_cluster_admin_kubeconfig.as_ref(),
            ),
            external_hostname: self.external_hostname,
            batteries,
            etcd_prefix: self.etcd_prefix,
            etcd_compaction_interval: self.etcd.etcd_compaction_interval,
            logical_cluster_total_object_limit: self.logical_cluster_total_object_limit,
            logical_cluster_object_count_scan_interval: self
                .logical_cluster_object_count_scan_interval,
            authorization_always_allow_paths: self.authorization_always_allow_paths,
            authorization_webhook: non_empty(self.authorization_webhook_config_file.as_ref()).map(
                |kubeconfig| WebhookConfig {
                    kubeconfig,
                    version: self.authorization_webhook_version.as_str().to_string(),
                    authorized_ttl: self.authorization_webhook_cache_authorized_ttl,
                    unauthorized_ttl: self.authorization_webhook_cache_unauthorized_ttl,
                },
            ),
            root_ca_file: non_empty(self.root_ca_file.as_ref()),
            service_account_signing_key_file: non_empty(
                self.service_account_signing_key_file.as_ref(),
            )
            .or_else(|| non_empty(self.service_account_private_key_file.as_ref())),
            authentication,
            service_account_key_files: self.authentication.service_account_key_files(),
            kubelet_client: non_empty(self.kubelet_client_certificate.as_ref())
                .zip(non_empty(self.kubelet_client_key.as_ref()))
                .map(|(certificate, key)| KubeletClientFiles {
                    certificate,
                    key,
                    certificate_authority: non_empty(self.kubelet_certificate_authority.as_ref()),
                }),
            storage,
            inactive: inactive::given_but_inactive(&self.given),
        })
    }

    /// Input files that must exist when given, by flag name.
    fn input_files(&self) -> Vec<(&'static str, &Path)> {
        let single = [
            ("cache-kubeconfig", &self.cache_kubeconfig),
            ("etcd-cafile", &self.etcd.etcd_cafile),
            ("etcd-certfile", &self.etcd.etcd_certfile),
            ("etcd-keyfile", &self.etcd.etcd_keyfile),
            (
                "external-logical-cluster-admin-kubeconfig",
                &self.external_logical_cluster_admin_kubeconfig,
            ),
            (
                "logical-cluster-admin-kubeconfig",
                &self.logical_cluster_admin_kubeconfig,
            ),
            (
                "mount-proxy-client-cert-file",
                &self.mount_proxy_client_cert_file,
            ),
            (
                "mount-proxy-client-key-file",
                &self.mount_proxy_client_key_file,
            ),
            ("root-ca-file", &self.root_ca_file),
            (
                "root-shard-kubeconfig-file",
                &self.root_shard_kubeconfig_file,
            ),
            (
                "service-account-private-key-file",
                &self.service_account_private_key_file,
            ),
            (
                "service-account-signing-key-file",
                &self.service_account_signing_key_file,
            ),
            ("shard-client-cert-file", &self.shard_client_cert_file),
            ("shard-client-key-file", &self.shard_client_key_file),
            ("shard-kubeconfig-file", &self.shard_kubeconfig_file),
            (
                "shard-virtual-workspace-ca-file",
                &self.shard_virtual_workspace_ca_file,
            ),
            ("tls-cert-file", &self.serving.tls_cert_file),
            ("tls-private-key-file", &self.serving.tls_private_key_file),
            (
                "kubelet-client-certificate",
                &self.kubelet_client_certificate,
            ),
            ("kubelet-client-key", &self.kubelet_client_key),
            (
                "kubelet-certificate-authority",
                &self.kubelet_certificate_authority,
            ),
            ("audit-policy-file", &self.audit_policy_file),
            ("audit-webhook-config-file", &self.audit_webhook_config_file),
            (
                "authorization-webhook-config-file",
                &self.authorization_webhook_config_file,
            ),
        ];
        let singles = single.into_iter().filter_map(|(flag, path)| {
            path.as_deref()
                .filter(|path| !path.as_os_str().is_empty())
                .map(|path| (flag, path))
        });
        singles.chain(self.authentication.input_files()).collect()
    }

    fn check_files(&self) -> Result<(), OptionsError> {
        for (flag, path) in self.input_files() {
            let metadata = std::fs::metadata(path).map_err(|source| OptionsError::Unreadable {
                flag,
                path: path.to_owned(),
                source,
            })?;
            if !metadata.is_file() {
                return Err(OptionsError::NotAFile {
                    flag,
                    path: path.to_owned(),
                });
            }
        }
        Ok(())
    }

    fn check_pair(&self, cert: &'static str, key: &'static str) -> Result<(), OptionsError> {
        let given: BTreeSet<&str> = self
            .input_files()
            .into_iter()
            .map(|(flag, _)| flag)
            .collect();
        match (given.contains(cert), given.contains(key)) {
            (true, false) => Err(OptionsError::Unpaired {
                given: cert,
                missing: key,
            }),
            (false, true) => Err(OptionsError::Unpaired {
                given: key,
                missing: cert,
            }),
            _ => Ok(()),
        }
    }

    fn storage_config(&self, root_directory: Option<&Path>) -> Result<StorageConfig, OptionsError> {
        self.etcd
            .storage_config(self.storage_backend, root_directory)
    }
}

/// An empty path flag (`--tls-cert-file=`) means "not given", as an empty string does in pflag.
pub(crate) fn non_empty(path: Option<&PathBuf>) -> Option<PathBuf> {
    path.filter(|path| !path.as_os_str().is_empty()).cloned()
}

/// kcp's default `--service-account-issuer`.
pub const DEFAULT_SERVICE_ACCOUNT_ISSUER: &str = "https://kcp.default.svc";

/// The authentication flags, validated (files are read when the server starts).
#[derive(Debug, Clone)]
pub struct AuthenticationFlags {
    pub token_auth_file: Option<PathBuf>,
    pub anonymous: bool,
    /// Never empty: the first one signs.
    pub service_account_issuers: Vec<String>,
    pub api_audiences: Vec<String>,
    pub service_account_lookup: bool,
    /// `--requestheader-*` (the CA file not empty when given).
    pub request_header: RequestHeaderArgs,
    pub oidc: Option<OidcFlags>,
    /// `--authentication-token-webhook-*`, when a config file is given.
    pub token_webhook: Option<TokenWebhookFlags>,
}

/// `--authentication-token-webhook-*`: a kubeconfig naming the TokenReview webhook, the API
/// version it speaks and how long its answers are kept.
#[derive(Debug, Clone)]
pub struct TokenWebhookFlags {
    pub config_file: PathBuf,
    pub version: WebhookVersion,
    pub cache_ttl: Duration,
}

/// `--oidc-*`, when an issuer is configured: everything but the CA, which is read at start.
#[derive(Debug, Clone)]
pub struct OidcFlags {
    pub config: OidcConfig,
    /// `--oidc-ca-file`.
    pub ca_file: Option<PathBuf>,
}

/// A certificate file and its private key file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertKeyFiles {
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
}

/// The validated configuration of `kcp start`: only what active features read, typed.
#[derive(Debug, Clone)]
pub struct ValidatedOptions {
    /// `--bind-address`.
    pub bind_address: IpAddr,
    /// `--secure-port` (0: the listener picks one).
    pub secure_port: u16,
    /// `--tls-cert-file` and `--tls-private-key-file`; `None` means generate.
    pub tls: Option<CertKeyFiles>,
    /// `--client-ca-file`; `None` means a generated client CA (when the admin battery is on).
    pub client_ca_file: Option<PathBuf>,
    /// `--root-directory`; `None` when empty (nothing is written to disk).
    pub root_directory: Option<PathBuf>,
    /// Where the admin kubeconfig goes: `--kubeconfig-path` or `<root-directory>/admin.kubeconfig`,
    /// `None` when the admin battery is off or there is nowhere to write.
    pub admin_kubeconfig_path: Option<PathBuf>,
    /// `--shard-name`.
    pub shard_name: String,
    /// `--shard-base-url`.
    pub shard_base_url: Option<Uri>,
    /// `--shard-external-url`.
    pub shard_external_url: Option<Uri>,
    /// `--shard-virtual-workspace-url`.
    pub shard_virtual_workspace_url: Option<Uri>,
    /// `--run-virtual-workspaces`: the virtual workspaces are mounted under `/services/`.
    pub run_virtual_workspaces: bool,
    /// `--max-logical-clusters` (`None`: unlimited).
    pub max_logical_clusters: Option<u64>,
    /// `--root-shard-kubeconfig-file`: where a non-root shard registers (always set for one).
    pub root_shard_kubeconfig_file: Option<PathBuf>,
    /// `--cache-kubeconfig`: the cache server a shard uses (always set for a non-root shard);
    /// without it the root shard serves the cache itself at `/services/cache/`.
    pub cache_kubeconfig: Option<PathBuf>,
    /// `--logical-cluster-admin-kubeconfig`: how the workspace scheduler reaches other shards
    /// (`None`: it places workspaces on this shard only).
    pub logical_cluster_admin_kubeconfig: Option<PathBuf>,
    /// `--external-logical-cluster-admin-kubeconfig`: how this shard reads service accounts of
    /// logical clusters it does not hold (through the front-proxy; `None`: it cannot).
    pub external_logical_cluster_admin_kubeconfig: Option<PathBuf>,
    /// `--external-hostname`, host only.
    pub external_hostname: Option<String>,
    /// `--batteries-included`, resolved.
    pub batteries: Batteries,
    /// `--etcd-prefix`: the first segment of every storage key, whichever the backend.
    pub etcd_prefix: String,
    /// `--etcd-compaction-interval` (zero disables compaction).
    pub etcd_compaction_interval: Duration,
    /// `--logical-cluster-total-object-limit` (zero: no default limit).
    pub logical_cluster_total_object_limit: u64,
    /// `--logical-cluster-object-count-scan-interval` (never zero).
    pub logical_cluster_object_count_scan_interval: Duration,
    /// `--authorization-always-allow-paths`: non-resource paths anybody may read.
    pub authorization_always_allow_paths: Vec<String>,
    /// `--authorization-webhook-*`, when a webhook is configured.
    pub authorization_webhook: Option<WebhookConfig>,
    /// `--root-ca-file`: the CA published as `kube-root-ca.crt`.
    pub root_ca_file: Option<PathBuf>,
    /// `--service-account-signing-key-file`, else `--service-account-private-key-file`.
    pub service_account_signing_key_file: Option<PathBuf>,
    /// `--service-account-key-file`, every one.
    pub service_account_key_files: Vec<PathBuf>,
    /// Everything else authentication reads.
    pub authentication: AuthenticationFlags,
    /// `--run-controllers`.
    pub run_controllers: bool,
    /// `--enable-leader-election` with `--leader-election-namespace` and `-name`.
    pub leader_election: Option<(String, String)>,
    /// `--kubelet-client-certificate`/`-key` and `--kubelet-certificate-authority`: how pods'
    /// streaming subresources reach kubelets (`None`: they cannot).
    pub kubelet_client: Option<KubeletClientFiles>,
    storage: StorageConfig,
    inactive: Vec<&'static str>,
}

impl ValidatedOptions {
    /// The store to open: embedded at `<root-directory>/store.redb` unless `--etcd-servers`.
    pub fn storage_config(&self) -> StorageConfig {
        self.storage.clone()
    }

    /// Flags given on the command line whose features are not built yet (long names).
    pub fn inactive_flags(&self) -> &[&'static str] {
        &self.inactive
    }
}

#[cfg(test)]
pub(crate) mod tests;
