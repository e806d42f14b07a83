//! Real kubectl against a started `kcp`: the everyday commands people run, with the oldest and the
//! newest kubectl we support, asserting on what kubectl prints.
//!
//! kubectl is the client that decides whether this server "is a Kubernetes API server" for most
//! users: it negotiates Table output, downloads OpenAPI for `apply` and `explain`, caches discovery
//! and watches in its own ways, and its versions differ in those details. Every scenario shares one
//! server and uses names (namespaces, logical clusters) no other scenario uses; commands within a
//! scenario run one after another.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::PermissionsExt;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use kcp_testing::{Kubectl, SharedKcp};
use serde_json::Value;

static SERVER: SharedKcp = SharedKcp::new(env!("CARGO_BIN_EXE_kcp"), "kubectl");

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|error| panic!("not JSON ({error}): {text}"))
}

/// The names of a list's items.
/// The names of a list's items, without the `kube-root-ca.crt` ConfigMap every namespace holds.
fn names(list: &Value) -> Vec<&str> {
    list["items"]
        .as_array()
        .unwrap_or_else(|| panic!("not a list: {list}"))
        .iter()
        .map(|item| item["metadata"]["name"].as_str().unwrap())
        .filter(|name| *name != "kube-root-ca.crt")
        .collect()
}

/// The header cells and the row starting with `name` of kubectl's table output.
fn table_row<'a>(output: &'a str, name: &str) -> (Vec<&'a str>, Vec<&'a str>) {
    let mut lines = output.lines();
    let header = lines
        .next()
        .expect("a header line")
        .split_whitespace()
        .collect();
    let row = lines
        .map(|line| line.split_whitespace().collect::<Vec<_>>())
        .find(|cells| cells.first() == Some(&name))
        .unwrap_or_else(|| panic!("no row {name:?} in:\n{output}"));
    (header, row)
}

#[tokio::test]
async fn kubectl_1_27() {
    kubectl_flow("1.27").await;
}

#[tokio::test]
async fn kubectl_1_33() {
    kubectl_flow("1.33").await;
}

/// One kubectl release working in its own namespace of the shared server.
struct Flow<'a> {
    kubectl: &'a Kubectl,
    ns: &'a str,
}

impl Flow<'_> {
    /// `kubectl -n <ns> args…`, which must succeed; its stdout.
    fn ok(&self, args: &[&str]) -> String {
        self.kubectl.ok(&[&["-n", self.ns], args].concat())
    }

    /// `kubectl -n <ns> args…`, which must fail; its stderr.
    fn fails(&self, args: &[&str]) -> String {
        self.kubectl.fails(&[&["-n", self.ns], args].concat())
    }

    /// `kubectl -n <ns> args…` must succeed and print exactly `expected` (one line).
    fn prints(&self, args: &[&str], expected: &str) {
        assert_eq!(self.ok(args).trim(), expected, "kubectl {args:?}");
    }

    /// The object `kind/name` as JSON.
    fn object(&self, kind: &str, name: &str) -> Value {
        json(&self.ok(&["get", kind, name, "-o", "json"]))
    }

    /// `.data.<key>` of ConfigMap `literal`.
    fn literal(&self, key: &str) -> String {
        let path = format!("jsonpath={{.data.{key}}}");
        self.ok(&["get", "configmap", "literal", "-o", &path])
    }
}

async fn kubectl_flow(version: &str) {
    let server = SERVER.get().await;
    let kubectl = Kubectl::new(version, &server.kubeconfig());
    let ns = format!("flow-{}", version.replace('.', "-"));
    let flow = Flow {
        kubectl: &kubectl,
        ns: &ns,
    };

    // get / create
    let namespaces = kubectl.ok(&["get", "namespaces"]);
    for expected in ["default", "kube-system"] {
        let (header, row) = table_row(&namespaces, expected);
        assert_eq!(header, ["NAME", "STATUS", "AGE"]);
        assert_eq!(row[1], "Active", "{namespaces}");
    }
    flow.prints(
        &["create", "namespace", &ns],
        &format!("namespace/{ns} created"),
    );
    flow.prints(
        &[
            "create",
            "configmap",
            "literal",
            "--from-literal=color=blue",
        ],
        "configmap/literal created",
    );

    client_side_apply(&flow);
    patch_edit_label_annotate(&flow);
    output_formats(&flow);
    watch_sees_a_change(&flow);

    // delete
    flow.prints(
        &["delete", "configmap", "applied"],
        "configmap \"applied\" deleted",
    );
    let missing = flow.fails(&["get", "configmap", "applied"]);
    assert!(
        missing.contains("(NotFound)") && missing.contains("\"applied\" not found"),
        "{missing}"
    );

    discovery_and_explain(&kubectl);
    secrets(&flow);
    raw_cluster_paths(&flow, version);

    // delete namespace with content: returns once the namespace is gone, and the content with it
    flow.prints(
        &["delete", "namespace", &ns, "--timeout=120s"],
        &format!("namespace \"{ns}\" deleted"),
    );
    let gone = flow.fails(&["get", "namespace", &ns]);
    assert!(gone.contains("(NotFound)"), "{gone}");
    for resource in ["configmaps", "secrets"] {
        let path = format!("/api/v1/namespaces/{ns}/{resource}");
        let left = json(&kubectl.ok(&["get", "--raw", &path]));
        assert_eq!(names(&left), Vec::<&str>::new(), "{resource} left behind");
    }
}

