//! `kubectl kcp` against the fake: the APIBinding `bind apiexport` sends (body and version),
//! its wait for `Bound`, the claim patches of `claims accept/reject`, the `claims get` table,
//! `crd snapshot` on this repository's CRDs, and the errors of each.

use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use super::{Fake, ok, stderr, stdout};

/// The writes the fake received: (method, URI, content type, body).
fn writes(fake: &Fake) -> Vec<(String, String, String, Value)> {
    fake.apis(|apis| apis.writes.clone())
}

/// The body of write `index`, after checking its `METHOD URI` and content type.
#[track_caller]
fn write_at(fake: &Fake, index: usize, request: &str, content_type: &str) -> Value {
    let (method, uri, sent_type, body) = writes(fake).swap_remove(index);
    assert_eq!(format!("{method} {uri}"), request);
    assert_eq!(sent_type, content_type);
    body
}

fn binding_gets(fake: &Fake, version: &str, name: &str) -> usize {
    let path = format!("GET /clusters/root:org/apis/apis.kcp.io/{version}/apibindings/{name}");
    fake.requests().iter().filter(|r| **r == path).count()
}

/// The fake serving apis.kcp.io with APIBindings in `versions` (discovery order), `preferred`
/// first.
fn with_apis(versions: Vec<&'static str>, preferred: &'static str) -> Fake {
    let fake = Fake::start(true);
    fake.serve_apis(versions, preferred);
    fake
}

/// Runs `kubectl kcp args` expecting exit code 1 and exactly `error: <expected>` on stderr.
#[track_caller]
fn fails(fake: &Fake, args: &[&str], expected: &str) {
    let out = fake.kcp(args);
    assert_eq!(out.status.code(), Some(1), "{args:?}: {}", stdout(&out));
    assert_eq!(stderr(&out), format!("error: {expected}\n"), "{args:?}");
}

#[test]
fn bind_creates_a_v1alpha2_binding_with_claims_and_waits_until_bound() {
    let fake = with_apis(vec!["v1alpha2", "v1alpha1"], "v1alpha2");
    let out = fake.kcp(&[
        "bind",
        "apiexport",
        "root:svc:widgets",
        "--accept-permission-claim",
        "secrets.core,configmaps.core",
        "--accept-permission-claim",
        "things.example.io",
        "--reject-permission-claim=events.core",
    ]);
    assert_eq!(
        ok(&out),
        "apibinding widgets created. Waiting to successfully bind ...\nwidgets created and bound.\n"
    );
    assert_eq!(writes(&fake).len(), 1);
    let body = write_at(
        &fake,
        0,
        "POST /clusters/root:org/apis/apis.kcp.io/v1alpha2/apibindings",
        "application/json",
    );
    let claim = |group: &str, resource: &str, state: &str| {
        let mut claim = json!({"resource": resource, "verbs": ["*"], "selector": {"matchAll": true}, "state": state});
        if !group.is_empty() {
            claim["group"] = json!(group);
        }
        claim
    };
    assert_eq!(
        body,
        json!({"kind": "APIBinding", "apiVersion": "apis.kcp.io/v1alpha2",
        "metadata": {"name": "widgets"},
        "spec": {"reference": {"export": {"path": "root:svc", "name": "widgets"}},
                 "permissionClaims": [
                     claim("", "secrets", "Accepted"),
                     claim("", "configmaps", "Accepted"),
                     claim("example.io", "things", "Accepted"),
                     claim("", "events", "Rejected"),
                 ]}})
    );
    // created in phase Binding: polled until the fake reported Bound on the third GET
    assert_eq!(binding_gets(&fake, "v1alpha2", "widgets"), 3);
    // discovery decided the version
    assert!(
        fake.requests()
            .contains(&"GET /clusters/root:org/apis/apis.kcp.io/v1alpha1".to_owned())
    );
}

