//! `kubectl ws`: switch, show, create and list kcp workspaces.

use std::process::ExitCode;

use clap::Parser;
use kcp_kubectl_plugins::{cli::WsCli, commands, main_with};

fn main() -> ExitCode {
    main_with(commands::run_ws(WsCli::parse()))
}
