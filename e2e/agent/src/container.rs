//! One container of a pod: start it, probe it, restart it with back-off, stop it gracefully.
//!
//! Restarts follow kubelet: the container's (or pod's) restart policy decides whether an exit is
//! final; otherwise the next start waits 10 s, doubling per restart up to `--max-backoff`, reset
//! once a run lasted ten minutes, while the status shows `CrashLoopBackOff`. Probes follow their
//! spec: the startup probe gates the others, readiness decides `ready`, and a failed liveness or
//! startup probe restarts the container (an event says which).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Container, LifecycleHandler, Probe};
use tokio::sync::{mpsc, watch};

use crate::container_input::InputSpec;
use crate::container_log::{self, LogFiles};
use crate::env::{self, EnvInputs, ServiceLink};
use crate::events::Regarding;
use crate::exec::{BindMount, ExecSpec};
use crate::images::ImageError;
use crate::pod::{PodRun, sleep_or_stop};
use crate::podstatus::ContainerPhase;
use crate::probes::{self, ProbeSpec, Target};
use crate::process::{Exit, Process};
use crate::services;

/// First restart delay; doubled per restart up to `--max-backoff`.
const INITIAL_BACKOFF: Duration = Duration::from_secs(10);
/// A run this long resets the back-off.
const BACKOFF_RESET: Duration = Duration::from_secs(600);

/// Which container of the pod.
#[derive(Debug, Clone, Copy)]
pub struct Slot {
    pub init: bool,
    pub index: usize,
}

/// How a container ended for good.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Succeeded,
    Failed,
    Stopped,
}

/// The delay before restart number `restarts + 1`.
pub fn backoff(restarts: u32, max: Duration) -> Duration {
    let factor = 1u32.checked_shl(restarts.min(20)).unwrap_or(u32::MAX);
    INITIAL_BACKOFF.saturating_mul(factor).min(max)
}

impl Slot {
    fn container(self, run: &PodRun) -> Option<Container> {
        let spec = run.pod.spec.as_ref()?;
        if self.init {
            spec.init_containers.as_ref()?.get(self.index).cloned()
        } else {
            spec.containers.get(self.index).cloned()
        }
    }

    fn field_path(self, name: &str) -> String {
        if self.init {
            format!("spec.initContainers{{{name}}}")
        } else {
            format!("spec.containers{{{name}}}")
        }
    }

    fn update(self, run: &PodRun, change: impl FnOnce(&mut crate::podstatus::ContainerState)) {
        run.shared.update(|state| {
            let list = if self.init {
                &mut state.init_containers
            } else {
                &mut state.containers
            };
            if let Some(container) = list.get_mut(self.index) {
                change(container);
            }
        });
    }
}

/// A container ready to be started.
struct Prepared {
    spec: ExecSpec,
    env: Vec<(String, String)>,
    image_commands: std::collections::BTreeMap<String, PathBuf>,
}

/// Why a container cannot be started: kubelet's waiting reason and message.
struct NotStarted {
    reason: &'static str,
    message: String,
}

/// The Services whose variables the container gets: the API server as `kubernetes`, plus the
/// Services of the pod's namespace unless `enableServiceLinks: false`.
fn service_links(run: &PodRun) -> Vec<ServiceLink> {
    let settings = &run.ctx.settings;
    let mut links = vec![ServiceLink {
        name: "kubernetes".into(),
        ip: settings.api_host,
        ports: vec![(Some("https".into()), settings.api_port, "TCP".into())],
    }];
    let enabled = run
        .pod
        .spec
        .as_ref()
        .and_then(|s| s.enable_service_links)
        .unwrap_or(true);
    if enabled {
        for service in run.ctx.cache.services.state() {
            if service.metadata.namespace.as_deref() != Some(run.shared.namespace.as_str())
                || (service.metadata.name.as_deref() == Some("kubernetes")
                    && run.shared.namespace == "default")
            {
                continue;
            }
            if let Some(link) = services::service_link(&service, settings.network.subnet) {
                links.push(link);
            }
        }
    }
    links
}

