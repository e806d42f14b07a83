//! A whole sharded topology as a test peer: the `kcp sharded` process (a cache server, the root
//! shard and further shards on 127.0.0.1 with free ports), so sharding tests start exactly what
//! people start, through the same code.
//!
//! The process prints one line per child (`<name> <url> pid=<pid> log=<file>`) once all are
//! ready and `admin.kubeconfig` is written; that summary is how the test learns names, URLs and
//! PIDs. Dropping the guard kills `kcp sharded` by PID, and its children follow it (they get
//! SIGTERM when their parent dies).

use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::time::{Duration, Instant};

use tempfile::TempDir;

use crate::dir::temp_dir;
use crate::kcp::AdminCredentials;
use crate::process::ChildGuard;

/// Three and more processes, each waited for in turn (`kcp sharded` allows each 120 s).
const STARTED_WITHIN: Duration = Duration::from_secs(300);
/// Every child may take `kcp sharded`'s grace period (45 s) to stop.
const STOP_WITHIN: Duration = Duration::from_secs(150);
/// The line of the summary that comes after the process lines.
const SUMMARY_END: &str = "\nadmin kubeconfig: ";
const SUMMARY_START: &str = "kcp sharded is running:";

/// One process of the topology as `kcp sharded` printed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardedChild {
    pub name: String,
    pub url: String,
    pub pid: u32,
}

/// A running `kcp sharded`.
pub struct ShardedKcp {
    process: ChildGuard,
    binary: PathBuf,
    args: Vec<String>,
    dir: TempDir,
}

impl ShardedKcp {
    /// Runs `binary sharded --shards=<shards> --secure-port=0 --root-directory=<fresh dir>` plus
    /// `flags` and waits for its summary.
    pub async fn start(binary: &Path, label: &str, shards: u16, flags: &[String]) -> ShardedKcp {
        let dir = temp_dir(label);
        let mut args = vec![
            "sharded".to_owned(),
            format!("--shards={shards}"),
            "--secure-port=0".to_owned(),
            format!("--root-directory={}", dir.path().join("topology").display()),
        ];
        args.extend_from_slice(flags);
        let mut sharded = ShardedKcp {
            process: spawn(binary, &args, dir.path()),
            binary: binary.to_owned(),
            args,
            dir,
        };
        sharded.wait_for_summary(0).await;
        sharded
    }

    /// Stops `kcp sharded` (anything but exit status 0 fails the test) and runs it again on the
    /// same directory; the ports change.
    pub async fn restart(&mut self) {
        let status = self.stop().await;
        assert!(
            status.success(),
            "kcp sharded stopped with {status}\n{}",
            self.output()
        );
        let printed = self.output().len();
        self.process = spawn(&self.binary, &self.args, self.dir.path());
        self.wait_for_summary(printed).await;
    }

    async fn wait_for_summary(&mut self, after: usize) {
        let deadline = Instant::now() + STARTED_WITHIN;
        loop {
            let output = self.output();
            if let Some(status) = self.process.exited() {
                panic!("kcp sharded exited ({status}) while starting:\n{output}");
            }
            if output
                .get(after..)
                .is_some_and(|new| new.contains(SUMMARY_END))
            {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "kcp sharded printed no summary within {STARTED_WITHIN:?}:\n{output}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// `--root-directory` of the topology.
    pub fn directory(&self) -> PathBuf {
        self.dir.path().join("topology")
    }

    /// The admin kubeconfig: a context per shard and `front-proxy` (current).
    pub fn kubeconfig(&self) -> PathBuf {
        self.directory().join("admin.kubeconfig")
    }

    /// The URL and admin credentials of shard `name`.
    pub fn admin(&self, name: &str) -> AdminCredentials {
        AdminCredentials::read_cluster(&self.kubeconfig(), name)
            .unwrap_or_else(|| panic!("no admin kubeconfig:\n{}", self.output()))
    }

    /// The front-proxy's URL (no `/clusters/` suffix) and the credentials its context uses
    /// (`kcp-admin` in `system:kcp:admin`: the proxy drops `system:masters`).
    pub fn front_proxy(&self) -> AdminCredentials {
        let mut credentials =
            AdminCredentials::read_as(&self.kubeconfig(), "front-proxy", "kcp-admin")
                .unwrap_or_else(|| panic!("no admin kubeconfig:\n{}", self.output()));
        if let Some(at) = credentials.server.find("/clusters/") {
            credentials.server.truncate(at);
        }
        credentials
    }

    /// Everything `kcp sharded` printed (every run).
    pub fn output(&self) -> String {
        self.process.log()
    }

    /// The children the last summary lists with a PID, in start order.
    pub fn children(&self) -> Vec<ShardedChild> {
        let output = self.output();
        let summary = output
            .rfind(SUMMARY_START)
            .map_or("", |start| &output[start..]);
        summary
            .lines()
            .skip(1)
            .take_while(|line| line.starts_with("  "))
            .filter_map(|line| {
                let fields: Vec<&str> = line.split_whitespace().collect();
                let pid = fields.get(2)?.strip_prefix("pid=")?.parse().ok()?;
                Some(ShardedChild {
                    name: fields.first()?.to_string(),
                    url: fields.get(1)?.to_string(),
                    pid,
                })
            })
            .collect()
    }

    /// The child called `name`; one that was not printed fails the test.
    pub fn child(&self, name: &str) -> ShardedChild {
        self.children()
            .into_iter()
            .find(|child| child.name == name)
            .unwrap_or_else(|| panic!("{name} not printed:\n{}", self.output()))
    }

    /// `kcp sharded`'s own PID.
    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// SIGTERM, then the exit status.
    pub async fn stop(&mut self) -> ExitStatus {
        self.process.stop(STOP_WITHIN).await
    }

    /// Waits for `kcp sharded` to exit on its own (e.g. after a child died).
    pub async fn wait(&mut self) -> ExitStatus {
        self.process.wait(STOP_WITHIN).await
    }
}

fn spawn(binary: &Path, args: &[String], dir: &Path) -> ChildGuard {
    ChildGuard::spawn(
        "kcp sharded",
        Command::new(binary).args(args).env("RUST_BACKTRACE", "1"),
        &dir.join("sharded.log"),
    )
}
