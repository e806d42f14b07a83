//! Server-side apply against a started `kcp`: the structured-merge-diff scenarios over HTTP,
//! kube-rs `Patch::Apply`, kubectl's `apply --server-side`, `diff` and `edit`, and the bad input an
//! apply can bring.
//!
//! Every scenario asserts on the resulting object and on `metadata.managedFields` (manager,
//! operation, subresource and the exact `fieldsV1`), because that bookkeeping is what the next
//! apply, by whichever manager, is judged against. The expected sets are what kube-apiserver
//! stores for the same requests. Workload kinds (Deployment, Service) are the generated CRDs of
//! `e2e/workload-crds`, installed into the scenario's logical cluster.
//!
//! All scenarios share one server; each works in a logical cluster of its own.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kcp_testing::{KcpProcess, Kubectl, Response, SharedKcp};
use kube::api::{Api, Patch, PatchParams};
use reqwest::Method;
use serde_json::{Value, json};

static SERVER: SharedKcp = SharedKcp::new(env!("CARGO_BIN_EXE_kcp"), "server-side-apply");

/// The namespace every scenario writes into (in its own logical cluster).
const NS: &str = "apps";

const APPLY: &str = "application/apply-patch+yaml";

/// The kubectl releases the kubectl scenarios run with: the oldest and the newest supported.
const KUBECTL_VERSIONS: [&str; 2] = ["1.27", "1.33"];

/// A logical cluster of the shared server holding namespace [`NS`].
struct Cluster {
    server: Arc<KcpProcess>,
    name: String,
}

impl Cluster {
    /// Logical cluster `name` with namespace [`NS`] and the workload CRDs named by `crds`
    /// (file stems in `e2e/workload-crds`, e.g. `deployments.apps`).
    async fn new(name: &str, crds: &[&str]) -> Cluster {
        let cluster = Cluster {
            server: SERVER.get().await,
            name: name.to_owned(),
        };
        let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}});
        let created = cluster
            .server
            .send_json(
                Method::POST,
                &cluster.path("/api/v1/namespaces"),
                &namespace,
            )
            .await;
        assert_eq!(created.status, 201, "{}", created.text());
        for crd in crds {
            let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../e2e/workload-crds")
                .join(format!("{crd}.yaml"));
            let text = std::fs::read_to_string(&file)
                .unwrap_or_else(|error| panic!("{}: {error}", file.display()));
            let crd: Value = yaml_serde::from_str(&text).expect("a CRD manifest");
            cluster.server.install_crd(name, &crd).await;
        }
        cluster
    }

    /// `rest` (from `/api` or `/apis` on) in this logical cluster.
    fn path(&self, rest: &str) -> String {
        format!("/clusters/{}{rest}", self.name)
    }

    /// The URL of this logical cluster, as kubectl's `--server`.
    fn url(&self) -> String {
        self.server.url(&self.path(""))
    }

    async fn get(&self, path: &str) -> Value {
        let response = self.server.get(path).await;
        assert_eq!(response.status, 200, "GET {path}: {}", response.text());
        response.json()
    }

    /// Sends `body` with `method` and `content_type` to `url` (a path with its query), which must
    /// answer `code`; the object.
    async fn write(
        &self,
        method: Method,
        url: &str,
        content_type: &str,
        body: String,
        code: u16,
    ) -> Value {
        let response = self
            .server
            .send(method.clone(), url, content_type, body)
            .await;
        assert_eq!(response.status, code, "{method} {url}: {}", response.text());
        response.json()
    }

    /// PATCH `path` with `body` as `application/apply-patch+yaml` and the query `query`.
    async fn apply_raw(&self, path: &str, query: &str, body: impl Into<reqwest::Body>) -> Response {
        let url = format!("{path}?{query}");
        self.server.send(Method::PATCH, &url, APPLY, body).await
    }

    /// Applies `config` as `manager` (forcing when `force`); the answer, whatever it is.
    async fn try_apply(&self, path: &str, manager: &str, force: bool, config: &Value) -> Response {
        let query = format!("fieldManager={manager}&force={force}");
        self.apply_raw(path, &query, config.to_string()).await
    }

    /// Applies `config` as `manager`, which must succeed (200 or 201); the object.
    async fn apply(&self, path: &str, manager: &str, config: &Value) -> Value {
        self.applied(path, self.try_apply(path, manager, false, config).await)
    }

    /// Applies `config` as `manager` with `force=true`, which must succeed; the object.
    async fn force_apply(&self, path: &str, manager: &str, config: &Value) -> Value {
        self.applied(path, self.try_apply(path, manager, true, config).await)
    }

    fn applied(&self, path: &str, response: Response) -> Value {
        assert!(
            [200, 201].contains(&response.status),
            "apply to {path}: {} {}",
            response.status,
            response.text()
        );
        response.json()
    }

    /// Applies `config` as `manager`, which must conflict with `message`; the Status, after
    /// checking that the object (and its resourceVersion) is unchanged.
    async fn apply_conflicts(
        &self,
        path: &str,
        manager: &str,
        config: &Value,
        message: &str,
    ) -> Value {
        let before = self.get(path).await;
        let response = self.try_apply(path, manager, false, config).await;
        assert_eq!(response.status, 409, "{}", response.text());
        assert_eq!(self.get(path).await, before, "a conflict wrote");
        let status = response.json();
        assert_eq!(status["kind"], "Status", "{status}");
        assert_eq!(status["status"], "Failure", "{status}");
        assert_eq!(status["reason"], "Conflict", "{status}");
        assert_eq!(status["code"], 409, "{status}");
        assert_eq!(status["message"], message, "{status}");
        status
    }
}

fn configmaps(cluster: &Cluster) -> String {
    cluster.path(&format!("/api/v1/namespaces/{NS}/configmaps"))
}

fn deployments(cluster: &Cluster) -> String {
    cluster.path(&format!("/apis/apps/v1/namespaces/{NS}/deployments"))
}

/// A ConfigMap apply configuration.
fn configmap(name: &str, rest: Value) -> Value {
    let mut config = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}});
    merge_into(&mut config, rest);
    config
}

/// A Deployment apply configuration with `containers`; `spec` (selector, template labels) is
/// included when `full` (what the Deployment's owner applies), left out for a manager that only
/// adds to the pod template.
fn deployment(name: &str, full: bool, containers: Value) -> Value {
    let mut config = json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {"template": {"spec": {"containers": containers}}},
    });
    if full {
        merge_into(
            &mut config,
            json!({"spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": name}},
                "template": {"metadata": {"labels": {"app": name}}},
            }}),
        );
    }
    config
}

/// Merges the maps of `patch` into `target` (JSON merge patch without deletions).
fn merge_into(target: &mut Value, patch: Value) {
    match (target, patch) {
        (Value::Object(target), Value::Object(patch)) => {
            for (key, value) in patch {
                merge_into(target.entry(key).or_insert(Value::Null), value);
            }
        }
        (target, patch) => *target = patch,
    }
}

