//! Resource requests: `/api/v1/...` and `/apis/<group>/<version>/...` after authorization.
//!
//! This module checks that the URL addresses something that exists (type, scope, subresource, cluster
//! target) and dispatches by verb; the verb modules decode the request, call the generic
//! [`RestStore`](crate::registry::store::RestStore) and render the result in the negotiated encoding.

mod admission;
mod delete;
mod read;
mod render;
mod review;
mod token_request;
mod watch;
mod write;

use std::sync::Arc;

use bytes::Bytes;
use http::Response;
use kcp_apimachinery::{ApiError, StatusReason};

use super::response::Body;
use crate::filters::UserInfo;
use crate::filters::authorization::policies::RBAC_GROUP;
use crate::registry::ResourceType;
use crate::registry::store::Location;
use crate::request::query::Query;
use crate::request::{ClusterTarget, RequestInfo, Verb};
use crate::server::App;

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
}

/// A request resolved to a resource type.
pub(crate) struct Resolved<'a> {
    pub app: &'a App,
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

pub async fn handle(app: &App, request: ResourceRequest) -> Result<Response<Body>, ApiError> {
    let info = &request.info;
    let rt = app
        .store
        .registry()
        .for_target(&request.cluster)
        .lookup(&info.group, &info.version, &info.resource)
        .cloned()
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
    let review = rt.strategy.review();
    let resolved = Resolved {
        app,
        request: &request,
        rt,
    };
    if resolved.rt.group == kcp_tenancy::workspace::GROUP
        && resolved.rt.plural == kcp_tenancy::workspace::RESOURCE
        && info.name.as_deref() == Some("~")
        && info.subresource.is_none()
    {
        return match (info.verb, &request.cluster) {
            (Verb::Get, ClusterTarget::One(cluster))
                if *cluster == crate::request::LogicalClusterName::root() =>
            {
                let home = crate::tenancy::home::home(app, &request.user).await?;
                resolved.render_object(200, home)
            }
            _ => Err(no_such_resource()),
        };
    }
    if info.subresource.as_deref() == Some("token") {
        return match info.verb {
            Verb::Create => token_request::create(&resolved).await,
            verb => Err(ApiError::method_not_supported(
                "authentication.k8s.io",
                "tokenrequests",
                verb.as_str(),
            )),
        };
    }
    if let Some(review) = review {
        return match info.verb {
            Verb::Create if info.name.is_none() => review::create(&resolved, review).await,
            verb => Err(ApiError::method_not_supported(
                &resolved.rt.group,
                &resolved.rt.plural,
                verb.as_str(),
            )),
        };
    }
    let result = match info.verb {
        Verb::Get => read::get(&resolved).await,
        Verb::List => read::list(&resolved).await,
        Verb::Watch => watch::watch(&resolved).await,
        Verb::Create => write::create(&resolved).await,
        Verb::Update => write::update(&resolved).await,
        Verb::Patch => write::patch(&resolved).await,
        Verb::Delete => delete::delete(&resolved).await,
        Verb::DeleteCollection => delete::delete_collection(&resolved).await,
        Verb::Other => Err(ApiError::method_not_supported(
            &resolved.rt.group,
            &resolved.rt.plural,
            "other",
        )),
    };
    // A write to RBAC changes who may do what here: the next request must not see the old policy
    // (the RBAC watch would catch up a moment later; this closes that window for this server).
    if resolved.rt.group == RBAC_GROUP
        && !info.verb.is_read_only()
        && let ClusterTarget::One(cluster) = &request.cluster
    {
        app.authorizer.policies.invalidate(cluster);
    }
    result
}
