//! The `kcp` binary as a test peer: started with the flags a test names, on its own root
//! directory and a port it picks itself, reached with the admin credentials it writes.
//!
//! Acceptance tests run the real binary rather than the library so that they prove what users get:
//! flag parsing, certificate bootstrap, the kubeconfig on disk, signal handling and the exit status.
//! The binary's path comes from the caller (`env!("CARGO_BIN_EXE_kcp")` in `server/kcp/tests`),
//! because only Cargo knows where it built it.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use kcp_kubeconfig::{Kubeconfig, KubeconfigError};
use serde_json::Value;
use tempfile::TempDir;
use tokio::sync::Mutex;

use crate::dir::temp_dir;
use crate::http::{self, Response, WatchStream};
use crate::identities::CertificateAuthority;
use crate::process::ChildGuard;

/// How long a start (certificates, store, bootstrap, `/readyz`) may take on a loaded machine.
const READY_WITHIN: Duration = Duration::from_secs(60);

/// How long a SIGTERM'd server may take to finish its in-flight work and exit.
const STOP_WITHIN: Duration = Duration::from_secs(60);

/// How long the server's controllers may take to bring an object to the state a test waits for.
const SETTLED_WITHIN: Duration = Duration::from_secs(60);

/// What the admin kubeconfig says: where the server is and the credentials of its admin.
#[derive(Debug, Clone)]
pub struct AdminCredentials {
    /// `https://<host>:<port>` of the `base` cluster (no `/clusters/` suffix).
    pub server: String,
    pub ca_pem: Vec<u8>,
    /// Client certificate then key, PEM, as `reqwest::Identity::from_pem` wants them.
    pub identity_pem: Vec<u8>,
}

impl AdminCredentials {
    /// Reads an admin kubeconfig as `kcp start` writes it; `None` while it does not exist.
    pub fn read(kubeconfig: &Path) -> Option<AdminCredentials> {
        Self::read_cluster(kubeconfig, "base")
    }

    /// Reads the server of `cluster` and the `admin` user of a kubeconfig; `None` while it does
    /// not exist.
    pub fn read_cluster(kubeconfig: &Path, cluster: &str) -> Option<AdminCredentials> {
        Self::read_as(kubeconfig, cluster, "admin")
    }

    /// Reads the server of `cluster` and the credentials of `user` of a kubeconfig; `None` while
    /// it does not exist.
    pub fn read_as(kubeconfig: &Path, cluster: &str, user: &str) -> Option<AdminCredentials> {
        let config = match Kubeconfig::read(kubeconfig) {
            Ok(config) => config,
            Err(KubeconfigError::Read { .. }) => return None,
            Err(error) => panic!("{}: {error}", kubeconfig.display()),
        };
        let dir = kcp_kubeconfig::dir_of(kubeconfig);
        let cluster = config
            .cluster(cluster)
            .unwrap_or_else(|| panic!("the kubeconfig has a {cluster} cluster"));
        let user = config
            .user(user)
            .unwrap_or_else(|| panic!("the kubeconfig has a user {user}"));
        let pem = |material: Result<Option<Vec<u8>>, KubeconfigError>, what: &str| {
            material
                .unwrap_or_else(|error| panic!("{what}: {error}"))
                .unwrap_or_else(|| panic!("the admin kubeconfig has no {what}"))
        };
        Some(AdminCredentials {
            server: cluster.server.clone(),
            ca_pem: pem(cluster.ca_pem(dir), "CA"),
            identity_pem: [
                pem(user.client_certificate_pem(dir), "client certificate"),
                pem(user.client_key_pem(dir), "client key"),
            ]
            .concat(),
        })
    }

    /// A client that trusts the server's CA and presents the admin certificate. Each call builds
    /// a new one: a client's connections belong to the Tokio runtime that opened them, and tests
    /// sharing a server each run their own runtime.
    pub fn client(&self) -> reqwest::Client {
        http::client(&self.ca_pem, Some(&self.identity_pem))
    }