/// The message of a conflict with one field: `with` is the manager as Kubernetes prints it
/// (`"name"`, with ` using v1` for an Update manager, ` with subresource "status"`).
fn one_conflict(with: &str, field: &str) -> String {
    format!("Apply failed with 1 conflict: conflict with {with}: {field}")
}

/// `metadata.managedFields` as (manager, operation, subresource) triples, sorted (the stored
/// order depends on the entries' times).
fn managers(object: &Value) -> Vec<(String, String, String)> {
    let mut managers: Vec<_> = object["metadata"]["managedFields"]
        .as_array()
        .unwrap_or_else(|| panic!("no managedFields: {object:#}"))
        .iter()
        .map(|entry| {
            let text = |field: &str| entry[field].as_str().unwrap_or_default().to_owned();
            (text("manager"), text("operation"), text("subresource"))
        })
        .collect();
    managers.sort();
    managers
}

/// [`managers`] of `object` must be `expected`, given as (manager, operation), where a manager
/// `name/subresource` stands for an entry of that subresource.
fn assert_managers(object: &Value, expected: &[(&str, &str)]) {
    let mut expected: Vec<_> = expected
        .iter()
        .map(|(manager, operation)| {
            let (manager, subresource) = manager.split_once('/').unwrap_or((manager, ""));
            (
                manager.to_owned(),
                operation.to_string(),
                subresource.to_owned(),
            )
        })
        .collect();
    expected.sort();
    assert_eq!(managers(object), expected, "{object:#}");
}

/// The managedFields entry of `manager`, which must be the only one of that manager.
fn entry<'a>(object: &'a Value, manager: &str) -> &'a Value {
    let entries: Vec<&Value> = object["metadata"]["managedFields"]
        .as_array()
        .unwrap_or_else(|| panic!("no managedFields: {object:#}"))
        .iter()
        .filter(|entry| entry["manager"] == manager)
        .collect();
    assert_eq!(entries.len(), 1, "entries of {manager}: {object:#}");
    let entry = entries[0];
    assert_eq!(entry["fieldsType"], "FieldsV1", "{entry}");
    assert!(entry["apiVersion"].is_string(), "{entry}");
    entry
}

/// The `fieldsV1` of `manager`'s entry must be `expected`.
fn assert_fields(object: &Value, manager: &str, expected: Value) {
    assert_eq!(
        entry(object, manager)["fieldsV1"],
        expected,
        "fields of {manager} in {object:#}"
    );
}

/// Whether `manager` has an entry owning `field` (a JSON pointer into `fieldsV1`, e.g.
/// `/f:data/f:color`); a manager without an entry owns nothing.
fn owns(object: &Value, manager: &str, field: &str) -> bool {
    object["metadata"]["managedFields"]
        .as_array()
        .unwrap_or_else(|| panic!("no managedFields: {object:#}"))
        .iter()
        .any(|entry| entry["manager"] == manager && entry["fieldsV1"].pointer(field).is_some())
}

fn resource_version(object: &Value) -> &str {
    object["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or_else(|| panic!("no resourceVersion: {object}"))
}

/// Two appliers each own what they applied; a value both apply is shared, without a conflict.
#[tokio::test]
async fn two_managers_share_an_object() {
    let cluster = Cluster::new("ssa-shared", &[]).await;
    let path = format!("{}/shared", configmaps(&cluster));
    let first = configmap(
        "shared",
        json!({"metadata": {"labels": {"team": "a"}}, "data": {"x": "1", "y": "2"}}),
    );
    let created = cluster.apply(&path, "first", &first).await;
    assert_eq!(created["data"], json!({"x": "1", "y": "2"}));
    assert_managers(&created, &[("first", "Apply")]);
    let first_fields = json!({
        "f:data": {"f:x": {}, "f:y": {}},
        "f:metadata": {"f:labels": {"f:team": {}}},
    });
    assert_fields(&created, "first", first_fields.clone());
    assert!(entry(&created, "first")["time"].is_string(), "{created}");

    let second = configmap(
        "shared",
        json!({"metadata": {"labels": {"tier": "b"}}, "data": {"z": "3"}}),
    );
    let both = cluster.apply(&path, "second", &second).await;
    assert_eq!(both["data"], json!({"x": "1", "y": "2", "z": "3"}));
    assert_eq!(
        both["metadata"]["labels"],
        json!({"team": "a", "tier": "b"})
    );
    assert_managers(&both, &[("first", "Apply"), ("second", "Apply")]);
    assert_fields(&both, "first", first_fields.clone());
    assert_fields(
        &both,
        "second",
        json!({"f:data": {"f:z": {}}, "f:metadata": {"f:labels": {"f:tier": {}}}}),
    );

    // The same value as "first" for y: no conflict, both own it.
    let shared = configmap("shared", json!({"data": {"y": "2", "z": "3"}}));
    let shared = cluster.apply(&path, "second", &shared).await;
    assert_eq!(shared["data"], json!({"x": "1", "y": "2", "z": "3"}));
    assert!(
        shared["metadata"]["labels"].get("tier").is_none(),
        "{shared}"
    );
    assert_fields(&shared, "first", first_fields);
    assert_fields(&shared, "second", json!({"f:data": {"f:y": {}, "f:z": {}}}));
}

/// Changing another applier's field is a 409 naming manager and field; `force=true` takes it.
#[tokio::test]
async fn conflicts_and_force() {
    let cluster = Cluster::new("ssa-conflict", &[]).await;
    let path = format!("{}/contested", configmaps(&cluster));
    let owner = configmap("contested", json!({"data": {"x": "1", "y": "2"}}));
    cluster.apply(&path, "owner", &owner).await;

    let one = configmap("contested", json!({"data": {"x": "changed"}}));
    let status = cluster
        .apply_conflicts(&path, "rival", &one, &one_conflict("\"owner\"", ".data.x"))
        .await;
    assert_eq!(
        status["details"]["causes"],
        json!([{"reason": "FieldManagerConflict", "message": "conflict with \"owner\"", "field": ".data.x"}])
    );

    let two = configmap("contested", json!({"data": {"x": "changed", "y": "too"}}));
    let status = cluster
        .apply_conflicts(
            &path,
            "rival",
            &two,
            "Apply failed with 2 conflicts: conflicts with \"owner\":\n- .data.x\n- .data.y",
        )
        .await;
    let fields: Vec<&Value> = status["details"]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|cause| &cause["field"])
        .collect();
    assert_eq!(fields, [".data.x", ".data.y"], "{status}");

    let forced = cluster.force_apply(&path, "rival", &one).await;
    assert_eq!(forced["data"], json!({"x": "changed", "y": "2"}));
    assert_managers(&forced, &[("owner", "Apply"), ("rival", "Apply")]);
    assert_fields(&forced, "owner", json!({"f:data": {"f:y": {}}}));
    assert_fields(&forced, "rival", json!({"f:data": {"f:x": {}}}));

    // Now the previous owner conflicts with the new one.
    cluster
        .apply_conflicts(
            &path,
            "owner",
            &owner,
            &one_conflict("\"rival\"", ".data.x"),
        )
        .await;
}

