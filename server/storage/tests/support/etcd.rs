//! A real etcd process for the conformance suite: own data dir, free loopback ports, killed by PID.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kcp_storage::etcd::{EtcdConfig, EtcdStore};
use tempfile::TempDir;

use super::pki::write_tls_files;

/// How long a fresh etcd may take to answer; only a guard against hanging forever.
const READY_WITHIN: Duration = Duration::from_secs(60);

/// The etcd binary: `$ETCD_BIN`, else the Debian package's. A missing binary fails the test.
fn binary() -> PathBuf {
    let path =
        std::env::var_os("ETCD_BIN").map_or_else(|| PathBuf::from("/usr/bin/etcd"), PathBuf::from);
    assert!(
        path.is_file(),
        "etcd binary not found at {} (install Debian's etcd-server or set ETCD_BIN): the etcd \
         conformance tests need a real etcd",
        path.display()
    );
    path
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A running etcd; dropping it kills the process.
pub struct Etcd {
    dir: TempDir,
    args: Vec<String>,
    child: Child,
    pub config: EtcdConfig,
}

impl Etcd {
    /// Starts etcd on free ports, with TLS and client-certificate authentication when `tls`, and
    /// waits until it answers.
    pub async fn start(tls: bool) -> Etcd {
        let dir = tempfile::tempdir().unwrap();
        let (client, peer) = (free_port(), free_port());
        let scheme = if tls { "https" } else { "http" };
        let client_url = format!("{scheme}://127.0.0.1:{client}");
        let peer_url = format!("http://127.0.0.1:{peer}");
        let mut args = vec![
            "--name=conformance".to_owned(),
            format!("--data-dir={}", dir.path().join("data").display()),
            format!("--listen-client-urls={client_url}"),
            format!("--advertise-client-urls={client_url}"),
            format!("--listen-peer-urls={peer_url}"),
            format!("--initial-advertise-peer-urls={peer_url}"),
            format!("--initial-cluster=conformance={peer_url}"),
        ];
        let mut config = EtcdConfig {
            servers: vec![client_url],
            ..EtcdConfig::default()
        };
        if tls {
            let files = write_tls_files(dir.path());
            args.extend([
                format!("--cert-file={}", files.server_cert.display()),
                format!("--key-file={}", files.server_key.display()),
                format!("--trusted-ca-file={}", files.ca.display()),
                "--client-cert-auth".to_owned(),
            ]);
            config.ca_file = Some(files.ca);
            config.cert_file = Some(files.client_cert);
            config.key_file = Some(files.client_key);
        }
        let child = spawn(&dir, &args);
        let mut etcd = Etcd {
            dir,
            args,
            child,
            config,
        };
        etcd.wait_ready().await;
        etcd
    }

    /// Kills etcd and starts it again on the same data dir and ports.
    pub async fn restart(&mut self) {
        self.kill();
        self.child = spawn(&self.dir, &self.args);
        self.wait_ready().await;
    }

    fn kill(&mut self) {
        // Kills by the PID we started; the process may already be gone.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    async fn wait_ready(&mut self) {
        let deadline = Instant::now() + READY_WITHIN;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!("etcd exited with {status}:\n{}", self.log());
            }
            match EtcdStore::connect(&self.config).await {
                Ok(_) => return,
                Err(error) if Instant::now() > deadline => {
                    panic!("etcd did not become ready: {error}\n{}", self.log())
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("etcd.log")).unwrap_or_default()
    }
}

fn spawn(dir: &TempDir, args: &[String]) -> Child {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.path().join("etcd.log"))
        .unwrap();
    Command::new(binary())
        .args(args)
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap()
}

impl Drop for Etcd {
    fn drop(&mut self) {
        self.kill();
    }
}
