//! The `operator.kcp.io/v1alpha1` API: six namespaced kinds, each with a status subresource.
//!
//! Only data lives here; what a field means for the rendered objects is decided by `validate` and
//! the builders, so the types stay serialisable and free of behaviour.

pub mod cacheserver;
pub mod common;
pub mod conditions;
pub mod frontproxy;
pub mod kubeconfig;
pub mod rootshard;
pub mod shard;
pub mod virtualworkspace;

pub use cacheserver::{CacheServer, CacheServerSpec};
pub use frontproxy::{FrontProxy, FrontProxySpec, PathMappingEntry};
pub use kubeconfig::{Kubeconfig, KubeconfigSpec, KubeconfigStatus};
pub use rootshard::{RootShard, RootShardSpec, RootShardStatus};
pub use shard::{CommonShardSpec, Shard, ShardSpec};
pub use virtualworkspace::{VirtualWorkspace, VirtualWorkspaceSpec, VirtualWorkspaceTarget};
