//! Container logs as kubelet keeps them, so `kubectl logs` can ask for `--timestamps`, `--since`
//! and `--previous`: every line of a container's stdout and stderr is stamped when the agent reads
//! it and appended, in the CRI log format (`<RFC3339Nano time> <stdout|stderr> <F|P> <text>`), to
//! one file per run of the container (`<pod dir>/logs/<container>/<restart count>.log`, as
//! kubelet's `/var/log/pods/.../<container>/<n>.log`). The plain `<pod dir>/<container>.log` the
//! agent always wrote (every run's output, unstamped) gets the same bytes.
//!
//! A line longer than [`MAX_LINE`] is cut into partial (`P`) entries, as the CRI runtimes do; a
//! reader joins them again.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use tokio::io::{AsyncRead, AsyncReadExt as _};

/// The longest entry written; longer lines are split into partial entries (CRI runtimes: 16 KiB).
pub const MAX_LINE: usize = 16 * 1024;

/// Which output a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

impl Stream {
    fn as_str(self) -> &'static str {
        match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        }
    }
}

/// Where one run of a container logs.
#[derive(Debug, Clone)]
pub struct LogFiles {
    /// Every run's output as written (`<pod dir>/<container>.log`).
    pub plain: PathBuf,
    /// This run's stamped entries.
    pub run: PathBuf,
}

/// The directory of a container's run logs.
pub fn runs_dir(pod_dir: &Path, container: &str) -> PathBuf {
    pod_dir.join("logs").join(container)
}

/// The stamped log of run `run` (0 for the first start, then the restart count).
pub fn run_log(pod_dir: &Path, container: &str, run: u32) -> PathBuf {
    runs_dir(pod_dir, container).join(format!("{run}.log"))
}

/// Removes the run logs of a container (a new pod of the same name starts without them).
pub fn forget_runs(pod_dir: &Path, container: &str) {
    let dir = runs_dir(pod_dir, container);
    if let Err(error) = std::fs::remove_dir_all(&dir)
        && error.kind() != std::io::ErrorKind::NotFound
    {
        tracing::debug!(dir = %dir.display(), %error, "removing old run logs");
    }
}

/// The runs of a container that have a log, oldest first.
pub fn runs(pod_dir: &Path, container: &str) -> Vec<u32> {
    let mut runs: Vec<u32> = std::fs::read_dir(runs_dir(pod_dir, container))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            entry
                .file_name()
                .to_str()?
                .strip_suffix(".log")?
                .parse()
                .ok()
        })
        .collect();
    runs.sort_unstable();
    runs
}

/// One entry in the CRI format, newline included.
pub fn entry(time: jiff::Timestamp, stream: Stream, partial: bool, text: &[u8]) -> Vec<u8> {
    let tag = if partial { "P" } else { "F" };
    let mut line = format!("{time} {} {tag} ", stream.as_str()).into_bytes();
    line.extend_from_slice(text);
    line.push(b'\n');
    line
}

/// Copies one output stream of a container into its log files until the stream ends (every
/// process holding it has exited). Each entry is one `write` on files opened for appending, so
/// stdout and stderr copied at the same time interleave by whole lines.
pub async fn copy(mut output: impl AsyncRead + Unpin, stream: Stream, files: LogFiles) {
    let open = |path: &Path| {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
    };
    let (mut plain, mut run) = match (open(&files.plain), open(&files.run)) {
        (Ok(plain), Ok(run)) => (plain, run),
        (Err(error), _) | (_, Err(error)) => {
            tracing::warn!(log = %files.run.display(), %error, "opening a container log");
            return;
        }
    };
    let mut pending: Vec<u8> = Vec::new();
    let mut buffer = vec![0u8; 8192];
    loop {
        let read = match output.read(&mut buffer).await {
            Ok(0) | Err(_) => break,
            Ok(read) => read,
        };
        pending.extend_from_slice(&buffer[..read]);
        let now = jiff::Timestamp::now();
        let mut written = 0;
        while let Some(end) = next_entry(&pending[written..]) {
            let piece = &pending[written..written + end.len];
            let text = piece.strip_suffix(b"\n").unwrap_or(piece);
            let wrote = plain
                .write_all(piece)
                .and_then(|()| run.write_all(&entry(now, stream, end.partial, text)));
            if let Err(error) = wrote {
                tracing::debug!(log = %files.run.display(), %error, "writing a container log");
            }
            written += end.len;
        }
        pending.drain(..written);
    }
    if !pending.is_empty() {
        let wrote = plain
            .write_all(&pending)
            .and_then(|()| run.write_all(&entry(jiff::Timestamp::now(), stream, false, &pending)));
        if let Err(error) = wrote {
            tracing::debug!(log = %files.run.display(), %error, "writing a container log");
        }
    }
}

/// The length of the next entry at the start of `pending`: a whole line (newline included), or
/// [`MAX_LINE`] bytes of a longer one (partial); `None` while a short line is still incomplete.
struct EntryEnd {
    len: usize,
    partial: bool,
}

fn next_entry(pending: &[u8]) -> Option<EntryEnd> {
    match pending.iter().position(|&b| b == b'\n') {
        Some(newline) if newline < MAX_LINE => Some(EntryEnd {
            len: newline + 1,
            partial: false,
        }),
        _ if pending.len() >= MAX_LINE => Some(EntryEnd {
            len: MAX_LINE,
            partial: true,
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_cri_lines() {
        let time: jiff::Timestamp = "2026-01-02T03:04:05.123456789Z".parse().unwrap();
        assert_eq!(
            entry(time, Stream::Stderr, false, b"boom"),
            b"2026-01-02T03:04:05.123456789Z stderr F boom\n"
        );
        assert_eq!(
            entry(time, Stream::Stdout, true, b"ab"),
            b"2026-01-02T03:04:05.123456789Z stdout P ab\n"
        );
    }

    #[test]
    fn lines_end_at_newlines_or_are_cut_when_too_long() {
        assert_eq!(next_entry(b"abc").map(|e| e.len), None);
        let whole = next_entry(b"ab\ncd").unwrap();
        assert_eq!((whole.len, whole.partial), (3, false));
        let long = vec![b'x'; MAX_LINE + 5];
        let cut = next_entry(&long).unwrap();
        assert_eq!((cut.len, cut.partial), (MAX_LINE, true));
    }

    #[tokio::test]
    async fn copy_writes_both_files() {
        let dir = tempfile::tempdir().unwrap();
        let files = LogFiles {
            plain: dir.path().join("c.log"),
            run: dir.path().join("0.log"),
        };
        copy(&b"one\ntwo"[..], Stream::Stdout, files.clone()).await;
        assert_eq!(std::fs::read(&files.plain).unwrap(), b"one\ntwo");
        let run = std::fs::read_to_string(&files.run).unwrap();
        let lines: Vec<&str> = run.lines().collect();
        assert_eq!(lines.len(), 2);
        assert!(lines[0].ends_with(" stdout F one"), "{run}");
        assert!(lines[1].ends_with(" stdout F two"), "{run}");
    }

    #[test]
    fn runs_are_listed_in_order() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(runs_dir(dir.path(), "c")).unwrap();
        for run in [10, 2, 0] {
            std::fs::write(run_log(dir.path(), "c", run), "").unwrap();
        }
        assert_eq!(runs(dir.path(), "c"), vec![0, 2, 10]);
        assert!(runs(dir.path(), "missing").is_empty());
    }
}
