//! The default RBAC objects of every logical cluster, and kcp's bootstrap policy.
//!
//! Users expect the ClusterRoles Kubernetes ships (`cluster-admin`, `admin`, `edit`, `view`, the
//! `system:` basics) and the bindings that let every authenticated user discover APIs and ask what
//! they may do; `kubectl auth can-i`, `kubectl create rolebinding --clusterrole=edit` and
//! aggregation labels depend on them. The rules below are Kubernetes' own (same names, labels,
//! annotations and rules), so a role picked by `aggregate-to-view` or a binding to `edit` reaches
//! exactly as far as on a Kubernetes cluster, including for workload types served as CRDs. The
//! objects are plain JSON so the server can both serve them and feed them to
//! [`PolicyIndex::build`](crate::PolicyIndex::build) ahead of the stored ones (stored objects of
//! the same name replace them).

use serde_json::{Value, json};

use crate::aggregation;
use crate::attributes::{AUTHENTICATED_GROUP, UNAUTHENTICATED_GROUP};
use crate::escalation::RBAC_GROUP;
use crate::rule::PolicyRule;

/// Label that makes a ClusterRole part of `admin`.
pub const AGGREGATE_TO_ADMIN: &str = "rbac.authorization.k8s.io/aggregate-to-admin";
/// Label that makes a ClusterRole part of `edit` (and so of `admin`).
pub const AGGREGATE_TO_EDIT: &str = "rbac.authorization.k8s.io/aggregate-to-edit";
/// Label that makes a ClusterRole part of `view` (and so of `edit` and `admin`).
pub const AGGREGATE_TO_VIEW: &str = "rbac.authorization.k8s.io/aggregate-to-view";
/// kcp's global admin group: bound to `cluster-admin` by the bootstrap policy in `system:admin`,
/// which applies to every logical cluster.
pub const KCP_ADMIN_GROUP: &str = "system:kcp:admin";
/// The logical cluster holding the bootstrap policy, whose ClusterRoles and bindings apply in
/// every logical cluster (upstream kcp's `system:admin`).
pub const BOOTSTRAP_CLUSTER: &str = "system:admin";
/// The ClusterRole granting entry into a workspace (non-resource verb `access` on `/`).
pub const WORKSPACE_ACCESS_ROLE: &str = "system:kcp:workspace:access";
/// The group (and role) of the workspace scheduler's credentials on other shards
/// (`--logical-cluster-admin-kubeconfig`): creates LogicalClusters, follows their Workspaces.
pub const LOGICAL_CLUSTER_ADMIN: &str = "system:kcp:logical-cluster-admin";
/// The group (and role) of credentials that manage logical clusters from outside a shard
/// (`--external-logical-cluster-admin-kubeconfig`, the operator's and the front-proxy's tools).
pub const EXTERNAL_LOGICAL_CLUSTER_ADMIN: &str = "system:kcp:external-logical-cluster-admin";

const READ: &[&str] = &["get", "list", "watch"];
const WRITE: &[&str] = &["create", "delete", "deletecollection", "patch", "update"];
const READ_WRITE: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

fn metadata(name: &str, aggregate_to: Option<&str>) -> Value {
    let mut labels = json!({"kubernetes.io/bootstrapping": "rbac-defaults"});
    if let (Some(label), Some(object)) = (aggregate_to, labels.as_object_mut()) {
        object.insert(label.to_string(), json!("true"));
    }
    json!({
        "name": name,
        "labels": labels,
        "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
    })
}

fn rule(verbs: &[&str], groups: &[&str], resources: &[&str]) -> Value {
    json!({"verbs": verbs, "apiGroups": groups, "resources": resources})
}

fn url_rule(verbs: &[&str], urls: &[&str]) -> Value {
    json!({"verbs": verbs, "nonResourceURLs": urls})
}

fn cluster_role(name: &str, aggregate_to: Option<&str>, rules: Vec<Value>) -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": metadata(name, aggregate_to),
        "rules": rules,
    })
}

/// A role made of the roles labelled `collects`; its rules are filled in by [`default_policy`].
fn aggregated_role(name: &str, aggregate_to: Option<&str>, collects: &str) -> Value {
    let mut role = cluster_role(name, aggregate_to, Vec::new());
    role["aggregationRule"] =
        json!({"clusterRoleSelectors": [{"matchLabels": {collects: "true"}}]});
    role
}

fn group_binding(name: &str, role: &str, groups: &[&str]) -> Value {
    let subjects: Vec<Value> = groups
        .iter()
        .map(|group| json!({"kind": "Group", "apiGroup": RBAC_GROUP, "name": group}))
        .collect();
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": metadata(name, None),
        "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": role},
        "subjects": subjects,
    })
}

