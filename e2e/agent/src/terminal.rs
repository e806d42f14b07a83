//! Pseudo terminals, as a container runtime gives a process that asked for a TTY (a container
//! with `tty: true`, or `kubectl exec -t`): the pair is opened here, the process gets the
//! terminal as stdin, stdout and stderr and as the controlling terminal of a new session, and
//! the agent keeps the other end to read the output, write the input and set the window size
//! kube's resize messages carry.

use std::fs::File;
use std::io::Write as _;
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd};
use std::process::Stdio;

use bytes::Bytes;
use tokio::sync::mpsc;

/// A terminal size, as kube's `TerminalSize`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TermSize {
    pub width: u16,
    pub height: u16,
}

/// The agent's end of a pseudo terminal (its other end was given to a process).
pub struct Terminal {
    pub master: File,
}

/// Opens a pseudo terminal and makes its other end `command`'s stdin, stdout, stderr and
/// controlling terminal (in a session of its own, which is also its process group, so a group
/// kill still reaches everything it started).
pub fn attach_new(command: &mut tokio::process::Command) -> std::io::Result<Terminal> {
    let (master, slave) = open_pty()?;
    command
        .stdin(Stdio::from(slave.try_clone()?))
        .stdout(Stdio::from(slave.try_clone()?))
        .stderr(Stdio::from(slave));
    // SAFETY: setsid and ioctl are async-signal-safe; they make the terminal (fd 0) the
    // controlling terminal of the new session, as a runtime's start with a TTY does.
    unsafe {
        command.pre_exec(|| {
            if libc::setsid() == -1 || libc::ioctl(0, libc::TIOCSCTTY, 0) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    Ok(Terminal {
        master: File::from(master),
    })
}

fn open_pty() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let (mut master, mut slave) = (-1, -1);
    // SAFETY: openpty writes two new descriptors into the provided integers; the name,
    // termios and window size pointers may be null.
    let result = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    if result == -1 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just opened for us and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) })
}

impl Terminal {
    /// A channel whose sizes become the terminal's window size (the foreground process gets
    /// SIGWINCH).
    pub fn resizer(&self) -> std::io::Result<mpsc::Sender<TermSize>> {
        let terminal = self.master.try_clone()?;
        let (sender, mut sizes) = mpsc::channel::<TermSize>(4);
        tokio::spawn(async move {
            while let Some(size) = sizes.recv().await {
                set_size(&terminal, size);
            }
        });
        Ok(sender)
    }

    /// A channel whose bytes are typed into the terminal, until every sender is dropped.
    pub fn writer(&self) -> std::io::Result<mpsc::Sender<Bytes>> {
        let mut terminal = self.master.try_clone()?;
        let (sender, mut input) = mpsc::channel::<Bytes>(16);
        std::thread::spawn(move || {
            while let Some(data) = input.blocking_recv() {
                if terminal.write_all(&data).is_err() {
                    return;
                }
            }
        });
        Ok(sender)
    }
}

fn set_size(terminal: &File, size: TermSize) {
    let winsize = libc::winsize {
        ws_row: size.height,
        ws_col: size.width,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCSWINSZ reads a winsize from the pointer, which outlives the call.
    unsafe { libc::ioctl(terminal.as_raw_fd(), libc::TIOCSWINSZ, &winsize) };
}
