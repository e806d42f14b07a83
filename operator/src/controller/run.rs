//! Wires the reconcilers into kube-runtime controllers: what each one owns and watches, the
//! error policy (per-object backoff), metrics of every reconcile, cache readiness and graceful
//! shutdown.
//!
//! Every kind owns the objects it creates, so a change to (or deletion of) a child triggers its
//! owner. Shards, FrontProxies and Kubeconfigs also follow the RootShard they reference, because
//! its CAs and URLs feed into what they render; RootShards and Shards follow their CacheServer
//! and FrontProxies the Shards of their root, because the upgrade order waits for them; RootShards
//! also follow their Shards, which their status lists. VirtualWorkspaces follow the RootShard
//! or Shard they target (and the RootShard of that Shard), and RootShards and Shards the
//! VirtualWorkspace that serves them.

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Api, Client, Resource, ResourceExt};
use tokio_util::sync::CancellationToken;

use crate::api::{CacheServer, FrontProxy, Kubeconfig, RootShard, Shard, VirtualWorkspace};

use super::backoff::key;
use super::report::{self, Conditioned};
use super::{
    Context, Error, Watched, cacheserver, frontproxy, kubeconfig, server, virtualworkspace,
};

/// A reconcile function as the loops drive it.
type Reconciler<K> =
    fn(Arc<K>, Arc<Context>) -> futures::future::BoxFuture<'static, Result<Action, Error>>;

