//! A real etcd process: own data dir, free loopback ports, optionally TLS with client-certificate
//! authentication, stopped by PID.
//!
//! The storage conformance suite and the server's restart tests both need the etcd users run
//! (Debian's `etcd-server`), not a fake, because the point is to hold the backend to etcd's real
//! semantics.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use tempfile::TempDir;

use crate::dir::temp_dir;
use crate::http;
use crate::pki::{TlsFiles, write_tls_files};
use crate::ports::free_port;
use crate::process::ChildGuard;

/// How long a fresh etcd may take to answer; only a guard against hanging forever.
const READY_WITHIN: Duration = Duration::from_secs(60);

/// Fresh ports are tried this often when etcd exits during start (another process may have taken
/// a port between choosing and binding it).
const START_ATTEMPTS: usize = 3;

/// The etcd binary: `$ETCD_BIN`, else the Debian package's. A missing binary fails the test.
fn binary() -> PathBuf {
    let path =
        std::env::var_os("ETCD_BIN").map_or_else(|| PathBuf::from("/usr/bin/etcd"), PathBuf::from);
    assert!(
        path.is_file(),
        "etcd binary not found at {} (install Debian's etcd-server or set ETCD_BIN): these tests \
         need a real etcd",
        path.display()
    );
    path
}

/// A running etcd; dropping it kills the process and removes its data.
pub struct EtcdProcess {
    process: ChildGuard,
    args: Vec<String>,
    client_url: String,
    tls: Option<TlsFiles>,
    dir: TempDir,
}

impl EtcdProcess {
    /// Starts etcd on free ports, with TLS and client-certificate authentication when `tls`, and
    /// waits until it reports itself healthy.
    pub async fn start(tls: bool) -> EtcdProcess {
        let mut attempt = 1;
        loop {
            let mut etcd = EtcdProcess::spawn_fresh(tls);
            match etcd.wait_ready().await {
                Ok(()) => return etcd,
                // Dropping this attempt kills it and removes its directory.
                Err(log) if attempt < START_ATTEMPTS => {
                    eprintln!("etcd exited during start (attempt {attempt}), retrying:\n{log}");
                    attempt += 1;
                }
                Err(log) => panic!("etcd exited during start:\n{log}"),
            }
        }
    }

    /// A new directory, TLS material if asked for, fresh ports and the process started on them.
    fn spawn_fresh(tls: bool) -> EtcdProcess {
        let dir = temp_dir("etcd");
        let tls = tls.then(|| write_tls_files(dir.path()));
        let (client, peer) = (free_port(), free_port());
        let scheme = if tls.is_some() { "https" } else { "http" };
        let client_url = format!("{scheme}://127.0.0.1:{client}");
        let peer_url = format!("http://127.0.0.1:{peer}");
        let mut args = vec![
            "--name=test".to_owned(),
            format!("--data-dir={}", dir.path().join("data").display()),
            format!("--listen-client-urls={client_url}"),
            format!("--advertise-client-urls={client_url}"),
            format!("--listen-peer-urls={peer_url}"),
            format!("--initial-advertise-peer-urls={peer_url}"),
            format!("--initial-cluster=test={peer_url}"),
        ];
        if let Some(files) = &tls {
            args.extend([
                format!("--cert-file={}", files.server_cert.display()),
                format!("--key-file={}", files.server_key.display()),
                format!("--trusted-ca-file={}", files.ca.display()),
                "--client-cert-auth".to_owned(),
            ]);
        }
        EtcdProcess {
            process: spawn(&dir, &args),
            args,
            client_url,
            tls,
            dir,
        }
    }

    /// Kills etcd (SIGKILL, as a crash would) and starts it again on the same data dir and ports.
    pub async fn restart(&mut self) {
        self.process.kill();
        self.process = spawn(&self.dir, &self.args);
        if let Err(log) = self.wait_ready().await {
            panic!("etcd exited during restart:\n{log}");
        }
    }

    /// The client URL (`http://` or `https://127.0.0.1:<port>`).
    pub fn client_url(&self) -> &str {
        &self.client_url
    }

    /// The CA, server and client certificates when etcd runs with TLS.
    pub fn tls(&self) -> Option<&TlsFiles> {
        self.tls.as_ref()
    }

    /// The `kcp start` flags that make kcp use this etcd.
    pub fn kcp_flags(&self) -> Vec<String> {
        let mut flags = vec![format!("--etcd-servers={}", self.client_url)];
        if let Some(files) = &self.tls {
            flags.extend([
                format!("--etcd-cafile={}", files.ca.display()),
                format!("--etcd-certfile={}", files.client_cert.display()),
                format!("--etcd-keyfile={}", files.client_key.display()),
            ]);
        }
        flags
    }

    /// Waits until `/health` says healthy. `Err(log)` when the process exits first; a process that
    /// never gets healthy fails the test.
    async fn wait_ready(&mut self) -> Result<(), String> {
        let client = self.health_client();
        let url = format!("{}/health", self.client_url);
        let deadline = Instant::now() + READY_WITHIN;
        loop {
            if self.process.exited().is_some() {
                return Err(self.process.log_tail());
            }
            if let Ok(response) = client.get(&url).send().await
                && response.status().is_success()
                && let Ok(body) = response.text().await
                && body.contains("true")
            {
                return Ok(());
            }
            assert!(
                Instant::now() < deadline,
                "etcd did not become healthy within {READY_WITHIN:?}\n{}",
                self.process.log_tail()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    fn health_client(&self) -> reqwest::Client {
        let Some(files) = &self.tls else {
            return reqwest::Client::new();
        };
        let read = |path: &PathBuf| {
            std::fs::read(path)
                .unwrap_or_else(|error| panic!("reading {}: {error}", path.display()))
        };
        let identity = [read(&files.client_cert), read(&files.client_key)].concat();
        http::client(&read(&files.ca), Some(&identity))
    }
}

fn spawn(dir: &TempDir, args: &[String]) -> ChildGuard {
    ChildGuard::spawn(
        "etcd",
        Command::new(binary()).args(args),
        &dir.path().join("etcd.log"),
    )
}
