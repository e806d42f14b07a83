//! Admission against a started `kcp` (issue 16): admission webhooks called over HTTPS, validating
//! and mutating admission policies in CEL, ResourceQuota usage and quota admission, and
//! CertificateSigningRequests with their approval rules, each configured per logical cluster and
//! never affecting another one.
//!
//! Scenarios share one server and keep to their own logical clusters (a workspace per scenario),
//! so they can run side by side; every denial is checked to be the Status kube-apiserver answers
//! with, since clients and people act on those.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use kcp_testing::SharedKcp;

mod certificates;
mod object_limit;
mod policies;
mod quota;
mod webhooks;

static SERVER: SharedKcp = SharedKcp::new(env!("CARGO_BIN_EXE_kcp"), "admission");
