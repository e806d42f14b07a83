//! The namespace controller: deletion empties the namespace, then drops its `kubernetes` finalizer.

use kcp_registry::store::{DeleteOptions, Deleted};
use serde_json::json;

use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_namespace_is_emptied_then_finalized() {
    let store = store().await;
    let controllers = Controllers::new();
    controllers.start(|stop| kcp_controllers::namespace::run(store.clone(), stop));
    let c = cluster("tenant");
    let namespaces = builtin(&store, "", "v1", "namespaces");
    let configmaps = builtin(&store, "", "v1", "configmaps");
    let secrets = builtin(&store, "", "v1", "secrets");

    create_namespace(&store, &c, "doomed").await;
    create_namespace(&store, &c, "kept").await;
    // A second spec finalizer keeps this one around after the controller is done with it.
    store
        .create(
            &namespaces,
            at(&c, None),
            json!({"metadata": {"name": "held"}, "spec": {"finalizers": ["example.com/keep"]}}),
            false,
        )
        .await
        .unwrap();
    for namespace in ["doomed", "kept", "held"] {
        for name in ["one", "two"] {
            store
                .create(
                    &configmaps,
                    at(&c, Some(namespace)),
                    json!({"metadata": {"name": name}}),
                    false,
                )
                .await
                .unwrap();
        }
        store
            .create(
                &secrets,
                at(&c, Some(namespace)),
                json!({"metadata": {"name": "secret"}}),
                false,
            )
            .await
            .unwrap();
    }

    for namespace in ["doomed", "held"] {
        let deleted = store
            .delete(
                &namespaces,
                at(&c, None),
                namespace,
                &DeleteOptions::default(),
            )
            .await
            .unwrap();
        assert!(matches!(deleted, Deleted::Pending(_)), "{deleted:?}");
    }

    eventually("namespace doomed gone", || {
        absent(&store, &namespaces, at(&c, None), "doomed")
    })
    .await;
    let held = eventually("only example.com/keep left on namespace held", || async {
        let held = get(&store, &namespaces, at(&c, None), "held")
            .await
            .map_err(|e| format!("{e:?}"))?;
        match held["spec"]["finalizers"] == json!(["example.com/keep"]) {
            true => Ok(held),
            false => Err(held.to_string()),
        }
    })
    .await;
    assert_eq!(held["status"]["phase"], "Terminating", "{held}");

    for namespace in ["doomed", "held"] {
        assert!(
            names(&store, &configmaps, &c, Some(namespace))
                .await
                .is_empty()
        );
        assert!(
            names(&store, &secrets, &c, Some(namespace))
                .await
                .is_empty()
        );
    }
    assert_eq!(
        names(&store, &configmaps, &c, Some("kept")).await,
        ["one", "two"]
    );
    assert_eq!(names(&store, &secrets, &c, Some("kept")).await, ["secret"]);
    let kept = get(&store, &namespaces, at(&c, None), "kept")
        .await
        .unwrap();
    assert_eq!(kept["status"]["phase"], "Active");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn content_with_a_finalizer_holds_its_namespace() {
    let store = store().await;
    let controllers = Controllers::new();
    controllers.start(|stop| kcp_controllers::namespace::run(store.clone(), stop));
    let c = cluster("tenant");
    let namespaces = builtin(&store, "", "v1", "namespaces");
    let configmaps = builtin(&store, "", "v1", "configmaps");

    create_namespace(&store, &c, "busy").await;
    let here = at(&c, Some("busy"));
    store
        .create(
            &configmaps,
            here,
            json!({"metadata": {"name": "stubborn", "finalizers": ["example.com/hold"]}}),
            false,
        )
        .await
        .unwrap();
    store
        .create(
            &configmaps,
            here,
            json!({"metadata": {"name": "easy"}}),
            false,
        )
        .await
        .unwrap();
    store
        .delete(&namespaces, at(&c, None), "busy", &DeleteOptions::default())
        .await
        .unwrap();

    eventually("easy deleted, stubborn marked", || async {
        let stubborn = get(&store, &configmaps, here, "stubborn")
            .await
            .map_err(|e| format!("{e:?}"))?;
        let left = names(&store, &configmaps, &c, Some("busy")).await;
        match stubborn["metadata"]["deletionTimestamp"].is_string() && left == ["stubborn"] {
            true => Ok(()),
            false => Err(format!("{left:?} {stubborn}")),
        }
    })
    .await;
    // The controller keeps trying; the namespace stays with its finalizer meanwhile.
    let busy = get(&store, &namespaces, at(&c, None), "busy")
        .await
        .unwrap();
    assert_eq!(busy["spec"]["finalizers"], json!(["kubernetes"]), "{busy}");

    let release = |current: &serde_json::Value| {
        let mut new = current.clone();
        new["metadata"]["finalizers"] = json!([]);
        Ok(new)
    };
    store
        .update(&configmaps, here, "stubborn", &release, None, false)
        .await
        .unwrap();
    eventually("namespace busy gone", || {
        absent(&store, &namespaces, at(&c, None), "busy")
    })
    .await;
}
