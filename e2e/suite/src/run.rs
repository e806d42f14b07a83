//! The suite's runner, shared by its test binaries: starts the chosen host, runs the scenarios
//! in order (a scenario whose prerequisites did not pass is reported as not run), prints each
//! step as it happens, a figures table, and `N passed, N failed` at the end.

use std::process::ExitCode;

use crate::Narrator;
use crate::host::{Choice, Host};
use crate::scenarios::{self, Figures, Scenario, Suite};

/// The scenario numbers `E2E_SCENARIOS` (comma-separated, e.g. `1,2,8`) selects; all without it.
pub fn selected_from_env() -> Result<Option<Vec<usize>>, String> {
    match std::env::var("E2E_SCENARIOS") {
        Err(_) => Ok(None),
        Ok(list) => list
            .split(',')
            .map(|n| {
                n.trim()
                    .parse()
                    .map_err(|_| format!("E2E_SCENARIOS={list}: scenario numbers, comma-separated"))
            })
            .collect::<Result<Vec<usize>, String>>()
            .map(Some),
    }
}

/// Runs the scenarios numbered `only` (all when `None`) on the host `choice` names.
pub fn run(choice: Choice, only: Option<&[usize]>) -> ExitCode {
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("no Tokio runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let mut narrator = Narrator::new();
    narrator.scenario("host");
    let host = match runtime.block_on(Host::start(choice, &narrator)) {
        Ok(host) => host,
        Err(error) => {
            println!("host could not start: {error}\n0 passed, 1 failed");
            return ExitCode::FAILURE;
        }
    };
    narrator.step(&format!("host ready: {}", host.name()));
    let mut suite = match Suite::new(host, narrator) {
        Ok(suite) => suite,
        Err(error) => {
            println!("{error}\n0 passed, 1 failed");
            return ExitCode::FAILURE;
        }
    };
    let all: Vec<Scenario> = scenarios::all()
        .into_iter()
        .filter(|s| only.is_none_or(|only| only.contains(&s.number())))
        .collect();
    let mut passed_titles: Vec<&str> = Vec::new();
    let mut failures: Vec<(String, String)> = Vec::new();
    for scenario in &all {
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
    // Scenario 12 replaces the operator: it measured the one every earlier scenario ran with.
    suite.figures.operator_memory_mib = suite
        .figures
        .operator_memory_mib
        .or_else(|| suite.host.operator_memory_mib());
    suite.figures.connections_failed_over = suite.host.connections_failed_over();
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
        "operator ready after helm install {}, RootShard apply -> Available {}, Shard + FrontProxy apply -> all Available {}, ordered upgrade {}, client during upgrade {} (through the FrontProxy {}), client through the FrontProxy during its certificate rotation {}, operator RSS {}, operator requests per minute when idle {}, operator CPU when idle {}, connections sent again to another pod before any answer (kubeconfig hosts) {}",
        secs(figures.operator_ready),
        secs(figures.root_shard_available),
        secs(figures.full_deployment_available),
        secs(figures.upgrade),
        requests(figures.upgrade_requests),
        requests(figures.upgrade_proxied_requests),
        requests(figures.proxy_rotation_requests),
        figures
            .operator_memory_mib
            .map_or("-".to_owned(), |m| format!("{m:.1} MiB")),
        figures
            .operator_idle_requests
            .as_ref()
            .map_or("-".to_owned(), |by_verb| per_verb(by_verb)),
        figures
            .operator_idle_cpu_percent
            .map_or("-".to_owned(), |percent| format!("{percent:.2}% of a core")),
        figures
            .connections_failed_over
            .map_or("-".to_owned(), |n| n.to_string()),
    )
}

/// `12.0 (update 30.0, get 2.0)`: the total and each verb.
fn per_verb(by_verb: &[(String, f64)]) -> String {
    let total: f64 = by_verb.iter().map(|(_, rate)| rate).sum();
    let verbs: Vec<String> = by_verb
        .iter()
        .map(|(verb, rate)| format!("{verb} {rate:.1}"))
        .collect();
    format!("{total:.1} ({})", verbs.join(", "))
}
