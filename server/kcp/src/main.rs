//! `kcp`: a multi-call binary (see [`kcp::cli`]). Exit codes: 0 clean, 1 runtime error, 2 bad
//! command line or flags.

use std::process::ExitCode;

use kcp::cache_server::CacheServerOptions;
use kcp::cli::{self, Invocation};
use kcp::front_proxy::FrontProxyOptions;
use kcp::logging::LoggingFormat;
use kcp::options::{LoggingFlags, StartOptions};
use kcp::sharded::ShardedOptions;
use kcp::virtual_workspaces_server::VirtualWorkspacesOptions;
use kcp::{logging, memory};

const RUNTIME_ERROR: u8 = 1;
const USAGE_ERROR: u8 = 2;

fn main() -> ExitCode {
    match cli::parse(std::env::args_os().collect()) {
        Err(err) => {
            // Printing can only fail when stderr is gone; the exit code still tells.
            let _ = err.print();
            ExitCode::from(u8::try_from(err.exit_code()).unwrap_or(USAGE_ERROR))
        }
        Ok(Invocation::PrintStartFlags(text)) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Ok(Invocation::Start(options)) => start(*options),
        Ok(Invocation::Sharded(options)) => sharded(*options),
        Ok(Invocation::CacheServer(options)) => cache_server(*options),
        Ok(Invocation::FrontProxy(options)) => front_proxy(*options),
        Ok(Invocation::VirtualWorkspaces(options)) => virtual_workspaces(*options),
    }
}

fn virtual_workspaces(options: VirtualWorkspacesOptions) -> ExitCode {
    let valid = options.validate();
    component(options.logging.clone(), valid, || {
        kcp::virtual_workspaces_server::run(options)
    })
}

fn cache_server(options: CacheServerOptions) -> ExitCode {
    let valid = options.validate();
    component(options.logging.clone(), valid, || {
        kcp::cache_server::run(options)
    })
}

fn front_proxy(options: FrontProxyOptions) -> ExitCode {
    let valid = options.validate();
    component(options.logging.clone(), valid, || {
        kcp::front_proxy::run(options)
    })
}

/// Starts logging, refuses invalid flags (exit code 2), then runs the component's server.
fn component<E: std::fmt::Display, F: Future<Output = Result<(), R>>, R: std::fmt::Display>(
    logging: LoggingFlags,
    valid: Result<(), E>,
    server: impl FnOnce() -> F,
) -> ExitCode {
    if let Err(err) = logging::init(logging.format, logging.verbosity) {
        eprintln!("error: {err}");
        return ExitCode::from(USAGE_ERROR);
    }
    if let Err(err) = valid {
        tracing::error!("invalid flags: {err}");
        return ExitCode::from(USAGE_ERROR);
    }
    run(server())
}

/// Runs a server on a multi-threaded runtime: exit code 0 when it stopped cleanly, 1 otherwise.
fn run<E: std::fmt::Display>(server: impl Future<Output = Result<(), E>>) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            tracing::error!("starting the async runtime: {err}");
            return ExitCode::from(RUNTIME_ERROR);
        }
    };
    match runtime.block_on(server) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            tracing::error!("{err}");
            ExitCode::from(RUNTIME_ERROR)
        }
    }
}

/// `kcp sharded` runs on one thread: its children's parent-death signal is tied to the thread that
/// started them (see `kcp::sharded::supervisor`).
fn sharded(options: ShardedOptions) -> ExitCode {
    if let Err(err) = logging::init(LoggingFormat::Text, 0) {
        eprintln!("error: {err}");
        return ExitCode::from(USAGE_ERROR);
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("error: starting the async runtime: {err}");
            return ExitCode::from(RUNTIME_ERROR);
        }
    };
    match runtime.block_on(kcp::sharded::run(options)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: kcp sharded: {err}");
            ExitCode::from(RUNTIME_ERROR)
        }
    }
}

fn start(options: StartOptions) -> ExitCode {
    let arenas = memory::limit_arenas();
    if let Err(err) = logging::init(options.logging.format, options.logging.verbosity) {
        eprintln!("error: {err}");
        return ExitCode::from(USAGE_ERROR);
    }
    if let Some(arenas) = arenas {
        tracing::debug!(arenas, "allocator arenas limited to one per core");
    }
    let options = match options.validate() {
        Ok(options) => options,
        Err(err) => {
            tracing::error!("invalid flags: {err}");
            return ExitCode::from(USAGE_ERROR);
        }
    };
    run(kcp::start::run(options))
}
