//! Runs the built `kubectl-ws`, `kubectl-create-workspace` and `kubectl-kcp` binaries against a
//! tiny fake kcp that serves exactly the endpoints upstream's plugins call: discovery, Workspaces
//! in `/clusters/<path>/apis/tenancy.kcp.io/v1alpha1/workspaces`, the `~` home workspace, the
//! `cluster` LogicalCluster and, when a test enables it, apis.kcp.io (`plugins/apis_fake.rs`).
//! The `kubectl kcp` tests are in `plugins/kcp.rs`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "plugins/apis_fake.rs"]
mod apis_fake;
#[path = "plugins/kcp.rs"]
mod kcp;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

/// Workspaces by parent path; a created workspace is `Initializing` for one GET, then `Ready`.
#[derive(Default)]
struct State {
    base: String,
    children: BTreeMap<String, Vec<Value>>,
    pending_ready: Vec<String>,
    home: Option<String>,
    requests: Vec<String>,
    apis: Option<apis_fake::Apis>,
}

impl State {
    fn exists(&self, path: &str) -> bool {
        path == "root"
            || path
                .rsplit_once(':')
                .is_some_and(|(parent, name)| self.find(parent, name).is_some())
    }

    fn find(&self, parent: &str, name: &str) -> Option<&Value> {
        self.children
            .get(parent)?
            .iter()
            .find(|w| w["metadata"]["name"] == name)
    }

    fn add(&mut self, parent: &str, name: &str, phase: &str) -> Value {
        let ws = json!({
            "apiVersion": "tenancy.kcp.io/v1alpha1",
            "kind": "Workspace",
            "metadata": {"name": name},
            "spec": {
                "type": {"name": "universal", "path": "root"},
                "cluster": format!("lc-{name}"),
                "URL": format!("{}/clusters/{parent}:{name}", self.base),
            },
            "status": {"phase": phase},
        });
        self.children
            .entry(parent.to_owned())
            .or_default()
            .push(ws.clone());
        ws
    }

    /// A workspace as the server has it between creation and scheduling: `Scheduling`, without
    /// `spec.cluster` and `spec.URL`.
    fn add_unscheduled(&mut self, parent: &str, name: &str) {
        let ws = json!({
            "apiVersion": "tenancy.kcp.io/v1alpha1",
            "kind": "Workspace",
            "metadata": {"name": name},
            "spec": {"type": {"name": "universal", "path": "root"}},
            "status": {"phase": "Scheduling"},
        });
        self.children.entry(parent.to_owned()).or_default().push(ws);
    }
}

fn status(code: u16, reason: &str, message: &str) -> (u16, Value) {
    (
        code,
        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
               "reason": reason, "message": message, "code": code}),
    )
}

