//! A three-level tree built the way users build one: `kubectl create -f` a Workspace, then the
//! `kubectl ws` and `kubectl create workspace` plugins, with the oldest and the newest kubectl.

use super::*;

/// Runs `kubectl args` until its stdout (trimmed) is `want`.
fn wait_output(kubectl: &Kubectl, args: &[&str], want: &str) {
    kubectl.wait_for_output(args, want, SETTLED_WITHIN);
}

/// `kubectl ws current` names `path`.
fn assert_current(kubectl: &Kubectl, path: &str) {
    let out = kubectl.ok(&["ws", "current"]);
    assert!(
        out.contains(&format!("Current workspace is '{path}'")),
        "kubectl {} ws current: {out}",
        kubectl.version()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn three_level_tree_with_kubectl_and_the_plugin() {
    let server = SERVER.get().await;
    let plugins = plugins();
    for (version, org) in [("1.33", "org"), ("1.27", "org-old")] {
        let kubectl = Kubectl::with_plugins(version, &server.kubeconfig(), &plugins);
        let v = version;

        // Plain kubectl: a Workspace from a file, defaulted to root's default child type.
        let file = kubectl.home().join("org.yaml");
        std::fs::write(
            &file,
            format!(
                "apiVersion: tenancy.kcp.io/v1alpha1\nkind: Workspace\nmetadata:\n  name: {org}\n"
            ),
        )
        .unwrap();
        let out = kubectl.ok(&["create", "-f", file.to_str().unwrap()]);
        assert!(
            out.contains(&format!("workspace.tenancy.kcp.io/{org} created")),
            "kubectl {v} create -f: {out}"
        );
        wait_output(
            &kubectl,
            &["get", "workspace", org, "-o", "jsonpath={.status.phase}"],
            "Ready",
        );
        let typ = kubectl.ok(&[
            "get",
            "ws",
            org,
            "-o",
            "jsonpath={.spec.type.path}:{.spec.type.name}",
        ]);
        assert_eq!(
            typ.trim(),
            "root:organization",
            "kubectl {v}: type of {org}"
        );
        let url = kubectl.ok(&["get", "ws", org, "-o", "jsonpath={.spec.URL}"]);
        assert!(
            url.trim().ends_with(&format!("/clusters/root:{org}")),
            "kubectl {v}: spec.URL of {org}: {url}"
        );
        let table = kubectl.ok(&["get", "workspaces"]);
        let row = table
            .lines()
            .find(|line| line.split_whitespace().next() == Some(org))
            .unwrap_or_else(|| panic!("kubectl {v} get workspaces has no {org}:\n{table}"));
        assert!(row.contains("Ready"), "kubectl {v} get workspaces: {table}");

        // The plugins: enter org, create and enter team, then app.
        let out = kubectl.ok(&["ws", "use", &format!(":root:{org}")]);
        assert!(
            out.contains(&format!("Current workspace is 'root:{org}'")),
            "kubectl {v} ws use: {out}"
        );
        let out = kubectl.ok(&["ws", "create", "team", "--type", "team", "--enter"]);
        assert!(
            out.contains(r#"Workspace "team" (type root:team) created"#)
                && out.contains("is ready to use")
                && out.contains(&format!("Current workspace is 'root:{org}:team'")),
            "kubectl {v} ws create team --enter: {out}"
        );
        // kubectl looks up plugins for subcommands of its own commands (`create workspace`) from
        // 1.28 on; 1.27 uses the other plugin.
        let create_app: &[&str] = if version == "1.27" {
            &["ws", "create", "app", "--enter"]
        } else {
            &["create", "workspace", "app", "--enter"]
        };
        let out = kubectl.ok(create_app);
        assert!(
            out.contains(r#"Workspace "app" (type root:universal) created"#)
                && out.contains(&format!("Current workspace is 'root:{org}:team:app'")),
            "kubectl {v} {create_app:?}: {out}"
        );
        assert_current(&kubectl, &format!("root:{org}:team:app"));

        // The initializer of root:universal made the namespaces of the new workspace.
        let namespaces = kubectl.ok(&["get", "namespaces", "-o", "name"]);
        for ns in ["namespace/default", "namespace/kube-system"] {
            assert!(
                namespaces.lines().any(|line| line.trim() == ns),
                "kubectl {v} get ns in root:{org}:team:app: {namespaces}"
            );
        }
        kubectl.ok(&[
            "create",
            "configmap",
            "hello",
            "-n",
            "default",
            "--from-literal=a=b",
        ]);

        // Parent and back.
        let out = kubectl.ok(&["ws", ".."]);
        assert!(
            out.contains(&format!("Current workspace is 'root:{org}:team'")),
            "kubectl {v} ws ..: {out}"
        );
        let apps = kubectl.ok(&["get", "workspaces", "-o", "name"]);
        assert_eq!(
            apps.trim(),
            "workspace.tenancy.kcp.io/app",
            "kubectl {v} get ws in root:{org}:team"
        );
        // The configmap belongs to app, not its parent.
        let run = kubectl.run(&["get", "configmap", "hello", "-n", "default"]);
        assert!(
            !run.status.success(),
            "kubectl {v}: hello leaked into team: {run:?}"
        );
        let out = kubectl.ok(&["ws", "-"]);
        assert!(
            out.contains(&format!("Current workspace is 'root:{org}:team:app'")),
            "kubectl {v} ws -: {out}"
        );
        kubectl.ok(&["get", "configmap", "hello", "-n", "default"]);

        // The tree from root.
        kubectl.ok(&["ws", ":root"]);
        assert_current(&kubectl, "root");
        let tree = kubectl.ok(&["ws", "tree"]);
        // The first line labelled `name` after line `after`: (line, indentation).
        let line_of = |name: &str, after: usize| -> (usize, usize) {
            tree.lines()
                .enumerate()
                .skip(after)
                .find_map(|(index, line)| {
                    let label = line.trim_start_matches(|c: char| !c.is_ascii_alphanumeric());
                    (label == name).then(|| (index, line.chars().count() - label.len()))
                })
                .unwrap_or_else(|| panic!("kubectl {v} ws tree lacks {name}:\n{tree}"))
        };
        let (root_line, root_indent) = line_of("root", 0);
        let (org_line, org_indent) = line_of(org, root_line);
        let (team_line, team_indent) = line_of("team", org_line);
        let (app_line, app_indent) = line_of("app", team_line);
        assert!(
            root_line < org_line && org_line < team_line && team_line < app_line,
            "kubectl {v} ws tree order:\n{tree}"
        );
        assert!(
            root_indent < org_indent && org_indent < team_indent && team_indent < app_indent,
            "kubectl {v} ws tree nesting:\n{tree}"
        );

        // Relative names go down from the current workspace, one or several segments at once.
        let out = kubectl.ok(&["ws", "use", org]);
        assert!(
            out.contains(&format!("Current workspace is 'root:{org}'")),
            "kubectl {v} ws use {org}: {out}"
        );
        kubectl.ok(&["ws", "use", "team:app"]);
        assert_current(&kubectl, &format!("root:{org}:team:app"));
        kubectl.ok(&["ws", "use", ":root"]);

        // A workspace that does not exist: the kubeconfig keeps pointing at root.
        let err = kubectl.fails(&["ws", "use", &format!(":root:{org}:nope")]);
        assert!(!err.is_empty(), "kubectl {v} ws use of a missing workspace");
        assert_current(&kubectl, "root");
    }
}