fn prepare(run: &PodRun, container: &Container) -> Result<Prepared, NotStarted> {
    let settings = &run.ctx.settings;
    let links = service_links(run);
    let env = env::resolve(&EnvInputs {
        facts: run.facts(),
        container,
        objects: &run.ctx.cache,
        services: &links,
    })
    .map_err(|message| NotStarted {
        reason: "CreateContainerConfigError",
        message,
    })?;
    let (command, args) = env::expand_command(container, &env);
    let image = container.image.clone().unwrap_or_default();
    let program = settings
        .images
        .resolve(&image, &command, &args)
        .map_err(|error| NotStarted {
            reason: match error {
                ImageError::UnknownCommand { .. } => "RunContainerError",
                _ => "ErrImagePull",
            },
            message: error.to_string(),
        })?;
    let image_commands = settings
        .images
        .entry(&image)
        .map(|entry| entry.commands.clone())
        .unwrap_or_default();
    let mut mounts = run
        .volumes
        .mounts(container, &env)
        .map_err(|error| NotStarted {
            reason: "CreateContainerConfigError",
            message: error.to_string(),
        })?;
    for (file, target) in [
        (run.shared.hosts_file.clone(), "/etc/hosts"),
        (run.pod_dir.join("resolv.conf"), "/etc/resolv.conf"),
    ] {
        if !mounts
            .iter()
            .any(|m| m.target == std::path::Path::new(target))
        {
            mounts.push(BindMount {
                source: file,
                target: target.into(),
                read_only: false,
            });
        }
    }
    let workdir = workdir(run, container);
    Ok(Prepared {
        spec: ExecSpec {
            program: program.path,
            argv: program.argv,
            env: env.clone(),
            workdir,
            netns: Some(run.netns.clone()),
            join_pid: None,
            hostname: Some(run.shared.hostname.clone()),
            mounts,
        },
        env,
        image_commands,
    })
}

/// The container's working directory: its `workingDir`, or a directory of its own in the pod
/// directory.
fn workdir(run: &PodRun, container: &Container) -> PathBuf {
    container
        .working_dir
        .clone()
        .filter(|w| !w.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| run.pod_dir.join("work").join(&container.name))
}

fn parse_probe(probe: Option<&Probe>, container: &Container) -> Result<Option<ProbeSpec>, String> {
    probe.map(|p| ProbeSpec::parse(p, container)).transpose()
}

/// A lifecycle hook as a probe-like action (sleep handled separately).
fn hook(
    handler: &LifecycleHandler,
    container: &Container,
    timeout: Duration,
) -> Result<Option<ProbeSpec>, String> {
    let probe = Probe {
        exec: handler.exec.clone(),
        http_get: handler.http_get.clone(),
        tcp_socket: handler.tcp_socket.clone(),
        timeout_seconds: Some(i32::try_from(timeout.as_secs().max(1)).unwrap_or(30)),
        ..Default::default()
    };
    if probe.exec.is_none() && probe.http_get.is_none() && probe.tcp_socket.is_none() {
        return Ok(None);
    }
    ProbeSpec::parse(&probe, container).map(Some)
}

/// A start that failed before a process ran: a `Failed` event, the container waiting with
/// `reason`, and a pause before the next try. Returns whether `stop` fired meanwhile.
async fn failed_start(
    run: &PodRun,
    slot: Slot,
    regarding: &Regarding,
    reason: &str,
    message: &str,
    stop: &mut watch::Receiver<bool>,
) -> bool {
    run.ctx.events.emit(regarding, true, "Failed", message);
    slot.update(run, |c| {
        c.state = ContainerPhase::Waiting {
            reason: reason.to_owned(),
            message: Some(message.to_owned()),
        };
    });
    sleep_or_stop(Duration::from_secs(10), stop).await
}