/// List-maps merge element by element on their keys: Deployment containers by `name`, Service
/// ports by `port` and `protocol` (defaulted to TCP when left out); a container its only applier
/// stops applying goes.
#[tokio::test]
async fn list_maps_merge_by_keys() {
    let cluster = Cluster::new("ssa-list-map", &["deployments.apps", "services.core"]).await;
    let path = format!("{}/web", deployments(&cluster));
    let app = json!([{"name": "app", "image": "nginx:1"}]);
    cluster
        .apply(&path, "owner", &deployment("web", true, app.clone()))
        .await;
    let sidecar = json!([{"name": "sidecar", "image": "envoy:1"}]);
    let merged = cluster
        .apply(&path, "sidecars", &deployment("web", false, sidecar))
        .await;
    assert_eq!(
        merged["spec"]["template"]["spec"]["containers"],
        json!([{"name": "app", "image": "nginx:1"}, {"name": "sidecar", "image": "envoy:1"}])
    );
    assert_managers(&merged, &[("owner", "Apply"), ("sidecars", "Apply")]);
    let container = |name: &str| {
        json!({"f:spec": {"f:template": {"f:spec": {"f:containers": {
            format!("k:{{\"name\":\"{name}\"}}"): {".": {}, "f:image": {}, "f:name": {}},
        }}}}})
    };
    let mut owner_fields = json!({"f:spec": {
        "f:replicas": {},
        "f:selector": {},
        "f:template": {"f:metadata": {"f:labels": {"f:app": {}}}},
    }});
    merge_into(&mut owner_fields, container("app"));
    assert_fields(&merged, "owner", owner_fields);
    assert_fields(&merged, "sidecars", container("sidecar"));

    // The other manager's container is keyed by its name in the conflict.
    let retag = json!([{"name": "app", "image": "nginx:2"}]);
    cluster
        .apply_conflicts(
            &path,
            "sidecars",
            &deployment("web", false, retag),
            &one_conflict(
                "\"owner\"",
                ".spec.template.spec.containers[name=\"app\"].image",
            ),
        )
        .await;

    // The owner replaces its container: "app" goes, "sidecar" stays.
    let renamed = json!([{"name": "main", "image": "nginx:3"}]);
    let replaced = cluster
        .apply(&path, "owner", &deployment("web", true, renamed))
        .await;
    let mut names: Vec<&str> = replaced["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    names.sort_unstable();
    assert_eq!(names, ["main", "sidecar"], "{replaced:#}");
    assert_fields(&replaced, "sidecars", container("sidecar"));

    let services = cluster.path(&format!("/api/v1/namespaces/{NS}/services"));
    let path = format!("{services}/dns");
    let service = |ports: Value| {
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "dns"},
               "spec": {"ports": ports}})
    };
    cluster
        .apply(
            &path,
            "http",
            &service(json!([{"name": "http", "port": 80}])),
        )
        .await;
    let udp = json!([{"name": "dns", "port": 53, "protocol": "UDP"},
                     {"name": "http-udp", "port": 80, "protocol": "UDP"}]);
    let merged = cluster.apply(&path, "dns", &service(udp)).await;
    let ports: Vec<(i64, &str)> = merged["spec"]["ports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["port"].as_i64().unwrap(), p["protocol"].as_str().unwrap()))
        .collect();
    assert_eq!(ports, [(80, "TCP"), (53, "UDP"), (80, "UDP")], "{merged:#}");
    assert_fields(
        &merged,
        "http",
        json!({"f:spec": {"f:ports": {
            "k:{\"port\":80,\"protocol\":\"TCP\"}": {".": {}, "f:name": {}, "f:port": {}},
        }}}),
    );
    let element = json!({".": {}, "f:name": {}, "f:port": {}, "f:protocol": {}});
    assert_fields(
        &merged,
        "dns",
        json!({"f:spec": {"f:ports": {
            "k:{\"port\":53,\"protocol\":\"UDP\"}": element.clone(),
            "k:{\"port\":80,\"protocol\":\"UDP\"}": element,
        }}}),
    );
}

/// Set lists (`metadata.finalizers`) merge by value; a value its only applier drops goes.
#[tokio::test]
async fn set_lists_merge_by_value() {
    let cluster = Cluster::new("ssa-set", &[]).await;
    let path = format!("{}/guarded", configmaps(&cluster));
    let finalizers =
        |values: &[&str]| configmap("guarded", json!({"metadata": {"finalizers": values}}));
    cluster
        .apply(&path, "a", &finalizers(&["example.com/a", "example.com/b"]))
        .await;
    let merged = cluster
        .apply(&path, "c", &finalizers(&["example.com/c", "example.com/a"]))
        .await;
    let sorted = |object: &Value| {
        let mut values: Vec<String> =
            serde_json::from_value(object["metadata"]["finalizers"].clone())
                .unwrap_or_else(|error| panic!("{error}: {object}"));
        values.sort();
        values
    };
    assert_eq!(
        sorted(&merged),
        ["example.com/a", "example.com/b", "example.com/c"]
    );
    assert_fields(
        &merged,
        "a",
        json!({"f:metadata": {"f:finalizers": {"v:\"example.com/a\"": {}, "v:\"example.com/b\"": {}}}}),
    );
    assert_fields(
        &merged,
        "c",
        json!({"f:metadata": {"f:finalizers": {"v:\"example.com/a\"": {}, "v:\"example.com/c\"": {}}}}),
    );

    // "a" drops both of its values: b goes, a stays (c applies it too).
    let dropped = cluster.apply(&path, "a", &finalizers(&[])).await;
    assert_eq!(sorted(&dropped), ["example.com/a", "example.com/c"]);
    assert_managers(&dropped, &[("c", "Apply")]);

    // Let the namespace and cluster go without waiting on finalizers.
    cluster.force_apply(&path, "c", &finalizers(&[])).await;
}

