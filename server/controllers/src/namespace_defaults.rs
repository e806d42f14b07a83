//! What every namespace holds from the start: the `default` ServiceAccount (kube's
//! serviceaccounts controller) and the `kube-root-ca.crt` ConfigMap with the CA clients should
//! trust (kube's root-ca-cert-publisher), in every logical cluster.
//!
//! One watch over namespaces, ServiceAccounts and ConfigMaps of all logical clusters feeds one
//! queue of (cluster, namespace): a new namespace, a deleted `default` ServiceAccount or an edited
//! or deleted `kube-root-ca.crt` all come down to "make this namespace whole again", which is
//! idempotent, so a restart simply re-checks everything.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::select_all;
use kcp_apimachinery::{ApiError, meta};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::runner::{self, Controller, Pass, Queue};
use kcp_registry::LogicalClusterName;
use kcp_registry::ResourceType;
use kcp_registry::storage::objects::{CLUSTER_ANNOTATION, ChangeType, ListRequest};
use kcp_registry::store::{Location, RestStore};

/// The ServiceAccount every namespace has.
pub const DEFAULT_SERVICE_ACCOUNT: &str = "default";
/// The ConfigMap with the root CA every namespace has.
pub const ROOT_CA_CONFIG_MAP: &str = "kube-root-ca.crt";
const ROOT_CA_KEY: &str = "ca.crt";
const RETRY_AFTER: Duration = Duration::from_millis(500);

type Key = (LogicalClusterName, String);

struct Types {
    namespaces: Arc<ResourceType>,
    service_accounts: Arc<ResourceType>,
    config_maps: Arc<ResourceType>,
}

impl Types {
    fn of(store: &RestStore) -> Option<Types> {
        let registry = store.registry();
        Some(Types {
            namespaces: registry.builtin_type("", "v1", "namespaces")?,
            service_accounts: registry.builtin_type("", "v1", "serviceaccounts")?,
            config_maps: registry.builtin_type("", "v1", "configmaps")?,
        })
    }
}

/// Runs until `shutdown`.
pub async fn run(store: RestStore, root_ca_pem: String, shutdown: CancellationToken) {
    let Some(types) = Types::of(&store) else {
        return;
    };
    let controller = NamespaceDefaults {
        store,
        types,
        root_ca_pem,
    };
    runner::run(controller, shutdown).await;
}

struct NamespaceDefaults {
    store: RestStore,
    types: Types,
    root_ca_pem: String,
}

impl Controller for NamespaceDefaults {
    type Key = Key;
    const NAME: &'static str = "namespace-defaults";
    const RETRY_AFTER: Duration = RETRY_AFTER;

    async fn follow(&self, queue: &Queue<Key>) -> Result<(), ApiError> {
        follow(&self.store, &self.types, queue).await
    }

    async fn reconcile(&self, key: &Key) -> Result<Pass, ApiError> {
        ensure(&self.store, &self.types, &self.root_ca_pem, key).await
    }
}

fn cluster_of(object: &Value) -> Option<LogicalClusterName> {
    LogicalClusterName::parse(meta::annotations(object).get(CLUSTER_ANNOTATION)?)
}