/// Runs the container until it ends for good or `stop` fires. `started` (sidecars) is told when
/// the container has started.
pub async fn run(
    run: Arc<PodRun>,
    slot: Slot,
    mut stop: watch::Receiver<bool>,
    started: Option<watch::Sender<bool>>,
) -> Outcome {
    let Some(container) = slot.container(&run) else {
        return Outcome::Failed;
    };
    let ctx = run.ctx.clone();
    let regarding = run.shared.regarding(Some(slot.field_path(&container.name)));
    let policy = container
        .restart_policy
        .clone()
        .unwrap_or_else(|| run.restart_policy().to_owned());
    let log = run.pod_dir.join(format!("{}.log", container.name));
    let spec_file = run
        .pod_dir
        .join("specs")
        .join(format!("{}.json", container.name));
    let mut restarts: u32 = 0;
    let mut delay_index: u32 = 0;
    let mut last_problem: Option<String> = None;
    loop {
        let prepared = match prepare(&run, &container) {
            Ok(prepared) => prepared,
            Err(not_started) => {
                if last_problem.as_deref() != Some(not_started.message.as_str()) {
                    tracing::warn!(pod = %run.shared.key(), container = %container.name, reason = not_started.reason, message = %not_started.message, log = %log.display(), "container cannot start");
                    ctx.events
                        .emit(&regarding, true, "Failed", &not_started.message);
                    append_line(
                        &log,
                        &format!(
                            "kcp-node-agent: {}: {}",
                            not_started.reason, not_started.message
                        ),
                    );
                    last_problem = Some(not_started.message.clone());
                }
                slot.update(&run, |c| {
                    c.state = ContainerPhase::Waiting {
                        reason: not_started.reason.to_owned(),
                        message: Some(not_started.message.clone()),
                    };
                });
                let wait =
                    backoff(delay_index, ctx.settings.max_backoff).min(Duration::from_secs(10));
                delay_index = delay_index.saturating_add(1);
                if sleep_or_stop(wait, &mut stop).await {
                    return Outcome::Stopped;
                }
                continue;
            }
        };
        let probes = (
            parse_probe(container.startup_probe.as_ref(), &container),
            parse_probe(container.readiness_probe.as_ref(), &container),
            parse_probe(container.liveness_probe.as_ref(), &container),
        );
        let (startup, readiness, liveness) = match probes {
            (Ok(s), Ok(r), Ok(l))
                if !slot.init || container.restart_policy.as_deref() == Some("Always") =>
            {
                (s, r, l)
            }
            (Ok(_), Ok(_), Ok(_)) => (None, None, None),
            (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => {
                let reason = "CreateContainerConfigError";
                if failed_start(&run, slot, &regarding, reason, &e, &mut stop).await {
                    return Outcome::Stopped;
                }
                continue;
            }
        };
        if restarts == 0 {
            // A pod re-created under the same name (a StatefulSet pod) starts with no runs.
            container_log::forget_runs(&run.pod_dir, &container.name);
        }
        let logs = LogFiles {
            plain: log.clone(),
            run: container_log::run_log(&run.pod_dir, &container.name, restarts),
        };
        let mut process = match Process::spawn(
            &ctx.settings.agent_exe,
            &prepared.spec,
            &spec_file,
            &logs,
            InputSpec::of(&container),
        ) {
            Ok(process) => process,
            Err(error) => {
                let message = error.to_string();
                let reason = "RunContainerError";
                if failed_start(&run, slot, &regarding, reason, &message, &mut stop).await {
                    return Outcome::Stopped;
                }
                continue;
            }
        };
        let started_at = jiff::Timestamp::now();
        let started_instant = Instant::now();
        let pid = process.pid();
        let attachable = process
            .input()
            .map(|input| ctx.container_inputs.register(pid, input));
        tracing::info!(pod = %run.shared.key(), container = %container.name, pid, log = %log.display(), "container started");
        ctx.events.emit(
            &regarding,
            false,
            "Started",
            &format!("Started container {}", container.name),
        );
        let long_running = !slot.init || container.restart_policy.as_deref() == Some("Always");
        let has_startup = startup.is_some();
        let has_readiness = readiness.is_some();
        slot.update(&run, |c| {
            c.state = ContainerPhase::Running { started_at };
            c.pid = Some(pid);
            c.restart_count = i32::try_from(restarts).unwrap_or(i32::MAX);
            c.started = !has_startup;
            // Init containers are never "ready"; others (sidecars too) without probes are ready
            // once started.
            c.ready = long_running && !has_readiness && !has_startup;
        });
        if !has_startup && let Some(started) = &started {
            let _ = started.send(true);
        }
        let env = Arc::new(prepared.env);
        let (kill_tx, mut kill_rx) = mpsc::channel::<String>(1);
        let mut probe_task = tokio::spawn(probe_loop(
            run.clone(),
            slot,
            container.clone(),
            pid,
            env.clone(),
            Arc::new(prepared.image_commands.clone()),
            (startup, readiness, liveness),
            kill_tx.clone(),
            started.clone(),
        ));
        if let Some(post_start) = container
            .lifecycle
            .as_ref()
            .and_then(|l| l.post_start.as_ref())
        {
            let run = run.clone();
            let container = container.clone();
            let env = env.clone();
            let commands = Arc::new(prepared.image_commands.clone());
            let handler = post_start.clone();
            tokio::spawn(async move {
                if let Err(message) = run_hook(
                    &run,
                    &container,
                    &handler,
                    pid,
                    &env,
                    &commands,
                    Duration::from_secs(30),
                )
                .await
                {
                    let _ = kill_tx
                        .send(format!("PostStartHook failed: {message}"))
                        .await;
                }
            });
        }
        let (exit, killed_because) = tokio::select! {
            exit = process.wait() => (exit, None),
            reason = kill_rx.recv() => {
                let reason = reason.unwrap_or_default();
                tracing::info!(pod = %run.shared.key(), container = %container.name, %reason, "restarting container");
                ctx.events.emit(&regarding, false, "Killing", &format!("Container {} failed: {reason}, will be restarted", container.name));
                let exit = stop_gracefully(&run, &container, &mut process, pid, &env, &prepared.image_commands).await;
                (exit, Some(reason))
            }
            _ = stop.changed() => {
                probe_task.abort();
                slot.update(&run, |c| c.ready = false);
                ctx.events.emit(&regarding, false, "Killing", &format!("Stopping container {}", container.name));
                let exit = stop_gracefully(&run, &container, &mut process, pid, &env, &prepared.image_commands).await;
                slot.update(&run, |c| {
                    c.state = terminated(exit, started_at, None);
                    c.pid = None;
                    c.started = false;
                });
                return Outcome::Stopped;
            }
        };
        drop(attachable);
        probe_task.abort();
        let _ = (&mut probe_task).await;
        let ran = started_instant.elapsed();
        tracing::info!(pod = %run.shared.key(), container = %container.name, code = exit.code, "container exited");
        let final_state = terminated(exit, started_at, killed_because.clone());
        let succeeded = exit.success() && killed_because.is_none();
        let restart = match policy.as_str() {
            "Always" => {
                !slot.init || container.restart_policy.as_deref() == Some("Always") || !succeeded
            }
            "OnFailure" => !succeeded,
            _ => false,
        };
        if !restart {
            slot.update(&run, |c| {
                c.state = final_state.clone();
                c.pid = None;
                c.ready = false;
            });
            return if succeeded {
                Outcome::Succeeded
            } else {
                Outcome::Failed
            };
        }
        if ran >= BACKOFF_RESET {
            delay_index = 0;
        }
        let delay = backoff(delay_index, ctx.settings.max_backoff);
        delay_index = delay_index.saturating_add(1);
        restarts = restarts.saturating_add(1);
        let message = format!(
            "back-off {}s restarting failed container={} pod={}_{}({})",
            delay.as_secs(),
            container.name,
            run.shared.name,
            run.shared.namespace,
            run.shared.uid
        );
        ctx.events.emit(
            &regarding,
            true,
            "BackOff",
            &format!("Back-off restarting failed container {}", container.name),
        );
        slot.update(&run, |c| {
            c.last_state = Some(final_state.clone());
            c.state = ContainerPhase::Waiting {
                reason: "CrashLoopBackOff".into(),
                message: Some(message.clone()),
            };
            c.pid = None;
            c.ready = false;
            c.started = false;
        });
        if sleep_or_stop(delay, &mut stop).await {
            return Outcome::Stopped;
        }
    }
}

/// Appends a line of the agent's own to a container log (why the container did not start).
fn append_line(log: &std::path::Path, line: &str) {
    use std::io::Write as _;
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .and_then(|mut file| writeln!(file, "{line}"));
    if let Err(error) = written {
        tracing::debug!(log = %log.display(), %error, "writing to a container log");
    }
}

fn terminated(
    exit: Exit,
    started_at: jiff::Timestamp,
    killed_because: Option<String>,
) -> ContainerPhase {
    ContainerPhase::Terminated {
        exit_code: exit.code,
        signal: exit.signal,
        reason: if exit.success() && killed_because.is_none() {
            "Completed".into()
        } else {
            "Error".into()
        },
        message: killed_because,
        started_at: Some(started_at),
        finished_at: jiff::Timestamp::now(),
    }
}

/// preStop hook (within the grace period), SIGTERM, the rest of the grace period, SIGKILL.
async fn stop_gracefully(
    run: &Arc<PodRun>,
    container: &Container,
    process: &mut Process,
    pid: u32,
    env: &[(String, String)],
    commands: &std::collections::BTreeMap<String, PathBuf>,
) -> Exit {
    let deadline = Instant::now() + run.grace;
    if let Some(pre_stop) = container
        .lifecycle
        .as_ref()
        .and_then(|l| l.pre_stop.as_ref())
    {
        let hook_run = run_hook(run, container, pre_stop, pid, env, commands, run.grace);
        tokio::select! {
            result = tokio::time::timeout(run.grace, hook_run) => {
                if let Ok(Err(message)) = result {
                    tracing::warn!(pod = %run.shared.key(), container = %container.name, %message, "preStop hook failed");
                }
            }
            exit = process.wait() => return exit,
        }
    }
    // Kubelet gives at least two seconds after a hook used up the grace period.
    let remaining = deadline
        .saturating_duration_since(Instant::now())
        .max(Duration::from_secs(if run.grace.is_zero() { 0 } else { 2 }));
    process.stop(remaining).await
}

async fn run_hook(
    run: &Arc<PodRun>,
    container: &Container,
    handler: &LifecycleHandler,
    pid: u32,
    env: &[(String, String)],
    commands: &std::collections::BTreeMap<String, PathBuf>,
    timeout: Duration,
) -> Result<(), String> {
    if let Some(sleep) = &handler.sleep {
        tokio::time::sleep(Duration::from_secs(
            u64::try_from(sleep.seconds).unwrap_or(0),
        ))
        .await;
        return Ok(());
    }
    let Some(spec) = hook(handler, container, timeout)? else {
        return Ok(());
    };
    probes::run(&spec, &probe_target(run, container, pid, env, commands)).await
}

/// What a probe or hook of `container` acts on: its pod's address, its process, its environment.
fn probe_target<'a>(
    run: &'a PodRun,
    container: &Container,
    pid: u32,
    env: &'a [(String, String)],
    commands: &'a std::collections::BTreeMap<String, PathBuf>,
) -> Target<'a> {
    Target {
        pod_ip: run.shared.ip,
        http: &run.ctx.probe_http,
        agent_exe: &run.ctx.settings.agent_exe,
        pid: Some(pid),
        env,
        image_commands: commands,
        workdir: workdir(run, container),
        spec_dir: run.pod_dir.join("specs"),
    }
}

