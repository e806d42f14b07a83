//! What `kubectl attach` reaches of the agent's containers: their output from the moment of
//! attaching, read from the current run's log ([`crate::container_log`]) as it is written, on
//! stdout or stderr as the container wrote it (a container with a terminal has only stdout), so
//! that every session sees the same output, until the run ends (then the exchange ends with
//! `Success`, as attaching to a container that exits does); and, as kubelet's CRI attach,
//! the container's own stdin and terminal ([`crate::container_input`]): `-i` writes into the
//! stdin of a container started with `stdin: true`, and a session with a TTY sets the size of
//! the terminal of a container started with `tty: true`. Asking for stdin of a container without
//! `stdin: true` is refused before the upgrade (400).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use k8s_openapi::api::core::v1::Pod;
use tokio::sync::mpsc;

use crate::container_input::InputSpec;
use crate::container_log;
use crate::context::Ctx;
use crate::exec_process::{Event, Running};
use crate::kubelet_exec::Start;
use crate::kubelet_logs::{container_spec, run_goes_on};
use crate::log_reader::{parse_entry, read_from};
use crate::remote_command::ExecOptions;

/// How often the log is checked for more output.
const POLL: Duration = Duration::from_millis(100);

/// The events of one CRI log line (with its newline), if it is one.
fn event(line: &[u8]) -> Option<Event> {
    let entry = parse_entry(line.strip_suffix(b"\n").unwrap_or(line))?;
    let mut text = entry.text.to_vec();
    if !entry.partial {
        text.push(b'\n');
    }
    let data = Bytes::from(text);
    Some(match entry.stream {
        b"stderr" => Event::Stderr(data),
        _ => Event::Stdout(data),
    })
}

/// How an attach session to the container whose main process is `pid` starts, or why it is
/// refused.
pub fn start(
    ctx: &Arc<Ctx>,
    found: &Pod,
    target: (&str, &str, &str),
    pid: u32,
    options: &ExecOptions,
) -> Result<Start, String> {
    let (namespace, pod, container) = target;
    let spec = container_spec(found, container)
        .map(InputSpec::of)
        .unwrap_or_default();
    if options.stdin && !spec.stdin {
        return Err(format!(
            "container {container} in pod {pod} was not started with stdin: true, it has no stdin to attach to"
        ));
    }
    let pod_dir = ctx.settings.pod_dir(namespace, pod);
    let Some(&run) = container_log::runs(&pod_dir, container).last() else {
        return Err(format!("container not found ({container:?})"));
    };
    let file = container_log::run_log(&pod_dir, container, run);
    let goes_on = run_goes_on(ctx, namespace, pod, container, run);
    let input = ctx.container_inputs.get(pid);
    Ok(Box::new(move |options: &ExecOptions| {
        let stdin = input
            .as_ref()
            .filter(|_| options.stdin)
            .and_then(|input| input.session_stdin());
        let resize = input
            .as_ref()
            .filter(|_| options.tty)
            .and_then(|input| input.resize());
        Ok(Running::attached(output(file, goes_on), stdin, resize))
    }))
}

/// Follows `file` from its current end while `running` holds.
fn output(file: PathBuf, running: impl Fn() -> bool + Send + 'static) -> mpsc::Receiver<Event> {
    let (events, receiver) = mpsc::channel(64);
    // Where "now" is, taken before the session's input can reach the container.
    let mut offset = std::fs::metadata(&file).map_or(0, |m| m.len());
    tokio::spawn(async move {
        let mut pending: Vec<u8> = Vec::new();
        loop {
            let more = read_from(&file, offset).await;
            if more.is_empty() {
                if !running() {
                    let _ = events.send(Event::Exited(0)).await;
                    return;
                }
                tokio::select! {
                    () = tokio::time::sleep(POLL) => continue,
                    () = events.closed() => return,
                }
            }
            offset += more.len() as u64;
            pending.extend_from_slice(&more);
            let complete = pending
                .iter()
                .rposition(|&b| b == b'\n')
                .map_or(0, |i| i + 1);
            for line in pending[..complete].split_inclusive(|&b| b == b'\n') {
                if let Some(event) = event(line)
                    && events.send(event).await.is_err()
                {
                    return;
                }
            }
            pending.drain(..complete);
        }
    });
    receiver
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    #[test]
    fn entries_become_output_of_their_stream() {
        assert_eq!(
            event(b"2026-01-01T00:00:01Z stderr F oops\n"),
            Some(Event::Stderr(Bytes::from_static(b"oops\n")))
        );
        assert_eq!(
            event(b"2026-01-01T00:00:01Z stdout P par"),
            Some(Event::Stdout(Bytes::from_static(b"par")))
        );
        assert_eq!(event(b"not a log line"), None);
    }

    #[tokio::test]
    async fn only_what_is_written_after_attaching_is_shown_until_the_run_ends() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("0.log");
        std::fs::write(&file, "2026-01-01T00:00:01Z stdout F before\n").unwrap();
        let going = Arc::new(AtomicBool::new(true));
        let flag = going.clone();
        let mut attached = output(file.clone(), move || flag.load(Ordering::SeqCst));
        tokio::time::sleep(Duration::from_millis(50)).await;
        use std::io::Write as _;
        let mut append = std::fs::OpenOptions::new()
            .append(true)
            .open(&file)
            .unwrap();
        append
            .write_all(b"2026-01-01T00:00:02Z stdout F after\n2026-01-01T00:00:03Z stderr F err\n")
            .unwrap();
        assert_eq!(
            attached.recv().await,
            Some(Event::Stdout(Bytes::from_static(b"after\n")))
        );
        assert_eq!(
            attached.recv().await,
            Some(Event::Stderr(Bytes::from_static(b"err\n")))
        );
        going.store(false, Ordering::SeqCst);
        assert_eq!(attached.recv().await, Some(Event::Exited(0)));
    }
}
