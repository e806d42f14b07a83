//! HTTP handlers: resource verbs, reviews, TokenRequest, the home workspace, discovery, OpenAPI,
//! health and version.
//!
//! Like k8s.io/apiserver's `endpoints/handlers`, a handler receives a narrow [`Scope`] (the
//! registry's store and the services a request may consult), never the server itself. A resource
//! request goes to exactly one handler, chosen in [`serve_resource`]: the generic object verbs in
//! [`resource`], or an endpoint that is not an object.

pub mod discovery;
pub(crate) mod elsewhere;
pub mod health;
mod home;
pub mod metrics;
pub mod negotiation;
pub mod openapi;
pub mod resource;
pub mod response;
mod review;
mod token_request;

use http::Response;
use kcp_apimachinery::ApiError;
use kcp_controllers::TenancyIndex;
use kcp_registry::store::RestStore;
use tokio_util::sync::CancellationToken;

use crate::filters::authentication::Authentication;
use crate::filters::authorization::Authorizer;
use crate::request::Verb;
use resource::ResourceRequest;
use response::Body;

/// What a handler may use: the store and the request-independent services.
#[derive(Clone, Copy)]
pub struct Scope<'a> {
    pub store: &'a RestStore,
    /// LogicalClusters and WorkspaceTypes (admission and the home workspace read them).
    pub tenancy: &'a TenancyIndex,
    /// Token issuing and reviews.
    pub authentication: &'a Authentication,
    /// Access reviews and escalation checks.
    pub authorizer: &'a Authorizer,
    /// Admission of writes (webhooks, policies, quota, CSR rules).
    pub admission: &'a kcp_admission::chain::Admission,
    /// Cancelled when the server shuts down; watches end on it.
    pub shutdown: &'a CancellationToken,
    /// The shared watch caches lists are served from.
    pub watch_caches: &'a kcp_watchcache::WatchCaches,
    /// `--max-logical-clusters` (LogicalCluster admission refuses creations beyond it).
    pub max_logical_clusters: Option<u64>,
}

/// Serves a request for `/api/...` or `/apis/...` (after authorization) with the handler of the
/// endpoint it addresses. Its errors are `Status` objects in protobuf when the client asked for
/// protobuf and the kind has an encoding, as kube-apiserver negotiates them (JSON otherwise).
pub async fn serve_resource(
    scope: &Scope<'_>,
    request: ResourceRequest,
) -> Result<Response<Body>, ApiError> {
    let resolved = resource::resolve(scope, &request)?;
    match serve_resolved(&resolved, &request).await {
        Err(error) => negotiation::protobuf_error(
            request.accept.as_deref(),
            &resolved.rt.api_version(),
            &resolved.rt.kind,
            &error,
        )
        .ok_or(error),
        ok => ok,
    }
}

async fn serve_resolved(
    resolved: &resource::Resolved<'_>,
    request: &ResourceRequest,
) -> Result<Response<Body>, ApiError> {
    let verb = request.info.verb;
    if home::addressed(resolved) {
        return home::serve(resolved).await;
    }
    if token_request::addressed(resolved) {
        return match verb {
            // Like kube-apiserver, the response encoding is settled before the body is read:
            // a Table-only client gets 406 whatever it sent.
            Verb::Create => {
                resolved.output()?;
                token_request::create(resolved).await
            }
            verb => Err(ApiError::method_not_supported(
                "authentication.k8s.io",
                "tokenrequests",
                verb.as_str(),
            )),
        };
    }
    if let Some(review) = resolved.rt.strategy.review() {
        return match verb {
            Verb::Create if request.info.name.is_none() => {
                resolved.output()?;
                review::create(resolved, review).await
            }
            verb => Err(ApiError::method_not_supported(
                &resolved.rt.group,
                &resolved.rt.plural,
                verb.as_str(),
            )),
        };
    }
    resource::serve(resolved).await
}
