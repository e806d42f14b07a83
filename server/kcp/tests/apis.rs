//! APIs as a service against a started `kcp`, with kubectl only (issue 21): the apis.kcp.io types
//! in every workspace and their two versions, an export's identity and endpoint slice, and the
//! consumer story: a provider exports an APIResourceSchema, consumers bind it and use the bound
//! resource like a CRD, isolated from each other and from another export of the same group and
//! resource; the bad input (binding without `bind`, a missing export, a conflicting CRD, a changed
//! reference) is answered with upstream's Status errors and conditions; an APIConversion converts
//! a bound resource between the versions of its schema.
//!
//! The scenarios share one server and keep to their own workspace names. Every wait has a deadline.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use kcp_testing::identities::{KubeconfigUser, write_kubeconfig};
use kcp_testing::{KcpProcess, Kubectl, SharedKcp};
use serde_json::Value;
use sha2::{Digest, Sha256};

static SERVER: SharedKcp = SharedKcp::new(env!("CARGO_BIN_EXE_kcp"), "apis");

/// How long scheduling, binding and deletion may take.
const SETTLED_WITHIN: Duration = Duration::from_secs(60);

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|error| panic!("not JSON ({error}): {text}"))
}

/// kubectl pointed at one workspace.
struct Ws<'a> {
    kubectl: &'a Kubectl,
    server: String,
    path: String,
}

impl Ws<'_> {
    fn args<'b>(&'b self, args: &[&'b str]) -> Vec<&'b str> {
        [&["--server", self.server.as_str()], args].concat()
    }

    fn ok(&self, args: &[&str]) -> String {
        self.kubectl.ok(&self.args(args))
    }

    fn fails(&self, args: &[&str]) -> String {
        self.kubectl.fails(&self.args(args))
    }

    fn wait(&self, args: &[&str], want: &str) {
        self.kubectl
            .wait_for_output(&self.args(args), want, SETTLED_WITHIN);
    }

    /// `kubectl apply -f` of `yaml`, which must succeed.
    fn apply(&self, yaml: &str) -> String {
        let file = self.file(yaml);
        self.ok(&["apply", "-f", &file])
    }

    /// `kubectl create -f` of `yaml`, which must fail; its stderr.
    fn create_fails(&self, yaml: &str) -> String {
        let file = self.file(yaml);
        self.fails(&["create", "-f", &file])
    }

    /// `yaml` in a new file of kubectl's home (removed with it).
    fn file(&self, yaml: &str) -> String {
        static FILES: AtomicUsize = AtomicUsize::new(0);
        let n = FILES.fetch_add(1, Ordering::Relaxed);
        let path = self.kubectl.home().join(format!("manifest-{n}.yaml"));
        std::fs::write(&path, yaml).unwrap();
        path.to_str().unwrap().to_string()
    }

    fn jsonpath(&self, what: &[&str], path: &str) -> String {
        let format = format!("jsonpath={path}");
        self.ok(&[what, &["-o", &format]].concat())
            .trim()
            .to_string()
    }

    /// The same workspace through another kubeconfig (another user).
    fn as_user<'b>(&self, kubectl: &'b Kubectl) -> Ws<'b> {
        Ws {
            kubectl,
            server: self.server.clone(),
            path: self.path.clone(),
        }
    }
}

/// Creates workspace `root:<name>` with kubectl and waits until it is Ready.
fn workspace<'a>(server: &KcpProcess, kubectl: &'a Kubectl, name: &str) -> Ws<'a> {
    let root = Ws {
        kubectl,
        server: format!("{}/clusters/root", server.base_url()),
        path: "root".into(),
    };
    root.apply(&format!(
        "apiVersion: tenancy.kcp.io/v1alpha1\nkind: Workspace\nmetadata:\n  name: {name}\n"
    ));
    root.wait(
        &["get", "workspace", name, "-o", "jsonpath={.status.phase}"],
        "Ready",
    );
    Ws {
        kubectl,
        server: format!("{}/clusters/root:{name}", server.base_url()),
        path: format!("root:{name}"),
    }
}

/// An APIResourceSchema `<prefix>.<plural>.<group>` of a namespaced kind with a `spec.size`
/// (default 1) and a printer column.
fn schema_yaml(prefix: &str, group: &str, plural: &str, kind: &str) -> String {
    let singular = kind.to_lowercase();
    format!(
        r#"apiVersion: apis.kcp.io/v1alpha1
kind: APIResourceSchema
metadata:
  name: {prefix}.{plural}.{group}
spec:
  group: {group}
  names: {{plural: {plural}, singular: {singular}, kind: {kind}, listKind: {kind}List}}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {{status: {{}}}}
    additionalPrinterColumns:
    - {{name: Size, type: integer, jsonPath: .spec.size}}
    schema:
      type: object
      description: A {kind} of the test provider.
      properties:
        spec:
          type: object
          description: What the {singular} should be.
          properties:
            size: {{type: integer, default: 1, description: How big the {singular} is.}}
"#
    )
}

fn export_yaml(name: &str, group: &str, plural: &str, schema: &str) -> String {
    format!(
        r#"apiVersion: apis.kcp.io/v1alpha2
kind: APIExport
metadata:
  name: {name}
spec:
  resources:
  - {{group: {group}, name: {plural}, schema: {schema}, storage: {{crd: {{}}}}}}
"#
    )
}

