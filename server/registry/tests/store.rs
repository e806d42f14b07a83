//! The generic REST store's object lifecycle, in process, on the real embedded store kept in
//! memory: what `create`, `get`, `update` and `delete` do to built-in ConfigMaps and Namespaces
//! (system metadata, resourceVersion preconditions and retries, no-op updates, finalizers, namespace
//! rules, dry runs) and which writes `AfterWrite` hooks see. Failures are asserted as the HTTP code
//! and `Status` reason kube-apiserver answers with, since that is what clients branch on.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};

use kcp_apimachinery::status::OPTIMISTIC_LOCK_ERROR_MSG;
use kcp_apimachinery::{ApiError, StatusReason};
use kcp_registry::hooks::{AfterWrite, WriteKind, Written};
use kcp_registry::storage::ObjectStore;
use kcp_registry::store::{DeleteOptions, Deleted, Location, RestStore};
use kcp_registry::{LogicalClusterName, Registry, ResourceType};
use serde_json::{Value, json};

/// A RestStore over a fresh in-memory store, with the two types these tests use.
struct Fixture {
    store: RestStore,
    cluster: LogicalClusterName,
    configmaps: Arc<ResourceType>,
    namespaces: Arc<ResourceType>,
}

impl Fixture {
    async fn new() -> Fixture {
        let storage = kcp_storage::open_in_memory().await.unwrap();
        let registry = Arc::new(Registry::new());
        let configmaps = registry.builtin_type("", "v1", "configmaps").unwrap();
        let namespaces = registry.builtin_type("", "v1", "namespaces").unwrap();
        Fixture {
            store: RestStore::new(ObjectStore::new(storage, "/registry"), registry),
            cluster: LogicalClusterName::parse("test-cluster").unwrap(),
            configmaps,
            namespaces,
        }
    }

    /// The same fixture with its store reporting writes to a new recorder.
    fn recorded(self) -> (Fixture, Arc<Recorder>) {
        let recorder = Arc::new(Recorder::default());
        let store = self.store.clone().with_hook(recorder.clone());
        (Fixture { store, ..self }, recorder)
    }

    fn cluster_scoped(&self) -> Location<'_> {
        Location {
            cluster: &self.cluster,
            namespace: None,
        }
    }

    fn in_namespace<'a>(&'a self, namespace: &'a str) -> Location<'a> {
        Location {
            cluster: &self.cluster,
            namespace: Some(namespace),
        }
    }

    async fn create_namespace(&self, name: &str) -> Value {
        self.store
            .create(
                &self.namespaces,
                self.cluster_scoped(),
                json!({"metadata": {"name": name}}),
                false,
            )
            .await
            .unwrap()
    }

    async fn create_configmap(&self, namespace: &str, object: Value) -> Result<Value, ApiError> {
        self.store
            .create(
                &self.configmaps,
                self.in_namespace(namespace),
                object,
                false,
            )
            .await
    }

    async fn get_configmap(&self, namespace: &str, name: &str) -> Result<Value, ApiError> {
        self.store
            .get(&self.configmaps, self.in_namespace(namespace), name)
            .await
            .map(|stored| stored.object)
    }

    async fn update_configmap(
        &self,
        namespace: &str,
        name: &str,
        update: impl Fn(&Value) -> Value + Send + Sync,
        dry_run: bool,
    ) -> Result<Value, ApiError> {
        let update = |current: &Value| Ok(update(current));
        self.store
            .update(
                &self.configmaps,
                self.in_namespace(namespace),
                name,
                &update,
                None,
                dry_run,
            )
            .await
    }

    async fn delete_configmap(
        &self,
        namespace: &str,
        name: &str,
        options: &DeleteOptions,
    ) -> Result<Deleted, ApiError> {
        self.store
            .delete(
                &self.configmaps,
                self.in_namespace(namespace),
                name,
                options,
            )
            .await
    }
}

/// One write as a hook saw it: (resource, namespace, name, kind).
type Write = (String, Option<String>, String, WriteKind);

/// Every write a hook saw.
#[derive(Default)]
struct Recorder(Mutex<Vec<Write>>);

impl AfterWrite for Recorder {
    fn after_write(&self, written: &Written<'_>) {
        self.0.lock().unwrap().push((
            written.rt.plural.clone(),
            written.namespace.map(str::to_string),
            written.name.to_string(),
            written.kind,
        ));
    }
}

impl Recorder {
    fn take(&self) -> Vec<Write> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

fn configmap(name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data})
}

