//! `kubectl logs`, `exec`, `attach` and `port-forward` against pods the agent runs, through the
//! server's `pods/log`, `pods/exec`, `pods/attach` and `pods/portforward` and the agent's kubelet
//! port, with the oldest
//! and newest kubectl this project supports: 1.27 speaks SPDY/3.1, 1.33 WebSockets (v5 for exec,
//! SPDY tunnelled in a WebSocket for port-forward). Then the bad input of issue 23: a pod on no
//! node, a container that does not exist, a port nothing listens on, a user who may read logs but
//! not exec; every command ends, and the agent has as many children afterwards as before.

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kcp_testing::{BackgroundKubectl, Kubectl};
use serde_json::{Value, json};

use super::terminal::TerminalKubectl;
use super::{Host, NS, python_image};

const VERSIONS: [&str; 2] = ["1.27", "1.33"];
const NODE: &str = "kcp-node-agent";

pub fn pod(name: &str, containers: Value, extra: Value) -> Value {
    let mut spec = json!({ "containers": containers, "terminationGracePeriodSeconds": 1 });
    if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
        spec.extend(extra.clone());
    }
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": { "name": name, "namespace": NS },
        "spec": spec,
    })
}

pub fn shell(name: &str, script: &str) -> Value {
    json!({ "name": name, "image": python_image(), "command": ["sh", "-c", script] })
}

/// Children of a process (from `/proc/*/stat`).
fn children(pid: u32) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .expect("/proc")
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|child| {
            let stat = std::fs::read_to_string(format!("/proc/{child}/stat")).unwrap_or_default();
            // pid (comm) state ppid ...: the fields after the last ')'.
            stat.rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok())
                == Some(pid)
        })
        .collect()
}

async fn create_pods(host: &Host) {
    let ticker = pod(
        "ticker",
        json!([
            shell("main", "i=0; while true; do i=$((i+1)); echo tick $i; sleep 0.2; done"),
            { "name": "web", "image": python_image(),
              "args": ["-m", "http.server", "8080", "--bind", "127.0.0.1"] },
        ]),
        json!({}),
    );
    // Fails once (its previous run), then stays up (its current run).
    let mut crasher = pod(
        "crasher",
        json!([shell(
            "main",
            "echo line-a; echo line-b; [ -f /data/ran ] && exec sleep 3600; touch /data/ran; echo bye >&2; exit 2"
        )]),
        json!({ "restartPolicy": "Always", "volumes": [{ "name": "data", "emptyDir": {} }] }),
    );
    crasher["spec"]["containers"][0]["volumeMounts"] =
        json!([{ "name": "data", "mountPath": "/data" }]);
    let finisher = pod(
        "finisher",
        json!([shell("main", "echo done-1; sleep 2; echo done-2")]),
        json!({ "restartPolicy": "Never" }),
    );
    let unbound = pod(
        "unbound",
        json!([shell("main", "sleep 100")]),
        json!({ "schedulingGates": [{ "name": "e2e.kcp.io/never" }] }),
    );
    for object in [ticker, crasher, finisher, unbound] {
        host.create(&format!("/api/v1/namespaces/{NS}/pods"), object)
            .await;
    }
    host.eventually(
        "ticker running, crasher restarted, finisher done",
        || async {
            let ticker = host
                .get(&format!("/api/v1/namespaces/{NS}/pods/ticker"))
                .await;
            let crasher = host
                .get(&format!("/api/v1/namespaces/{NS}/pods/crasher"))
                .await;
            let ready = ticker["status"]["containerStatuses"]
                .as_array()
                .is_some_and(|all| all.len() == 2 && all.iter().all(|c| c["ready"] == true));
            let restarts = crasher["status"]["containerStatuses"][0]["restartCount"]
                .as_i64()
                .unwrap_or(0);
            let finisher = host
                .get(&format!("/api/v1/namespaces/{NS}/pods/finisher"))
                .await;
            if ready && restarts >= 1 && finisher["status"]["phase"] == "Succeeded" {
                Ok(())
            } else {
                Err(format!(
                    "ticker {}, crasher restarts {restarts}",
                    ticker["status"]
                ))
            }
        },
    )
    .await;
}

