//! What admission reads besides the write itself, as narrow interfaces the API server provides:
//! other objects of the write's logical cluster (policy params, the namespace) and the
//! authorizer (CertificateSigningRequest approval and signing rights).

use futures::future::BoxFuture;
use kcp_apimachinery::ApiError;
use kcp_authn::UserInfo;
use serde_json::Value;

/// Objects of the logical cluster being written to, by API version and kind.
pub trait Objects: Send + Sync {
    /// One object, `None` when it does not exist (or its kind is not served).
    fn get<'a>(
        &'a self,
        api_version: &'a str,
        kind: &'a str,
        namespace: Option<&'a str>,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<Value>, ApiError>>;

    /// Every object of a kind, in one namespace or (`None`) in all of them.
    fn list<'a>(
        &'a self,
        api_version: &'a str,
        kind: &'a str,
        namespace: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Vec<Value>, ApiError>>;
}

/// A question to the authorizer, about the logical cluster being written to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Access<'a> {
    pub verb: &'a str,
    pub group: &'a str,
    pub resource: &'a str,
    pub name: &'a str,
}

/// The request's authorizer.
pub trait Authorizer: Send + Sync {
    /// Whether `user` may do `access` in the cluster being written to.
    fn allowed<'a>(&'a self, user: &'a UserInfo, access: Access<'a>) -> BoxFuture<'a, bool>;
}
