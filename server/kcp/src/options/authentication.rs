//! The authentication flags `kcp start` and `kcp front-proxy` share, spelled and checked once:
//! client certificates (`--client-ca-file`), front-proxy request headers (`--requestheader-*`),
//! static tokens (`--token-auth-file`), OIDC (`--oidc-*`), a TokenReview webhook
//! (`--authentication-token-webhook-*`) and service-account token verification
//! (`--service-account-key-file`, `--service-account-issuer`, `--api-audiences`). Both upstream
//! servers take k8s.io/apiserver's `BuiltInAuthenticationOptions` for them, so both accept them
//! with the same syntax and defaults; what only a shard has (anonymous requests, signing keys,
//! service-account lookup) stays in `kcp start`'s options.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{ArgAction, Args};
use http::Uri;
use kcp_apimachinery::duration;
use kcp_authn::OidcConfig;

use super::{
    AuthenticationFlags, DEFAULT_SERVICE_ACCOUNT_ISSUER, OidcFlags, OptionsError,
    TokenWebhookFlags, WebhookVersion, non_empty, values,
};

/// Front-proxy request headers (`--requestheader-*`), also `kcp virtual-workspaces`'. Field docs
/// are the help texts.
#[derive(Debug, Clone, Default, Args)]
pub struct RequestHeaderArgs {
    /// CA bundle for front-proxy client certificates that carry identity in request headers.
    #[arg(
        id = "requestheader_client_ca_file",
        long = "requestheader-client-ca-file",
        value_parser = values::path,
        help_heading = "Authentication"
    )]
    pub client_ca_file: Option<PathBuf>,
    /// Comma-separated common names allowed to send request-header identity.
    #[arg(
        long = "requestheader-allowed-names",
        value_delimiter = ',',
        help_heading = "Authentication"
    )]
    pub allowed_names: Vec<String>,
    /// Comma-separated headers carrying the user name.
    #[arg(
        long = "requestheader-username-headers",
        value_delimiter = ',',
        help_heading = "Authentication"
    )]
    pub username_headers: Vec<String>,
    /// Comma-separated headers carrying groups.
    #[arg(
        long = "requestheader-group-headers",
        value_delimiter = ',',
        help_heading = "Authentication"
    )]
    pub group_headers: Vec<String>,
    /// Comma-separated header prefixes carrying extra user information.
    #[arg(
        long = "requestheader-extra-headers-prefix",
        value_delimiter = ',',
        help_heading = "Authentication"
    )]
    pub extra_headers_prefix: Vec<String>,
    /// Comma-separated headers carrying the user's UID.
    #[arg(
        long = "requestheader-uid-headers",
        value_delimiter = ',',
        help_heading = "Authentication"
    )]
    pub uid_headers: Vec<String>,
}

impl RequestHeaderArgs {
    /// The flags with an empty `--requestheader-client-ca-file` as not given.
    pub fn validated(&self) -> RequestHeaderArgs {
        RequestHeaderArgs {
            client_ca_file: non_empty(self.client_ca_file.as_ref()),
            ..self.clone()
        }
    }
}

/// The shared authentication flags. Field docs are the help texts.
#[derive(Debug, Clone, Args)]
pub struct AuthenticationArgs {
    /// CA bundle that client certificates are verified against (user = CN, groups = O).
    #[arg(long, value_parser = values::path, help_heading = "Authentication")]
    pub client_ca_file: Option<PathBuf>,
    #[command(flatten)]
    pub request_header: RequestHeaderArgs,
    /// CSV file of static bearer tokens.
    #[arg(long, value_parser = values::path, help_heading = "Authentication")]
    pub token_auth_file: Option<PathBuf>,
    /// OIDC issuer URL (https).
    #[arg(long, value_parser = values::https_url, help_heading = "Authentication")]
    pub oidc_issuer_url: Option<Uri>,
    /// OIDC client ID (required with --oidc-issuer-url).
    #[arg(long, help_heading = "Authentication")]
    pub oidc_client_id: Option<String>,
    /// CA bundle of the OIDC issuer.
    #[arg(long, value_parser = values::path, help_heading = "Authentication")]
    pub oidc_ca_file: Option<PathBuf>,
    /// JWT claim holding the user name.
    #[arg(long, default_value = "sub", help_heading = "Authentication")]
    pub oidc_username_claim: String,
    /// Prefix for OIDC user names.
    #[arg(long, help_heading = "Authentication")]
    pub oidc_username_prefix: Option<String>,
    /// JWT claim holding the groups.
    #[arg(long, help_heading = "Authentication")]
    pub oidc_groups_claim: Option<String>,
    /// Prefix for OIDC group names.
    #[arg(long, help_heading = "Authentication")]
    pub oidc_groups_prefix: Option<String>,
    /// Comma-separated key=value claims every token must carry.
    #[arg(long, value_delimiter = ',', value_parser = values::key_value, help_heading = "Authentication")]
    pub oidc_required_claim: Vec<(String, String)>,
    /// Comma-separated accepted JOSE signing algorithms.
    #[arg(long, value_delimiter = ',', default_values = ["RS256"], value_parser = values::signing_alg,
        help_heading = "Authentication")]
    pub oidc_signing_algs: Vec<String>,
    /// Kubeconfig of a TokenReview webhook.
    #[arg(long, value_parser = values::path, help_heading = "Authentication")]
    pub authentication_token_webhook_config_file: Option<PathBuf>,
    /// How long to cache TokenReview answers.
    #[arg(long, default_value = "2m", value_parser = duration::parse, help_heading = "Authentication")]
    pub authentication_token_webhook_cache_ttl: Duration,
    /// TokenReview API version of the webhook.
    #[arg(long, default_value = "v1beta1", help_heading = "Authentication")]
    pub authentication_token_webhook_version: WebhookVersion,
    /// Public key (or certificate) that verifies service account tokens; repeatable.
    #[arg(long, value_parser = values::path, action = ArgAction::Append, help_heading = "Service accounts")]
    pub service_account_key_file: Vec<PathBuf>,
    /// Issuer of service account tokens; repeatable, the first one signs.
    #[arg(long, action = ArgAction::Append, help_heading = "Service accounts")]
    pub service_account_issuer: Vec<String>,
    /// Comma-separated audiences tokens must be meant for (default: the first issuer).
    #[arg(long, value_delimiter = ',', help_heading = "Service accounts")]
    pub api_audiences: Vec<String>,
}

