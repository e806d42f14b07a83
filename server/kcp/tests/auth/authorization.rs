//! The authorization webhook, RBAC escalation and bind checks, ClusterRole aggregation per logical
//! cluster, and who may read across all logical clusters (`/clusters/*`).

use super::*;

/// A SubjectAccessReview webhook over plain HTTP/1.1 on a loopback port: allows `dave` to list
/// configmaps, has no opinion otherwise, and keeps every review it received.
async fn start_webhook() -> (u16, Arc<Mutex<Vec<Value>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let reviews = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&reviews);
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let seen = Arc::clone(&seen);
            tokio::spawn(serve_webhook_connection(stream, seen));
        }
    });
    (port, reviews)
}

async fn serve_webhook_connection(mut stream: tokio::net::TcpStream, seen: Arc<Mutex<Vec<Value>>>) {
    let mut buffer = Vec::new();
    loop {
        // Headers.
        let end = loop {
            if let Some(at) = buffer.windows(4).position(|window| window == b"\r\n\r\n") {
                break at + 4;
            }
            let mut chunk = [0u8; 4096];
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buffer.extend_from_slice(&chunk[..n]),
            }
        };
        let head = String::from_utf8_lossy(&buffer[..end]).to_lowercase();
        let length: usize = head
            .lines()
            .find_map(|line| line.strip_prefix("content-length:"))
            .map(|value| value.trim().parse().expect("a Content-Length"))
            .unwrap_or_else(|| panic!("webhook request without Content-Length:\n{head}"));
        while buffer.len() < end + length {
            let mut chunk = [0u8; 4096];
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buffer.extend_from_slice(&chunk[..n]),
            }
        }
        let review: Value =
            serde_json::from_slice(&buffer[end..end + length]).unwrap_or(Value::Null);
        buffer.drain(..end + length);
        let attributes = &review["spec"]["resourceAttributes"];
        let allowed = review["spec"]["user"] == "dave"
            && attributes["resource"] == "configmaps"
            && attributes["verb"] == "list";
        seen.lock().unwrap().push(review.clone());
        let answer = json!({
            "apiVersion": review["apiVersion"],
            "kind": "SubjectAccessReview",
            "status": {"allowed": allowed},
        })
        .to_string();
        let response = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{answer}",
            answer.len()
        );
        if stream.write_all(response.as_bytes()).await.is_err() {
            return;
        }
    }
}

#[tokio::test]
async fn authorization_webhook() {
    let dir = temp_dir("auth-webhook");
    let (port, reviews) = start_webhook().await;
    let kubeconfig = dir.path().join("webhook.kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: webhook\n  cluster:\n    server: \
             http://127.0.0.1:{port}/authorize\nusers:\n- name: kcp\n  user: {{}}\ncontexts:\n- name: \
             webhook\n  context:\n    cluster: webhook\n    user: kcp\ncurrent-context: webhook\n"
        ),
    )
    .unwrap();
    let server = KcpProcess::start(
        binary(),
        "auth-webhook",
        &[format!(
            "--authorization-webhook-config-file={}",
            kubeconfig.display()
        )],
    )
    .await;
    let ca = server.client_ca();
    let dave = Caller::cert(&server, &ca, "dave", &[]);
    let eve = Caller::cert(&server, &ca, "eve", &[]);
    let configmaps = "/api/v1/namespaces/default/configmaps";

    let allowed = dave.get(configmaps).await;
    assert_eq!(
        allowed.status,
        200,
        "dave (webhook allows): {}",
        allowed.text()
    );
    expect_forbidden(
        "eve (webhook has no opinion, no RBAC)",
        &eve.get(configmaps).await,
        "eve",
        &["cannot list resource \"configmaps\""],
    );
    expect_forbidden(
        "dave creates (the webhook allows only list)",
        &dave
            .post(
                configmaps,
                &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}),
            )
            .await,
        "dave",
        &["cannot create resource \"configmaps\""],
    );
    // In a workspace dave may not enter, the content authorizer has no opinion and the webhook
    // still decides (upstream's order).
    ensure_namespace(&Caller::admin(&server), "team-w", "default").await;
    let team = dave
        .get("/clusters/team-w/api/v1/namespaces/default/configmaps")
        .await;
    assert_eq!(team.status, 200, "dave in team-w: {}", team.text());
    let admin = Caller::admin(&server).get(configmaps).await;
    assert_eq!(admin.status, 200, "the admin still may: {}", admin.text());

    // Every review names the logical cluster in spec.extra.
    let reviews = reviews.lock().unwrap().clone();
    for cluster in ["root", "team-w"] {
        let review = reviews
            .iter()
            .find(|review| {
                review["spec"]["user"] == "dave"
                    && review["spec"]["resourceAttributes"]["verb"] == "list"
                    && review["spec"]["extra"]["authorization.kcp.io/cluster-name"]
                        == json!([cluster])
            })
            .unwrap_or_else(|| {
                panic!("no review of dave's list in {cluster} with its cluster-name extra: {reviews:#?}")
            });
        let attributes = &review["spec"]["resourceAttributes"];
        assert_eq!(attributes["resource"], "configmaps", "{review}");
        assert_eq!(attributes["namespace"], "default", "{review}");
        assert_eq!(review["kind"], "SubjectAccessReview", "{review}");
    }
}

