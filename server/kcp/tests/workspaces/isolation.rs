//! Sibling workspaces share nothing: types, objects and RBAC of one are invisible in the other.

use super::*;

fn gadget_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.iso.example.com"},
        "spec": {
            "group": "iso.example.com",
            "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget", "listKind": "GadgetList"},
            "scope": "Cluster",
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
            }],
        },
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn sibling_workspaces_are_isolated() {
    let server = SERVER.get().await;
    let ca = client_ca(&server);
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
    admin
        .create(
            &crbs(a),
            &binding(
                "ClusterRoleBinding",
                "frank-access",
                "system:kcp:workspace:access",
                "frank",
            ),
        )
        .await;
    wait_status("frank reads iso-a", &frank, &configmaps(a), 200).await;
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
    let crds = admin
        .get(&format!(
            "{}/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            at(b)
        ))
        .await;
    assert_eq!(crds.status, 200, "{}", crds.text());
    assert!(
        !item_names(&crds.json()).contains(&"gadgets.iso.example.com".to_owned()),
        "iso-b CRDs: {}",
        crds.text()
    );

    // Lists in iso-b do not show iso-a's objects.
    let namespaces = admin.get(&format!("{}/api/v1/namespaces", at(b))).await;
    assert_eq!(namespaces.status, 200, "{}", namespaces.text());
    assert!(
        !item_names(&namespaces.json()).contains(&"team-a".to_owned()),
        "iso-b namespaces: {}",
        namespaces.text()
    );
    let all = admin.get(&format!("{}/api/v1/configmaps", at(b))).await;
    assert_eq!(all.status, 200, "{}", all.text());
    assert!(
        !item_names(&all.json()).contains(&"only-in-a".to_owned()),
        "iso-b configmaps: {}",
        all.text()
    );
    let response = admin.get(&format!("{}/only-in-a", configmaps(b))).await;
    assert_eq!(response.status, 404, "{}", response.text());
    let bindings = admin.get(&crbs(b)).await;
    assert_eq!(bindings.status, 200, "{}", bindings.text());
    let names = item_names(&bindings.json());
    assert!(
        !names.contains(&"frank-view".to_owned()) && !names.contains(&"frank-access".to_owned()),
        "iso-b clusterrolebindings: {names:?}"
    );

    // RBAC of iso-a does not reach iso-b.
    let response = frank.get(&format!("{}/api/v1/namespaces", at(b))).await;
    let message = expect_status("frank in iso-b", &response, 403, "Forbidden");
    assert!(message.contains("access denied"), "{message}");
    // Even with access in iso-b, iso-a's view binding does not count there.
    admin
        .create(
            &crbs(b),
            &binding(
                "ClusterRoleBinding",
                "frank-access",
                "system:kcp:workspace:access",
                "frank",
            ),
        )
        .await;
    eventually("frank enters iso-b but may not list", || async {
        let response = frank.get(&format!("{}/api/v1/namespaces", at(b))).await;
        let message = if response.status == 403 {
            response.json()["message"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        } else {
            String::new()
        };
        if message.contains("User \"frank\"") && !message.contains("access denied") {
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