/// `apply -f` twice with a change in between: created, then configured with the new value and the
/// last-applied annotation recording it.
fn client_side_apply(flow: &Flow) {
    let file = flow.kubectl.home().join("applied.yaml");
    let path = file.to_str().unwrap();
    let write = |size: &str| {
        let manifest = format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\n  namespace: {}\n\
             data:\n  size: \"{size}\"\n  shape: round\n",
            flow.ns
        );
        std::fs::write(&file, manifest).unwrap();
    };
    write("small");
    flow.prints(&["apply", "-f", path], "configmap/applied created");
    write("large");
    flow.prints(&["apply", "-f", path], "configmap/applied configured");
    let applied = flow.object("configmap", "applied");
    assert_eq!(applied["data"]["size"], "large");
    assert_eq!(applied["data"]["shape"], "round");
    let last_applied =
        applied["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
            .as_str()
            .unwrap_or_else(|| panic!("no last-applied annotation: {applied}"));
    assert_eq!(json(last_applied)["data"]["size"], "large");
    // A third apply without a change changes nothing.
    flow.prints(&["apply", "-f", path], "configmap/applied unchanged");
}

/// Merge, JSON and strategic merge patches, `edit` through an editor script, `label`, `annotate`.
fn patch_edit_label_annotate(flow: &Flow) {
    for (patch_type, patch, key, value) in [
        (
            "--type=merge",
            r#"{"data":{"color":"green"}}"#,
            "color",
            "green",
        ),
        (
            "--type=json",
            r#"[{"op":"add","path":"/data/size","value":"L"}]"#,
            "size",
            "L",
        ),
        (
            "--type=strategic",
            r#"{"data":{"shape":"square"}}"#,
            "shape",
            "square",
        ),
    ] {
        flow.prints(
            &["patch", "configmap", "literal", patch_type, "-p", patch],
            "configmap/literal patched",
        );
        assert_eq!(flow.literal(key), value, "after {patch_type}");
    }

    let editor = flow.kubectl.home().join("editor.sh");
    std::fs::write(
        &editor,
        "#!/bin/sh\nsed -i 's/color: green/color: red/' \"$1\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&editor, PermissionsExt::from_mode(0o755)).unwrap();
    let args = ["-n", flow.ns, "edit", "configmap", "literal"];
    let env = [("EDITOR", editor.to_str().unwrap()), ("KUBE_EDITOR", "")];
    let edited = flow.kubectl.run_with_env(&args, &env);
    let edited = edited.success(flow.kubectl.version(), &args);
    assert_eq!(edited.trim(), "configmap/literal edited");
    assert_eq!(flow.literal("color"), "red");

    flow.prints(
        &["label", "configmap", "literal", "tier=web"],
        "configmap/literal labeled",
    );
    // kubectl up to 1.27 prints "annotate" where later ones print "annotated".
    let annotated = flow.ok(&["annotate", "configmap", "literal", "note=hello"]);
    assert!(
        ["configmap/literal annotated", "configmap/literal annotate"].contains(&annotated.trim()),
        "{annotated}"
    );
    let object = flow.object("configmap", "literal");
    assert_eq!(object["metadata"]["labels"]["tier"], "web");
    assert_eq!(object["metadata"]["annotations"]["note"], "hello");
}

/// `-o yaml`, `-o json`, `-o wide`, `--show-labels`.
fn output_formats(flow: &Flow) {
    let yaml = flow.ok(&["get", "configmap", "literal", "-o", "yaml"]);
    for expected in [
        "apiVersion: v1",
        "kind: ConfigMap",
        "  color: red",
        "    tier: web",
        "    note: hello",
        &format!("  namespace: {}", flow.ns),
    ] {
        assert!(yaml.contains(expected), "no {expected:?} in:\n{yaml}");
    }

    let list = json(&flow.ok(&["get", "configmaps", "-o", "json"]));
    assert_eq!(list["kind"], "List");
    let mut listed = names(&list);
    listed.sort_unstable();
    assert_eq!(listed, ["applied", "literal"]);

    let wide = flow.ok(&["get", "configmaps", "-o", "wide"]);
    let (header, row) = table_row(&wide, "literal");
    assert_eq!(header, ["NAME", "DATA", "AGE"], "{wide}");
    assert_eq!(row[1], "3", "literal has color, shape and size:\n{wide}");

    let labelled = flow.ok(&["get", "configmaps", "--show-labels"]);
    let (header, row) = table_row(&labelled, "literal");
    assert_eq!(header, ["NAME", "DATA", "AGE", "LABELS"], "{labelled}");
    assert_eq!(row[3], "tier=web", "{labelled}");
    let (_, row) = table_row(&labelled, "applied");
    assert_eq!(row[3], "<none>", "{labelled}");
}

/// `get -w --output-watch-events` prints the existing objects, then the changes made meanwhile.
fn watch_sees_a_change(flow: &Flow) {
    let args = [
        "-n",
        flow.ns,
        "get",
        "configmaps",
        "-w",
        "--output-watch-events",
    ];
    let mut watch = flow.kubectl.background(&args);
    let mut wait_for = |event: &str, name: &str| {
        watch.wait_for_line(&format!("{event} {name}"), |line| {
            line.split_whitespace().take(2).eq([event, name])
        })
    };
    wait_for("ADDED", "literal");
    flow.ok(&[
        "create",
        "configmap",
        "watched",
        "--from-literal=a=1",
        "--from-literal=b=2",
    ]);
    let added = wait_for("ADDED", "watched");
    assert_eq!(added.split_whitespace().nth(2), Some("2"), "{added}");
    flow.ok(&["label", "configmap", "literal", "seen=yes"]);
    wait_for("MODIFIED", "literal");
    flow.ok(&["delete", "configmap", "watched"]);
    wait_for("DELETED", "watched");
}

/// `api-resources` and `explain`.
fn discovery_and_explain(kubectl: &Kubectl) {
    let resources = kubectl.ok(&["api-resources"]);
    let (header, _) = table_row(&resources, "configmaps");
    assert_eq!(
        header,
        ["NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND"]
    );
    for expected in [
        &["configmaps", "cm", "v1", "true", "ConfigMap"][..],
        &["namespaces", "ns", "v1", "false", "Namespace"],
        &["leases", "coordination.k8s.io/v1", "true", "Lease"],
    ] {
        let (_, row) = table_row(&resources, expected[0]);
        assert_eq!(row, expected, "{resources}");
    }

    for (field, expected) in [
        (
            "configmap.data",
            &["ConfigMap", "VERSION:", "v1", "map[string]string"][..],
        ),
        (
            "lease.spec",
            &[
                "Lease",
                "coordination.k8s.io",
                "holderIdentity",
                "leaseDurationSeconds",
            ],
        ),
    ] {
        let explained = kubectl.ok(&["explain", field]);
        for text in expected {
            assert!(explained.contains(text), "no {text:?} in:\n{explained}");
        }
    }
}

/// `create secret generic --from-literal`, read back base64-encoded.
fn secrets(flow: &Flow) {
    flow.prints(
        &[
            "create",
            "secret",
            "generic",
            "credentials",
            "--from-literal=password=s3cr3t!",
        ],
        "secret/credentials created",
    );
    let get = |path: &str| flow.ok(&["get", "secret", "credentials", "-o", path]);
    assert_eq!(get("jsonpath={.data.password}"), STANDARD.encode("s3cr3t!"));
    assert_eq!(get("jsonpath={.type}"), "Opaque");
}

/// `get --raw` under `/clusters/<name>`: root has this scenario's namespace, another logical
/// cluster starts empty.
fn raw_cluster_paths(flow: &Flow, version: &str) {
    let raw = |path: &str| json(&flow.kubectl.ok(&["get", "--raw", path]));
    let root = raw("/clusters/root/api/v1/namespaces");
    assert_eq!(root["kind"], "NamespaceList");
    let root_names = names(&root);
    for expected in ["default", "kube-system", flow.ns] {
        assert!(root_names.contains(&expected), "{root}");
    }
    let literal = raw(&format!(
        "/clusters/root/api/v1/namespaces/{}/configmaps/literal",
        flow.ns
    ));
    assert_eq!(literal["data"]["color"], "red");

    let other = format!("/clusters/other-{}", version.replace('.', "-"));
    let empty = raw(&format!("{other}/api/v1/namespaces"));
    assert_eq!(empty["kind"], "NamespaceList");
    assert_eq!(names(&empty), Vec::<&str>::new());
    let path = format!("{other}/api/v1/namespaces/{}/configmaps/literal", flow.ns);
    let missing = flow.kubectl.fails(&["get", "--raw", &path]);
    assert!(missing.contains("NotFound"), "{missing}");
}

/// The same namespace and ConfigMap names in two logical clusters, created with kubectl through
/// `--server …/clusters/<name>`: each cluster sees only its own, the wildcard list sees both with
/// their cluster annotated, and the wildcard refuses every verb but list and watch.
#[tokio::test]
async fn logical_clusters_hold_the_same_names_apart() {
    let server = SERVER.get().await;
    let clusters = [("lc-alpha", "1.27"), ("lc-beta", "1.33")];
    for (cluster, version) in clusters {
        let kubectl = Kubectl::new(version, &server.kubeconfig());
        let at = format!("--server={}", server.url(&format!("/clusters/{cluster}")));
        kubectl.ok(&[&at, "create", "namespace", "shared"]);
        kubectl.ok(&[
            &at,
            "-n",
            "shared",
            "create",
            "configmap",
            "settings",
            &format!("--from-literal=owner={cluster}"),
        ]);
    }
    for (cluster, version) in clusters {
        let kubectl = Kubectl::new(version, &server.kubeconfig());
        let at = format!("--server={}", server.url(&format!("/clusters/{cluster}")));
        let owner = kubectl.ok(&[
            &at,
            "-n",
            "shared",
            "get",
            "configmap",
            "settings",
            "-o",
            "jsonpath={.data.owner}",
        ]);
        assert_eq!(owner, cluster);
        let listed = json(&kubectl.ok(&[&at, "-n", "shared", "get", "configmaps", "-o", "json"]));
        assert_eq!(names(&listed), ["settings"]);
        let namespaces = json(&kubectl.ok(&[&at, "get", "namespaces", "-o", "json"]));
        assert_eq!(names(&namespaces), ["shared"], "{cluster} starts empty");

        let response = server
            .get(&format!(
                "/clusters/{cluster}/api/v1/namespaces/shared/configmaps/settings"
            ))
            .await;
        assert_eq!(response.status, 200, "{}", response.text());
        let object = response.json();
        assert_eq!(object["data"]["owner"], cluster);
        assert_eq!(object["metadata"]["annotations"]["kcp.io/cluster"], cluster);
    }
    // root does not see them either
    let root = server.get("/clusters/root/api/v1/namespaces/shared").await;
    assert_eq!(root.status, 404, "{}", root.text());

    let wildcard = server.get("/clusters/*/api/v1/configmaps").await;
    assert_eq!(wildcard.status, 200, "{}", wildcard.text());
    let wildcard = wildcard.json();
    assert_eq!(wildcard["kind"], "ConfigMapList");
    let mut seen: Vec<(String, String)> = wildcard["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|item| item["metadata"]["name"] == "settings")
        .map(|item| {
            let cluster = item["metadata"]["annotations"]["kcp.io/cluster"]
                .as_str()
                .unwrap_or_else(|| panic!("no kcp.io/cluster on {item}"));
            (
                cluster.to_owned(),
                item["data"]["owner"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    seen.sort();
    assert_eq!(
        seen,
        clusters.map(|(cluster, _)| (cluster.to_owned(), cluster.to_owned()))
    );

    // Every verb but list and watch is refused on the wildcard.
    let configmap = serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "settings", "namespace": "shared"}, "data": {"owner": "nobody"},
    });
    let one = "/clusters/*/api/v1/namespaces/shared/configmaps/settings";
    let many = "/clusters/*/api/v1/namespaces/shared/configmaps";
    for (method, path, body) in [
        (reqwest::Method::GET, one, None),
        (reqwest::Method::POST, many, Some(&configmap)),
        (reqwest::Method::PUT, one, Some(&configmap)),
        (reqwest::Method::DELETE, one, None),
        (reqwest::Method::DELETE, many, None),
    ] {
        let response = match body {
            Some(body) => server.send_json(method.clone(), path, body).await,
            None => {
                server
                    .send(method.clone(), path, "application/json", "")
                    .await
            }
        };
        assert_eq!(response.status, 405, "{method} {path}: {}", response.text());
        let status = response.json();
        assert_eq!(status["kind"], "Status", "{status}");
        assert_eq!(status["reason"], "MethodNotAllowed", "{status}");
        assert_eq!(status["code"], 405, "{status}");
    }
    let merge = server
        .send(
            reqwest::Method::PATCH,
            one,
            "application/merge-patch+json",
            r#"{"data":{"owner":"nobody"}}"#,
        )
        .await;
    assert_eq!(merge.status, 405, "{}", merge.text());
    // and nothing changed
    for (cluster, _) in clusters {
        let object = server
            .get(&format!(
                "/clusters/{cluster}/api/v1/namespaces/shared/configmaps/settings"
            ))
            .await
            .json();
        assert_eq!(object["data"]["owner"], cluster);
    }
}
