//! `kcp-managed`: README command 1, a managed kcp on this machine in one command. `up` (the
//! default) builds this tree's programs, starts the suite's local host (this repo's server as the
//! host API, the node agent running pods as processes on a bridge of their own), installs the
//! operator with its Helm chart, applies the full deployment of the e2e suite (CacheServer,
//! RootShard, one Shard, FrontProxy; the same manifests and waits as scenarios 1, 2 and 8), writes
//! a kubeconfig through the FrontProxy to the state directory (`.kcp-managed/` in the checkout),
//! prints it with the next commands to try, and stays in the foreground. Ctrl-C (or SIGTERM, which
//! `down` sends from another terminal) stops everything it started and removes every pod process,
//! network namespace, link, address and the bridge (the agent's own teardown, then its
//! `cleanup` by the bridge name). Progress is the e2e narrator's: one line per step with timings.
//!
//! The state directory records the `up` process (PID and bridge), so `up` again is idempotent (it
//! prints what runs) and `down` finds what to stop; after a crash (the `up` process gone), `down`
//! or the next `up` removes what it left by its bridge name. Ctrl-C while it is still starting
//! stops its child processes by PID, removes the pod network by the bridge name and exits at once
//! (the step under way is abandoned, not awaited). Like the suite it needs root.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use crate::Narrator;
use crate::host::Host;
use crate::host::local::{LocalHost, bridge_name, clean_up_bridge, repo_root};
use crate::scenarios::{self, Suite};

/// How long `down` waits for `up` to finish stopping (the agent gives pods 90 s).
const DOWN_WITHIN: Duration = Duration::from_secs(180);
/// How long children get after SIGTERM when setup is interrupted.
const CHILDREN_GRACE: Duration = Duration::from_secs(30);

/// The files of one managed kcp.
#[derive(Clone, Debug)]
pub struct StateDir {
    path: PathBuf,
}

/// The `up` process a state directory names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Running {
    pub pid: u32,
    pub bridge: String,
}

impl StateDir {
    /// `.kcp-managed/` in the checkout.
    pub fn default_path() -> PathBuf {
        repo_root().join(".kcp-managed")
    }

    pub fn new(path: &Path) -> StateDir {
        StateDir {
            path: path.to_owned(),
        }
    }

    /// The admin kubeconfig through the FrontProxy.
    pub fn kubeconfig(&self) -> PathBuf {
        self.path.join("admin.kubeconfig")
    }

    /// The host cluster's admin kubeconfig (where the operator's objects are).
    pub fn host_kubeconfig(&self) -> PathBuf {
        self.path.join("host.kubeconfig")
    }

    /// Written once everything is Available: what `up` printed.
    pub fn ready(&self) -> PathBuf {
        self.path.join("ready")
    }

    fn running_file(&self) -> PathBuf {
        self.path.join("up.pid")
    }

    /// The `up` process recorded here, if any.
    pub fn running(&self) -> Option<Running> {
        let text = std::fs::read_to_string(self.running_file()).ok()?;
        Running::parse(&text)
    }

    fn record(&self, running: &Running) -> Result<(), String> {
        std::fs::create_dir_all(&self.path)
            .map_err(|e| format!("creating {}: {e}", self.path.display()))?;
        write(&self.running_file(), &running.render())
    }

    /// Forgets the run: its record and what it wrote.
    fn clear(&self) {
        for file in [
            self.running_file(),
            self.ready(),
            self.kubeconfig(),
            self.host_kubeconfig(),
        ] {
            let _ = std::fs::remove_file(file);
        }
    }
}

impl Running {
    /// `pid <N>\nbridge <name>\n`.
    pub fn parse(text: &str) -> Option<Running> {
        let mut pid = None;
        let mut bridge = None;
        for line in text.lines() {
            match line.split_once(' ') {
                Some(("pid", value)) => pid = value.trim().parse().ok(),
                Some(("bridge", value)) => bridge = Some(value.trim().to_owned()),
                _ => {}
            }
        }
        Some(Running {
            pid: pid?,
            bridge: bridge.filter(|b| !b.is_empty())?,
        })
    }

    pub fn render(&self) -> String {
        format!("pid {}\nbridge {}\n", self.pid, self.bridge)
    }

    /// Whether the process still runs this program (`up` and `down` are one binary), so a
    /// reused PID does not count.
    pub fn alive(&self) -> bool {
        let Ok(exe) = std::fs::read_link(format!("/proc/{}/exe", self.pid)) else {
            return false;
        };
        std::env::current_exe().is_ok_and(|ours| same_program(&exe, &ours))
    }
}

/// Whether the executable `exe` (as `/proc/<pid>/exe` names it) is the program `ours`: the
/// same file name, also when it was rebuilt since it started (the kernel then appends
/// ` (deleted)`).
pub fn same_program(exe: &Path, ours: &Path) -> bool {
    let name = |path: &Path| {
        path.file_name().map(|name| {
            name.to_string_lossy()
                .trim_end_matches(" (deleted)")
                .to_owned()
        })
    };
    name(exe).is_some_and(|exe| Some(exe) == name(ours))
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("writing {}: {e}", path.display()))
}