fn handle(
    state: &mut State,
    method: &str,
    uri: &str,
    content_type: &str,
    body: &[u8],
) -> (u16, Value) {
    state.requests.push(format!("{method} {uri}"));
    let Some(rest) = uri.strip_prefix("/clusters/") else {
        return status(
            404,
            "NotFound",
            "the server could not find the requested resource",
        );
    };
    let (cluster, resource) = rest.split_once('/').unwrap_or((rest, ""));
    if !state.exists(cluster) {
        return status(
            403,
            "Forbidden",
            &format!("forbidden: access to workspace {cluster:?} not permitted"),
        );
    }
    if let Some(apis) = state.apis.as_mut()
        && let Some(answer) = apis.handle(method, cluster, resource, content_type, body)
    {
        return answer;
    }
    let workspaces = "apis/tenancy.kcp.io/v1alpha1/workspaces";
    match (method, resource) {
        ("GET", "api") => (200, json!({"kind": "APIVersions", "versions": ["v1"]})),
        ("GET", "apis") => {
            let mut groups = vec![json!({"name": "tenancy.kcp.io"})];
            groups.extend(state.apis.as_ref().map(apis_fake::Apis::group));
            (200, json!({"kind": "APIGroupList", "groups": groups}))
        }
        ("GET", "apis/core.kcp.io/v1alpha1/logicalclusters/cluster") => (
            200,
            json!({"kind": "LogicalCluster", "status": {"phase": "Ready"}}),
        ),
        ("GET", r) if r == workspaces => {
            let items = state.children.get(cluster).cloned().unwrap_or_default();
            (200, json!({"kind": "WorkspaceList", "items": items}))
        }
        ("POST", r) if r == workspaces => {
            let Ok(obj) = serde_json::from_slice::<Value>(body) else {
                return status(400, "BadRequest", "bad body");
            };
            let name = obj["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            if state.find(cluster, &name).is_some() {
                let msg = format!("workspaces.tenancy.kcp.io {name:?} already exists");
                return status(409, "AlreadyExists", &msg);
            }
            state.pending_ready.push(format!("{cluster}:{name}"));
            (201, state.add(cluster, &name, "Scheduling"))
        }
        ("GET", r) if r.starts_with(workspaces) => {
            let name = &r[workspaces.len() + 1..];
            if cluster == "root" && name == "~" {
                return match &state.home {
                    Some(home) => (
                        200,
                        json!({"kind": "Workspace", "spec": {"URL": format!("{}/clusters/{home}", state.base)}}),
                    ),
                    None => status(404, "NotFound", "workspaces.tenancy.kcp.io \"~\" not found"),
                };
            }
            let key = format!("{cluster}:{name}");
            let Some(ws) = state.find(cluster, name).cloned() else {
                return status(
                    404,
                    "NotFound",
                    &format!("workspaces.tenancy.kcp.io {name:?} not found"),
                );
            };
            if let Some(i) = state.pending_ready.iter().position(|p| *p == key) {
                // answer `Initializing` once, then the workspace is Ready
                state.pending_ready.remove(i);
                let mut initializing = ws;
                initializing["status"]["phase"] = json!("Initializing");
                if let Some(list) = state.children.get_mut(cluster)
                    && let Some(stored) = list.iter_mut().find(|w| w["metadata"]["name"] == name)
                {
                    stored["status"]["phase"] = json!("Ready");
                }
                return (200, initializing);
            }
            (200, ws)
        }
        _ => status(
            404,
            "NotFound",
            "the server could not find the requested resource",
        ),
    }
}

fn serve(stream: TcpStream, state: &Mutex<State>) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    let mut length = 0;
    let mut content_type = String::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line)?;
        if line.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            if k.eq_ignore_ascii_case("content-length") {
                length = v.trim().parse().unwrap_or(0);
            } else if k.eq_ignore_ascii_case("content-type") {
                content_type = v.trim().to_owned();
            }
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    let mut parts = request_line.split_whitespace();
    let (method, uri) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let (code, value) = match state.lock() {
        Ok(mut state) => handle(&mut state, method, uri, &content_type, &body),
        Err(_) => status(500, "InternalError", "poisoned"),
    };
    let payload = value.to_string();
    let mut stream = stream;
    write!(
        stream,
        "HTTP/1.1 {code} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{payload}",
        payload.len()
    )
}

struct Fake {
    base: String,
    state: Arc<Mutex<State>>,
    dir: tempfile::TempDir,
}