/// An atomic list (a container's `args`) is one field: a different list conflicts, the same list
/// is shared, and a forced one replaces it whole.
#[tokio::test]
async fn atomic_lists_are_replaced_whole() {
    let cluster = Cluster::new("ssa-atomic", &["deployments.apps"]).await;
    let path = format!("{}/worker", deployments(&cluster));
    let args = |args: &[&str]| json!([{"name": "worker", "image": "busybox", "args": args}]);
    let owner = deployment("worker", true, args(&["--a", "--b"]));
    cluster.apply(&path, "owner", &owner).await;

    let other = deployment(
        "worker",
        false,
        json!([{"name": "worker", "args": ["--c"]}]),
    );
    cluster
        .apply_conflicts(
            &path,
            "other",
            &other,
            &one_conflict(
                "\"owner\"",
                ".spec.template.spec.containers[name=\"worker\"].args",
            ),
        )
        .await;

    let same = deployment(
        "worker",
        false,
        json!([{"name": "worker", "args": ["--a", "--b"]}]),
    );
    let shared = cluster.apply(&path, "other", &same).await;
    let container_args =
        |object: &Value| object["spec"]["template"]["spec"]["containers"][0]["args"].clone();
    assert_eq!(container_args(&shared), json!(["--a", "--b"]));
    let other_fields = json!({"f:spec": {"f:template": {"f:spec": {"f:containers": {
        "k:{\"name\":\"worker\"}": {".": {}, "f:args": {}, "f:name": {}},
    }}}}});
    assert_fields(&shared, "other", other_fields.clone());
    let owner_container = &entry(&shared, "owner")["fieldsV1"]["f:spec"]["f:template"]["f:spec"]["f:containers"]
        ["k:{\"name\":\"worker\"}"];
    assert_eq!(
        *owner_container,
        json!({".": {}, "f:args": {}, "f:image": {}, "f:name": {}})
    );

    let forced = cluster.force_apply(&path, "other", &other).await;
    assert_eq!(container_args(&forced), json!(["--c"]), "{forced:#}");
    assert_fields(&forced, "other", other_fields);
    let owner_container = &entry(&forced, "owner")["fieldsV1"]["f:spec"]["f:template"]["f:spec"]["f:containers"]
        ["k:{\"name\":\"worker\"}"];
    assert_eq!(
        *owner_container,
        json!({".": {}, "f:image": {}, "f:name": {}})
    );
}

/// Fields a manager stops applying are removed when nobody else owns them and kept when another
/// manager does.
#[tokio::test]
async fn unapplied_fields_are_removed_unless_owned_elsewhere() {
    let cluster = Cluster::new("ssa-removal", &[]).await;
    let path = format!("{}/pruned", configmaps(&cluster));
    let full = configmap(
        "pruned",
        json!({"metadata": {"labels": {"keep": "1", "drop": "2"}},
               "data": {"x": "1", "y": "2", "w": "3"}}),
    );
    cluster.apply(&path, "owner", &full).await;
    let helper = configmap("pruned", json!({"data": {"y": "2"}}));
    cluster.apply(&path, "helper", &helper).await;

    let less = configmap(
        "pruned",
        json!({"metadata": {"labels": {"keep": "1"}}, "data": {"x": "1"}}),
    );
    let pruned = cluster.apply(&path, "owner", &less).await;
    assert_eq!(pruned["data"], json!({"x": "1", "y": "2"}), "{pruned:#}");
    assert_eq!(pruned["metadata"]["labels"], json!({"keep": "1"}));
    assert_fields(
        &pruned,
        "owner",
        json!({"f:data": {"f:x": {}}, "f:metadata": {"f:labels": {"f:keep": {}}}}),
    );
    assert_fields(&pruned, "helper", json!({"f:data": {"f:y": {}}}));

    // The helper lets go of y too: now it goes, and so does the helper's empty entry.
    let nothing = configmap("pruned", json!({}));
    let emptied = cluster.apply(&path, "helper", &nothing).await;
    assert_eq!(emptied["data"], json!({"x": "1"}), "{emptied:#}");
    assert_managers(&emptied, &[("owner", "Apply")]);
}

/// A field set by an Update manager (create, merge patch, PUT) is shared when an applier applies
/// the same value, conflicts when it applies another (naming the manager "using v1"), and is
/// handed over by a forced apply; the applier letting go of it then removes it.
#[tokio::test]
async fn update_managers_hand_over_to_an_applier() {
    let cluster = Cluster::new("ssa-handover", &[]).await;
    let collection = configmaps(&cluster);
    let path = format!("{collection}/handed");
    let object = configmap("handed", json!({"data": {"a": "1", "b": "2"}}));
    let json_type = "application/json";
    let created = cluster
        .write(
            Method::POST,
            &format!("{collection}?fieldManager=creator"),
            json_type,
            object.to_string(),
            201,
        )
        .await;
    assert_managers(&created, &[("creator", "Update")]);
    assert_fields(
        &created,
        "creator",
        json!({"f:data": {".": {}, "f:a": {}, "f:b": {}}}),
    );

    let merge = "application/merge-patch+json";
    let body = r#"{"data":{"b":"3"}}"#.to_owned();
    let patched = cluster
        .write(
            Method::PATCH,
            &format!("{path}?fieldManager=editor"),
            merge,
            body,
            200,
        )
        .await;
    assert_managers(&patched, &[("creator", "Update"), ("editor", "Update")]);
    assert_fields(&patched, "creator", json!({"f:data": {".": {}, "f:a": {}}}));
    assert_fields(&patched, "editor", json!({"f:data": {"f:b": {}}}));

    // A PUT by another Update manager that changes only a keeps b with the editor.
    let mut replaced = patched.clone();
    replaced["data"]["a"] = json!("10");
    let put = cluster
        .write(
            Method::PUT,
            &format!("{path}?fieldManager=putter"),
            json_type,
            replaced.to_string(),
            200,
        )
        .await;
    // creator still owns the map it created, now without children.
    assert_fields(&put, "creator", json!({"f:data": {}}));
    assert_fields(&put, "editor", json!({"f:data": {"f:b": {}}}));
    assert_fields(&put, "putter", json!({"f:data": {"f:a": {}}}));

    let same = configmap("handed", json!({"data": {"b": "3"}}));
    let shared = cluster.apply(&path, "applier", &same).await;
    assert_fields(&shared, "editor", json!({"f:data": {"f:b": {}}}));
    assert_fields(&shared, "applier", json!({"f:data": {"f:b": {}}}));

    let other = configmap("handed", json!({"data": {"b": "4"}}));
    let status = cluster
        .apply_conflicts(
            &path,
            "applier",
            &other,
            &one_conflict("\"editor\" using v1", ".data.b"),
        )
        .await;
    assert_eq!(
        status["details"]["causes"][0]["message"],
        "conflict with \"editor\" using v1"
    );

    let taken = cluster.force_apply(&path, "applier", &other).await;
    assert_eq!(taken["data"], json!({"a": "10", "b": "4"}));
    assert_managers(
        &taken,
        &[
            ("creator", "Update"),
            ("putter", "Update"),
            ("applier", "Apply"),
        ],
    );
    assert_fields(&taken, "applier", json!({"f:data": {"f:b": {}}}));

    let released = cluster
        .apply(&path, "applier", &configmap("handed", json!({})))
        .await;
    assert_eq!(released["data"], json!({"a": "10"}), "{released:#}");
    assert_managers(&released, &[("creator", "Update"), ("putter", "Update")]);
}