/// `kcp-managed up`.
pub fn up(state: &StateDir) -> Result<(), String> {
    if let Some(running) = state.running() {
        if running.alive() {
            println!(
                "kcp-managed is already up (PID {}, bridge {}).",
                running.pid, running.bridge
            );
            match std::fs::read_to_string(state.ready()) {
                Ok(text) => print!("{text}"),
                Err(_) => println!("It is still starting; its terminal shows the progress."),
            }
            return Ok(());
        }
        println!(
            "removing what an earlier run (PID {}, gone) left on bridge {}",
            running.pid, running.bridge
        );
        clean_up_bridge(&running.bridge)?;
        state.clear();
    }
    let runtime = tokio::runtime::Runtime::new().map_err(|e| format!("no Tokio runtime: {e}"))?;
    let stop = Arc::new(Notify::new());
    let signalled = stop.clone();
    runtime.spawn(async move {
        wait_for_signal().await;
        signalled.notify_one();
    });
    let me = Running {
        pid: std::process::id(),
        bridge: bridge_name(std::process::id()),
    };
    state.record(&me)?;

    let began = Instant::now();
    let handle = runtime.handle().clone();
    let setup_state = state.clone();
    let setup = runtime.spawn_blocking(move || bring_up(&handle, &setup_state));
    let outcome = runtime.block_on(async {
        tokio::select! {
            result = setup => Some(result),
            () = stop.notified() => None,
        }
    });
    let mut suite = match outcome {
        Some(Ok((Some(suite), Ok(())))) => suite,
        Some(Ok((suite, result))) => {
            let error = result.err().unwrap_or_default();
            println!("kcp-managed up failed: {error}");
            match suite {
                Some(suite) => {
                    println!("{}", suite.host.diagnostics());
                    stop_everything(&runtime, suite, state);
                }
                None => interrupted(&me, state),
            }
            return Err(error);
        }
        Some(Err(error)) => {
            interrupted(&me, state);
            return Err(format!("setup failed: {error}"));
        }
        None => {
            println!("interrupted while starting: stopping what was started");
            interrupted(&me, state);
            // The setup thread may still be inside a step: leave at once, so it starts
            // nothing more (its runtime is not shut down under it).
            println!("stopped; nothing of this run is left");
            std::process::exit(130);
        }
    };

    let page = scenarios::status_page_url(&mut suite).unwrap_or_else(|e| format!("(unknown: {e})"));
    let summary = next_steps(state, &page, began.elapsed());
    print!("{summary}");
    write(&state.ready(), &summary)?;
    runtime.block_on(stop.notified());
    println!("\nstopping: the operator, kcp and the host; removing the pod network");
    stop_everything(&runtime, suite, state);
    Ok(())
}

/// Starts the host and deploys; the suite (with its host, to be stopped) and the outcome.
fn bring_up(
    runtime: &tokio::runtime::Handle,
    state: &StateDir,
) -> (Option<Suite>, Result<(), String>) {
    let mut narrator = Narrator::new();
    narrator.scenario("host: this repo's server + node agent on a bridge of its own");
    let host = match runtime.block_on(LocalHost::start(&narrator)) {
        Ok(host) => Host::Local(Box::new(host)),
        Err(error) => return (None, Err(error)),
    };
    let mut suite = match Suite::new(host, narrator) {
        Ok(suite) => suite,
        Err(error) => return (None, Err(error)),
    };
    let result = scenarios::deploy_full(&mut suite).and_then(|kubeconfig| {
        std::fs::copy(&kubeconfig, state.kubeconfig())
            .map_err(|e| format!("copying the kubeconfig: {e}"))?;
        std::fs::copy(suite.host.kubeconfig(), state.host_kubeconfig())
            .map_err(|e| format!("copying the host kubeconfig: {e}"))?;
        Ok(())
    });
    (Some(suite), result)
}

/// What `up` prints once everything is Available.
fn next_steps(state: &StateDir, page: &str, took: Duration) -> String {
    let kubeconfig = state.kubeconfig();
    let host = state.host_kubeconfig();
    format!(
        "\nkcp is up after {:.0}s: CacheServer, RootShard, Shard and FrontProxy are Available.\n\n\
         Use it through the front-proxy:\n\n  \
         export KUBECONFIG={kubeconfig}\n  \
         kubectl get shards                # root and shard-1, registered\n  \
         kubectl ws tree                   # the kubectl-ws plugin (README command 1 installs it)\n  \
         kubectl ws create demo --enter\n  \
         kubectl create configmap hello --from-literal=from=managed-kcp\n\n\
         The operator's objects on the host cluster:\n\n  \
         kubectl --kubeconfig {host} -n kcp get rootshards,shards.operator.kcp.io,frontproxies,cacheservers\n\n\
         Operator status page (this machine only): {page}\n\n\
         Stop with Ctrl-C here, or from another terminal: cargo run -p kcp-e2e --bin kcp-managed -- down\n",
        took.as_secs_f64(),
        kubeconfig = kubeconfig.display(),
        host = host.display(),
    )
}