impl Fake {
    /// root → org → {team → sub, lonely}, users → alice (home).
    fn start(with_home: bool) -> Fake {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let base = format!("http://{}", listener.local_addr().expect("addr"));
        let mut state = State {
            base: base.clone(),
            home: with_home.then(|| "root:users:alice".to_owned()),
            ..State::default()
        };
        state.add("root", "org", "Ready");
        state.add("root:org", "team", "Ready");
        state.add("root:org:team", "sub", "Ready");
        state.add("root:org", "lonely", "Ready");
        state.add("root", "users", "Ready");
        state.add("root:users", "alice", "Ready");
        let state = Arc::new(Mutex::new(state));
        let shared = state.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let _ = serve(stream, &shared);
            }
        });
        let dir = tempfile::tempdir().expect("tempdir");
        let fake = Fake { base, state, dir };
        let kubeconfig = format!(
            "apiVersion: v1\nkind: Config\npreferences: {{}}\nclusters:\n- name: kcp\n  cluster:\n    server: {}/clusters/root:org\n    extensions:\n    - name: keep-me\n      extension: {{answer: 42}}\ncontexts:\n- name: admin\n  context: {{cluster: kcp, user: admin}}\ncurrent-context: admin\nusers:\n- name: admin\n  user: {{token: s3cret}}\nx-unknown-top-level: still-here\n",
            fake.base
        );
        std::fs::write(fake.kubeconfig(), kubeconfig).expect("write kubeconfig");
        std::fs::set_permissions(fake.kubeconfig(), std::fs::Permissions::from_mode(0o600))
            .expect("chmod");
        fake
    }

    fn kubeconfig(&self) -> PathBuf {
        self.dir.path().join("config")
    }

    fn run(&self, bin: &str, args: &[&str]) -> Output {
        Command::new(bin)
            .args(args)
            .env(
                "KUBECONFIG",
                format!("{}:/nonexistent", self.kubeconfig().display()),
            )
            .env("HOME", self.dir.path())
            .output()
            .expect("run plugin")
    }

    fn ws(&self, args: &[&str]) -> Output {
        self.run(env!("CARGO_BIN_EXE_kubectl-ws"), args)
    }

    fn kcp(&self, args: &[&str]) -> Output {
        self.run(env!("CARGO_BIN_EXE_kubectl-kcp"), args)
    }

    /// Serves apis.kcp.io with APIBindings in `versions` (discovery order) and `preferred`.
    fn serve_apis(&self, versions: Vec<&'static str>, preferred: &'static str) {
        self.state.lock().expect("state").apis = Some(apis_fake::Apis::new(versions, preferred));
    }

    /// Runs `change` on the apis.kcp.io state (enabled by `serve_apis`).
    fn apis<T>(&self, change: impl FnOnce(&mut apis_fake::Apis) -> T) -> T {
        let mut state = self.state.lock().expect("state");
        change(state.apis.as_mut().expect("serve_apis first"))
    }

    fn requests(&self) -> Vec<String> {
        self.state
            .lock()
            .map(|s| s.requests.clone())
            .unwrap_or_default()
    }

    fn server(&self) -> String {
        let text = std::fs::read_to_string(self.kubeconfig()).expect("read kubeconfig");
        let doc: Value = yaml_serde::from_str(&text).expect("parse kubeconfig");
        let current = doc["current-context"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let ctx = doc["contexts"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["name"] == current.as_str());
        let cluster = ctx
            .map(|c| c["context"]["cluster"].clone())
            .unwrap_or_default();
        let entry = doc["clusters"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["name"] == cluster);
        entry
            .and_then(|c| c["cluster"]["server"].as_str())
            .unwrap_or_default()
            .to_owned()
    }
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[track_caller]
fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "failed: {}{}",
        stdout(out),
        stderr(out)
    );
    stdout(out)
}

