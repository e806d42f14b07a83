//! README command 1 (`kcp-managed up`, then `down` from another terminal) gives a managed kcp
//! that kubectl reaches through the front-proxy, and `down` leaves nothing behind: the network
//! namespaces, links and mounts and the processes of this tree's programs and etcd that exist
//! after it are exactly those that existed before `up`, while during the run there were new
//! ones of each kind. Only what belongs to its bridge counts (the agent names namespaces and
//! links after it: `<bridge>-p<N>`, `kv<FNV-1a of the bridge><N>`; its etcd runs in those
//! namespaces), so other runs on the machine do not disturb the count. Needs root, like the e2e
//! suite.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use kcp_e2e::cluster::{Cluster, KUBECTL_VERSION};
use kcp_e2e::managed::StateDir;
use kcp_testing::{ChildGuard, Kubectl};

/// Building the programs cold, the host, the chart and the full deployment.
const UP_WITHIN: Duration = Duration::from_secs(1800);
const EXIT_WITHIN: Duration = Duration::from_secs(240);

fn managed() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_kcp-managed"))
}

/// What a run can leave on the machine.
#[derive(Debug, Default)]
struct Footprint {
    namespaces: BTreeSet<String>,
    links: BTreeSet<String>,
    mounts: BTreeSet<String>,
    /// `pid exe` of processes of this tree's programs and etcd.
    processes: BTreeSet<String>,
}