    /// The builder behind [`Self::client`], for tests that need a particular client (e.g. one
    /// that speaks only HTTP/1.1).
    pub fn client_builder(&self) -> reqwest::ClientBuilder {
        http::client_builder(&self.ca_pem, Some(&self.identity_pem))
    }

    /// A client that trusts the server's CA but has no client certificate.
    pub fn anonymous_client(&self) -> reqwest::Client {
        http::client(&self.ca_pem, None)
    }
}

/// Which server of the binary runs, and where its kubeconfig tells how to reach it.
#[derive(Debug, Clone, Copy)]
struct Kind {
    subcommand: &'static str,
    kubeconfig: &'static str,
    cluster: &'static str,
}

const SHARD: Kind = Kind {
    subcommand: "start",
    kubeconfig: "admin.kubeconfig",
    cluster: "base",
};

const CACHE_SERVER: Kind = Kind {
    subcommand: "cache-server",
    kubeconfig: "cache.kubeconfig",
    cluster: "cache",
};

/// A `kcp start` spawned and not yet ready ([`KcpProcess::spawn`]); dropping it kills the
/// process and removes its files.
pub struct StartingKcp {
    process: ChildGuard,
    binary: PathBuf,
    args: Vec<String>,
    dir: TempDir,
    kind: Kind,
}

impl StartingKcp {
    fn spawn(
        kind: Kind,
        binary: &Path,
        label: &str,
        flags: &[String],
        prepare: impl FnOnce(&Path),
    ) -> StartingKcp {
        let dir = temp_dir(label);
        let root = dir.path().join("root");
        std::fs::create_dir_all(&root).expect("creating the root directory");
        prepare(&root);
        let mut args = vec![
            kind.subcommand.to_owned(),
            format!("--root-directory={}", dir.path().join("root").display()),
            "--secure-port=0".to_owned(),
            "--bind-address=127.0.0.1".to_owned(),
        ];
        args.extend_from_slice(flags);
        StartingKcp {
            process: spawn(binary, &args, dir.path()),
            binary: binary.to_owned(),
            args,
            dir,
            kind,
        }
    }

    /// Whether the admin kubeconfig is written (a shard writes it once it serves).
    pub fn wrote_kubeconfig(&self) -> bool {
        kubeconfig_in(self.dir.path(), self.kind).exists()
    }

    /// Everything the process logged so far.
    pub fn log(&self) -> String {
        self.process.log()
    }

    /// The end of the log, for failure messages.
    pub fn log_tail(&self) -> String {
        self.process.log_tail()
    }

    /// Waits until the admin kubeconfig is written and `/readyz` answers 200.
    pub async fn ready(mut self) -> KcpProcess {
        let kubeconfig = kubeconfig_in(self.dir.path(), self.kind);
        let admin = wait_ready(&mut self.process, &kubeconfig, self.kind).await;
        KcpProcess {
            process: self.process,
            binary: self.binary,
            args: self.args,
            admin,
            dir: self.dir,
            kind: self.kind,
        }
    }
}

/// A running `kcp start` (or `kcp cache-server`); dropping it kills the process (SIGKILL by PID)
/// and removes its files.
pub struct KcpProcess {
    process: ChildGuard,
    binary: PathBuf,
    args: Vec<String>,
    admin: AdminCredentials,
    dir: TempDir,
    kind: Kind,
}

impl KcpProcess {
    /// Runs `binary start --root-directory=<fresh dir> --secure-port=0 --bind-address=127.0.0.1`
    /// plus `flags`, and waits until the admin kubeconfig is written and `/readyz` answers 200.
    pub async fn start(binary: &Path, label: &str, flags: &[String]) -> KcpProcess {
        KcpProcess::start_prepared(binary, label, flags, |_| {}).await
    }

    /// Like [`Self::start`], with `prepare` called on the (still empty) root directory before
    /// the process starts, e.g. to place CAs it then reuses instead of generating its own.
    pub async fn start_prepared(
        binary: &Path,
        label: &str,
        flags: &[String],
        prepare: impl FnOnce(&Path),
    ) -> KcpProcess {
        Self::start_kind(SHARD, binary, label, flags, prepare).await
    }