#[tokio::test]
async fn escalation_checks() {
    let server = SERVER.get().await;
    let admin = Caller::admin(&server);
    let ca = server.client_ca();
    ensure_namespace(&admin, "", "escalate").await;
    bind_in_namespace(&admin, "root", "escalate", "admin", "adele").await;
    let adele = Caller::cert(&server, &ca, "adele", &[]);
    let rolebindings = format!("{RBAC_V1}/namespaces/escalate/rolebindings");
    let roles = format!("{RBAC_V1}/namespaces/escalate/roles");
    SETTLED
        .wait_status("adele's admin binding", &adele, &rolebindings, 200)
        .await;

    let not_held = "attempting to grant RBAC permissions not currently held";
    // No ClusterRoleBinding to cluster-admin…
    let crb = binding(
        "ClusterRoleBinding",
        "adele-everything",
        "ClusterRole",
        "cluster-admin",
        user_subject("adele"),
    );
    expect_forbidden(
        "adele binds cluster-admin cluster-wide",
        &adele
            .post(&format!("{RBAC_V1}/clusterrolebindings"), &crb)
            .await,
        "adele",
        &["clusterrolebindings"],
    );
    // …nor a RoleBinding to it in her own namespace.
    let rb = binding(
        "RoleBinding",
        "adele-everything",
        "ClusterRole",
        "cluster-admin",
        user_subject("adele"),
    );
    expect_forbidden(
        "adele binds cluster-admin in her namespace",
        &adele.post(&rolebindings, &rb).await,
        "adele",
        &[not_held],
    );
    // No Role granting what she does not hold.
    let greedy = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "greedy"},
        "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}],
    });
    expect_forbidden(
        "adele creates a Role beyond her rights",
        &adele.post(&roles, &greedy).await,
        "adele",
        &[not_held],
    );
    // What she holds she may grant.
    let modest = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "modest"},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}],
    });
    let created = adele.post(&roles, &modest).await;
    assert_eq!(
        created.status,
        201,
        "adele's modest Role: {}",
        created.text()
    );
    let modest_binding = binding(
        "RoleBinding",
        "vic-modest",
        "Role",
        "modest",
        user_subject("vic"),
    );
    let created = adele.post(&rolebindings, &modest_binding).await;
    assert_eq!(
        created.status,
        201,
        "binding the modest Role: {}",
        created.text()
    );
    let view = binding(
        "RoleBinding",
        "vic-view",
        "ClusterRole",
        "view",
        user_subject("vic"),
    );
    let created = adele.post(&rolebindings, &view).await;
    assert_eq!(created.status, 201, "adele binds view: {}", created.text());
    // Not in a namespace she does not administer.
    expect_forbidden(
        "adele binds view in default",
        &adele
            .post(&format!("{RBAC_V1}/namespaces/default/rolebindings"), &view)
            .await,
        "adele",
        &[],
    );
    // The binding she made works.
    let vic = Caller::cert(&server, &ca, "vic", &[]);
    SETTLED
        .wait_status(
            "vic's view binding made by adele",
            &vic,
            "/api/v1/namespaces/escalate/configmaps",
            200,
        )
        .await;
    // The admin (system:masters) may bind anything.
    let created = admin.post(&rolebindings, &rb).await;
    assert_eq!(
        created.status,
        201,
        "admin binds cluster-admin: {}",
        created.text()
    );
}

#[tokio::test]
async fn aggregated_cluster_roles() {
    let server = SERVER.get().await;
    let admin = Caller::admin(&server);
    let ca = server.client_ca();
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.agg.example.com"},
        "spec": {
            "group": "agg.example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
            }],
        },
    });
    for cluster in ["agg-a", "agg-b"] {
        server.install_crd(cluster, &crd).await;
        ensure_namespace(&admin, cluster, "default").await;
        bind_cluster_wide(&admin, cluster, "view", "victor").await;
    }
    bind_cluster_wide(&admin, "agg-a", "edit", "wendy").await;
    let widget_viewer = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {
            "name": "widget-viewer",
            "labels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"},
        },
        "rules": [{"apiGroups": ["agg.example.com"], "resources": ["widgets"], "verbs": ["get", "list", "watch"]}],
    });
    admin
        .ensure(
            &format!("/clusters/agg-a{RBAC_V1}/clusterroles"),
            &widget_viewer,
        )
        .await;

    let victor = Caller::cert(&server, &ca, "victor", &[]);
    let wendy = Caller::cert(&server, &ca, "wendy", &[]);
    let widgets = |cluster: &str| {
        format!("/clusters/{cluster}/apis/agg.example.com/v1/namespaces/default/widgets")
    };
    SETTLED
        .wait_status(
            "victor's view binding in agg-b",
            &victor,
            "/clusters/agg-b/api/v1/namespaces/default/configmaps",
            200,
        )
        .await;
    SETTLED
        .wait_status(
            "view extended to widgets in agg-a",
            &victor,
            &widgets("agg-a"),
            200,
        )
        .await;
    SETTLED
        .wait_status(
            "edit includes view's widgets in agg-a",
            &wendy,
            &widgets("agg-a"),
            200,
        )
        .await;
    expect_forbidden(
        "victor lists widgets in agg-b (no aggregated role there)",
        &victor.get(&widgets("agg-b")).await,
        "victor",
        &["cannot list resource \"widgets\" in API group \"agg.example.com\""],
    );
    let widget =
        json!({"apiVersion": "agg.example.com/v1", "kind": "Widget", "metadata": {"name": "w"}});
    expect_forbidden(
        "victor creates a widget (view is read-only)",
        &victor.post(&widgets("agg-a"), &widget).await,
        "victor",
        &["cannot create resource \"widgets\""],
    );
}

