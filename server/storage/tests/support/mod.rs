//! The conformance suite's harness: one [`Ctx`] per test, whatever the backend behind it.

use std::path::PathBuf;
use std::sync::{Arc, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::StreamExt;
use kcp_storage::embedded::EmbeddedStore;
use kcp_storage::etcd::{EtcdConfig, EtcdStore};
use kcp_storage::{Storage, WatchEvent, WatchStream};
use kcp_testing::EtcdProcess as Etcd;
use tempfile::TempDir;
use tokio::sync::Mutex;

/// Which store a test runs against.
#[derive(Debug, Clone, Copy)]
pub enum Backend {
    Embedded,
    Etcd,
    EtcdTls,
}

/// Whether a test may share its store with other tests. Tests that compact or restart the store
/// change it for everybody, so they get their own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isolation {
    Shared,
    Exclusive,
}

/// The etcd processes tests share while any of them runs; the last test to finish kills it.
static SHARED_ETCD: Mutex<Weak<Etcd>> = Mutex::const_new(Weak::new());
static SHARED_ETCD_TLS: Mutex<Weak<Etcd>> = Mutex::const_new(Weak::new());

/// Guards waiting for a watch event against hanging forever; not a timing assertion.
const EVENT_WITHIN: Duration = Duration::from_secs(30);

/// Where a test's store lives.
enum Home {
    Embedded { _dir: TempDir, path: PathBuf },
    SharedEtcd(Arc<Etcd>),
    OwnEtcd(Box<Etcd>),
}

/// One test's store and the key prefix no other test uses.
pub struct Ctx {
    pub store: Arc<dyn Storage>,
    pub prefix: String,
    home: Home,
}

impl Ctx {
    pub async fn new(backend: Backend, isolation: Isolation, case: &str) -> Ctx {
        let nonce = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let prefix = format!("/conformance/{case}/{nonce}/");
        let home = match (backend, isolation) {
            (Backend::Embedded, _) => {
                let dir = tempfile::tempdir().unwrap();
                // A nested path also proves that missing parent directories are created.
                let path = dir.path().join("nested").join("store.redb");
                Home::Embedded { _dir: dir, path }
            }
            (Backend::Etcd, Isolation::Shared) => {
                Home::SharedEtcd(shared(&SHARED_ETCD, false).await)
            }
            (Backend::EtcdTls, Isolation::Shared) => {
                Home::SharedEtcd(shared(&SHARED_ETCD_TLS, true).await)
            }
            (Backend::Etcd, Isolation::Exclusive) => {
                Home::OwnEtcd(Box::new(Etcd::start(false).await))
            }
            (Backend::EtcdTls, Isolation::Exclusive) => {
                Home::OwnEtcd(Box::new(Etcd::start(true).await))
            }
        };
        let store = open(&home).await;
        Ctx {
            store,
            prefix,
            home,
        }
    }

    /// A key under this test's prefix.
    pub fn key(&self, name: &str) -> String {
        format!("{}{name}", self.prefix)
    }

    /// How to reach this test's etcd, if it runs against one.
    pub fn etcd_config(&self) -> Option<EtcdConfig> {
        match &self.home {
            Home::Embedded { .. } => None,
            Home::SharedEtcd(etcd) => Some(config(etcd)),
            Home::OwnEtcd(etcd) => Some(config(etcd)),
        }
    }

    /// Stops the store the hard way for etcd (kill) or the clean way for the file (close), starts
    /// it again on the same data and reconnects.
    pub async fn restart(&mut self) {
        self.store.close().await.unwrap();
        match &mut self.home {
            Home::Embedded { .. } => {}
            Home::OwnEtcd(etcd) => etcd.restart().await,
            Home::SharedEtcd(_) => panic!("restarting needs Isolation::Exclusive"),
        }
        self.store = open(&self.home).await;
    }
}

async fn shared(slot: &Mutex<Weak<Etcd>>, tls: bool) -> Arc<Etcd> {
    let mut slot = slot.lock().await;
    if let Some(etcd) = slot.upgrade() {
        return etcd;
    }
    let etcd = Arc::new(Etcd::start(tls).await);
    *slot = Arc::downgrade(&etcd);
    etcd
}

async fn open(home: &Home) -> Arc<dyn Storage> {
    match home {
        Home::Embedded { path, .. } => Arc::new(EmbeddedStore::open(path).await.unwrap()),
        Home::SharedEtcd(etcd) => Arc::new(EtcdStore::connect(&config(etcd)).await.unwrap()),
        Home::OwnEtcd(etcd) => Arc::new(EtcdStore::connect(&config(etcd)).await.unwrap()),
    }
}

/// How the etcd backend reaches `etcd`: its client URL and, with TLS, the client certificate.
fn config(etcd: &Etcd) -> EtcdConfig {
    let tls = etcd.tls();
    EtcdConfig {
        servers: vec![etcd.client_url().to_owned()],
        ca_file: tls.map(|files| files.ca.clone()),
        cert_file: tls.map(|files| files.client_cert.clone()),
        key_file: tls.map(|files| files.client_key.clone()),
    }
}

/// The next event of a watch; panics if the stream ends, fails or stays silent for very long.
pub async fn next_event(stream: &mut WatchStream) -> WatchEvent {
    match tokio::time::timeout(EVENT_WITHIN, stream.next()).await {
        Ok(Some(Ok(event))) => event,
        Ok(Some(Err(error))) => panic!("watch failed: {error}"),
        Ok(None) => panic!("watch ended"),
        Err(_) => panic!("no watch event within {EVENT_WITHIN:?}"),
    }
}

/// The next `n` events of a watch.
pub async fn next_events(stream: &mut WatchStream, n: usize) -> Vec<WatchEvent> {
    let mut events = Vec::with_capacity(n);
    for _ in 0..n {
        events.push(next_event(stream).await);
    }
    events
}
