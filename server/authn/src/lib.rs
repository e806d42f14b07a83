//! Authentication for kcp-rs: who is asking.
//!
//! kube-apiserver's authenticators, rebuilt without I/O except where the protocol needs it (OIDC
//! discovery, TokenReviews): client certificates, a static token file, service-account JWTs carrying kcp's
//! logical cluster, front-proxy request headers, OIDC ID tokens and tokens reviewed by another
//! server (delegated authentication, a TokenReview), combined in a fixed order by
//! [`Authenticators`]. The API server's filter chain calls [`Authenticators::authenticate`] once
//! per request and answers 401 on any error.

mod chain;
mod error;
mod jwt;
mod kept_answers;
mod keys;
mod oidc;
mod pem;
mod request_header;
mod service_account;
mod service_account_lookup;
mod token_file;
mod token_review;
mod user;
mod x509;

#[cfg(test)]
mod test_pki;

pub use chain::{Authenticated, Authenticators, Via};
pub use error::AuthnError;
pub use jwt::{JwtError, unverified_claims, verify};
pub use kcp_der::DerError;
pub use kept_answers::KeptAnswers;
pub use keys::{KeyError, SigningKey, VerifyingKey};
pub use oidc::{OidcAuthenticator, OidcConfig, OidcError};
pub use pem::PemError;
pub use request_header::{RequestHeaderAuthenticator, RequestHeaderConfig, RequestHeaderError};
pub use service_account::{
    AuthenticatedServiceAccount, BoundObject, BoundObjectKind, CREDENTIAL_ID_EXTRA, POD_NAME_EXTRA,
    POD_UID_EXTRA, SERVICE_ACCOUNTS_GROUP, ServiceAccountAuthenticator, ServiceAccountToken,
    TokenIssuer, service_account_username, unverified_cluster,
};
pub use service_account_lookup::{
    LookupError, REFUSAL_TTL, SUCCESS_TTL, ServiceAccountLookup, cluster_url,
};
pub use token_file::{TokenFile, TokenFileError};
pub use token_review::TokenReviewAuthenticator;
pub use user::{
    ANONYMOUS_USER, AUTHENTICATED_GROUP, CLUSTER_NAME_EXTRA, UNAUTHENTICATED_GROUP, UserInfo,
};
pub use x509::{CertificateAuthenticator, X509Error};
