//! The in-process controllers against the real store kept in memory, without an API server or a
//! spawned `kcp`: each test starts the real controller task on a fresh store, makes the change a
//! client would, and waits (with a deadline, see `support::eventually`) for the controller's effect
//! on the stored objects and the registry.
//!
//! - `namespace`: a deleted namespace loses its content, then its `kubernetes` finalizer (and is
//!   gone unless another finalizer holds it); content held by its own finalizer holds the namespace.
//! - `crd`: a CRD becomes NamesAccepted and Established and its type is served in its logical
//!   cluster only; a CRD whose names clash is not; deleting a CRD deletes its objects first.
//! - `garbage_collector`: a dependent goes with its owner, is orphaned (its reference removed), or
//!   holds a foreground deletion of its owner until it is collected.
//! - `workspaces`: a Workspace created in root is scheduled, its LogicalCluster initialized (the
//!   `root:universal` initializer's namespaces, the creator's admin binding) and the Workspace
//!   becomes Ready; deleting it removes its LogicalCluster and the cluster's content.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod crd;
mod garbage_collector;
mod namespace;
mod support;
mod workspaces;