/// An APIBinding to export `export` in workspace `path` (empty: the binding's own workspace).
fn binding_yaml(name: &str, path: &str, export: &str) -> String {
    let path = if path.is_empty() {
        String::new()
    } else {
        format!("path: \"{path}\", ")
    };
    format!(
        r#"apiVersion: apis.kcp.io/v1alpha2
kind: APIBinding
metadata:
  name: {name}
spec:
  reference:
    export: {{{path}name: {export}}}
"#
    )
}

/// Exports widgets.example.com from `ws` (schema `v1.widgets.example.com`, export `widgets` with
/// `spec_extra` appended to its spec) and waits until the export's identity is valid.
fn export_widgets(ws: &Ws<'_>, spec_extra: &str) {
    ws.apply(&schema_yaml("v1", "example.com", "widgets", "Widget"));
    let export = export_yaml(
        "widgets",
        "example.com",
        "widgets",
        "v1.widgets.example.com",
    );
    ws.apply(&format!("{export}{spec_extra}"));
    wait_identity(ws, "widgets");
}

/// Waits until binding `name` is Bound.
fn wait_bound(ws: &Ws<'_>, name: &str) {
    ws.wait(
        &["get", "apibinding", name, "-o", "jsonpath={.status.phase}"],
        "Bound",
    );
}

/// Waits until export `name` has a valid identity.
fn wait_identity(ws: &Ws<'_>, name: &str) {
    let path = "jsonpath={.status.conditions[?(@.type==\"IdentityValid\")].status}";
    ws.wait(&["get", "apiexport", name, "-o", path], "True");
}

/// The status and reason of condition `kind` of binding `name`.
fn binding_condition(ws: &Ws<'_>, name: &str, kind: &str) -> String {
    ws.jsonpath(
        &["get", "apibinding", name],
        &format!("{{.status.conditions[?(@.type==\"{kind}\")].status}}/{{.status.conditions[?(@.type==\"{kind}\")].reason}}"),
    )
}

/// Waits until condition `kind` of binding `name` reads `want` (`<status>/<reason>`).
fn wait_condition(ws: &Ws<'_>, name: &str, kind: &str, want: &str) {
    let path = format!(
        "jsonpath={{.status.conditions[?(@.type==\"{kind}\")].status}}/{{.status.conditions[?(@.type==\"{kind}\")].reason}}"
    );
    ws.wait(&["get", "apibinding", name, "-o", &path], want);
}

#[tokio::test(flavor = "multi_thread")]
async fn apis_types_are_served_in_every_workspace_in_both_versions() {
    let server = SERVER.get().await;
    let kubectl = Kubectl::new("1.33", &server.kubeconfig());
    let ws = workspace(&server, &kubectl, "types");

    let empty = ws.kubectl.run(&ws.args(&[
        "get",
        "apiexports,apibindings,apiresourceschemas,apiexportendpointslices",
    ]));
    assert!(empty.status.success(), "{empty:?}");
    assert!(empty.stderr.contains("No resources found"), "{empty:?}");

    // A v1alpha1 export's latestResourceSchemas read back as v1alpha2 resources.
    ws.apply(
        "apiVersion: apis.kcp.io/v1alpha1\nkind: APIExport\nmetadata:\n  name: old\nspec:\n  latestResourceSchemas: [today.widgets.example.com]\n",
    );
    assert_eq!(
        ws.jsonpath(
            &["get", "apiexports.v1alpha2.apis.kcp.io", "old"],
            "{.spec.resources[0].group}/{.spec.resources[0].name}/{.spec.resources[0].schema}"
        ),
        "example.com/widgets/today.widgets.example.com"
    );
    // ... and v1alpha2 resources as v1alpha1 latestResourceSchemas.
    ws.apply(&export_yaml(
        "new",
        "example.com",
        "gadgets",
        "today.gadgets.example.com",
    ));
    assert_eq!(
        ws.jsonpath(
            &["get", "apiexports.v1alpha1.apis.kcp.io", "new"],
            "{.spec.latestResourceSchemas[0]}"
        ),
        "today.gadgets.example.com"
    );

    // The identity: a Secret in kcp-system, its key's SHA-256 in status.identityHash.
    wait_identity(&ws, "new");
    let hash = ws.jsonpath(&["get", "apiexport", "new"], "{.status.identityHash}");
    let key = ws.jsonpath(&["get", "secret", "new", "-n", "kcp-system"], "{.data.key}");
    let key = STANDARD.decode(key).unwrap();
    let expected: String = Sha256::digest(&key)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(hash, expected);
    assert_eq!(
        ws.jsonpath(
            &["get", "apiexport", "new"],
            "{.spec.identity.secretRef.namespace}/{.spec.identity.secretRef.name}"
        ),
        "kcp-system/new"
    );
    // The default endpoint slice, owned by the export.
    ws.wait(
        &[
            "get",
            "apiexportendpointslice",
            "new",
            "-o",
            "jsonpath={.spec.export.name}",
        ],
        "new",
    );
    // Columns and categories as upstream's.
    let table = ws.ok(&["get", "apiexportendpointslices"]);
    assert!(table.lines().next().unwrap().contains("EXPORT"), "{table}");
    let kcp = ws.ok(&["get", "kcp", "-o", "name"]);
    assert!(kcp.contains("apiexport.apis.kcp.io/new"), "{kcp}");

    // Schemas: named after their group and plural, never changed.
    let wrong = ws.create_fails(
        &schema_yaml("today", "example.com", "widgets", "Widget").replace(
            "name: today.widgets.example.com",
            "name: today.gadgets.example.com",
        ),
    );
    assert!(
        wrong.contains("is forbidden") && wrong.contains("must end in .widgets.example.com"),
        "{wrong}"
    );
    ws.apply(&schema_yaml("today", "example.com", "widgets", "Widget"));
    let changed = ws.fails(&[
        "patch",
        "apiresourceschema",
        "today.widgets.example.com",
        "--type=merge",
        "-p",
        r#"{"spec":{"names":{"shortNames":["w"]}}}"#,
    ]);
    assert!(changed.contains("is immutable"), "{changed}");
}

