//! `kcp virtual-workspaces` (and the program name `virtual-workspaces`): the virtual workspaces
//! of one shard on a port of their own, upstream's `cmd/virtual-workspaces`, so a shard can run
//! with `--run-virtual-workspaces=false` and point `--shard-virtual-workspace-url` here. Flags as
//! upstream: `--kubeconfig` (required: the shard, with a `system:masters` identity, as the admin
//! kubeconfig `kcp start` writes) and `--context`, `--cache-kubeconfig`, secure serving
//! (`--bind-address`, `--secure-port` 6444, `--tls-cert-file`/`--tls-private-key-file`),
//! `--client-ca-file`, logging.
//!
//! The services are the in-process ones (kcp-virtual-workspaces), served through the shard's
//! kubeconfig instead of the in-process loopback: requests go to the shard as the asking user
//! (impersonation) and deep SubjectAccessReviews carry upstream's header. Exports and bindings are
//! read from the shard itself, so `--cache-kubeconfig` is accepted for upstream's command lines
//! and not read.
//!
//! Authentication is upstream's delegated one (k8s.io/apiserver's
//! `DelegatingAuthenticationOptions`): client certificates (`--client-ca-file`, else a client CA
//! generated under --root-directory); identity headers from a front-proxy (`--requestheader-*`,
//! with the delegating defaults `X-Remote-User`, `X-Remote-Group`, `X-Remote-Extra-` when no
//! header names are given; believed only from a client certificate of the request-header CA
//! whose name is allowed, and removed from every other request); bearer tokens reviewed by the
//! shard `--authentication-kubeconfig` names (a TokenReview, answers kept for
//! `--authentication-token-webhook-cache-ttl`, 10 s). Anything else is 401. With
//! `--authentication-skip-lookup=false` the client CA and the request-header settings the flags
//! leave unset come from the `kube-system/extension-apiserver-authentication` ConfigMap the
//! `--authentication-kubeconfig` shard publishes ([`crate::authentication_info`]), as upstream's
//! in-cluster lookup (skipped by default in upstream's virtual workspaces, as here).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::{ArgAction, Args};
use kcp_apimachinery::duration;
use kcp_apiserver::TlsMaterial;
use kcp_apiserver::listener::TlsListener;
use kcp_apiserver::services::Services;
use kcp_apiserver::standalone::ServicesServer;
use kcp_authn::{Authenticators, CertificateAuthenticator, TokenReviewAuthenticator};
use kcp_virtual_workspaces::Backend;
use kcp_virtual_workspaces::remote::{RemoteError, RemoteShard};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::authentication::{self, AuthenticationSetupError};
use crate::authentication_info::{self, AuthenticationInfo, LookupError};
use crate::options::{LoggingFlags, RequestHeaderArgs, ServingFlags, non_empty, values};
use crate::pki::{self, PkiError, TransportOptions};

/// Upstream's port of the standalone virtual workspaces.
pub const DEFAULT_SECURE_PORT: &str = "6444";

/// How long in-flight requests may take after a shutdown signal.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(30);

/// Every flag of `kcp virtual-workspaces`. Field docs are the help texts.
#[derive(Debug, Clone, Args)]
pub struct VirtualWorkspacesOptions {
    /// Kubeconfig of the shard whose virtual workspaces are served (a system:masters identity).
    #[arg(long, value_parser = values::path, help_heading = "Shard")]
    pub kubeconfig: PathBuf,
    /// Context of --kubeconfig to use (default: its current context).
    #[arg(long, help_heading = "Shard")]
    pub context: Option<String>,
    /// Kubeconfig of the cache server (accepted as upstream's; exports are read from the shard).
    #[arg(long, value_parser = values::path, help_heading = "Shard")]
    pub cache_kubeconfig: Option<PathBuf>,
    #[command(flatten)]
    pub serving: ServingFlags,
    /// CA bundle client certificates are verified against; generated under --root-directory
    /// when not given.
    #[arg(long, value_parser = values::path, help_heading = "Authentication")]
    pub client_ca_file: Option<PathBuf>,
    #[command(flatten)]
    pub request_header: RequestHeaderArgs,
    /// Kubeconfig of the server (the shard) that reviews bearer tokens (TokenReview); without it
    /// bearer tokens are refused.
    #[arg(long, value_parser = values::path, help_heading = "Authentication")]
    pub authentication_kubeconfig: Option<PathBuf>,
    /// How long TokenReview answers are kept.
    #[arg(long, default_value = "10s", value_parser = duration::parse, help_heading = "Authentication")]
    pub authentication_token_webhook_cache_ttl: Duration,
    /// Do not read the client CA and request-header settings the flags leave unset from the
    /// kube-system/extension-apiserver-authentication ConfigMap of the --authentication-kubeconfig
    /// server (true by default, as upstream's virtual workspaces).
    #[arg(long, default_value = "true", value_name = "BOOL", value_parser = values::go_bool, num_args = 0..=1,
        require_equals = true, default_missing_value = "true", action = ArgAction::Set, help_heading = "Authentication")]
    pub authentication_skip_lookup: bool,
    /// Start even when that ConfigMap cannot be read.
    #[arg(long, default_value = "false", value_name = "BOOL", value_parser = values::go_bool, num_args = 0..=1,
        require_equals = true, default_missing_value = "true", action = ArgAction::Set, help_heading = "Authentication")]
    pub authentication_tolerate_lookup_failure: bool,
    /// Directory for generated certificates; empty keeps them in memory.
    #[arg(long, value_parser = values::path, default_value = ".kcp-virtual-workspaces", help_heading = "kcp")]
    pub root_directory: PathBuf,
    #[command(flatten)]
    pub logging: LoggingFlags,
}

