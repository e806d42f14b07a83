//! `kcp-managed [up|down] [--state-dir DIR]`: README command 1, a managed kcp on this machine
//! (see `kcp_e2e::managed`). `up` is the default.

use std::path::PathBuf;
use std::process::ExitCode;

use kcp_e2e::managed::{self, StateDir};

const USAGE: &str = "usage: kcp-managed [up|down] [--state-dir DIR]\n\
  up    (default) build, start the local host, install the operator, deploy kcp, stay in the foreground\n\
  down  stop a running `up` from another terminal and remove everything it made\n\
  --state-dir DIR  where the kubeconfigs and the run's record go (default: .kcp-managed in the checkout)";

fn main() -> ExitCode {
    let mut command = None;
    let mut state = StateDir::default_path();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "up" | "down" if command.is_none() => command = Some(arg),
            "--state-dir" => match args.next() {
                Some(dir) => state = PathBuf::from(dir),
                None => return usage(),
            },
            _ => return usage(),
        }
    }
    let state = StateDir::new(&state);
    let result = match command.as_deref() {
        Some("down") => managed::down(&state),
        _ => managed::up(&state),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("kcp-managed: {error}");
            ExitCode::FAILURE
        }
    }
}

fn usage() -> ExitCode {
    eprintln!("{USAGE}");
    ExitCode::from(2)
}