#[tokio::test(flavor = "multi_thread")]
async fn consumers_bind_an_export_and_use_it_like_a_crd() {
    let server = SERVER.get().await;
    let kubectl = Kubectl::new("1.33", &server.kubeconfig());
    let provider = workspace(&server, &kubectl, "provider");
    export_widgets(&provider, "");
    let identity = provider.jsonpath(&["get", "apiexport", "widgets"], "{.status.identityHash}");

    let consumers: Vec<Ws<'_>> = ["consumer-a", "consumer-b", "consumer-c"]
        .iter()
        .map(|name| workspace(&server, &kubectl, name))
        .collect();
    let mut export_labels = Vec::new();
    for consumer in &consumers {
        consumer.apply(&binding_yaml("widgets", "root:provider", "widgets"));
        wait_bound(consumer, "widgets");
        assert_eq!(binding_condition(consumer, "widgets", "Ready"), "True/");
        assert_eq!(
            consumer.jsonpath(
                &["get", "apibinding", "widgets"],
                "{.status.boundResources[0].resource}/{.status.boundResources[0].schema.identityHash}"
            ),
            format!("widgets/{identity}")
        );
        export_labels.push(export_label_is_kept(consumer, "widgets"));
    }
    export_labels.dedup();
    assert_eq!(
        export_labels.len(),
        1,
        "one export, one label: {export_labels:?}"
    );

    // Consumers create, list and watch objects; the schema defaults and prints its column.
    let (a, b) = (&consumers[0], &consumers[1]);
    a.apply("apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w1\n  namespace: default\nspec: {}\n");
    assert_eq!(
        a.jsonpath(&["get", "widget", "w1", "-n", "default"], "{.spec.size}"),
        "1"
    );
    let table = a.ok(&["get", "widgets", "-n", "default"]);
    assert!(table.lines().next().unwrap().contains("SIZE"), "{table}");
    let mut watch =
        kubectl.background(&a.args(&["get", "widgets", "-n", "default", "--watch", "-o", "name"]));
    watch.wait_for_line("w1 in the watch", |line| {
        line.trim() == "widget.example.com/w1"
    });
    a.apply("apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w2\n  namespace: default\nspec: {size: 3}\n");
    watch.wait_for_line("w2 in the watch", |line| {
        line.trim() == "widget.example.com/w2"
    });
    drop(watch);

    // kubectl explain reads the bound schema from OpenAPI.
    let explained = a.ok(&["explain", "widgets.spec"]);
    assert!(explained.contains("How big the widget is"), "{explained}");

    // One consumer does not see another's objects.
    let theirs = b.ok(&["get", "widgets", "-A", "-o", "name"]);
    assert!(theirs.trim().is_empty(), "consumer-b sees {theirs}");

    // Deleting an object works like for a CRD.
    a.ok(&["delete", "widget", "w2", "-n", "default"]);
    assert_eq!(
        a.ok(&["get", "widgets", "-n", "default", "-o", "name"])
            .trim(),
        "widget.example.com/w1"
    );

    same_resource_of_another_export_stays_apart(&server, &kubectl, &identity);
    binding_needs_bind(&server, &kubectl, &provider);
    bad_bindings(&server, &kubectl);

    // Deleting a binding deletes its objects, then the binding; the resource is gone.
    a.ok(&["delete", "apibinding", "widgets", "--timeout=60s"]);
    let gone = a.fails(&["get", "widgets", "-n", "default"]);
    assert!(
        gone.contains("the server doesn't have a resource type")
            || gone.contains("could not find the requested resource"),
        "{gone}"
    );
    // Binding again shows no objects left over.
    a.apply(&binding_yaml("widgets", "root:provider", "widgets"));
    wait_bound(a, "widgets");
    a.wait(&["get", "widgets", "-A", "-o", "name"], "");
}

