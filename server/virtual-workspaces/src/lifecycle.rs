//! The initializingworkspaces and terminatingworkspaces virtual workspaces (upstream's
//! `pkg/virtual/initializingworkspaces` and `terminatingworkspaces`): a WorkspaceType's
//! initializer (resp. terminator) `<type-cluster-path>:<type-name>` sees, at
//! `/services/initializingworkspaces/<initializer>/clusters/*/apis/core.kcp.io/v1alpha1/logicalclusters`,
//! the LogicalClusters in phase Initializing that still wait for it (resp. Terminating, being
//! deleted), by their phase label and its initializer (terminator) label; it lists and watches
//! them across clusters, and at `/clusters/<cluster>/...` reads and writes anything inside one of
//! them, its LogicalCluster included: it finishes by removing itself from
//! `status.initializers` (resp. `status.terminators`).
//!
//! Every request needs the verb `initialize` (resp. `terminate`) on `workspacetypes` named
//! `<type-name>` in the type's cluster (a deep SubjectAccessReview there); a cluster that does not
//! wait for the initializer (terminator) is refused with upstream's 403. Inside a cluster, a
//! WorkspaceType that declares `initializerPermissions` (resp. `terminatorPermissions`) limits
//! the initializer to those RBAC rules, as upstream evaluates them in the virtual workspace
//! (refused: 403 `... denied by initializerPermissions`; a type that cannot be read: 503, never
//! full access by mistake). An allowed request goes into the cluster as the controller's own
//! user with upstream's synthetic group `system:kcp:initializer:<key>` (resp.
//! `system:kcp:terminator:<key>`) added, which the shard's workspace content authorizer lets
//! through while the cluster is Initializing (Terminating, Deleting) and the front-proxy drops
//! from every client. A type that declares none keeps full access inside the cluster (upstream's
//! fallback acts as the workspace's owner).

use http::Response;
use kcp_apimachinery::{ApiError, StatusReason, meta};
use kcp_apiserver::no_such_resource;
use kcp_apiserver::response::Body;
use kcp_apiserver::services::ServiceRequest;
use kcp_rbac::{Attributes, PolicyRule, ResourceAttributes};
use kcp_tenancy::{access, logical_cluster};
use serde_json::json;

use crate::backend::{Backend, Documents};
use crate::documents::Shown;
use crate::mounted::{self, VirtualWorkspace};
use crate::request;
use crate::url::{self, Target};

/// What differs between the two workspaces.
pub struct Lifecycle {
    /// The service's name under `/services/`.
    pub name: &'static str,
    /// The phase the shown clusters are in.
    pub phase: &'static str,
    /// The verb needed on the WorkspaceType.
    pub verb: &'static str,
    /// `initializer` or `terminator`, in messages.
    pub role: &'static str,
    /// The label of a LogicalCluster still waiting for `<key>`.
    pub label: fn(&str) -> (String, String),
    /// The WorkspaceType's field of rules limiting the role inside a cluster.
    pub permissions: &'static str,
    /// The synthetic group of `<key>` a request allowed by those rules carries into the cluster.
    pub group: fn(&str) -> String,
}

/// `/services/initializingworkspaces/<initializer>/...`.
pub const INITIALIZING: Lifecycle = Lifecycle {
    name: "initializingworkspaces",
    phase: "Initializing",
    verb: "initialize",
    role: "initializer",
    label: logical_cluster::initializer_label,
    permissions: "initializerPermissions",
    group: access::initializer_group,
};

/// `/services/terminatingworkspaces/<terminator>/...`.
pub const TERMINATING: Lifecycle = Lifecycle {
    name: "terminatingworkspaces",
    phase: "Terminating",
    verb: "terminate",
    role: "terminator",
    label: logical_cluster::terminator_label,
    permissions: "terminatorPermissions",
    group: access::terminator_group,
};

const GROUP: &str = "core.kcp.io";
const VERSION: &str = "v1alpha1";

/// A request as the checks see it: the initializer (terminator) key, the request, its info and
/// its API path inside the virtual workspace.
#[derive(Clone, Copy)]
struct Asked<'a> {
    key: &'a str,
    request: &'a ServiceRequest,
    info: &'a kcp_apiserver::RequestInfo,
    path: &'a str,
}

/// One of the two virtual workspaces.
pub struct LifecycleService {
    lifecycle: &'static Lifecycle,
    backend: Backend,
}

impl LifecycleService {
    pub fn new(lifecycle: &'static Lifecycle, backend: Backend) -> LifecycleService {
        LifecycleService { lifecycle, backend }
    }
}

/// What these workspaces show across clusters: LogicalClusters.
struct LogicalClusters;

impl Shown for LogicalClusters {
    fn shows_group(&self, group: &str) -> bool {
        group == GROUP
    }

    fn shows_resource(&self, group: &str, resource: &str) -> bool {
        group == GROUP && resource == logical_cluster::RESOURCE
    }
}

