//! `kubectl kcp`: bind APIExports, answer their permission claims, snapshot CRDs.

use std::process::ExitCode;

use clap::Parser;
use clap::error::ErrorKind;
use kcp_kubectl_plugins::{cli::KcpCli, commands, main_with};

fn main() -> ExitCode {
    match KcpCli::try_parse() {
        Ok(cli) => main_with(commands::run_kcp(cli)),
        // a command given without its subcommand prints its help on stdout and succeeds, as
        // upstream's do
        Err(usage) if usage.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            print!("{}", usage.render());
            ExitCode::SUCCESS
        }
        // usage errors exit 1 as upstream's cobra commands do; --help and --version exit 0
        Err(usage) => {
            let _ = usage.print();
            if usage.use_stderr() {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            }
        }
    }
}
