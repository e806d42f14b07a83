//! A workspace's life: initializers holding it in Initializing, deletion of a subtree with all its
//! content, and what admission and path resolution refuse.

use super::*;

/// Waits until the Workspace `name` in `parent` is Initializing and scheduled; returns it.
async fn wait_initializing(admin: &Caller, parent: &str, name: &str) -> Value {
    let path = workspace_url(parent, name);
    SETTLED
        .eventually(
            &format!("workspace {parent}:{name} Initializing"),
            || async {
                let response = admin.get(&path).await;
                let object = (response.status == 200).then(|| response.json());
                match object {
                    Some(object)
                        if object["status"]["phase"] == "Initializing"
                            && object["spec"]["cluster"]
                                .as_str()
                                .is_some_and(|c| !c.is_empty()) =>
                    {
                        Ok(object)
                    }
                    _ => Err(format!("{} {}", response.status, response.text())),
                }
            },
        )
        .await
}

#[tokio::test(flavor = "multi_thread")]
async fn initializer_blocks_ready_until_removed() {
    let server = SERVER.get().await;
    let admin = Caller::admin(&server);
    ensure_gated_type(&admin).await;
    admin
        .create(
            &workspaces_in("root"),
            &workspace("gated-ws", Some(("root", "gated"))),
        )
        .await;
    let ws = "root:gated-ws";
    wait_initializing(&admin, "root", "gated-ws").await;

    // The built-in initializers (inherited from root:universal) finish; root:gated stays.
    let lc_path = logical_cluster_url(ws);
    SETTLED
        .eventually("only root:gated left", || async {
            let response = admin.get(&workspace_url("root", "gated-ws")).await;
            let object = response.json();
            if strings(&object["status"]["initializers"]) == ["root:gated"] {
                Ok(())
            } else {
                Err(response.text())
            }
        })
        .await;
    let namespaces = format!("{}/api/v1/namespaces", at(ws));
    let list = SETTLED
        .wait_status(
            "namespaces of the gated workspace",
            &admin,
            &namespaces,
            200,
        )
        .await;
    assert!(
        item_names(&list.json()).contains(&"default".to_owned()),
        "root:universal's initializer ran: {}",
        list.text()
    );
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let object = admin.get(&workspace_url("root", "gated-ws")).await.json();
        assert_eq!(object["status"]["phase"], "Initializing", "{object}");
        assert_eq!(
            object["metadata"]["labels"]["tenancy.kcp.io/phase"], "Initializing",
            "{object}"
        );
        assert!(
            strings(&object["status"]["initializers"]).contains(&"root:gated".to_owned()),
            "{object}"
        );
        let logical_cluster = admin.get(&lc_path).await.json();
        assert_eq!(
            logical_cluster["status"]["phase"], "Initializing",
            "{logical_cluster}"
        );
        let spec_initializers = strings(&logical_cluster["spec"]["initializers"]);
        assert!(
            spec_initializers.contains(&"root:gated".to_owned())
                && spec_initializers.contains(&"root:universal".to_owned()),
            "the type's and the inherited initializers: {logical_cluster}"
        );
    }

    // The initializer's controller (here: the admin) removes it from the LogicalCluster's status.
    let mut logical_cluster = admin.get(&lc_path).await.json();
    assert_eq!(
        logical_cluster["metadata"]["annotations"]["kcp.io/path"], ws,
        "{logical_cluster}"
    );
    let left: Vec<String> = strings(&logical_cluster["status"]["initializers"])
        .into_iter()
        .filter(|i| i != "root:gated")
        .collect();
    logical_cluster["status"]["initializers"] = json!(left);
    let response = admin
        .put(&format!("{lc_path}/status"), &logical_cluster)
        .await;
    assert_eq!(
        response.status,
        200,
        "removing root:gated: {}",
        response.text()
    );
    let ready = wait_phase(&admin, "root", "gated-ws", "Ready").await;
    assert!(
        strings(&ready["status"]["initializers"]).is_empty(),
        "{ready}"
    );
    // The phase label follows the status (a separate write).
    SETTLED
        .eventually("phase label Ready", || async {
            let object = admin.get(&workspace_url("root", "gated-ws")).await.json();
            if object["metadata"]["labels"]["tenancy.kcp.io/phase"] == "Ready" {
                Ok(())
            } else {
                Err(object.to_string())
            }
        })
        .await;
    // The Workspace is Ready as soon as its LogicalCluster has no initializer left (as
    // upstream's); the LogicalCluster's own phase follows in the next write of its controller.
    SETTLED
        .eventually("LogicalCluster Ready", || async {
            let logical_cluster = admin.get(&lc_path).await.json();
            if logical_cluster["status"]["phase"] == "Ready" {
                Ok(())
            } else {
                Err(logical_cluster.to_string())
            }
        })
        .await;
    // A Ready workspace takes children.
    create_ready(&admin, &admin, ws, "child", Some(("root", "universal"))).await;
}

