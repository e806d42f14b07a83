//! Managed etcd: the objects of an etcd cluster the operator runs for a shard or cache server,
//! and the planner that scales it one member at a time through the members API.

pub mod members;
pub mod objects;
pub mod reachability;
pub mod scaling;

pub use scaling::{ClusterState, Member, Observed, Plan, Step, WaitReason, plan};
