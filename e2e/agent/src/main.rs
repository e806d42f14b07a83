//! `kcp-node-agent`: kubelet, controller-manager and kube-proxy for the local end-to-end host.
//!
//! The end-to-end suite runs this project's `kcp` server as the host Kubernetes API; it stores
//! Deployments, StatefulSets, Services and Pods (as CRDs) but runs nothing. This agent runs them:
//! every pod as local processes in its own network, mount and UTS namespaces, so an operator
//! written for Kubernetes works unchanged against that host. See `docs/node-agent.md`.

mod agent;
mod attach;
mod claims;
mod cli;
mod clock;
mod container;
mod container_input;
mod container_log;
mod context;
mod controller;
mod deployment;
mod env;
mod error;
mod events;
mod exec;
mod exec_process;
mod exec_spdy;
mod exec_websocket;
mod expand;
mod fieldref;
mod hosts;
mod images;
mod ipam;
mod kubelet;
mod kubelet_exec;
mod kubelet_logs;
mod kubelet_portforward;
mod kubelet_server;
mod log_reader;
mod logging;
mod names;
mod network;
mod node_registration;
mod pod;
mod podstatus;
mod port_forward;
mod probes;
mod process;
mod proxy;
mod remote_command;
mod selector;
mod service_sync;
mod services;
mod spdy;
mod statefulset;
mod terminal;
mod token;
mod volumes;
mod websocket;
mod websocket_tunnel;
mod workloads;

use std::process::ExitCode;

use clap::Parser;

use crate::cli::{Cli, Command, NetworkAction};
use crate::logging::LogFormat;

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        // Must stay single-threaded until execve: nothing else runs before it.
        Command::Exec { spec } => {
            let error = exec::run(&spec);
            eprintln!("kcp-node-agent exec: {error}");
            ExitCode::from(u8::try_from(exec::SETUP_FAILED).unwrap_or(128))
        }
        Command::Run(args) => {
            logging::init(args.log_format);
            let runtime = match tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
            {
                Ok(runtime) => runtime,
                Err(error) => {
                    tracing::error!(%error, "starting the async runtime");
                    return ExitCode::FAILURE;
                }
            };
            match runtime.block_on(agent::run(*args)) {
                Ok(()) => ExitCode::SUCCESS,
                Err(error) => {
                    tracing::error!(%error, "agent failed");
                    ExitCode::FAILURE
                }
            }
        }
        Command::Cleanup(args) => {
            logging::init(LogFormat::Text);
            report(agent::cleanup(
                &args.bridge,
                args.state_dir.as_deref(),
                args.keep_bridge,
            ))
        }
        Command::Network { action } => {
            logging::init(LogFormat::Text);
            match action {
                NetworkAction::Up { bridge, subnet } => match agent::network_up(&bridge, &subnet) {
                    Ok(address) => {
                        println!("{address}");
                        ExitCode::SUCCESS
                    }
                    Err(error) => report(Err(error)),
                },
                NetworkAction::Down { bridge } => report(agent::network_down(&bridge)),
            }
        }
    }
}

fn report(result: error::Result<()>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!(%error);
            ExitCode::FAILURE
        }
    }
}