fn aggregate_to_view() -> Value {
    let core = [
        rule(
            READ,
            &[""],
            &[
                "configmaps",
                "endpoints",
                "persistentvolumeclaims",
                "persistentvolumeclaims/status",
                "pods",
                "replicationcontrollers",
                "replicationcontrollers/scale",
                "serviceaccounts",
                "services",
                "services/status",
            ],
        ),
        rule(
            READ,
            &[""],
            &[
                "bindings",
                "events",
                "limitranges",
                "namespaces/status",
                "pods/log",
                "pods/status",
                "replicationcontrollers/status",
                "resourcequotas",
                "resourcequotas/status",
            ],
        ),
        rule(READ, &[""], &["namespaces"]),
        rule(READ, &["discovery.k8s.io"], &["endpointslices"]),
    ];
    let workloads = [
        rule(
            READ,
            &["apps"],
            &[
                "controllerrevisions",
                "daemonsets",
                "daemonsets/status",
                "deployments",
                "deployments/scale",
                "deployments/status",
                "replicasets",
                "replicasets/scale",
                "replicasets/status",
                "statefulsets",
                "statefulsets/scale",
                "statefulsets/status",
            ],
        ),
        rule(
            READ,
            &["autoscaling"],
            &[
                "horizontalpodautoscalers",
                "horizontalpodautoscalers/status",
            ],
        ),
        rule(
            READ,
            &["batch"],
            &["cronjobs", "cronjobs/status", "jobs", "jobs/status"],
        ),
        rule(
            READ,
            &["extensions"],
            &[
                "daemonsets",
                "daemonsets/status",
                "deployments",
                "deployments/scale",
                "deployments/status",
                "ingresses",
                "ingresses/status",
                "networkpolicies",
                "replicasets",
                "replicasets/scale",
                "replicasets/status",
                "replicationcontrollers/scale",
            ],
        ),
        rule(
            READ,
            &["policy"],
            &["poddisruptionbudgets", "poddisruptionbudgets/status"],
        ),
        rule(
            READ,
            &["networking.k8s.io"],
            &["ingresses", "ingresses/status", "networkpolicies"],
        ),
    ];
    cluster_role(
        "system:aggregate-to-view",
        Some(AGGREGATE_TO_VIEW),
        core.into_iter().chain(workloads).collect(),
    )
}

fn aggregate_to_edit() -> Value {
    let pod_access = ["pods/attach", "pods/exec", "pods/portforward", "pods/proxy"];
    let core = [
        rule(
            READ,
            &[""],
            &[&pod_access[..], &["secrets", "services/proxy"]].concat(),
        ),
        rule(&["impersonate"], &[""], &["serviceaccounts"]),
        rule(WRITE, &[""], &[&["pods"], &pod_access[..]].concat()),
        rule(&["create"], &[""], &["pods/eviction"]),
        rule(
            WRITE,
            &[""],
            &[
                "configmaps",
                "events",
                "persistentvolumeclaims",
                "replicationcontrollers",
                "replicationcontrollers/scale",
                "secrets",
                "serviceaccounts",
                "services",
                "services/proxy",
            ],
        ),
        rule(&["create"], &[""], &["serviceaccounts/token"]),
    ];
    let workloads = [
        rule(
            WRITE,
            &["apps"],
            &[
                "daemonsets",
                "deployments",
                "deployments/rollback",
                "deployments/scale",
                "replicasets",
                "replicasets/scale",
                "statefulsets",
                "statefulsets/scale",
            ],
        ),
        rule(WRITE, &["autoscaling"], &["horizontalpodautoscalers"]),
        rule(WRITE, &["batch"], &["cronjobs", "jobs"]),
        rule(
            WRITE,
            &["extensions"],
            &[
                "daemonsets",
                "deployments",
                "deployments/rollback",
                "deployments/scale",
                "ingresses",
                "networkpolicies",
                "replicasets",
                "replicasets/scale",
                "replicationcontrollers/scale",
            ],
        ),
        rule(WRITE, &["policy"], &["poddisruptionbudgets"]),
        rule(
            WRITE,
            &["networking.k8s.io"],
            &["ingresses", "networkpolicies"],
        ),
        rule(READ_WRITE, &["coordination.k8s.io"], &["leases"]),
    ];
    cluster_role(
        "system:aggregate-to-edit",
        Some(AGGREGATE_TO_EDIT),
        core.into_iter().chain(workloads).collect(),
    )
}

