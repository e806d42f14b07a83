//! kcp's workspaces as pure decisions: the rules behind `tenancy.kcp.io` Workspaces and
//! WorkspaceTypes and `core.kcp.io` LogicalClusters and Shards ([`shard`]), with no I/O.
//!
//! A workspace is a name in a tree of logical clusters; creating one runs admission (type
//! defaulting, owner recording, allowed parents and children), scheduling (a random logical
//! cluster name, a `LogicalCluster` object in the new cluster), initialization (initializers
//! cleared one by one) and phases until deletion runs terminators. The API server owns storage,
//! watches and HTTP and calls this crate for every one of those decisions, so that admission, the
//! controllers, the home-workspace handler and the workspace content authorizer share one
//! rendition of upstream kcp's rules, names and messages (`kcp-dev/kcp`, `pkg/admission/*`,
//! `pkg/reconciler/tenancy`, `config/root`, `sdk/apis/{tenancy,core}/v1alpha1`). Objects are
//! `serde_json::Value`s, as the server stores them; objects from other logical clusters (types,
//! parents) come in through lookup closures.

pub mod access;
pub mod bootstrap;
pub mod crds;
pub mod logical_cluster;
pub mod names;
pub mod paths;
pub mod placement;
pub mod shard;
pub mod types;
pub mod workspace;

pub use paths::{Path, PathError};
pub use types::{ResolvedType, TypeError, TypeRef};
pub use workspace::{Creator, Phase, WorkspaceError};
