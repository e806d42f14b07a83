//! Objects in the key-value store: where each lives, how it is encoded, and how revisions become
//! `resourceVersion`s.
//!
//! The raw store ([`kcp_storage::Storage`]) knows keys and bytes; handlers know Kubernetes objects.
//! This layer is the only place that knows both, so the key layout (upstream kcp's, so tools that read
//! etcd directly keep working) and the encoding rules (no `resourceVersion` in stored bytes, the
//! `kcp.io/cluster` annotation injected on read and stripped on write) are decided once.

pub mod continuation;
pub mod keys;
pub mod objects;

pub use keys::{KeyLayout, ResourceKeys};
pub use objects::{ObjectStore, StoredObject};
