//! Wires the reconcilers into kube-runtime controllers: what each one owns and watches, the
//! error policy (per-object backoff) and graceful shutdown.
//!
//! Every kind owns the objects it creates, so a change to (or deletion of) a child triggers its
//! owner. Shards, FrontProxies and Kubeconfigs also follow the RootShard they reference, because
//! its CAs, URLs and version feed into what they render.

use std::future::Future;
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Api, Client, Resource, ResourceExt};
use tokio_util::sync::CancellationToken;

use crate::api::{CacheServer, FrontProxy, Kubeconfig, RootShard, Shard};

use super::{Context, Error, cacheserver, frontproxy, kubeconfig, server};

/// A reconcile function as the loops drive it.
type Reconciler<K> =
    fn(Arc<K>, Arc<Context>) -> futures::future::BoxFuture<'static, Result<Action, Error>>;

/// `Kind/namespace/name`, the backoff key.
fn key<K: Resource<DynamicType = ()>>(object: &K) -> String {
    format!(
        "{}/{}/{}",
        K::kind(&()),
        object.namespace().unwrap_or_default(),
        object.name_any()
    )
}

/// Runs `reconcile` and keeps the backoff and failure events in step with its outcome.
async fn guarded<K, F, Fut>(
    object: Arc<K>,
    ctx: Arc<Context>,
    reconcile: F,
) -> Result<Action, Error>
where
    K: Resource<DynamicType = ()>,
    F: FnOnce(Arc<K>, Arc<Context>) -> Fut,
    Fut: Future<Output = Result<Action, Error>>,
{
    let key = key(&*object);
    let result = reconcile(object.clone(), ctx.clone()).await;
    match &result {
        Ok(_) => ctx.backoff.succeeded(&key),
        Err(error) => {
            tracing::warn!(object = %key, error = %super::error_chain(error), "reconcile failed");
            ctx.publish_failure(&*object, error).await;
        }
    }
    result
}

fn error_policy<K: Resource<DynamicType = ()>>(
    object: Arc<K>,
    _error: &Error,
    ctx: Arc<Context>,
) -> Action {
    ctx.backoff.retry(&key(&*object))
}

/// Adds the child kinds every workload controller owns.
fn owning<K>(controller: Controller<K>, client: &Client) -> Controller<K>
where
    K: Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let config = watcher::Config::default();
    controller
        .owns(Api::<Secret>::all(client.clone()), config.clone())
        .owns(Api::<ConfigMap>::all(client.clone()), config.clone())
        .owns(Api::<Service>::all(client.clone()), config.clone())
        .owns(Api::<Deployment>::all(client.clone()), config.clone())
        .owns(Api::<StatefulSet>::all(client.clone()), config.clone())
        .owns(Api::<PodDisruptionBudget>::all(client.clone()), config)
}

/// Objects in `store` (same namespace as `root`) for which `references` names `root`.
fn dependents<K>(
    store: &Store<K>,
    root: &RootShard,
    references: impl Fn(&K) -> Option<String>,
) -> Vec<ObjectRef<K>>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    store
        .state()
        .into_iter()
        .filter(|object| {
            object.namespace() == root.namespace()
                && references(object).as_deref() == Some(&root.name_any())
        })
        .map(|object| ObjectRef::from_obj(&*object))
        .collect()
}

async fn drive<K>(
    controller: Controller<K>,
    ctx: Arc<Context>,
    shutdown: CancellationToken,
    reconcile: Reconciler<K>,
) where
    K: Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    controller
        .graceful_shutdown_on(async move { shutdown.cancelled().await })
        .run(
            move |object, ctx| guarded(object, ctx, reconcile),
            error_policy,
            ctx,
        )
        .for_each(|result| async move {
            if let Err(error) = result {
                tracing::debug!(error = %super::error_chain(&error), "controller event");
            }
        })
        .await;
}

/// Runs every controller until `shutdown` is cancelled and in-flight reconciles have finished.
pub async fn run(client: Client, shutdown: CancellationToken) {
    let ctx = Arc::new(Context::new(client.clone()));
    let config = watcher::Config::default();

    let roots = owning(
        Controller::new(Api::<RootShard>::all(client.clone()), config.clone()),
        &client,
    );
    let caches = owning(
        Controller::new(Api::<CacheServer>::all(client.clone()), config.clone()),
        &client,
    );

    let shards = owning(
        Controller::new(Api::<Shard>::all(client.clone()), config.clone()),
        &client,
    );
    let shard_store = shards.store();
    let shards = shards.watches(
        Api::<RootShard>::all(client.clone()),
        config.clone(),
        move |root| {
            dependents(&shard_store, &root, |shard: &Shard| {
                Some(shard.spec.root_shard.reference.name.clone())
            })
        },
    );

    let proxies = owning(
        Controller::new(Api::<FrontProxy>::all(client.clone()), config.clone()),
        &client,
    );
    let proxy_store = proxies.store();
    let proxies = proxies.watches(
        Api::<RootShard>::all(client.clone()),
        config.clone(),
        move |root| {
            dependents(&proxy_store, &root, |proxy: &FrontProxy| {
                Some(proxy.spec.root_shard.reference.name.clone())
            })
        },
    );

    let kubeconfigs = Controller::new(Api::<Kubeconfig>::all(client.clone()), config.clone())
        .owns(Api::<Secret>::all(client.clone()), config.clone());
    let kubeconfig_store = kubeconfigs.store();
    let kubeconfigs =
        kubeconfigs.watches(Api::<RootShard>::all(client.clone()), config, move |root| {
            dependents(&kubeconfig_store, &root, |kubeconfig: &Kubeconfig| {
                kubeconfig
                    .spec
                    .target
                    .root_shard_ref
                    .as_ref()
                    .map(|r| r.name.clone())
            })
        });

    tracing::info!("controllers starting");
    tokio::join!(
        drive(roots, ctx.clone(), shutdown.clone(), |o, c| Box::pin(
            server::reconcile_root_shard(o, c)
        )),
        drive(shards, ctx.clone(), shutdown.clone(), |o, c| Box::pin(
            server::reconcile_shard(o, c)
        )),
        drive(proxies, ctx.clone(), shutdown.clone(), |o, c| Box::pin(
            frontproxy::reconcile(o, c)
        )),
        drive(caches, ctx.clone(), shutdown.clone(), |o, c| Box::pin(
            cacheserver::reconcile(o, c)
        )),
        drive(kubeconfigs, ctx, shutdown, |o, c| Box::pin(
            kubeconfig::reconcile(o, c)
        )),
    );
    tracing::info!("controllers stopped");
}