/// An apply to `/status` changes only the status and is recorded with `subresource: status`; an
/// apply to the main resource ignores `status`.
#[tokio::test]
async fn status_apply_changes_only_status() {
    let cluster = Cluster::new("ssa-status", &["deployments.apps"]).await;
    let path = format!("{}/api", deployments(&cluster));
    let spec = deployment("api", true, json!([{"name": "api", "image": "api:1"}]));
    let created = cluster.apply(&path, "owner", &spec).await;
    let owner_fields = entry(&created, "owner")["fieldsV1"].clone();

    let mut status = deployment("api", false, json!([{"name": "api", "image": "api:2"}]));
    merge_into(
        &mut status,
        json!({"spec": {"replicas": 7}, "status": {"replicas": 1, "readyReplicas": 1}}),
    );
    let status_path = format!("{path}/status");
    let reported = cluster.apply(&status_path, "agent", &status).await;
    assert_eq!(reported["status"]["replicas"], 1, "{reported:#}");
    assert_eq!(reported["status"]["readyReplicas"], 1, "{reported:#}");
    assert_eq!(
        reported["spec"]["replicas"], 1,
        "spec changed: {reported:#}"
    );
    assert_eq!(
        reported["spec"]["template"]["spec"]["containers"][0]["image"],
        "api:1"
    );

    // The same status again writes nothing.
    let again = cluster.apply(&status_path, "agent", &status).await;
    assert_eq!(resource_version(&again), resource_version(&reported));

    // The main resource ignores status.
    let mut with_status = spec.clone();
    merge_into(&mut with_status, json!({"status": {"replicas": 9}}));
    let main = cluster.apply(&path, "owner", &with_status).await;
    assert_eq!(main["status"]["replicas"], 1, "{main:#}");
    assert_fields(&main, "owner", owner_fields.clone());

    // The status applier's entry, and the conflict another status applier meets.
    assert_managers(&main, &[("owner", "Apply"), ("agent/status", "Apply")]);
    assert_fields(
        &main,
        "agent",
        json!({"f:status": {"f:readyReplicas": {}, "f:replicas": {}}}),
    );
    let rival = json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "api"},
        "status": {"replicas": 2},
    });
    cluster
        .apply_conflicts(
            &status_path,
            "rival",
            &rival,
            &one_conflict("\"agent\" with subresource \"status\"", ".status.replicas"),
        )
        .await;
}

/// Applying the same configuration twice writes nothing (same resourceVersion, same
/// managedFields); a dry run changes nothing either.
#[tokio::test]
async fn applying_the_same_configuration_twice_writes_nothing() {
    let cluster = Cluster::new("ssa-noop", &["deployments.apps"]).await;
    let cases = [
        (
            format!("{}/same", configmaps(&cluster)),
            configmap(
                "same",
                json!({"metadata": {"labels": {"l": "1"}}, "data": {"k": "v"}}),
            ),
        ),
        (
            format!("{}/same", deployments(&cluster)),
            deployment(
                "same",
                true,
                json!([{"name": "c", "image": "i:1", "ports": [{"containerPort": 80}]}]),
            ),
        ),
    ];
    for (path, config) in cases {
        let first = cluster.apply(&path, "twice", &config).await;
        let second = cluster.apply(&path, "twice", &config).await;
        assert_eq!(second, first, "the second apply wrote");
        assert_eq!(cluster.get(&path).await, first);

        let mut changed = config.clone();
        merge_into(&mut changed, json!({"metadata": {"labels": {"l": "2"}}}));
        let dry = cluster
            .apply_raw(&path, "fieldManager=twice&dryRun=All", changed.to_string())
            .await;
        assert_eq!(dry.status, 200, "{}", dry.text());
        assert_eq!(dry.json()["metadata"]["labels"]["l"], "2");
        assert_eq!(cluster.get(&path).await, first, "the dry run wrote");
    }
}

/// kube-rs `Patch::Apply` of a k8s-openapi Deployment (served by its CRD) and a ConfigMap: created,
/// re-applied without a write, refused to a second manager with a 409, taken with `force`.
#[tokio::test]
async fn kube_rs_patch_apply() {
    let cluster = Cluster::new("ssa-kube-rs", &["deployments.apps"]).await;
    let kubeconfig = kube::config::Kubeconfig::read_from(cluster.server.kubeconfig())
        .expect("reading the admin kubeconfig");
    let mut config = kube::Config::from_custom_kubeconfig(
        kubeconfig,
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .expect("a kube config from the admin kubeconfig");
    config.cluster_url = cluster.url().parse().expect("a cluster URL");
    let client = kube::Client::try_from(config).expect("a kube client");

    let deployment: Deployment = serde_json::from_value(deployment(
        "kube-rs",
        true,
        json!([{"name": "app", "image": "nginx:1"}]),
    ))
    .expect("a Deployment");
    let mut retagged = deployment.clone();
    retagged
        .spec
        .as_mut()
        .unwrap()
        .template
        .spec
        .as_mut()
        .unwrap()
        .containers[0]
        .image = Some("nginx:2".to_owned());
    let image = |d: &Deployment| {
        d.spec
            .as_ref()
            .unwrap()
            .template
            .spec
            .as_ref()
            .unwrap()
            .containers[0]
            .image
            .clone()
    };
    let applied = patch_apply(
        Api::<Deployment>::namespaced(client.clone(), NS),
        &deployment,
        &retagged,
        ".spec.template.spec.containers[name=\"app\"].image",
        "/f:spec/f:template/f:spec/f:containers/k:{\"name\":\"app\"}/f:image",
    )
    .await;
    assert_eq!(image(&applied).as_deref(), Some("nginx:2"));

    let configmap: ConfigMap =
        serde_json::from_value(configmap("kube-rs", json!({"data": {"color": "blue"}})))
            .expect("a ConfigMap");
    let mut recolored = configmap.clone();
    recolored.data = Some([("color".to_owned(), "red".to_owned())].into());
    let applied = patch_apply(
        Api::<ConfigMap>::namespaced(client, NS),
        &configmap,
        &recolored,
        ".data.color",
        "/f:data/f:color",
    )
    .await;
    assert_eq!(applied.data.unwrap()["color"], "red");
}

/// Applies `object` as `kube-rs-test` (created, then re-applied without a write), then `changed`
/// as `kube-rs-rival`, which conflicts on `field` until forced and then owns it (`owned_at`, a
/// JSON pointer into `fieldsV1`). Returns the forced result.
async fn patch_apply<K>(api: Api<K>, object: &K, changed: &K, field: &str, owned_at: &str) -> K
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::Serialize + serde::de::DeserializeOwned,
{
    let name = object.meta().name.clone().expect("a name");
    let params = PatchParams::apply("kube-rs-test");
    let created = api
        .patch(&name, &params, &Patch::Apply(object))
        .await
        .expect("the first apply");
    let again = api
        .patch(&name, &params, &Patch::Apply(object))
        .await
        .expect("the second apply");
    assert_eq!(
        again.meta().resource_version,
        created.meta().resource_version,
        "the second apply wrote"
    );
    let created = serde_json::to_value(&created).expect("serializing the object");
    assert_managers(&created, &[("kube-rs-test", "Apply")]);
    assert!(owns(&created, "kube-rs-test", owned_at), "{created:#}");

    let rival = PatchParams::apply("kube-rs-rival");
    let refused = api.patch(&name, &rival, &Patch::Apply(changed)).await;
    match refused {
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 409, "{status:?}");
            assert_eq!(status.reason, "Conflict", "{status:?}");
            assert_eq!(status.message, one_conflict("\"kube-rs-test\"", field));
        }
        other => panic!("a conflicting apply answered {other:?}"),
    }
    let forced = api
        .patch(&name, &rival.force(), &Patch::Apply(changed))
        .await
        .expect("the forced apply");
    // kube-rs-test keeps whatever else it applied (its entry goes if that is nothing).
    let forced_json = serde_json::to_value(&forced).expect("serializing the object");
    assert!(
        owns(&forced_json, "kube-rs-rival", owned_at),
        "{forced_json:#}"
    );
    assert!(
        !owns(&forced_json, "kube-rs-test", owned_at),
        "{forced_json:#}"
    );
    forced
}

