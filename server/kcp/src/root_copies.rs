//! A non-root shard holds no `root` (only the root shard bootstraps it, as upstream's
//! `pkg/server/server.go`: "the root ws is only present on the root shard"): root's
//! WorkspaceTypes (`root:universal`, `root:organization`, ...), its LogicalCluster's routing data
//! and the RBAC that lets users `use` the built-in types reach it through the cache server, read
//! back into the tenancy index. Upstream's shard is not ready before its informers of the cache
//! server have synced; this shard does not serve its first request (and does not register its
//! `Shard`, so nothing is scheduled to it) before it has read root's types back, so that a
//! Workspace created through it is admitted and scheduled against root's real types, never
//! refused for a type that is only not read yet.

use std::time::Duration;

use kcp_controllers::TenancyIndex;
use kcp_controllers::tenancy_index::CopiedKind;
use kcp_registry::LogicalClusterName;
use tracing::info;

/// How often the index is looked at while waiting.
const POLL: Duration = Duration::from_millis(50);
/// How often the wait is logged.
const LOG_EVERY: Duration = Duration::from_secs(10);

/// What must be read back before serving: every copy a Workspace's admission and scheduling read
/// (listed once from the cache), and root's own type `root:root`, which the root shard
/// replicates with the others once it runs (so a shard started before the root shard waits for
/// it instead of answering without root's types).
const NEEDED: [CopiedKind; 4] = [
    CopiedKind::LogicalClusters,
    CopiedKind::WorkspaceTypes,
    CopiedKind::ClusterRoles,
    CopiedKind::ClusterRoleBindings,
];

/// Whether root's types have been read back from the cache.
pub fn read(tenancy: &TenancyIndex) -> bool {
    NEEDED.iter().all(|kind| tenancy.copies_listed(*kind))
        && tenancy
            .copy_of(
                CopiedKind::WorkspaceTypes,
                &LogicalClusterName::root(),
                "root",
            )
            .is_some()
}

/// Completes once root's types have been read back from the cache, logging while it waits.
pub async fn wait(tenancy: &TenancyIndex) {
    let mut logged = tokio::time::Instant::now();
    let mut first = true;
    while !read(tenancy) {
        if first || logged.elapsed() >= LOG_EVERY {
            info!("waiting for the root shard's WorkspaceTypes from the cache server");
            logged = tokio::time::Instant::now();
            first = false;
        }
        tokio::time::sleep(POLL).await;
    }
    info!("read the root shard's WorkspaceTypes from the cache server");
}
