//! The `kubectl kcp` plugin against a started `kcp`, through a real kubectl as users run it
//! (issue 21 item 5): a provider snapshots a CRD into an APIResourceSchema with
//! `kubectl kcp crd snapshot` and exports it; a consumer binds it with `kubectl kcp bind
//! apiexport`, which waits until the APIBinding is Bound, and then uses the bound resource; the
//! consumer reads and changes its claims with `kubectl kcp claims`; binding a missing export or
//! again under a taken name fails with the server's Status message. Every wait has a deadline.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Duration;

use kcp_testing::plugins::plugin_dir;
use kcp_testing::{Kubectl, SharedKcp};

static SERVER: SharedKcp = SharedKcp::new(env!("CARGO_BIN_EXE_kcp"), "kubectl-kcp");

/// How long a workspace, an export's identity or a binding may take to settle.
const SETTLED_WITHIN: Duration = Duration::from_secs(60);

const WIDGETS_CRD: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.io
spec:
  group: example.io
  names: {kind: Widget, plural: widgets}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    additionalPrinterColumns:
    - {name: Size, type: integer, jsonPath: .spec.size}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer, minimum: 1.0}
"#;

const WIDGETS_EXPORT: &str = r#"apiVersion: apis.kcp.io/v1alpha2
kind: APIExport
metadata:
  name: widgets
spec:
  resources:
  - {group: example.io, name: widgets, schema: v1.widgets.example.io, storage: {crd: {}}}
"#;

/// Writes `text` into the kubectl's home and returns the path.
fn file(kubectl: &Kubectl, name: &str, text: &str) -> String {
    let path = kubectl.home().join(name);
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn snapshot_export_bind_and_answer_claims_with_the_plugin() {
    let server = SERVER.get().await;
    let plugins = plugin_dir(Path::new(env!("CARGO_BIN_EXE_kcp")));
    let kubectl = Kubectl::with_plugins("1.33", &server.kubeconfig(), &plugins);

    // The provider: a CRD snapshotted into a schema, and an export of it.
    kubectl.ok(&["ws", "create", "plugin-provider", "--enter"]);
    let crd = file(&kubectl, "crd.yaml", WIDGETS_CRD);
    let schema = kubectl.ok(&["kcp", "crd", "snapshot", "-f", &crd, "--prefix", "v1"]);
    assert!(schema.contains("name: v1.widgets.example.io"), "{schema}");
    let schema = file(&kubectl, "schema.yaml", &schema);
    let out = kubectl.ok(&["apply", "-f", &schema]);
    assert!(
        out.contains("apiresourceschema.apis.kcp.io/v1.widgets.example.io created"),
        "{out}"
    );
    // the schema reads back as the snapshot wrote it
    let stored = kubectl.ok(&[
        "get",
        "apiresourceschema",
        "v1.widgets.example.io",
        "-o",
        "jsonpath={.spec.names.listKind}/{.spec.versions[0].schema.properties.spec.properties.size.minimum}/{.spec.versions[0].additionalPrinterColumns[0].name}",
    ]);
    assert_eq!(stored.trim(), "WidgetList/1/Size");
    let export = file(&kubectl, "export.yaml", WIDGETS_EXPORT);
    kubectl.ok(&["apply", "-f", &export]);

    // The consumer binds it; the plugin returns once the binding is Bound.
    kubectl.ok(&["ws", "use", ":root"]);
    kubectl.ok(&["ws", "create", "plugin-consumer", "--enter"]);
    let out = kubectl.ok(&[
        "kcp",
        "bind",
        "apiexport",
        "root:plugin-provider:widgets",
        "--accept-permission-claim",
        "configmaps.core",
        "--timeout",
        "60s",
    ]);
    assert_eq!(
        out,
        "apibinding widgets created. Waiting to successfully bind ...\nwidgets created and bound.\n"
    );
    let phase = kubectl.ok(&[
        "get",
        "apibinding",
        "widgets",
        "-o",
        "jsonpath={.status.phase}",
    ]);
    assert_eq!(phase, "Bound");
    let reference = kubectl.ok(&[
        "get",
        "apibinding",
        "widgets",
        "-o",
        "jsonpath={.spec.reference.export.path}:{.spec.reference.export.name}",
    ]);
    assert_eq!(reference, "root:plugin-provider:widgets");
    // the bound resource is served like a CRD
    kubectl.wait_for_output(&["get", "widgets", "-A", "-o", "name"], "", SETTLED_WITHIN);

    // The binding was written in the version discovery prefers, in that version's claim shape.
    let group = kubectl.ok(&[
        "get",
        "--raw",
        "/clusters/root:plugin-consumer/apis/apis.kcp.io",
    ]);
    let preferred = serde_json::from_str::<serde_json::Value>(&group).unwrap()["preferredVersion"]
        ["version"]
        .as_str()
        .unwrap()
        .to_owned();
    let claim = kubectl.ok(&[
        "get",
        &format!("apibindings.{preferred}.apis.kcp.io"),
        "widgets",
        "-o",
        "jsonpath={.spec.permissionClaims[0]}",
    ]);
    // (the server may write empty `group`/`identityHash` back; they say nothing)
    let mut claim: serde_json::Value = serde_json::from_str(&claim).unwrap();
    if let Some(fields) = claim.as_object_mut() {
        fields.retain(|_, value| value != "");
    }
    let (expected_claim, table) = match preferred.as_str() {
        "v1alpha2" => (
            serde_json::json!({"resource": "configmaps", "verbs": ["*"], "selector": {"matchAll": true}, "state": "Accepted"}),
            "APIBINDING   GROUP-RESOURCE   VERBS   STATUS\nwidgets      configmaps       *       Accepted\n",
        ),
        "v1alpha1" => (
            serde_json::json!({"resource": "configmaps", "all": true, "state": "Accepted"}),
            "APIBINDING   GROUP-RESOURCE   STATUS\nwidgets      configmaps       Accepted\n",
        ),
        other => panic!("apis.kcp.io prefers {other}"),
    };
    assert_eq!(claim, expected_claim);

    // Claims: the accepted one in the table, then rejected.
    assert_eq!(kubectl.ok(&["kcp", "claims", "get", "apibinding"]), table);
    let out = kubectl.ok(&[
        "kcp",
        "claims",
        "reject",
        "widgets",
        "--resource",
        "configmaps",
    ]);
    assert_eq!(
        out,
        "claim \"configmaps\" on APIBinding \"widgets\" is rejected\n"
    );
    let state = kubectl.ok(&[
        "get",
        "apibinding",
        "widgets",
        "-o",
        "jsonpath={.spec.permissionClaims[0].state}",
    ]);
    assert_eq!(state, "Rejected");

    // A missing export in another workspace: refused by admission, the Status message printed
    // after upstream's context, on one line.
    let missing = kubectl.fails(&[
        "kcp",
        "bind",
        "apiexport",
        "root:plugin-provider:nothing-here",
    ]);
    assert!(
        missing.starts_with("error: failed to create APIBinding: ")
            && missing
                .contains("no permission to bind to export root:plugin-provider:nothing-here")
            && missing.lines().count() == 1,
        "{missing}"
    );

    // Binding the same export again under the same name: the server's Status message.
    let again = kubectl.fails(&["kcp", "bind", "apiexport", "root:plugin-provider:widgets"]);
    assert_eq!(
        again,
        "error: failed to create APIBinding: apibindings.apis.kcp.io \"widgets\" already exists\n"
    );
}
