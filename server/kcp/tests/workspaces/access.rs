//! Who may enter a workspace: its creator (admin there), others only with `access` on `/` there,
//! whatever the workspace's other RBAC grants them; and home workspaces.

use super::*;

/// A 403 of the workspace content authorizer.
fn expect_access_denied(what: &str, response: &Response) {
    let message = expect_forbidden(what, response);
    assert!(
        message.contains("workspace access not permitted"),
        "{what}: message is not the content authorizer's: {message}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn creator_is_admin_and_others_need_access() {
    let server = SERVER.get().await;
    let ca = server.client_ca();
    let admin = Caller::admin(&server);
    let alice = Caller::user(&server, &ca, "alice");
    let bob = Caller::user(&server, &ca, "bob");
    let wanda = Caller::user(&server, &ca, "wanda");

    // Without a grant in root nobody may create workspaces there.
    let response = bob
        .post(&workspaces_in("root"), &workspace("bobs-org", None))
        .await;
    let message = expect_forbidden("bob creates a workspace in root", &response);
    assert!(message.contains("\"bob\""), "{message}");
    // but, as upstream, every signed-in user may list them (system:kcp:tenancy:reader).
    let response = bob.get(&workspaces_in("root")).await;
    assert_eq!(response.status, 200, "{}", response.text());

    allow_workspaces_in_root(
        &admin,
        "workspace-creator",
        &["create", "get", "list", "watch"],
        "alice",
    )
    .await;
    let created = SETTLED
        .eventually("alice may create workspaces in root", || async {
            let response = alice
                .post(&workspaces_in("root"), &workspace("alice-org", None))
                .await;
            match response.status {
                201 => Ok(response.json()),
                _ => Err(format!("{} {}", response.status, response.text())),
            }
        })
        .await;
    let owner = created["metadata"]["annotations"][OWNER_ANNOTATION]
        .as_str()
        .unwrap_or_default();
    let owner: Value = serde_json::from_str(owner)
        .unwrap_or_else(|_| panic!("owner annotation is not JSON user info: {created}"));
    assert_eq!(owner["username"], "alice", "{created}");
    assert_eq!(
        created["spec"]["type"],
        json!({"name": "organization", "path": "root"}),
        "root's default child type: {created}"
    );
    let ready = wait_phase(&admin, "root", "alice-org", "Ready").await;
    let ws = "root:alice-org";
    assert!(
        ready["spec"]["URL"]
            .as_str()
            .is_some_and(|url| url.ends_with(&at(ws))),
        "{ready}"
    );
    // Alice may read her workspace in root.
    let response = alice.get(&workspace_url("root", "alice-org")).await;
    assert_eq!(response.status, 200, "{}", response.text());

    // The creator is cluster-admin in the new workspace.
    let response = admin
        .get(&format!(
            "{}{RBAC_V1}/clusterrolebindings/workspace-admin",
            at(ws)
        ))
        .await;
    assert_eq!(
        response.status,
        200,
        "workspace-admin binding: {}",
        response.text()
    );
    let admin_binding = response.json();
    assert_eq!(
        admin_binding["roleRef"]["name"], "cluster-admin",
        "{admin_binding}"
    );
    assert!(
        admin_binding["subjects"]
            .as_array()
            .is_some_and(|subjects| subjects.iter().any(|s| s["name"] == "alice")),
        "{admin_binding}"
    );
    // Deleted or bound to somebody else, workspace-admin comes back as it should be.
    let admin_binding_url = format!("{}{RBAC_V1}/clusterrolebindings/workspace-admin", at(ws));
    let binds_alice = |binding: &Value| {
        binding["subjects"]
            == json!([{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}])
    };
    let mut hijacked = admin_binding.clone();
    hijacked["subjects"] =
        json!([{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "mallory"}]);
    let response = admin.put(&admin_binding_url, &hijacked).await;
    assert_eq!(response.status, 200, "{}", response.text());
    for step in ["bound to mallory", "deleted"] {
        if step == "deleted" {
            let response = admin.delete(&admin_binding_url).await;
            assert_eq!(response.status, 200, "{}", response.text());
        }
        SETTLED
            .eventually(
                &format!("workspace-admin repaired after being {step}"),
                || async {
                    let response = admin.get(&admin_binding_url).await;
                    match response.status {
                        200 if binds_alice(&response.json()) => Ok(()),
                        status => Err(format!("{status} {}", response.text())),
                    }
                },
            )
            .await;
    }
    SETTLED
        .wait_status(
            "alice lists namespaces in her workspace",
            &alice,
            &format!("{}/api/v1/namespaces", at(ws)),
            200,
        )
        .await;
    alice
        .create(&format!("{}/api/v1/namespaces", at(ws)), &namespace("work"))
        .await;
    let configmaps = format!("{}/api/v1/namespaces/work/configmaps", at(ws));
    alice.create(&configmaps, &config_map("alices")).await;

    // Admin of her workspace, she still cannot move it: routing and type annotations of the
    // LogicalCluster are the system's.
    let mut own = alice.get(&logical_cluster_url(ws)).await.json();
    own["metadata"]["annotations"]["kcp.io/path"] = json!("root:bobs-org");
    let response = alice.put(&logical_cluster_url(ws), &own).await;
    let message = expect_forbidden("alice re-paths her LogicalCluster", &response);
    assert!(
        message.contains(r#"modification of reserved annotation: "kcp.io/path""#),
        "{message}"
    );

    // Bob has no access to the workspace: denied whatever he asks.
    for path in [
        configmaps.clone(),
        format!("{}/api/v1/namespaces", at(ws)),
        format!("{}/api", at(ws)),
        format!("{}/apis", at(ws)),
    ] {
        expect_access_denied(&format!("bob GET {path}"), &bob.get(&path).await);
    }

    // Local RBAC alone does not let him in.
    alice
        .create(
            &format!("{}{RBAC_V1}/namespaces/work/rolebindings", at(ws)),
            &binding("RoleBinding", "bob-edit", "edit", "bob"),
        )
        .await;
    let until = Instant::now() + Duration::from_secs(4);
    while Instant::now() < until {
        expect_access_denied(
            "bob with edit in namespace work but no access",
            &bob.get(&configmaps).await,
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    // `access` on `/` in the workspace (granted by its admin) lets him use what RBAC gives him.
    alice
        .create(
            &format!("{}{RBAC_V1}/clusterrolebindings", at(ws)),
            &access_binding("bob"),
        )
        .await;
    SETTLED
        .wait_status("bob with access and edit", &bob, &configmaps, 200)
        .await;
    bob.create(&configmaps, &config_map("bobs")).await;
    // Only what RBAC gives him: no namespaces (an ordinary RBAC 403 now).
    let response = bob
        .post(&format!("{}/api/v1/namespaces", at(ws)), &namespace("bobs"))
        .await;
    let message = expect_forbidden("bob creates a namespace", &response);
    assert!(
        message.contains("User \"bob\"") && message.contains("namespaces"),
        "bob creating a namespace: {message}"
    );
    // Anybody else is still out, and bob's access is this workspace's only.
    expect_access_denied(
        "another user in alice's workspace",
        &wanda.get(&configmaps).await,
    );
    // Alice's admin role is hers in her workspace only.
    let response = alice
        .get(&format!("{}/api/v1/namespaces", at("root")))
        .await;
    let message = expect_forbidden("alice lists namespaces in root", &response);
    assert!(message.contains("\"alice\""), "{message}");
}

/// GETs the caller's home workspace, retrying 429 (with Retry-After) as clients do.
async fn home(caller: &Caller) -> Value {
    let path = workspace_url("root", "~");
    SETTLED
        .eventually(&format!("home workspace of {}", caller.name()), || async {
            let response = caller.get(&path).await;
            match response.status {
                200 => Ok(response.json()),
                _ => Err(format!("{} {}", response.status, response.text())),
            }
        })
        .await
}

#[tokio::test(flavor = "multi_thread")]
async fn home_workspace_flow() {
    let server = SERVER.get().await;
    let ca = server.client_ca();
    let carol = Caller::user(&server, &ca, "carol");
    let dave = Caller::user(&server, &ca, "dave");

    let first = home(&carol).await;
    assert_eq!(first["kind"], "Workspace", "{first}");
    let cluster = first["spec"]["cluster"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(!cluster.is_empty(), "home without spec.cluster: {first}");
    // The server's external URL (its host may be spelled differently from the kubeconfig's).
    let url = first["spec"]["URL"].as_str().unwrap_or_default();
    let port = server.base_url().rsplit(':').next().unwrap();
    assert!(
        url.starts_with("https://") && url.ends_with(&format!(":{port}/clusters/user:carol")),
        "home spec.URL (server {}): {first}",
        server.base_url()
    );
    assert_eq!(first["status"]["phase"], "Ready", "{first}");
    // Asking again answers the same home.
    let again = home(&carol).await;
    assert_eq!(again["spec"]["cluster"], cluster.as_str(), "{again}");

    // Carol is admin in her home, by path and by cluster name; dave is not let in.
    for prefix in [at("user:carol"), at(&cluster)] {
        let namespaces = format!("{prefix}/api/v1/namespaces");
        let list = SETTLED
            .wait_status("carol lists namespaces at home", &carol, &namespaces, 200)
            .await;
        assert!(
            item_names(&list.json()).contains(&"default".to_owned()),
            "{prefix}: {}",
            list.text()
        );
        let response = dave.get(&namespaces).await;
        let message = expect_forbidden(&format!("dave GET {namespaces}"), &response);
        assert!(
            message.contains("workspace access not permitted"),
            "{message}"
        );
    }
    carol
        .create(
            &format!("{}/api/v1/namespaces/default/configmaps", at("user:carol")),
            &config_map("carols"),
        )
        .await;
    let response = carol
        .get(&format!(
            "{}/api/v1/namespaces/default/configmaps/carols",
            at(&cluster)
        ))
        .await;
    assert_eq!(
        response.status,
        200,
        "user:carol is {cluster}: {}",
        response.text()
    );

    // Dave's home is another one.
    let daves = home(&dave).await;
    assert_ne!(daves["spec"]["cluster"], cluster.as_str(), "{daves}");

    // `kubectl ws ~` takes carol home.
    let kubeconfig = tempfile::NamedTempFile::new().unwrap();
    user_kubeconfig(&server, &ca, "carol", kubeconfig.path());
    let kubectl = Kubectl::with_plugins("1.33", kubeconfig.path(), &plugins());
    let out = kubectl.ok(&["ws", "~"]);
    assert!(
        out.contains("Current workspace is 'user:carol'"),
        "kubectl ws ~: {out}"
    );
    let out = kubectl.ok(&["get", "configmaps", "-n", "default", "-o", "name"]);
    assert!(
        out.contains("configmap/carols"),
        "kubectl get cm at home: {out}"
    );
    let out = kubectl.ok(&["ws", "current"]);
    assert!(out.contains("'user:carol'"), "kubectl ws current: {out}");
}

/// `--batteries-included=+user` adds upstream's `user` context: signed in, in no group, so it
/// sees what every tenant sees in root and nothing an admin has to grant.
#[tokio::test(flavor = "multi_thread")]
async fn the_user_battery_is_a_tenant_in_root() {
    let mut server = KcpProcess::start(
        kcp_binary(),
        "user-battery",
        &["--batteries-included=+user".to_string()],
    )
    .await;
    let kubectl = Kubectl::new("1.33", &server.kubeconfig());
    fn as_user<'a>(args: &[&'a str]) -> Vec<&'a str> {
        [&["--context", "user"], args].concat()
    }
    let whoami = kubectl.ok(&as_user(&[
        "auth",
        "whoami",
        "-o",
        "jsonpath={.status.userInfo.username}",
    ]));
    assert_eq!(whoami, "user");
    kubectl.ok(&as_user(&["get", "workspaces"]));
    kubectl.ok(&as_user(&["get", "workspacetypes"]));
    let denied = kubectl.fails(&as_user(&["get", "namespaces"]));
    assert!(denied.contains("Forbidden"), "{denied}");
    server.stop().await;
}