/// One kubectl release working in its own namespace of a logical cluster.
struct Kubectls<'a> {
    cluster: &'a Cluster,
    kubectl: Kubectl,
    ns: String,
}

impl Kubectls<'_> {
    /// Each supported kubectl release in namespace `<prefix>-1-XX` of `cluster`, created here.
    async fn each<'a>(cluster: &'a Cluster, prefix: &str) -> Vec<Kubectls<'a>> {
        let mut all = Vec::new();
        for version in KUBECTL_VERSIONS {
            let kubectl = Kubectl::new(version, &cluster.server.kubeconfig());
            let ns = format!("{prefix}-{}", version.replace('.', "-"));
            let flow = Kubectls {
                cluster,
                kubectl,
                ns,
            };
            flow.ok(&["create", "namespace", &flow.ns]);
            all.push(flow);
        }
        all
    }

    fn args<'b>(&'b self, server: &'b str, args: &[&'b str]) -> Vec<&'b str> {
        [&[server, "-n", self.ns.as_str()], args].concat()
    }

    fn run(&self, args: &[&str]) -> kcp_testing::Run {
        let server = format!("--server={}", self.cluster.url());
        self.kubectl.run(&self.args(&server, args))
    }

    fn ok(&self, args: &[&str]) -> String {
        self.run(args).success(self.kubectl.version(), args)
    }

    /// Runs a command that must fail; its stderr.
    fn fails(&self, args: &[&str]) -> String {
        let run = self.run(args);
        assert!(
            !run.status.success(),
            "kubectl {} {args:?} should have failed: {}",
            self.kubectl.version(),
            run.stdout
        );
        run.stderr
    }

    /// Writes `manifest` to `<name>.yaml` in kubectl's home; its path.
    fn file(&self, name: &str, manifest: &str) -> String {
        let file = self.kubectl.home().join(format!("{name}.yaml"));
        std::fs::write(&file, manifest).unwrap();
        file.to_str().unwrap().to_owned()
    }

    /// A ConfigMap manifest `name` with `data`.
    fn configmap(&self, name: &str, data: &[(&str, &str)]) -> String {
        let data: String = data
            .iter()
            .map(|(key, value)| format!("  {key}: \"{value}\"\n"))
            .collect();
        let manifest =
            format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n{data}");
        self.file(name, &manifest)
    }

    /// The object `kind/name` over HTTP.
    async fn object(&self, plural_path: &str, name: &str) -> Value {
        let path = format!("{plural_path}/{name}").replace("{ns}", &self.ns);
        self.cluster.get(&self.cluster.path(&path)).await
    }

    async fn configmap_object(&self, name: &str) -> Value {
        self.object("/api/v1/namespaces/{ns}/configmaps", name)
            .await
    }
}

/// `apply --server-side` by two field managers: the second one's change is refused with the
/// conflict message, `--force-conflicts` takes the field; re-applying writes nothing.
#[tokio::test]
async fn kubectl_server_side_apply_conflicts_and_force() {
    let cluster = Cluster::new("ssa-kubectl-conflict", &[]).await;
    for flow in Kubectls::each(&cluster, "conflict").await {
        let first = flow.configmap("settings", &[("color", "blue"), ("shape", "round")]);
        let apply = [
            "apply",
            "--server-side",
            "--field-manager=first",
            "-f",
            &first,
        ];
        assert_eq!(
            flow.ok(&apply).trim(),
            "configmap/settings serverside-applied"
        );
        let created = flow.configmap_object("settings").await;
        assert_eq!(
            flow.ok(&apply).trim(),
            "configmap/settings serverside-applied"
        );
        assert_eq!(
            flow.configmap_object("settings").await,
            created,
            "re-apply wrote"
        );
        assert_managers(&created, &[("first", "Apply")]);

        let second = flow.configmap("settings", &[("color", "red")]);
        let apply = [
            "apply",
            "--server-side",
            "--field-manager=second",
            "-f",
            &second,
        ];
        let refused = flow.fails(&apply);
        for expected in [
            one_conflict("\"first\"", ".data.color").as_str(),
            "--force-conflicts",
        ] {
            assert!(refused.contains(expected), "no {expected:?} in:\n{refused}");
        }
        assert_eq!(flow.configmap_object("settings").await, created);

        let forced = flow.ok(&[&apply[..], &["--force-conflicts"]].concat());
        assert_eq!(forced.trim(), "configmap/settings serverside-applied");
        let object = flow.configmap_object("settings").await;
        assert_eq!(object["data"], json!({"color": "red", "shape": "round"}));
        assert_fields(&object, "first", json!({"f:data": {"f:shape": {}}}));
        assert_fields(&object, "second", json!({"f:data": {"f:color": {}}}));
    }
}

/// `kubectl diff` (client-side and `--server-side`) prints the changed value and exits 1, prints
/// nothing and exits 0 without a change, and changes nothing.
#[tokio::test]
async fn kubectl_diff_prints_the_change() {
    let cluster = Cluster::new("ssa-kubectl-diff", &[]).await;
    for flow in Kubectls::each(&cluster, "diff").await {
        for (name, mode) in [("client", None), ("server", Some("--server-side"))] {
            let same = flow.configmap(name, &[("color", "blue")]);
            let apply: Vec<&str> = ["apply", "-f", &same].into_iter().chain(mode).collect();
            flow.ok(&apply);
            let before = flow.configmap_object(name).await;

            let diff = |file: &str| {
                let args: Vec<&str> = ["diff", "-f", file].into_iter().chain(mode).collect();
                flow.run(&args)
            };
            let unchanged = diff(&same);
            assert_eq!(unchanged.status.code(), Some(0), "{name}: {unchanged:?}");
            assert_eq!(unchanged.stdout, "", "{name}: {unchanged:?}");

            let changed = flow.configmap(name, &[("color", "red")]);
            let changed = diff(&changed);
            assert_eq!(changed.status.code(), Some(1), "{name}: {changed:?}");
            let lines: Vec<&str> = changed.stdout.lines().collect();
            for expected in ["-  color: blue", "+  color: red"] {
                assert!(
                    lines.contains(&expected),
                    "{name}: no {expected:?} in:\n{}",
                    changed.stdout
                );
            }
            let changed_lines = lines
                .iter()
                .filter(|line| {
                    (line.starts_with('-') || line.starts_with('+'))
                        && !line.starts_with("---")
                        && !line.starts_with("+++")
                })
                .filter(|line| !line.contains("last-applied-configuration"))
                .filter(|line| !line.contains("\"apiVersion\":\"v1\""))
                .count();
            assert_eq!(
                changed_lines, 2,
                "{name}: only color changes:\n{}",
                changed.stdout
            );
            assert_eq!(
                flow.configmap_object(name).await,
                before,
                "{name}: diff wrote"
            );
        }
    }
}

