//! A client's watch through the FrontProxy across scenario 3's rolling upgrade (issue 24:
//! "rolling upgrades of front-proxy and shards keep every client watch alive or resumed";
//! upstream kcp-operator#176). The watcher does what client-go's reflector does: whenever its
//! watch ends (the server's timeout, or the pod it went through replaced), it watches again from
//! the last resourceVersion it saw. Meanwhile a writer creates a ConfigMap every second. Every
//! ConfigMap the writer created must be seen, and no watch may be refused as too old (410 Gone):
//! that would be a resumption that lost events.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::cluster::Cluster;

/// The ConfigMaps of `default` in a workspace, the collection watched and written.
const CONFIG_MAPS: &str = "/api/v1/namespaces/default/configmaps";
/// How long one watch lasts at most (the server ends it; the watcher then watches again).
const WATCH_SECONDS: u32 = 5;
/// How long the watcher may take to see the last ConfigMap once the writer stopped.
const CATCH_UP: Duration = Duration::from_secs(60);

/// What the watcher saw.
#[derive(Debug, Default)]
pub struct Watched {
    /// Names of the ConfigMaps added.
    pub seen: BTreeSet<String>,
    /// Watches started (the first included).
    pub watches: usize,
    /// Watches that ended with an error (a connection broken by the roll) and were resumed.
    pub broken: usize,
}

/// The watcher and the writer, running.
pub struct ResumedWatch {
    stop_writing: Arc<AtomicBool>,
    stop_watching: Arc<AtomicBool>,
    watched: Arc<Mutex<Watched>>,
    watcher: JoinHandle<Result<(), String>>,
    writer: JoinHandle<Vec<String>>,
}

fn lock(watched: &Mutex<Watched>) -> std::sync::MutexGuard<'_, Watched> {
    watched.lock().unwrap_or_else(PoisonError::into_inner)
}

impl ResumedWatch {
    /// Starts watching and writing in `workspace` (`root:<name>`), which `kubeconfig` names
    /// (`kubectl get --raw` takes a path from the server's root, so it is named again).
    pub fn start(kubeconfig: PathBuf, workspace: &str) -> Result<ResumedWatch, String> {
        let client = Cluster::new(&kubeconfig);
        let collection = format!("/clusters/{workspace}{CONFIG_MAPS}");
        let list: Value = serde_json::from_str(&client.run(&["get", "--raw", &collection])?)
            .map_err(|e| format!("listing ConfigMaps: {e}"))?;
        let mut version = list["metadata"]["resourceVersion"]
            .as_str()
            .ok_or("a list without resourceVersion")?
            .to_owned();
        let stop_writing = Arc::new(AtomicBool::new(false));
        let stop_watching = Arc::new(AtomicBool::new(false));
        let watched = Arc::new(Mutex::new(Watched::default()));
        let watcher = {
            let (stop, watched, client) = (
                stop_watching.clone(),
                watched.clone(),
                Cluster::new(&kubeconfig),
            );
            std::thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    lock(&watched).watches += 1;
                    let path = format!(
                        "{collection}?watch=true&resourceVersion={version}&timeoutSeconds={WATCH_SECONDS}"
                    );
                    match client.run(&["get", "--raw", &path, "--request-timeout=30s"]) {
                        Ok(events) => version = follow(&events, version, &watched)?,
                        Err(_) => {
                            lock(&watched).broken += 1;
                            std::thread::sleep(Duration::from_millis(200));
                        }
                    }
                }
                Ok(())
            })
        };
        let writer = {
            let stop = stop_writing.clone();
            std::thread::spawn(move || {
                let client = Cluster::new(&kubeconfig);
                let mut written = Vec::new();
                for n in 0.. {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let name = format!("watched-{n}");
                    let created = client.run(&[
                        "create",
                        "configmap",
                        &name,
                        "-n",
                        "default",
                        "--request-timeout=10s",
                    ]);
                    if created.is_ok() {
                        written.push(name);
                    }
                    std::thread::sleep(Duration::from_secs(1));
                }
                written
            })
        };
        Ok(ResumedWatch {
            stop_writing,
            stop_watching,
            watched,
            watcher,
            writer,
        })
    }

    /// Stops writing, waits until every ConfigMap written was seen, stops watching: what was
    /// written and what the watcher saw.
    pub fn finish(self) -> Result<(Vec<String>, Watched), String> {
        self.stop_writing.store(true, Ordering::SeqCst);
        let written = self.writer.join().map_err(|_| "the writer panicked")?;
        let deadline = Instant::now() + CATCH_UP;
        while Instant::now() < deadline && !self.watcher.is_finished() {
            let all_seen = {
                let watched = lock(&self.watched);
                written.iter().all(|name| watched.seen.contains(name))
            };
            if all_seen {
                break;
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        self.stop_watching.store(true, Ordering::SeqCst);
        self.watcher.join().map_err(|_| "the watcher panicked")??;
        let watched = std::mem::take(&mut *lock(&self.watched));
        let missed: Vec<&String> = written
            .iter()
            .filter(|name| !watched.seen.contains(*name))
            .collect();
        if missed.is_empty() {
            Ok((written, watched))
        } else {
            Err(format!(
                "the watch through the FrontProxy missed {} of {} ConfigMaps created during the upgrade: {missed:?} ({} watches, {} broken)",
                missed.len(),
                written.len(),
                watched.watches,
                watched.broken
            ))
        }
    }
}

/// Takes in the events of one watch: the resourceVersion to watch from next.
fn follow(events: &str, mut version: String, watched: &Mutex<Watched>) -> Result<String, String> {
    for event in serde_json::Deserializer::from_str(events).into_iter::<Value>() {
        let event = event.map_err(|e| format!("a watch event that is not JSON: {e}"))?;
        let object = &event["object"];
        if event["type"] == "ERROR" {
            return Err(format!(
                "the watch from resourceVersion {version} was refused: {object}"
            ));
        }
        if event["type"] == "ADDED"
            && let Some(name) = object["metadata"]["name"].as_str()
        {
            lock(watched).seen.insert(name.to_owned());
        }
        if let Some(next) = object["metadata"]["resourceVersion"].as_str() {
            next.clone_into(&mut version);
        }
    }
    Ok(version)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_move_the_version_and_a_refusal_is_an_error() {
        let watched = Mutex::new(Watched::default());
        let events = r#"{"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"7"}}}
{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"9"}}}"#;
        assert_eq!(follow(events, "5".into(), &watched), Ok("9".to_owned()));
        assert!(lock(&watched).seen.contains("a"));
        let gone = r#"{"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired"}}"#;
        assert!(follow(gone, "9".into(), &watched).is_err());
    }
}