/// `caller` may not create the Workspace `name` of type `type_ref` in `parent` (403); returns the
/// message.
async fn refused(
    caller: &Caller,
    what: &str,
    parent: &str,
    name: &str,
    type_ref: (&str, &str),
) -> String {
    let response = caller
        .post(&workspaces_in(parent), &workspace(name, Some(type_ref)))
        .await;
    expect_forbidden(what, &response)
}

/// Deletes the Workspace `name` in `parent` (accepted: 200 or 202) and waits until it is gone.
async fn delete_workspace(admin: &Caller, parent: &str, name: &str) {
    let path = workspace_url(parent, name);
    let response = admin.delete(&path).await;
    assert!(
        response.status == 200 || response.status == 202,
        "deleting {parent}:{name}: {} {}",
        response.status,
        response.text()
    );
    let what = format!("Workspace {parent}:{name} gone");
    SETTLED.wait_status(&what, admin, &path, 404).await;
}

/// The logical clusters a wildcard list still has objects in, among `clusters`.
async fn leftovers(
    admin: &Caller,
    resource: &str,
    clusters: &[String],
) -> Result<Vec<String>, String> {
    let response = admin.get(&format!("/clusters/*{resource}")).await;
    if response.status == 404 {
        return Ok(Vec::new());
    }
    if response.status != 200 {
        return Err(format!(
            "GET /clusters/*{resource}: {} {}",
            response.status,
            response.text()
        ));
    }
    let list = response.json();
    Ok(list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|item| {
            let cluster = item["metadata"]["annotations"]["kcp.io/cluster"].as_str()?;
            clusters.iter().any(|c| c == cluster).then(|| {
                format!(
                    "{resource} {cluster}/{}/{}",
                    item["metadata"]["namespace"].as_str().unwrap_or_default(),
                    item["metadata"]["name"].as_str().unwrap_or_default()
                )
            })
        })
        .collect())
}

fn widget_crd() -> Value {
    let schema = json!({"type": "object", "properties": {
        "spec": {"type": "object", "properties": {"size": {"type": "integer"}}},
    }});
    crd("del.example.com", "Widget", "Namespaced", schema)
}

