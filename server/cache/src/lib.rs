//! kcp's cache server: a schemaless, shard-aware store of objects that shards replicate for one
//! another (upstream `pkg/cache/server`).
//!
//! Every path starts with `/services/cache/shards/<shard|*>/clusters/<cluster|*>/` and continues
//! like a Kubernetes resource path ([`path`]); objects live in kcp-storage under
//! `<prefix>/<group>/<resource>/<shard>/<cluster>/[<ns>/]<name>` ([`keys`]) and are served by
//! [`handler::CacheService`] through kcp-registry's object store and the API server's encodings.
//! The same service is mounted in the root shard (kcp-apiserver's `/services/<name>/` hook) and
//! served alone by `kcp cache-server` (through kcp-apiserver's `standalone::ServicesServer`); [`client`] is its Rust client,
//! [`replication`] keeps a shard's objects in it, and [`read_back`] follows other shards' copies.

pub mod client;
pub mod handler;
pub mod keys;
pub mod path;
pub mod read_back;
pub mod replication;
mod watch;

pub use handler::CacheService;
