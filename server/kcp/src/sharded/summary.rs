//! What `kcp sharded` prints once everything is ready: every process with its URL, PID and log,
//! the admin kubeconfig and its contexts, and the commands to try next. Scripts and tests read
//! the process lines (`pid=<pid>`), so their shape is kept simple and stable.

use std::fmt::Write;
use std::path::Path;

/// One process as printed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row<'a> {
    pub name: &'a str,
    pub url: &'a str,
    /// `None`: no process of its own (see `note`).
    pub pid: Option<u32>,
    pub log: &'a Path,
    /// Why a row has no PID.
    pub note: &'a str,
}

/// The whole summary. `shards` are the admin kubeconfig's contexts, `root` first.
pub fn render(
    rows: &[Row<'_>],
    admin_kubeconfig: &Path,
    shards: &[&str],
    front_proxy: Option<&str>,
) -> String {
    let width = rows.iter().map(|row| row.name.len()).max().unwrap_or(0);
    let mut text = String::from("kcp sharded is running:\n");
    for row in rows {
        let state = match row.pid {
            Some(pid) => format!("pid={pid}  log={}", row.log.display()),
            None => row.note.to_owned(),
        };
        // Writing into a String cannot fail.
        let _ = writeln!(text, "  {:width$}  {}  {state}", row.name, row.url);
    }
    let kubeconfig = admin_kubeconfig.display();
    let contexts: Vec<&str> = front_proxy
        .into_iter()
        .chain(shards.iter().copied())
        .collect();
    let _ = writeln!(
        text,
        "admin kubeconfig: {kubeconfig} (contexts {}; current context {})",
        contexts.join(", "),
        contexts.first().copied().unwrap_or_default()
    );
    let _ = writeln!(text, "try:");
    let _ = writeln!(text, "  export KUBECONFIG={kubeconfig}");
    let _ = writeln!(text, "  kubectl get shards");
    for shard in shards.iter().skip(1) {
        let _ = writeln!(text, "  kubectl --context {shard} get --raw /readyz");
    }
    let _ = writeln!(text, "  kubectl get workspaces");
    let _ = writeln!(
        text,
        "stop with Ctrl-C or SIGTERM to pid {}: every process is stopped with it",
        std::process::id()
    );
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_process_then_the_kubeconfig_and_what_to_try() {
        let rows = [
            Row {
                name: "cache",
                url: "https://127.0.0.1:6445",
                pid: None,
                log: Path::new("/t/cache.log"),
                note: "not started: no cache server in this build",
            },
            Row {
                name: "root",
                url: "https://127.0.0.1:6443",
                pid: Some(11),
                log: Path::new("/t/root.log"),
                note: "",
            },
            Row {
                name: "shard-1",
                url: "https://127.0.0.1:6444",
                pid: Some(12),
                log: Path::new("/t/shard-1.log"),
                note: "",
            },
        ];
        let text = render(
            &rows,
            Path::new("/t/admin.kubeconfig"),
            &["root", "shard-1"],
            None,
        );
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[..5],
            [
                "kcp sharded is running:",
                "  cache    https://127.0.0.1:6445  not started: no cache server in this build",
                "  root     https://127.0.0.1:6443  pid=11  log=/t/root.log",
                "  shard-1  https://127.0.0.1:6444  pid=12  log=/t/shard-1.log",
                "admin kubeconfig: /t/admin.kubeconfig (contexts root, shard-1; current context root)",
            ]
        );
        assert!(
            text.contains("  export KUBECONFIG=/t/admin.kubeconfig\n"),
            "{text}"
        );
        assert!(
            text.contains("  kubectl --context shard-1 get --raw /readyz\n"),
            "{text}"
        );
        assert!(!text.contains("--context root"), "{text}");
    }

    #[test]
    fn the_front_proxy_context_comes_first_and_is_current() {
        let text = render(
            &[],
            Path::new("/t/admin.kubeconfig"),
            &["root", "shard-1"],
            Some("front-proxy"),
        );
        assert!(
            text.contains(
                "admin kubeconfig: /t/admin.kubeconfig (contexts front-proxy, root, shard-1; \
                 current context front-proxy)"
            ),
            "{text}"
        );
        assert!(
            text.contains("  kubectl --context shard-1 get --raw /readyz\n"),
            "{text}"
        );
    }
}
