//! What the root logical cluster holds from the start.
//!
//! `root` is the only logical cluster without a Workspace: its LogicalCluster, the built-in
//! WorkspaceTypes every other workspace's type resolves to, and the RBAC that lets authenticated
//! users into workspaces they are given and lets them use the built-in types are created by the
//! server at start (upstream's `config/root-phase0/logicalcluster.yaml` and `config/root`).

use kcp_rbac::AUTHENTICATED_GROUP;
use serde_json::{Value, json};

use crate::logical_cluster::{NAME, PATH_ANNOTATION, TYPE_ANNOTATION};
use crate::paths::ROOT;
use crate::workspace::{OWNER_ANNOTATION, Phase};

/// ClusterRole granting non-resource verb `access` on `/` (entry into a workspace).
pub const WORKSPACE_ACCESS_ROLE: &str = "system:kcp:workspace:access";
/// Root's binding of [`WORKSPACE_ACCESS_ROLE`] to every authenticated user.
pub const AUTHENTICATED_ACCESS_BINDING: &str = "system:kcp:tenancy:authenticated:access";
/// ClusterRole granting `use` on the built-in workspace types.
pub const WORKSPACE_TYPE_USE_ROLE: &str = "system:kcp:universal-workspacetype-use";
pub const WORKSPACE_TYPE_USE_BINDING: &str = "system:kcp:authenticated:universal-workspacetype-use";
/// ClusterRole granting read access to workspaces, workspace types and logical clusters.
pub const TENANCY_READER_ROLE: &str = "system:kcp:tenancy:reader";
pub const TENANCY_READER_BINDING: &str = "system:kcp:authenticated:tenancy:reader";
/// ClusterRole allowing `get`/`create` on `workspaces/~` (provisioning one's home workspace).
pub const HOME_CREATE_ROLE: &str = "system:kcp:home-clusterworkspace-create";
pub const HOME_CREATE_BINDING: &str = "system:kcp:configured-group:home-clusterworkspace-create";
/// The user recorded as owner of `root`.
pub const ROOT_OWNER: &str = "system:kcp-bootstrapper";

/// Start-up choices that change root's content, and whether this shard holds root at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// Whether this shard bootstraps `root`: only the root shard does (`--shard-name=root`, as
    /// upstream's "the root ws is only present on the root shard"); the others read root's
    /// WorkspaceTypes and replicated RBAC from the cache server.
    pub holds_root: bool,
    /// The `workspace-types` battery: the `organization` and `team` types, and `organization` as
    /// root's default child type.
    pub workspace_types_battery: bool,
    /// `--home-workspaces-home-creator-groups` (upstream default `system:authenticated`).
    pub home_creator_groups: Vec<String>,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            holds_root: true,
            workspace_types_battery: true,
            home_creator_groups: vec![AUTHENTICATED_GROUP.to_string()],
        }
    }
}

/// Everything of root, in creation order: its LogicalCluster, WorkspaceTypes, then RBAC.
pub fn root_objects(options: &Options) -> Vec<Value> {
    let mut objects = vec![root_logical_cluster()];
    objects.extend(workspace_types(options));
    objects.extend(rbac(options));
    objects
}

/// Root's LogicalCluster: type `root:root`, path `root`, Ready, no initializers.
pub fn root_logical_cluster() -> Value {
    json!({
        "apiVersion": "core.kcp.io/v1alpha1",
        "kind": "LogicalCluster",
        "metadata": {
            "name": NAME,
            "annotations": {
                TYPE_ANNOTATION: "root:root",
                OWNER_ANNOTATION: format!("{{\"username\":\"{ROOT_OWNER}\"}}"),
                PATH_ANNOTATION: ROOT,
            },
        },
        "spec": {},
        "status": {"phase": Phase::Ready.as_str()},
    })
}

fn root_ref(name: &str) -> Value {
    json!({"name": name, "path": ROOT})
}

fn workspace_type(name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "tenancy.kcp.io/v1alpha1",
        "kind": "WorkspaceType",
        "metadata": {"name": name, "annotations": {PATH_ANNOTATION: ROOT}},
        "spec": spec,
    })
}

