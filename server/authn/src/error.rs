//! Why a request did not authenticate.
//!
//! Every variant ends in the same answer (401 `Unauthorized`); the variants exist for logs and
//! metrics. Their texts are short reasons computed here, never token contents, so they are safe to
//! log.

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthnError {
    #[error("client certificate rejected: {0}")]
    Certificate(String),
    #[error("service account token rejected: {0}")]
    ServiceAccount(String),
    #[error("OIDC token rejected: {0}")]
    Oidc(String),
    #[error("OIDC issuer unavailable: {0}")]
    OidcUnavailable(String),
    #[error("TokenReview failed: {0}")]
    TokenReviewUnavailable(String),
    #[error("empty bearer token")]
    EmptyBearerToken,
    #[error("bearer token not accepted by any authenticator")]
    TokenNotAccepted,
    #[error("no credentials and anonymous requests are disabled")]
    Unauthorized,
}
