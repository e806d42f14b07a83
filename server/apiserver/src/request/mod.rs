//! Request information: what a request is about, derived from its method, path and query alone.
//!
//! kube-apiserver decides authorization, routing and audit from a `RequestInfo` computed before any
//! handler runs; we do the same so every later layer works on names, not on string slicing. kcp adds one
//! thing in front of the Kubernetes path: `/clusters/<logical-cluster>` (or `*` for a cross-cluster
//! list/watch), which [`cluster`] splits off first.

pub mod cluster;
pub mod info;
pub mod path;
pub mod query;

pub use info::{RequestInfo, Verb};