#[tokio::test(flavor = "multi_thread")]
async fn deletion_removes_all_content() {
    let server = SERVER.get().await;
    let admin = Caller::admin(&server);
    let del = create_ready(&admin, &admin, "root", "del", None).await;
    let a = create_ready(&admin, &admin, "root:del", "a", None).await;
    let b = create_ready(
        &admin,
        &admin,
        "root:del:a",
        "b",
        Some(("root", "universal")),
    )
    .await;
    let clusters: Vec<String> = [&del, &a, &b]
        .iter()
        .map(|ws| ws["spec"]["cluster"].as_str().unwrap().to_owned())
        .collect();

    // Content at every level; a CRD and a custom object in b.
    for path in ["root:del", "root:del:a", "root:del:a:b"] {
        admin
            .create(
                &format!("{}/api/v1/namespaces", at(path)),
                &namespace("stuff"),
            )
            .await;
        admin
            .create(
                &format!("{}/api/v1/namespaces/stuff/configmaps", at(path)),
                &config_map("cm"),
            )
            .await;
    }
    server.install_crd("root:del:a:b", &widget_crd()).await;
    let widget = json!({
        "apiVersion": "del.example.com/v1",
        "kind": "Widget",
        "metadata": {"name": "w1"},
        "spec": {"size": 3},
    });
    let widgets = format!(
        "{}/apis/del.example.com/v1/namespaces/stuff/widgets",
        at("root:del:a:b")
    );
    admin.create(&widgets, &widget).await;
    let before = leftovers(&admin, "/api/v1/configmaps", &clusters)
        .await
        .unwrap();
    assert!(
        before.len() >= 3,
        "wildcard list sees the configmaps first: {before:?}"
    );

    // The Workspace goes, then its paths, then everything in the three clusters.
    delete_workspace(&admin, "root", "del").await;
    for path in ["root:del", "root:del:a", "root:del:a:b"] {
        let response = SETTLED
            .wait_status(
                &format!("{path} gone"),
                &admin,
                &format!("{}/api", at(path)),
                404,
            )
            .await;
        let message = expect_status(&format!("GET {path}"), &response, 404, "NotFound");
        assert!(message.contains("not found"), "{message}");
    }
    let resources = [
        "/api/v1/configmaps",
        "/api/v1/namespaces",
        "/api/v1/serviceaccounts",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        "/apis/core.kcp.io/v1alpha1/logicalclusters",
        "/apis/tenancy.kcp.io/v1alpha1/workspaces",
        "/apis/del.example.com/v1/widgets",
    ];
    SETTLED
        .eventually("no content left in the deleted clusters", || async {
            let mut left = Vec::new();
            for resource in resources {
                left.extend(leftovers(&admin, resource, &clusters).await?);
            }
            if left.is_empty() {
                Ok(())
            } else {
                Err(format!("{left:?}"))
            }
        })
        .await;
    // Nothing of a deleted cluster answers under its name either.
    for cluster in &clusters {
        let response = admin
            .get(&format!("{}/api/v1/namespaces", at(cluster)))
            .await;
        let names = if response.status == 200 {
            item_names(&response.json())
        } else {
            Vec::new()
        };
        assert!(
            names.is_empty(),
            "namespaces left in {cluster}: {}",
            response.text()
        );
    }
    // The name is free again: a new workspace of that name is a new, empty logical cluster.
    let again = create_ready(&admin, &admin, "root", "del", None).await;
    let cluster = again["spec"]["cluster"].as_str().unwrap_or_default();
    assert!(
        !clusters.iter().any(|old| old == cluster),
        "re-created del reuses {cluster}"
    );
    let response = admin
        .get(&format!("{}/api/v1/namespaces/stuff", at("root:del")))
        .await;
    assert_eq!(
        response.status,
        404,
        "old content in the new del: {}",
        response.text()
    );
    let response = admin.get(&workspaces_in("root:del")).await;
    assert_eq!(response.status, 200, "{}", response.text());
    assert!(
        item_names(&response.json()).is_empty(),
        "old children: {}",
        response.text()
    );
    // root itself is untouched.
    let response = admin
        .get(&format!("{}/api/v1/namespaces/default", at("root")))
        .await;
    assert_eq!(response.status, 200, "{}", response.text());
}