/// Startup, then readiness and liveness, until the task is aborted or a probe asks for a restart.
#[allow(clippy::too_many_arguments)]
async fn probe_loop(
    run: Arc<PodRun>,
    slot: Slot,
    container: Container,
    pid: u32,
    env: Arc<Vec<(String, String)>>,
    commands: Arc<std::collections::BTreeMap<String, PathBuf>>,
    probes: (Option<ProbeSpec>, Option<ProbeSpec>, Option<ProbeSpec>),
    kill: mpsc::Sender<String>,
    started: Option<watch::Sender<bool>>,
) {
    let (startup, readiness, liveness) = probes;
    let began = Instant::now();
    let target = probe_target(&run, &container, pid, &env, &commands);
    let regarding = run.shared.regarding(Some(slot.field_path(&container.name)));
    let events = &run.ctx.events;
    // Startup and liveness probes: an event per failure, and after `failure_threshold` failures
    // in a row the container is killed (false). With `until_passed` it returns true once the
    // probe passed; otherwise a success only resets the count.
    let watch_failures = async |kind: &str, probe: &ProbeSpec, until_passed: bool| -> bool {
        wait_initial(began, probe.initial_delay).await;
        let mut failures = 0u32;
        loop {
            match probes::run(probe, &target).await {
                Ok(()) if until_passed => return true,
                Ok(()) => failures = 0,
                Err(message) => {
                    failures += 1;
                    let message = format!("{kind} probe failed: {message}");
                    events.emit(&regarding, true, "Unhealthy", &message);
                    if failures >= probe.failure_threshold {
                        let _ = kill.send(message).await;
                        return false;
                    }
                }
            }
            tokio::time::sleep(probe.period).await;
        }
    };
    if let Some(startup) = startup {
        if !watch_failures("Startup", &startup, true).await {
            return;
        }
        let ready = readiness.is_none();
        slot.update(&run, |c| {
            c.started = true;
            c.ready = ready;
        });
        if let Some(started) = &started {
            let _ = started.send(true);
        }
    }
    let readiness_loop = async {
        let Some(probe) = &readiness else {
            return std::future::pending::<()>().await;
        };
        wait_initial(began, probe.initial_delay).await;
        let (mut successes, mut failures) = (0u32, 0u32);
        let mut ready = false;
        loop {
            match probes::run(probe, &target).await {
                Ok(()) => {
                    successes += 1;
                    failures = 0;
                    if !ready && successes >= probe.success_threshold {
                        ready = true;
                        slot.update(&run, |c| c.ready = true);
                    }
                }
                Err(message) => {
                    failures += 1;
                    successes = 0;
                    if failures == 1 || failures == probe.failure_threshold {
                        events.emit(
                            &regarding,
                            true,
                            "Unhealthy",
                            &format!("Readiness probe failed: {message}"),
                        );
                    }
                    if ready && failures >= probe.failure_threshold {
                        ready = false;
                        slot.update(&run, |c| c.ready = false);
                    }
                }
            }
            tokio::time::sleep(probe.period).await;
        }
    };
    let liveness_loop = async {
        let Some(probe) = &liveness else {
            return std::future::pending::<()>().await;
        };
        watch_failures("Liveness", probe, false).await;
    };
    tokio::select! {
        () = readiness_loop => {}
        () = liveness_loop => {}
    }
}

async fn wait_initial(began: Instant, delay: Duration) {
    let elapsed = began.elapsed();
    if elapsed < delay {
        tokio::time::sleep(delay - elapsed).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let max = Duration::from_secs(300);
        let delays: Vec<u64> = (0..7).map(|n| backoff(n, max).as_secs()).collect();
        assert_eq!(delays, vec![10, 20, 40, 80, 160, 300, 300]);
        assert_eq!(backoff(0, Duration::from_secs(2)), Duration::from_secs(2));
        assert_eq!(backoff(60, max), max);
    }
}
