//! Resource requests: `/api/v1/...` and `/apis/<group>/<version>/...` after authorization.
//!
//! This module checks that the URL addresses something that exists (type, scope, subresource, cluster
//! target) and dispatches object verbs; the verb modules decode the request, call the generic
//! [`RestStore`](kcp_registry::store::RestStore) and render the result in the negotiated encoding.
//! Endpoints that are not objects (reviews, TokenRequest, the home workspace) have their own
//! handlers, chosen in [`crate::handlers`].

mod admission;
mod delete;
mod list_body;
mod maximal_policy;
mod read;
mod render;
mod watch;
mod write;

use std::sync::Arc;

use bytes::Bytes;
use http::Response;
use kcp_apimachinery::{ApiError, StatusReason};

use super::Scope;
use super::response::Body;
use crate::filters::UserInfo;
use crate::request::query::Query;
use crate::request::{RequestInfo, Verb};
use kcp_registry::ClusterTarget;
use kcp_registry::ResourceType;
use kcp_registry::store::Location;

/// Everything a verb handler needs about the request.
pub struct ResourceRequest {
    pub cluster: ClusterTarget,
    pub info: RequestInfo,
    pub query: Query,
    pub accept: Option<String>,
    pub content_type: Option<String>,
    /// Names the default field manager of writes that do not name one.
    pub user_agent: Option<String>,
    /// Who the request acts as (after impersonation).
    pub user: UserInfo,
    pub body: Bytes,
    /// Upstream's `X-Kcp-Internal-Deep-SubjectAccessReview: true`: a SubjectAccessReview
    /// answered by the cluster's RBAC alone (honoured for `system:masters` only).
    pub deep_review: bool,
}

/// A request resolved to a resource type.
pub(crate) struct Resolved<'a> {
    pub scope: &'a Scope<'a>,
    pub request: &'a ResourceRequest,
    pub rt: Arc<ResourceType>,
}

impl Resolved<'_> {
    /// Where the addressed object lives. Only list and watch may span every logical cluster, which
    /// [`handle`] checks before dispatching, so the wildcard here is a 405 for safety.
    pub fn location(&self) -> Result<Location<'_>, ApiError> {
        match &self.request.cluster {
            ClusterTarget::One(cluster) => Ok(Location {
                cluster,
                namespace: self.namespace(),
            }),
            ClusterTarget::Wildcard => Err(ApiError::method_not_supported(
                &self.rt.group,
                &self.rt.plural,
                self.request.info.verb.as_str(),
            )),
        }
    }

    /// The namespace of the request for namespaced types (a namespace object's own name is not one).
    pub fn namespace(&self) -> Option<&str> {
        if self.rt.namespaced {
            self.request.info.namespace.as_deref()
        } else {
            None
        }
    }

    pub fn name(&self) -> &str {
        self.request.info.name.as_deref().unwrap_or_default()
    }
}

/// kube-apiserver's answer for a path no handler serves.
pub fn no_such_resource() -> ApiError {
    ApiError {
        code: 404,
        reason: StatusReason::NotFound,
        message: "the server could not find the requested resource".to_string(),
        details: None,
    }
}

/// Resolves a resource request to its type, checking that the URL addresses something that exists
/// (type, subresource, scope) and that only list and watch span every logical cluster.
pub(crate) fn resolve<'a>(
    scope: &'a Scope<'a>,
    request: &'a ResourceRequest,
) -> Result<Resolved<'a>, ApiError> {
    let info = &request.info;
    let registry = scope.store.registry();
    // `/clusters/*/.../<resource>:<identityHash>`: the resource bound from the export with that
    // identity, in every logical cluster (upstream's wildcard requests for bound resources; without
    // the identity a bound resource is not found, as upstream's).
    let rt = match (&request.cluster, info.resource.split_once(':')) {
        (ClusterTarget::Wildcard, Some((resource, identity))) => {
            registry.bound_type(&info.group, &info.version, resource, identity)
        }
        _ => registry
            .for_target(&request.cluster)
            .lookup(&info.group, &info.version, &info.resource)
            .cloned(),
    }
    .ok_or_else(no_such_resource)?;
    if info.extra_parts > 0 {
        return Err(no_such_resource());
    }
    if let Some(subresource) = &info.subresource
        && !rt.has_subresource(subresource)
    {
        return Err(no_such_resource());
    }
    // A namespaced object is addressed inside its namespace; a cluster-scoped one never is (except the
    // namespace object itself, whose URL reads like a namespace).
    let is_namespace_object = rt.group.is_empty() && rt.plural == "namespaces";
    let addresses_one = info.name.is_some() || info.verb == Verb::Create;
    if rt.namespaced && addresses_one && info.namespace.is_none() {
        return Err(no_such_resource());
    }
    if !rt.namespaced && !is_namespace_object && info.namespace.is_some() {
        return Err(no_such_resource());
    }
    if request.cluster == ClusterTarget::Wildcard && !matches!(info.verb, Verb::List | Verb::Watch)
    {
        return Err(ApiError::method_not_supported(
            &rt.group,
            &rt.plural,
            info.verb.as_str(),
        ));
    }
    Ok(Resolved { scope, request, rt })
}

/// Serves a verb on objects (or their status, scale and finalize subresources) through the
/// generic store.
pub(crate) async fn serve(resolved: &Resolved<'_>) -> Result<Response<Body>, ApiError> {
    resolved.check_maximal_permission_policy().await?;
    match resolved.request.info.verb {
        Verb::Get => read::get(resolved).await,
        Verb::List => read::list(resolved).await,
        Verb::Watch => watch::watch(resolved).await,
        Verb::Create => write::create(resolved).await,
        Verb::Update => write::update(resolved).await,
        Verb::Patch => write::patch(resolved).await,
        Verb::Delete => delete::delete(resolved).await,
        Verb::DeleteCollection => delete::delete_collection(resolved).await,
        Verb::Other => Err(ApiError::method_not_supported(
            &resolved.rt.group,
            &resolved.rt.plural,
            "other",
        )),
    }
}
