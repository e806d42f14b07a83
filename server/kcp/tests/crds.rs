//! CustomResourceDefinitions against a started `kcp` the way people use them: the CRDs this project
//! generates (the operator's, and the workload types the end-to-end host installs) with realistic
//! objects, and a hand-written CRD driven through kubectl 1.27 and 1.33 (apply, get with printer
//! columns and short names and categories, explain, edit, scale, field validation, delete).
//!
//! Every scenario shares one server and works in a logical cluster of its own.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use kcp_testing::{KcpProcess, Kubectl, SharedKcp};
use reqwest::Method;
use serde_json::{Value, json};

static SERVER: SharedKcp = SharedKcp::new(env!("CARGO_BIN_EXE_kcp"), "crds");

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|error| panic!("not JSON ({error}): {text}"))
}

fn yaml(path: &Path) -> Value {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|error| panic!("{}: {error}", path.display()));
    yaml_serde::from_str(&text).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

/// A file of the repository, by its path from the workspace root.
fn repository_file(path: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path)
}

/// A file of `tests/fixtures/`.
fn fixture(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// The `*.yaml` files of a repository directory, sorted.
fn yaml_files(dir: &str) -> Vec<std::path::PathBuf> {
    let dir = repository_file(dir);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|error| panic!("{}: {error}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "yaml"))
        .collect();
    files.sort();
    files
}

/// The row starting with `name` of kubectl's table output, as (column, cell) pairs: cells are
/// cut at the columns' offsets in the header, so an empty cell stays in place.
fn table_row(output: &str, name: &str) -> Vec<(String, String)> {
    let mut lines = output.lines();
    let header = lines.next().expect("a header line");
    let starts: Vec<usize> = header
        .char_indices()
        .filter(|&(at, c)| c != ' ' && (at == 0 || header.as_bytes()[at - 1] == b' '))
        .map(|(at, _)| at)
        .collect();
    let row = lines
        .find(|line| line.split_whitespace().next() == Some(name))
        .unwrap_or_else(|| panic!("no row {name:?} in:\n{output}"));
    let cell = |line: &str, at: usize| -> String {
        let end = starts.iter().find(|&&start| start > at).copied();
        let end = end.unwrap_or(line.len()).min(line.len());
        line.get(at.min(end)..end)
            .unwrap_or_default()
            .trim()
            .to_owned()
    };
    starts
        .iter()
        .map(|&at| (cell(header, at), cell(row, at)))
        .collect()
}

/// Asserts the columns of `row` are `expected` (name, cell); `None` for a cell that varies.
fn assert_row(row: &[(String, String)], expected: &[(&str, Option<&str>)], output: &str) {
    let headers: Vec<&str> = row.iter().map(|(header, _)| header.as_str()).collect();
    let wanted: Vec<&str> = expected.iter().map(|(header, _)| *header).collect();
    assert_eq!(headers, wanted, "{output}");
    for ((header, cell), (_, value)) in row.iter().zip(expected) {
        if let Some(value) = value {
            assert_eq!(cell, value, "column {header}:\n{output}");
        }
    }
}

/// The names of a list's items.
fn names(list: &Value) -> Vec<&str> {
    list["items"]
        .as_array()
        .unwrap_or_else(|| panic!("not a list: {list}"))
        .iter()
        .map(|item| item["metadata"]["name"].as_str().unwrap())
        .collect()
}

/// One object of a generated type: where it lives, a merge patch of its spec, and the field
/// (JSON pointer) with the value the patch sets.
struct Generated {
    collection: &'static str,
    name: &'static str,
    patch: Value,
    patched: (&'static str, Value),
}

/// The operator's CRDs and the workload CRDs are admitted and established; kubectl applies a
/// RootShard, a Deployment, a core-group Service, a StatefulSet and a PodDisruptionBudget, which are
/// then listed, watched, patched and deleted over HTTP.
#[tokio::test]
async fn generated_crds_serve_their_objects() {
    let server = SERVER.get().await;
    let cluster = "crd-generated";
    let files = [yaml_files("crds"), yaml_files("e2e/workload-crds")].concat();
    assert!(files.len() >= 15, "{files:?}");
    let installs = files.iter().map(|file| {
        let crd = yaml(file);
        let server = &server;
        async move { (server.install_crd(cluster, &crd).await, crd) }
    });
    for (installed, crd) in futures::future::join_all(installs).await {
        assert_eq!(installed["metadata"]["name"], crd["metadata"]["name"]);
        let accepted = installed["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["type"] == "NamesAccepted" && c["status"] == "True");
        assert!(accepted, "{installed:#}");
        let accepted = &installed["status"]["acceptedNames"];
        for field in ["plural", "singular", "kind", "shortNames", "categories"] {
            assert_eq!(
                accepted[field], crd["spec"]["names"][field],
                "{installed:#}"
            );
        }
        let list_kind = format!("{}List", crd["spec"]["names"]["kind"].as_str().unwrap());
        assert_eq!(accepted["listKind"], list_kind.as_str(), "{installed:#}");
    }

    let kubectl = Kubectl::new("1.33", &server.kubeconfig());
    let at = format!("--server={}", server.url(&format!("/clusters/{cluster}")));
    let manifests = fixture("workloads.yaml");
    let applied = kubectl.ok(&[&at, "apply", "-f", manifests.to_str().unwrap()]);
    assert_eq!(
        applied.lines().collect::<Vec<_>>(),
        [
            "namespace/workloads created",
            "rootshard.operator.kcp.io/root created",
            "deployment.apps/web created",
            "service/web created",
            "statefulset.apps/db created",
            "poddisruptionbudget.policy/web created",
        ]
    );
    let listed = kubectl.ok(&[&at, "-n", "workloads", "get", "rootshards"]);
    let row = table_row(&listed, "root");
    let expected = [
        ("NAME", Some("root")),
        ("HOSTNAME", Some("api.kcp.example.com")),
        ("VERSION", Some("")),
        ("PHASE", Some("")),
        ("AGE", None),
    ];
    assert_row(&row, &expected, &listed);
    let listed = kubectl.ok(&[
        &at,
        "-n",
        "workloads",
        "get",
        "deploy,svc,sts,pdb",
        "-o",
        "name",
    ]);
    assert_eq!(
        listed.lines().collect::<Vec<_>>(),
        [
            "deployment.apps/web",
            "service/web",
            "statefulset.apps/db",
            "poddisruptionbudget.policy/web",
        ]
    );

    let prefix = format!("/clusters/{cluster}");
    let root = server
        .get(&format!(
            "{prefix}/apis/operator.kcp.io/v1alpha1/namespaces/workloads/rootshards/root"
        ))
        .await
        .json();
    assert_eq!(root["spec"]["etcd"]["managed"]["replicas"], 3, "{root}");
    assert_eq!(root["spec"]["auth"]["oidc"]["clientID"], "kcp", "{root}");
    assert_eq!(root["metadata"]["generation"], 1, "{root}");
    // The core-group CRD is served beside the built-in types, only in this logical cluster.
    let core = server.get(&format!("{prefix}/api/v1")).await.json();
    let services = core["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "services")
        .unwrap_or_else(|| panic!("no services in {core}"));
    assert_eq!(services["kind"], "Service");
    assert_eq!(services["shortNames"], json!(["svc"]));
    assert!(core.to_string().contains("\"configmaps\""), "{core}");
    let root_core = server.get("/clusters/root/api/v1").await.json();
    assert!(
        !root_core.to_string().contains("\"services\""),
        "{root_core}"
    );

    let objects = [
        Generated {
            collection: "/apis/operator.kcp.io/v1alpha1/namespaces/workloads/rootshards",
            name: "root",
            patch: json!({"spec": {"external": {"port": 443}}}),
            patched: ("/spec/external/port", json!(443)),
        },
        Generated {
            collection: "/apis/apps/v1/namespaces/workloads/deployments",
            name: "web",
            patch: json!({"spec": {"replicas": 3}}),
            patched: ("/spec/replicas", json!(3)),
        },
        Generated {
            collection: "/api/v1/namespaces/workloads/services",
            name: "web",
            patch: json!({"spec": {"type": "NodePort"}}),
            patched: ("/spec/type", json!("NodePort")),
        },
        Generated {
            collection: "/apis/apps/v1/namespaces/workloads/statefulsets",
            name: "db",
            patch: json!({"spec": {"replicas": 2}}),
            patched: ("/spec/replicas", json!(2)),
        },
        Generated {
            collection: "/apis/policy/v1/namespaces/workloads/poddisruptionbudgets",
            name: "web",
            patch: json!({"spec": {"minAvailable": "50%"}}),
            patched: ("/spec/minAvailable", json!("50%")),
        },
    ];
    for object in objects {
        list_watch_patch_delete(&server, &format!("{prefix}{}", object.collection), &object).await;
    }
}

/// Lists the collection (the object is there), watches from the list's revision while the object
/// is patched and deleted, and checks what the watch and later reads see.
async fn list_watch_patch_delete(server: &KcpProcess, collection: &str, object: &Generated) {
    let list = server.get(collection).await;
    assert_eq!(list.status, 200, "{collection}: {}", list.text());
    let list = list.json();
    assert_eq!(names(&list), [object.name], "{collection}");
    let revision = list["metadata"]["resourceVersion"].as_str().unwrap();
    let mut watch = server
        .watch(&format!("{collection}?watch=1&resourceVersion={revision}"))
        .await;
    let path = format!("{collection}/{}", object.name);
    let patched = server
        .send(
            Method::PATCH,
            &path,
            "application/merge-patch+json",
            object.patch.to_string(),
        )
        .await;
    assert_eq!(patched.status, 200, "{path}: {}", patched.text());
    let (pointer, value) = &object.patched;
    let patched = patched.json();
    assert_eq!(patched.pointer(pointer), Some(value), "{patched}");
    assert_eq!(patched["metadata"]["generation"], 2, "{patched}");
    let event = watch.expect_event().await;
    assert_eq!(event["type"], "MODIFIED", "{event}");
    assert_eq!(event["object"].pointer(pointer), Some(value), "{event}");

    let deleted = server
        .send(Method::DELETE, &path, "application/json", "")
        .await;
    assert_eq!(deleted.status, 200, "{path}: {}", deleted.text());
    let event = watch.expect_event().await;
    assert_eq!(event["type"], "DELETED", "{event}");
    assert_eq!(event["object"]["metadata"]["name"], object.name, "{event}");
    let gone = server.get(&path).await;
    assert_eq!(gone.status, 404, "{path}: {}", gone.text());
}

#[tokio::test]
async fn kubectl_1_27() {
    kubectl_flow("1.27").await;
}

#[tokio::test]
async fn kubectl_1_33() {
    kubectl_flow("1.33").await;
}

/// One kubectl release working in namespace `demo` of a logical cluster of its own.
struct Flow {
    kubectl: Kubectl,
    server: String,
}

const CRD: &str = "customresourcedefinition.apiextensions.k8s.io/widgets.demo.kcp.io";

impl Flow {
    fn args<'a>(&'a self, args: &[&'a str]) -> Vec<&'a str> {
        [&[self.server.as_str(), "-n", "demo"], args].concat()
    }

    /// `kubectl --server=… -n demo args…`, which must succeed; its stdout.
    fn ok(&self, args: &[&str]) -> String {
        self.kubectl.ok(&self.args(args))
    }

    /// `kubectl --server=… -n demo args…`, which must fail; its stderr.
    fn fails(&self, args: &[&str]) -> String {
        self.kubectl.fails(&self.args(args))
    }

    /// Must succeed and print exactly `expected` (one line).
    fn prints(&self, args: &[&str], expected: &str) {
        assert_eq!(self.ok(args).trim(), expected, "kubectl {args:?}");
    }

    /// `.spec.<field>` of widget `name`.
    fn spec(&self, name: &str, field: &str) -> String {
        let path = format!("jsonpath={{.spec.{field}}}");
        self.ok(&["get", "widget", name, "-o", &path])
    }

    /// Writes a Widget manifest into kubectl's home; its path.
    fn manifest(&self, name: &str, spec: &str) -> String {
        let file = self.kubectl.home().join(format!("{name}.yaml"));
        let text = format!(
            "apiVersion: demo.kcp.io/v1\nkind: Widget\nmetadata:\n  name: {name}\nspec:\n{spec}"
        );
        std::fs::write(&file, text).unwrap();
        file.to_str().unwrap().to_owned()
    }
}

async fn kubectl_flow(version: &str) {
    let server = SERVER.get().await;
    let cluster = format!("crd-kubectl-{}", version.replace('.', "-"));
    let flow = Flow {
        kubectl: Kubectl::new(version, &server.kubeconfig()),
        server: format!("--server={}", server.url(&format!("/clusters/{cluster}"))),
    };
    let crd_file = fixture("widgets.demo.kcp.io.yaml");
    let crd_file = crd_file.to_str().unwrap();
    install_with_kubectl(&flow, crd_file);
    flow.prints(&["create", "namespace", "demo"], "namespace/demo created");
    let w1 = flow.manifest("w1", "  size: 10Mi\n  tier: gold\n");
    flow.prints(&["apply", "-f", &w1], "widget.demo.kcp.io/w1 created");

    get_with_columns_short_names_and_categories(&flow);
    explain(&flow);
    edit_and_scale(&flow);
    rules_refuse_bad_changes(&flow);
    field_validation(&flow);

    flow.prints(
        &["delete", "widget", "w1"],
        "widget.demo.kcp.io \"w1\" deleted",
    );
    let gone = flow.fails(&["get", "widget", "w1"]);
    assert!(gone.contains("NotFound"), "{gone}");

    // Deleting the CRD deletes its objects: once it is back, w2 is not.
    let w2 = flow.manifest("w2", "  size: 1Gi\n");
    flow.prints(&["apply", "-f", &w2], "widget.demo.kcp.io/w2 created");
    flow.prints(
        &["delete", "-f", crd_file, "--timeout=120s"],
        "customresourcedefinition.apiextensions.k8s.io \"widgets.demo.kcp.io\" deleted",
    );
    let raw = format!("/clusters/{cluster}/apis/demo.kcp.io/v1/namespaces/demo/widgets");
    server
        .wait_for("widgets no longer served", &raw, |r| r.status == 404)
        .await;
    install_with_kubectl(&flow, crd_file);
    let listed = json(&flow.ok(&["get", "--raw", &raw]));
    assert_eq!(names(&listed), Vec::<&str>::new(), "w2 outlived its CRD");
}

/// `apply` of the CRD, then `wait` until it is Established.
fn install_with_kubectl(flow: &Flow, crd_file: &str) {
    flow.prints(&["apply", "-f", crd_file], &format!("{CRD} created"));
    flow.prints(
        &[
            "wait",
            "--for=condition=Established",
            "-f",
            crd_file,
            "--timeout=60s",
        ],
        &format!("{CRD} condition met"),
    );
}

fn get_with_columns_short_names_and_categories(flow: &Flow) {
    let listed = flow.ok(&["get", "widgets"]);
    let row = table_row(&listed, "w1");
    let expected = [
        ("NAME", Some("w1")),
        ("COLOR", Some("blue")),
        ("REPLICAS", Some("1")),
        ("PHASE", Some("")),
        ("AGE", None),
    ];
    assert_row(&row, &expected, &listed);
    assert_eq!(flow.spec("w1", "color"), "blue");
    let short = flow.ok(&["get", "wdg", "w1", "-o", "name"]);
    assert_eq!(short.trim(), "widget.demo.kcp.io/w1");
    let cache = flow.kubectl.home().join("fresh-cache");
    let cache = format!("--cache-dir={}", cache.display());
    for category in ["all", "gadgets"] {
        let listed = flow.ok(&[&cache, "get", category, "-o", "name"]);
        assert!(
            listed.lines().any(|line| line == "widget.demo.kcp.io/w1"),
            "get {category}:\n{listed}"
        );
    }
}

fn explain(flow: &Flow) {
    let explained = flow.ok(&["explain", "widget.spec.color"]);
    for expected in ["Widget", "demo.kcp.io", "color", "The paint of the widget"] {
        assert!(
            explained.contains(expected),
            "no {expected:?} in:\n{explained}"
        );
    }
    let explained = flow.ok(&["explain", "widgets.spec"]);
    for expected in [
        "What the widget should look like",
        "size",
        "tier",
        "replicas",
    ] {
        assert!(
            explained.contains(expected),
            "no {expected:?} in:\n{explained}"
        );
    }
}

fn edit_and_scale(flow: &Flow) {
    let editor = flow.kubectl.home().join("editor.sh");
    std::fs::write(
        &editor,
        "#!/bin/sh\nsed -i 's/size: 10Mi/size: 20Mi/' \"$1\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&editor, PermissionsExt::from_mode(0o755)).unwrap();
    let args = flow.args(&["edit", "widget", "w1"]);
    let env = [("EDITOR", editor.to_str().unwrap()), ("KUBE_EDITOR", "")];
    let edited = flow.kubectl.run_with_env(&args, &env);
    let edited = edited.success(flow.kubectl.version(), &args);
    assert_eq!(edited.trim(), "widget.demo.kcp.io/w1 edited");
    assert_eq!(flow.spec("w1", "size"), "20Mi");

    flow.prints(
        &["scale", "widget", "w1", "--replicas=3"],
        "widget.demo.kcp.io/w1 scaled",
    );
    assert_eq!(flow.spec("w1", "replicas"), "3");
    let generation = flow.ok(&[
        "get",
        "widget",
        "w1",
        "-o",
        "jsonpath={.metadata.generation}",
    ]);
    assert_eq!(generation, "3", "create, edit and scale");
}

/// Schema and CEL rules refuse patches, with the rule's message.
fn rules_refuse_bad_changes(flow: &Flow) {
    for (patch, expected) in [
        (
            r#"{"spec":{"replicas":11}}"#,
            "a widget has at most 10 replicas",
        ),
        (r#"{"spec":{"tier":"silver"}}"#, "tier is immutable"),
        (
            r#"{"spec":{"color":"purple"}}"#,
            r#"Unsupported value: "purple""#,
        ),
        (
            r#"{"spec":{"size":"big"}}"#,
            "spec.size in body should match",
        ),
    ] {
        let refused = flow.fails(&["patch", "widget", "w1", "--type=merge", "-p", patch]);
        assert!(
            refused.contains("is invalid") && refused.contains(expected),
            "{patch}: {refused}"
        );
    }
    assert_eq!(flow.spec("w1", "tier"), "gold");
}

/// `apply --validate=strict` refuses an unknown field; `--validate=warn` applies and warns. Both
/// for a new object (kubectl creates it) and for an existing one (kubectl patches it).
fn field_validation(flow: &Flow) {
    for (name, existing) in [("w3", false), ("w1", true)] {
        let spec = "  size: 20Mi\n  tier: gold\n  replicas: 3\n  x: 1\n";
        let manifest = flow.manifest(name, spec);
        let refused = flow.fails(&["apply", "--validate=strict", "-f", &manifest]);
        assert!(
            refused.contains(r#"unknown field "spec.x""#),
            "{name}: {refused}"
        );
        if !existing {
            let missing = flow.fails(&["get", "widget", name]);
            assert!(missing.contains("NotFound"), "{missing}");
        }
        let args = flow.args(&["apply", "--validate=warn", "-f", &manifest]);
        let run = flow.kubectl.run(&args);
        assert!(
            run.stderr.contains(r#"Warning: unknown field "spec.x""#),
            "{name}: {}",
            run.stderr
        );
        let applied = run.success(flow.kubectl.version(), &args);
        let outcome = if existing { "configured" } else { "created" };
        assert_eq!(
            applied.trim(),
            format!("widget.demo.kcp.io/{name} {outcome}")
        );
        let object = json(&flow.ok(&["get", "widget", name, "-o", "json"]));
        assert!(object["spec"].get("x").is_none(), "{object}");
        assert_eq!(object["spec"]["size"], "20Mi", "{object}");
    }
    flow.prints(
        &["delete", "widget", "w3"],
        "widget.demo.kcp.io \"w3\" deleted",
    );
}