#[tokio::test]
async fn wildcard_requires_masters_or_the_logical_cluster_admins_bootstrap_policy() {
    let server = SERVER.get().await;
    let admin = Caller::admin(&server);
    let ca = server.client_ca();
    bind_cluster_wide(&admin, "root", "cluster-admin", "rooty").await;
    let rooty = Caller::cert(&server, &ca, "rooty", &[]);
    SETTLED
        .wait_status(
            "rooty's cluster-admin binding",
            &rooty,
            "/api/v1/namespaces",
            200,
        )
        .await;
    let kcp_admin = Caller::cert(&server, &ca, "kay", &["system:kcp:admin"]);
    let masters = Caller::cert(&server, &ca, "mallory", &["system:masters"]);
    let carol = Caller::cert(&server, &ca, "carol", &[]);

    let wildcard = "/clusters/*/api/v1/configmaps";
    let watch = "/clusters/*/api/v1/configmaps?watch=true&timeoutSeconds=1";
    for (who, caller) in [("admin", &admin), ("mallory", &masters)] {
        let list = caller.get(wildcard).await;
        assert_eq!(list.status, 200, "{who} lists {wildcard}: {}", list.text());
        let (status, body) = caller.status_of(Method::GET, watch, None).await;
        assert_eq!(status, 200, "{who} watches {wildcard}: {body}");
    }
    for (who, caller) in [("rooty", &rooty), ("kay", &kcp_admin), ("carol", &carol)] {
        expect_forbidden(
            &format!("{who} lists {wildcard}"),
            &caller.get(wildcard).await,
            who,
            &[],
        );
        let (status, body) = caller.status_of(Method::GET, watch, None).await;
        assert_eq!(status, 403, "{who} watches {wildcard}: {body}");
    }

    // A logical-cluster-admin (another shard's scheduler) reads LogicalClusters across every
    // logical cluster through the bootstrap policy, as upstream, and nothing else.
    let scheduler = Caller::cert(
        &server,
        &ca,
        "logical-cluster-admin",
        &["system:kcp:logical-cluster-admin"],
    );
    let logical_clusters = "/clusters/*/apis/core.kcp.io/v1alpha1/logicalclusters";
    let list = scheduler.get(logical_clusters).await;
    assert_eq!(
        list.status,
        200,
        "the scheduler lists {logical_clusters}: {}",
        list.text()
    );
    let (status, body) = scheduler
        .status_of(
            Method::GET,
            &format!("{logical_clusters}?watch=true&timeoutSeconds=1"),
            None,
        )
        .await;
    assert_eq!(
        status, 200,
        "the scheduler watches {logical_clusters}: {body}"
    );
    expect_forbidden(
        &format!("the scheduler lists {wildcard}"),
        &scheduler.get(wildcard).await,
        "logical-cluster-admin",
        &[],
    );
    expect_forbidden(
        "the scheduler lists workspaces across clusters",
        &scheduler
            .get("/clusters/*/apis/tenancy.kcp.io/v1alpha1/workspaces")
            .await,
        "logical-cluster-admin",
        &[],
    );

    // system:kcp:admin is cluster-admin in every logical cluster, just not across them; rooty's
    // cluster-admin stays in root.
    ensure_namespace(&Caller::admin(&server), "wild-x", "default").await;
    for cluster in ["root", "wild-x"] {
        let path = format!("/clusters/{cluster}/api/v1/namespaces");
        let list = kcp_admin.get(&path).await;
        assert_eq!(list.status, 200, "kay lists {path}: {}", list.text());
        let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "by-kay"}});
        let created = kcp_admin.post(&path, &body).await;
        assert!(
            created.status == 201 || created.status == 409,
            "kay creates a namespace in {cluster}: {} {}",
            created.status,
            created.text()
        );
    }
    expect_forbidden(
        "rooty outside root",
        &rooty.get("/clusters/wild-x/api/v1/namespaces").await,
        "rooty",
        &[],
    );
}
