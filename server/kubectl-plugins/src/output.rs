//! Everything the plugins print, byte-for-byte like upstream so scripts and docs written for
//! kcp's `kubectl ws` keep working: the current-workspace line, workspace references, the
//! `treeprint` drawing of `kubectl ws tree`, tab-aligned tables, APIBinding claim warnings and
//! kubectl-style errors.

use serde_json::Value;

use crate::error::Error;
use crate::path::ClusterUrl;

/// Upstream `printCurrentWorkspace`; `None` means print nothing (`--short` off a workspace URL).
pub fn current_workspace(host: &str, short: bool, workspace_type: Option<&str>) -> Option<String> {
    match ClusterUrl::parse(host).ok().flatten() {
        None if short => None,
        None => Some(format!("Current workspace is the URL {host:?}.")),
        Some(url) if short => Some(url.path.to_string()),
        Some(url) => {
            let typ = workspace_type
                .map(|t| format!(" (type {t})"))
                .unwrap_or_default();
            Some(format!("Current workspace is '{}'{typ}.", url.path))
        }
    }
}

/// `Workspace "name" (type root:universal)`, the subject of every `create` line.
pub fn workspace_reference(name: &str, workspace_type: &str) -> String {
    format!("Workspace {name:?} (type {workspace_type})")
}

/// A node of `kubectl ws tree`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TreeNode {
    pub label: String,
    pub children: Vec<TreeNode>,
}

impl TreeNode {
    pub fn new(label: impl Into<String>) -> Self {
        Self {
            label: label.into(),
            children: Vec::new(),
        }
    }
}

/// github.com/xlab/treeprint's rendering of a tree whose unnamed root is `.`.
pub fn render_tree(top: &[TreeNode]) -> String {
    let mut out = String::from(".\n");
    render_level(&mut out, top, &mut Vec::new());
    out
}

fn render_level(out: &mut String, nodes: &[TreeNode], ended: &mut Vec<bool>) {
    for (i, node) in nodes.iter().enumerate() {
        let last = i + 1 == nodes.len();
        for &done in ended.iter() {
            out.push_str(if done { "    " } else { "│   " });
        }
        out.push_str(if last { "└── " } else { "├── " });
        out.push_str(&node.label);
        out.push('\n');
        ended.push(last);
        render_level(out, &node.children, ended);
        ended.pop();
    }
}

/// Go `text/tabwriter` with minwidth 0 and padding 2, as `tree --wide` uses.
pub fn align_tabs(text: &str) -> String {
    align_tabs_padded(text, 2)
}

/// Go `text/tabwriter` with minwidth 0 and the given padding: within each run of lines
/// containing tabs, tab-terminated cells are padded to their column's widest cell.
pub fn align_tabs_padded(text: &str, padding: usize) -> String {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let mut out = String::new();
    let mut i = 0;
    while i < lines.len() {
        if !lines[i].contains('\t') {
            out.push_str(lines[i]);
            i += 1;
            continue;
        }
        let start = i;
        while i < lines.len() && lines[i].contains('\t') {
            i += 1;
        }
        let block: Vec<Vec<&str>> = lines[start..i]
            .iter()
            .map(|l| l.split('\t').collect())
            .collect();
        let mut widths: Vec<usize> = Vec::new();
        for cells in &block {
            for (col, cell) in cells.iter().take(cells.len() - 1).enumerate() {
                let width = cell.chars().count() + padding;
                match widths.get_mut(col) {
                    Some(w) => *w = (*w).max(width),
                    None => widths.push(width),
                }
            }
        }
        for cells in &block {
            for (col, cell) in cells.iter().enumerate() {
                out.push_str(cell);
                if col + 1 < cells.len() {
                    let pad = widths[col] - cell.chars().count();
                    out.extend(std::iter::repeat_n(' ', pad));
                }
            }
        }
    }
    out
}

/// Upstream `findUnresolvedPermissionClaims`: warnings for APIBindings whose permission claims
/// do not match what their APIExport asks for (including its quirk of warning three times for
/// a claim missing from the spec).
pub fn permission_claim_warnings(bindings: &[Value]) -> Vec<String> {
    let mut warnings = Vec::new();
    for binding in bindings {
        let name = binding
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let exported = list(binding.pointer("/status/exportPermissionClaims"));
        let specified = list(binding.pointer("/spec/permissionClaims"));
        for claim in exported {
            let mut found = false;
            let mut ack = false;
            let mut expected: Vec<String> = Vec::new();
            let mut actual: Vec<String> = Vec::new();
            for spec in specified.iter().filter(|s| same_gri(claim, s)) {
                found = true;
                let state = field(spec, "state");
                ack = state == "Accepted" || state == "Rejected";
                expected = verbs(claim);
                actual = verbs(spec);
            }
            let claim_name = claim_string(claim);
            if !found {
                warnings.push(format!(
                    "Warning: claim for {claim_name} exported but not specified on APIBinding {name}\nAdd this claim to the APIBinding's Spec."
                ));
            }
            if !ack {
                warnings.push(format!(
                    "Warning: claim for {claim_name} specified on APIBinding {name} but not accepted or rejected."
                ));
            }
            if actual != expected || !found {
                warnings.push(format!(
                    "Warning: allowed verbs ({}) on claim for {claim_name} on APIBinding {name} do not match expected verbs ({}).",
                    actual.join(","),
                    expected.join(",")
                ));
            }
        }
    }
    warnings
}

