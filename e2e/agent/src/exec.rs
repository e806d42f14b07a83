//! `kcp-node-agent exec --spec FILE`: the few steps between "a process" and "a container".
//!
//! The agent starts every container (and every exec probe) as this subcommand rather than doing
//! namespace work in a `pre_exec` hook: the agent is a multi-threaded Tokio program, and
//! `unshare(CLONE_NEWNS)` and `setns` into a mount namespace refuse multi-threaded callers, while
//! only async-signal-safe calls are allowed between fork and exec. Here the process is
//! single-threaded and ordinary Rust is fine. It joins the pod's network namespace, gets a private
//! mount and UTS namespace, bind-mounts the volumes at their container paths, sets the hostname,
//! changes directory and `execve`s the program, so the container's PID is this process's PID.
//!
//! Mount points that do not exist are created on the host filesystem (empty directories, or empty
//! files for file sources) before mounting: there is no per-container root filesystem.

use std::ffi::CString;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// What to run and in which namespaces.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ExecSpec {
    pub program: PathBuf,
    pub argv: Vec<String>,
    pub env: Vec<(String, String)>,
    pub workdir: PathBuf,
    /// The pod's network namespace (`/var/run/netns/<name>`).
    #[serde(default)]
    pub netns: Option<PathBuf>,
    /// Set for exec probes: join the network, UTS and mount namespaces of this container process
    /// instead of making new ones.
    #[serde(default)]
    pub join_pid: Option<u32>,
    #[serde(default)]
    pub hostname: Option<String>,
    #[serde(default)]
    pub mounts: Vec<BindMount>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct BindMount {
    pub source: PathBuf,
    pub target: PathBuf,
    #[serde(default)]
    pub read_only: bool,
}

/// Exit status when the container could not be set up (as runtimes report start failures).
pub const SETUP_FAILED: i32 = 128;

#[derive(Debug, thiserror::Error)]
#[error("{step}: {source}")]
pub struct ExecError {
    step: String,
    #[source]
    source: std::io::Error,
}

fn fail(step: impl Into<String>) -> impl FnOnce(std::io::Error) -> ExecError {
    let step = step.into();
    move |source| ExecError { step, source }
}

fn check(result: libc::c_int, step: impl Into<String>) -> Result<(), ExecError> {
    if result == -1 {
        Err(fail(step)(std::io::Error::last_os_error()))
    } else {
        Ok(())
    }
}

fn cstring(text: impl AsRef<[u8]>, what: &str) -> Result<CString, ExecError> {
    CString::new(text.as_ref().to_vec()).map_err(|_| {
        fail(format!("{what} contains a NUL byte"))(std::io::Error::from(
            std::io::ErrorKind::InvalidInput,
        ))
    })
}

fn path_cstring(path: &Path) -> Result<CString, ExecError> {
    cstring(path.as_os_str().as_bytes(), &path.display().to_string())
}

/// Reads the spec and becomes the container; returns only on failure.
pub fn run(spec_file: &Path) -> ExecError {
    let spec = match std::fs::read(spec_file)
        .map_err(fail(format!("reading {}", spec_file.display())))
        .and_then(|bytes| {
            serde_json::from_slice::<ExecSpec>(&bytes).map_err(|e| {
                fail(format!("parsing {}", spec_file.display()))(std::io::Error::other(e))
            })
        }) {
        Ok(spec) => spec,
        Err(error) => return error,
    };
    match become_container(&spec) {
        Ok(never) => match never {},
        Err(error) => error,
    }
}

enum Never {}

fn become_container(spec: &ExecSpec) -> Result<Never, ExecError> {
    if let Some(pid) = spec.join_pid {
        join_namespaces(pid)?;
    } else {
        if let Some(netns) = &spec.netns {
            let file = File::open(netns).map_err(fail(format!("opening {}", netns.display())))?;
            // SAFETY: setns on a namespace file descriptor we own.
            check(
                unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) },
                "joining the pod's network namespace",
            )?;
        }
        // SAFETY: plain syscalls on a single-threaded process.
        check(
            unsafe { libc::unshare(libc::CLONE_NEWNS | libc::CLONE_NEWUTS) },
            "unshare(mount, uts)",
        )?;
        let root = cstring("/", "root")?;
        // SAFETY: null source/fstype/data are allowed for a propagation change.
        check(
            unsafe {
                libc::mount(
                    std::ptr::null(),
                    root.as_ptr(),
                    std::ptr::null(),
                    libc::MS_REC | libc::MS_PRIVATE,
                    std::ptr::null(),
                )
            },
            "making / private",
        )?;
        mount_volumes(&spec.mounts)?;
        if let Some(hostname) = &spec.hostname {
            // SAFETY: pointer and length of a live byte slice.
            check(
                unsafe { libc::sethostname(hostname.as_ptr().cast(), hostname.len()) },
                "sethostname",
            )?;
        }
    }
    std::fs::create_dir_all(&spec.workdir).map_err(fail(format!(
        "creating working directory {}",
        spec.workdir.display()
    )))?;
    std::env::set_current_dir(&spec.workdir)
        .map_err(fail(format!("changing to {}", spec.workdir.display())))?;
    exec(spec)
}