/// Stops the host (the agent stops its pods and removes their network) and forgets the run.
fn stop_everything(runtime: &tokio::runtime::Runtime, suite: Suite, state: &StateDir) {
    runtime.block_on(suite.host.stop());
    state.clear();
    println!("stopped; nothing of this run is left");
}

/// Setup was interrupted (or its thread failed) while holding the host: this process's children
/// (server, agent, kubectl, helm) are stopped by their PIDs, then the agent's `cleanup` removes
/// pods, namespaces and links by the bridge name, and children the still running setup step
/// started meanwhile are stopped too.
fn interrupted(me: &Running, state: &StateDir) {
    let children = children_of(me.pid);
    signal(&children, "TERM");
    let deadline = Instant::now() + CHILDREN_GRACE;
    while Instant::now() < deadline && children.iter().any(|pid| process_exists(*pid)) {
        std::thread::sleep(Duration::from_millis(200));
    }
    signal(&children, "KILL");
    if let Err(error) = clean_up_bridge(&me.bridge) {
        println!("cleanup of bridge {}: {error}", me.bridge);
    }
    signal(&children_of(me.pid), "KILL");
    state.clear();
}

/// `kcp-managed down`: asks the `up` process to stop (SIGTERM, as Ctrl-C) and waits until it is
/// gone; when it is gone already, removes what it left by its bridge name.
pub fn down(state: &StateDir) -> Result<(), String> {
    let Some(running) = state.running() else {
        println!(
            "kcp-managed is not up (no {})",
            state.running_file().display()
        );
        return Ok(());
    };
    if running.alive() {
        println!("stopping kcp-managed (PID {})", running.pid);
        signal(&[running.pid], "TERM");
        let deadline = Instant::now() + DOWN_WITHIN;
        while running.alive() {
            if Instant::now() >= deadline {
                return Err(format!(
                    "kcp-managed (PID {}) still runs after {DOWN_WITHIN:?}",
                    running.pid
                ));
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    } else {
        println!(
            "kcp-managed (PID {}) is gone; removing what it left on bridge {}",
            running.pid, running.bridge
        );
        clean_up_bridge(&running.bridge)?;
    }
    state.clear();
    println!("down");
    Ok(())
}

/// PIDs whose parent is `pid`.
fn children_of(pid: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|child| {
            std::fs::read_to_string(format!("/proc/{child}/stat"))
                .ok()
                .and_then(|stat| parent_pid(&stat))
                == Some(pid)
        })
        .collect()
}

/// The parent PID in a `/proc/<pid>/stat` line (after the `(command)` field, which may hold
/// spaces and parentheses).
pub fn parent_pid(stat: &str) -> Option<u32> {
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

fn process_exists(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// Sends `SIG<name>` to each of `pids`.
fn signal(pids: &[u32], name: &str) {
    for pid in pids {
        let _ = Command::new("kill")
            .args([&format!("-{name}"), &pid.to_string()])
            .stderr(std::process::Stdio::null())
            .status();
    }
}

async fn wait_for_signal() {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut stream) => {
                stream.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = terminate => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_record_round_trips() {
        let running = Running {
            pid: 4242,
            bridge: "kcpe2e62".into(),
        };
        assert_eq!(Running::parse(&running.render()), Some(running));
        assert_eq!(Running::parse("pid x\nbridge kcpe2e1\n"), None);
        assert_eq!(Running::parse("pid 1\n"), None);
    }

    #[test]
    fn a_rebuilt_program_is_the_same_program() {
        let ours = Path::new("/target/debug/kcp-managed");
        assert!(same_program(Path::new("/target/debug/kcp-managed"), ours));
        assert!(same_program(
            Path::new("/target/debug/kcp-managed (deleted)"),
            ours
        ));
        assert!(!same_program(Path::new("/usr/bin/sleep"), ours));
    }

    #[test]
    fn the_parent_follows_the_command_name() {
        assert_eq!(parent_pid("77 (kcp (x) y) S 12 77 77 0"), Some(12));
        assert_eq!(parent_pid("garbage"), None);
    }

    #[test]
    fn only_a_process_of_this_program_counts() {
        let this = Running {
            pid: std::process::id(),
            bridge: "kcpe2e1".into(),
        };
        assert!(this.alive(), "this process runs this program");
        let init = Running {
            pid: 1,
            bridge: "kcpe2e1".into(),
        };
        assert!(!init.alive(), "PID 1 is not this program");
    }
}