async fn check_node(host: &Host) {
    let node = host.get(&format!("/api/v1/nodes/{NODE}")).await;
    let status = &node["status"];
    assert_eq!(
        status["addresses"][0],
        json!({ "type": "InternalIP", "address": host.gateway.to_string() }),
        "{node}"
    );
    assert_eq!(
        status["daemonEndpoints"]["kubeletEndpoint"]["Port"], 10250,
        "{node}"
    );
    assert_eq!(status["conditions"][0]["type"], "Ready");
    assert_eq!(status["conditions"][0]["status"], "True");

    // Discovery lists the connect subresources of pods, as kube-apiserver does.
    let core = host.get("/api/v1").await;
    let names: Vec<&str> = core["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["name"].as_str())
        .collect();
    for name in [
        "pods/log",
        "pods/exec",
        "pods/attach",
        "pods/portforward",
        "nodes/status",
    ] {
        assert!(names.contains(&name), "{name} not in {names:?}");
    }
}

fn check_logs(kubectl: &Kubectl) {
    let version = kubectl.version();
    // The current run writes its two lines right after it started.
    let current = ["logs", "-n", NS, "crasher"];
    kubectl.wait_for_output(&current, "line-a\nline-b", Duration::from_secs(30));
    let tail = kubectl.ok(&["logs", "-n", NS, "crasher", "--tail=1"]);
    assert_eq!(tail, "line-b\n", "{version}");
    let previous = kubectl.ok(&["logs", "-n", NS, "crasher", "--previous"]);
    // stdout and stderr are two pipes read side by side (as kubelet's): each keeps its order,
    // and a line of one may come before a line the other wrote first.
    let stdout_lines: Vec<&str> = previous.lines().filter(|l| *l != "bye").collect();
    assert_eq!(
        stdout_lines,
        ["line-a", "line-b"],
        "{version}: {previous:?}"
    );
    assert_eq!(
        previous.lines().filter(|l| *l == "bye").count(),
        1,
        "{version}: {previous:?}"
    );
    let stamped = kubectl.ok(&["logs", "-n", NS, "crasher", "--previous", "--timestamps"]);
    for line in stamped.lines() {
        let (time, text) = line.split_once(' ').expect("a time before the text");
        assert!(time.parse::<jiff::Timestamp>().is_ok(), "{version}: {line}");
        assert!(
            ["line-a", "line-b", "bye"].contains(&text),
            "{version}: {line}"
        );
    }
    let recent = kubectl.ok(&["logs", "-n", NS, "ticker", "-c", "main", "--since=1s"]);
    let everything = kubectl.ok(&["logs", "-n", NS, "ticker", "-c", "main"]);
    assert!(everything.starts_with("tick 1\n"), "{version}");
    assert!(
        !recent.contains("tick 1\n") && recent.lines().count() < everything.lines().count(),
        "{version}: --since=1s gave {recent:?}"
    );
    let limited = kubectl.ok(&["logs", "-n", NS, "ticker", "-c", "main", "--limit-bytes=7"]);
    assert_eq!(limited, "tick 1\n", "{version}");

    // -f streams new lines as they are written.
    let mut follow =
        kubectl.background(&["logs", "-f", "-n", NS, "ticker", "-c", "main", "--tail=1"]);
    let first = follow.wait_for_line("a tick", |line| line.starts_with("tick "));
    let number = |line: &str| {
        line.trim_start_matches("tick ")
            .parse::<u64>()
            .expect("tick N")
    };
    let start = number(&first);
    follow.wait_for_line("a later tick", |line| {
        line.starts_with("tick ") && number(line) >= start + 3
    });
    drop(follow);

    // -f of a container that has exited ends at once.
    let run = kubectl.run(&["logs", "-f", "-n", NS, "finisher"]);
    assert!(run.status.success(), "{version}: {run:?}");
    assert_eq!(run.stdout, "done-1\ndone-2\n", "{version}: {run:?}");
}

/// `kubectl exec <flags> -n NS ticker -c main -- sh -c <script>`.
fn exec_in_ticker<'a>(flags: &[&'a str], script: &'a str) -> Vec<&'a str> {
    let mut args = vec!["exec"];
    args.extend_from_slice(flags);
    args.extend_from_slice(&["-n", NS, "ticker", "-c", "main", "--", "sh", "-c", script]);
    args
}

