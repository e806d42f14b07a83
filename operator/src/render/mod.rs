//! Rendering: pure functions from a validated configuration to Kubernetes objects, one module
//! per kind of child object. No client, no clock: the same input renders the same objects, which
//! the golden tests pin.
//!
//! What each custom resource produces, and where (its controller in `controller` assembles the
//! pieces into one `component::Workload`, the Kubeconfig controller by hand):
//!
//! | Custom resource | Certificate Secrets | Rendered children | Also |
//! |---|---|---|---|
//! | RootShard | [`catalog::root_shard`] | [`children::server`] | merged CA bundles when bundles are brought ([`ca_bundle`]); managed etcd: [`catalog::managed_etcd`], [`etcd::objects::children`] |
//! | Shard | [`catalog::shard`] | [`children::server`] | as RootShard; its finalizer deregisters it from the root shard (`controller::deregister`) |
//! | FrontProxy | [`catalog::front_proxy`] | [`children::front_proxy`] | merged client CA and server CA bundle ([`ca_bundle`]) |
//! | CacheServer | [`catalog::cache_server`] | [`children::cache_server`] | managed etcd, as RootShard |
//! | VirtualWorkspace | [`catalog::virtual_workspace`] | [`children::virtual_workspace`] | merged client CA when a bundle is brought ([`ca_bundle`]); the targeted shard's `--shard-virtual-workspace-url` |
//! | Kubeconfig | its client certificate (`controller::kubeconfig`) | [`kubeconfig_secret::embedded`] in a Secret | ClusterRoleBindings inside kcp ([`cluster_role_bindings::desired`]) |
//!
//! [`catalog::root_shard`]: crate::pki::catalog::root_shard
//! [`catalog::shard`]: crate::pki::catalog::shard
//! [`catalog::front_proxy`]: crate::pki::catalog::front_proxy
//! [`catalog::cache_server`]: crate::pki::catalog::cache_server
//! [`catalog::virtual_workspace`]: crate::pki::catalog::virtual_workspace
//! [`catalog::managed_etcd`]: crate::pki::catalog::managed_etcd
//! [`etcd::objects::children`]: crate::etcd::objects::children

pub mod ca_bundle;
pub mod children;
pub mod cluster_role_bindings;
pub mod config_map;
pub mod deployment;
mod flags;
pub mod kubeconfig_secret;
pub mod pdb;
pub mod pod;
pub mod service;
