//! `kubectl create workspace`: the same as `kubectl ws create`, as a kubectl `create` plugin.

use std::process::ExitCode;

use clap::Parser;
use kcp_kubectl_plugins::{cli::CreateWorkspaceCli, commands, main_with};

fn main() -> ExitCode {
    main_with(commands::run_create_workspace(CreateWorkspaceCli::parse()))
}