fn resource_version(object: &Value) -> &str {
    object["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or_else(|| panic!("no resourceVersion: {object}"))
}

fn assert_status(error: &ApiError, code: u16, reason: StatusReason) {
    assert_eq!(
        (error.code, error.reason),
        (code, reason),
        "unexpected status: {error:?}"
    );
}

#[tokio::test]
async fn create_fills_system_metadata_and_generates_names() {
    let f = Fixture::new().await;
    f.create_namespace("default").await;
    let object = json!({"metadata": {"generateName": "settings-"}, "data": {"a": "1"}});
    let created = f.create_configmap("default", object).await.unwrap();

    let name = created["metadata"]["name"].as_str().unwrap();
    assert!(
        name.starts_with("settings-") && name.len() > "settings-".len(),
        "generated name {name:?}"
    );
    assert_eq!(created["apiVersion"], "v1");
    assert_eq!(created["kind"], "ConfigMap");
    assert_eq!(created["metadata"]["namespace"], "default");
    assert!(
        created["metadata"]["uid"]
            .as_str()
            .is_some_and(|uid| !uid.is_empty()),
        "{created}"
    );
    let timestamp = created["metadata"]["creationTimestamp"].as_str().unwrap();
    assert!(timestamp.parse::<jiff::Timestamp>().is_ok(), "{timestamp}");
    assert!(resource_version(&created).parse::<i64>().unwrap() > 0);

    let read = f.get_configmap("default", name).await.unwrap();
    assert_eq!(read["metadata"]["uid"], created["metadata"]["uid"]);
    assert_eq!(resource_version(&read), resource_version(&created));
    assert_eq!(read["data"], json!({"a": "1"}));

    // The same name again is taken.
    let again = f
        .create_configmap("default", configmap(name, json!({})))
        .await
        .unwrap_err();
    assert_status(&again, 409, StatusReason::AlreadyExists);
}

#[tokio::test]
async fn create_refuses_a_resource_version_and_a_foreign_namespace() {
    let f = Fixture::new().await;
    f.create_namespace("default").await;
    let mut with_rv = configmap("pinned", json!({}));
    with_rv["metadata"]["resourceVersion"] = json!("5");
    let error = f.create_configmap("default", with_rv).await.unwrap_err();
    assert_status(&error, 400, StatusReason::BadRequest);
    assert!(error.message.contains("resourceVersion"), "{error:?}");

    let mut elsewhere = configmap("elsewhere", json!({}));
    elsewhere["metadata"]["namespace"] = json!("other");
    let error = f.create_configmap("default", elsewhere).await.unwrap_err();
    assert_status(&error, 400, StatusReason::BadRequest);
    assert!(
        error
            .message
            .contains("does not match the namespace sent on the request"),
        "{error:?}"
    );

    for name in ["pinned", "elsewhere"] {
        let error = f.get_configmap("default", name).await.unwrap_err();
        assert_status(&error, 404, StatusReason::NotFound);
    }
}

#[tokio::test]
async fn objects_of_one_logical_cluster_are_invisible_in_another() {
    let f = Fixture::new().await;
    f.create_namespace("default").await;
    f.create_configmap("default", configmap("mine", json!({})))
        .await
        .unwrap();
    let other = LogicalClusterName::parse("other-cluster").unwrap();
    let at = Location {
        cluster: &other,
        namespace: Some("default"),
    };
    let error = f.store.get(&f.configmaps, at, "mine").await.unwrap_err();
    assert_status(&error, 404, StatusReason::NotFound);
}

#[tokio::test]
async fn update_with_a_stale_resource_version_is_a_conflict() {
    let f = Fixture::new().await;
    f.create_namespace("default").await;
    let created = f
        .create_configmap("default", configmap("cm", json!({"v": "1"})))
        .await
        .unwrap();
    let stale = created.clone();
    let second = f
        .update_configmap(
            "default",
            "cm",
            |current| {
                let mut new = current.clone();
                new["data"]["v"] = json!("2");
                new
            },
            false,
        )
        .await
        .unwrap();
    assert_ne!(resource_version(&second), resource_version(&created));

    // A PUT of the first version, resourceVersion included: the client lost the race.
    let error = f
        .update_configmap(
            "default",
            "cm",
            |_| {
                let mut new = stale.clone();
                new["data"]["v"] = json!("3");
                new
            },
            false,
        )
        .await
        .unwrap_err();
    assert_status(&error, 409, StatusReason::Conflict);
    assert!(
        error.message.contains(OPTIMISTIC_LOCK_ERROR_MSG),
        "{error:?}"
    );
    assert_eq!(
        error.details.as_ref().and_then(|d| d.name.as_deref()),
        Some("cm")
    );
    let stored = f.get_configmap("default", "cm").await.unwrap();
    assert_eq!(stored["data"]["v"], "2");
    assert_eq!(resource_version(&stored), resource_version(&second));

    // The same body without a resourceVersion is an unconditional update of what is stored now.
    let forced = f
        .update_configmap(
            "default",
            "cm",
            |_| {
                let mut new = stale.clone();
                new["metadata"]
                    .as_object_mut()
                    .unwrap()
                    .remove("resourceVersion");
                new["data"]["v"] = json!("3");
                new
            },
            false,
        )
        .await
        .unwrap();
    assert_eq!(forced["data"]["v"], "3");
    assert!(
        resource_version(&forced).parse::<i64>().unwrap()
            > resource_version(&second).parse::<i64>().unwrap()
    );
    // System fields the body left out come from the stored object.
    assert_eq!(forced["metadata"]["uid"], created["metadata"]["uid"]);
    assert_eq!(
        forced["metadata"]["creationTimestamp"],
        created["metadata"]["creationTimestamp"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_unconditional_updates_are_retried_against_the_current_state() {
    let f = Arc::new(Fixture::new().await);
    f.create_namespace("default").await;
    f.create_configmap("default", configmap("counter", json!({"n": "0"})))
        .await
        .unwrap();
    // Each writer increments what it reads; a lost compare-and-swap is retried on the new state,
    // so no increment is lost and none fails (fewer writers than the store's retries).
    const WRITERS: usize = 5;
    let writers: Vec<_> = (0..WRITERS)
        .map(|_| {
            let f = f.clone();
            tokio::spawn(async move {
                f.update_configmap(
                    "default",
                    "counter",
                    |current| {
                        let n: usize = current["data"]["n"].as_str().unwrap().parse().unwrap();
                        let mut new = current.clone();
                        new["metadata"]
                            .as_object_mut()
                            .unwrap()
                            .remove("resourceVersion");
                        new["data"]["n"] = json!((n + 1).to_string());
                        new
                    },
                    false,
                )
                .await
            })
        })
        .collect();
    for writer in writers {
        writer.await.unwrap().unwrap();
    }
    let stored = f.get_configmap("default", "counter").await.unwrap();
    assert_eq!(stored["data"]["n"], WRITERS.to_string());
}

#[tokio::test]
async fn a_no_op_update_keeps_the_resource_version_and_runs_no_hook() {
    let (f, recorder) = Fixture::new().await.recorded();
    f.create_namespace("default").await;
    let created = f
        .create_configmap("default", configmap("same", json!({"k": "v"})))
        .await
        .unwrap();
    recorder.take();

    let unchanged = f
        .update_configmap("default", "same", Value::clone, false)
        .await
        .unwrap();
    assert_eq!(resource_version(&unchanged), resource_version(&created));
    // A PUT of the object as read, resourceVersion and all, changes nothing either.
    let put = f
        .update_configmap("default", "same", |_| created.clone(), false)
        .await
        .unwrap();
    assert_eq!(resource_version(&put), resource_version(&created));
    assert_eq!(
        f.store
            .objects()
            .current_revision()
            .await
            .unwrap()
            .to_string(),
        resource_version(&created),
        "nothing was written"
    );
    assert!(recorder.take().is_empty());
}

#[tokio::test]
async fn finalizers_hold_deletion_until_removed() {
    let f = Fixture::new().await;
    f.create_namespace("default").await;
    let mut held = configmap("held", json!({}));
    held["metadata"]["finalizers"] = json!(["example.com/hold"]);
    f.create_configmap("default", held).await.unwrap();

    let pending = match f
        .delete_configmap("default", "held", &DeleteOptions::default())
        .await
        .unwrap()
    {
        Deleted::Pending(object) => object,
        Deleted::Gone(object) => panic!("deleted despite its finalizer: {object}"),
    };
    assert!(
        pending["metadata"]["deletionTimestamp"].is_string(),
        "{pending}"
    );
    assert_eq!(pending["metadata"]["deletionGracePeriodSeconds"], 0);
    let stored = f.get_configmap("default", "held").await.unwrap();
    assert_eq!(
        stored["metadata"]["deletionTimestamp"],
        pending["metadata"]["deletionTimestamp"]
    );
    assert_eq!(
        stored["metadata"]["finalizers"],
        json!(["example.com/hold"])
    );

    // Deleting again changes nothing; adding a finalizer while being deleted is refused.
    assert!(matches!(
        f.delete_configmap("default", "held", &DeleteOptions::default())
            .await
            .unwrap(),
        Deleted::Pending(_)
    ));
    let error = f
        .update_configmap(
            "default",
            "held",
            |current| {
                let mut new = current.clone();
                new["metadata"]["finalizers"] = json!(["example.com/hold", "example.com/more"]);
                new
            },
            false,
        )
        .await
        .unwrap_err();
    assert_status(&error, 422, StatusReason::Invalid);

    // Removing the last finalizer finishes the deletion.
    f.update_configmap(
        "default",
        "held",
        |current| {
            let mut new = current.clone();
            new["metadata"]["finalizers"] = json!([]);
            new
        },
        false,
    )
    .await
    .unwrap();
    let error = f.get_configmap("default", "held").await.unwrap_err();
    assert_status(&error, 404, StatusReason::NotFound);
}

#[tokio::test]
async fn delete_checks_existence_and_preconditions() {
    let f = Fixture::new().await;
    f.create_namespace("default").await;
    let error = f
        .delete_configmap("default", "absent", &DeleteOptions::default())
        .await
        .unwrap_err();
    assert_status(&error, 404, StatusReason::NotFound);

    let created = f
        .create_configmap("default", configmap("guarded", json!({})))
        .await
        .unwrap();
    let wrong_uid = DeleteOptions {
        precondition_uid: Some("not-the-uid".into()),
        ..DeleteOptions::default()
    };
    let error = f
        .delete_configmap("default", "guarded", &wrong_uid)
        .await
        .unwrap_err();
    assert_status(&error, 409, StatusReason::Conflict);
    let wrong_rv = DeleteOptions {
        precondition_resource_version: Some("1".into()),
        ..DeleteOptions::default()
    };
    let error = f
        .delete_configmap("default", "guarded", &wrong_rv)
        .await
        .unwrap_err();
    assert_status(&error, 409, StatusReason::Conflict);
    f.get_configmap("default", "guarded").await.unwrap();

    let right = DeleteOptions {
        precondition_uid: created["metadata"]["uid"].as_str().map(str::to_string),
        precondition_resource_version: Some(resource_version(&created).to_string()),
        ..DeleteOptions::default()
    };
    let gone = f
        .delete_configmap("default", "guarded", &right)
        .await
        .unwrap();
    assert!(matches!(gone, Deleted::Gone(_)), "{gone:?}");
    let error = f.get_configmap("default", "guarded").await.unwrap_err();
    assert_status(&error, 404, StatusReason::NotFound);
}

#[tokio::test]
async fn content_needs_an_existing_namespace_that_is_not_terminating() {
    let f = Fixture::new().await;
    let error = f
        .create_configmap("missing", configmap("cm", json!({})))
        .await
        .unwrap_err();
    assert_status(&error, 404, StatusReason::NotFound);
    let details = error.details.as_ref().unwrap();
    assert_eq!(
        (details.kind.as_deref(), details.name.as_deref()),
        (Some("namespaces"), Some("missing"))
    );

    // A namespace is held by its `kubernetes` finalizer and is Terminating once deleted.
    let namespace = f.create_namespace("doomed").await;
    assert_eq!(namespace["status"]["phase"], "Active");
    assert_eq!(namespace["spec"]["finalizers"], json!(["kubernetes"]));
    let terminating = match f
        .store
        .delete(
            &f.namespaces,
            f.cluster_scoped(),
            "doomed",
            &DeleteOptions::default(),
        )
        .await
        .unwrap()
    {
        Deleted::Pending(object) => object,
        Deleted::Gone(object) => panic!("namespace deleted with its finalizer: {object}"),
    };
    assert_eq!(terminating["status"]["phase"], "Terminating");

    let error = f
        .create_configmap("doomed", configmap("late", json!({})))
        .await
        .unwrap_err();
    assert_status(&error, 403, StatusReason::Forbidden);
    assert!(
        error.message.contains("because it is being terminated"),
        "{error:?}"
    );
    let causes = &error.details.as_ref().unwrap().causes;
    assert!(
        causes.iter().any(|c| c.reason == "NamespaceTerminating"),
        "{causes:?}"
    );
}

#[tokio::test]
async fn dry_runs_write_nothing_and_run_no_hook() {
    let (f, recorder) = Fixture::new().await.recorded();
    f.create_namespace("default").await;
    recorder.take();
    let before = f.store.objects().current_revision().await.unwrap();

    let answered = f
        .store
        .create(
            &f.configmaps,
            f.in_namespace("default"),
            configmap("dry", json!({"a": "1"})),
            true,
        )
        .await
        .unwrap();
    assert_eq!(answered["metadata"]["name"], "dry");
    assert!(answered["metadata"]["uid"].is_string(), "{answered}");
    let error = f.get_configmap("default", "dry").await.unwrap_err();
    assert_status(&error, 404, StatusReason::NotFound);

    f.create_configmap("default", configmap("real", json!({"a": "1"})))
        .await
        .unwrap();
    recorder.take();
    let after_create = f.store.objects().current_revision().await.unwrap();
    let answered = f
        .update_configmap(
            "default",
            "real",
            |current| {
                let mut new = current.clone();
                new["data"]["a"] = json!("2");
                new
            },
            true,
        )
        .await
        .unwrap();
    assert_eq!(answered["data"]["a"], "2");
    assert_eq!(
        f.get_configmap("default", "real").await.unwrap()["data"]["a"],
        "1"
    );
    let dry_delete = DeleteOptions {
        dry_run: true,
        ..DeleteOptions::default()
    };
    assert!(matches!(
        f.delete_configmap("default", "real", &dry_delete)
            .await
            .unwrap(),
        Deleted::Gone(_)
    ));
    f.get_configmap("default", "real").await.unwrap();

    assert_eq!(before + 1, after_create, "only the real create was written");
    assert_eq!(
        f.store.objects().current_revision().await.unwrap(),
        after_create
    );
    assert!(recorder.take().is_empty());
}

#[tokio::test]
async fn hooks_see_every_write_that_took_effect() {
    let (f, recorder) = Fixture::new().await.recorded();
    f.create_namespace("default").await;
    f.create_configmap("default", configmap("watched", json!({})))
        .await
        .unwrap();
    f.update_configmap(
        "default",
        "watched",
        |current| {
            let mut new = current.clone();
            new["data"] = json!({"changed": "yes"});
            new
        },
        false,
    )
    .await
    .unwrap();
    // A failed write is not one.
    let error = f
        .create_configmap("default", configmap("watched", json!({})))
        .await
        .unwrap_err();
    assert_status(&error, 409, StatusReason::AlreadyExists);
    f.delete_configmap("default", "watched", &DeleteOptions::default())
        .await
        .unwrap();

    let cm = |kind| {
        (
            "configmaps".to_string(),
            Some("default".to_string()),
            "watched".to_string(),
            kind,
        )
    };
    assert_eq!(
        recorder.take(),
        [
            (
                "namespaces".to_string(),
                None,
                "default".to_string(),
                WriteKind::Created
            ),
            cm(WriteKind::Created),
            cm(WriteKind::Updated),
            cm(WriteKind::Deleted),
        ]
    );
}

#[tokio::test]
async fn watches_decode_the_previous_object_only_when_asked() {
    use futures::StreamExt;
    let f = Fixture::new().await;
    f.create_namespace("default").await;
    let from = f.store.objects().current_revision().await.unwrap() + 1;
    let prefix = f
        .store
        .keys(&f.configmaps)
        .scope(&f.cluster, Some("default"));
    let mut with_previous = Box::pin(f.store.objects().watch(&prefix, from).await.unwrap());
    let mut current = Box::pin(
        f.store
            .objects()
            .watch_current(&prefix, from)
            .await
            .unwrap(),
    );
    f.create_configmap("default", configmap("w", json!({"v": "1"})))
        .await
        .unwrap();
    f.update_configmap(
        "default",
        "w",
        |old| {
            let mut new = old.clone();
            new["data"]["v"] = json!("2");
            new
        },
        false,
    )
    .await
    .unwrap();
    f.delete_configmap("default", "w", &DeleteOptions::default())
        .await
        .unwrap();

    for (step, data, previous) in [
        ("create", "1", None),
        ("update", "2", Some("1")),
        ("delete", "2", Some("2")),
    ] {
        let full = with_previous.next().await.unwrap().unwrap();
        let lean = current.next().await.unwrap().unwrap();
        assert_eq!(full.kind, lean.kind, "{step}");
        assert_eq!(full.revision, lean.revision, "{step}");
        assert_eq!(full.object, lean.object, "{step}");
        assert_eq!(lean.object["data"]["v"], data, "{step}");
        assert_eq!(
            full.previous.as_ref().map(|p| p["data"]["v"].clone()),
            previous.map(|v| json!(v)),
            "{step}"
        );
        assert!(lean.previous.is_none(), "{step}");
    }
}
