//! Talking to a cluster the way users do: kubectl (a real peer) with a kubeconfig, JSON output,
//! and bounded waits that fail with the last thing seen.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kcp_testing::Kubectl;
use serde_json::Value;

/// The kubectl release the suite drives (the newest installed one).
pub const KUBECTL_VERSION: &str = "1.33";

/// kubectl against one kubeconfig.
pub struct Cluster {
    kubectl: Kubectl,
}

impl Cluster {
    pub fn new(kubeconfig: &Path) -> Cluster {
        Cluster {
            kubectl: Kubectl::new(KUBECTL_VERSION, kubeconfig),
        }
    }

    pub fn kubeconfig(&self) -> PathBuf {
        self.kubectl.kubeconfig().to_owned()
    }

    /// Runs kubectl; its stdout, or an error with stderr.
    pub fn run(&self, args: &[&str]) -> Result<String, String> {
        let run = self.kubectl.run(args);
        if run.status.success() {
            Ok(run.stdout)
        } else {
            Err(format!(
                "kubectl {}: {}{}",
                args.join(" "),
                run.stderr.trim(),
                run.stdout.trim()
            ))
        }
    }

    /// `kubectl get … -o json`, parsed; `None` when it does not exist.
    pub fn get(&self, args: &[&str]) -> Result<Option<Value>, String> {
        let mut all = vec!["get"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["-o", "json"]);
        let run = self.kubectl.run(&all);
        if run.status.success() {
            serde_json::from_str(&run.stdout)
                .map(Some)
                .map_err(|e| format!("kubectl {}: not JSON: {e}", all.join(" ")))
        } else if run.stderr.contains("NotFound") || run.stderr.contains("not found") {
            Ok(None)
        } else {
            Err(format!("kubectl {}: {}", all.join(" "), run.stderr.trim()))
        }
    }

    /// Starts `kubectl <args>` in the background (a watch); its stdout lines are collected as they
    /// come until the returned [`Watch`] is dropped (which kills it by its PID).
    pub fn watch(&self, args: &[&str]) -> Result<Watch, String> {
        let dir = std::env::var_os("KUBECTL_DIR").map_or_else(
            || PathBuf::from("/usr/lib/google-cloud-sdk/bin"),
            PathBuf::from,
        );
        let binary = dir.join(format!("kubectl.{KUBECTL_VERSION}"));
        let mut child = Command::new(&binary)
            .arg(format!("--kubeconfig={}", self.kubeconfig().display()))
            .args(args)
            .env("HOME", self.kubectl.home())
            .env_remove("KUBECONFIG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("starting {}: {e}", binary.display()))?;
        let stdout = child.stdout.take().ok_or("kubectl without stdout")?;
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Ok(mut lines) = sink.lock() {
                    lines.push(line);
                }
            }
        });
        Ok(Watch { child, lines })
    }

    /// `kubectl apply -f -` of `manifest` (YAML or JSON).
    pub fn apply(&self, manifest: &str) -> Result<String, String> {
        let file = self.kubectl.home().join(format!(
            "manifest-{}.yaml",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or_default()
        ));
        std::fs::write(&file, manifest).map_err(|e| format!("writing {}: {e}", file.display()))?;
        let path = file.display().to_string();
        let out = self.run(&["apply", "--server-side", "--force-conflicts", "-f", &path]);
        let _ = std::fs::remove_file(&file);
        out
    }
}

/// A kubectl running in the background (see [`Cluster::watch`]).
pub struct Watch {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Watch {
    /// Every line printed so far.
    pub fn lines(&self) -> Vec<String> {
        self.lines.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// Whether kubectl is still running (a watch that ended early lost events).
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        // This child only, by its PID; it may have exited already.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Polls `check` every `every` until it answers `Ok` or `within` has passed.
pub fn eventually<T>(
    what: &str,
    within: Duration,
    every: Duration,
    mut check: impl FnMut() -> Result<T, String>,
) -> Result<T, String> {
    let deadline = Instant::now() + within;
    loop {
        match check() {
            Ok(value) => return Ok(value),
            Err(last) if Instant::now() >= deadline => {
                return Err(format!("{what}: not within {within:?}; last: {last}"));
            }
            Err(_) => std::thread::sleep(every),
        }
    }
}

/// The condition `type_` of an object's `status.conditions`.
pub fn condition<'a>(object: &'a Value, type_: &str) -> Option<&'a Value> {
    object
        .pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

/// Whether condition `type_` is `True`.
pub fn is_true(object: &Value, type_: &str) -> bool {
    condition(object, type_).is_some_and(|c| c["status"] == "True")
}
