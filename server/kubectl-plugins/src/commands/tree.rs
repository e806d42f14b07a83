//! `kubectl ws tree [--full] [--wide]`: upstream `tree.go`, listing `workspaces` in each
//! workspace below the current one and following each child's `spec.URL`.
//!
//! A Workspace has no `spec.URL` until it is scheduled: while it is `Scheduling` it has no logical
//! cluster, so nothing below it, and it is drawn as a leaf. Upstream fails the whole tree on it
//! ("current config context URL \"\" does not point to workspace", naming the child's URL, not the
//! kubeconfig's), so `tree` broke whenever anybody was creating a workspace anywhere below.

use std::future::Future;
use std::pin::Pin;

use serde_json::Value;

use super::Session;
use crate::cli::TreeArgs;
use crate::client::ApiClient;
use crate::error::Error;
use crate::output::{self, TreeNode};
use crate::path::{ClusterPath, ClusterUrl};

struct Walker<'a> {
    client: &'a ApiClient,
    full: bool,
    wide: bool,
}

type Children<'a> = Pin<Box<dyn Future<Output = Result<Vec<TreeNode>, Error>> + 'a>>;

impl Walker<'_> {
    /// `name\tws=<phase>\tlc=<phase>` for `--wide`, from the LogicalCluster's status; `lc=-`
    /// without a logical cluster (`path` is `None`: not scheduled yet).
    async fn label(&self, name: &str, path: Option<&ClusterPath>, workspace_phase: &str) -> String {
        if !self.wide {
            return name.to_owned();
        }
        let lc_phase = match path {
            None => "-".to_owned(),
            Some(path) => match self.client.get_logical_cluster(path).await {
                Ok(lc) => lc
                    .pointer("/status/phase")
                    .and_then(Value::as_str)
                    .filter(|p| !p.is_empty())
                    .unwrap_or("Unknown")
                    .to_owned(),
                Err(_) => "Unknown".to_owned(),
            },
        };
        let ws = if workspace_phase.is_empty() {
            "-"
        } else {
            workspace_phase
        };
        format!("{name}\tws={ws}\tlc={lc_phase}")
    }

    fn children<'s>(&'s self, parent: ClusterPath, parent_name: String) -> Children<'s> {
        Box::pin(async move {
            let workspaces = match self.client.list_workspaces(&parent).await {
                Ok(items) => items,
                Err(Error::Api(e)) if e.is_not_found() => return Ok(Vec::new()),
                Err(e) => return Err(e),
            };
            let mut nodes = Vec::new();
            for ws in workspaces {
                if ws
                    .pointer("/metadata/deletionTimestamp")
                    .is_some_and(|t| !t.is_null())
                {
                    continue;
                }
                let mut name = ws
                    .pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                if self.full {
                    name = format!("{parent_name}:{name}");
                }
                // mounts are served by their provider: a leaf, never recursed into
                if ws.pointer("/spec/mount").is_some_and(|m| !m.is_null()) {
                    nodes.push(TreeNode::new(format!("{name} [m]")));
                    continue;
                }
                let phase = ws
                    .pointer("/status/phase")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let url = ws
                    .pointer("/spec/URL")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                // not scheduled yet: no logical cluster to list, a leaf
                if url.is_empty() {
                    nodes.push(TreeNode::new(self.label(&name, None, phase).await));
                    continue;
                }
                let child = ClusterUrl::parse(url).ok().flatten().ok_or_else(|| {
                    Error::msg(format!(
                        "current config context URL {url:?} does not point to workspace"
                    ))
                })?;
                let label = self.label(&name, Some(&child.path), phase).await;
                let children = self.children(child.path, name).await?;
                nodes.push(TreeNode { label, children });
            }
            Ok(nodes)
        })
    }
}

pub async fn run(session: &mut Session, args: &TreeArgs) -> Result<(), Error> {
    session.target_workspace(args.workspace.as_deref())?;
    let host = session.server().to_owned();
    let Some(current) = ClusterUrl::parse(&host).ok().flatten() else {
        println!("current context URL {host:?} does not point directly to a kcp workspace");
        return Ok(());
    };
    let client = session.client()?;
    let walker = Walker {
        client: &client,
        full: args.full,
        wide: args.wide,
    };
    let full_name = current.path.to_string();
    let name = if args.full {
        full_name
    } else {
        full_name.rsplit(':').next().unwrap_or_default().to_owned()
    };
    let label = walker.label(&name, Some(&current.path), "").await;
    let children = walker.children(current.path.clone(), name).await?;
    let rendered = output::render_tree(&[TreeNode { label, children }]);
    if args.wide {
        print!("{}", output::align_tabs(&rendered));
    } else {
        // upstream prints treeprint's output with Println: a trailing blank line
        println!("{rendered}");
    }
    Ok(())
}
