//! In-process controllers. Each is cluster-aware: one controller and one queue for all logical
//! clusters, never one per workspace (that is what keeps a workspace cheap).

pub mod clusterrole_aggregation;
pub mod crd;
pub mod election;
pub mod garbage_collector;
pub mod logical_clusters;
pub mod namespace;
pub mod namespace_defaults;
mod runner;
pub mod workspaces;
