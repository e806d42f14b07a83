//! kubectl run with a pseudo terminal as its controlling terminal, as a person runs `exec -it`
//! or `attach -it`: the test types into the terminal, resizes it (kubectl gets SIGWINCH and
//! sends the new size) and reads what kubectl printed.

use std::fs::File;
use std::io::{Read as _, Write as _};
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd};
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kcp_testing::Kubectl;

/// How long a test waits for kubectl's output or exit.
const WITHIN: Duration = Duration::from_secs(60);

pub struct TerminalKubectl {
    child: Child,
    terminal: File,
    output: Arc<Mutex<Vec<u8>>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

fn winsize(rows: u16, cols: u16) -> libc::winsize {
    libc::winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    }
}

impl TerminalKubectl {
    /// Starts kubectl with a terminal of 120x40.
    pub fn start(kubectl: &Kubectl, args: &[&str]) -> TerminalKubectl {
        let (mut master, mut slave) = (-1, -1);
        let size = winsize(40, 120);
        // SAFETY: openpty fills in two new descriptors; the size pointer outlives the call.
        let opened = unsafe {
            libc::openpty(
                &mut master,
                &mut slave,
                std::ptr::null_mut(),
                std::ptr::null(),
                &size,
            )
        };
        assert_eq!(opened, 0, "openpty");
        // SAFETY: both descriptors were just opened for this test.
        let (master, slave) =
            unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
        let mut command = kubectl.command(args, &[]);
        command
            .stdin(Stdio::from(slave.try_clone().expect("dup")))
            .stdout(Stdio::from(slave.try_clone().expect("dup")))
            .stderr(Stdio::from(slave));
        // SAFETY: setsid and ioctl are async-signal-safe; the terminal becomes kubectl's.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut command, || {
                if libc::setsid() == -1 || libc::ioctl(0, libc::TIOCSCTTY, 0) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = command.spawn().expect("kubectl in a terminal");
        drop(command);
        let terminal = File::from(master);
        let mut reading = terminal.try_clone().expect("dup");
        let output = Arc::new(Mutex::new(Vec::new()));
        let sink = output.clone();
        let reader = std::thread::spawn(move || {
            let mut buffer = [0u8; 4096];
            // EIO once kubectl (the last holder of the other end) exits.
            while let Ok(read) = reading.read(&mut buffer) {
                if read == 0 {
                    break;
                }
                sink.lock()
                    .expect("output")
                    .extend_from_slice(&buffer[..read]);
            }
        });
        TerminalKubectl {
            child,
            terminal,
            output,
            reader: Some(reader),
        }
    }

    /// What kubectl printed so far.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.output.lock().expect("output")).into_owned()
    }

    /// Types `text` (a line ends with `\r`, the Enter key).
    pub fn type_text(&mut self, text: &str) {
        self.terminal
            .write_all(text.as_bytes())
            .expect("typing into the terminal");
    }

    /// Sets the terminal's size; kubectl is told by SIGWINCH.
    pub fn resize(&self, rows: u16, cols: u16) {
        let size = winsize(rows, cols);
        // SAFETY: TIOCSWINSZ reads a winsize from the pointer, which outlives the call.
        let set = unsafe { libc::ioctl(self.terminal.as_raw_fd(), libc::TIOCSWINSZ, &size) };
        assert_eq!(set, 0, "resizing the terminal");
    }

    /// Waits until the output satisfies `wanted`, doing `meanwhile` between looks (typing a
    /// line again, say); fails the test with the output after [`WITHIN`].
    pub fn wait_for(
        &mut self,
        what: &str,
        wanted: impl Fn(&str) -> bool,
        mut meanwhile: impl FnMut(&mut TerminalKubectl),
    ) -> String {
        let deadline = Instant::now() + WITHIN;
        loop {
            let text = self.text();
            if wanted(&text) {
                return text;
            }
            assert!(
                Instant::now() < deadline,
                "no {what} within {WITHIN:?}: {text:?}"
            );
            meanwhile(self);
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Waits for kubectl to exit; returns everything it printed and its exit code.
    pub fn finish(mut self) -> (String, Option<i32>) {
        let deadline = Instant::now() + WITHIN;
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("waiting for kubectl") {
                break status;
            }
            assert!(
                Instant::now() < deadline,
                "kubectl in a terminal did not end: {:?}",
                self.text()
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        if let Some(reader) = self.reader.take() {
            reader.join().expect("terminal reader");
        }
        (self.text(), status.code())
    }
}

impl Drop for TerminalKubectl {
    fn drop(&mut self) {
        // Kills this child by its PID; it may have exited already.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