fn check_exec(kubectl: &Kubectl) {
    let version = kubectl.version();
    let run = kubectl.run(&exec_in_ticker(
        &[],
        "echo out; echo err >&2; hostname; exit 3",
    ));
    assert_eq!(run.status.code(), Some(3), "{version}: {run:?}");
    assert_eq!(run.stdout, "out\nticker\n", "{version}: {run:?}");
    assert!(run.stderr.contains("err"), "{version}: {run:?}");

    let mut cat = kubectl.command(&exec_in_ticker(&["-i"], "cat"), &[]);
    let mut child = cat.stdin(Stdio::piped()).spawn().expect("kubectl exec -i");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin
        .write_all(b"hello through stdin\n")
        .expect("writing stdin");
    drop(stdin);
    let output = child.wait_with_output().expect("kubectl exec -i");
    assert!(output.status.success(), "{version}: {output:?}");
    assert_eq!(output.stdout, b"hello through stdin\n", "{version}");

    let (text, code) = in_terminal(kubectl, &exec_in_ticker(&["-it"], "tty; stty size; exit 4"));
    assert!(text.contains("/dev/pts/"), "{version}: {text:?}");
    assert!(
        text.contains("40 120"),
        "{version}: the terminal size follows: {text:?}"
    );
    assert_eq!(code, Some(4), "{version}: {text:?}");
}

/// Runs kubectl with a pseudo terminal of 120x40 as its controlling terminal and returns what it
/// printed and its exit code.
fn in_terminal(kubectl: &Kubectl, args: &[&str]) -> (String, Option<i32>) {
    TerminalKubectl::start(kubectl, args).finish()
}

/// The local port a `kubectl port-forward :<port>` picked (`Forwarding from 127.0.0.1:N -> ...`).
pub fn local_port(forward: &mut BackgroundKubectl) -> String {
    let prefix = "Forwarding from 127.0.0.1:";
    let line = forward.wait_for_line("the local port", |line| line.starts_with(prefix));
    line.trim_start_matches(prefix)
        .split(' ')
        .next()
        .expect("port")
        .to_owned()
}

async fn check_port_forward(kubectl: &Kubectl) {
    let version = kubectl.version();
    let mut forward = kubectl.background(&["port-forward", "-n", NS, "pod/ticker", ":8080"]);
    let port = local_port(&mut forward);
    for round in 0..3 {
        let response = reqwest::get(format!("http://127.0.0.1:{port}/"))
            .await
            .unwrap_or_else(|e| panic!("{version}: request {round} through port-forward: {e}"));
        assert_eq!(response.status(), 200, "{version}");
        let body = response.text().await.expect("body");
        assert!(body.contains("Directory listing"), "{version}: {body}");
    }
    drop(forward);

    // Nothing listens on port 9: the request fails, nothing hangs.
    let mut nothing = kubectl.background(&["port-forward", "-n", NS, "pod/ticker", ":9"]);
    let port = local_port(&mut nothing);
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(20))
        .build()
        .expect("client");
    let answer = client.get(format!("http://127.0.0.1:{port}/")).send().await;
    assert!(
        answer.as_ref().map_or(true, |r| !r.status().is_success()),
        "{version}: a port nothing listens on answered: {answer:?}"
    );
    assert!(
        answer.as_ref().err().is_none_or(|e| !e.is_timeout()),
        "{version}: the request through a dead port hung: {answer:?}"
    );
    drop(nothing);
}

