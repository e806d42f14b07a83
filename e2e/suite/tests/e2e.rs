//! The end-to-end suite as a test binary with its own harness: it prints each scenario's steps as
//! they happen, a figures table, and `N passed, N failed` at the end; any failure fails the run.
//!
//! `E2E_HOST=local` (default) starts everything here; `E2E_HOST=kubeconfig E2E_KUBECONFIG=…` runs
//! the same scenarios against a real cluster. `E2E_SCENARIOS=1,2,12` runs only those (a scenario
//! whose prerequisites are left out counts as failed, `not run`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::ExitCode;

use kcp_e2e::Narrator;
use kcp_e2e::host::Host;
use kcp_e2e::scenarios::{self, Figures, Suite};

fn main() -> ExitCode {
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("no Tokio runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let selected = match scenarios::selected(std::env::var("E2E_SCENARIOS").ok().as_deref()) {
        Ok(selected) => selected,
        Err(error) => {
            println!("{error}\n0 passed, 1 failed");
            return ExitCode::FAILURE;
        }
    };
    let mut narrator = Narrator::new();
    narrator.scenario("host");
    let host = match runtime.block_on(Host::from_env(&narrator)) {
        Ok(host) => host,
        Err(error) => {
            println!("host could not start: {error}\n0 passed, 1 failed");
            return ExitCode::FAILURE;
        }
    };
    narrator.step(&format!("host ready: {}", host.name()));
    let dir = match tempfile::Builder::new().prefix("kcp-e2e-files-").tempdir() {
        Ok(dir) => dir,
        Err(error) => {
            println!("no temporary directory: {error}\n0 passed, 1 failed");
            return ExitCode::FAILURE;
        }
    };
    let mut suite = Suite {
        host,
        narrator,
        dir,
        figures: Figures::default(),
        kcp_kubeconfig: None,
        proxy_kubeconfig: None,
        placed: Vec::new(),
    };
    let all = scenarios::all();
    let mut passed_titles: Vec<&str> = Vec::new();
    let mut failures: Vec<(String, String)> = Vec::new();
    for scenario in &all {
        if let Some(selected) = &selected
            && !scenario.number().is_some_and(|n| selected.contains(&n))
        {
            continue;
        }
        suite.narrator.scenario(scenario.title);
        let missing: Vec<&usize> = scenario
            .needs
            .iter()
            .filter(|n| {
                !passed_titles
                    .iter()
                    .any(|t| t.starts_with(&format!("{n}.")))
            })
            .collect();
        let outcome = if missing.is_empty() {
            (scenario.run)(&mut suite)
        } else {
            Err(format!("not run: scenario(s) {missing:?} did not pass"))
        };
        match outcome {
            Ok(()) => {
                suite.narrator.step("passed");
                passed_titles.push(scenario.title);
            }
            Err(error) => {
                suite.narrator.step(&format!("FAILED: {error}"));
                if missing.is_empty() {
                    println!("{}", suite.host.diagnostics());
                }
                failures.push((scenario.title.to_owned(), error));
            }
        }
    }
    suite.figures.operator_memory_mib = suite.host.operator_memory_mib();
    let Suite {
        host,
        narrator,
        figures,
        ..
    } = suite;
    runtime.block_on(host.stop());
    println!("\nfigures (measured, not asserted): {}", describe(&figures));
    println!("suite took {:.1}s", narrator.suite_elapsed().as_secs_f64());
    for (title, error) in &failures {
        println!("FAILED {title}: {error}");
    }
    println!("{} passed, {} failed", passed_titles.len(), failures.len());
    if failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// `N requests/M failed`, or `-` when not measured.
fn requests(counted: Option<(usize, usize)>) -> String {
    counted.map_or("-".to_owned(), |(sent, failed)| {
        format!("{sent} requests/{failed} failed")
    })
}

fn describe(figures: &Figures) -> String {
    let secs = |d: Option<std::time::Duration>| {
        d.map_or("-".to_owned(), |d| format!("{:.1}s", d.as_secs_f64()))
    };
    format!(
        "operator ready after helm install {}, RootShard apply -> Available {}, Shard + FrontProxy apply -> all Available {}, ordered upgrade {}, client during upgrade {} (through the FrontProxy {}), operator RSS {}",
        secs(figures.operator_ready),
        secs(figures.root_shard_available),
        secs(figures.full_deployment_available),
        secs(figures.upgrade),
        requests(figures.upgrade_requests),
        requests(figures.upgrade_proxied_requests),
        figures
            .operator_memory_mib
            .map_or("-".to_owned(), |m| format!("{m:.1} MiB")),
    )
}
