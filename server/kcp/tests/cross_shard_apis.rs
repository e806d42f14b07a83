//! APIs as a service across shards (issue 21 item 7): `kcp sharded` with root and shard-1, an
//! export in a workspace on root and consumers on both shards, with the standalone cache and the
//! root shard's in-process cache, one topology per test reused for every check:
//!
//! - shard-1 reads the export, its schemas and its workspace's routing data back from the cache:
//!   a binding there becomes Bound under the export's identity hash and serves the bound
//!   resource (kubectl create, get, watch, delete), and a binding on root to the same export serves the same
//!   resource; each consumer sees only its own objects, and a wildcard list by identity on each
//!   shard sees only that shard's;
//! - a new schema version exported on root rolls to shard-1's binding;
//! - a workspace on shard-1 of a type (on root) whose `defaultAPIBindings` name an export created
//!   just before gets its binding and becomes Ready (the binding converges once the export reached
//!   shard-1's copies);
//! - the export's endpoint slice on root lists shard-1's URL once shard-1 holds a binding;
//! - after a restart of the topology, shard-1 serves the bound resource again, the slice lists
//!   the shards' new URLs, and drops shard-1 once shard-1's last binding of the export is gone;
//! - the export deleted on root makes shard-1's binding say `APIExportNotFound` (upstream's
//!   reason), and it converges when the export is back;
//! - RBAC across shards: a user granted `bind` on the export in its workspace on root may bind it
//!   from shard-1, and one granted `use` of a type there may create a workspace of it through
//!   shard-1; a user without either is refused with upstream's message; `bind` revoked on root
//!   is refused on shard-1 and granted again is allowed (shard-1 caches the policy it builds from
//!   the copies until they change); the export's maximal
//!   permission policy caps a consumer on shard-1 until the provider grants it on root;
//! - `access` across shards: a user granted `access` in the export's workspace on root enters
//!   it by cluster name through shard-1 (upstream's content authorizer reads the cache's
//!   LogicalCluster and `access` RBAC), and so does one bound to `cluster-admin` there (a role
//!   of the bootstrap policy); a user without a grant is refused with `workspace access not
//!   permitted`, and so are both once their bindings are deleted on root.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Duration;

use kcp_testing::identities::CertificateAuthority;
use kcp_testing::{Caller, Kubectl, Patience, ShardedKcp, temp_dir};
use serde_json::{Value, json};

const PATIENCE: Patience = Patience::new(Duration::from_secs(60), Duration::from_millis(200));
const WORKSPACES: &str = "apis/tenancy.kcp.io/v1alpha1/workspaces";
const SCHEMAS: &str = "apis/apis.kcp.io/v1alpha1/apiresourceschemas";
const EXPORTS: &str = "apis/apis.kcp.io/v1alpha2/apiexports";
const BINDINGS: &str = "apis/apis.kcp.io/v1alpha2/apibindings";
const SLICES: &str = "apis/apis.kcp.io/v1alpha1/apiexportendpointslices";
const GROUP: &str = "widgets.example.io";
const KUBECTL: &str = "1.33";

fn admin(sharded: &ShardedKcp, shard: &str) -> Caller {
    Caller::admin_of(&sharded.admin(shard))
}

fn at(path: &str, rest: &str) -> String {
    format!("/clusters/{path}/{rest}")
}

fn widgets(path: &str, version: &str) -> String {
    at(
        path,
        &format!("apis/{GROUP}/{version}/namespaces/default/widgets"),
    )
}

/// A workspace `name` in root on `shard`, optionally of `type_ref`, Ready.
async fn workspace(root: &Caller, name: &str, shard: &str, type_ref: Option<Value>) {
    let mut spec = json!({"location": {"selector": {"matchLabels": {"name": shard}}}});
    if let Some(type_ref) = type_ref {
        spec["type"] = type_ref;
    }
    root.create(
        &at("root", WORKSPACES),
        &json!({"metadata": {"name": name}, "spec": spec}),
    )
    .await;
    let path = format!("{}/{name}", at("root", WORKSPACES));
    PATIENCE
        .eventually(&format!("root:{name} Ready"), || async {
            let answer = root.get(&path).await;
            match answer.json()["status"]["phase"] == "Ready" {
                true => Ok(()),
                false => Err(answer.text()),
            }
        })
        .await;
}