fn ip(args: &[&str]) -> String {
    let output = Command::new("ip").args(args).output().expect("ip");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

impl Footprint {
    fn now() -> Footprint {
        let programs: Vec<PathBuf> = ["kcp", "kcp-operator", "kcp-node-agent", "kcp-managed"]
            .iter()
            .map(|name| managed().with_file_name(name))
            .chain([PathBuf::from("/usr/bin/etcd")])
            .collect();
        let processes = std::fs::read_dir("/proc")
            .expect("/proc")
            .flatten()
            .filter_map(|entry| {
                let exe = std::fs::read_link(entry.path().join("exe")).ok()?;
                programs
                    .contains(&exe)
                    .then(|| format!("{} {}", entry.file_name().to_string_lossy(), exe.display()))
            })
            .filter(|line| !line.starts_with(&format!("{} ", std::process::id())))
            .collect();
        Footprint {
            namespaces: ip(&["netns", "list"])
                .lines()
                .filter_map(|line| line.split_whitespace().next().map(str::to_owned))
                .collect(),
            links: ip(&["-o", "link", "show"])
                .lines()
                .filter_map(|line| {
                    let name = line.split(": ").nth(1)?;
                    Some(name.split('@').next()?.to_owned())
                })
                .collect(),
            mounts: std::fs::read_to_string("/proc/self/mounts")
                .expect("mounts")
                .lines()
                .filter_map(|line| line.split_whitespace().nth(1).map(str::to_owned))
                .collect(),
            processes,
        }
    }

    /// What exists now that did not `before`, by kind: of namespaces, links and their mounts
    /// (`/run/netns/<name>`) only those of `bridge`, of etcd processes (one binary for every run
    /// on the machine) only those in its pod namespaces.
    fn new_since(&self, before: &Footprint, bridge: &str) -> Vec<String> {
        let ours = format!("{bridge}-");
        let mounts: BTreeSet<String> = self
            .mounts
            .iter()
            .filter(|mount| match mount.split_once("/netns/") {
                Some((_, name)) => name.starts_with(&ours),
                None => true,
            })
            .cloned()
            .collect();
        let processes: BTreeSet<String> = self
            .processes
            .iter()
            .filter(|process| match process.split_once(" /usr/bin/etcd") {
                Some((pid, _)) => ip(&["netns", "identify", pid]).starts_with(&ours),
                None => true,
            })
            .cloned()
            .collect();
        let veths = veth_prefix(bridge);
        let namespaces: BTreeSet<String> = self
            .namespaces
            .iter()
            .filter(|name| name.starts_with(&format!("{bridge}-")))
            .cloned()
            .collect();
        let links: BTreeSet<String> = self
            .links
            .iter()
            .filter(|name| *name == bridge || name.starts_with(&veths))
            .cloned()
            .collect();
        let mut new = Vec::new();
        for (kind, now, then) in [
            ("namespace", &namespaces, &before.namespaces),
            ("link", &links, &before.links),
            ("mount", &mounts, &before.mounts),
            ("process", &processes, &before.processes),
        ] {
            new.extend(now.difference(then).map(|item| format!("{kind} {item}")));
        }
        new
    }
}

/// The prefix of the host ends of the veths the agent makes on `bridge`: `kv` and the low 24
/// bits of the bridge name's 32-bit FNV-1a hash, in hex.
fn veth_prefix(bridge: &str) -> String {
    let hash = bridge.bytes().fold(0x811c_9dc5_u32, |hash, byte| {
        (hash ^ u32::from(byte)).wrapping_mul(0x0100_0193)
    });
    format!("kv{:06x}", hash & 0x00ff_ffff)
}

/// Runs `down` when the test ends early (while armed), so a failure does not leave the run
/// behind.
struct Down {
    state: PathBuf,
    armed: bool,
}

impl Drop for Down {
    fn drop(&mut self) {
        if self.armed {
            let _ = Command::new(managed())
                .args(["down", "--state-dir"])
                .arg(&self.state)
                .status();
        }
    }
}

fn wait_ready(up: &mut ChildGuard, state: &StateDir) {
    let deadline = Instant::now() + UP_WITHIN;
    while !state.ready().is_file() {
        if let Some(status) = up.exited() {
            panic!(
                "kcp-managed up exited ({status}) before ready:\n{}",
                up.log_tail()
            );
        }
        assert!(
            Instant::now() < deadline,
            "not ready within {UP_WITHIN:?}:\n{}",
            up.log_tail()
        );
        std::thread::sleep(Duration::from_secs(1));
    }
}

fn wait_exit(up: &mut ChildGuard) {
    let deadline = Instant::now() + EXIT_WITHIN;
    while up.exited().is_none() {
        assert!(
            Instant::now() < deadline,
            "up still runs after down:\n{}",
            up.log_tail()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

fn run_managed(args: &[&str], state: &Path) -> (bool, String) {
    let output = Command::new(managed())
        .args(args)
        .arg("--state-dir")
        .arg(state)
        .output()
        .expect("kcp-managed");
    (
        output.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ),
    )
}

#[test]
fn up_gives_a_working_kcp_and_down_leaves_nothing_behind() {
    let dir = tempfile::tempdir().expect("tempdir");
    let state_path = dir.path().join("state");
    let state = StateDir::new(&state_path);
    let before = Footprint::now();

    let mut up = ChildGuard::spawn(
        "kcp-managed up",
        Command::new(managed())
            .args(["up", "--state-dir"])
            .arg(&state_path),
        &dir.path().join("up.log"),
    );
    let mut down_on_failure = Down {
        state: state_path.clone(),
        armed: true,
    };
    wait_ready(&mut up, &state);
    let log = up.log();
    for printed in ["kubectl ws tree", "export KUBECONFIG=", "status page"] {
        assert!(log.contains(printed), "{printed:?} not printed:\n{log}");
    }

    let bridge = state.running().expect("up records its run").bridge;
    let during = Footprint::now();
    let made = during.new_since(&before, &bridge);
    for kind in ["namespace ", "link ", "mount ", "process "] {
        assert!(
            made.iter().any(|item| item.starts_with(kind)),
            "the run made no {kind}: {made:#?}"
        );
    }

    let kcp = Cluster::new(&state.kubeconfig());
    let shards = kcp
        .run(&["get", "shards", "-o", "name"])
        .expect("kubectl through the front-proxy");
    for shard in ["root", "shard-1"] {
        assert!(shards.contains(shard), "{shard} not registered: {shards}");
    }
    let host = Kubectl::new(KUBECTL_VERSION, &state.host_kubeconfig());
    let phases = host.run(&[
        "-n",
        "kcp",
        "get",
        "frontproxies",
        "-o",
        "jsonpath={.items[*].status.phase}",
    ]);
    assert_eq!(phases.stdout.trim(), "Running", "{}", phases.stderr);

    let (again, said) = run_managed(&["up"], &state_path);
    assert!(
        again && said.contains("already up"),
        "up is not idempotent: {said}"
    );

    let (stopped, said) = run_managed(&["down"], &state_path);
    assert!(stopped, "down failed: {said}");
    wait_exit(&mut up);
    down_on_failure.armed = false;

    let left = Footprint::now().new_since(&before, &bridge);
    assert!(left.is_empty(), "down left: {left:#?}\n{}", up.log_tail());
    assert!(state.running().is_none(), "the run's record is still there");
    let (_, said) = run_managed(&["down"], &state_path);
    assert!(said.contains("not up"), "{said}");
}