/// Binding `name` carries its export's `internal.apis.kcp.io/export` label, is found by it, and
/// keeps it when a writer changes it; the label's value is the answer.
fn export_label_is_kept(ws: &Ws<'_>, name: &str) -> String {
    const LABEL: &str = "{.metadata.labels.internal\\.apis\\.kcp\\.io/export}";
    let label = ws.jsonpath(&["get", "apibinding", name], LABEL);
    assert!(!label.is_empty());
    let selector = format!("internal.apis.kcp.io/export={label}");
    assert_eq!(
        ws.ok(&["get", "apibindings", "-l", &selector, "-o", "name"])
            .trim(),
        format!("apibinding.apis.kcp.io/{name}")
    );
    ws.ok(&[
        "label",
        "apibinding",
        name,
        "internal.apis.kcp.io/export=forged",
        "--overwrite",
    ]);
    assert_eq!(ws.jsonpath(&["get", "apibinding", name], LABEL), label);
    label
}

/// A second provider exporting the same group and resource: its consumer's objects are stored
/// under the other identity and never mix with the first export's.
fn same_resource_of_another_export_stays_apart(
    server: &KcpProcess,
    kubectl: &Kubectl,
    first_identity: &str,
) {
    let other = workspace(server, kubectl, "provider-two");
    export_widgets(&other, "");
    let identity = other.jsonpath(&["get", "apiexport", "widgets"], "{.status.identityHash}");
    assert_ne!(identity, first_identity);
    let consumer = workspace(server, kubectl, "consumer-two");
    consumer.apply(&binding_yaml("widgets", "root:provider-two", "widgets"));
    wait_bound(&consumer, "widgets");
    consumer.apply("apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: other\n  namespace: default\nspec: {}\n");

    // Wildcard lists by identity see each export's objects only; without it, nothing is found.
    // (`get --raw` takes the path as given: the `/clusters/*` prefix is part of it.)
    let list = |identity: &str| {
        let path = format!("/clusters/*/apis/example.com/v1/widgets:{identity}");
        json(&consumer.ok(&["get", "--raw", &path]))
    };
    let names = |list: &Value| -> Vec<String> {
        list["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["metadata"]["name"].as_str().unwrap().to_string())
            .collect()
    };
    let second = names(&list(&identity));
    assert_eq!(second, vec!["other".to_string()]);
    let first = names(&list(first_identity));
    assert!(
        first.contains(&"w1".to_string()) && !first.contains(&"other".to_string()),
        "{first:?}"
    );
    let refused = consumer.fails(&["get", "--raw", "/clusters/*/apis/example.com/v1/widgets"]);
    assert!(
        refused.contains("NotFound") || refused.contains("not found"),
        "{refused}"
    );
}

/// A user who may create bindings in their workspace but not `bind` the export gets upstream's 403;
/// granted `bind` in the provider, the same request works.
fn binding_needs_bind(server: &KcpProcess, kubectl: &Kubectl, provider: &Ws<'_>) {
    let consumer = workspace(server, kubectl, "consumer-dave");
    consumer.ok(&[
        "create",
        "clusterrolebinding",
        "dave-admin",
        "--clusterrole=cluster-admin",
        "--user=dave",
    ]);
    let home = tempfile::tempdir().unwrap();
    let dave_kubectl = user_kubectl(server, home.path(), "dave");
    let dave = consumer.as_user(&dave_kubectl);
    let refused = dave.create_fails(&binding_yaml("widgets", "root:provider", "widgets"));
    assert!(
        refused.contains("(Forbidden)")
            && refused.contains(
                "unable to create APIBinding: no permission to bind to export root:provider:widgets"
            ),
        "{refused}"
    );
    // (kubectl create clusterrole checks verbs against discovery, which does not list `bind`.)
    provider.apply(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: bind-widgets\nrules:\n- {apiGroups: [apis.kcp.io], resources: [apiexports], resourceNames: [widgets], verbs: [bind]}\n",
    );
    provider.ok(&[
        "create",
        "clusterrolebinding",
        "dave-binds",
        "--clusterrole=bind-widgets",
        "--user=dave",
    ]);
    // RBAC changes take effect asynchronously.
    let file = dave.file(&binding_yaml("widgets", "root:provider", "widgets"));
    dave.wait(
        &["create", "-f", &file, "-o", "name"],
        "apibinding.apis.kcp.io/widgets",
    );
    wait_bound(&dave, "widgets");
}

/// A missing export is refused in another workspace (upstream's admission does not tell whether
/// it exists) and a condition in the binding's own; a conflicting CRD is a condition; a changed
/// reference is refused.
fn bad_bindings(server: &KcpProcess, kubectl: &Kubectl) {
    let ws = workspace(server, kubectl, "consumer-bad");
    let refused = ws.create_fails(&binding_yaml("missing", "root:provider", "nothing-here"));
    assert!(
        refused.contains("(Forbidden)")
            && refused.contains("no permission to bind to export root:provider:nothing-here"),
        "{refused}"
    );
    ws.apply(&binding_yaml("missing", "", "nothing-here"));
    wait_condition(&ws, "missing", "APIExportValid", "False/APIExportNotFound");
    assert_eq!(
        ws.jsonpath(&["get", "apibinding", "missing"], "{.status.phase}"),
        "Binding"
    );

    ws.apply(
        r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  names: {plural: widgets, singular: widget, kind: Widget, listKind: WidgetList}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
"#,
    );
    ws.apply(&binding_yaml("conflicting", "root:provider", "widgets"));
    wait_condition(
        &ws,
        "conflicting",
        "BindingUpToDate",
        "False/NamingConflicts",
    );
    let message = ws.jsonpath(
        &["get", "apibinding", "conflicting"],
        "{.status.conditions[?(@.type==\"BindingUpToDate\")].message}",
    );
    assert!(
        message.contains("naming conflict with CustomResourceDefinition \"widgets.example.com\""),
        "{message}"
    );

    let changed = ws.fails(&[
        "patch",
        "apibinding",
        "conflicting",
        "--type=merge",
        "-p",
        r#"{"spec":{"reference":{"export":{"name":"other"}}}}"#,
    ]);
    assert!(
        changed.contains("APIExport reference must not be changed"),
        "{changed}"
    );

    // A claim the export does not make (here: a wrong identity hash) is a condition, not silence.
    ws.apply(&format!(
        "{}  permissionClaims:\n  - {{group: \"\", resource: configmaps, identityHash: wrong, verbs: [\"*\"], selector: {{matchAll: true}}, state: Accepted}}\n",
        binding_yaml("claiming", "", "gizmos")
    ));
    ws.apply(&schema_yaml("v1", "example.org", "gizmos", "Gizmo"));
    ws.apply(&export_yaml(
        "gizmos",
        "example.org",
        "gizmos",
        "v1.gizmos.example.org",
    ));
    wait_condition(
        &ws,
        "claiming",
        "PermissionClaimsValid",
        "False/InvalidPermissionClaims",
    );

    // An export's claim on a resource that is not built in must name the identity serving it.
    let refused = ws.create_fails(&format!(
        "{}  permissionClaims:\n  - {{group: example.com, resource: widgets, verbs: [\"*\"]}}\n",
        export_yaml(
            "claims-widgets",
            "example.org",
            "gizmos",
            "v1.gizmos.example.org"
        )
    ));
    assert!(
        refused.contains("(Forbidden)")
            && refused.contains("spec.permissionClaims[0].identityHash: Invalid value: \"\": identityHash is required for API types that are not built-in"),
        "{refused}"
    );

    // A CRD over a bound resource is refused.
    let bound = workspace(server, kubectl, "consumer-crd");
    bound.apply(&binding_yaml("widgets", "root:provider", "widgets"));
    wait_bound(&bound, "widgets");
    let refused = bound.create_fails(
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: widgets.example.com\nspec:\n  group: example.com\n  names: {plural: widgets, singular: widget, kind: Widget, listKind: WidgetList}\n  scope: Namespaced\n  versions:\n  - {name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object}}}\n",
    );
    assert!(
        refused.contains("cannot create because resource is bound by APIBinding \"widgets\""),
        "{refused}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_binding_to_kcps_own_tenancy_export_is_bound_and_changes_nothing() {
    let server = SERVER.get().await;
    let kubectl = Kubectl::new("1.33", &server.kubeconfig());
    let ws = workspace(&server, &kubectl, "tenancy-binder");
    let before = ws.ok(&["api-resources", "--api-group=tenancy.kcp.io", "-o", "name"]);
    ws.apply(&binding_yaml("tenancy.kcp.io", "root", "tenancy.kcp.io"));
    wait_bound(&ws, "tenancy.kcp.io");
    assert_eq!(binding_condition(&ws, "tenancy.kcp.io", "Ready"), "True/");
    assert_eq!(
        ws.ok(&["api-resources", "--api-group=tenancy.kcp.io", "-o", "name"]),
        before
    );
    assert!(before.contains("workspaces.tenancy.kcp.io"), "{before}");

    // Everybody may bind kcp's tenancy and topology exports, as upstream's root grants.
    ws.ok(&[
        "create",
        "clusterrolebinding",
        "frank-admin",
        "--clusterrole=cluster-admin",
        "--user=frank",
    ]);
    let home = tempfile::tempdir().unwrap();
    let frank_kubectl = user_kubectl(&server, home.path(), "frank");
    let frank = ws.as_user(&frank_kubectl);
    frank.apply(&binding_yaml("topology.kcp.io", "root", "topology.kcp.io"));
    wait_bound(&frank, "topology.kcp.io");
}

