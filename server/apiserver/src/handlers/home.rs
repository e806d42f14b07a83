//! Home workspaces: `GET /clusters/root/apis/tenancy.kcp.io/v1alpha1/workspaces/~` answers the
//! caller's home workspace, creating its logical cluster on first use (upstream's home workspace
//! handler). The home is the logical cluster named after the user (`home_cluster_name`), of type
//! `root:home`, reachable as `user:<name>`; its creator becomes its admin like any workspace's.
//! While it initializes the answer is 429 with `Retry-After: 1`, which clients retry on their own.

use std::time::Duration;

use kcp_apimachinery::{ApiError, StatusReason};
use kcp_rbac::{Attributes, ResourceAttributes};
use kcp_tenancy::logical_cluster::{self as lc, HOME_TYPE, NAME};
use kcp_tenancy::workspace::{self, home_workspace};
use kcp_tenancy::{Creator, Phase, TypeRef, names, types};
use serde_json::Value;

use http::Response;
use kcp_controllers::logical_clusters::DELETION_FINALIZER;
use kcp_registry::store::Location;
use kcp_registry::{ClusterTarget, LogicalClusterName};

use super::Scope;
use super::resource::{Resolved, no_such_resource};
use super::response::Body;
use crate::filters::UserInfo;
use crate::filters::authentication::{ANONYMOUS_USER, rbac_user};
use crate::request::Verb;

/// How long the first request waits for a new home to become Ready before answering 429.
const READY_WITHIN: Duration = Duration::from_secs(2);

/// Whether a request addresses `workspaces/~` (rather than a workspace of that name, which
/// cannot exist: `~` is no valid name).
pub fn addressed(r: &Resolved<'_>) -> bool {
    r.rt.group == workspace::GROUP
        && r.rt.plural == workspace::RESOURCE
        && r.request.info.name.as_deref() == Some("~")
        && r.request.info.subresource.is_none()
}

/// Serves `GET workspaces/~` in root; the home workspace is nothing else.
pub async fn serve(r: &Resolved<'_>) -> Result<Response<Body>, ApiError> {
    match (r.request.info.verb, &r.request.cluster) {
        (Verb::Get, ClusterTarget::One(cluster)) if *cluster == LogicalClusterName::root() => {
            let home = home(r.scope, &r.request.user).await?;
            r.render_object(200, home)
        }
        _ => Err(no_such_resource()),
    }
}

/// The home Workspace of `user`.
async fn home(scope: &Scope<'_>, user: &UserInfo) -> Result<Value, ApiError> {
    if user.name == ANONYMOUS_USER || user.name.is_empty() {
        return Err(ApiError::forbidden(
            workspace::GROUP,
            workspace::RESOURCE,
            "~",
            "anonymous users have no home workspace",
        ));
    }
    let cluster = LogicalClusterName::parse(&names::home_cluster_name(&user.name))
        .ok_or_else(|| ApiError::internal_error("invalid home cluster name"))?;
    if scope.tenancy.logical_cluster(&cluster).is_none() {
        create(scope, user, &cluster).await?;
    }
    let deadline = tokio::time::Instant::now() + READY_WITHIN;
    loop {
        if let Some(logical_cluster) = scope.tenancy.logical_cluster(&cluster)
            && logical_cluster.phase() == Some(Phase::Ready)
        {
            let logical_cluster = logical_cluster.object();
            return Ok(home_workspace(&logical_cluster, cluster.as_str()));
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(ApiError {
                code: 429,
                reason: StatusReason::TooManyRequests,
                message: "the home workspace is being created, retry".into(),
                details: None,
            }
            .with_retry_after(1));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn create(
    scope: &Scope<'_>,
    user: &UserInfo,
    cluster: &LogicalClusterName,
) -> Result<(), ApiError> {
    let may_create = Attributes::resource(
        rbac_user(user),
        "create",
        ResourceAttributes {
            api_group: workspace::GROUP.to_string(),
            resource: workspace::RESOURCE.to_string(),
            name: "~".to_string(),
            ..ResourceAttributes::default()
        },
    );
    scope
        .authorizer
        .authorize(&ClusterTarget::One(LogicalClusterName::root()), &may_create)
        .await?;
    let creator = Creator {
        username: user.name.clone(),
        uid: user.uid.clone(),
        groups: user.groups.clone(),
        extra: user.extra.clone(),
    };
    let lookup = |reference: &TypeRef| scope.tenancy.workspace_type(reference);
    let home_type = TypeRef::parse(HOME_TYPE);
    let initializers = types::resolve_reference(&kcp_tenancy::Path::root(), &home_type, &lookup)
        .and_then(|resolved| types::resolve_aliases(&resolved, &lookup))
        .map(|aliases| types::initializers(&aliases))
        .map_err(|e| ApiError::internal_error(&format!("resolving {HOME_TYPE}: {e}")))?;
    let mut logical_cluster = lc::for_home(&creator, &initializers);
    kcp_apimachinery::meta::set_finalizers(&mut logical_cluster, [DELETION_FINALIZER]);
    let Some(rt) = scope
        .store
        .registry()
        .builtin_type(lc::GROUP, "v1alpha1", lc::RESOURCE)
    else {
        return Err(ApiError::internal_error("LogicalClusters are not served"));
    };
    let at = Location {
        cluster,
        namespace: None,
    };
    match scope.store.create(&rt, at, logical_cluster, false).await {
        Ok(created) => scope.tenancy.set_logical_cluster(cluster, Some(created)),
        Err(e) if e.code == 409 => {
            let existing = scope.store.get(&rt, at, NAME).await?.object;
            scope.tenancy.set_logical_cluster(cluster, Some(existing));
        }
        Err(e) => return Err(e),
    }
    Ok(())
}