#[test]
fn use_absolute_relative_parent_previous_home_and_current() {
    let fake = Fake::start(true);
    let server = |p: &str| format!("{}/clusters/{p}", fake.base);

    assert_eq!(
        ok(&fake.ws(&["current"])),
        "Current workspace is 'root:org'.\n"
    );
    assert_eq!(ok(&fake.ws(&[".", "--short"])), "root:org\n");

    let out = fake.ws(&[":root:org:team"]);
    assert_eq!(
        ok(&out),
        "Current workspace is 'root:org:team' (type root:universal).\n"
    );
    assert_eq!(fake.server(), server("root:org:team"));
    // upstream's calls: discovery of the target and the Workspace in its parent
    let requests = fake.requests();
    for expected in [
        "GET /clusters/root:org:team/api",
        "GET /clusters/root:org:team/apis",
        "GET /clusters/root:org/apis/tenancy.kcp.io/v1alpha1/workspaces/team",
    ] {
        assert!(
            requests.iter().any(|r| r == expected),
            "{expected} not in {requests:?}"
        );
    }

    assert_eq!(
        ok(&fake.ws(&["sub"])),
        "Current workspace is 'root:org:team:sub' (type root:universal).\n"
    );
    assert_eq!(
        ok(&fake.ws(&[".."])),
        "Current workspace is 'root:org:team' (type root:universal).\n"
    );
    assert_eq!(
        ok(&fake.ws(&["use", "..:lonely"])),
        "Current workspace is 'root:org:lonely' (type root:universal).\n"
    );
    assert_eq!(
        ok(&fake.ws(&["-"])),
        "Current workspace is 'root:org:team'.\n"
    );
    assert_eq!(
        ok(&fake.ws(&["-"])),
        "Current workspace is 'root:org:lonely'.\n"
    );
    assert_eq!(fake.server(), server("root:org:lonely"));

    assert_eq!(
        ok(&fake.ws(&["~"])),
        "Current workspace is 'root:users:alice' (type root:universal).\n"
    );
    assert_eq!(
        ok(&fake.ws(&["cd", ":root"])),
        "Current workspace is 'root' (type root).\n"
    );
    let legacy = fake.ws(&["root:org"]);
    assert_eq!(
        ok(&legacy),
        "Current workspace is 'root:org' (type root:universal).\n"
    );
    assert!(
        stderr(&legacy)
            .contains("Note: Using 'root:' to define an absolute path is no longer supported.")
    );

    // no argument: home, with upstream's note
    let home = fake.ws(&[]);
    assert_eq!(
        ok(&home),
        "Current workspace is 'root:users:alice' (type root:universal).\n"
    );
    assert!(stderr(&home).starts_with("Note: 'kubectl ws' now matches 'cd' semantics"));

    // the rewrite kept unknown fields, the original entries, extensions and the file mode
    let text = std::fs::read_to_string(fake.kubeconfig()).expect("read");
    let doc: Value = yaml_serde::from_str(&text).expect("parse");
    assert_eq!(doc["x-unknown-top-level"], "still-here");
    assert_eq!(doc["current-context"], "workspace.kcp.io/current");
    let clusters: Vec<&str> = doc["clusters"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(
        clusters,
        [
            "kcp",
            "workspace.kcp.io/current",
            "workspace.kcp.io/previous"
        ]
    );
    assert_eq!(
        doc["clusters"][1]["cluster"]["extensions"][0]["extension"]["answer"],
        42
    );
    assert_eq!(
        doc["clusters"][0]["cluster"]["server"],
        server("root:org").as_str()
    );
    let mode = std::fs::metadata(fake.kubeconfig())
        .expect("stat")
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600);
}

#[test]
fn create_enter_waits_for_ready() {
    let fake = Fake::start(true);
    let out = fake.ws(&["create", "fresh", "--enter"]);
    assert_eq!(
        ok(&out),
        "Workspace \"fresh\" (type root:universal) created. Waiting for it to be ready...\n\
         Workspace \"fresh\" (type root:universal) is ready to use.\n\
         Current workspace is 'root:org:fresh' (type root:universal).\n"
    );
    assert_eq!(
        fake.server(),
        format!("{}/clusters/root:org:fresh", fake.base)
    );
    let posted = fake
        .requests()
        .contains(&"POST /clusters/root:org/apis/tenancy.kcp.io/v1alpha1/workspaces".to_owned());
    assert!(posted);

    let create = env!("CARGO_BIN_EXE_kubectl-create-workspace");
    let out = fake.run(create, &["other", "--type", "root:universal"]);
    assert!(ok(&out).ends_with("Workspace \"other\" (type root:universal) is ready to use.\n"));
    assert_eq!(
        fake.server(),
        format!("{}/clusters/root:org:fresh", fake.base)
    );

    let again = fake.run(create, &["other"]);
    assert_eq!(again.status.code(), Some(1));
    assert_eq!(
        stderr(&again),
        "Error from server (AlreadyExists): workspaces.tenancy.kcp.io \"other\" already exists\n"
    );
    let out = fake.run(create, &["other", "--ignore-existing"]);
    assert_eq!(
        ok(&out),
        "Workspace \"other\" (type root:universal) already exists.\n\
         Workspace \"other\" (type root:universal) is ready to use.\n"
    );
    let out = fake.run(create, &["pinned", "--create-context", "mine"]);
    assert!(ok(&out).ends_with("is ready to use.\nCreated context \"mine\".\n"));
    assert_eq!(
        ok(&fake.ws(&["--context", "mine", "current"])),
        "Current workspace is 'root:org:fresh:pinned'.\n"
    );
    assert_eq!(
        ok(&fake.ws(&["create-context"])),
        "Created context \"root:org:fresh\" and switched to it.\n"
    );

    let bad = fake.run(create, &["x", "--ignore-existing", "--type", "universal"]);
    assert_eq!(
        stderr(&bad),
        "error: --ignore-existing must not be used with non-absolute type path\n"
    );
}