/// Runs `reconcile` and keeps the backoff, failure reports and metrics in step with its outcome.
/// A failure is logged once (with its whole chain), then written to the status (`Degraded`),
/// then published as a short Warning event: neither report can keep the other from happening.
async fn guarded<K, F, Fut>(
    object: Arc<K>,
    ctx: Arc<Context>,
    reconcile: F,
) -> Result<Action, Error>
where
    K: Conditioned,
    F: FnOnce(Arc<K>, Arc<Context>) -> Fut,
    Fut: Future<Output = Result<Action, Error>>,
{
    let key = key(&*object);
    let started = Instant::now();
    let result = reconcile(object.clone(), ctx.clone()).await;
    ctx.metrics.reconciled(
        &K::kind(&()).to_lowercase(),
        started.elapsed(),
        result.is_err(),
    );
    match &result {
        Ok(_) => ctx.backoff.succeeded(&key),
        Err(error) => {
            tracing::warn!(object = %key, error = %super::error_chain(error), "reconcile failed");
            if let Err(status_error) =
                super::status::write_failure(&ctx.client, &*object, error).await
            {
                tracing::warn!(object = %key, error = %report::summary(&status_error), "failed to write the failure to the status");
            }
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

/// A controller for `K` that owns the child kinds of every workload.
fn workload<K: Watched>(client: &Client) -> Controller<K> {
    let config = watcher::Config::default();
    Controller::new(Api::<K>::all(client.clone()), config.clone())
        .owns(Api::<Secret>::all(client.clone()), config.clone())
        .owns(Api::<ConfigMap>::all(client.clone()), config.clone())
        .owns(Api::<Service>::all(client.clone()), config.clone())
        .owns(Api::<Deployment>::all(client.clone()), config.clone())
        .owns(Api::<StatefulSet>::all(client.clone()), config.clone())
        .owns(Api::<PodDisruptionBudget>::all(client.clone()), config)
}

/// Makes `controller` also reconcile its objects that `links` relates to a changed `P` (in the
/// same namespace): the RootShard they reference, the CacheServer or Shards of an earlier
/// upgrade stage.
fn follow<K: Watched, P: Watched>(
    controller: Controller<K>,
    client: &Client,
    links: impl Fn(&K, &P) -> bool + Send + Sync + 'static,
) -> Controller<K> {
    let store: Store<K> = controller.store();
    controller.watches(
        Api::<P>::all(client.clone()),
        watcher::Config::default(),
        move |peer| {
            store
                .state()
                .into_iter()
                .filter(|object| object.namespace() == peer.namespace() && links(object, &peer))
                .map(|object| ObjectRef::from_obj(&*object))
                .collect::<Vec<_>>()
        },
    )
}

/// The objects an object of one kind references by name, for [`follow`].
trait Links {
    fn root_shard(&self) -> Option<&str> {
        None
    }
    fn cache_server(&self) -> Option<&str> {
        None
    }
    fn virtual_workspace(&self) -> Option<&str> {
        None
    }
}

impl Links for RootShard {
    fn cache_server(&self) -> Option<&str> {
        Some(&self.spec.cache.as_ref()?.reference.as_ref()?.name)
    }
    fn virtual_workspace(&self) -> Option<&str> {
        Some(&self.spec.common.kcp_virtual_workspace.as_ref()?.name)
    }
}

impl Links for Shard {
    fn root_shard(&self) -> Option<&str> {
        Some(&self.spec.root_shard.reference.name)
    }
    fn cache_server(&self) -> Option<&str> {
        Some(&self.spec.cache.as_ref()?.reference.as_ref()?.name)
    }
    fn virtual_workspace(&self) -> Option<&str> {
        Some(&self.spec.common.kcp_virtual_workspace.as_ref()?.name)
    }
}

impl Links for FrontProxy {
    fn root_shard(&self) -> Option<&str> {
        Some(&self.spec.root_shard.reference.name)
    }
}

/// A VirtualWorkspace follows the RootShard it targets; [`serves`] relates it to its Shard.
impl Links for VirtualWorkspace {
    fn root_shard(&self) -> Option<&str> {
        Some(&self.spec.target.root_shard_ref.as_ref()?.name)
    }
}

/// A VirtualWorkspace and the Shard it targets.
fn serves(vw: &VirtualWorkspace, shard: &Shard) -> bool {
    vw.spec
        .target
        .shard_ref
        .as_ref()
        .is_some_and(|target| target.name == shard.name_any())
}

impl Links for Kubeconfig {
    fn root_shard(&self) -> Option<&str> {
        Some(&self.spec.target.root_shard_ref.as_ref()?.name)
    }
}

fn under_root<K: Links>(object: &K, root: &RootShard) -> bool {
    object.root_shard() == Some(root.name_any().as_str())
}

fn uses_cache<K: Links>(object: &K, cache: &CacheServer) -> bool {
    object.cache_server() == Some(cache.name_any().as_str())
}

/// A VirtualWorkspace whose target Shard (as `shards` holds it) is under `root`: the root's CAs
/// and URLs feed into what the VirtualWorkspace renders, as for its shard.
fn targets_shard_under(shards: &Store<Shard>, vw: &VirtualWorkspace, root: &RootShard) -> bool {
    let Some(target) = &vw.spec.target.shard_ref else {
        return false;
    };
    shards.state().iter().any(|shard| {
        shard.name_any() == target.name
            && shard.namespace() == vw.namespace()
            && under_root(&**shard, root)
    })
}

/// A shard and the VirtualWorkspace its `kcpVirtualWorkspace` names (whose URL it advertises).
fn served_by<K: Links>(object: &K, vw: &VirtualWorkspace) -> bool {
    object.virtual_workspace() == Some(vw.name_any().as_str())
}

/// A RootShard and an object that references it (its status lists the Shards that do).
fn referenced_by<P: Links>(root: &RootShard, peer: &P) -> bool {
    under_root(peer, root)
}

/// Two objects under the same RootShard.
fn same_root<K: Links, P: Links>(object: &K, peer: &P) -> bool {
    object.root_shard().is_some() && object.root_shard() == peer.root_shard()
}

async fn drive<K: Conditioned>(
    controller: Controller<K>,
    ctx: Arc<Context>,
    shutdown: CancellationToken,
    reconcile: Reconciler<K>,
) {
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

/// Whether the first list of `store`'s kind has arrived (false: its controller stopped first).
async fn synced<K: Watched>(store: Store<K>) -> bool {
    store.wait_until_ready().await.is_ok()
}

/// Runs every controller until `shutdown` is cancelled and in-flight reconciles have finished;
/// calls `on_synced` once the caches of the six reconciled kinds hold their first list.
pub async fn run(ctx: Arc<Context>, shutdown: CancellationToken, on_synced: impl FnOnce()) {
    let client = ctx.client.clone();
    let config = watcher::Config::default();

    let roots = follow(workload(&client), &client, uses_cache::<RootShard>);
    let roots = follow(roots, &client, referenced_by::<Shard>);
    let roots = follow(roots, &client, served_by::<RootShard>);
    let caches = workload::<CacheServer>(&client);
    let shards = follow(workload(&client), &client, under_root::<Shard>);
    let shards = follow(shards, &client, uses_cache::<Shard>);
    let shards = follow(shards, &client, served_by::<Shard>);
    let proxies = follow(workload(&client), &client, under_root::<FrontProxy>);
    let proxies = follow(proxies, &client, same_root::<FrontProxy, Shard>);
    let kubeconfigs = Controller::new(Api::<Kubeconfig>::all(client.clone()), config.clone())
        .owns(Api::<Secret>::all(client.clone()), config);
    let kubeconfigs = follow(kubeconfigs, &client, under_root::<Kubeconfig>);
    let known_shards = shards.store();
    let virtual_workspaces = follow(workload(&client), &client, move |vw, root| {
        under_root(vw, root) || targets_shard_under(&known_shards, vw, root)
    });
    let virtual_workspaces = follow(virtual_workspaces, &client, serves);

    let all_synced = futures::future::join(
        futures::future::join5(
            synced(roots.store()),
            synced(shards.store()),
            synced(proxies.store()),
            synced(caches.store()),
            synced(kubeconfigs.store()),
        ),
        synced(virtual_workspaces.store()),
    );
    let stopping = shutdown.clone();
    let readiness = async move {
        tokio::select! {
            ((a, b, c, d, e), f) = all_synced => if a && b && c && d && e && f {
                tracing::info!("caches synced");
                on_synced();
            },
            () = stopping.cancelled() => {}
        }
    };

    tracing::info!("controllers starting");
    tokio::join!(
        readiness,
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
        drive(kubeconfigs, ctx.clone(), shutdown.clone(), |o, c| Box::pin(
            kubeconfig::reconcile(o, c)
        )),
        drive(virtual_workspaces, ctx, shutdown, |o, c| Box::pin(
            virtualworkspace::reconcile(o, c)
        )),
    );
    tracing::info!("controllers stopped");
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use http::{Request, Response};
    use kube::client::Body;

    use super::*;

    /// A request as the mock saw it: `METHOD path?query` and its body.
    type Seen = Arc<std::sync::Mutex<Vec<(String, serde_json::Value)>>>;

    /// A context whose client records every request; events are refused with a 422 like a real
    /// server refuses a note over 1024 characters, everything else answers an empty object.
    fn context() -> (Arc<Context>, Seen) {
        let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let seen = Seen::default();
        let log = seen.clone();
        tokio::spawn(async move {
            while let Some((request, send)) = handle.next_request().await {
                let entry = format!(
                    "{} {}?{}",
                    request.method(),
                    request.uri().path(),
                    request.uri().query().unwrap_or_default()
                );
                let bytes = request.into_body().collect_bytes().await.expect("body");
                let body = serde_json::from_slice(&bytes).unwrap_or_default();
                let refused = entry.contains("/events");
                log.lock().expect("lock").push((entry, body));
                let (status, answer) = if refused {
                    (
                        422,
                        serde_json::json!({"kind": "Status", "code": 422, "message": "note: can have at most 1024 characters"}),
                    )
                } else {
                    (200, serde_json::json!({}))
                };
                send.send_response(
                    Response::builder()
                        .status(status)
                        .body(Body::from(serde_json::to_vec(&answer).expect("json")))
                        .expect("response"),
                );
            }
        });
        (Arc::new(Context::new(Client::new(service, "kcp"))), seen)
    }

    fn shard() -> Arc<Shard> {
        Arc::new(
            serde_json::from_value(serde_json::json!({
                "apiVersion": "operator.kcp.io/v1alpha1",
                "kind": "Shard",
                "metadata": {"name": "beta", "namespace": "kcp"},
                "spec": {"rootShard": {"ref": {"name": "alpha"}}, "etcd": {"endpoints": ["https://etcd:2379"]}}
            }))
            .expect("shard"),
        )
    }

    #[test]
    fn a_virtual_workspace_follows_the_root_shard_of_its_target_shard() {
        let (store, mut writer) = kube::runtime::reflector::store::<Shard>();
        writer.apply_watcher_event(&watcher::Event::Apply((*shard()).clone()));
        let vw = |target: serde_json::Value| -> VirtualWorkspace {
            serde_json::from_value(serde_json::json!({
                "apiVersion": "operator.kcp.io/v1alpha1",
                "kind": "VirtualWorkspace",
                "metadata": {"name": "vw", "namespace": "kcp"},
                "spec": {"target": target, "external": {"hostname": "vw.example.com", "port": 443}}
            }))
            .expect("virtual workspace")
        };
        let root = |name: &str| -> RootShard {
            serde_json::from_value(serde_json::json!({
                "apiVersion": "operator.kcp.io/v1alpha1",
                "kind": "RootShard",
                "metadata": {"name": name, "namespace": "kcp"},
                "spec": {"external": {"hostname": "kcp.example.com", "port": 443},
                         "etcd": {"endpoints": ["https://etcd:2379"]}}
            }))
            .expect("root shard")
        };
        let on_beta = vw(serde_json::json!({"shardRef": {"name": "beta"}}));
        assert!(targets_shard_under(&store, &on_beta, &root("alpha")));
        assert!(!targets_shard_under(&store, &on_beta, &root("other")));
        let on_unknown = vw(serde_json::json!({"shardRef": {"name": "gamma"}}));
        assert!(!targets_shard_under(&store, &on_unknown, &root("alpha")));
        let on_root = vw(serde_json::json!({"rootShardRef": {"name": "alpha"}}));
        assert!(!targets_shard_under(&store, &on_root, &root("alpha")));
        assert!(under_root(&on_root, &root("alpha")));
    }

    #[tokio::test]
    async fn every_outcome_is_counted() {
        let (ctx, _) = context();
        let requeue = Action::requeue(Duration::from_secs(60));
        for outcome in [Ok(requeue.clone()), Err(()), Ok(requeue)] {
            let failed = outcome.is_err();
            let result = guarded(shard(), ctx.clone(), |_, _| async move {
                tokio::time::sleep(Duration::from_millis(10)).await;
                outcome.map_err(|()| Error::Invalid("broken".into()))
            })
            .await;
            assert_eq!(result.is_err(), failed);
        }
        let text = ctx.metrics.encode().expect("encodes");
        for line in [
            "kcp_operator_reconcile_total{controller=\"shard\"} 3",
            "kcp_operator_reconcile_errors_total{controller=\"shard\"} 1",
            "kcp_operator_reconcile_duration_seconds_count{controller=\"shard\"} 3",
            "kcp_operator_reconcile_duration_seconds_bucket{le=\"0.005\",controller=\"shard\"} 0",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing in\n{text}");
        }
    }

    #[tokio::test]
    async fn a_failure_reaches_the_status_although_its_event_is_refused() {
        let (ctx, seen) = context();
        let status = kube::core::Status {
            code: 500,
            message: "x".repeat(3000),
            ..kube::core::Status::default()
        };
        let result = guarded(shard(), ctx, |_, _| async move {
            Err::<Action, _>(Error::Kube(kube::Error::Api(Box::new(status))))
        })
        .await;
        assert!(result.is_err());
        let seen = seen.lock().expect("lock").clone();
        let (entry, body) = &seen[0];
        assert!(
            entry.starts_with(
                "PATCH /apis/operator.kcp.io/v1alpha1/namespaces/kcp/shards/beta/status?"
            ) && entry.contains("fieldManager=kcp-operator"),
            "{entry}"
        );
        let condition = &body["status"]["conditions"][0];
        assert_eq!(condition["type"], "Degraded");
        assert_eq!(condition["reason"], "ApiError");
        let (entry, event) = &seen[1];
        assert!(entry.starts_with("POST /apis/events.k8s.io/v1/namespaces/kcp/events"));
        let note = event["note"].as_str().expect("note");
        assert!(
            note.chars().count() <= report::MAX_NOTE,
            "{} characters",
            note.len()
        );
        assert!(!note.contains("Status {"), "{note}");
    }
}
