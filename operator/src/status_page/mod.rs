//! The operator's status page: a read-only HTML page on the metrics port at `/` that shows every
//! RootShard, Shard, FrontProxy and CacheServer with its phase, conditions, versions, replicas,
//! endpoints, certificate expiry and recent events, so a person sees the deployment's state
//! without `kubectl describe`. Upstream kcp-operator has no such page; the data is what its
//! statuses and events carry.
//!
//! Every replica, leader or standby, starts the page's own watches ([`caches`]) when the process
//! starts, so a standby shows current data too and says that it is standby. The pure part
//! ([`view`], [`certificate`], [`events`]) turns custom resources, certificate Secrets and events
//! into page data; [`html`] renders it with askama. Secret contents never reach the page: a
//! certificate Secret is reduced to its name, owner and validity when it arrives.

pub mod caches;
pub mod certificate;
pub mod events;
pub mod html;
pub mod view;

pub use caches::Caches;

#[cfg(test)]
mod fixtures;
