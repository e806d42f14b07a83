//! A real browser for the suite: Debian's headless `chromium` loads a page the way a person's
//! browser would, prints the DOM it built (`--dump-dom`) and takes a screenshot
//! (`--screenshot`). Each run gets its own profile directory and its own process group, so a
//! run that hangs is killed whole (by that group's id) when its time is up.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::mpsc::channel;
use std::time::Duration;

/// Debian's package `chromium` installs it here.
const CHROMIUM: &str = "/usr/bin/chromium";
/// One page load, screenshot included.
const WITHIN: Duration = Duration::from_secs(90);

/// Headless Chromium with a throwaway profile under `profile`.
pub struct Chromium {
    binary: PathBuf,
    profile: PathBuf,
}

impl Chromium {
    /// The browser `$CHROMIUM` names, else Debian's.
    pub fn new(profile: &Path) -> Result<Chromium, String> {
        let binary =
            std::env::var_os("CHROMIUM").map_or_else(|| PathBuf::from(CHROMIUM), PathBuf::from);
        if !binary.is_file() {
            return Err(format!(
                "{} not found: install Debian's chromium (apt-get install chromium)",
                binary.display()
            ));
        }
        Ok(Chromium {
            binary,
            profile: profile.to_owned(),
        })
    }

    /// The DOM of `url` once it loaded.
    pub fn dump_dom(&self, url: &str) -> Result<String, String> {
        let output = self.run(&["--dump-dom", url])?;
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }

    /// A PNG of `url` (`width` x `height` pixels) written to `file`.
    pub fn screenshot(
        &self,
        url: &str,
        file: &Path,
        width: u32,
        height: u32,
    ) -> Result<(), String> {
        self.run(&[
            &format!("--screenshot={}", file.display()),
            &format!("--window-size={width},{height}"),
            url,
        ])?;
        match std::fs::metadata(file) {
            Ok(meta) if meta.len() > 0 => Ok(()),
            _ => Err(format!(
                "chromium wrote no screenshot to {}",
                file.display()
            )),
        }
    }

    fn run(&self, args: &[&str]) -> Result<Output, String> {
        let child = Command::new(&self.binary)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-gpu",
                "--no-first-run",
                &format!("--user-data-dir={}", self.profile.display()),
            ])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .map_err(|e| format!("starting {}: {e}", self.binary.display()))?;
        let group = child.id();
        let (sender, receiver) = channel();
        std::thread::spawn(move || sender.send(child.wait_with_output()));
        let output = match receiver.recv_timeout(WITHIN) {
            Ok(output) => output.map_err(|e| format!("chromium: {e}"))?,
            Err(_) => {
                // The browser and its helpers: the process group it leads, by that group's id.
                let _ = Command::new("kill")
                    .args(["-KILL", "--", &format!("-{group}")])
                    .status();
                return Err(format!(
                    "chromium {args:?} did not finish within {WITHIN:?}"
                ));
            }
        };
        if output.status.success() {
            Ok(output)
        } else {
            Err(format!(
                "chromium {args:?}: {}; {}",
                output.status,
                String::from_utf8_lossy(&output.stderr)
                    .lines()
                    .rev()
                    .take(5)
                    .collect::<Vec<_>>()
                    .join(" | ")
            ))
        }
    }
}
