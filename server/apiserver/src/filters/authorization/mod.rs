//! What a user may do, decided as kcp does it (`--authorization-order`
//! `AlwaysAllowGroups,AlwaysAllowPaths,RBAC,Webhook`): `system:masters` may do everything, the
//! `--authorization-always-allow-paths` are open to everybody, then the workspace content
//! authorizer (the logical cluster must exist, serve content, and grant the user `access` on `/`),
//! then the RBAC of the request's logical cluster and of `system:admin` ([`PolicyCache`]), then the
//! SubjectAccessReview webhook ([`webhook`]) when one is configured. The first allow or deny wins;
//! nobody's opinion is a 403.
//!
//! A request by cluster name into a logical cluster of another shard (a path of another shard
//! answers 429 before this) is decided as upstream's shards decide it: the gate reads the
//! phase of the LogicalCluster that shard replicated into the cache, and the gate and RBAC read
//! the ClusterRoles and ClusterRoleBindings it replicated (`access` roles of clusters holding a
//! type or an export, and what grants `bind` or `use`); a cluster nobody replicated is not found.
//!
//! Requests across all logical clusters (`/clusters/*`) have no RBAC of a cluster to consult:
//! `system:masters`, the webhook, and for members of `system:kcp:logical-cluster-admin` the
//! bootstrap policy (as upstream) can allow them.

pub mod webhook;

use std::sync::Arc;

use http::Method;
use kcp_apimachinery::ApiError;
use kcp_rbac::{Attributes, Decision, MASTERS_GROUP, Policy, ResourceAttributes, User};

use crate::request::RequestInfo;
use crate::request::query::Query;
use kcp_controllers::TenancyIndex;
pub use kcp_controllers::policies::PolicyCache;
use kcp_controllers::tenancy_index::IndexedLogicalCluster;
use kcp_registry::{ClusterTarget, LogicalClusterName};
use kcp_tenancy::access;
pub use webhook::Webhook;

/// The authorizer chain of the server.
pub struct Authorizer {
    pub policies: Arc<PolicyCache>,
    tenancy: Arc<TenancyIndex>,
    webhook: Option<Webhook>,
    always_allow_paths: Vec<String>,
}

impl Authorizer {
    pub fn new(
        policies: Arc<PolicyCache>,
        tenancy: Arc<TenancyIndex>,
        webhook: Option<Webhook>,
        always_allow_paths: Vec<String>,
    ) -> Authorizer {
        Authorizer {
            policies,
            tenancy,
            webhook,
            always_allow_paths,
        }
    }

    /// Whether a non-resource path is open to everybody, authenticated or not.
    pub fn always_allowed(&self, path: &str) -> bool {
        self.always_allow_paths
            .iter()
            .any(|pattern| path_matches(pattern, path))
    }