/// The Python client's `stream()` (a WebSocket with `v4.channel.k8s.io`, which it alone
/// offers): output of both streams, stdin, and the exit code from the error channel's Status.
const PYTHON_EXEC: &str = r#"
import sys
from kubernetes import client, config
from kubernetes.stream import stream

config.load_kube_config(config_file=sys.argv[1])
v1 = client.CoreV1Api()
namespace, pod = sys.argv[2], sys.argv[3]
out = stream(v1.connect_get_namespaced_pod_exec, pod, namespace, container="main",
             command=["sh", "-c", "echo out; hostname"],
             stderr=True, stdin=False, stdout=True, tty=False)
print("output=" + out.replace("\n", "|"))
session = stream(v1.connect_get_namespaced_pod_exec, pod, namespace, container="main",
                 command=["sh", "-c", "read line; echo got $line; echo oops >&2; exit 3"],
                 stderr=True, stdin=True, stdout=True, tty=False, _preload_content=False)
session.write_stdin("hello\n")
session.run_forever(timeout=30)
print("stdout=" + session.read_stdout().replace("\n", "|"))
print("stderr=" + session.read_stderr().replace("\n", "|"))
print("code=" + str(session.returncode))
"#;

async fn check_python_exec(kubeconfig: &Path) {
    let python = tokio::task::spawn_blocking(kcp_testing::python::with_kubernetes)
        .await
        .expect("installing the Python client");
    let dir = kcp_testing::temp_dir("python-exec");
    let script = dir.path().join("exec.py");
    std::fs::write(&script, PYTHON_EXEC).expect("writing the script");
    let kubeconfig = kubeconfig.to_path_buf();
    let output = tokio::task::spawn_blocking(move || {
        Command::new(&python)
            .arg(&script)
            .arg(&kubeconfig)
            .args([NS, "ticker"])
            .stdin(Stdio::null())
            .output()
            .expect("running the Python exec")
    })
    .await
    .expect("the Python exec");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{}\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines,
        [
            "output=out|ticker|",
            "stdout=got hello|",
            "stderr=oops|",
            "code=3"
        ],
        "{stdout}"
    );
}

/// `kubectl attach` shows the container's output from the moment it attached.
fn check_attach(kubectl: &Kubectl) {
    let version = kubectl.version();
    let mut attach = kubectl.background(&["attach", "-n", NS, "ticker", "-c", "main"]);
    let number = |line: &str| {
        line.trim_start_matches("tick ")
            .parse::<u64>()
            .expect("tick N")
    };
    let first = attach.wait_for_line("a tick", |line| line.starts_with("tick "));
    assert!(
        number(&first) > 5,
        "{version}: attach replayed old output: {first}"
    );
    let start = number(&first);
    attach.wait_for_line("a later tick", |line| {
        line.starts_with("tick ") && number(line) >= start + 3
    });
}

fn check_bad_input(kubectl: &Kubectl) {
    let version = kubectl.version();
    let unbound = kubectl.fails(&["exec", "-n", NS, "unbound", "--", "true"]);
    assert!(
        unbound.contains("pod unbound does not have a host assigned"),
        "{version}: {unbound}"
    );
    let no_container = kubectl.fails(&["exec", "-n", NS, "ticker", "-c", "nope", "--", "true"]);
    assert!(
        no_container.contains("container nope is not valid for pod ticker"),
        "{version}: {no_container}"
    );
    let no_container_logs = kubectl.fails(&["logs", "-n", NS, "ticker", "-c", "nope"]);
    assert!(
        no_container_logs.contains("container nope is not valid for pod ticker"),
        "{version}: {no_container_logs}"
    );
    let missing = kubectl.fails(&["logs", "-n", NS, "no-such-pod"]);
    assert!(missing.contains("not found"), "{version}: {missing}");

    // A user who may read pods and their logs, but not exec into them.
    let viewer = ["--as=viewer"];
    let logs = kubectl.run(&[&viewer[..], &["logs", "-n", NS, "crasher", "--previous"]].concat());
    assert!(logs.status.success(), "{version}: viewer logs: {logs:?}");
    let exec = kubectl.fails(
        &[
            &viewer[..],
            &["exec", "-n", NS, "ticker", "-c", "main", "--", "true"],
        ]
        .concat(),
    );
    assert!(
        exec.contains("forbidden") && exec.contains("pods/exec"),
        "{version}: viewer exec: {exec}"
    );
}

