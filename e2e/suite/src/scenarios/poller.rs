//! A client that reads through kubectl every 100 ms while a scenario changes the deployment
//! under it (scenario 3's upgrade, scenario 15's certificate rotation), counting every request
//! and keeping the first failure: what "no failed request while it rolls" is measured with.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

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

/// A client reading `args` with kubectl every 100 ms until stopped.
pub struct Poller {
    stop: Arc<AtomicBool>,
    sent: Arc<AtomicUsize>,
    failed: Arc<AtomicUsize>,
    thread: JoinHandle<Option<String>>,
}

impl Poller {
    pub fn start(kubeconfig: PathBuf, args: &'static [&'static str]) -> Poller {
        let stop = Arc::new(AtomicBool::new(false));
        let sent = Arc::new(AtomicUsize::new(0));
        let failed = Arc::new(AtomicUsize::new(0));
        let thread = {
            let (stop, sent, failed) = (stop.clone(), sent.clone(), failed.clone());
            std::thread::spawn(move || {
                let client = Cluster::new(&kubeconfig);
                let mut first_failure = None;
                while !stop.load(Ordering::SeqCst) {
                    sent.fetch_add(1, Ordering::SeqCst);
                    if let Err(error) = client.run(args) {
                        failed.fetch_add(1, Ordering::SeqCst);
                        first_failure.get_or_insert(error);
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
                first_failure
            })
        };
        Poller {
            stop,
            sent,
            failed,
            thread,
        }
    }

    /// Stops the client: (sent, failed, first failure).
    pub fn finish(self) -> Result<(usize, usize, Option<String>), String> {
        self.stop.store(true, Ordering::SeqCst);
        let first = self
            .thread
            .join()
            .map_err(|_| "a polling client panicked")?;
        Ok((
            self.sent.load(Ordering::SeqCst),
            self.failed.load(Ordering::SeqCst),
            first,
        ))
    }
}