    /// Like [`Self::start`] for `binary cache-server`: ready once `cache.kubeconfig` (its
    /// `system:masters` credentials, the `admin` here) is written and `/readyz` answers 200.
    pub async fn start_cache_server(binary: &Path, label: &str, flags: &[String]) -> KcpProcess {
        Self::start_kind(CACHE_SERVER, binary, label, flags, |_| {}).await
    }

    /// Runs `binary start` like [`Self::start`] without waiting for it to be ready, for a shard
    /// that waits for something before it serves; [`StartingKcp::ready`] waits.
    pub fn spawn(binary: &Path, label: &str, flags: &[String]) -> StartingKcp {
        StartingKcp::spawn(SHARD, binary, label, flags, |_| {})
    }

    async fn start_kind(
        kind: Kind,
        binary: &Path,
        label: &str,
        flags: &[String],
        prepare: impl FnOnce(&Path),
    ) -> KcpProcess {
        StartingKcp::spawn(kind, binary, label, flags, prepare)
            .ready()
            .await
    }

    /// The root directory (`--root-directory`): certificates, the admin kubeconfig, the store.
    pub fn root_directory(&self) -> PathBuf {
        self.dir.path().join("root")
    }

    pub fn kubeconfig(&self) -> PathBuf {
        kubeconfig_in(self.dir.path(), self.kind)
    }

    pub fn admin(&self) -> &AdminCredentials {
        &self.admin
    }

    /// The server's generated client CA: certificates it signs authenticate as CN / O.
    pub fn client_ca(&self) -> CertificateAuthority {
        let root = self.root_directory();
        CertificateAuthority::read(&root.join("client-ca.crt"), &root.join("client-ca.key"))
    }

    /// The flags of a `kcp front-proxy` in front of this server alone, on `127.0.0.1:<port>`:
    /// this server's serving certificate and client CA, its admin kubeconfig to watch the
    /// shard, `mapping_file`, and `proxy_dir` as its root directory.
    pub fn front_proxy_args(
        &self,
        proxy_dir: &Path,
        port: u16,
        mapping_file: &Path,
    ) -> Vec<String> {
        let root = self.root_directory();
        let kubeconfig = self.kubeconfig();
        vec![
            "front-proxy".to_owned(),
            format!("--root-directory={}", proxy_dir.display()),
            "--bind-address=127.0.0.1".to_owned(),
            format!("--secure-port={port}"),
            format!("--tls-cert-file={}", root.join("apiserver.crt").display()),
            format!(
                "--tls-private-key-file={}",
                root.join("apiserver.key").display()
            ),
            format!("--client-ca-file={}", root.join("client-ca.crt").display()),
            format!("--mapping-file={}", mapping_file.display()),
            format!("--root-kubeconfig={}", kubeconfig.display()),
            format!("--shards-kubeconfig={}", kubeconfig.display()),
        ]
    }

    /// `https://<host>:<port>` of the running server.
    pub fn base_url(&self) -> &str {
        &self.admin.server
    }