fn list(value: Option<&Value>) -> Vec<&Value> {
    value
        .and_then(Value::as_array)
        .map(|a| a.iter().collect())
        .unwrap_or_default()
}

fn field<'a>(value: &'a Value, key: &str) -> &'a str {
    value.get(key).and_then(Value::as_str).unwrap_or_default()
}

fn same_gri(a: &Value, b: &Value) -> bool {
    ["group", "resource", "identityHash"]
        .iter()
        .all(|k| field(a, k) == field(b, k))
}

fn verbs(claim: &Value) -> Vec<String> {
    let mut verbs: Vec<String> = list(claim.get("verbs"))
        .into_iter()
        .filter_map(Value::as_str)
        .map(str::to_owned)
        .collect();
    verbs.sort();
    verbs.dedup();
    verbs
}

fn claim_string(claim: &Value) -> String {
    let (group, resource, hash) = (
        field(claim, "group"),
        field(claim, "resource"),
        field(claim, "identityHash"),
    );
    match (group.is_empty(), hash.is_empty()) {
        (true, _) => resource.to_owned(),
        (false, true) => format!("{resource}.{group}"),
        (false, false) => format!("{resource}.{group}:{hash}"),
    }
}

/// kubectl's `StandardErrorMessage`: Status errors as `Error from server (Reason): ...`.
pub fn error_line(err: &Error) -> String {
    match err.api() {
        Some(api) if !api.reason.is_empty() => {
            format!("Error from server ({}): {}", api.reason, api.message)
        }
        Some(api) => format!("Error from server: {}", api.message),
        None => format!("error: {err}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ApiError;

    #[test]
    fn current_workspace_lines() {
        let host = "https://h/clusters/root:org";
        assert_eq!(
            current_workspace(host, false, None).as_deref(),
            Some("Current workspace is 'root:org'.")
        );
        assert_eq!(
            current_workspace(host, false, Some("root:universal")).as_deref(),
            Some("Current workspace is 'root:org' (type root:universal).")
        );
        assert_eq!(
            current_workspace(host, true, None).as_deref(),
            Some("root:org")
        );
        assert_eq!(
            current_workspace("https://test", false, None).as_deref(),
            Some("Current workspace is the URL \"https://test\".")
        );
        assert_eq!(current_workspace("https://test", true, None), None);
        assert_eq!(
            workspace_reference("x", "root:universal"),
            "Workspace \"x\" (type root:universal)"
        );
    }

    fn node(label: &str, children: Vec<TreeNode>) -> TreeNode {
        TreeNode {
            label: label.into(),
            children,
        }
    }

    #[test]
    fn tree_matches_treeprint() {
        let tree = node(
            "root",
            vec![
                node(
                    "a",
                    vec![node("a1", vec![node("deep", vec![])]), node("a2", vec![])],
                ),
                node("b", vec![node("b1", vec![])]),
                node("m [m]", vec![]),
            ],
        );
        let expected = "\
.
└── root
    ├── a
    │   ├── a1
    │   │   └── deep
    │   └── a2
    ├── b
    │   └── b1
    └── m [m]
";
        assert_eq!(render_tree(&[tree]), expected);
        assert_eq!(render_tree(&[node("leaf", vec![])]), ".\n└── leaf\n");
    }

    #[test]
    fn wide_tree_is_tab_aligned() {
        let tree = node(
            "root\tws=-\tlc=Ready",
            vec![
                node("a-long-name\tws=Ready\tlc=Ready", vec![]),
                node("b\tws=Initializing\tlc=Unknown", vec![]),
            ],
        );
        let expected = "\
.
└── root             ws=-             lc=Ready
    ├── a-long-name  ws=Ready         lc=Ready
    └── b            ws=Initializing  lc=Unknown
";
        assert_eq!(align_tabs(&render_tree(&[tree])), expected);
    }

    #[test]
    fn claim_warnings() {
        let binding: Value = serde_json::json!({
            "metadata": {"name": "b1"},
            "spec": {"permissionClaims": [
                {"group": "", "resource": "secrets", "verbs": ["get"], "state": "Accepted"},
            ]},
            "status": {"exportPermissionClaims": [
                {"group": "", "resource": "secrets", "verbs": ["get"]},
                {"group": "g.io", "resource": "things", "identityHash": "abc", "verbs": ["list"]},
            ]},
        });
        let warnings = permission_claim_warnings(&[binding]);
        assert_eq!(warnings.len(), 3);
        assert_eq!(
            warnings[0],
            "Warning: claim for things.g.io:abc exported but not specified on APIBinding b1\nAdd this claim to the APIBinding's Spec."
        );
        assert_eq!(
            warnings[2],
            "Warning: allowed verbs () on claim for things.g.io:abc on APIBinding b1 do not match expected verbs ()."
        );
    }

    #[test]
    fn errors_like_kubectl() {
        let api = ApiError {
            code: 404,
            reason: "NotFound".into(),
            message: "workspaces.tenancy.kcp.io \"x\" not found".into(),
        };
        assert_eq!(
            error_line(&Error::Api(api)),
            "Error from server (NotFound): workspaces.tenancy.kcp.io \"x\" not found"
        );
        assert_eq!(error_line(&Error::msg("boom")), "error: boom");
    }
}