/// A restarted server serves bound resources from its first request, before any controller ran
/// (here none runs after the restart): what the stored bindings record is published at startup.
#[tokio::test(flavor = "multi_thread")]
async fn bound_resources_are_served_from_the_first_request_after_a_restart() {
    let mut server =
        KcpProcess::start(Path::new(env!("CARGO_BIN_EXE_kcp")), "apis-restart", &[]).await;
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join("admin.kubeconfig");
    std::fs::copy(server.kubeconfig(), &config).unwrap();
    {
        let kubectl = Kubectl::new("1.33", &config);
        let at = |cluster: &str| Ws {
            kubectl: &kubectl,
            server: format!("{}/clusters/{cluster}", server.base_url()),
            path: cluster.to_string(),
        };
        let (provider, consumer) = (at("restart-provider"), at("restart-consumer"));
        export_widgets(&provider, "");
        consumer.apply(&binding_yaml("widgets", "restart-provider", "widgets"));
        wait_bound(&consumer, "widgets");
        consumer.ok(&["create", "namespace", "default"]);
        consumer.apply("apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: kept\n  namespace: default\nspec: {}\n");
    }
    server.restart_with(&["--run-controllers=false"]).await;
    std::fs::copy(server.kubeconfig(), &config).unwrap();
    let kubectl = Kubectl::new("1.33", &config);
    let consumer = Ws {
        kubectl: &kubectl,
        server: format!("{}/clusters/restart-consumer", server.base_url()),
        path: "restart-consumer".into(),
    };
    assert_eq!(
        consumer
            .ok(&["get", "widgets", "-n", "default", "-o", "name"])
            .trim(),
        "widget.example.com/kept"
    );
    server.stop_cleanly().await;
}

