//! Black-box tests of the RBAC crate through its public API: authorization, default roles and the
//! escalation checks, on policies written as the JSON objects a cluster stores.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod authorize;
mod bootstrap;
mod common;
mod escalation;
