//! The stdin and terminal of running containers, for `kubectl attach`: a container whose spec
//! says `stdin: true` keeps its stdin open (a pipe, or its terminal with `tty: true`) and every
//! attach session that sends input writes into it; with `tty: true` the sessions' resize
//! messages set the terminal's window size. `stdinOnce: true` closes the container's stdin when
//! the first session that sent input ends, as containerd's CRI attach does (for a container
//! without a terminal; with one, stdin stays open, as there). The registry is keyed by the PID of
//! the container's main process, which is also its `containerID`, so a restarted container
//! is a new entry.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use k8s_openapi::api::core::v1::Container;
use tokio::sync::mpsc;

use crate::terminal::TermSize;

/// What a container's spec asks of its stdin and terminal.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InputSpec {
    pub stdin: bool,
    pub stdin_once: bool,
    pub tty: bool,
}

impl InputSpec {
    pub fn of(container: &Container) -> InputSpec {
        InputSpec {
            stdin: container.stdin.unwrap_or(false),
            stdin_once: container.stdin_once.unwrap_or(false),
            tty: container.tty.unwrap_or(false),
        }
    }
}

/// The open stdin (and terminal) of one running container.
pub struct ContainerInput {
    spec: InputSpec,
    stdin: Mutex<Option<mpsc::Sender<Bytes>>>,
    resize: Option<mpsc::Sender<TermSize>>,
}

impl ContainerInput {
    /// `stdin` writes into the container's stdin (dropping every sender closes it); `resize`
    /// sets its terminal's size.
    pub fn new(
        spec: InputSpec,
        stdin: Option<mpsc::Sender<Bytes>>,
        resize: Option<mpsc::Sender<TermSize>>,
    ) -> ContainerInput {
        ContainerInput {
            spec,
            stdin: Mutex::new(stdin),
            resize,
        }
    }

    /// The container's terminal size channel, when it has a terminal.
    pub fn resize(&self) -> Option<mpsc::Sender<TermSize>> {
        self.resize.clone()
    }

    fn open_stdin(&self) -> Option<mpsc::Sender<Bytes>> {
        self.stdin
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Closes the container's stdin for good (what is queued is still written).
    fn close_stdin(&self) {
        self.stdin
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
    }

    /// A channel for one attach session's input; `None` once the container's stdin is closed.
    /// When the session's input ends (the client closed it or went away) and the spec says
    /// `stdinOnce` without a terminal, the container's stdin is closed.
    pub fn session_stdin(self: &Arc<Self>) -> Option<mpsc::Sender<Bytes>> {
        let container = self.open_stdin()?;
        let (sender, mut session) = mpsc::channel::<Bytes>(16);
        let input = self.clone();
        tokio::spawn(async move {
            while let Some(data) = session.recv().await {
                if container.send(data).await.is_err() {
                    break;
                }
            }
            drop(container);
            if input.spec.stdin_once && !input.spec.tty {
                input.close_stdin();
            }
        });
        Some(sender)
    }
}

/// The inputs of the running containers, by the PID of their main process.
#[derive(Clone, Default)]
pub struct ContainerInputs {
    by_pid: Arc<Mutex<HashMap<u32, Arc<ContainerInput>>>>,
}

/// Keeps a container's input registered; dropping it (the container exited) removes it.
pub struct Registered {
    inputs: ContainerInputs,
    pid: u32,
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.inputs
            .by_pid
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.pid);
    }
}

impl ContainerInputs {
    pub fn register(&self, pid: u32, input: ContainerInput) -> Registered {
        self.by_pid
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(pid, Arc::new(input));
        Registered {
            inputs: self.clone(),
            pid,
        }
    }

    pub fn get(&self, pid: u32) -> Option<Arc<ContainerInput>> {
        self.by_pid
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&pid)
            .cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(stdin_once: bool, tty: bool) -> InputSpec {
        InputSpec {
            stdin: true,
            stdin_once,
            tty,
        }
    }

    #[tokio::test]
    async fn sessions_write_into_the_same_stdin_which_stays_open_without_stdin_once() {
        let (stdin, mut container) = mpsc::channel(4);
        let input = Arc::new(ContainerInput::new(spec(false, false), Some(stdin), None));
        let first = input.session_stdin().unwrap();
        first.send(Bytes::from_static(b"a")).await.unwrap();
        drop(first);
        assert_eq!(container.recv().await.unwrap(), Bytes::from_static(b"a"));
        let second = input.session_stdin().expect("stdin stays open");
        second.send(Bytes::from_static(b"b")).await.unwrap();
        assert_eq!(container.recv().await.unwrap(), Bytes::from_static(b"b"));
    }

    #[tokio::test]
    async fn stdin_once_closes_stdin_when_the_first_session_ends() {
        let (stdin, mut container) = mpsc::channel(4);
        let input = Arc::new(ContainerInput::new(spec(true, false), Some(stdin), None));
        let first = input.session_stdin().unwrap();
        first.send(Bytes::from_static(b"only")).await.unwrap();
        drop(first);
        assert_eq!(container.recv().await.unwrap(), Bytes::from_static(b"only"));
        assert!(container.recv().await.is_none(), "stdin reached its end");
        assert!(input.session_stdin().is_none());
    }

    #[tokio::test]
    async fn with_a_terminal_stdin_once_keeps_stdin_open() {
        let (stdin, mut container) = mpsc::channel(4);
        let input = Arc::new(ContainerInput::new(spec(true, true), Some(stdin), None));
        drop(input.session_stdin().unwrap());
        let again = input.session_stdin().expect("still open");
        again.send(Bytes::from_static(b"x")).await.unwrap();
        assert_eq!(container.recv().await.unwrap(), Bytes::from_static(b"x"));
    }

    #[test]
    fn registration_ends_with_its_guard() {
        let inputs = ContainerInputs::default();
        let guard = inputs.register(7, ContainerInput::new(InputSpec::default(), None, None));
        assert!(inputs.get(7).is_some());
        drop(guard);
        assert!(inputs.get(7).is_none());
    }
}