fn join_namespaces(pid: u32) -> Result<(), ExecError> {
    // Open all three first: after joining the mount namespace /proc may be another one.
    let files = ["net", "uts", "mnt"]
        .iter()
        .map(|kind| {
            let path = format!("/proc/{pid}/ns/{kind}");
            File::open(&path)
                .map(|file| (*kind, file))
                .map_err(fail(format!("opening {path}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    for (kind, file) in files {
        let flag = match kind {
            "net" => libc::CLONE_NEWNET,
            "uts" => libc::CLONE_NEWUTS,
            _ => libc::CLONE_NEWNS,
        };
        // SAFETY: setns on a namespace file descriptor we own.
        check(
            unsafe { libc::setns(file.as_raw_fd(), flag) },
            format!("joining {kind} namespace of {pid}"),
        )?;
    }
    Ok(())
}

/// Bind-mounts every volume (parents before children), then makes the read-only ones read-only
/// (a second pass, so a read-only parent does not stop a child's mount point being created).
fn mount_volumes(mounts: &[BindMount]) -> Result<(), ExecError> {
    let mut ordered: Vec<&BindMount> = mounts.iter().collect();
    ordered.sort_by_key(|m| m.target.components().count());
    for mount in &ordered {
        let is_dir = std::fs::metadata(&mount.source)
            .map_err(fail(format!("volume source {}", mount.source.display())))?
            .is_dir();
        create_mount_point(&mount.target, is_dir)?;
        let source = path_cstring(&mount.source)?;
        let target = path_cstring(&mount.target)?;
        // SAFETY: valid C strings; null fstype/data for a bind mount.
        check(
            unsafe {
                libc::mount(
                    source.as_ptr(),
                    target.as_ptr(),
                    std::ptr::null(),
                    libc::MS_BIND | libc::MS_REC,
                    std::ptr::null(),
                )
            },
            format!(
                "bind-mounting {} at {}",
                mount.source.display(),
                mount.target.display()
            ),
        )?;
    }
    for mount in ordered.iter().filter(|m| m.read_only) {
        let target = path_cstring(&mount.target)?;
        // SAFETY: as above; a remount changes only the flags of the bind mount.
        check(
            unsafe {
                libc::mount(
                    std::ptr::null(),
                    target.as_ptr(),
                    std::ptr::null(),
                    libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY,
                    std::ptr::null(),
                )
            },
            format!("making {} read-only", mount.target.display()),
        )?;
    }
    Ok(())
}

fn create_mount_point(target: &Path, is_dir: bool) -> Result<(), ExecError> {
    if is_dir {
        if !target.is_dir() {
            std::fs::create_dir_all(target)
                .map_err(fail(format!("creating mount point {}", target.display())))?;
        }
        return Ok(());
    }
    if target.exists() {
        return Ok(());
    }
    if let Some(parent) = target.parent() {
        std::fs::create_dir_all(parent)
            .map_err(fail(format!("creating mount point {}", parent.display())))?;
    }
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(target)
        .map(drop)
        .map_err(fail(format!("creating mount point {}", target.display())))
}

fn exec(spec: &ExecSpec) -> Result<Never, ExecError> {
    let program = path_cstring(&spec.program)?;
    let argv = spec
        .argv
        .iter()
        .map(|arg| cstring(arg, "an argument"))
        .collect::<Result<Vec<_>, _>>()?;
    let env = spec
        .env
        .iter()
        .map(|(name, value)| cstring(format!("{name}={value}"), "an environment variable"))
        .collect::<Result<Vec<_>, _>>()?;
    let mut argv_ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    argv_ptrs.push(std::ptr::null());
    let mut env_ptrs: Vec<*const libc::c_char> = env.iter().map(|e| e.as_ptr()).collect();
    env_ptrs.push(std::ptr::null());
    // Rust ignores SIGPIPE at start-up and ignored signals survive execve: give the program the
    // default, as a container runtime does, and an empty signal mask.
    // SAFETY: resetting dispositions and the mask of this single-threaded process.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
    }
    // SAFETY: NUL-terminated arrays of pointers into live CStrings.
    unsafe { libc::execve(program.as_ptr(), argv_ptrs.as_ptr(), env_ptrs.as_ptr()) };
    Err(fail(format!("executing {}", spec.program.display()))(
        std::io::Error::last_os_error(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_round_trips() {
        let spec = ExecSpec {
            program: "/bin/sh".into(),
            argv: vec!["sh".into(), "-c".into(), "true".into()],
            env: vec![("A".into(), "1".into())],
            workdir: "/tmp".into(),
            netns: Some("/var/run/netns/x".into()),
            join_pid: None,
            hostname: Some("pod".into()),
            mounts: vec![BindMount {
                source: "/a".into(),
                target: "/b".into(),
                read_only: true,
            }],
        };
        let text = serde_json::to_string(&spec).expect("json");
        assert_eq!(serde_json::from_str::<ExecSpec>(&text).expect("back"), spec);
    }
}
