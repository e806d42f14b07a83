//! Rendering: pure functions from a validated configuration to Kubernetes objects, one module
//! per kind of child object. No client, no clock: the same input renders the same objects, which
//! the golden tests pin.

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