fn grant_viewer(kubectl: &Kubectl) {
    let manifest = kubectl.home().join("viewer.yaml");
    std::fs::write(
        &manifest,
        format!(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {{name: viewer, namespace: {NS}}}\n\
             rules:\n- apiGroups: [\"\"]\n  resources: [pods, pods/log]\n  verbs: [get, list]\n---\n\
             apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {{name: viewer, namespace: {NS}}}\n\
             roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: viewer}}\n\
             subjects:\n- {{apiGroup: rbac.authorization.k8s.io, kind: User, name: viewer}}\n"
        ),
    )
    .expect("writing the viewer's role");
    kubectl.ok(&["apply", "-f", &manifest.display().to_string()]);
}

pub async fn check(host: &Host) {
    host.create(
        "/api/v1/namespaces",
        json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": NS } }),
    )
    .await;
    create_pods(host).await;
    check_node(host).await;
    let kubeconfig = host.kcp().kubeconfig();
    grant_viewer(&Kubectl::new(VERSIONS[0], &kubeconfig));
    for version in VERSIONS {
        let kubectl = Kubectl::new(version, &kubeconfig);
        // Durations are printed for the record, never asserted.
        let began = Instant::now();
        let lap = |what: &str, since: &mut Instant| {
            eprintln!(
                "kubectl {version}: {what} in {:.1}s",
                since.elapsed().as_secs_f64()
            );
            *since = Instant::now();
        };
        let mut since = began;
        check_logs(&kubectl);
        lap("logs checks", &mut since);
        check_exec(&kubectl);
        lap("exec checks (3 commands)", &mut since);
        check_port_forward(&kubectl).await;
        lap("port-forward checks", &mut since);
        check_attach(&kubectl);
        lap("attach check", &mut since);
        check_bad_input(&kubectl);
        lap("bad input checks", &mut since);
        // 1.27 can only speak SPDY; 1.33 must have used WebSockets, not fallen back.
        let log = host.agent_log_file();
        for stream in ["exec", "attach", "port-forward"] {
            let websocket = log
                .lines()
                .filter(|l| l.contains(&format!(" {stream} ")) && l.contains("transport=websocket"))
                .count();
            let spdy = log
                .lines()
                .filter(|l| l.contains(&format!(" {stream} ")) && l.contains("transport=spdy"))
                .count();
            assert!(spdy > 0, "{stream} over SPDY: {log}");
            assert_eq!(
                websocket > 0,
                version == "1.33",
                "{version}: {stream} over WebSockets"
            );
        }
    }
    // The Python client offers only `v4.channel.k8s.io` (over WebSockets).
    let before = host.websocket_execs();
    check_python_exec(&kubeconfig).await;
    assert_eq!(
        host.websocket_execs() - before,
        2,
        "the Python client's two exec sessions over WebSockets"
    );
    // Every exec ended and was reaped: once the crashing pod is gone, the agent's only children
    // are the two containers of `ticker`.
    host.delete(&format!("/api/v1/namespaces/{NS}/pods/crasher"))
        .await;
    let agent_pid = host.agent.as_ref().expect("agent").pid();
    host.eventually("no exec processes left", || async {
        let now = children(agent_pid);
        if now.len() == 2 {
            Ok(())
        } else {
            Err(format!("children of the agent: {now:?}"))
        }
    })
    .await;
}