#[test]
fn bind_speaks_v1alpha1_when_discovery_prefers_it() {
    let fake = with_apis(vec!["v1alpha1"], "v1alpha1");
    let out = fake.kcp(&[
        "bind",
        "apiexport",
        "root:svc:widgets",
        "--name",
        "my-widgets",
        "--reject-permission-claim",
        "secrets.core",
        "-w",
        "team",
    ]);
    assert_eq!(
        ok(&out),
        "apibinding my-widgets created. Waiting to successfully bind ...\nmy-widgets created and bound.\n"
    );
    let body = write_at(
        &fake,
        0,
        "POST /clusters/root:org:team/apis/apis.kcp.io/v1alpha1/apibindings",
        "application/json",
    );
    assert_eq!(
        body,
        json!({"kind": "APIBinding", "apiVersion": "apis.kcp.io/v1alpha1",
               "metadata": {"name": "my-widgets"},
               "spec": {"reference": {"export": {"path": "root:svc", "name": "widgets"}},
                        "permissionClaims": [{"resource": "secrets", "all": true, "state": "Rejected"}]}})
    );
}

#[test]
fn bind_accept_all_takes_the_exports_claims() {
    let fake = with_apis(vec!["v1alpha2", "v1alpha1"], "v1alpha2");
    // the provider's workspace, where the export is read
    fake.state
        .lock()
        .expect("state")
        .add("root", "svc", "Ready");
    fake.apis(|apis| {
        apis.exports.insert(
            ("root:svc".into(), "widgets".into()),
            json!({"kind": "APIExport", "metadata": {"name": "widgets"}, "spec": {"permissionClaims": [
                {"resource": "configmaps", "all": true},
                {"group": "example.io", "resource": "things", "identityHash": "h1", "all": true},
            ]}}),
        );
    });
    let out = fake.kcp(&[
        "bind",
        "apiexport",
        "root:svc:widgets",
        "--accept-all-permission-claims",
    ]);
    ok(&out);
    assert!(fake.requests().contains(
        &"GET /clusters/root:svc/apis/apis.kcp.io/v1alpha1/apiexports/widgets".to_owned()
    ));
    assert_eq!(
        writes(&fake)[0].3["spec"]["permissionClaims"],
        json!([
            {"resource": "configmaps", "verbs": ["*"], "selector": {"matchAll": true}, "state": "Accepted"},
            {"group": "example.io", "resource": "things", "verbs": ["*"], "identityHash": "h1",
             "selector": {"matchAll": true}, "state": "Accepted"},
        ])
    );

    let missing = fake.kcp(&[
        "bind",
        "apiexport",
        "root:svc:gadgets",
        "--reject-all-permission-claims",
    ]);
    assert_eq!(missing.status.code(), Some(1));
    assert_eq!(
        stderr(&missing),
        "error: failed to get APIExport \"gadgets\": apiexports.apis.kcp.io \"gadgets\" not found\n"
    );
}

