//! What is being asked (who, which verb, on what) and what an authorizer answers.
//!
//! These mirror the attributes kube-apiserver hands its authorizers, with empty strings meaning
//! "not set" exactly where Kubernetes uses them, so a rule written for a Kubernetes cluster matches
//! the same requests here. The denial text is kube-apiserver's too: clients and people compare it.

use std::collections::BTreeMap;

use kcp_apimachinery::ApiError;

/// The group every member of which may do everything; RBAC escalation checks wave it through.
pub const MASTERS_GROUP: &str = "system:masters";

/// The group every authenticated (non-anonymous) user is in (upstream `user.AllAuthenticated`).
///
/// Defined here, with the other groups RBAC and kcp's default bindings name, and re-used by
/// kcp-authn (which adds it to every authenticated user) and kcp-tenancy (which binds it).
pub const AUTHENTICATED_GROUP: &str = "system:authenticated";

/// The only group of the anonymous user (upstream `user.AllUnauthenticated`).
pub const UNAUTHENTICATED_GROUP: &str = "system:unauthenticated";

/// The prefix of every service-account user name.
const SERVICE_ACCOUNT_PREFIX: &str = "system:serviceaccount:";

/// The user name a service account authenticates as: `system:serviceaccount:<namespace>:<name>`.
pub fn service_account_username(namespace: &str, name: &str) -> String {
    format!("{SERVICE_ACCOUNT_PREFIX}{namespace}:{name}")
}

/// The groups a service account is in besides `system:authenticated`: all service accounts, and all
/// service accounts of its namespace.
pub fn service_account_groups(namespace: &str) -> [String; 2] {
    [
        "system:serviceaccounts".to_string(),
        format!("system:serviceaccounts:{namespace}"),
    ]
}

/// An authenticated (or anonymous) user as authentication produced it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct User {
    pub name: String,
    pub groups: Vec<String>,
    /// Extra attributes (scopes, warrants, ...); RBAC does not read them, later authorizers do.
    pub extra: BTreeMap<String, Vec<String>>,
}

impl User {
    /// A user with a name and groups and no extra attributes.
    pub fn new(name: &str, groups: &[&str]) -> User {
        User {
            name: name.to_string(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
            extra: BTreeMap::new(),
        }
    }

    pub fn in_group(&self, group: &str) -> bool {
        self.groups.iter().any(|g| g == group)
    }
}

/// The object a resource request is about; empty strings are "not set" (core group, no
/// subresource, cluster scope, no name).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResourceAttributes {
    pub api_group: String,
    pub resource: String,
    pub subresource: String,
    pub namespace: String,
    pub name: String,
}

/// A request either names a resource or a plain URL path (`/healthz`, `/version`, discovery).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Resource(ResourceAttributes),
    NonResource { path: String },
}

/// Everything an authorizer decides on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attributes {
    pub user: User,
    /// `get`, `list`, `create`, ... for resources; the lower-cased HTTP method for paths; or a
    /// special verb (`bind`, `escalate`, `impersonate`, `use`, `access`).
    pub verb: String,
    pub target: Target,
}

impl Attributes {
    pub fn resource(user: User, verb: &str, resource: ResourceAttributes) -> Attributes {
        Attributes {
            user,
            verb: verb.to_string(),
            target: Target::Resource(resource),
        }
    }

    pub fn non_resource(user: User, verb: &str, path: &str) -> Attributes {
        Attributes {
            user,
            verb: verb.to_string(),
            target: Target::NonResource {
                path: path.to_string(),
            },
        }
    }

    /// The namespace RBAC looks for RoleBindings in; empty for cluster-scoped and path requests.
    pub fn namespace(&self) -> &str {
        match &self.target {
            Target::Resource(resource) => &resource.namespace,
            Target::NonResource { .. } => "",
        }
    }

    /// kube-apiserver's sentence for a refused request, followed by `: <reason>` when an authorizer
    /// gave one: `User "bob" cannot list resource "configmaps" in API group "" in the namespace
    /// "default"`.
    pub fn forbidden_message(&self, reason: &str) -> String {
        let user = &self.user.name;
        let verb = &self.verb;
        let sentence = match &self.target {
            Target::NonResource { path } => format!("User {user:?} cannot {verb} path {path:?}"),
            Target::Resource(r) => {
                let resource = if r.subresource.is_empty() {
                    r.resource.clone()
                } else {
                    format!("{}/{}", r.resource, r.subresource)
                };
                let scope = if r.namespace.is_empty() {
                    "at the cluster scope".to_string()
                } else {
                    format!("in the namespace {:?}", r.namespace)
                };
                format!(
                    "User {user:?} cannot {verb} resource {resource:?} in API group {:?} {scope}",
                    r.api_group
                )
            }
        };
        if reason.is_empty() {
            sentence
        } else {
            format!("{sentence}: {reason}")
        }
    }

