//! End-to-end scenarios: the operator, installed by its Helm chart, deploys kcp on a host cluster,
//! and users get a working kcp from `kubectl apply`.
//!
//! The scenarios are written once against a [`host::Host`] (a kubeconfig with admin rights, a way
//! to reach in-cluster addresses, and the images made available) and never know which host they
//! run on: `local` (this repo's server as the host API plus the node agent running pods as local
//! processes, what CI runs) or `kubeconfig` (any real cluster, e.g. kind, via `E2E_KUBECONFIG`).
//! They run in order and build on each other (the RootShard of scenario 2 is upgraded, scaled,
//! rotated and finally deleted), print every step with its elapsed time, and measure the
//! figures `docs/performance.md` reports (apply to Available, upgrade duration, operator memory).

pub mod browser;
pub mod cluster;
pub mod host;
pub mod managed;
pub mod narrator;
pub mod run;
pub mod scenarios;

pub use narrator::Narrator;

/// Why a scenario failed: what it waited for or checked, and what it saw instead.
pub type Outcome = Result<(), String>;
