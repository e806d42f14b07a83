//! The archive in a real containerd, the way `kind load image-archive` feeds it to a node
//! (`ctr images import --all-platforms --digests --snapshotter=... -`), then run by runc.
//!
//! `ctr` cannot import without a daemon, so this test starts a private containerd (own root,
//! state and socket in a temp dir, CRI plugin off) and stops it again. That needs root, the
//! `containerd` and `runc` packages and a kernel that lets runc create namespaces, which not every
//! machine grants, so the test is opt-in:
//! `apt-get install -y containerd && cargo test -p kcp-images --test containerd -- --ignored`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kcp_images::oci::{self, ImageSpec};

const NAMESPACE: &str = "kcp-images-test";

/// The private daemon; killed (by its own pid) when dropped.
struct Containerd {
    child: Child,
    socket: PathBuf,
}

impl Drop for Containerd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Containerd {
    fn start(dir: &Path) -> Self {
        let socket = dir.join("containerd.sock");
        let config = dir.join("config.toml");
        std::fs::write(
            &config,
            format!(
                "version = 2\nroot = {root:?}\nstate = {state:?}\n\
                 disabled_plugins = [\"io.containerd.grpc.v1.cri\"]\n\
                 [grpc]\n  address = {sock:?}\n[ttrpc]\n  address = \"{sock}.ttrpc\"\n",
                root = dir.join("root"),
                state = dir.join("state"),
                sock = socket.display().to_string(),
            ),
        )
        .unwrap();
        let log = std::fs::File::create(dir.join("containerd.log")).unwrap();
        let child = Command::new("containerd")
            .arg("--config")
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|err| {
                panic!("containerd is required ({err}): apt-get install -y containerd")
            });
        let daemon = Self { child, socket };
        let deadline = Instant::now() + Duration::from_secs(20);
        while !daemon.ctr(&["version"]).status.success() {
            assert!(
                Instant::now() < deadline,
                "containerd did not come up: {}",
                std::fs::read_to_string(dir.join("containerd.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        daemon
    }

    fn ctr_command(&self, args: &[&str]) -> Command {
        let mut command = Command::new("ctr");
        command
            .arg("--address")
            .arg(&self.socket)
            .args(["--namespace", NAMESPACE])
            .args(args);
        command
    }

    fn ctr(&self, args: &[&str]) -> std::process::Output {
        self.ctr_command(args).output().unwrap()
    }
}

#[test]
#[ignore = "needs root, containerd and runc: cargo test -p kcp-images --test containerd -- --ignored"]
fn kind_style_import_then_run() {
    let dir = tempfile::tempdir().unwrap();
    // `id` shows that the image's user and its /etc/passwd took effect.
    let spec = ImageSpec {
        repository: "ghcr.io/kcp-rs/kcp".into(),
        tag: "containerd-test".into(),
        binary: PathBuf::from("/usr/bin/id"),
        name: "kcp".into(),
        commands: Vec::new(),
        ca_bundle: None,
        source_date_epoch: 0,
        source_url: kcp_images::DEFAULT_SOURCE.into(),
    };
    let archive = oci::write_archive(&spec, &dir.path().join("kcp.tar")).unwrap();
    let daemon = Containerd::start(dir.path());

    let import = daemon
        .ctr_command(&[
            "images",
            "import",
            "--all-platforms",
            "--digests",
            "--snapshotter=native",
            "-",
        ])
        .stdin(std::fs::File::open(&archive.path).unwrap())
        .output()
        .unwrap();
    assert!(
        import.status.success(),
        "{}",
        String::from_utf8_lossy(&import.stderr)
    );

    let list = daemon.ctr(&["images", "ls"]);
    let list = String::from_utf8_lossy(&list.stdout);
    let line = list
        .lines()
        .find(|l| l.starts_with("ghcr.io/kcp-rs/kcp:containerd-test "))
        .unwrap_or_else(|| panic!("image not named by its reference:\n{list}"));
    assert!(line.contains(&archive.manifest_digest), "{line}");

    let run = daemon.ctr(&[
        "run",
        "--rm",
        "--snapshotter",
        "native",
        "ghcr.io/kcp-rs/kcp:containerd-test",
        "kcp-images-test-run",
    ]);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&run.stdout).trim(),
        "uid=65532(nonroot) gid=65532(nonroot) groups=65532(nonroot)"
    );
}