#[test]
fn tree_below_the_current_workspace() {
    let fake = Fake::start(true);
    assert_eq!(
        ok(&fake.ws(&["tree"])),
        ".\n└── org\n    ├── team\n    │   └── sub\n    └── lonely\n\n"
    );
    assert_eq!(
        ok(&fake.ws(&["tree", "--full", "-w", ":root:org:team"])),
        ".\n└── root:org:team\n    └── root:org:team:sub\n\n"
    );
    assert_eq!(
        ok(&fake.ws(&["tree", "--wide", "-w", "team"])),
        ".\n└── team     ws=-      lc=Ready\n    └── sub  ws=Ready  lc=Ready\n"
    );
}

/// Somebody creating a workspace while `tree` runs: until it is scheduled it has no `spec.URL`,
/// and it is a leaf of the tree, not a failure of the whole command.
#[test]
fn tree_with_a_workspace_not_scheduled_yet() {
    let fake = Fake::start(true);
    fake.state
        .lock()
        .expect("state")
        .add_unscheduled("root:org:team", "fresh");
    assert_eq!(
        ok(&fake.ws(&["tree"])),
        ".\n└── org\n    ├── team\n    │   ├── sub\n    │   └── fresh\n    └── lonely\n\n"
    );
    assert_eq!(
        ok(&fake.ws(&["tree", "--wide", "-w", "team"])),
        ".\n└── team       ws=-           lc=Ready\n    ├── sub    ws=Ready       lc=Ready\n    └── fresh  ws=Scheduling  lc=-\n"
    );
    // nothing is asked below it: it has no logical cluster yet
    let requests = fake.requests();
    assert!(
        !requests.iter().any(|r| r.contains("fresh")),
        "requests below the unscheduled workspace: {requests:?}"
    );
}

#[test]
fn errors_are_one_kubectl_line_and_leave_the_kubeconfig_alone() {
    let fake = Fake::start(false);
    let before = std::fs::read_to_string(fake.kubeconfig()).expect("read");

    let missing = fake.ws(&["nope"]);
    assert_eq!(missing.status.code(), Some(1));
    assert_eq!(
        stderr(&missing),
        "error: workspace \"root:org:nope\" not found\n"
    );

    let home = fake.ws(&["~"]);
    assert_eq!(home.status.code(), Some(1));
    assert_eq!(
        stderr(&home),
        "Error from server (NotFound): workspaces.tenancy.kcp.io \"~\" not found\n"
    );

    let invalid = fake.ws(&["Bad_Name"]);
    assert_eq!(
        stderr(&invalid),
        "error: invalid workspace path: Bad_Name\n"
    );
    let previous = fake.ws(&["-"]);
    assert_eq!(
        stderr(&previous),
        "error: no previous workspace found in kubeconfig\n"
    );

    let create_in_missing = fake.ws(&["create", "x", "-w", "nope"]);
    assert_eq!(create_in_missing.status.code(), Some(1));
    assert!(stderr(&create_in_missing).starts_with("Error from server (Forbidden): "));

    let unknown_context = fake.ws(&["--context", "ghost", "current"]);
    assert_eq!(
        stderr(&unknown_context),
        "error: current \"ghost\" context not found\n"
    );

    assert_eq!(
        std::fs::read_to_string(fake.kubeconfig()).expect("read"),
        before
    );
    assert!(Path::new(&fake.kubeconfig()).exists());
}
