//! Where a workspace path goes: the question the proxy asks the index once per request.
//!
//! Upstream's index answers a `/clusters/<path>` lookup with the shard's base URL and the
//! resolved logical cluster name (the request is forwarded with the name, not the path), a 403
//! for a path it does not know, and a 503 for a workspace in phase `Unavailable`. The proxy only
//! needs this narrow trait, so it can be tested with a table and the index without HTTP.

use std::sync::Arc;

/// The shard and logical cluster a path resolves to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// The shard's name (`Shard` object in `root`).
    pub shard: Arc<str>,
    /// The shard's `spec.baseURL` (no trailing slash): where the request is forwarded.
    pub base_url: Arc<str>,
    /// Where the shard's virtual workspaces are reached (no trailing slash): where a
    /// `/services/` request naming this cluster is forwarded.
    pub virtual_workspaces_url: Arc<str>,
    /// The logical cluster's name, which replaces the path in the forwarded URL.
    pub cluster: Arc<str>,
}

/// Why a path has no route.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unroutable {
    /// Unknown, invalid, a wildcard, or not (yet, or any more) known: the proxy answers 403
    /// "workspace access not permitted" and never says which.
    #[error("workspace access not permitted")]
    Unknown,
    /// The workspace exists but is in phase `Unavailable`: 503.
    #[error("workspace {path} is unavailable")]
    Unavailable { path: String },
    /// The logical cluster is on a shard the index no longer has a base URL for (its `Shard`
    /// object is gone): 503, the workspace may come back with the shard.
    #[error("the shard {shard} of workspace {path} is not available")]
    ShardGone { path: String, shard: String },
}

/// The index as the proxy sees it.
pub trait Resolve: Send + Sync + 'static {
    /// Resolves a cluster path as it appears after `/clusters/` (`root`, `root:org:team`, a
    /// logical cluster name, `user:<name>[:...]`); `~` is rewritten by the caller, which knows
    /// the user.
    fn resolve(&self, path: &str) -> Result<Route, Unroutable>;

    /// Where the virtual workspaces of the shard named `shard` are reached (for the proxy's
    /// `/shards/<shard>/services/...`); `None` for a shard without a Shard object.
    fn virtual_workspaces(&self, shard: &str) -> Option<Arc<str>>;

    /// True once every shard's workspaces and logical clusters have been listed once: the
    /// proxy's readiness (`/readyz`).
    fn is_ready(&self) -> bool;
}