/// Schema `<prefix>.widgets.<group>` serving `versions` (the first one stored).
fn schema(prefix: &str, versions: &[&str]) -> Value {
    let versions: Vec<Value> = versions
        .iter()
        .enumerate()
        .map(|(i, v)| {
            json!({"name": v, "served": true, "storage": i == 0,
                "schema": {"type": "object", "properties": {"spec": {"type": "object",
                    "properties": {"size": {"type": "integer"}}}}}})
        })
        .collect();
    json!({"apiVersion": "apis.kcp.io/v1alpha1", "kind": "APIResourceSchema",
        "metadata": {"name": format!("{prefix}.widgets.{GROUP}")},
        "spec": {"group": GROUP, "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": versions, "conversion": {"strategy": "None"}}})
}

fn export_resources(schema_prefix: &str) -> Value {
    json!([{"group": GROUP, "name": "widgets", "schema": format!("{schema_prefix}.widgets.{GROUP}"),
        "storage": {"crd": {}}}])
}

fn binding(name: &str) -> Value {
    json!({"apiVersion": "apis.kcp.io/v1alpha2", "kind": "APIBinding", "metadata": {"name": name},
        "spec": {"reference": {"export": {"path": "root:provider", "name": "widgets"}}}})
}

/// Creates binding `name` in `path` through `caller` once the shard admits it (it refuses a
/// binding until the export reached its copies), then waits until it is Bound.
async fn bind(caller: &Caller, path: &str, name: &str) -> Value {
    PATIENCE
        .eventually(&format!("{path} admits binding {name}"), || async {
            let answer = caller.post(&at(path, BINDINGS), &binding(name)).await;
            match answer.status {
                201 | 409 => Ok(()),
                _ => Err(answer.text()),
            }
        })
        .await;
    wait_bound(caller, path, name).await
}

async fn wait_bound(caller: &Caller, path: &str, name: &str) -> Value {
    let url = format!("{}/{name}", at(path, BINDINGS));
    PATIENCE
        .eventually(&format!("{path} binding {name} Bound"), || async {
            let answer = caller.get(&url).await;
            match answer.json()["status"]["phase"] == "Bound" {
                true => Ok(answer.json()),
                false => Err(answer.text()),
            }
        })
        .await
}

