//! The Kubernetes-compatible API server at the heart of kcp-rs.
//!
//! A request travels one way through these modules, outside in:
//! [`serve`] (TLS, HTTP/1.1 and HTTP/2) -> [`server`] (panic guard, access log, logical cluster,
//! [`request`] info, [`filters`]: authentication and authorization) -> [`handlers`] (verbs, discovery,
//! OpenAPI, health) -> [`registry`] (per-type strategies and the generic REST store) -> [`storage`]
//! (objects in the revisioned key-value store). [`controllers`] run in-process beside it, calling the
//! registry like any client; [`tenancy`] keeps what workspaces need on every request (paths,
//! LogicalClusters, WorkspaceTypes).

pub mod bootstrap;
pub mod controllers;
pub mod filters;
pub mod handlers;
pub mod registry;
pub mod request;
pub mod serve;
pub mod server;
mod sparse;
pub mod storage;
pub mod tenancy;
pub mod tls;

pub use serve::{ApiServer, ServeError};
pub use server::ServerConfig;