    /// The chain's decision for a request in `cluster`.
    pub async fn decide(
        &self,
        cluster: &ClusterTarget,
        attributes: &Attributes,
    ) -> Result<Decision, ApiError> {
        if attributes.user.in_group(MASTERS_GROUP) {
            return Ok(Decision::Allow(String::new()));
        }
        if let kcp_rbac::Target::NonResource { path } = &attributes.target
            && self.always_allowed(path)
        {
            return Ok(Decision::Allow(String::new()));
        }
        let rbac = match cluster {
            ClusterTarget::One(name) => {
                let local = self.tenancy.logical_cluster(name);
                let policy = match local {
                    Some(_) => self.policies.policy(name).await?,
                    // Another shard's cluster: the RBAC that shard replicated, as upstream's
                    // authorizers read the cache's copies besides the shard's own.
                    None => self.policies.deep_policy(name, &self.tenancy).await?,
                };
                let layers = policy.layers();
                // An identity of another cluster is a foreign one here, for the gate and RBAC.
                let foreign =
                    kcp_rbac::as_seen_in(&attributes.user, name.as_str()).map(|user| Attributes {
                        user,
                        ..attributes.clone()
                    });
                let attributes = foreign.as_ref().unwrap_or(attributes);
                match self.content_gate(name, local.as_deref(), attributes, layers.as_slice()) {
                    access::Decision::Allow(reason) => return Ok(Decision::Allow(reason)),
                    // Refused at the gate: the same reason the front-proxy gives for a path it
                    // does not know, so neither tells whether the workspace exists.
                    access::Decision::Deny(_) => {
                        return Ok(Decision::Deny(
                            access::WORKSPACE_ACCESS_NOT_PERMITTED.into(),
                        ));
                    }
                    access::Decision::NoOpinion(_) => {
                        Decision::NoOpinion(access::WORKSPACE_ACCESS_NOT_PERMITTED.into())
                    }
                    access::Decision::Delegate(_) => layers.as_slice().authorize(attributes),
                }
            }
            // Upstream's content authorizer lets logical-cluster-admins through for every
            // cluster name, `*` included, and the bootstrap policy decides: the scheduler of
            // another shard lists and watches that shard's LogicalClusters without
            // `system:masters`.
            ClusterTarget::Wildcard
                if attributes
                    .user
                    .in_group(access::LOGICAL_CLUSTER_ADMIN_GROUP) =>
            {
                self.policies
                    .bootstrap_policy()
                    .await?
                    .authorize(attributes)
            }
            ClusterTarget::Wildcard => Decision::NoOpinion(String::new()),
        };
        if !matches!(rbac, Decision::NoOpinion(_)) {
            return Ok(rbac);
        }
        let webhook = match &self.webhook {
            Some(webhook) => webhook.authorize(cluster, attributes).await,
            None => Decision::NoOpinion(String::new()),
        };
        Ok(Decision::first_opinion([rbac, webhook]))
    }

    /// The decision of a deep SubjectAccessReview in `cluster` (upstream's, which admission asks
    /// in another workspace, e.g. for `bind` on an APIExport): that cluster's RBAC, without the
    /// workspace content gate (binding an export needs no access to the provider's workspace).
    /// For a cluster of another shard, the RBAC that shard replicated into the cache.
    pub async fn decide_deep(
        &self,
        cluster: &LogicalClusterName,
        attributes: &Attributes,
    ) -> Result<Decision, ApiError> {
        if attributes.user.in_group(MASTERS_GROUP) {
            return Ok(Decision::Allow(String::new()));
        }
        let policy = self.policies.deep_policy(cluster, &self.tenancy).await?;
        Ok(policy.layers().as_slice().authorize(attributes))
    }

    /// The workspace content authorizer: may this user enter this logical cluster at all?
    /// `local`: the cluster's LogicalCluster when this shard holds it.
    fn content_gate(
        &self,
        cluster: &LogicalClusterName,
        local: Option<&IndexedLogicalCluster>,
        attributes: &Attributes,
        policy: &[&kcp_rbac::PolicyIndex],
    ) -> access::Decision {
        let user = &attributes.user;
        // A cluster this shard does not hold: its phase as its shard replicated it, if it did.
        let copied = match local {
            Some(_) => None,
            None => self.tenancy.copied_phase(cluster),
        };
        let phase = match local {
            Some(logical_cluster) => Some(logical_cluster.raw_phase()),
            None => copied.as_deref(),
        };
        let local_service_account = user.name.starts_with("system:serviceaccount:")
            && user
                .extra
                .get(kcp_authn::CLUSTER_NAME_EXTRA)
                .is_some_and(|clusters| clusters.iter().any(|c| c == cluster.as_str()));
        let request = access::Request {
            cluster: cluster.as_str(),
            phase,
            groups: &user.groups,
            local_service_account,
            deep_subject_access_review: false,
        };
        access::authorize(&request, || {
            policy
                .authorize(&Attributes::non_resource(user.clone(), "access", "/"))
                .is_allowed()
        })
    }