impl AuthenticationArgs {
    /// The validated flags; `anonymous` and `service_account_lookup` are the server's own.
    pub fn validate(
        &self,
        anonymous: bool,
        service_account_lookup: bool,
    ) -> Result<AuthenticationFlags, OptionsError> {
        let oidc_client_id = self.oidc_client_id.as_deref().unwrap_or("").trim();
        if self.oidc_issuer_url.is_some() == oidc_client_id.is_empty() {
            return Err(OptionsError::OidcIncomplete);
        }
        Ok(AuthenticationFlags {
            token_auth_file: non_empty(self.token_auth_file.as_ref()),
            anonymous,
            service_account_issuers: if self.service_account_issuer.is_empty() {
                vec![DEFAULT_SERVICE_ACCOUNT_ISSUER.to_string()]
            } else {
                self.service_account_issuer.clone()
            },
            api_audiences: self.api_audiences.clone(),
            service_account_lookup,
            request_header: self.request_header.validated(),
            oidc: self.oidc_issuer_url.as_ref().map(|issuer| OidcFlags {
                config: OidcConfig {
                    issuer_url: issuer.to_string().trim_end_matches('/').to_string(),
                    client_id: oidc_client_id.to_string(),
                    ca_pem: None,
                    username_claim: self.oidc_username_claim.clone(),
                    username_prefix: self.oidc_username_prefix.clone(),
                    groups_claim: self.oidc_groups_claim.clone(),
                    groups_prefix: self.oidc_groups_prefix.clone(),
                    required_claims: self.oidc_required_claim.clone(),
                    signing_algs: self.oidc_signing_algs.clone(),
                },
                ca_file: non_empty(self.oidc_ca_file.as_ref()),
            }),
            token_webhook: non_empty(self.authentication_token_webhook_config_file.as_ref()).map(
                |config_file| TokenWebhookFlags {
                    config_file,
                    version: self.authentication_token_webhook_version,
                    cache_ttl: self.authentication_token_webhook_cache_ttl,
                },
            ),
        })
    }

    /// `--service-account-key-file`, every non-empty one.
    pub fn service_account_key_files(&self) -> Vec<PathBuf> {
        self.service_account_key_file
            .iter()
            .filter_map(|path| non_empty(Some(path)))
            .collect()
    }

    /// Input files these flags name, by flag name (empty ones are not given).
    pub fn input_files(&self) -> Vec<(&'static str, &Path)> {
        let single = [
            ("client-ca-file", &self.client_ca_file),
            ("oidc-ca-file", &self.oidc_ca_file),
            (
                "requestheader-client-ca-file",
                &self.request_header.client_ca_file,
            ),
            ("token-auth-file", &self.token_auth_file),
            (
                "authentication-token-webhook-config-file",
                &self.authentication_token_webhook_config_file,
            ),
        ];
        let singles = single.into_iter().filter_map(|(flag, path)| {
            path.as_deref()
                .filter(|path| !path.as_os_str().is_empty())
                .map(|path| (flag, path))
        });
        let repeated = self
            .service_account_key_file
            .iter()
            .filter(|path| !path.as_os_str().is_empty())
            .map(|path| ("service-account-key-file", path.as_path()));
        singles.chain(repeated).collect()
    }
}
