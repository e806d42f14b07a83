//! Every served resource type and verb, for users bound to `edit` in one namespace of `root`,
//! to `view` across `team-b`, and to nothing, in both logical clusters: allowed exactly where
//! RBAC says, otherwise a 403 naming user, verb, resource and scope.

use super::*;

const VERBS: [&str; 8] = [
    "get",
    "list",
    "watch",
    "create",
    "update",
    "patch",
    "delete",
    "deletecollection",
];
const READ_VERBS: [&str; 3] = ["get", "list", "watch"];

/// What Kubernetes' `view` ClusterRole lets one read (get, list, watch): (API group, resource).
/// Not secrets, not leases, not RBAC, not events.k8s.io events.
const VIEW_READS: &[(&str, &str)] = &[
    ("", "configmaps"),
    ("", "endpoints"),
    ("", "persistentvolumeclaims"),
    ("", "pods"),
    ("", "replicationcontrollers"),
    ("", "serviceaccounts"),
    ("", "services"),
    ("", "bindings"),
    ("", "events"),
    ("", "limitranges"),
    ("", "resourcequotas"),
    ("", "namespaces"),
    ("discovery.k8s.io", "endpointslices"),
    ("apps", "controllerrevisions"),
    ("apps", "daemonsets"),
    ("apps", "deployments"),
    ("apps", "replicasets"),
    ("apps", "statefulsets"),
    ("autoscaling", "horizontalpodautoscalers"),
    ("batch", "cronjobs"),
    ("batch", "jobs"),
    ("policy", "poddisruptionbudgets"),
    ("networking.k8s.io", "ingresses"),
    ("networking.k8s.io", "networkpolicies"),
];

/// What Kubernetes' `edit` ClusterRole lets one do with every verb, on top of `view`'s reads:
/// secrets, leases and the everyday namespaced types; not roles or rolebindings.
const EDIT_ALL: &[(&str, &str)] = &[
    ("", "configmaps"),
    ("", "events"),
    ("", "persistentvolumeclaims"),
    ("", "pods"),
    ("", "replicationcontrollers"),
    ("", "secrets"),
    ("", "serviceaccounts"),
    ("", "services"),
    ("coordination.k8s.io", "leases"),
    ("apps", "daemonsets"),
    ("apps", "deployments"),
    ("apps", "replicasets"),
    ("apps", "statefulsets"),
    ("autoscaling", "horizontalpodautoscalers"),
    ("batch", "cronjobs"),
    ("batch", "jobs"),
    ("policy", "poddisruptionbudgets"),
    ("networking.k8s.io", "ingresses"),
    ("networking.k8s.io", "networkpolicies"),
];

#[derive(Debug, Clone)]
struct Served {
    group: String,
    version: String,
    resource: String,
    kind: String,
    namespaced: bool,
    verbs: Vec<String>,
}

impl Served {
    fn base(&self) -> String {
        if self.group.is_empty() {
            format!("/api/{}", self.version)
        } else {
            format!("/apis/{}/{}", self.group, self.version)
        }
    }

    fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

/// Every served resource of `root` (no subresources, no review types) with its verbs.
async fn served_resources(admin: &Caller) -> Vec<Served> {
    let mut group_versions = vec![(String::new(), "v1".to_owned())];
    let groups = admin.get("/apis").await;
    assert_eq!(groups.status, 200, "/apis: {}", groups.text());
    for group in groups.json()["groups"].as_array().expect("groups") {
        for version in group["versions"].as_array().expect("versions") {
            group_versions.push((
                group["name"].as_str().unwrap().to_owned(),
                version["version"].as_str().unwrap().to_owned(),
            ));
        }
    }
    let mut served = Vec::new();
    for (group, version) in group_versions {
        let path = if group.is_empty() {
            "/api/v1".to_owned()
        } else {
            format!("/apis/{group}/{version}")
        };
        let list = admin.get(&path).await;
        assert_eq!(list.status, 200, "{path}: {}", list.text());
        for resource in list.json()["resources"].as_array().expect("resources") {
            let name = resource["name"].as_str().unwrap();
            let kind = resource["kind"].as_str().unwrap_or_default();
            if name.contains('/') || name.ends_with("reviews") || kind.ends_with("Review") {
                continue;
            }
            served.push(Served {
                group: group.clone(),
                version: version.clone(),
                resource: name.to_owned(),
                kind: kind.to_owned(),
                namespaced: resource["namespaced"].as_bool().unwrap_or(false),
                verbs: strings(&resource["verbs"]),
            });
        }
    }
    served
}

/// What RBAC should say for `user` doing `verb` on `resource` in `cluster`, requests being made
/// in namespace `default` (namespaced types) or at the cluster scope.
fn rbac_allows(user: &str, cluster: &str, resource: &Served, verb: &str) -> bool {
    let key = (resource.group.as_str(), resource.resource.as_str());
    let view = VIEW_READS.contains(&key) && READ_VERBS.contains(&verb);
    // Root lets every authenticated user read its Workspaces, WorkspaceTypes (to choose one)
    // and LogicalCluster, as upstream's system:kcp:tenancy:reader.
    const TENANCY_READS: [(&str, &str); 3] = [
        ("tenancy.kcp.io", "workspaces"),
        ("tenancy.kcp.io", "workspacetypes"),
        ("core.kcp.io", "logicalclusters"),
    ];
    if cluster == "root" && TENANCY_READS.contains(&key) && READ_VERBS.contains(&verb) {
        return true;
    }
    match (user, cluster) {
        // RoleBinding to `edit` in root's namespace `default`: nothing at the cluster scope.
        ("alice", "root") => resource.namespaced && (EDIT_ALL.contains(&key) || view),
        // ClusterRoleBinding to `view` in team-b: reads everywhere in team-b.
        ("bob", "team-b") => view,
        _ => false,
    }
}

/// The request for `verb` on `resource` in `cluster` (object name `matrix-probe`, labelled
/// `matrix=probe` so deletecollection only touches what the matrix made): status and failure body.
async fn probe(caller: &Caller, cluster: &str, resource: &Served, verb: &str) -> (u16, String) {
    let collection = if resource.namespaced {
        format!(
            "/clusters/{cluster}{}/namespaces/default/{}",
            resource.base(),
            resource.resource
        )
    } else {
        format!(
            "/clusters/{cluster}{}/{}",
            resource.base(),
            resource.resource
        )
    };
    let item = format!("{collection}/matrix-probe");
    let object = json!({
        "apiVersion": resource.api_version(),
        "kind": resource.kind,
        "metadata": {"name": "matrix-probe", "labels": {"matrix": "probe"}},
    });
    let patch = json!({"metadata": {"labels": {"matrix": "probe"}}});
    match verb {
        "get" => caller.status_of(Method::GET, &item, None).await,
        "list" => caller.status_of(Method::GET, &collection, None).await,
        "watch" => {
            let path = format!("{collection}?watch=true&timeoutSeconds=1");
            caller.status_of(Method::GET, &path, None).await
        }
        "create" => {
            caller
                .status_of(Method::POST, &collection, Some(&object))
                .await
        }
        "update" => caller.status_of(Method::PUT, &item, Some(&object)).await,
        "patch" => caller.status_of(Method::PATCH, &item, Some(&patch)).await,
        "delete" => caller.status_of(Method::DELETE, &item, None).await,
        "deletecollection" => {
            let path = format!("{collection}?labelSelector=matrix%3Dprobe");
            caller.status_of(Method::DELETE, &path, None).await
        }
        other => unreachable!("verb {other}"),
    }
}

/// Why a 403 body is not the Status Kubernetes sends for `user` denied `verb` on `resource`.
fn forbidden_body_problem(body: &str, user: &str, resource: &Served, verb: &str) -> Option<String> {
    let Ok(status) = serde_json::from_str::<Value>(body) else {
        return Some(format!("403 body is not JSON: {body}"));
    };
    if status["kind"] != "Status" || status["code"] != 403 || status["reason"] != "Forbidden" {
        return Some(format!("403 body is not a Forbidden Status: {status}"));
    }
    let message = status["message"].as_str().unwrap_or_default();
    let scope = if resource.namespaced {
        "in the namespace \"default\"".to_owned()
    } else if resource.resource == "namespaces"
        && matches!(verb, "get" | "update" | "patch" | "delete")
    {
        // Kubernetes' request info takes a namespace's name as the request's namespace.
        "in the namespace \"matrix-probe\"".to_owned()
    } else {
        "at the cluster scope".to_owned()
    };
    let expected = [
        format!("User \"{user}\""),
        format!(
            "cannot {verb} resource \"{}\" in API group \"{}\"",
            resource.resource, resource.group
        ),
        scope,
    ];
    let missing: Vec<&String> = expected
        .iter()
        .filter(|part| !message.contains(part.as_str()))
        .collect();
    (!missing.is_empty()).then(|| format!("403 message {message:?} lacks {missing:?}"))
}

#[tokio::test]
async fn rbac_matrix_across_logical_clusters() {
    let server = SERVER.get().await;
    let admin = Caller::admin(&server);
    let ca = server.client_ca();
    ensure_namespace(&admin, "team-b", "default").await;
    bind_in_namespace(&admin, "root", "default", "edit", "alice").await;
    bind_cluster_wide(&admin, "team-b", "view", "bob").await;

    let users = [
        ("alice", Caller::cert(&server, &ca, "alice", &[])),
        ("bob", Caller::cert(&server, &ca, "bob", &[])),
        ("carol", Caller::cert(&server, &ca, "carol", &[])),
    ];
    SETTLED
        .wait_status(
            "alice's edit binding in root",
            &users[0].1,
            "/clusters/root/api/v1/namespaces/default/configmaps",
            200,
        )
        .await;
    SETTLED
        .wait_status(
            "bob's view binding in team-b",
            &users[1].1,
            "/clusters/team-b/api/v1/namespaces/default/configmaps",
            200,
        )
        .await;

    let resources = served_resources(&admin).await;
    for (group, resource) in [
        ("", "configmaps"),
        ("", "secrets"),
        ("", "serviceaccounts"),
        ("", "events"),
        ("", "namespaces"),
        ("coordination.k8s.io", "leases"),
        ("rbac.authorization.k8s.io", "roles"),
        ("rbac.authorization.k8s.io", "rolebindings"),
        ("rbac.authorization.k8s.io", "clusterroles"),
        ("rbac.authorization.k8s.io", "clusterrolebindings"),
    ] {
        assert!(
            resources
                .iter()
                .any(|served| served.group == group && served.resource == resource),
            "discovery does not list {resource} in group {group:?}: {resources:#?}"
        );
    }

    let mut wrong = Vec::new();
    let mut checked = 0;
    for cluster in ["root", "team-b"] {
        for (user, caller) in &users {
            for resource in &resources {
                for verb in VERBS {
                    if !resource.verbs.iter().any(|served| served == verb) {
                        continue;
                    }
                    checked += 1;
                    let allowed = rbac_allows(user, cluster, resource, verb);
                    let (status, body) = probe(caller, cluster, resource, verb).await;
                    let what = format!(
                        "{user} {verb} {}.{} in {cluster}: expected {}, got {status}",
                        resource.resource,
                        resource.group,
                        if allowed { "allowed" } else { "403" }
                    );
                    if allowed && (status == 403 || status == 401) {
                        wrong.push(format!("{what}: {body}"));
                    } else if !allowed && status != 403 {
                        wrong.push(what);
                    } else if !allowed
                        && let Some(problem) = forbidden_body_problem(&body, user, resource, verb)
                    {
                        wrong.push(format!("{what}: {problem}"));
                    }
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {checked} requests not as RBAC says:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}