fn names(list: &Value) -> Vec<String> {
    let mut names: Vec<String> = list["items"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .map(|i| i["metadata"]["name"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// Grants `rule` in `root:provider` (through the root shard) to user `user`: ClusterRole `role`
/// and a ClusterRoleBinding of the same name.
async fn grant(root: &Caller, role: &str, rule: Value, user: &str) {
    let rbac = "apis/rbac.authorization.k8s.io/v1";
    root.create(
        &at("root:provider", &format!("{rbac}/clusterroles")),
        &json!({"metadata": {"name": role}, "rules": [rule]}),
    )
    .await;
    root.create(
        &at("root:provider", &format!("{rbac}/clusterrolebindings")),
        &json!({"metadata": {"name": role},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]}),
    )
    .await;
}

/// The URLs of the export's endpoint slice on root.
/// Where shard `name`'s endpoints start: `kcp sharded` runs a front-proxy and has every shard
/// advertise `<proxy>/shards/<name>` as its virtual-workspace URL.
fn advertised_url(sharded: &ShardedKcp, name: &str) -> String {
    format!("{}/shards/{name}", sharded.front_proxy().server)
}

async fn slice_urls(root: &Caller) -> Vec<String> {
    let slice = root
        .get(&format!("{}/widgets", at("root:provider", SLICES)))
        .await
        .json();
    let mut urls: Vec<String> = slice["status"]["endpoints"]
        .as_array()
        .map(|e| {
            e.iter()
                .map(|e| e["url"].as_str().unwrap_or_default().to_owned())
                .collect()
        })
        .unwrap_or_default();
    urls.sort();
    urls
}

/// Polls `url` through `caller` until it answers `expected`; the answer's body.
async fn answers(caller: &Caller, url: &str, expected: u16, what: &str) -> String {
    PATIENCE
        .eventually(what, || async {
            let answer = caller.get(url).await;
            match answer.status == expected {
                true => Ok(answer.text()),
                false => Err(answer.text()),
            }
        })
        .await
}

/// The whole scenario on one topology started with `flags`.
async fn apis_across_shards(label: &str, flags: &[String]) {
    let binary = Path::new(env!("CARGO_BIN_EXE_kcp"));
    let mut sharded = ShardedKcp::start(binary, label, 2, flags).await;
    let root = admin(&sharded, "root");
    let shard_1 = admin(&sharded, "shard-1");
    workspace(&root, "provider", "root", None).await;
    workspace(&root, "on-root", "root", None).await;
    workspace(&root, "on-1", "shard-1", None).await;

    // The export, on root.
    root.create(&at("root:provider", SCHEMAS), &schema("v1", &["v1"]))
        .await;
    root.create(
        &at("root:provider", EXPORTS),
        &json!({"apiVersion": "apis.kcp.io/v1alpha2", "kind": "APIExport",
            "metadata": {"name": "widgets"}, "spec": {"resources": export_resources("v1")}}),
    )
    .await;
    let identity = PATIENCE
        .eventually("the export's identity", || async {
            let export = root
                .get(&format!("{}/widgets", at("root:provider", EXPORTS)))
                .await
                .json();
            match export["status"]["identityHash"].as_str() {
                Some(hash) if !hash.is_empty() => Ok(hash.to_owned()),
                _ => Err(export.to_string()),
            }
        })
        .await;
    // Empty before the first binding.
    assert!(slice_urls(&root).await.is_empty());

    // Consumers on both shards.
    let bound_1 = bind(&shard_1, "root:on-1", "widgets").await;
    let bound_root = bind(&root, "root:on-root", "widgets").await;
    for bound in [&bound_1, &bound_root] {
        assert_eq!(
            bound["status"]["boundResources"][0]["schema"]["identityHash"],
            json!(identity),
            "{bound}"
        );
    }
    // kubectl on each shard: create, list and watch the bound objects of its consumer.
    let kubectl = Kubectl::new(KUBECTL, &sharded.kubeconfig());
    let manifests = temp_dir("xshard-widgets");
    for (shard, path, name) in [
        ("shard-1", "root:on-1", "on-shard-1"),
        ("root", "root:on-root", "on-root"),
    ] {
        let server = format!("{}/clusters/{path}", sharded.admin(shard).server);
        let at_shard = |args: &[&str]| {
            let mut all = vec!["--context", shard, "--server", server.as_str()];
            all.extend_from_slice(args);
            all.iter().map(|a| a.to_string()).collect::<Vec<String>>()
        };
        let manifest = |name: &str| {
            let file = manifests.path().join(format!("{shard}-{name}.json"));
            let widget = json!({"apiVersion": format!("{GROUP}/v1"), "kind": "Widget",
                "metadata": {"name": name, "namespace": "default"}, "spec": {"size": 2}});
            std::fs::write(&file, widget.to_string()).unwrap();
            file.display().to_string()
        };
        let run =
            |args: Vec<String>| kubectl.ok(&args.iter().map(String::as_str).collect::<Vec<_>>());
        run(at_shard(&["create", "-f", &manifest(name)]));
        let listed = run(at_shard(&["get", "widgets", "-n", "default", "-o", "name"]));
        assert_eq!(listed.trim(), format!("widget.{GROUP}/{name}"), "{shard}");
        let watch_args = at_shard(&["get", "widgets", "-n", "default", "--watch", "-o", "name"]);
        let mut watch =
            kubectl.background(&watch_args.iter().map(String::as_str).collect::<Vec<_>>());
        watch.wait_for_line("the existing widget", |line| line.ends_with(name));
        let second = format!("{name}-2");
        run(at_shard(&["create", "-f", &manifest(&second)]));
        watch.wait_for_line("the new widget", |line| line.ends_with(&second));
        run(at_shard(&["delete", "widget", "-n", "default", &second]));
    }

    // The wildcard list by identity sees each shard's own consumers only.
    let wildcard = format!("/clusters/*/apis/{GROUP}/v1/widgets:{identity}");
    assert_eq!(names(&shard_1.get(&wildcard).await.json()), ["on-shard-1"]);
    assert_eq!(names(&root.get(&wildcard).await.json()), ["on-root"]);

    // The export's endpoint slice on root lists shard-1 (and root) once they hold bindings.
    let shard_1_url = advertised_url(&sharded, "shard-1");
    PATIENCE
        .eventually("shard-1 in the export's endpoint slice", || async {
            let urls = slice_urls(&root).await;
            match urls.len() == 2 && urls.iter().any(|u| u.starts_with(&shard_1_url)) {
                true => Ok(()),
                false => Err(format!("{urls:?}")),
            }
        })
        .await;

    // A new schema version rolls to shard-1's binding.
    root.create(&at("root:provider", SCHEMAS), &schema("v2", &["v1", "v2"]))
        .await;
    let export_url = format!("{}/widgets", at("root:provider", EXPORTS));
    let mut export = root.get(&export_url).await.json();
    export["spec"]["resources"] = export_resources("v2");
    let updated = root.put(&export_url, &export).await;
    assert_eq!(updated.status, 200, "{}", updated.text());
    PATIENCE
        .eventually("v2 of widgets served on shard-1", || async {
            let answer = shard_1.get(&widgets("root:on-1", "v2")).await;
            match answer.status == 200 && names(&answer.json()) == ["on-shard-1"] {
                true => Ok(()),
                false => Err(answer.text()),
            }
        })
        .await;

    // Default bindings of a type on root, for a workspace on shard-1, to an export created just
    // before: the binding converges once the export reached shard-1.
    root.create(&at("root:provider", SCHEMAS), &schema("g1", &["v1"]))
        .await;
    root.create(
        &at("root:provider", EXPORTS),
        &json!({"apiVersion": "apis.kcp.io/v1alpha2", "kind": "APIExport",
            "metadata": {"name": "gadgets"}, "spec": {"resources": export_resources("g1")}}),
    )
    .await;
    root.create(
        &at(
            "root:provider",
            "apis/tenancy.kcp.io/v1alpha1/workspacetypes",
        ),
        &json!({"apiVersion": "tenancy.kcp.io/v1alpha1", "kind": "WorkspaceType",
            "metadata": {"name": "with-gadgets"},
            "spec": {"defaultAPIBindings": [{"path": "root:provider", "export": "gadgets"}]}}),
    )
    .await;
    let type_ref = json!({"name": "with-gadgets", "path": "root:provider"});
    PATIENCE
        .eventually("a workspace of the type is admitted", || async {
            let spec = json!({"location": {"selector": {"matchLabels": {"name": "shard-1"}}},
                "type": type_ref});
            let answer = root
                .post(
                    &at("root", WORKSPACES),
                    &json!({"metadata": {"name": "defaulted"}, "spec": spec}),
                )
                .await;
            match answer.status {
                201 | 409 => Ok(()),
                _ => Err(answer.text()),
            }
        })
        .await;
    PATIENCE
        .eventually("root:defaulted Ready with widgets", || async {
            let answer = shard_1.get(&widgets("root:defaulted", "v1")).await;
            match answer.status == 200 {
                true => Ok(()),
                false => Err(answer.text()),
            }
        })
        .await;

    // The export goes away on root: shard-1's binding says so as upstream does, and converges
    // once the export is back.
    let gadgets_url = format!("{}/gadgets", at("root:provider", EXPORTS));
    let deleted = root.delete(&gadgets_url).await;
    assert!(deleted.status < 300, "{}", deleted.text());
    let defaulted = names(&shard_1.get(&at("root:defaulted", BINDINGS)).await.json());
    assert_eq!(defaulted.len(), 1, "{defaulted:?}");
    let export_valid = |reason: &'static str| {
        let url = format!("{}/{}", at("root:defaulted", BINDINGS), defaulted[0]);
        let shard_1 = &shard_1;
        async move {
            PATIENCE
                .eventually(&format!("APIExportValid {reason}"), || async {
                    let binding = shard_1.get(&url).await.json();
                    let conditions = binding["status"]["conditions"].as_array().cloned();
                    let valid = conditions
                        .into_iter()
                        .flatten()
                        .find(|c| c["type"] == "APIExportValid");
                    let found = valid.as_ref().map(|c| {
                        c["reason"]
                            .as_str()
                            .unwrap_or(c["status"].as_str().unwrap())
                    });
                    match found == Some(reason) {
                        true => Ok(binding),
                        false => Err(binding.to_string()),
                    }
                })
                .await
        }
    };
    export_valid("APIExportNotFound").await;
    root.create(
        &at("root:provider", EXPORTS),
        &json!({"apiVersion": "apis.kcp.io/v1alpha2", "kind": "APIExport",
            "metadata": {"name": "gadgets"}, "spec": {"resources": export_resources("g1")}}),
    )
    .await;
    let converged = export_valid("True").await;
    assert_eq!(converged["status"]["phase"], "Bound", "{converged}");

    // RBAC across shards: `bind` granted in the export's workspace on root.
    let ca_dir = sharded.directory().join("pki");
    let clients =
        CertificateAuthority::read(&ca_dir.join("client-ca.crt"), &ca_dir.join("client-ca.key"));
    let as_user = |user: &str| {
        Caller::admin_of(
            &clients
                .client(user, &[])
                .credentials(&sharded.admin("shard-1")),
        )
    };
    let (alice, bob) = (as_user("alice"), as_user("bob"));
    workspace(&root, "users", "shard-1", None).await;
    for user in ["alice", "bob"] {
        shard_1
            .create(
                &at("root:users", "apis/rbac.authorization.k8s.io/v1/clusterrolebindings"),
                &json!({"metadata": {"name": format!("{user}-admin")},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
                    "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]}),
            )
            .await;
    }
    let bind_widgets = json!({"apiGroups": ["apis.kcp.io"], "resources": ["apiexports"],
        "resourceNames": ["widgets"], "verbs": ["bind"]});
    grant(&root, "bind-widgets", bind_widgets, "alice").await;
    bind(&alice, "root:users", "alice-widgets").await;
    let refused = bob
        .post(&at("root:users", BINDINGS), &binding("bob-widgets"))
        .await;
    assert_eq!(refused.status, 403, "{}", refused.text());
    assert!(
        refused.json()["message"]
            .as_str()
            .unwrap()
            .contains("no permission to bind to export root:provider:widgets"),
        "{}",
        refused.text()
    );

    // A revoke on root reaches shard-1's reviews (the policy it built from the copies is kept
    // only while they stay the same), and so does the grant again. Dry runs: admission decides,
    // nothing is stored.
    let may_bind = |expected: u16| {
        let (alice, url) = (&alice, format!("{}?dryRun=All", at("root:users", BINDINGS)));
        async move {
            PATIENCE
                .eventually(&format!("alice binds from shard-1: {expected}"), || async {
                    let answer = alice.post(&url, &binding("alice-again")).await;
                    match answer.status == expected {
                        true => Ok(answer.text()),
                        false => Err(answer.text()),
                    }
                })
                .await
        }
    };
    let rbac = "apis/rbac.authorization.k8s.io/v1";
    let alice_binds = at(
        "root:provider",
        &format!("{rbac}/clusterrolebindings/bind-widgets"),
    );
    let granted = root.get(&alice_binds).await.json();
    let revoked = root.delete(&alice_binds).await;
    assert_eq!(revoked.status, 200, "{}", revoked.text());
    let refused = may_bind(403).await;
    assert!(
        refused.contains("no permission to bind to export root:provider:widgets"),
        "{refused}"
    );
    root.create(
        &at("root:provider", &format!("{rbac}/clusterrolebindings")),
        &json!({"metadata": {"name": "bind-widgets"}, "roleRef": granted["roleRef"],
            "subjects": granted["subjects"]}),
    )
    .await;
    may_bind(201).await;

    // The export's maximal permission policy caps alice on shard-1, and the provider's grant to
    // `apis.kcp.io:binding:alice` on root (replicated with its role) lifts the cap there.
    let mut export = root.get(&export_url).await.json();
    export["spec"]["maximalPermissionPolicy"] = json!({"local": {}});
    let updated = root.put(&export_url, &export).await;
    assert_eq!(updated.status, 200, "{}", updated.text());
    let alice_widgets = widgets("root:users", "v1");
    let alice_lists = |expected: u16| {
        let what = format!("alice lists widgets: {expected}");
        let (alice, url) = (&alice, &alice_widgets);
        async move { answers(alice, url, expected, &what).await }
    };
    let capped = alice_lists(403).await;
    assert!(capped.contains("policy"), "{capped}");
    let read_widgets =
        json!({"apiGroups": [GROUP], "resources": ["widgets"], "verbs": ["get", "list", "watch"]});
    grant(
        &root,
        "widgets-reader",
        read_widgets,
        "apis.kcp.io:binding:alice",
    )
    .await;
    alice_lists(200).await;

    // `use` of a type on root, for a workspace created through shard-1, granted on root.
    root.create(
        &at(
            "root:provider",
            "apis/tenancy.kcp.io/v1alpha1/workspacetypes",
        ),
        &json!({"apiVersion": "tenancy.kcp.io/v1alpha1", "kind": "WorkspaceType",
            "metadata": {"name": "restricted"},
            "spec": {"extend": {"with": [{"name": "universal", "path": "root"}]}}}),
    )
    .await;
    let use_restricted = json!({"apiGroups": ["tenancy.kcp.io"], "resources": ["workspacetypes"],
        "resourceNames": ["restricted"], "verbs": ["use"]});
    grant(&root, "use-restricted", use_restricted, "alice").await;
    let restricted = |name: &str| {
        json!({"apiVersion": "tenancy.kcp.io/v1alpha1", "kind": "Workspace",
            "metadata": {"name": name},
            "spec": {"type": {"name": "restricted", "path": "root:provider"}}})
    };
    PATIENCE
        .eventually(
            "alice may use root:provider:restricted through shard-1",
            || async {
                let answer = alice
                    .post(&at("root:users", WORKSPACES), &restricted("alice-ws"))
                    .await;
                match answer.status {
                    201 | 409 => Ok(()),
                    _ => Err(answer.text()),
                }
            },
        )
        .await;
    let refused = bob
        .post(&at("root:users", WORKSPACES), &restricted("bob-ws"))
        .await;
    assert_eq!(refused.status, 403, "{}", refused.text());
    assert!(
        refused.text().contains(
            "unable to use workspace type root:provider:restricted: missing verb='use' permission"
        ),
        "{}",
        refused.text()
    );

    // `access` granted in root:provider (it holds exports and a type, so its LogicalCluster and
    // its `access` roles are replicated) lets carol into it by cluster name through shard-1,
    // whose content authorizer reads the cache's copies; dave, without the grant, is refused at
    // the gate; the revoke on root reaches shard-1.
    let provider = root
        .get(&format!("{}/provider", at("root", WORKSPACES)))
        .await
        .json();
    let provider = provider["spec"]["cluster"].as_str().unwrap().to_owned();
    let discovery = at(&provider, "api");
    let (carol, dave) = (as_user("carol"), as_user("dave"));
    let not_permitted = "workspace access not permitted";
    let before = carol.get(&discovery).await;
    assert_eq!(before.status, 403, "{}", before.text());
    assert!(before.text().contains(not_permitted), "{}", before.text());
    let enter = json!({"nonResourceURLs": ["/"], "verbs": ["access"]});
    grant(&root, "enter-provider", enter, "carol").await;
    let entered = answers(
        &carol,
        &discovery,
        200,
        "carol enters root:provider at shard-1",
    )
    .await;
    assert!(entered.contains("APIVersions"), "{entered}");
    let refused = dave.get(&discovery).await;
    assert_eq!(refused.status, 403, "{}", refused.text());
    assert!(refused.text().contains(not_permitted), "{}", refused.text());
    // A binding of `cluster-admin`, a role of the bootstrap policy (as a workspace's
    // `workspace-admin` binding), lets frank in too, and RBAC through it: upstream replicates a
    // binding whose role it finds in `system:admin`.
    let frank = as_user("frank");
    let admin_binding = json!({"metadata": {"name": "frank-admin"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "frank"}]});
    let admin_bindings = at("root:provider", &format!("{rbac}/clusterrolebindings"));
    root.create(&admin_bindings, &admin_binding).await;
    let namespaces = at(&provider, "api/v1/namespaces");
    answers(
        &frank,
        &namespaces,
        200,
        "frank lists namespaces at shard-1",
    )
    .await;
    let removed = root.delete(&format!("{admin_bindings}/frank-admin")).await;
    assert_eq!(removed.status, 200, "{}", removed.text());
    let refused = answers(&frank, &namespaces, 403, "frank refused once unbound").await;
    assert!(refused.contains(not_permitted), "{refused}");
    let revoked = root
        .delete(&at(
            "root:provider",
            &format!("{rbac}/clusterrolebindings/enter-provider"),
        ))
        .await;
    assert_eq!(revoked.status, 200, "{}", revoked.text());
    let refused = answers(&carol, &discovery, 403, "carol refused after the revoke").await;
    assert!(refused.contains(not_permitted), "{refused}");

    // A restart of the topology: shard-1 serves the bound resource again.
    sharded.restart().await;
    let shard_1 = admin(&sharded, "shard-1");
    PATIENCE
        .eventually("widgets on shard-1 after the restart", || async {
            let answer = shard_1.get(&widgets("root:on-1", "v2")).await;
            match answer.status == 200 && names(&answer.json()) == ["on-shard-1"] {
                true => Ok(()),
                false => Err(answer.text()),
            }
        })
        .await;
    wait_bound(&shard_1, "root:on-1", "widgets").await;

    // The slice follows the restarted shards' URLs, and drops shard-1 once its last binding of
    // the export is gone (root's stays).
    let root = admin(&sharded, "root");
    let slice_is = |want: Vec<String>| {
        let root = &root;
        async move {
            PATIENCE
                .eventually(&format!("the slice lists {want:?}"), || async {
                    let urls = slice_urls(root).await;
                    let matches = urls.len() == want.len()
                        && want.iter().all(|w| urls.iter().any(|u| u.starts_with(w)));
                    match matches {
                        true => Ok(()),
                        false => Err(format!("{urls:?}")),
                    }
                })
                .await
        }
    };
    let (root_url, shard_1_url) = (
        advertised_url(&sharded, "root"),
        advertised_url(&sharded, "shard-1"),
    );
    slice_is(vec![root_url.clone(), shard_1_url]).await;
    for (path, name) in [("root:on-1", "widgets"), ("root:users", "alice-widgets")] {
        let deleted = shard_1
            .delete(&format!("{}/{name}", at(path, BINDINGS)))
            .await;
        assert!(deleted.status < 300, "{}", deleted.text());
    }
    slice_is(vec![root_url]).await;
    assert!(sharded.stop().await.success(), "{}", sharded.output());
}

#[tokio::test(flavor = "multi_thread")]
async fn with_the_standalone_cache() {
    apis_across_shards("xshard-apis-standalone", &[]).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn with_the_in_process_cache() {
    apis_across_shards("xshard-apis-in-process", &["--cache=in-process".to_owned()]).await;
}