/// The built-in WorkspaceTypes of root.
pub fn workspace_types(options: &Options) -> Vec<Value> {
    let extends_universal = json!({"with": [root_ref("universal")]});
    let mut root_spec = json!({
        "limitAllowedParents": {"none": true},
        "extend": extends_universal,
    });
    if options.workspace_types_battery {
        root_spec["defaultChildWorkspaceType"] = root_ref("organization");
    }
    let mut types = vec![
        workspace_type("root", root_spec),
        workspace_type(
            "universal",
            json!({
                "initializer": true,
                "defaultAPIBindings": [
                    {"path": ROOT, "export": "tenancy.kcp.io"},
                    {"path": ROOT, "export": "topology.kcp.io"},
                ],
            }),
        ),
        workspace_type(
            "home",
            json!({
                "extend": extends_universal,
                "defaultChildWorkspaceType": root_ref("universal"),
                "limitAllowedParents": {"none": true},
            }),
        ),
    ];
    if options.workspace_types_battery {
        types.push(workspace_type(
            "organization",
            json!({
                "extend": extends_universal,
                "defaultChildWorkspaceType": root_ref("universal"),
                "limitAllowedChildren": {"types": [root_ref("universal")]},
                "limitAllowedParents": {"types": [root_ref("root")]},
            }),
        ));
        types.push(workspace_type(
            "team",
            json!({
                "extend": extends_universal,
                "defaultChildWorkspaceType": root_ref("universal"),
                "limitAllowedParents": {"types": [root_ref("organization"), root_ref("team")]},
            }),
        ));
    }
    types
}

fn cluster_role(name: &str, rules: Value) -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": name},
        "rules": rules,
    })
}

fn group_binding(name: &str, role: &str, groups: &[String]) -> Value {
    let subjects: Vec<Value> = groups
        .iter()
        .map(|group| json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": group}))
        .collect();
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": subjects,
    })
}

