//! The in-process controllers of a kcp shard, and what they need around them: the runner (work
//! queues keyed by logical cluster, namespace and name), leader election, what exists before the
//! first request ([`bootstrap`]), the [`tenancy_index`] of LogicalClusters and WorkspaceTypes, and
//! the RBAC [`policies`] of every logical cluster the authorizer decides by.
//!
//! Each controller is cluster-aware: one controller and one queue for all logical clusters, never
//! one per workspace (that is what keeps a workspace cheap), as upstream kcp's controllers are.
//! They read and write through the registry's [`RestStore`] like any client, so they obey the same
//! rules and trigger the same hooks; nothing here knows HTTP. [`run_all`] owns the list of
//! controllers a shard runs; [`election::run`] decides whether this replica runs them.

mod admission_policy_status;
pub mod apis;
pub mod bootstrap;
mod cleanup;
mod clusterrole_aggregation;
pub mod crd;
pub mod election;
mod garbage_collector;
pub mod logical_clusters;
pub mod namespace;
mod namespace_defaults;
pub mod policies;
pub mod remote_shards;
mod resource_quota;
mod runner;
pub mod shard_directory;
pub mod shard_registration;
mod subscribers;
pub mod tenancy_index;
pub mod workspaces;

use std::sync::Arc;

use kcp_registry::store::RestStore;
use tokio_util::sync::CancellationToken;

pub use election::{ControllerMode, Election};
pub use shard_registration::Registration;
pub use tenancy_index::TenancyIndex;
pub use workspaces::CrossShard;

/// What the controllers of a shard work with.
#[derive(Clone)]
pub struct Context {
    pub store: RestStore,
    pub tenancy: Arc<TenancyIndex>,
    /// The URL users reach this shard at, for `Workspace.spec.URL`.
    pub external_url: String,
    /// The CA bundle published to every namespace as `kube-root-ca.crt`.
    pub root_ca_pem: String,
}

/// Where the workspace scheduler may place logical clusters: this shard (its registration
/// bounds what goes here) and, with [`CrossShard`], the other shards.
#[derive(Clone, Default)]
pub struct Sharding {
    pub registration: Option<Arc<Registration>>,
    pub cross_shard: Option<CrossShard>,
}

/// Runs the controllers of a shard as `mode` says (always, never, or while this replica holds
/// the Lease) until `stop`; `sharding` says where the workspace scheduler places workspaces.
pub async fn run(
    context: Context,
    mode: ControllerMode,
    sharding: Sharding,
    stop: CancellationToken,
) {
    let store = context.store.clone();
    election::run(store, mode, stop, move |stop| {
        run_on_shard(context.clone(), sharding.clone(), stop)
    })
    .await
}

/// Runs every controller of a shard with no capacity limit until `stop`.
pub async fn run_all(context: Context, stop: CancellationToken) {
    run_on_shard(context, Sharding::default(), stop).await
}

/// Runs every controller of a shard until `stop`, each as its own task so that they run in
/// parallel on the runtime's threads rather than taking turns inside one.
async fn run_on_shard(context: Context, sharding: Sharding, stop: CancellationToken) {
    let Context {
        store,
        tenancy,
        external_url,
        root_ca_pem,
    } = context;
    // A shard that registered knows where it serves its virtual workspaces.
    let virtual_workspace_url = sharding
        .registration
        .as_ref()
        .map(|registration| registration.urls.virtual_workspace.clone());
    let tasks = [
        tokio::spawn(namespace::run(store.clone(), stop.clone())),
        tokio::spawn(garbage_collector::run(store.clone(), stop.clone())),
        tokio::spawn(crd::run(store.clone(), stop.clone())),
        tokio::spawn(apis::exports::run(
            store.clone(),
            tenancy.clone(),
            stop.clone(),
        )),
        tokio::spawn(apis::bindings::run(
            store.clone(),
            tenancy.clone(),
            stop.clone(),
        )),
        tokio::spawn(apis::claim_labels::run(store.clone(), stop.clone())),
        tokio::spawn(apis::default_bindings::run(
            store.clone(),
            tenancy.clone(),
            stop.clone(),
        )),
        tokio::spawn(logical_clusters::run(
            store.clone(),
            tenancy.clone(),
            external_url.clone(),
            stop.clone(),
        )),
        tokio::spawn(workspaces::run(
            store.clone(),
            tenancy.clone(),
            external_url,
            sharding.registration,
            sharding.cross_shard,
            stop.clone(),
        )),
        tokio::spawn(clusterrole_aggregation::run(store.clone(), stop.clone())),
        tokio::spawn(admission_policy_status::run(store.clone(), stop.clone())),
        tokio::spawn(resource_quota::run(store.clone(), stop.clone())),
        tokio::spawn(namespace_defaults::run(
            store.clone(),
            root_ca_pem,
            stop.clone(),
        )),
    ];
    let endpoint_slices = virtual_workspace_url
        .map(|url| tokio::spawn(apis::endpoint_slices::run(store, tenancy, url, stop)));
    for task in tasks.into_iter().chain(endpoint_slices) {
        let _ = task.await;
    }
}