    /// The URL of `path` (which starts with `/`) on this server.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.admin.server)
    }

    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// GET `path` as the admin.
    pub async fn get(&self, path: &str) -> Response {
        Response::send(self.admin.client().get(self.url(path))).await
    }

    /// Sends `body` with `method` and `content_type` to `path` as the admin.
    pub async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        content_type: &str,
        body: impl Into<reqwest::Body>,
    ) -> Response {
        let request = self
            .admin
            .client()
            .request(method, self.url(path))
            .header(reqwest::header::CONTENT_TYPE, content_type)
            .body(body);
        Response::send(request).await
    }

    /// Sends `body` as JSON with `method` to `path` as the admin.
    pub async fn send_json(&self, method: reqwest::Method, path: &str, body: &Value) -> Response {
        self.send(method, path, "application/json", body.to_string())
            .await
    }

    /// Opens a watch (`path` carries `watch=1` and whatever else) as the admin; anything but 200
    /// fails the test.
    pub async fn watch(&self, path: &str) -> WatchStream {
        WatchStream::open(self.admin.client().get(self.url(path))).await
    }

    /// GETs `path` until `done` holds for the answer and returns that answer; a server that does
    /// not get there within a generous bound fails the test (quoting the last answer).
    pub async fn wait_for(
        &self,
        what: &str,
        path: &str,
        done: impl Fn(&Response) -> bool,
    ) -> Response {
        let deadline = Instant::now() + SETTLED_WITHIN;
        loop {
            let response = self.get(path).await;
            if done(&response) {
                return response;
            }
            assert!(
                Instant::now() < deadline,
                "{what}: not within {SETTLED_WITHIN:?}; GET {path} answered {}: {}",
                response.status,
                response.text()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until the object at `path` has the status condition `condition` with status `True`
    /// and returns the object.
    pub async fn wait_for_condition(&self, path: &str, condition: &str) -> Value {
        self.wait_for_condition_status(path, condition, "True")
            .await
    }

    /// Waits until the object at `path` has the status condition `condition` with status
    /// `status` (`True`, `False`, `Unknown`) and returns the object.
    pub async fn wait_for_condition_status(
        &self,
        path: &str,
        condition: &str,
        status: &str,
    ) -> Value {
        let what = format!("condition {condition}={status}");
        self.wait_for(&what, path, |response| {
            response.status == 200
                && response.json()["status"]["conditions"]
                    .as_array()
                    .is_some_and(|conditions| {
                        conditions
                            .iter()
                            .any(|c| c["type"] == condition && c["status"] == status)
                    })
        })
        .await
        .json()
    }

    /// Creates namespace `name` in logical cluster `cluster` (one that exists already, e.g. made
    /// by a test sharing the server, is kept).
    pub async fn create_namespace(&self, cluster: &str, name: &str) {
        let created = self
            .send_json(
                reqwest::Method::POST,
                &format!("/clusters/{cluster}/api/v1/namespaces"),
                &serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}),
            )
            .await;
        assert!(
            created.status == 201 || created.status == 409,
            "creating namespace {name} in {cluster}: {} {}",
            created.status,
            created.text()
        );
    }

    /// Creates the CustomResourceDefinition `crd` in logical cluster `cluster` (one that exists
    /// already, e.g. made by a test sharing the server, is kept) and waits until it is
    /// `Established`; returns it.
    pub async fn install_crd(&self, cluster: &str, crd: &Value) -> Value {
        let collection =
            format!("/clusters/{cluster}/apis/apiextensions.k8s.io/v1/customresourcedefinitions");
        let created = self
            .send_json(reqwest::Method::POST, &collection, crd)
            .await;
        assert!(
            created.status == 201 || created.status == 409,
            "creating CRD {} in {cluster}: {} {}",
            crd["metadata"]["name"],
            created.status,
            created.text()
        );
        let name = crd["metadata"]["name"].as_str().expect("a CRD name");
        self.wait_for_condition(&format!("{collection}/{name}"), "Established")
            .await
    }

    /// Sends SIGTERM without waiting (to watch what the server does while it shuts down).
    pub fn terminate(&mut self) {
        self.process.terminate();
    }

    /// Waits for the process to exit after [`Self::terminate`].
    pub async fn wait(&mut self) -> ExitStatus {
        self.process.wait(STOP_WITHIN).await
    }

    /// SIGTERM, then the exit status.
    pub async fn stop(&mut self) -> ExitStatus {
        self.process.stop(STOP_WITHIN).await
    }

    /// Waits for the exit after [`Self::terminate`]; anything but exit status 0 fails the test.
    pub async fn wait_for_clean_exit(&mut self) {
        let status = self.wait().await;
        assert!(
            status.success(),
            "kcp exited with {status} on SIGTERM\n{}",
            self.log_tail()
        );
    }

    /// SIGTERM; anything but exit status 0 fails the test.
    pub async fn stop_cleanly(&mut self) {
        self.terminate();
        self.wait_for_clean_exit().await;
    }

    /// Stops the server (a shutdown that does not exit 0 fails the test) and starts it again with
    /// the same flags on the same root directory. It picks a new port, so re-read [`Self::url`].
    pub async fn restart(&mut self) {
        self.stop_cleanly().await;
        self.start_again().await;
    }

    /// Like [`Self::restart`], with `flags` added to the server's flags from this run on.
    pub async fn restart_with(&mut self, flags: &[&str]) {
        self.stop_cleanly().await;
        self.args.extend(flags.iter().map(|flag| flag.to_string()));
        self.start_again().await;
    }

    /// SIGKILL by PID, as a crash: nothing is shut down gracefully.
    pub fn kill(&mut self) {
        self.process.kill();
    }

    /// Starts the stopped (or killed) server again with the same flags on the same root
    /// directory and waits until it is ready.
    pub async fn start_again(&mut self) {
        let kubeconfig = self.kubeconfig();
        // The file from the last run names the old port; wait for the new run to write its own.
        if kubeconfig.exists() {
            std::fs::remove_file(&kubeconfig).expect("removing the previous admin kubeconfig");
        }
        self.process = spawn(&self.binary, &self.args, self.dir.path());
        self.admin = wait_ready(&mut self.process, &kubeconfig, self.kind).await;
    }

    /// The server's log (all runs), for failure messages.
    pub fn log_tail(&self) -> String {
        self.process.log_tail()
    }

    /// Everything the server logged (all runs).
    pub fn log(&self) -> String {
        self.process.log()
    }
}

