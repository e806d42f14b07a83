//! Sibling workspaces share nothing: types, objects and RBAC of one are invisible in the other.

use super::*;

fn gadget_crd() -> Value {
    let schema = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
    crd("iso.example.com", "Gadget", "Cluster", schema)
}

/// The list at `path` answers 200 and has none of the items `names`.
async fn assert_not_listed(admin: &Caller, what: &str, path: &str, names: &[&str]) {
    let list = admin.get(path).await;
    assert_eq!(list.status, 200, "{}", list.text());
    let listed = item_names(&list.json());
    assert!(
        names
            .iter()
            .all(|name| !listed.iter().any(|item| item == name)),
        "{what}: {}",
        list.text()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn sibling_workspaces_are_isolated() {
    let server = SERVER.get().await;
    let ca = server.client_ca();
    let admin = Caller::admin(&server);
    let frank = Caller::user(&server, &ca, "frank");
    let (a, b) = ("root:iso-a", "root:iso-b");
    create_ready(&admin, &admin, "root", "iso-a", None).await;
    create_ready(&admin, &admin, "root", "iso-b", None).await;

    // In iso-a: a CRD and an object of it, a namespace with a configmap, and RBAC letting frank in
    // and read everything.
    server.install_crd(a, &gadget_crd()).await;
    let gadgets = |path: &str| format!("{}/apis/iso.example.com/v1/gadgets", at(path));
    let gadget =
        json!({"apiVersion": "iso.example.com/v1", "kind": "Gadget", "metadata": {"name": "g1"}});
    admin.create(&gadgets(a), &gadget).await;
    admin
        .create(
            &format!("{}/api/v1/namespaces", at(a)),
            &namespace("team-a"),
        )
        .await;
    let configmaps = |path: &str| format!("{}/api/v1/namespaces/team-a/configmaps", at(path));
    admin.create(&configmaps(a), &config_map("only-in-a")).await;
    let crbs = |path: &str| format!("{}{RBAC_V1}/clusterrolebindings", at(path));
    admin
        .create(
            &crbs(a),
            &binding("ClusterRoleBinding", "frank-view", "view", "frank"),
        )
        .await;
    admin.create(&crbs(a), &access_binding("frank")).await;
    SETTLED
        .wait_status("frank reads iso-a", &frank, &configmaps(a), 200)
        .await;
    let response = frank.get(&format!("{}/only-in-a", configmaps(a))).await;
    assert_eq!(response.status, 200, "{}", response.text());

    // Discovery in iso-b knows nothing of the CRD.
    let groups = admin.get(&format!("{}/apis", at(b))).await;
    assert_eq!(groups.status, 200, "{}", groups.text());
    assert!(
        !groups.text().contains("iso.example.com"),
        "iso-b discovery: {}",
        groups.text()
    );
    let groups = admin.get(&format!("{}/apis", at(a))).await;
    assert!(
        groups.text().contains("iso.example.com"),
        "iso-a discovery: {}",
        groups.text()
    );
    let response = admin
        .get(&format!("{}/apis/iso.example.com/v1", at(b)))
        .await;
    assert_eq!(
        response.status,
        404,
        "iso-b group version: {}",
        response.text()
    );
    let response = admin.get(&gadgets(b)).await;
    assert_eq!(response.status, 404, "iso-b gadgets: {}", response.text());
    let crds = format!(
        "{}/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        at(b)
    );
    assert_not_listed(&admin, "iso-b CRDs", &crds, &["gadgets.iso.example.com"]).await;

    // Lists in iso-b do not show iso-a's objects.
    let namespaces = format!("{}/api/v1/namespaces", at(b));
    assert_not_listed(&admin, "iso-b namespaces", &namespaces, &["team-a"]).await;
    let all = format!("{}/api/v1/configmaps", at(b));
    assert_not_listed(&admin, "iso-b configmaps", &all, &["only-in-a"]).await;
    let response = admin.get(&format!("{}/only-in-a", configmaps(b))).await;
    assert_eq!(response.status, 404, "{}", response.text());
    assert_not_listed(
        &admin,
        "iso-b clusterrolebindings",
        &crbs(b),
        &["frank-view", "frank-access"],
    )
    .await;

    // RBAC of iso-a does not reach iso-b.
    let response = frank.get(&format!("{}/api/v1/namespaces", at(b))).await;
    let message = expect_forbidden("frank in iso-b", &response);
    assert!(
        message.contains("workspace access not permitted"),
        "{message}"
    );
    // Even with access in iso-b, iso-a's view binding does not count there.
    admin.create(&crbs(b), &access_binding("frank")).await;
    SETTLED
        .eventually("frank enters iso-b but may not list", || async {
            let response = frank.get(&format!("{}/api/v1/namespaces", at(b))).await;
            let message = if response.status == 403 {
                response.json()["message"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned()
            } else {
                String::new()
            };
            if message.contains("User \"frank\"")
                && !message.contains("workspace access not permitted")
            {
                Ok(())
            } else {
                Err(format!("{} {}", response.status, response.text()))
            }
        })
        .await;

    // The same CRD name with another scope in iso-b is its own type.
    let mut other = gadget_crd();
    other["spec"]["scope"] = json!("Namespaced");
    server.install_crd(b, &other).await;
    let response = admin.get(&gadgets(b)).await;
    assert_eq!(response.status, 200, "{}", response.text());
    assert!(
        item_names(&response.json()).is_empty(),
        "{}",
        response.text()
    );
    let response = admin.get(&format!("{}/g1", gadgets(a))).await;
    assert_eq!(response.status, 200, "{}", response.text());
}
