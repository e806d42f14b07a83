//! `kubectl attach -i` and `attach -it` to containers the agent started with `stdin: true`
//! (and `tty: true`), with kubectl 1.27 (SPDY) and 1.33 (WebSockets): input reaches the
//! container's own stdin and its answer every attached session; a pseudo terminal in the test
//! drives `attach -it`, whose resize reaches the container's terminal; `stdinOnce` closes the
//! container's stdin when the first session's input ends, and without it a later session still
//! writes to it; a container without `stdin: true` refuses `-i` with an error, nothing hangs.

use kcp_testing::Kubectl;
use serde_json::{Value, json};

use super::streaming::{self, shell};
use super::terminal::TerminalKubectl;
use super::{Host, NS};

const VERSIONS: [&str; 2] = ["1.27", "1.33"];

/// Prints a tick every 0.3 s (so a test knows a session is attached) while it answers every line
/// of its stdin, then says that stdin ended.
const READER: &str = "(while true; do echo tick; sleep 0.3; done) & \
    while read line; do echo \"got $line\"; done; echo stdin-ended; wait";

/// Answers every line typed into its terminal with the terminal's size and name; `bye` ends it.
const TERMINAL: &str = "while read line; do echo \"size $(stty size) on $(tty)\"; \
    [ \"$line\" = bye ] && exit 0; done";

/// A pod of one container `main` running `script`, with the container fields `io`.
fn pod(name: &str, script: &str, io: Value, restart: &str) -> Value {
    let mut container = shell("main", script);
    if let (Some(container), Some(io)) = (container.as_object_mut(), io.as_object()) {
        container.extend(io.clone());
    }
    streaming::pod(
        name,
        json!([container]),
        json!({ "restartPolicy": restart }),
    )
}

/// The pods one kubectl version attaches to (its own, as a terminal pod ends and `stdinOnce`
/// is spent).
pub struct Pods {
    pub reader: String,
    once: String,
    terminal: String,
    pub plain: String,
}

impl Pods {
    pub fn of(version: &str) -> Pods {
        let suffix = version.replace('.', "");
        Pods {
            reader: format!("reader-{suffix}"),
            once: format!("once-{suffix}"),
            terminal: format!("terminal-{suffix}"),
            plain: format!("plain-{suffix}"),
        }
    }

    fn manifests(&self) -> [Value; 4] {
        [
            pod(&self.reader, READER, json!({ "stdin": true }), "Always"),
            pod(
                &self.once,
                READER,
                json!({ "stdin": true, "stdinOnce": true }),
                "Always",
            ),
            pod(
                &self.terminal,
                TERMINAL,
                json!({ "stdin": true, "tty": true }),
                "Never",
            ),
            pod(&self.plain, READER, json!({}), "Always"),
        ]
    }
}

async fn create_pods(host: &Host) {
    host.create(
        "/api/v1/namespaces",
        json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": NS } }),
    )
    .await;
    let mut names = Vec::new();
    for version in VERSIONS {
        let pods = Pods::of(version);
        for manifest in pods.manifests() {
            names.push(
                manifest["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            );
            host.create(&format!("/api/v1/namespaces/{NS}/pods"), manifest)
                .await;
        }
    }
    host.eventually("every attach pod running", || async {
        let mut waiting = Vec::new();
        for name in &names {
            let pod = host
                .get(&format!("/api/v1/namespaces/{NS}/pods/{name}"))
                .await;
            if pod["status"]["containerStatuses"][0]["state"]["running"].is_null() {
                waiting.push(name.clone());
            }
        }
        if waiting.is_empty() {
            Ok(())
        } else {
            Err(format!("not running: {waiting:?}"))
        }
    })
    .await;
}

fn attach_args<'a>(flags: &'a str, pod: &'a str) -> [&'a str; 5] {
    ["attach", flags, "-n", NS, pod]
}

/// Input of one session reaches the container; its answer reaches every session; a later
/// session still writes to the stdin the first one left.
fn check_stdin(kubectl: &Kubectl, pods: &Pods) {
    let version = kubectl.version();
    let mut writer = kubectl.interactive(&attach_args("-i", &pods.reader));
    let mut watcher = kubectl.background(&["attach", "-n", NS, &pods.reader]);
    writer.wait_for_line("a tick (attached)", |line| line == "tick");
    watcher.wait_for_line("a tick (attached)", |line| line == "tick");
    writer.send("hello\n");
    writer.wait_for_line("the answer in the writing session", |line| {
        line == "got hello"
    });
    watcher.wait_for_line("the answer in the other session", |line| {
        line == "got hello"
    });
    writer.close_stdin();
    drop(writer);
    drop(watcher);

    let mut later = kubectl.interactive(&attach_args("-i", &pods.reader));
    later.wait_for_line("a tick (attached)", |line| line == "tick");
    later.send("again\n");
    later.wait_for_line("the answer to a later session", |line| line == "got again");
    drop(later);
    let logs = kubectl.ok(&["logs", "-n", NS, &pods.reader]);
    assert!(
        !logs.contains("stdin-ended"),
        "{version}: without stdinOnce the container's stdin stays open: {logs}"
    );
}

/// With `stdinOnce`, the end of the first session's input is the end of the container's stdin.
fn check_stdin_once(kubectl: &Kubectl, pods: &Pods) {
    let mut session = kubectl.interactive(&attach_args("-i", &pods.once));
    session.wait_for_line("a tick (attached)", |line| line == "tick");
    session.send("first\n");
    session.wait_for_line("the answer", |line| line == "got first");
    session.close_stdin();
    session.wait_for_line("the container's stdin ended", |line| line == "stdin-ended");
}

/// `attach -it` through a pseudo terminal: the container's terminal is its controlling terminal
/// with the client's size, a resize follows, and the container ending ends kubectl.
fn check_terminal(kubectl: &Kubectl, pods: &Pods) {
    let version = kubectl.version();
    let mut terminal = TerminalKubectl::start(kubectl, &attach_args("-it", &pods.terminal));
    terminal.wait_for(
        "the first answer, in the client's 40x120 terminal",
        |text| text.contains("size 40 120 on /dev/pts/"),
        |terminal| terminal.type_text("one\r"),
    );
    terminal.resize(30, 100);
    terminal.wait_for(
        "an answer after the resize",
        |text| text.contains("size 30 100 on /dev/pts/"),
        |terminal| terminal.type_text("again\r"),
    );
    terminal.type_text("bye\r");
    let (text, code) = terminal.finish();
    assert_eq!(code, Some(0), "{version}: {text:?}");
}

/// `-i` to a container without `stdin: true` is refused, in kubelet's words.
fn check_no_stdin(kubectl: &Kubectl, pods: &Pods) {
    let version = kubectl.version();
    let refused = kubectl.fails(&attach_args("-i", &pods.plain));
    assert!(
        refused.contains("was not started with stdin: true"),
        "{version}: {refused}"
    );
}

pub async fn check(host: &Host) {
    create_pods(host).await;
    let kubeconfig = host.kcp().kubeconfig();
    for version in VERSIONS {
        let kubectl = Kubectl::new(version, &kubeconfig);
        let pods = Pods::of(version);
        check_stdin(&kubectl, &pods);
        check_stdin_once(&kubectl, &pods);
        check_terminal(&kubectl, &pods);
        check_no_stdin(&kubectl, &pods);
    }
}
