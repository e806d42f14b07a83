//! What every virtual workspace shares as a mounted service: it answers with a `Result` (an error
//! becomes its Kubernetes `Status`), authorizes its requests itself, and refuses a request with
//! kube-apiserver's 403 naming what was asked and why.

use std::sync::Arc;

use futures::future::BoxFuture;
use http::Response;
use kcp_apimachinery::ApiError;
use kcp_apiserver::response::{self, Body};
use kcp_apiserver::services::{Service, ServiceRequest};
use kcp_apiserver::{RequestInfo, authorization_attributes, rbac_user};

/// A virtual workspace: one answer per request.
pub trait VirtualWorkspace: Send + Sync + 'static {
    fn answer(
        &self,
        request: ServiceRequest,
    ) -> impl Future<Output = Result<Response<Body>, ApiError>> + Send;
}

/// A virtual workspace as the API server mounts it.
pub struct Mounted<W>(pub W);

impl<W: VirtualWorkspace> Service for Mounted<W> {
    fn serve(self: Arc<Self>, request: ServiceRequest) -> BoxFuture<'static, Response<Body>> {
        Box::pin(async move {
            self.0
                .answer(request)
                .await
                .unwrap_or_else(|error| response::error(&error))
        })
    }

    fn authorizes_itself(&self) -> bool {
        true
    }
}

/// The user of a request as RBAC sees them.
pub fn user(request: &ServiceRequest) -> kcp_rbac::User {
    rbac_user(&request.user)
}

/// kube-apiserver's 403 for `request` (its `info` and API `path`), with `reason`.
pub fn forbidden(
    request: &ServiceRequest,
    info: &RequestInfo,
    path: &str,
    reason: &str,
) -> ApiError {
    authorization_attributes(user(request), info, &request.method, path).forbidden_error(reason)
}

/// Across clusters (`/clusters/*`) only list and watch are served, as upstream's wildcard
/// requests: other verbs are refused with 405.
pub fn list_or_watch_only(info: &RequestInfo) -> Result<(), ApiError> {
    only_verbs(info, &["list", "watch"])
}

/// Refuses a request whose verb is not one of `verbs` with 405.
pub fn only_verbs(info: &RequestInfo, verbs: &[&str]) -> Result<(), ApiError> {
    let verb = info.verb.as_str();
    if verbs.contains(&verb) {
        Ok(())
    } else {
        Err(ApiError::method_not_supported(
            &info.group,
            &info.resource,
            verb,
        ))
    }
}
