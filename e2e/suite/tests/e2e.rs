//! The end-to-end suite as a test binary with its own harness (`kcp_e2e::run`): it prints each
//! scenario's steps as they happen, a figures table, and `N passed, N failed` at the end; any
//! failure fails the run.
//!
//! `E2E_HOST=local` (default) starts everything here; `E2E_HOST=kubeconfig E2E_KUBECONFIG=…` runs
//! the same scenarios against a real cluster; `E2E_SCENARIOS=1,2,8` runs only those.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::ExitCode;

use kcp_e2e::host::Choice;

fn main() -> ExitCode {
    let (choice, only) = match (Choice::from_env(), kcp_e2e::run::selected_from_env()) {
        (Ok(choice), Ok(only)) => (choice, only),
        (Err(error), _) | (_, Err(error)) => {
            println!("{error}\n0 passed, 1 failed");
            return ExitCode::FAILURE;
        }
    };
    kcp_e2e::run::run(choice, only.as_deref())
}