/// One kind for [`kubectl_client_side_then_server_side_apply`]: its manifest for a value, where
/// the value is in the object (JSON pointer) and where its ownership is in `fieldsV1`.
struct Upgrade {
    resource: &'static str,
    collection: &'static str,
    manifest: fn(&Kubectls, &str) -> String,
    values: [&'static str; 3],
    value_at: &'static str,
    owned_at: &'static str,
}

/// `kubectl apply` (client-side: create, then a strategic merge patch) and then
/// `kubectl apply --server-side`, on a ConfigMap and on a Deployment (a CRD with patch merge
/// keys): first with the same values (kubectl then moves client-side apply's fields to its own
/// entry), then with a changed value.
#[tokio::test]
async fn kubectl_client_side_then_server_side_apply() {
    let cluster = Cluster::new("ssa-kubectl-upgrade", &["deployments.apps"]).await;
    let cases = [
        Upgrade {
            resource: "deployment.apps/web",
            collection: "/apis/apps/v1/namespaces/{ns}/deployments",
            manifest: |flow, image| {
                flow.file(
                    "web",
                    &format!(
                        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  \
                         selector:\n    matchLabels:\n      app: web\n  template:\n    \
                         metadata:\n      labels:\n        app: web\n    spec:\n      \
                         containers:\n      - name: web\n        image: {image}\n      \
                         - name: log\n        image: busybox\n"
                    ),
                )
            },
            values: ["web:1", "web:2", "web:3"],
            value_at: "/spec/template/spec/containers/0/image",
            owned_at: "/f:spec/f:template/f:spec/f:containers/k:{\"name\":\"web\"}/f:image",
        },
        Upgrade {
            resource: "configmap/settings",
            collection: "/api/v1/namespaces/{ns}/configmaps",
            manifest: |flow, color| {
                flow.configmap("settings", &[("color", color), ("shape", "round")])
            },
            values: ["blue", "green", "red"],
            value_at: "/data/color",
            owned_at: "/f:data/f:color",
        },
    ];
    for flow in Kubectls::each(&cluster, "upgrade").await {
        // Client-side apply (create, then a patch), then a server-side apply of the same values.
        for case in &cases {
            let name = case.resource.split('/').nth(1).unwrap();
            let [created, patched, _] = case.values;
            let file = (case.manifest)(&flow, created);
            let printed = flow.ok(&["apply", "-f", &file]);
            assert_eq!(printed.trim(), format!("{} created", case.resource));
            let file = (case.manifest)(&flow, patched);
            let printed = flow.ok(&["apply", "-f", &file]);
            assert_eq!(printed.trim(), format!("{} configured", case.resource));
            let object = flow.object(case.collection, name).await;
            assert_eq!(
                object.pointer(case.value_at),
                Some(&json!(patched)),
                "{object:#}"
            );
            assert_managers(&object, &[("kubectl-client-side-apply", "Update")]);

            let printed = flow.ok(&["apply", "--server-side", "-f", &file]);
            assert_eq!(
                printed.trim(),
                format!("{} serverside-applied", case.resource)
            );
            let object = flow.object(case.collection, name).await;
            // kubectl moves client-side apply's fields to its own entry (a JSON patch of
            // managedFields and resourceVersion) once applied.
            assert_managers(
                &object,
                &[("kubectl", "Apply"), ("kubectl-last-applied", "Apply")],
            );
            assert!(owns(&object, "kubectl", case.owned_at), "{object:#}");
        }
        // A server-side apply of a changed value takes the field from client-side apply.
        for case in &cases {
            let name = case.resource.split('/').nth(1).unwrap();
            let file = (case.manifest)(&flow, case.values[2]);
            let printed = flow.ok(&["apply", "--server-side", "-f", &file]);
            assert_eq!(
                printed.trim(),
                format!("{} serverside-applied", case.resource)
            );
            let object = flow.object(case.collection, name).await;
            assert_eq!(
                object.pointer(case.value_at),
                Some(&json!(case.values[2])),
                "{object:#}"
            );
            assert!(owns(&object, "kubectl", case.owned_at), "{object:#}");
            assert!(
                !owns(&object, "kubectl-client-side-apply", case.owned_at),
                "{object:#}"
            );
        }
    }
}

/// `kubectl apply --server-side` with a changed value right after `kubectl apply` (client-side)
/// succeeds without `--force-conflicts`: kube-apiserver lets manager `kubectl` take the fields
/// that the last-applied annotation lists, and keeps that annotation in sync.
#[tokio::test]
async fn kubectl_server_side_apply_takes_over_a_changed_client_side_field() {
    let cluster = Cluster::new("ssa-kubectl-takeover", &[]).await;
    for flow in Kubectls::each(&cluster, "takeover").await {
        let file = flow.configmap("direct", &[("color", "blue"), ("shape", "round")]);
        flow.ok(&["apply", "-f", &file]);
        let file = flow.configmap("direct", &[("color", "red"), ("shape", "round")]);
        let printed = flow.ok(&["apply", "--server-side", "-f", &file]);
        assert_eq!(printed.trim(), "configmap/direct serverside-applied");
        let object = flow.configmap_object("direct").await;
        assert_eq!(object["data"], json!({"color": "red", "shape": "round"}));
        assert!(owns(&object, "kubectl", "/f:data/f:color"), "{object:#}");
        assert!(
            !owns(&object, "kubectl-client-side-apply", "/f:data/f:color"),
            "{object:#}"
        );
        let last_applied =
            object["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
                .as_str()
                .unwrap_or_else(|| panic!("no last-applied annotation: {object:#}"));
        let last_applied: Value = serde_json::from_str(last_applied).unwrap();
        assert_eq!(last_applied["data"]["color"], "red", "{object:#}");
    }
}

/// `kubectl edit` (an EDITOR script) records its change as a `kubectl-edit` Update entry, which the
/// applier then conflicts with.
#[tokio::test]
async fn kubectl_edit_records_an_update_entry() {
    let cluster = Cluster::new("ssa-kubectl-edit", &[]).await;
    for flow in Kubectls::each(&cluster, "edit").await {
        let file = flow.configmap("edited", &[("color", "blue"), ("shape", "round")]);
        flow.ok(&["apply", "--server-side", "-f", &file]);

        let server = format!("--server={}", flow.cluster.url());
        let args = flow.args(&server, &["edit", "configmap", "edited"]);
        let script = "sed -i 's/color: blue/color: red/' \"$1\"";
        let edited = flow.kubectl.run_with_editor(&args, script);
        let edited = edited.success(flow.kubectl.version(), &args);
        assert_eq!(edited.trim(), "configmap/edited edited");

        let object = flow.configmap_object("edited").await;
        assert_eq!(object["data"], json!({"color": "red", "shape": "round"}));
        assert_managers(&object, &[("kubectl", "Apply"), ("kubectl-edit", "Update")]);
        assert_fields(&object, "kubectl", json!({"f:data": {"f:shape": {}}}));
        assert_fields(&object, "kubectl-edit", json!({"f:data": {"f:color": {}}}));

        let refused = flow.fails(&["apply", "--server-side", "-f", &file]);
        let expected = one_conflict("\"kubectl-edit\" using v1", ".data.color");
        assert!(
            refused.contains(&expected),
            "no {expected:?} in:\n{refused}"
        );
    }
}

/// One bad apply of [`bad_input_writes_nothing`] and the Status (code, reason, message) it gets.
struct BadApply<'a> {
    what: &'a str,
    path: &'a str,
    query: &'a str,
    body: String,
    expected: (u16, &'a str, String),
}

/// Bad apply and patch bodies get Kubernetes' Status and code, and write nothing: the object
/// keeps its resourceVersion, and one that did not exist is not created.
#[tokio::test]
async fn bad_input_writes_nothing() {
    let cluster = Cluster::new("ssa-bad-input", &["deployments.apps"]).await;
    let path = format!("{}/target", configmaps(&cluster));
    let good = configmap("target", json!({"data": {"k": "v"}}));
    let live = cluster.apply(&path, "owner", &good).await;
    let deployment_path = format!("{}/target", deployments(&cluster));
    let deployment = deployment("target", true, json!([{"name": "c", "image": "i"}]));
    let live_deployment = cluster.apply(&deployment_path, "owner", &deployment).await;
    let missing = format!("{}/missing", configmaps(&cluster));

    let with = |config: &Value, patch: Value| {
        let mut config = config.clone();
        merge_into(&mut config, patch);
        config.to_string()
    };
    let invalid_type = |gvk: &str| (400, "BadRequest", format!("invalid object type: {gvk}"));
    let no_manager = (
        422,
        "Invalid",
        "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required \
         for apply patch"
            .to_owned(),
    );
    let cases = [
        BadApply {
            what: "another kind",
            path: &path,
            query: "fieldManager=owner",
            body: with(&good, json!({"kind": "Secret", "data": {"k": "dg=="}})),
            expected: invalid_type("/v1, Kind=Secret"),
        },
        BadApply {
            what: "another apiVersion (core)",
            path: &path,
            query: "fieldManager=owner",
            body: with(&good, json!({"apiVersion": "v2", "data": {"k": "changed"}})),
            expected: invalid_type("/v2, Kind=ConfigMap"),
        },
        BadApply {
            what: "another apiVersion (apps)",
            path: &deployment_path,
            query: "fieldManager=owner",
            body: with(
                &deployment,
                json!({"apiVersion": "apps/v1beta1", "spec": {"replicas": 3}}),
            ),
            expected: invalid_type("apps/v1beta1, Kind=Deployment"),
        },
        BadApply {
            what: "another name",
            path: &path,
            query: "fieldManager=owner",
            body: with(
                &good,
                json!({"metadata": {"name": "other"}, "data": {"k": "changed"}}),
            ),
            expected: (
                400,
                "BadRequest",
                "the name of the object (other) does not match the name on the URL (target)"
                    .to_owned(),
            ),
        },
        BadApply {
            what: "no fieldManager",
            path: &path,
            query: "force=true",
            body: with(&good, json!({"data": {"k": "changed"}})),
            expected: no_manager.clone(),
        },
        BadApply {
            what: "managedFields in the body",
            path: &path,
            query: "fieldManager=owner",
            body: with(
                &good,
                json!({"metadata": {"managedFields": [{"manager": "owner", "operation": "Apply"}]},
                       "data": {"k": "changed"}}),
            ),
            expected: (
                400,
                "BadRequest",
                "metadata.managedFields must be nil".to_owned(),
            ),
        },
        BadApply {
            what: "another kind, creating",
            path: &missing,
            query: "fieldManager=owner",
            body: with(
                &good,
                json!({"kind": "Secret", "metadata": {"name": "missing"}}),
            ),
            expected: invalid_type("/v1, Kind=Secret"),
        },
        BadApply {
            what: "no fieldManager, creating",
            path: &missing,
            query: "",
            body: with(&good, json!({"metadata": {"name": "missing"}})),
            expected: no_manager,
        },
    ];
    // Every case is checked before a wrong message fails the test.
    let mut wrong_messages = Vec::new();
    for case in cases {
        let (code, reason, message) = &case.expected;
        let before = cluster.server.get(case.path).await;
        let response = cluster.apply_raw(case.path, case.query, case.body).await;
        let status = assert_bad(case.what, &response, *code, reason);
        if status["message"] != message.as_str() {
            wrong_messages.push(format!(
                "{}: {} instead of {message:?}",
                case.what, status["message"]
            ));
        }
        assert_unchanged(&cluster, case.what, case.path, &before).await;
    }

    // Bodies that do not parse, as apply and as the other patch types.
    let garbage = "apiVersion: v1\nkind: [ConfigMap\n  : - : {\n";
    let response = cluster
        .apply_raw(&path, "fieldManager=owner", garbage)
        .await;
    let status = assert_bad("YAML garbage", &response, 400, "BadRequest");
    let message = status["message"].as_str().unwrap_or_default();
    assert!(message.starts_with("error decoding YAML: "), "{status}");
    for content_type in [
        "application/merge-patch+json",
        "application/strategic-merge-patch+json",
        "application/json-patch+json",
    ] {
        let url = format!("{path}?fieldManager=owner");
        let response = cluster
            .server
            .send(Method::PATCH, &url, content_type, garbage)
            .await;
        assert_bad(content_type, &response, 400, "BadRequest");
    }
    assert_eq!(cluster.get(&path).await, live, "a bad body wrote");
    assert_eq!(cluster.get(&deployment_path).await, live_deployment);
    assert!(wrong_messages.is_empty(), "{wrong_messages:#?}");
}

/// `response` is a failure Status with `code` and `reason`; the Status.
fn assert_bad(what: &str, response: &Response, code: u16, reason: &str) -> Value {
    assert_eq!(response.status, code, "{what}: {}", response.text());
    let status = response.json();
    assert_eq!(status["kind"], "Status", "{what}: {status}");
    assert_eq!(status["status"], "Failure", "{what}: {status}");
    assert_eq!(status["reason"], reason, "{what}: {status}");
    assert_eq!(status["code"], code, "{what}: {status}");
    status
}

/// The object at `path` is as `before` (a GET answer) says: the same object, or still missing.
async fn assert_unchanged(cluster: &Cluster, what: &str, path: &str, before: &Response) {
    let after = cluster.server.get(path).await;
    assert_eq!(after.status, before.status, "{what}: {}", after.text());
    if before.status == 200 {
        assert_eq!(after.json(), before.json(), "{what} wrote");
    }
}
