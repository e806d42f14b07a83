//! Turns the authentication flags and the serving material into the server's authenticators and
//! token issuer: reads the files the flags name and fails the start with the flag's name when one
//! is unusable (a server that silently skipped a broken `--token-auth-file` would lock people out
//! without saying why). `kcp front-proxy` builds its authenticators here too
//! ([`authenticators`]), from the same flags, so a token means the same user at both, whether
//! a server checks it itself or asks a TokenReview webhook.

use std::path::{Path, PathBuf};

use kcp_apiserver::{Authentication, ForeignServiceAccounts};
use kcp_authn::{
    Authenticators, CertificateAuthenticator, OidcAuthenticator, OidcConfig,
    RequestHeaderAuthenticator, RequestHeaderConfig, ServiceAccountAuthenticator,
    ServiceAccountLookup, SigningKey, TokenFile, TokenIssuer, TokenReviewAuthenticator,
    VerifyingKey,
};
use kcp_kubeconfig::https;

use crate::options::{AuthenticationFlags, RequestHeaderArgs, TokenWebhookFlags, ValidatedOptions};
use crate::pki::ServingMaterial;

#[derive(Debug, thiserror::Error)]
pub enum AuthenticationSetupError {
    #[error("--{flag}: reading {}: {source}", path.display())]
    Read {
        flag: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("--{flag}: {reason}")]
    Invalid { flag: &'static str, reason: String },
}

fn invalid(flag: &'static str) -> impl Fn(&dyn std::fmt::Display) -> AuthenticationSetupError {
    move |reason| AuthenticationSetupError::Invalid {
        flag,
        reason: reason.to_string(),
    }
}

/// The server's authentication, from validated options and the loaded PKI.
pub fn build(
    options: &ValidatedOptions,
    material: &ServingMaterial,
) -> Result<Authentication, AuthenticationSetupError> {
    let flags = &options.authentication;
    let signing_key = SigningKey::from_pem(&material.service_account_signing_key_pem)
        .map_err(|e| invalid("service-account-signing-key-file")(&e))?;
    let mut verifying_keys = vec![signing_key.verifying_key()];
    verifying_keys.extend(verifying_keys_of(&material.service_account_key_pems)?);
    let token_issuer = TokenIssuer::new(signing_key, flags.service_account_issuers[0].clone());
    Ok(Authentication {
        authenticators: authenticators(flags, material.client_ca_pem.as_deref(), verifying_keys)?,
        token_issuer: Some(token_issuer),
        api_audiences: api_audiences(flags),
        service_account_lookup: flags.service_account_lookup,
        foreign_service_accounts: foreign_service_accounts(options)?,
    })
}

/// With `--service-account-lookup`, the lookup of service accounts in logical clusters other
/// shards hold, through `--external-logical-cluster-admin-kubeconfig` (its current context).
fn foreign_service_accounts(
    options: &ValidatedOptions,
) -> Result<Option<ForeignServiceAccounts>, AuthenticationSetupError> {
    const FLAG: &str = "external-logical-cluster-admin-kubeconfig";
    let Some(path) = &options.external_logical_cluster_admin_kubeconfig else {
        return Ok(None);
    };
    if !options.authentication.service_account_lookup {
        return Ok(None);
    }
    let agent = crate::shard_client::user_agent("service-account-lookup");
    let target =
        https::client_with_user_agent(path, None, &agent).map_err(|e| invalid(FLAG)(&e))?;
    Ok(Some(ForeignServiceAccounts {
        base_url: target.base_url().to_owned(),
        lookup: ServiceAccountLookup::new(target.client.clone()),
    }))
}

/// The authenticators the shared flags configure (`kcp start` and `kcp front-proxy`): client
/// certificates against `client_ca_pem`, the token file, service-account tokens verified with
/// `service_account_keys` (none: no service-account authentication), request headers, OIDC and
/// the token webhook.
pub fn authenticators(
    flags: &AuthenticationFlags,
    client_ca_pem: Option<&str>,
    service_account_keys: Vec<VerifyingKey>,
) -> Result<Authenticators, AuthenticationSetupError> {
    let x509 = client_ca_pem
        .map(CertificateAuthenticator::from_pem)
        .transpose()
        .map_err(|e| invalid("client-ca-file")(&e))?;
    let token_file = flags
        .token_auth_file
        .as_deref()
        .map(|path| TokenFile::from_file(path).map_err(|e| invalid("token-auth-file")(&e)))
        .transpose()?;
    let service_accounts = (!service_account_keys.is_empty()).then(|| {
        ServiceAccountAuthenticator::new(
            service_account_keys,
            flags.service_account_issuers.clone(),
            api_audiences(flags),
        )
    });
    Ok(Authenticators {
        x509,
        token_file,
        service_accounts,
        request_header: request_header(&flags.request_header)?,
        oidc: oidc(flags)?,
        token_review: flags
            .token_webhook
            .as_ref()
            .map(token_webhook)
            .transpose()?,
        anonymous: flags.anonymous,
    })
}

/// `--authentication-token-webhook-config-file`: a kubeconfig whose server is the URL of a
/// TokenReview webhook, asked in `--authentication-token-webhook-version`, its answers kept for
/// `--authentication-token-webhook-cache-ttl` (k8s.io/apiserver's `WebHookOptions`, which both
/// upstream servers take). Tokens no other authenticator recognises are sent there, last.
fn token_webhook(
    flags: &TokenWebhookFlags,
) -> Result<TokenReviewAuthenticator, AuthenticationSetupError> {
    let webhook = https::client(&flags.config_file, None)
        .map_err(|e| invalid("authentication-token-webhook-config-file")(&e))?;
    Ok(TokenReviewAuthenticator::webhook(
        webhook.client,
        &webhook.server,
        flags.version.as_str(),
        flags.cache_ttl,
    ))
}

/// `--api-audiences`, else the first `--service-account-issuer`.
fn api_audiences(flags: &AuthenticationFlags) -> Vec<String> {
    if flags.api_audiences.is_empty() {
        flags.service_account_issuers[..1].to_vec()
    } else {
        flags.api_audiences.clone()
    }
}

/// The keys of `--service-account-key-file` contents (PEM public keys or certificates).
pub fn verifying_keys_of(pems: &[String]) -> Result<Vec<VerifyingKey>, AuthenticationSetupError> {
    let mut keys = Vec::new();
    for pem in pems {
        keys.extend(
            VerifyingKey::from_pem(pem).map_err(|e| invalid("service-account-key-file")(&e))?,
        );
    }
    Ok(keys)
}

/// Reads the file a flag names.
pub fn read(flag: &'static str, path: &Path) -> Result<String, AuthenticationSetupError> {
    std::fs::read_to_string(path).map_err(|source| AuthenticationSetupError::Read {
        flag,
        path: path.to_owned(),
        source,
    })
}

/// The request-header authenticator `--requestheader-*` configure (`None` without a CA file).
pub fn request_header(
    flags: &RequestHeaderArgs,
) -> Result<Option<RequestHeaderAuthenticator>, AuthenticationSetupError> {
    request_header_config(flags)?
        .map(request_header_authenticator)
        .transpose()
}

/// What `--requestheader-*` configure (`None` without a CA file), the CA read.
pub fn request_header_config(
    flags: &RequestHeaderArgs,
) -> Result<Option<RequestHeaderConfig>, AuthenticationSetupError> {
    let Some(path) = &flags.client_ca_file else {
        return Ok(None);
    };
    Ok(Some(RequestHeaderConfig {
        ca_pem: read("requestheader-client-ca-file", path)?,
        allowed_names: flags.allowed_names.clone(),
        username_headers: flags.username_headers.clone(),
        group_headers: flags.group_headers.clone(),
        extra_headers_prefixes: flags.extra_headers_prefix.clone(),
        uid_headers: flags.uid_headers.clone(),
    }))
}

/// The request-header authenticator of `config`.
pub fn request_header_authenticator(
    config: RequestHeaderConfig,
) -> Result<RequestHeaderAuthenticator, AuthenticationSetupError> {
    RequestHeaderAuthenticator::new(config).map_err(|e| invalid("requestheader-client-ca-file")(&e))
}

fn oidc(
    flags: &AuthenticationFlags,
) -> Result<Option<OidcAuthenticator>, AuthenticationSetupError> {
    let Some(oidc) = &flags.oidc else {
        return Ok(None);
    };
    let ca_pem = oidc
        .ca_file
        .as_deref()
        .map(|path| read("oidc-ca-file", path))
        .transpose()?;
    let config = OidcConfig {
        ca_pem,
        ..oidc.config.clone()
    };
    OidcAuthenticator::new(config)
        .map(Some)
        .map_err(|e| invalid("oidc-issuer-url")(&e))
}