    /// Allows the request or refuses it with kube-apiserver's 403.
    pub async fn authorize(
        &self,
        cluster: &ClusterTarget,
        attributes: &Attributes,
    ) -> Result<(), ApiError> {
        match self.decide(cluster, attributes).await? {
            Decision::Allow(_) => Ok(()),
            Decision::Deny(reason) | Decision::NoOpinion(reason) => {
                Err(attributes.forbidden_error(&reason))
            }
        }
    }
}

/// The authorization attributes of a request, as kube-apiserver derives them: resource requests
/// by their verb and resource, other paths by the lower-cased HTTP method.
pub fn attributes(user: User, info: &RequestInfo, method: &Method, path: &str) -> Attributes {
    if !info.is_resource_request {
        return Attributes::non_resource(user, &method.as_str().to_lowercase(), path);
    }
    Attributes::resource(
        user,
        info.verb.as_str(),
        ResourceAttributes {
            api_group: info.group.clone(),
            resource: info.resource.clone(),
            subresource: info.subresource.clone().unwrap_or_default(),
            namespace: info.namespace.clone().unwrap_or_default(),
            name: info.name.clone().unwrap_or_default(),
        },
    )
}

/// The 403 a shard answers when `user` may not enter the workspace of a request (`method`, `path`
/// after `/clusters/<cluster>`, `query`): servers in front of the shards (the front-proxy) answer
/// exactly this for a path they do not know, so that no answer tells whether a workspace exists.
pub fn workspace_access_not_permitted(
    user: &kcp_authn::UserInfo,
    method: &Method,
    path: &str,
    query: Option<&str>,
) -> ApiError {
    let info = RequestInfo::parse(method, path, Query::parse(query).is_watch());
    let user = crate::filters::authentication::rbac_user(user);
    attributes(user, &info, method, path).forbidden_error(access::WORKSPACE_ACCESS_NOT_PERMITTED)
}

/// `--authorization-always-allow-paths` entries are exact paths or prefixes ending in `*`.
fn path_matches(pattern: &str, path: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => path.starts_with(prefix),
        None => {
            pattern == path
                || path
                    .strip_prefix(pattern)
                    .is_some_and(|rest| rest.starts_with('/'))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workspace_access_not_permitted_reads_like_the_shards_refusal() {
        let alice = kcp_authn::UserInfo {
            name: "alice".into(),
            ..kcp_authn::UserInfo::anonymous()
        };
        let list = workspace_access_not_permitted(&alice, &Method::GET, "/api/v1/namespaces", None);
        assert_eq!(list.code, 403);
        assert_eq!(
            list.message,
            "namespaces is forbidden: User \"alice\" cannot list resource \"namespaces\" in API \
             group \"\" at the cluster scope: workspace access not permitted"
        );
        let watch = workspace_access_not_permitted(
            &alice,
            &Method::GET,
            "/apis/apps/v1/namespaces/default/deployments",
            Some("watch=1"),
        );
        assert!(
            watch.message.contains("cannot watch resource \"deployments\" in API group \"apps\" in the namespace \"default\""),
            "{}",
            watch.message
        );
        let version = workspace_access_not_permitted(&alice, &Method::GET, "/version", None);
        assert!(
            version.message.contains("cannot get path \"/version\""),
            "{}",
            version.message
        );
    }

    #[test]
    fn always_allow_paths() {
        assert!(path_matches("/healthz", "/healthz"));
        assert!(path_matches("/healthz", "/healthz/ping"));
        assert!(!path_matches("/healthz", "/healthzz"));
        assert!(path_matches("/metrics*", "/metrics/x"));
    }

    #[test]
    fn non_resource_verbs_are_lowercased_methods() {
        let info = RequestInfo::parse(&Method::POST, "/version", false);
        let post = attributes(User::new("bob", &[]), &info, &Method::POST, "/version");
        assert_eq!(post.verb, "post");
        let info = RequestInfo::parse(&Method::GET, "/api/v1/namespaces/a/configmaps/b", false);
        let get = attributes(User::new("bob", &[]), &info, &Method::GET, "/x");
        assert_eq!(get.verb, "get");
        assert_eq!(get.namespace(), "a");
    }
}