#[tokio::test(flavor = "multi_thread")]
async fn type_constraints_and_bad_input() {
    let server = SERVER.get().await;
    let ca = server.client_ca();
    let admin = Caller::admin(&server);
    let root_workspaces = workspaces_in("root");

    // An unknown type.
    let message = refused(
        &admin,
        "unknown type",
        "root",
        "t-unknown",
        ("root", "nosuchtype"),
    )
    .await;
    assert!(
        message.contains("nosuchtype") && message.contains("cannot be resolved"),
        "unknown type: {message}"
    );

    // A type that may only live under teams.
    let under_teams = workspace_type(
        "under-teams",
        json!({
            "extend": {"with": [{"name": "universal", "path": "root"}]},
            "limitAllowedParents": {"types": [{"name": "team", "path": "root"}]},
        }),
    );
    admin
        .ensure(
            &format!("{}{TENANCY_V1}/workspacetypes", at("root")),
            &under_teams,
        )
        .await;
    let message = refused(
        &admin,
        "disallowed parent",
        "root",
        "t-parent",
        ("root", "under-teams"),
    )
    .await;
    assert!(
        message.contains("root:team"),
        "disallowed parent: {message}"
    );
    // organization allows only universal children: a team type is fine (it extends universal),
    // a `home` is not.
    create_ready(&admin, &admin, "root", "t-org", None).await;
    refused(
        &admin,
        "home under an organization",
        "root:t-org",
        "h",
        ("root", "home"),
    )
    .await;
    // A workspace type somebody may not `use`.
    let erin = Caller::user(&server, &ca, "erin");
    allow_workspaces_in_root(&admin, "t-creator", &["create", "get"], "erin").await;
    ensure_gated_type(&admin).await;
    let message = SETTLED
        .eventually("erin may create workspaces but not use gated", || async {
            let response = erin
                .post(
                    &root_workspaces,
                    &workspace("erins", Some(("root", "gated"))),
                )
                .await;
            let text = response.text();
            if response.status == 403 && text.contains("use") && text.contains("root:gated") {
                Ok(text)
            } else {
                Err(format!("{} {text}", response.status))
            }
        })
        .await;
    assert!(message.contains("missing verb='use'"), "{message}");

    // Invalid names.
    for name in ["Bad_Name", "-dash", "a.b"] {
        let response = admin.post(&root_workspaces, &workspace(name, None)).await;
        expect_status(
            &format!("workspace name {name:?}"),
            &response,
            422,
            "Invalid",
        );
    }

    // Inside a workspace that is not Ready yet.
    admin
        .create(
            &root_workspaces,
            &workspace("held", Some(("root", "gated"))),
        )
        .await;
    wait_initializing(&admin, "root", "held").await;
    refused(
        &admin,
        "a child of an Initializing workspace",
        "root:held",
        "early",
        ("root", "universal"),
    )
    .await;

    // A workspace still initializing can be deleted.
    delete_workspace(&admin, "root", "held").await;
    SETTLED
        .wait_status(
            "root:held gone",
            &admin,
            &format!("{}/api", at("root:held")),
            404,
        )
        .await;

    // root's LogicalCluster stays.
    let response = admin.delete(&logical_cluster_url("root")).await;
    expect_forbidden("deleting root's LogicalCluster", &response);
    let response = admin.get(&logical_cluster_url("root")).await;
    assert_eq!(response.status, 200, "{}", response.text());
    assert_eq!(response.json()["status"]["phase"], "Ready");

    // Paths.
    let response = admin.get("/clusters/root:Bad_Seg/api").await;
    expect_status("illegal path segment", &response, 400, "BadRequest");
    let response = admin.get("/clusters/root:missing/api").await;
    let message = expect_status("unknown path", &response, 404, "NotFound");
    assert!(
        message.contains("workspaces.tenancy.kcp.io \"root:missing\" not found"),
        "unknown path: {message}"
    );
    let response = admin
        .get("/clusters/root:missing:deeper/api/v1/namespaces")
        .await;
    let message = expect_status("unknown deeper path", &response, 404, "NotFound");
    assert!(
        message.contains("\"root:missing:deeper\" not found"),
        "unknown deeper path: {message}"
    );
}