async fn follow(store: &RestStore, types: &Types, queue: &Queue<Key>) -> Result<(), ApiError> {
    let namespace_prefix = store.keys(&types.namespaces).all_clusters().to_string();
    let page = store
        .list(
            &types.namespaces,
            ListRequest::everything(&namespace_prefix),
            &|_| true,
        )
        .await?;
    // Only namespaces missing something are queued at start, so a restart with thousands of
    // complete namespaces reads three lists instead of writing anything.
    let with_account = holders(store, &types.service_accounts, DEFAULT_SERVICE_ACCOUNT).await?;
    let with_ca = holders(store, &types.config_maps, ROOT_CA_CONFIG_MAP).await?;
    for namespace in &page.items {
        if let Some(key) = namespace_key(namespace)
            && (!with_account.contains(&key) || !with_ca.contains(&key))
        {
            queue.add(key);
        }
    }
    let from = page.revision + 1;
    let mut changes = select_all([
        Box::pin(
            store
                .objects()
                .watch_current(&namespace_prefix, from)
                .await?,
        ),
        Box::pin(
            store
                .objects()
                .watch_current(store.keys(&types.service_accounts).all_clusters(), from)
                .await?,
        ),
        Box::pin(
            store
                .objects()
                .watch_current(store.keys(&types.config_maps).all_clusters(), from)
                .await?,
        ),
    ]);
    while let Some(change) = changes.next().await {
        let change = change?;
        let object = &change.object;
        let key = match meta::namespace(object) {
            // A namespace: new ones need their defaults.
            None if change.kind == ChangeType::Added => namespace_key(object),
            None => None,
            // Content: only the loss (or edit) of a default matters.
            Some(namespace) => {
                let name = meta::name(object).unwrap_or_default();
                let is_default = match object.get("kind").and_then(Value::as_str) {
                    Some("ServiceAccount") => {
                        name == DEFAULT_SERVICE_ACCOUNT && change.kind == ChangeType::Deleted
                    }
                    Some("ConfigMap") => {
                        name == ROOT_CA_CONFIG_MAP && change.kind != ChangeType::Added
                    }
                    _ => false,
                };
                if is_default {
                    cluster_of(object).map(|cluster| (cluster, namespace.to_string()))
                } else {
                    None
                }
            }
        };
        if let Some(key) = key {
            queue.add(key);
        }
    }
    Err(ApiError::service_unavailable("watch closed"))
}

/// The namespaces (of all logical clusters) holding an object of this type and name.
async fn holders(
    store: &RestStore,
    rt: &ResourceType,
    name: &str,
) -> Result<HashSet<Key>, ApiError> {
    let prefix = store.keys(rt).all_clusters().to_string();
    let page = store
        .list(rt, ListRequest::everything(&prefix), &|o| {
            meta::name(o) == Some(name)
        })
        .await?;
    Ok(page
        .items
        .iter()
        .filter_map(|o| Some((cluster_of(o)?, meta::namespace(o)?.to_string())))
        .collect())
}

fn namespace_key(namespace: &Value) -> Option<Key> {
    if meta::deletion_timestamp(namespace).is_some() {
        return None;
    }
    Some((cluster_of(namespace)?, meta::name(namespace)?.to_string()))
}

/// Creates what the namespace lacks; nothing when it is gone or terminating.
async fn ensure(
    store: &RestStore,
    types: &Types,
    root_ca_pem: &str,
    (cluster, namespace): &Key,
) -> Result<Pass, ApiError> {
    let cluster_scope = Location {
        cluster,
        namespace: None,
    };
    match store.get(&types.namespaces, cluster_scope, namespace).await {
        Ok(stored) if meta::deletion_timestamp(&stored.object).is_none() => {}
        Ok(_) | Err(ApiError { code: 404, .. }) => return Ok(Pass::Done),
        Err(e) => return Err(e),
    }
    let at = Location {
        cluster,
        namespace: Some(namespace),
    };
    let account = json!({"apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": DEFAULT_SERVICE_ACCOUNT, "namespace": namespace}});
    let data = json!({ROOT_CA_KEY: root_ca_pem});
    let config_map = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": ROOT_CA_CONFIG_MAP, "namespace": namespace,
            "annotations": {"kubernetes.io/description": "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters."}},
        "data": data});
    // Written together, so the store commits both in one batch.
    let (_, created) = tokio::try_join!(
        store.create_if_absent(&types.service_accounts, at, account),
        store.create_if_absent(&types.config_maps, at, config_map),
    )?;
    if !created {
        let current = store
            .get(&types.config_maps, at, ROOT_CA_CONFIG_MAP)
            .await?;
        if current.object.get("data") != Some(&data) {
            let set_data = move |current: &Value| {
                let mut updated = current.clone();
                updated["data"] = data.clone();
                Ok(updated)
            };
            store
                .update(
                    &types.config_maps,
                    at,
                    ROOT_CA_CONFIG_MAP,
                    &set_data,
                    None,
                    false,
                )
                .await?;
        }
    }
    Ok(Pass::Done)
}
