//! kcp's kubectl plugins, `kubectl ws`, `kubectl create workspace` and `kubectl kcp`, rebuilt
//! in Rust so kcp-rs ships them without a Go toolchain. They behave like upstream kcp's
//! (`cli/pkg/workspace`, `cli/pkg/bind`, `cli/pkg/claims`, `cli/pkg/crd`): same commands,
//! flags, output lines, API calls and kubeconfig edits, so they work against upstream kcp as
//! well as kcp-rs.

pub mod apibinding;
pub mod claims;
pub mod cli;
pub mod client;
pub mod commands;
pub mod documents;
pub mod error;
pub mod kubeconfig;
pub mod output;
pub mod path;
pub mod schema_props;
pub mod snapshot;

use std::process::ExitCode;

/// Runs a command on a single-threaded runtime and reports failure like kubectl: one line on
/// stderr and exit code 1.
pub fn main_with<F>(command: F) -> ExitCode
where
    F: Future<Output = Result<(), error::Error>>,
{
    let result = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| error::Error::msg(format!("starting runtime: {e}")))
        .and_then(|runtime| runtime.block_on(command));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("{}", output::error_line(&err));
            ExitCode::FAILURE
        }
    }
}
