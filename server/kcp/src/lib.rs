//! The kcp server binary's library: command line, options, PKI bootstrap, admin kubeconfig and the
//! `start`, `front-proxy` and `cache-server` entry points. `main.rs` only dispatches, so everything here is testable in-process.

pub mod authentication;
pub mod authentication_info;
pub mod cache;
pub mod cache_server;
pub mod cli;
pub mod front_proxy;
pub mod kubeconfig;
pub mod logging;
mod logical_cluster_admin;
pub mod memory;
pub mod options;
pub mod pki;
mod private_file;
mod root_copies;
mod root_shard;
mod shard_client;
pub mod sharded;
pub mod start;
mod virtual_workspaces;
pub mod virtual_workspaces_server;