#[test]
fn bind_errors() {
    let fake = with_apis(vec!["v1alpha2"], "v1alpha2");
    // a leading colon is part of the path as upstream reads it: not a valid path
    let bad_input: [(&[&str], &str); 7] = [
        (
            &["bind", "apiexport", ":root:svc:widgets"],
            "fully qualified reference to workspace where APIExport exists is required. The format is `<logical-cluster-name>:<apiexport>` or `<full>:<path>:<to>:<apiexport>`",
        ),
        (
            &["bind", "apiexport"],
            "`root:ws:apiexport_object` reference to bind is required as an argument",
        ),
        (
            &["bind", "apiexport", "widgets"],
            "fully qualified reference to workspace where APIExport exists is required. The format is `<logical-cluster-name>:<apiexport>` or `<full>:<path>:<to>:<apiexport>`",
        ),
        (
            &["bind", "apiexport", "root:svc:"],
            "the APIExport name is missing in \"root:svc:\": the format is `<workspace path>:<apiexport>`",
        ),
        (
            &[
                "bind",
                "apiexport",
                "root:svc:w",
                "--accept-permission-claim",
                "secrets,pods.core,x.",
            ],
            "invalid accepted permission claims: [invalid permission claim \"secrets\" invalid permission claim \"x.\"]",
        ),
        (
            &[
                "bind",
                "apiexport",
                "root:svc:w",
                "--accept-permission-claim",
                "secrets.core",
                "--reject-permission-claim",
                "secrets.core",
            ],
            "accepted permission claim secrets.core conflicts with rejected permission claim secrets.core",
        ),
        (
            &[
                "bind",
                "apiexport",
                "root:svc:w",
                "--accept-all-permission-claims",
                "--reject-all-permission-claims",
            ],
            "cannot use both --accept-all-permission-claims and --reject-all-permission-claims",
        ),
    ];
    for (args, expected) in bad_input {
        fails(&fake, args, expected);
    }
    // nothing was sent for bad input
    assert!(writes(&fake).is_empty());

    // the server's Status message, wrapped as upstream wraps it
    ok(&fake.kcp(&["bind", "apiexport", "root:svc:widgets"]));
    fails(
        &fake,
        &["bind", "apiexport", "root:svc:widgets"],
        "failed to create APIBinding: apibindings.apis.kcp.io \"widgets\" already exists",
    );

    // never bound: the bounded wait ends with upstream's error
    fake.apis(|apis| apis.gets_until_bound = usize::MAX);
    fails(
        &fake,
        &["bind", "apiexport", "root:svc:slow", "--timeout", "1s"],
        "could not bind slow: context deadline exceeded",
    );
    assert!(binding_gets(&fake, "v1alpha2", "slow") >= 2);
    // a command without its subcommand shows its help and succeeds, as upstream's
    let help = fake.kcp(&["claims"]);
    assert_eq!(help.status.code(), Some(0));
    assert!(stdout(&help).contains("Accept permission claims of an APIBinding"));
    // a usage error exits 1 like upstream's cobra, not clap's 2
    let out = fake.kcp(&["bind", "apiexport", "root:svc:x", "--timeout", "soon"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("invalid duration \"soon\""),
        "{}",
        stderr(&out)
    );
}

#[test]
fn bind_without_apis_kcp_io_fails_discovery() {
    let fake = Fake::start(true);
    let out = fake.kcp(&["bind", "apiexport", "root:svc:widgets"]);
    assert_eq!(
        stderr(&out),
        "error: service discovery failed: server does not serve apibindings.apis.kcp.io\n"
    );
}

fn claimed_binding(fake: &Fake) {
    fake.apis(|apis| {
        apis.add_binding(
            "root:org",
            "cert-manager",
            json!([
                {"resource": "secrets", "verbs": ["get", "list"], "selector": {"matchAll": true}},
                {"group": "networking.istio.io", "resource": "gateways", "identityHash": "h1",
                 "verbs": ["*"], "selector": {"matchAll": true}, "state": "Accepted"},
            ]),
        );
        apis.add_binding("root:org", "other", json!([]));
    });
}

#[test]
fn claims_get_lists_the_bindings_claims() {
    let fake = with_apis(vec!["v1alpha2", "v1alpha1"], "v1alpha2");
    claimed_binding(&fake);
    let table = "\
APIBINDING     GROUP-RESOURCE                 VERBS      STATUS
cert-manager   secrets                        get,list   
cert-manager   gateways.networking.istio.io   *          Accepted
";
    assert_eq!(ok(&fake.kcp(&["claims", "get", "apibinding"])), table);
    assert_eq!(
        ok(&fake.kcp(&["claims", "get", "apibinding", "cert-manager"])),
        table
    );
    let missing = fake.kcp(&["claims", "get", "apibinding", "nope"]);
    assert_eq!(
        stderr(&missing),
        "error: error finding APIBinding: apibindings.apis.kcp.io \"nope\" not found\n"
    );
}

#[test]
fn claims_accept_and_reject_patch_the_claims() {
    let fake = with_apis(vec!["v1alpha2"], "v1alpha2");
    claimed_binding(&fake);
    let rv = fake.apis(|apis| {
        apis.bindings[&("root:org".to_owned(), "cert-manager".to_owned())]["metadata"]["resourceVersion"].clone()
    });

    let out = fake.kcp(&["claims", "accept", "cert-manager", "--resource=secrets"]);
    assert_eq!(
        ok(&out),
        "claim \"secrets\" on APIBinding \"cert-manager\" is accepted\n"
    );
    let patch = write_at(
        &fake,
        0,
        "PATCH /clusters/root:org/apis/apis.kcp.io/v1alpha2/apibindings/cert-manager",
        "application/merge-patch+json",
    );
    assert_eq!(
        patch,
        json!({"metadata": {"resourceVersion": rv}, "spec": {"permissionClaims": [
            {"resource": "secrets", "verbs": ["get", "list"], "selector": {"matchAll": true}, "state": "Accepted"},
            {"group": "networking.istio.io", "resource": "gateways", "identityHash": "h1",
             "verbs": ["*"], "selector": {"matchAll": true}, "state": "Accepted"},
        ]}})
    );

    let out = fake.kcp(&["claims", "reject", "cert-manager", "--identity-hash", "h1"]);
    assert_eq!(
        ok(&out),
        "claim with identity hash \"h1\" on APIBinding \"cert-manager\" is rejected\n"
    );
    assert_eq!(
        ok(&fake.kcp(&["claims", "get", "apibinding", "cert-manager"])),
        "\
APIBINDING     GROUP-RESOURCE                 VERBS      STATUS
cert-manager   secrets                        get,list   Accepted
cert-manager   gateways.networking.istio.io   *          Rejected
"
    );

    fails(
        &fake,
        &["claims", "accept"],
        "error APIBinding name is missing",
    );
    fails(
        &fake,
        &["claims", "accept", "cert-manager"],
        "one of --resource or --identity-hash is required",
    );
    fails(
        &fake,
        &["claims", "reject", "cert-manager", "--resource", "pods"],
        "APIBinding \"cert-manager\" has no permission claim matching claim \"pods\"",
    );
    fails(
        &fake,
        &["claims", "reject", "nope", "--resource", "pods"],
        "error updating permission claim for APIBinding \"nope\": apibindings.apis.kcp.io \"nope\" not found",
    );
    // two patches, nothing for the failures
    assert_eq!(writes(&fake).len(), 2);
}

fn repo_file(relative: &str) -> String {
    format!("{}/../../{relative}", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn crd_snapshot_from_a_file_and_from_stdin() {
    let fake = Fake::start(true);
    let file = repo_file("e2e/workload-crds/services.core.yaml");
    let out = fake.kcp(&["crd", "snapshot", "-f", &file, "--prefix", "today"]);
    let text = ok(&out);
    assert!(text.ends_with("\n\n---\n"), "{text}");
    let schema: Value = yaml_serde::from_str(text.trim_end_matches("---\n")).expect("yaml");
    assert_eq!(schema["kind"], "APIResourceSchema");
    assert_eq!(schema["apiVersion"], "apis.kcp.io/v1alpha1");
    assert_eq!(schema["metadata"]["name"], "today.services.core");

    // two CRDs on stdin, JSON out: one object per document, each followed by its separator
    let first = std::fs::read_to_string(&file).expect("read");
    let second =
        std::fs::read_to_string(repo_file("crds/operator.kcp.io_shards.yaml")).expect("read");
    let mut child = Command::new(env!("CARGO_BIN_EXE_kubectl-kcp"))
        .args(["crd", "snapshot", "-f", "-", "--prefix", "v2", "-o", "json"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(format!("{first}\n---\n{second}").as_bytes())
        .expect("write");
    let out = child.wait_with_output().expect("wait");
    let text = ok(&out);
    let objects: Vec<Value> = text
        .split("\n\n---\n")
        .filter(|s| !s.is_empty())
        .map(|s| serde_json::from_str(s).expect("json"))
        .collect();
    let names: Vec<&str> = objects
        .iter()
        .filter_map(|o| o["metadata"]["name"].as_str())
        .collect();
    assert_eq!(names, ["v2.services.core", "v2.shards.operator.kcp.io"]);
    assert!(
        text.starts_with("{\"kind\":\"APIResourceSchema\",\"apiVersion\":\"apis.kcp.io/v1alpha1\"")
    );

    let bad = fake.kcp(&["crd", "snapshot", "-o", "table"]);
    assert_eq!(
        stderr(&bad),
        "error: [--filename is required, --prefix is required, invalid value \"table\" for --output; valid values are json, yaml]\n"
    );
    let missing = fake.kcp(&[
        "crd",
        "snapshot",
        "-f",
        "/nonexistent.yaml",
        "--prefix",
        "p",
    ]);
    assert!(stderr(&missing).starts_with("error: error opening /nonexistent.yaml: "));
    let invalid = fake.kcp(&["crd", "snapshot", "-f", &file, "--prefix", "UPPER"]);
    assert!(stderr(&invalid).starts_with(
        "error: error converting CRD: metadata.name: Invalid value: \"UPPER.services.core\""
    ));
}
