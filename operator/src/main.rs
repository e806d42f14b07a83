//! The `kcp-operator` command. For now it prints the CRDs; the controllers join in the next step.

use std::io::Write;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "kcp-operator",
    version,
    about = "Runs kcp on a Kubernetes host cluster"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print every CustomResourceDefinition as a multi-document YAML stream.
    Crds,
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Crds => match kcp_operator::crds::render_all() {
            Ok(yaml) => match std::io::stdout().write_all(yaml.as_bytes()) {
                Ok(()) => ExitCode::SUCCESS,
                Err(error) => {
                    eprintln!("failed to write CRDs: {error}");
                    ExitCode::FAILURE
                }
            },
            Err(error) => {
                eprintln!("{error}");
                ExitCode::FAILURE
            }
        },
    }
}
