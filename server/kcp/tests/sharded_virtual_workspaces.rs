//! Virtual workspaces through the front-proxy of a sharded kcp (issue 20's "`/services/` routed to
//! the root shard only breaks with 2+ shards, and endpoint-slice URLs point at shard-internal
//! addresses", kcp #3826, #3830): `kcp sharded` with root, shard-1, its cache server and the
//! front-proxy, everything done as `kcp-admin` through the proxy.
//!
//! - An export and its consumer in workspaces on shard-1: the APIExportEndpointSlice's URL is a
//!   proxy URL naming shard-1, and a kube-rs client whose server is that URL (`/clusters/*`) lists
//!   the consumer's widgets and watches one being created.
//! - A second export and consumer on root: a per-cluster virtual-workspace request (no marker)
//!   for each consumer is answered by the shard holding it (each export exists only on its own
//!   shard, so the other shard could not answer it).
//! - A cluster the index does not know in a virtual-workspace path is the 403 "workspace access
//!   not permitted" of `/clusters/`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Duration;

use futures::StreamExt;
use kcp_testing::{Caller, Patience, ShardedKcp, expect_status, item_names, widgets};
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::watcher::{self, Event};
use serde_json::{Value, json};

const PATIENCE: Patience = Patience::new(Duration::from_secs(90), Duration::from_millis(200));
const EVENT_WITHIN: Duration = Duration::from_secs(30);

fn binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_kcp"))
}

/// Creates `body` at `path` through `caller`, retrying while the API it needs is coming up.
async fn create(caller: &Caller, path: &str, body: &Value) {
    PATIENCE
        .eventually(&format!("POST {path}"), || async {
            let answer = caller.post(path, body).await;
            match answer.status {
                201 | 409 => Ok(()),
                _ => Err(answer.text()),
            }
        })
        .await;
}

/// Waits until GET `path` answers 200 with `ready` true of its body; returns the body.
async fn wait_for(
    caller: &Caller,
    what: &str,
    path: &str,
    ready: impl Fn(&Value) -> bool,
) -> Value {
    PATIENCE
        .eventually(what, || async {
            let answer = caller.get(path).await;
            let body = answer.json();
            if answer.status == 200 && ready(&body) {
                Ok(body)
            } else {
                Err(answer.text())
            }
        })
        .await
}

/// Creates workspace `root:<name>` on `shard`, waits until it is Ready; its logical cluster.
async fn workspace(admin: &Caller, name: &str, shard: &str) -> String {
    let collection = "/clusters/root/apis/tenancy.kcp.io/v1alpha1/workspaces";
    create(
        admin,
        collection,
        &json!({"apiVersion": "tenancy.kcp.io/v1alpha1", "kind": "Workspace",
        "metadata": {"name": name},
        "spec": {"location": {"selector": {"matchLabels": {"name": shard}}}}}),
    )
    .await;
    let ready = wait_for(
        admin,
        &format!("{name} Ready"),
        &format!("{collection}/{name}"),
        |w| w["status"]["phase"] == "Ready",
    )
    .await;
    ready["spec"]["cluster"].as_str().unwrap().to_owned()
}

/// An export of `widgets.<prefix>.example.com` on `shard` and one consumer binding it there.
struct Export {
    provider: String,
    consumer: String,
    group: String,
}