fn kubeconfig_in(dir: &Path, kind: Kind) -> PathBuf {
    dir.join("root").join(kind.kubeconfig)
}

fn spawn(binary: &Path, args: &[String], dir: &Path) -> ChildGuard {
    ChildGuard::spawn(
        "kcp",
        Command::new(binary).args(args).env("RUST_BACKTRACE", "1"),
        &dir.join("kcp.log"),
    )
}

/// Waits for the kubeconfig (written once serving) and then for `/readyz` to answer 200.
async fn wait_ready(process: &mut ChildGuard, kubeconfig: &Path, kind: Kind) -> AdminCredentials {
    let deadline = Instant::now() + READY_WITHIN;
    loop {
        if let Some(status) = process.exited() {
            panic!(
                "kcp exited with {status} during start\n{}",
                process.log_tail()
            );
        }
        if let Some(admin) = AdminCredentials::read_cluster(kubeconfig, kind.cluster)
            && let Ok(response) = admin
                .client()
                .get(format!("{}/readyz", admin.server))
                .send()
                .await
            && response.status().is_success()
        {
            return admin;
        }
        assert!(
            Instant::now() < deadline,
            "kcp was not ready within {READY_WITHIN:?}\n{}",
            process.log_tail()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// One server shared by the tests of a file that do not disturb each other: the first test to ask
/// starts it, and it is killed when the last test holding it finishes (a static is never dropped,
/// so the slot keeps only a weak reference). Tests that run one after another may each get a fresh
/// server; tests must not rely on what an earlier test left.
pub struct SharedKcp {
    binary: &'static str,
    label: &'static str,
    slot: Mutex<Weak<KcpProcess>>,
}

impl SharedKcp {
    /// A server of `binary` (`env!("CARGO_BIN_EXE_kcp")`) started without extra flags, its
    /// directory named after `label`.
    pub const fn new(binary: &'static str, label: &'static str) -> SharedKcp {
        SharedKcp {
            binary,
            label,
            slot: Mutex::const_new(Weak::new()),
        }
    }

    /// The running shared server, started if none runs.
    pub async fn get(&self) -> Arc<KcpProcess> {
        let mut slot = self.slot.lock().await;
        if let Some(kcp) = slot.upgrade() {
            return kcp;
        }
        let kcp = Arc::new(KcpProcess::start(Path::new(self.binary), self.label, &[]).await);
        *slot = Arc::downgrade(&kcp);
        kcp
    }
}
