//! The Kubernetes-compatible API server at the heart of kcp-rs: the HTTP layer only.
//!
//! A request travels one way through these modules, outside in:
//! [`listener`] (TLS, HTTP/1.1 and HTTP/2; [`serve`] runs the server around it) -> [`server`]
//! (panic guard, access log, logical cluster, [`request`] info, [`filters`]: authentication,
//! impersonation and authorization) -> a mounted [`services`] API under `/services/<name>/`, or
//! [`handlers`] (verbs, reviews, discovery, OpenAPI, health; each gets a narrow
//! [`handlers::Scope`]) -> kcp-registry (strategies, the generic REST store, objects in storage).
//! The listener, the services hook and the response encoding are public for the servers built
//! beside this one (kcp-cache), which this crate never depends on. The in-process controllers
//! and the tenancy index live in kcp-controllers; this crate reads the index and runs bootstrap
//! before serving, and the binary runs the controllers beside it.

mod filters;
mod handlers;
pub mod listener;
pub mod pod_connect;
mod request;
mod serve;
mod server;
pub mod services;
pub mod standalone;
mod tls;

pub use filters::authentication::{Authentication, ForeignServiceAccounts, rbac_user};
pub use filters::authorization::webhook::WebhookConfig;
pub use filters::authorization::{
    attributes as authorization_attributes, workspace_access_not_permitted,
};
pub use handlers::resource::no_such_resource;
pub use handlers::response;
pub use request::path::percent_decode;
pub use request::query::{ListOptions, Query};
pub use request::{RequestInfo, Verb};
pub use serve::{ApiServer, ServeError};
pub use server::{DEEP_SUBJECT_ACCESS_REVIEW, ServerConfig, access_log, read_body};
pub use tls::TlsMaterial;
