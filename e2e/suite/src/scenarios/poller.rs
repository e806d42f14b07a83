//! A client that reads through kubectl every 100 ms while a scenario changes the deployment
//! under it (scenario 3's upgrade, scenario 15's certificate rotation), counting every request
//! and keeping each failure with when it began and how long it took: what "no failed request
//! while it rolls" is measured with, and where a failure is looked for when it is not met.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use crate::cluster::Cluster;

/// What the pollers of a workspace through the FrontProxy read: its ConfigMaps in `default`,
/// each request bounded by kubectl's 10 s timeout.
pub const READ_CONFIG_MAPS: &[&str] = &[
    "get",
    "configmaps",
    "-n",
    "default",
    "--request-timeout=10s",
];

/// One failed request: when it began (wall clock, to match the pods' logs), how long it took,
/// and kubectl's error.
#[derive(Debug, Clone)]
pub struct Failure {
    pub began: SystemTime,
    pub took: Duration,
    pub error: String,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let since_epoch = self
            .began
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default();
        let of_day = since_epoch.as_secs() % 86_400;
        write!(
            f,
            "began {:02}:{:02}:{:02}.{:03} UTC, took {:.1}s: {}",
            of_day / 3600,
            of_day / 60 % 60,
            of_day % 60,
            since_epoch.subsec_millis(),
            self.took.as_secs_f64(),
            self.error.trim()
        )
    }
}

/// What a client saw: how many requests it sent and each one that failed.
#[derive(Debug, Default)]
pub struct Polled {
    pub sent: usize,
    pub failures: Vec<Failure>,
}

impl Polled {
    pub fn failed(&self) -> usize {
        self.failures.len()
    }

    /// Every failure, one a line, for the narrator and error messages.
    pub fn describe_failures(&self) -> String {
        self.failures
            .iter()
            .map(|failure| format!("\n  {failure}"))
            .collect()
    }
}

/// A client reading `args` with kubectl every 100 ms until stopped.
pub struct Poller {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Polled>,
}

impl Poller {
    pub fn start(kubeconfig: PathBuf, args: &'static [&'static str]) -> Poller {
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let client = Cluster::new(&kubeconfig);
                let mut polled = Polled::default();
                while !stop.load(Ordering::SeqCst) {
                    polled.sent += 1;
                    let (began, clock) = (SystemTime::now(), Instant::now());
                    if let Err(error) = client.run(args) {
                        polled.failures.push(Failure {
                            began,
                            took: clock.elapsed(),
                            error,
                        });
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
                polled
            })
        };
        Poller { stop, thread }
    }

    /// Stops the client: what it saw.
    pub fn finish(self) -> Result<Polled, String> {
        self.stop.store(true, Ordering::SeqCst);
        self.thread
            .join()
            .map_err(|_| "a polling client panicked".into())
    }
}