/// A user named `name` of the server's client CA, with a kubeconfig of their own in `home`.
fn user_kubectl(server: &KcpProcess, home: &Path, name: &str) -> Kubectl {
    let config = home.join(format!("{name}.kubeconfig"));
    write_kubeconfig(
        &config,
        &format!("{}/clusters/root", server.base_url()),
        &server.admin().ca_pem,
        KubeconfigUser::Certificate(&server.client_ca().client(name, &[])),
    );
    Kubectl::new("1.33", &config)
}

/// An export with `maximalPermissionPolicy.local` caps its consumers: what the provider's RBAC
/// grants the `apis.kcp.io:binding:` user (here: reading widgets) is all a consumer may do, even
/// one who may do everything in their own workspace; without the policy nothing is capped.
#[tokio::test(flavor = "multi_thread")]
async fn a_maximal_permission_policy_caps_what_consumers_may_do() {
    let server = SERVER.get().await;
    let kubectl = Kubectl::new("1.33", &server.kubeconfig());
    let provider = workspace(&server, &kubectl, "capping-provider");
    export_widgets(&provider, "  maximalPermissionPolicy: {local: {}}\n");
    provider.apply(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: widget-readers\nrules:\n- {apiGroups: [example.com], resources: [widgets], verbs: [get, list, watch]}\n",
    );
    provider.ok(&[
        "create",
        "clusterrolebinding",
        "consumers-read-widgets",
        "--clusterrole=widget-readers",
        "--group=apis.kcp.io:binding:system:authenticated",
    ]);
    let consumer = workspace(&server, &kubectl, "capped-consumer");
    consumer.apply(&binding_yaml("widgets", "root:capping-provider", "widgets"));
    wait_bound(&consumer, "widgets");
    consumer.ok(&[
        "create",
        "clusterrolebinding",
        "erin-admin",
        "--clusterrole=cluster-admin",
        "--user=erin",
    ]);

    let home = tempfile::tempdir().unwrap();
    let erin_kubectl = user_kubectl(&server, home.path(), "erin");
    let erin = consumer.as_user(&erin_kubectl);
    let widget = "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: capped\n  namespace: default\nspec: {}\n";
    let refused = erin.create_fails(widget);
    assert!(
        refused.contains("(Forbidden)")
            && refused.contains("User \"erin\" cannot create resource \"widgets\"")
            && refused.contains("API export \""),
        "{refused}"
    );
    // Reading is within the policy; the admin (system:masters) is never capped.
    consumer.apply(widget);
    assert_eq!(
        erin.ok(&["get", "widgets", "-n", "default", "-o", "name"])
            .trim(),
        "widget.example.com/capped"
    );
    // Erin may do everything else in her workspace (the cap is only on the bound resource).
    erin.ok(&["create", "configmap", "free", "-n", "default"]);
}

/// While a binding is being deleted, its finalizer keeps it until its objects are gone; a user
/// other than the system may not remove it (upstream's `APIBindingDeletionFinalizer` admission),
/// even one who may do everything in the workspace.
#[tokio::test(flavor = "multi_thread")]
async fn only_the_system_removes_the_finalizer_of_a_binding_being_deleted() {
    let server = SERVER.get().await;
    let kubectl = Kubectl::new("1.33", &server.kubeconfig());
    let provider = workspace(&server, &kubectl, "finalizing-provider");
    export_widgets(&provider, "");
    let consumer = workspace(&server, &kubectl, "finalizing-consumer");
    consumer.apply(&binding_yaml(
        "widgets",
        "root:finalizing-provider",
        "widgets",
    ));
    wait_bound(&consumer, "widgets");
    consumer.apply("apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: held\n  namespace: default\n  finalizers: [example.com/hold]\nspec: {}\n");
    consumer.ok(&[
        "create",
        "clusterrolebinding",
        "frank-admin",
        "--clusterrole=cluster-admin",
        "--user=frank",
    ]);

    // The held widget keeps the binding terminating.
    consumer.ok(&["delete", "apibinding", "widgets", "--wait=false"]);
    assert!(
        !consumer
            .jsonpath(
                &["get", "apibinding", "widgets"],
                "{.metadata.deletionTimestamp}"
            )
            .is_empty(),
        "the binding is terminating"
    );
    let home = tempfile::tempdir().unwrap();
    let frank_kubectl = user_kubectl(&server, home.path(), "frank");
    let frank = consumer.as_user(&frank_kubectl);
    let refused = frank.fails(&[
        "patch",
        "apibinding",
        "widgets",
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":[]}}"#,
    ]);
    assert!(
        refused.contains("(Forbidden)")
            && refused
                .contains("removing the finalizer apis.kcp.io/apibinding-finalizer is forbidden"),
        "{refused}"
    );
    assert_eq!(
        consumer.jsonpath(&["get", "apibinding", "widgets"], "{.metadata.finalizers}"),
        r#"["apis.kcp.io/apibinding-finalizer"]"#
    );

    // Once the widget is released, the controller removes the finalizer and the binding goes.
    consumer.ok(&[
        "patch",
        "widget",
        "held",
        "-n",
        "default",
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":null}}"#,
    ]);
    consumer.wait(&["get", "apibindings", "-o", "name"], "");
}

