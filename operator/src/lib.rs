//! kcp-operator: runs kcp on a Kubernetes host cluster without cert-manager.
//!
//! The pure core (API types, validation, PKI decisions, builders) knows nothing of a client; the
//! controllers wrap it in the dereference -> validate -> render -> apply -> status pipeline.

pub mod api;
pub mod controller;
pub mod crds;
pub mod etcd;
pub mod manager;
pub mod naming;
pub mod paths;
pub mod pki;
pub mod rbac;
pub mod render;
pub mod status_page;
pub mod upgrade;
pub mod validate;