    /// The 403 Status kube-apiserver answers a refused request with
    /// (`configmaps is forbidden: User "bob" cannot list ...`).
    pub fn forbidden_error(&self, reason: &str) -> ApiError {
        let message = self.forbidden_message(reason);
        match &self.target {
            Target::Resource(r) => {
                ApiError::forbidden(&r.api_group, &r.resource, &r.name, &message)
            }
            Target::NonResource { .. } => ApiError::forbidden("", "", "", &message),
        }
    }
}

/// An authorizer's answer, with the reason Kubernetes attaches to every decision (audit records the
/// reason of an allow; a refusal's message ends with the reasons of the authorizers that had no
/// opinion).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Allow(String),
    Deny(String),
    NoOpinion(String),
}

impl Decision {
    pub fn is_allowed(&self) -> bool {
        matches!(self, Decision::Allow(_))
    }

    pub fn reason(&self) -> &str {
        match self {
            Decision::Allow(reason) | Decision::Deny(reason) | Decision::NoOpinion(reason) => {
                reason
            }
        }
    }

    /// Asks authorizers in order, as kube-apiserver's union authorizer does: the first allow or deny
    /// wins; when all have no opinion, their non-empty reasons are joined by newlines.
    pub fn first_opinion(decisions: impl IntoIterator<Item = Decision>) -> Decision {
        let mut reasons: Vec<String> = Vec::new();
        for decision in decisions {
            match decision {
                Decision::NoOpinion(reason) => {
                    if !reason.is_empty() {
                        reasons.push(reason);
                    }
                }
                decided => return decided,
            }
        }
        Decision::NoOpinion(reasons.join("\n"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn configmaps_in(namespace: &str) -> ResourceAttributes {
        ResourceAttributes {
            resource: "configmaps".into(),
            namespace: namespace.into(),
            ..Default::default()
        }
    }

    #[test]
    fn namespaced_denial_reads_like_kube_apiserver() {
        let attrs = Attributes::resource(User::new("bob", &[]), "list", configmaps_in("default"));
        assert_eq!(
            attrs.forbidden_message(""),
            r#"User "bob" cannot list resource "configmaps" in API group "" in the namespace "default""#
        );
    }

    #[test]
    fn cluster_scoped_denial_names_subresource_and_group() {
        let attrs = Attributes::resource(
            User::new("bob", &[]),
            "update",
            ResourceAttributes {
                api_group: "apiextensions.k8s.io".into(),
                resource: "customresourcedefinitions".into(),
                subresource: "status".into(),
                name: "widgets.example.com".into(),
                ..Default::default()
            },
        );
        assert_eq!(
            attrs.forbidden_message(""),
            r#"User "bob" cannot update resource "customresourcedefinitions/status" in API group "apiextensions.k8s.io" at the cluster scope"#
        );
    }

    #[test]
    fn path_denial_appends_the_reason() {
        let attrs = Attributes::non_resource(User::new("bob", &[]), "get", "/metrics");
        assert_eq!(
            attrs.forbidden_message("RBAC: clusterrole.rbac.authorization.k8s.io \"x\" not found"),
            "User \"bob\" cannot get path \"/metrics\": RBAC: clusterrole.rbac.authorization.k8s.io \"x\" not found"
        );
    }

    #[test]
    fn forbidden_error_is_a_403_status_about_the_object() {
        let mut resource = configmaps_in("default");
        resource.name = "settings".into();
        let err = Attributes::resource(User::new("bob", &[]), "get", resource).forbidden_error("");
        assert_eq!(err.code, 403);
        assert_eq!(
            err.message,
            r#"configmaps "settings" is forbidden: User "bob" cannot get resource "configmaps" in API group "" in the namespace "default""#
        );
    }

    #[test]
    fn path_forbidden_error_has_no_object() {
        let err =
            Attributes::non_resource(User::new("bob", &[]), "get", "/metrics").forbidden_error("");
        assert_eq!(
            err.message,
            r#"forbidden: User "bob" cannot get path "/metrics""#
        );
    }

    #[test]
    fn first_opinion_stops_at_allow_or_deny() {
        let decided = Decision::first_opinion([
            Decision::NoOpinion("a".into()),
            Decision::Deny("no".into()),
            Decision::Allow("yes".into()),
        ]);
        assert_eq!(decided, Decision::Deny("no".into()));
    }

    #[test]
    fn first_opinion_joins_reasons_when_nobody_decides() {
        let decided = Decision::first_opinion([
            Decision::NoOpinion("a".into()),
            Decision::NoOpinion(String::new()),
            Decision::NoOpinion("b".into()),
        ]);
        assert_eq!(decided, Decision::NoOpinion("a\nb".into()));
        assert!(!decided.is_allowed());
        assert_eq!(decided.reason(), "a\nb");
    }

    #[test]
    fn service_account_identity() {
        assert_eq!(
            service_account_username("ns", "builder"),
            "system:serviceaccount:ns:builder"
        );
        assert_eq!(
            service_account_groups("ns"),
            [
                "system:serviceaccounts".to_string(),
                "system:serviceaccounts:ns".to_string()
            ]
        );
        assert!(User::new("u", &["g"]).in_group("g"));
    }
}