fn cluster_roles() -> Vec<Value> {
    vec![
        aggregated_role("admin", None, AGGREGATE_TO_ADMIN),
        cluster_role(
            "cluster-admin",
            None,
            vec![rule(&["*"], &["*"], &["*"]), url_rule(&["*"], &["*"])],
        ),
        aggregated_role("edit", Some(AGGREGATE_TO_ADMIN), AGGREGATE_TO_EDIT),
        cluster_role(
            "system:aggregate-to-admin",
            Some(AGGREGATE_TO_ADMIN),
            vec![
                rule(
                    &["create"],
                    &["authorization.k8s.io"],
                    &["localsubjectaccessreviews"],
                ),
                rule(READ_WRITE, &[RBAC_GROUP], &["rolebindings", "roles"]),
            ],
        ),
        aggregate_to_edit(),
        aggregate_to_view(),
        cluster_role(
            "system:basic-user",
            None,
            vec![
                rule(
                    &["create"],
                    &["authorization.k8s.io"],
                    &["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                ),
                rule(
                    &["create"],
                    &["authentication.k8s.io"],
                    &["selfsubjectreviews"],
                ),
            ],
        ),
        cluster_role(
            "system:discovery",
            None,
            vec![url_rule(
                &["get"],
                &[
                    "/api",
                    "/api/*",
                    "/apis",
                    "/apis/*",
                    "/healthz",
                    "/livez",
                    "/openapi",
                    "/openapi/*",
                    "/readyz",
                    "/version",
                    "/version/",
                ],
            )],
        ),
        cluster_role(
            "system:public-info-viewer",
            None,
            vec![url_rule(
                &["get"],
                &["/healthz", "/livez", "/readyz", "/version", "/version/"],
            )],
        ),
        aggregated_role("view", Some(AGGREGATE_TO_EDIT), AGGREGATE_TO_VIEW),
    ]
}

/// The ClusterRoles and ClusterRoleBindings every logical cluster has, with the rules of the
/// aggregated roles (`admin`, `edit`, `view`) filled in as Kubernetes' aggregation controller would.
pub fn default_policy() -> Vec<Value> {
    let mut roles = cluster_roles();
    let effective = {
        let refs: Vec<&Value> = roles.iter().collect();
        aggregation::effective_rules(&refs)
    };
    for (role, rules) in roles.iter_mut().zip(effective) {
        if role.get("aggregationRule").is_some() {
            role["rules"] = rules.iter().map(PolicyRule::to_json).collect();
        }
    }
    roles.extend([
        group_binding("cluster-admin", "cluster-admin", &["system:masters"]),
        group_binding(
            "system:basic-user",
            "system:basic-user",
            &[AUTHENTICATED_GROUP],
        ),
        group_binding(
            "system:discovery",
            "system:discovery",
            &[AUTHENTICATED_GROUP],
        ),
        group_binding(
            "system:public-info-viewer",
            "system:public-info-viewer",
            &[AUTHENTICATED_GROUP, UNAUTHENTICATED_GROUP],
        ),
    ]);
    roles
}

/// The policy of kcp's `system:admin` logical cluster, which kcp consults for every logical
/// cluster: the defaults plus `system:kcp:admin` bound to `cluster-admin`.
pub fn system_admin_policy() -> Vec<Value> {
    let mut policy = default_policy();
    // Bound in each workspace to let users in (the workspace content authorizer asks for it).
    policy.push(cluster_role(
        WORKSPACE_ACCESS_ROLE,
        None,
        vec![url_rule(&["access"], &["/"])],
    ));
    policy.push(group_binding(
        "system:kcp:admin:cluster-admin",
        "cluster-admin",
        &[KCP_ADMIN_GROUP],
    ));
    policy.extend(logical_cluster_admins());
    policy
}

/// Upstream's roles for the two logical-cluster-admin groups, each bound to its group of the
/// same name: a shard's scheduler creating LogicalClusters on another shard, and tools that
/// manage logical clusters from outside.
fn logical_cluster_admins() -> [Value; 4] {
    let logical_clusters = ["logicalclusters", "logicalclusters/status"];
    [
        cluster_role(
            LOGICAL_CLUSTER_ADMIN,
            None,
            vec![
                rule(&["*"], &["core.kcp.io"], &logical_clusters),
                rule(
                    &["delete", "update", "get"],
                    &["tenancy.kcp.io"],
                    &["workspaces"],
                ),
            ],
        ),
        group_binding(
            LOGICAL_CLUSTER_ADMIN,
            LOGICAL_CLUSTER_ADMIN,
            &[LOGICAL_CLUSTER_ADMIN],
        ),
        cluster_role(
            EXTERNAL_LOGICAL_CLUSTER_ADMIN,
            None,
            vec![
                rule(
                    &["delete", "update", "get"],
                    &["core.kcp.io"],
                    &logical_clusters,
                ),
                rule(
                    &["delete", "update", "patch", "get"],
                    &["tenancy.kcp.io"],
                    &["workspaces"],
                ),
                rule(&["get"], &[""], &["serviceaccounts", "secrets"]),
                url_rule(&["access"], &["/"]),
                rule(
                    &["create"],
                    &["authorization.k8s.io"],
                    &["subjectaccessreviews"],
                ),
            ],
        ),
        group_binding(
            EXTERNAL_LOGICAL_CLUSTER_ADMIN,
            EXTERNAL_LOGICAL_CLUSTER_ADMIN,
            &[EXTERNAL_LOGICAL_CLUSTER_ADMIN],
        ),
    ]
}
