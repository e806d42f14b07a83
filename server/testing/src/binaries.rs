//! Binaries of other packages in this workspace, built on demand for a test.
//!
//! A test can name its own package's binaries with `env!("CARGO_BIN_EXE_…")`, but not another
//! package's: Cargo has no stable way to depend on a binary. The suites that drive several of this
//! repo's programs together (the server with its kubectl plugins, the end-to-end suite with the
//! server, the operator and the node agent) therefore ask [`workspace_binary`], which builds the
//! programs into the target directory and profile of the running test and returns the binary's
//! path. All [`PROGRAMS`] are built by one `cargo build` (once per test process): Cargo resolves
//! features per invocation, so building them one by one would compile shared dependencies once
//! per feature set, and every suite asking for the same set keeps the result cached.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use crate::process::output_within;

/// Bounds one build (a cold build of a crate and its dependencies on a loaded machine).
const BUILD_WITHIN: Duration = Duration::from_secs(1_500);

/// The packages whose binaries tests run, built together.
pub const PROGRAMS: &[&str] = &[
    "kcp",
    "kcp-operator",
    "kcp-node-agent",
    "kcp-kubectl-plugins",
];

static BUILT: OnceLock<()> = OnceLock::new();

/// `<target>/<profile>` of the running test executable (`<target>/<profile>/deps/<test>-<hash>`).
pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test executable's path");
    let deps = exe.parent().expect("the test executable has a directory");
    let dir = if deps.file_name().is_some_and(|name| name == "deps") {
        deps.parent().expect("deps has a parent")
    } else {
        deps
    };
    dir.to_owned()
}

/// The path of `binary` of workspace package `package` (one of [`PROGRAMS`]), built (once per
/// process, with the others) from the current tree into [`profile_dir`]. When the build fails
/// (someone's edit in progress) a binary already there is used, with Cargo's output printed; with
/// none there the test fails with it.
pub fn workspace_binary(package: &str, binary: &str) -> PathBuf {
    assert!(
        PROGRAMS.contains(&package),
        "{package} is not in kcp_testing::binaries::PROGRAMS"
    );
    let dir = profile_dir();
    BUILT.get_or_init(|| build(&dir));
    let path = dir.join(binary);
    assert!(
        path.is_file(),
        "`cargo build -p {package}` wrote no {}",
        path.display()
    );
    path
}

fn build(dir: &Path) {
    let profile = dir
        .file_name()
        .and_then(|name| name.to_str())
        .unwrap_or("debug")
        .to_owned();
    let target = dir.parent().expect("a target directory").to_owned();
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| OsString::from("cargo"));
    let mut command = Command::new(cargo);
    command
        .args(["build", "--quiet", "--bins"])
        .args(PROGRAMS.iter().flat_map(|package| ["-p", package]))
        .env("CARGO_TARGET_DIR", &target)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    match profile.as_str() {
        "debug" => {}
        "release" => {
            command.arg("--release");
        }
        other => {
            command.args(["--profile", other]);
        }
    }
    let child = command
        .spawn()
        .unwrap_or_else(|error| panic!("starting cargo to build {PROGRAMS:?}: {error}"));
    // On timeout only cargo itself is killed, by its PID.
    let Some(output) = output_within(child, BUILD_WITHIN) else {
        panic!("building {PROGRAMS:?} took longer than {BUILD_WITHIN:?}")
    };
    let output = output.expect("waiting for cargo");
    if !output.status.success() {
        eprintln!(
            "building {PROGRAMS:?} failed ({}); binaries already in {} are used:\n{}",
            output.status,
            dir.display(),
            String::from_utf8_lossy(&output.stderr)
        );
    }
}
