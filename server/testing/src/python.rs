//! The Python `kubernetes` client, an independent implementation of Kubernetes' wire formats
//! that the tests run against the server (watches, pod streams): installed once into a virtual
//! environment with pip (python3-venv from Debian, the package from PyPI).

/// The Python client release the tests install (pinned, so runs are repeatable).
pub const PYTHON_KUBERNETES: &str = "37.0.2";

/// A virtual environment with the Python `kubernetes` client, made once under the target
/// directory (next to the test binaries); returns its `python`. It is built aside and renamed into
/// place (a venv's `bin/python` finds its packages relative to itself), so a half-made one is never
/// used.
pub fn with_kubernetes() -> std::path::PathBuf {
    use std::process::Command;
    let dir = crate::binaries::profile_dir().join(format!("python-kubernetes-{PYTHON_KUBERNETES}"));
    let python = dir.join("bin/python");
    if dir.join(".installed").is_file() {
        return python;
    }
    let staging = dir.with_extension(format!("tmp-{}", std::process::id()));
    let run = |command: &mut Command, what: &str| {
        let output = command
            .output()
            .unwrap_or_else(|error| panic!("{what}: {error}"));
        assert!(
            output.status.success(),
            "{what}: {}\n{}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    };
    let _ = std::fs::remove_dir_all(&staging);
    run(
        Command::new("python3").args(["-m", "venv"]).arg(&staging),
        "python3 -m venv",
    );
    run(
        Command::new(staging.join("bin/python")).args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            &format!("kubernetes=={PYTHON_KUBERNETES}"),
        ]),
        "pip install kubernetes",
    );
    std::fs::write(staging.join(".installed"), PYTHON_KUBERNETES).expect("marking the venv");
    let _ = std::fs::remove_dir_all(&dir);
    if std::fs::rename(&staging, &dir).is_err() {
        // Another test process got there first.
        let _ = std::fs::remove_dir_all(&staging);
    }
    python
}
