//! In-process controllers. Each is cluster-aware: one controller and one queue for all logical
//! clusters, never one per workspace (that is what keeps a workspace cheap).

pub mod crd;
pub mod namespace;