impl VirtualWorkspace for LifecycleService {
    async fn answer(&self, mut request: ServiceRequest) -> Result<Response<Body>, ApiError> {
        let path = request.path.clone();
        let vw = url::split(&path, self.lifecycle.name, 1).ok_or_else(no_such_resource)?;
        let key = vw.key[0];
        let info = request::info(&request.method, vw.rest, request.query.as_deref());
        let asked = Asked {
            key,
            request: &request,
            info: &info,
            path: vw.rest,
        };
        self.authorize(&asked).await?;
        let (label_key, label_value) = (self.lifecycle.label)(key);
        match &vw.target {
            Target::Wildcard if !info.is_resource_request => {
                let documents = Documents {
                    served_prefix: "/clusters/*",
                    prefix: vw.prefix,
                    path: vw.rest,
                };
                self.backend
                    .document(request, &documents, &LogicalClusters)
                    .await
            }
            Target::Wildcard => {
                if !LogicalClusters.shows_resource(&info.group, &info.resource) {
                    return Err(no_such_resource());
                }
                mounted::list_or_watch_only(&info)?;
                let requirement = format!(
                    "{}={},{label_key}={label_value}",
                    kcp_tenancy::workspace::PHASE_LABEL,
                    self.lifecycle.phase
                );
                request.query = Some(request::with_label_requirement(
                    request.query.as_deref(),
                    &requirement,
                ));
                request.path = format!("/clusters/*{}", vw.rest);
                self.backend.on_behalf(request).await
            }
            Target::One(cluster) => {
                let logical_cluster = self
                    .backend
                    .read(
                        &format!(
                            "/clusters/{cluster}/apis/{GROUP}/{VERSION}/{}/{}",
                            logical_cluster::RESOURCE,
                            logical_cluster::NAME
                        ),
                        &request.shutdown,
                    )
                    .await;
                let waits = logical_cluster.as_ref().is_ok_and(|lc| {
                    let labels = meta::labels(lc);
                    labels
                        .get(kcp_tenancy::workspace::PHASE_LABEL)
                        .map(String::as_str)
                        == Some(self.lifecycle.phase)
                        && labels.get(&label_key) == Some(&label_value)
                });
                if !waits {
                    return Err(ApiError {
                        code: 403,
                        reason: StatusReason::Forbidden,
                        message: format!(
                            "{} {key:?} cannot access this workspace",
                            self.lifecycle.role
                        ),
                        details: None,
                    });
                }
                let grant = self.check_permissions(&asked).await?;
                request.path = format!("/clusters/{cluster}{}", vw.rest);
                match grant {
                    Grant::Everything => self.backend.on_behalf(request).await,
                    Grant::Rules => {
                        let group = (self.lifecycle.group)(key);
                        self.backend.with_group(request, group).await
                    }
                }
            }
        }
    }
}

/// What an initializer (terminator) may do inside a cluster waiting for it.
enum Grant {
    /// Its WorkspaceType declares no permissions: anything (upstream acts as the owner).
    Everything,
    /// The request is allowed by the type's rules: it goes in as the user with the synthetic
    /// group, which the shard's workspace content authorizer lets through in a lifecycle phase.
    Rules,
}

impl LifecycleService {
    /// The WorkspaceType's `initializerPermissions` (`terminatorPermissions`), when it declares
    /// any: the request inside the cluster must be allowed by one of those rules.
    async fn check_permissions(&self, asked: &Asked<'_>) -> Result<Grant, ApiError> {
        let (key, request) = (asked.key, asked.request);
        let field = self.lifecycle.permissions;
        // `authorize` refused keys that name no type.
        let Some((type_cluster, type_name)) = key.rsplit_once(':') else {
            return Err(no_such_resource());
        };
        let workspace_type = self
            .backend
            .read(
                &format!(
                    "/clusters/{type_cluster}/apis/{}/{VERSION}/workspacetypes/{type_name}",
                    kcp_tenancy::workspace::GROUP
                ),
                &request.shutdown,
            )
            .await
            .map_err(|error| {
                ApiError::service_unavailable(&format!(
                    "{} {key:?}: its WorkspaceType cannot be read, so its {field} cannot be \
                     checked: {}",
                    self.lifecycle.role, error.message
                ))
            })?;
        let rules = PolicyRule::list_from_json(&json!({"rules": workspace_type["spec"][field]}));
        if rules.is_empty() {
            return Ok(Grant::Everything);
        }
        let attributes = kcp_apiserver::authorization_attributes(
            mounted::user(request),
            asked.info,
            &request.method,
            asked.path,
        );
        if rules.iter().any(|rule| rule.allows(&attributes)) {
            return Ok(Grant::Rules);
        }
        let reason = format!("{} {key:?} denied by {field}", self.lifecycle.role);
        Err(mounted::forbidden(request, asked.info, asked.path, &reason))
    }

    /// Upstream's authorizer: the verb (`initialize`, `terminate`) on the WorkspaceType the
    /// initializer (terminator) names, in the type's cluster.
    async fn authorize(&self, asked: &Asked<'_>) -> Result<(), ApiError> {
        let Asked {
            key,
            request,
            info,
            path,
        } = *asked;
        let allowed = match key.rsplit_once(':') {
            Some((type_cluster, type_name)) if !type_cluster.is_empty() => {
                let attributes = Attributes::resource(
                    mounted::user(request),
                    self.lifecycle.verb,
                    ResourceAttributes {
                        api_group: kcp_tenancy::workspace::GROUP.to_string(),
                        resource: "workspacetypes".to_string(),
                        subresource: String::new(),
                        namespace: String::new(),
                        name: type_name.to_string(),
                    },
                );
                self.backend.allowed_deep(type_cluster, attributes).await?
            }
            _ => false,
        };
        if allowed {
            return Ok(());
        }
        Err(mounted::forbidden(
            request,
            info,
            path,
            &format!(
                "no permission to {:?} workspacetypes for {} {key:?}",
                self.lifecycle.verb, self.lifecycle.role
            ),
        ))
    }
}