/// Root's ClusterRoles and ClusterRoleBindings. `system:kcp:workspace:access` and
/// `system:kcp:tenancy:reader` belong to upstream's bootstrap policy (in `system:admin`); they are
/// defined here too so that root's bindings resolve wherever that policy lacks them.
pub fn rbac(options: &Options) -> Vec<Value> {
    let authenticated = [AUTHENTICATED_GROUP.to_string()];
    vec![
        cluster_role(
            WORKSPACE_ACCESS_ROLE,
            json!([{"verbs": ["access"], "nonResourceURLs": ["/"]}]),
        ),
        group_binding(
            AUTHENTICATED_ACCESS_BINDING,
            WORKSPACE_ACCESS_ROLE,
            &authenticated,
        ),
        cluster_role(
            TENANCY_READER_ROLE,
            // As upstream: every signed-in user may see root's workspaces (so `kubectl ws tree`
            // and `kubectl get ws` work for them), the types to choose from, and the LogicalCluster.
            json!([
                {"apiGroups": ["tenancy.kcp.io"], "resources": ["workspaces"], "verbs": ["get", "list", "watch"]},
                {"apiGroups": ["tenancy.kcp.io"], "resources": ["workspacetypes"], "verbs": ["get", "list", "watch"]},
                {"apiGroups": ["core.kcp.io"], "resources": ["logicalclusters"], "verbs": ["get", "list", "watch"]},
            ]),
        ),
        group_binding(TENANCY_READER_BINDING, TENANCY_READER_ROLE, &authenticated),
        cluster_role(
            WORKSPACE_TYPE_USE_ROLE,
            json!([{
                "apiGroups": ["tenancy.kcp.io"],
                "resources": ["workspacetypes"],
                "resourceNames": ["universal", "organization", "team"],
                "verbs": ["use"],
            }]),
        ),
        group_binding(
            WORKSPACE_TYPE_USE_BINDING,
            WORKSPACE_TYPE_USE_ROLE,
            &authenticated,
        ),
        cluster_role(
            HOME_CREATE_ROLE,
            json!([{
                "apiGroups": ["tenancy.kcp.io"],
                "resources": ["workspaces"],
                "resourceNames": ["~"],
                "verbs": ["get", "create"],
            }]),
        ),
        group_binding(
            HOME_CREATE_BINDING,
            HOME_CREATE_ROLE,
            &options.home_creator_groups,
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::paths::Path;
    use crate::types::{self, TypeRef};
    use kcp_rbac::{Attributes, PolicyIndex, ResourceAttributes, User};

    fn names(objects: &[Value]) -> Vec<&str> {
        objects
            .iter()
            .map(|o| o["metadata"]["name"].as_str().unwrap())
            .collect()
    }

    #[test]
    fn battery_adds_organization_and_team() {
        let with = workspace_types(&Options::default());
        assert_eq!(
            names(&with),
            ["root", "universal", "home", "organization", "team"]
        );
        assert_eq!(
            with[0]["spec"]["defaultChildWorkspaceType"],
            json!({"name": "organization", "path": "root"})
        );
        let without = workspace_types(&Options {
            workspace_types_battery: false,
            ..Options::default()
        });
        assert_eq!(names(&without), ["root", "universal", "home"]);
        assert!(
            without[0]["spec"]
                .get("defaultChildWorkspaceType")
                .is_none()
        );
    }

    #[test]
    fn root_types_resolve_with_upstream_initializers() {
        let all = workspace_types(&Options::default());
        let lookup = |r: &TypeRef| {
            all.iter()
                .find(|t| r.path == "root" && t["metadata"]["name"] == r.name.as_str())
                .cloned()
        };
        for name in ["root", "home", "organization", "team", "universal"] {
            let resolved =
                types::resolve_reference(&Path::root(), &TypeRef::new("root", name), &lookup)
                    .unwrap();
            let aliases = types::resolve_aliases(&resolved, &lookup).unwrap();
            assert_eq!(
                types::initializers(&aliases),
                ["root:universal", "system:apibindings"],
                "{name}"
            );
            assert!(types::validate_workspace_type(&resolved.object, "root").is_ok());
        }
    }

    #[test]
    fn root_logical_cluster_is_ready() {
        let lc = root_logical_cluster();
        assert_eq!(
            lc["metadata"]["annotations"]["internal.tenancy.kcp.io/type"],
            "root:root"
        );
        assert_eq!(lc["metadata"]["annotations"]["kcp.io/path"], "root");
        assert_eq!(
            lc["metadata"]["annotations"][OWNER_ANNOTATION],
            r#"{"username":"system:kcp-bootstrapper"}"#
        );
        assert_eq!(Phase::of(&lc), Some(Phase::Ready));
        assert_eq!(root_objects(&Options::default()).len(), 1 + 5 + 8);
    }

    #[test]
    fn authenticated_users_may_enter_root_and_use_types() {
        let policy = rbac(&Options::default());
        let index = PolicyIndex::build(policy.iter()).unwrap();
        let alice = User::new("alice", &["system:authenticated"]);
        assert!(
            index
                .authorize(&Attributes::non_resource(alice.clone(), "access", "/"))
                .is_allowed()
        );
        let anonymous = User::new("system:anonymous", &["system:unauthenticated"]);
        assert!(
            !index
                .authorize(&Attributes::non_resource(anonymous, "access", "/"))
                .is_allowed()
        );
        let use_type = |name: &str| {
            let resource = ResourceAttributes {
                api_group: "tenancy.kcp.io".into(),
                resource: "workspacetypes".into(),
                name: name.into(),
                ..ResourceAttributes::default()
            };
            index
                .authorize(&Attributes::resource(alice.clone(), "use", resource))
                .is_allowed()
        };
        assert!(use_type("universal") && use_type("organization") && use_type("team"));
        assert!(!use_type("home") && !use_type("root"));
        let home = ResourceAttributes {
            api_group: "tenancy.kcp.io".into(),
            resource: "workspaces".into(),
            name: "~".into(),
            ..ResourceAttributes::default()
        };
        assert!(
            index
                .authorize(&Attributes::resource(alice.clone(), "create", home))
                .is_allowed()
        );
    }

    #[test]
    fn home_creators_are_configurable() {
        let policy = rbac(&Options {
            home_creator_groups: vec![],
            ..Options::default()
        });
        let binding = policy
            .iter()
            .find(|o| o["metadata"]["name"] == HOME_CREATE_BINDING)
            .unwrap();
        assert_eq!(binding["subjects"], json!([]));
    }
}