/// A WorkspaceType in root that extends `root:universal` and binds `defaults` (`(path, export)`).
fn type_with_defaults(name: &str, defaults: &[(&str, &str)]) -> String {
    let bindings: String = defaults
        .iter()
        .map(|(path, export)| format!("  - {{path: \"{path}\", export: {export}}}\n"))
        .collect();
    format!(
        "apiVersion: tenancy.kcp.io/v1alpha1\nkind: WorkspaceType\nmetadata:\n  name: {name}\nspec:\n  extend:\n    with:\n    - {{name: universal, path: root}}\n  defaultAPIBindings:\n{bindings}"
    )
}

/// Creates workspace `root:<name>` of type `root:<type_name>` without waiting.
fn typed_workspace<'a>(server: &KcpProcess, root: &Ws<'a>, name: &str, type_name: &str) -> Ws<'a> {
    root.apply(&format!(
        "apiVersion: tenancy.kcp.io/v1alpha1\nkind: Workspace\nmetadata:\n  name: {name}\nspec:\n  type: {{name: {type_name}, path: root}}\n"
    ));
    Ws {
        kubectl: root.kubectl,
        server: format!("{}/clusters/root:{name}", server.base_url()),
        path: format!("root:{name}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_workspace_type_binds_its_default_exports_before_the_workspace_is_ready() {
    let server = SERVER.get().await;
    let kubectl = Kubectl::new("1.33", &server.kubeconfig());
    let provider = workspace(&server, &kubectl, "defaults-provider");
    export_widgets(&provider, "");
    let root = Ws {
        kubectl: &kubectl,
        server: format!("{}/clusters/root", server.base_url()),
        path: "root".into(),
    };

    // Ready only with its binding bound: the bound resource is usable at once.
    root.apply(&type_with_defaults(
        "with-widgets",
        &[
            ("root", "tenancy.kcp.io"),
            ("root:defaults-provider", "widgets"),
        ],
    ));
    let ws = typed_workspace(&server, &root, "has-widgets", "with-widgets");
    root.wait(
        &[
            "get",
            "workspace",
            "has-widgets",
            "-o",
            "jsonpath={.status.phase}",
        ],
        "Ready",
    );
    let names = ws.jsonpath(&["get", "apibindings"], "{.items[*].metadata.name}");
    let name = names.split_whitespace().collect::<Vec<_>>();
    assert_eq!(
        name.len(),
        1,
        "one binding (none for kcp's own export): {names}"
    );
    assert!(
        name[0].starts_with("widgets-") && name[0].len() == "widgets-".len() + 5,
        "{names}"
    );
    assert_eq!(
        ws.jsonpath(
            &["get", "apibinding", name[0]],
            "{.status.phase}/{.spec.reference.export.path}"
        ),
        "Bound/root:defaults-provider"
    );
    ws.apply("apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w1\n  namespace: default\nspec: {}\n");
    assert_eq!(
        ws.jsonpath(
            &["get", "logicalcluster", "cluster"],
            "{.status.conditions[?(@.type==\"APIBindingsInitialized\")].status}"
        ),
        "True"
    );

    // An export that does not exist yet holds the workspace in Initializing, and says so.
    root.apply(&type_with_defaults(
        "with-gadgets",
        &[("root:defaults-provider", "gadgets")],
    ));
    let waiting = typed_workspace(&server, &root, "has-gadgets", "with-gadgets");
    waiting.wait(
        &[
            "get",
            "logicalcluster",
            "cluster",
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"APIBindingsInitialized\")].reason}",
        ],
        "APIBindingErrors",
    );
    assert_eq!(
        root.jsonpath(&["get", "workspace", "has-gadgets"], "{.status.phase}"),
        "Initializing"
    );
    provider.apply(&schema_yaml("v1", "example.com", "gadgets", "Gadget"));
    provider.apply(&export_yaml(
        "gadgets",
        "example.com",
        "gadgets",
        "v1.gadgets.example.com",
    ));
    root.wait(
        &[
            "get",
            "workspace",
            "has-gadgets",
            "-o",
            "jsonpath={.status.phase}",
        ],
        "Ready",
    );
    waiting.ok(&["get", "gadgets", "-A"]);
}

/// A two-version APIResourceSchema of cluster-scoped `people.example.org`: v1 has
/// `spec.firstName` and `spec.lastName`, v2 `spec.name.{first,last,lastUpper}` and a
/// `spec.extra.hello` v1 lacks.
const PEOPLE_SCHEMA: &str = r#"apiVersion: apis.kcp.io/v1alpha1
kind: APIResourceSchema
metadata:
  name: rev1.people.example.org
spec:
  group: example.org
  names: {plural: people, singular: person, kind: Person, listKind: PersonList}
  scope: Cluster
  conversion: {strategy: None}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      type: object
      properties:
        spec:
          type: object
          properties:
            firstName: {type: string}
            lastName: {type: string}
  - name: v2
    served: true
    storage: false
    schema:
      type: object
      properties:
        spec:
          type: object
          properties:
            name:
              type: object
              properties:
                first: {type: string}
                last: {type: string}
                lastUpper: {type: string}
            extra:
              type: object
              properties:
                hello: {type: string}
"#;

/// Upstream's example conversion: names move between versions, `lastUpper` is computed, and
/// `spec.extra` survives a trip through v1.
const PEOPLE_CONVERSION: &str = r#"apiVersion: apis.kcp.io/v1alpha1
kind: APIConversion
metadata:
  name: rev1.people.example.org
spec:
  conversions:
  - from: v1
    to: v2
    rules:
    - {field: .spec.firstName, destination: .spec.name.first}
    - {field: .spec.lastName, destination: .spec.name.last, transformation: self}
    - {field: .spec.lastName, destination: .spec.name.lastUpper, transformation: self.upperAscii()}
  - from: v2
    to: v1
    rules:
    - {field: .spec.name.first, destination: .spec.firstName}
    - {field: .spec.name.last, destination: .spec.lastName}
    preserve: [.spec.extra]
"#;

#[tokio::test(flavor = "multi_thread")]
async fn an_api_conversion_converts_bound_objects_between_versions() {
    let server = SERVER.get().await;
    let kubectl = Kubectl::new("1.33", &server.kubeconfig());
    let provider = workspace(&server, &kubectl, "people-provider");
    provider.apply(PEOPLE_SCHEMA);

    // Admission compiles the rules against the schema of the same name, as upstream.
    for (from, to, wanted) in [
        (
            "name: rev1.people.example.org",
            "name: rev9.people.example.org",
            "is forbidden: error getting APIResourceSchema rev9.people.example.org",
        ),
        (
            "field: .spec.firstName",
            "field: .spec.nickName",
            "spec.conversions[0].rules[0].field",
        ),
        (
            "transformation: self.upperAscii()",
            "transformation: nosuch.upperAscii()",
            "spec.conversions[0].rules[2].transformation",
        ),
    ] {
        let refused = provider.create_fails(&PEOPLE_CONVERSION.replace(from, to));
        assert!(refused.contains(wanted), "{refused}");
    }
    provider.apply(PEOPLE_CONVERSION);
    provider.apply(&export_yaml(
        "people",
        "example.org",
        "people",
        "rev1.people.example.org",
    ));
    wait_identity(&provider, "people");

    let consumer = workspace(&server, &kubectl, "people-consumer");
    consumer.apply(&binding_yaml("people", "root:people-provider", "people"));
    wait_bound(&consumer, "people");

    // Written in v1 (the storage version), read in v2 and back.
    consumer.apply(
        "apiVersion: example.org/v1\nkind: Person\nmetadata:\n  name: ada\nspec: {firstName: Ada, lastName: Lovelace}\n",
    );
    let in_v2 = json(&consumer.ok(&["get", "people.v2.example.org", "ada", "-o", "json"]));
    assert_eq!(in_v2["apiVersion"], "example.org/v2");
    assert_eq!(
        in_v2["spec"],
        json(r#"{"name": {"first": "Ada", "last": "Lovelace", "lastUpper": "LOVELACE"}}"#)
    );
    // Writing the v2 form back leaves the v1 object as it was.
    let v2_file = consumer.file(&in_v2.to_string());
    consumer.ok(&["replace", "-f", &v2_file]);
    let in_v1 = json(&consumer.ok(&["get", "people.v1.example.org", "ada", "-o", "json"]));
    assert_eq!(
        in_v1["spec"],
        json(r#"{"firstName": "Ada", "lastName": "Lovelace"}"#)
    );
    assert!(
        !in_v1["metadata"]["annotations"]
            .as_object()
            .is_some_and(|a| a.keys().any(|k| k.starts_with("preserve.conversion"))),
        "{in_v1}"
    );

    // Written in v2 with a field v1 lacks: v1 keeps it in the preserve annotation, v2 gets it
    // back.
    consumer.apply(
        "apiVersion: example.org/v2\nkind: Person\nmetadata:\n  name: grace\nspec:\n  name: {first: Grace, last: Hopper}\n  extra: {hello: world}\n",
    );
    let in_v1 = json(&consumer.ok(&["get", "people.v1.example.org", "grace", "-o", "json"]));
    assert_eq!(
        in_v1["spec"],
        json(r#"{"firstName": "Grace", "lastName": "Hopper"}"#)
    );
    assert_eq!(
        in_v1["metadata"]["annotations"]["preserve.conversion.apis.kcp.io/v2"],
        r#"{"spec.extra":{"hello":"world"}}"#
    );
    let in_v2 = json(&consumer.ok(&["get", "people.v2.example.org", "grace", "-o", "json"]));
    assert_eq!(
        in_v2["spec"],
        json(
            r#"{"name": {"first": "Grace", "last": "Hopper", "lastUpper": "HOPPER"}, "extra": {"hello": "world"}}"#
        )
    );
    assert!(
        !in_v2["metadata"]["annotations"]
            .as_object()
            .is_some_and(|a| a.contains_key("preserve.conversion.apis.kcp.io/v2")),
        "{in_v2}"
    );
}