/// Why `kcp virtual-workspaces` stopped.
#[derive(Debug, thiserror::Error)]
pub enum VirtualWorkspacesError {
    #[error("--tls-cert-file and --tls-private-key-file must be given together")]
    HalfTlsPair,
    #[error("creating {path}: {source}")]
    Directory {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Shard(#[from] RemoteError),
    #[error(transparent)]
    Pki(#[from] PkiError),
    #[error("--client-ca-file: {0}")]
    ClientCa(#[from] kcp_authn::X509Error),
    #[error(transparent)]
    Authentication(#[from] AuthenticationSetupError),
    #[error("--authentication-kubeconfig {}: {source}", path.display())]
    AuthenticationKubeconfig {
        path: PathBuf,
        source: kcp_kubeconfig::https::HttpsError,
    },
    #[error(
        "{0} (pass --authentication-skip-lookup or --authentication-tolerate-lookup-failure to start without it)"
    )]
    Lookup(#[from] LookupError),
    #[error(transparent)]
    Serve(#[from] kcp_apiserver::ServeError),
    #[error("installing signal handlers: {0}")]
    Signals(std::io::Error),
}

impl VirtualWorkspacesOptions {
    /// Checks what clap cannot: pairs of flags.
    pub fn validate(&self) -> Result<(), VirtualWorkspacesError> {
        if self.serving.tls_cert_file.is_some() != self.serving.tls_private_key_file.is_some() {
            return Err(VirtualWorkspacesError::HalfTlsPair);
        }
        Ok(())
    }
}

/// Serves the virtual workspaces until SIGTERM or SIGINT.
pub async fn run(options: VirtualWorkspacesOptions) -> Result<(), VirtualWorkspacesError> {
    options.validate()?;
    let root = non_empty(Some(&options.root_directory));
    if let Some(root) = &root {
        std::fs::create_dir_all(root).map_err(|source| VirtualWorkspacesError::Directory {
            path: root.clone(),
            source,
        })?;
    }
    let shard = RemoteShard::from_kubeconfig(&options.kubeconfig, options.context.as_deref())?;
    let backend = Backend::default();
    backend.connect(Arc::new(shard));
    let tls = options.serving.cert_key_files();
    let transport = pki::transport(&TransportOptions {
        root_directory: root.as_deref(),
        tls: tls.as_ref(),
        client_ca_file: options.client_ca_file.as_deref(),
        admin: true,
        user: false,
        bind_address: options.serving.bind_address,
        hosts: Vec::new(),
    })?;
    let request_header = with_delegating_defaults(&options.request_header);
    let mut client_ca_pem = transport.client_ca_pem.clone().unwrap_or_default();
    let mut request_header = authentication::request_header_config(&request_header)?;
    let published = published(&options).await?;
    if options.client_ca_file.is_none()
        && let Some(pem) = published.client_ca_pem
    {
        client_ca_pem = pem;
    }
    if request_header.is_none() {
        request_header = published.request_header;
    }
    let requestheader_ca_pem = request_header.as_ref().map(|config| config.ca_pem.clone());
    let authenticators = Authenticators {
        x509: Some(CertificateAuthenticator::from_pem(&client_ca_pem)?),
        request_header: request_header
            .map(authentication::request_header_authenticator)
            .transpose()?,
        token_review: token_review(&options)?,
        ..Authenticators::default()
    };
    let stopping = CancellationToken::new();
    let services = kcp_virtual_workspaces::mount(Services::default(), &backend);
    let handler = ServicesServer::new(services, authenticators, stopping.clone());
    // The TLS layer asks for certificates of both CAs: clients' and the front-proxy's.
    let client_ca_pems: Vec<&str> = std::iter::once(&client_ca_pem)
        .chain(&requestheader_ca_pem)
        .map(String::as_str)
        .collect();
    let listener = TlsListener::bind(
        SocketAddr::new(options.serving.bind_address, options.serving.secure_port),
        TlsMaterial {
            serving_cert_chain_pem: &transport.serving_cert_chain_pem,
            serving_key_pem: &transport.serving_key_pem,
            client_ca_pems: &client_ca_pems,
        },
    )
    .await?;
    let port = listener
        .local_addr()
        .map_or(options.serving.secure_port, |address| address.port());
    info!(address = %SocketAddr::new(options.serving.bind_address, port), shard = %options.kubeconfig.display(), "serving the virtual workspaces");
    let signals = crate::start::shutdown_signal().map_err(VirtualWorkspacesError::Signals)?;
    listener
        .serve(Arc::new(handler), signals, &stopping, SHUTDOWN_GRACE)
        .await;
    info!("shutdown complete");
    Ok(())
}

/// `--requestheader-*` with the delegating defaults for header names not given (upstream's
/// `NewDelegatingAuthenticationOptions`), so a front-proxy's headers work with only the CA.
fn with_delegating_defaults(flags: &RequestHeaderArgs) -> RequestHeaderArgs {
    let or_default = |given: &[String], default: &str| {
        if given.is_empty() {
            vec![default.to_owned()]
        } else {
            given.to_vec()
        }
    };
    RequestHeaderArgs {
        username_headers: or_default(&flags.username_headers, "X-Remote-User"),
        group_headers: or_default(&flags.group_headers, "X-Remote-Group"),
        extra_headers_prefix: or_default(&flags.extra_headers_prefix, "X-Remote-Extra-"),
        ..flags.validated()
    }
}

/// What the `--authentication-kubeconfig` server publishes of its authentication, unless
/// `--authentication-skip-lookup` (upstream's in-cluster lookup): nothing without that
/// kubeconfig or when both CAs are given by flags; a failed read stops the server unless
/// `--authentication-tolerate-lookup-failure`.
async fn published(
    options: &VirtualWorkspacesOptions,
) -> Result<AuthenticationInfo, VirtualWorkspacesError> {
    let flags_give_all = options.client_ca_file.is_some()
        && options.request_header.validated().client_ca_file.is_some();
    if options.authentication_skip_lookup || flags_give_all {
        return Ok(AuthenticationInfo::default());
    }
    let Some(path) = non_empty(options.authentication_kubeconfig.as_ref()) else {
        warn!(
            "no --authentication-kubeconfig to look the client CA and request-header settings up with"
        );
        return Ok(AuthenticationInfo::default());
    };
    let server = kcp_kubeconfig::https::client(&path, None)
        .map_err(|source| VirtualWorkspacesError::AuthenticationKubeconfig { path, source })?;
    match authentication_info::lookup(&server.client, server.base_url()).await {
        Ok(info) => Ok(info),
        Err(error) if options.authentication_tolerate_lookup_failure => {
            warn!(%error, "starting without the published authentication settings");
            Ok(AuthenticationInfo::default())
        }
        Err(error) => Err(error.into()),
    }
}

/// The shard's TokenReviews, when `--authentication-kubeconfig` names it.
fn token_review(
    options: &VirtualWorkspacesOptions,
) -> Result<Option<TokenReviewAuthenticator>, VirtualWorkspacesError> {
    let Some(path) = non_empty(options.authentication_kubeconfig.as_ref()) else {
        return Ok(None);
    };
    let shard = kcp_kubeconfig::https::client(&path, None)
        .map_err(|source| VirtualWorkspacesError::AuthenticationKubeconfig { path, source })?;
    Ok(Some(TokenReviewAuthenticator::new(
        shard.client.clone(),
        shard.base_url(),
        options.authentication_token_webhook_cache_ttl,
    )))
}