impl Export {
    async fn start(admin: &Caller, prefix: &str, shard: &str) -> Export {
        let group = format!("{prefix}.example.com");
        let provider_ws = format!("{prefix}-provider");
        let provider = workspace(admin, &provider_ws, shard).await;
        create(
            admin,
            &format!("/clusters/{provider}/apis/apis.kcp.io/v1alpha1/apiresourceschemas"),
            &widgets::schema(&group),
        )
        .await;
        let exports = format!("/clusters/{provider}/apis/apis.kcp.io/v1alpha2/apiexports");
        create(admin, &exports, &widgets::export(&group, json!([]))).await;
        wait_for(
            admin,
            "the export's identity",
            &format!("{exports}/widgets"),
            |e| e["status"]["identityHash"].is_string(),
        )
        .await;
        let consumer = workspace(admin, &format!("{prefix}-consumer"), shard).await;
        let bindings = format!("/clusters/{consumer}/apis/apis.kcp.io/v1alpha2/apibindings");
        let binding = widgets::binding(&format!("root:{provider_ws}"));
        create(admin, &bindings, &binding).await;
        wait_for(
            admin,
            "the binding Bound",
            &format!("{bindings}/widgets"),
            |b| b["status"]["phase"] == "Bound",
        )
        .await;
        create(
            admin,
            &format!("/clusters/{consumer}/api/v1/namespaces"),
            &json!({
            "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "vw"}}),
        )
        .await;
        let export = Export {
            provider,
            consumer,
            group,
        };
        export.create_widget(admin, "first").await;
        export
    }

    async fn create_widget(&self, admin: &Caller, name: &str) {
        let collection = format!(
            "/clusters/{}/apis/{}/v1/namespaces/vw/widgets",
            self.consumer, self.group
        );
        create(admin, &collection, &widgets::widget(&self.group, name, 1)).await;
    }

    /// The virtual workspace's path for `target` (`*` or a cluster), without the proxy's URL.
    fn path(&self, target: &str) -> String {
        format!(
            "/services/apiexport/{}/widgets/clusters/{target}",
            self.provider
        )
    }

    fn api_resource(&self) -> ApiResource {
        ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(&self.group, "v1", "Widget"),
            "widgets",
        )
    }
}

/// The names of the widgets a virtual-workspace list through `admin` returns.
async fn listed(admin: &Caller, path: &str) -> (u16, Vec<String>) {
    let answer = admin.get(path).await;
    (answer.status, item_names(&answer.json()))
}

/// A kube-rs client as `kcp-admin` (the admin kubeconfig's `front-proxy` context) at `url`.
async fn client_at(sharded: &ShardedKcp, url: &str) -> kube::Client {
    let kubeconfig = kube::config::Kubeconfig::read_from(sharded.kubeconfig()).unwrap();
    let options = kube::config::KubeConfigOptions {
        context: Some("front-proxy".into()),
        ..Default::default()
    };
    let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .unwrap();
    config.cluster_url = url.parse().unwrap();
    kube::Client::try_from(config).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn virtual_workspace_urls_resolve_through_the_front_proxy_to_their_shard() {
    let sharded = ShardedKcp::start(binary(), "sharded-vw", 2, &[]).await;
    let proxy = sharded.front_proxy();
    let admin = Caller::admin_of(&proxy);
    let on_1 = Export::start(&admin, "vw-one", "shard-1").await;
    let on_root = Export::start(&admin, "vw-root", "root").await;

    // The endpoint slice names the proxy and shard-1.
    let slice = wait_for(
        &admin,
        "the endpoint slice's endpoint",
        &format!(
            "/clusters/{}/apis/apis.kcp.io/v1alpha1/apiexportendpointslices/widgets",
            on_1.provider
        ),
        |s| {
            s["status"]["endpoints"]
                .as_array()
                .is_some_and(|e| !e.is_empty())
        },
    )
    .await;
    let url = slice["status"]["endpoints"][0]["url"].as_str().unwrap();
    assert_eq!(
        url,
        format!(
            "{}/shards/shard-1/services/apiexport/{}/widgets",
            proxy.server, on_1.provider
        ),
        "{slice}"
    );

    // A provider's client at the endpoint's URL: list, and a watch that sees a creation.
    let client = client_at(&sharded, &format!("{url}/clusters/*")).await;
    let widgets: kube::Api<DynamicObject> = kube::Api::all_with(client, &on_1.api_resource());
    let names: Vec<String> = widgets
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|w| w.metadata.name)
        .collect();
    assert_eq!(names, ["first"]);
    let stream = watcher::watcher(widgets, watcher::Config::default());
    let mut events = std::pin::pin!(stream.filter_map(|event| async move {
        match event.unwrap() {
            Event::InitDone => Some(None),
            Event::Apply(object) => Some(Some(object)),
            _ => None,
        }
    }));
    let mut next = async || {
        tokio::time::timeout(EVENT_WITHIN, events.next())
            .await
            .unwrap()
            .unwrap()
    };
    // Until the initial list is done, then the creation.
    while next().await.is_some() {}
    on_1.create_widget(&admin, "watched").await;
    let seen = next().await.unwrap();
    assert_eq!(seen.metadata.name.as_deref(), Some("watched"));

    // Per cluster, no marker: each consumer's request reaches the shard that holds it.
    for (export, widget_names) in [(&on_1, vec!["first", "watched"]), (&on_root, vec!["first"])] {
        let path = format!(
            "{}/apis/{}/v1/namespaces/vw/widgets",
            export.path(&export.consumer),
            export.group
        );
        let mut names = listed(&admin, &path).await;
        names.1.sort();
        assert_eq!(
            names,
            (200, widget_names.iter().map(|n| n.to_string()).collect()),
            "{path}"
        );
    }
    // A cluster nobody knows: 403, as for /clusters/.
    for unknown in ["root:nowhere", "zzzunknowncluster"] {
        let path = format!("{}/apis/{}/v1/widgets", on_1.path(unknown), on_1.group);
        let message = expect_status(&path, &admin.get(&path).await, 403, "Forbidden");
        assert!(
            message.contains("workspace access not permitted"),
            "{message}"
        );
    }
}
