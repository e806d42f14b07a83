//! `kubectl ws [use] <workspace>` and `kubectl ws current`: upstream `use.go`.
//!
//! The target must exist before the kubeconfig changes: like upstream, discovery of the target
//! (`/clusters/<path>/api`, `/apis`) decides access and a `GET` of the Workspace in the parent
//! decides existence, so a typo fails instead of leaving a kubeconfig pointing nowhere.

use serde_json::Value;

use super::Session;
use crate::error::Error;
use crate::output;
use crate::path::{self, ClusterPath, ROOT, Target};

/// Upstream `printCurrentWorkspace`.
pub fn print_current(host: &str, short: bool, workspace_type: Option<&str>) {
    if let Some(line) = output::current_workspace(host, short, workspace_type) {
        println!("{line}");
    }
}

pub async fn run(session: &mut Session, arg: &str, short: bool) -> Result<(), Error> {
    let home_dir = std::env::var("HOME").ok();
    let parsed = path::parse_target(arg, home_dir.as_deref(), short);
    for note in &parsed.notes {
        eprintln!("{note}");
    }
    let target = match parsed.target {
        Target::Previous => {
            let server = session.kubeconfig.swap_previous(&session.selected)?;
            session.kubeconfig.save()?;
            warn_about_bindings(session, &server).await;
            print_current(&server, short, None);
            return Ok(());
        }
        Target::Current => {
            print_current(session.server(), short, None);
            return Ok(());
        }
        Target::Root => {
            let current = session.current()?;
            let server = current.with_path(&current.path.top());
            return commit(session, &server, short, None).await;
        }
        Target::Home(rest) => {
            let home = home_path(session).await?;
            Target::Absolute(format!("{home}{rest}"))
        }
        other => other,
    };

    let current = session.current()?;
    let path = path::resolve(&target, &current.path, arg)?;
    let workspace_type = verify(session, &path).await?;
    let server = current.with_path(&path);
    commit(session, &server, short, workspace_type.as_deref()).await?;
    if parsed.went_home_implicitly {
        eprintln!("{}", path::NOTE_CD_SEMANTICS);
    }
    Ok(())
}

/// `GET /clusters/root/apis/tenancy.kcp.io/v1alpha1/workspaces/~`, whose `spec.URL` is home.
async fn home_path(session: &Session) -> Result<ClusterPath, Error> {
    let home = session
        .client()?
        .get_workspace(&ClusterPath::new(ROOT), "~")
        .await?;
    let url = home
        .pointer("/spec/URL")
        .and_then(Value::as_str)
        .unwrap_or_default();
    path::home_path_from_url(url)
}

/// Upstream's existence check. Returns the workspace type to print, when known.
async fn verify(session: &Session, target: &ClusterPath) -> Result<Option<String>, Error> {
    let client = session.client()?;
    let denied = match client.discovery_group_count(target).await {
        Ok(groups) => groups == 0,
        Err(Error::Api(e)) if e.is_forbidden() => true,
        Err(e) => return Err(e),
    };

    let mut workspace_type = None;
    let mut not_found = false;
    if target.as_str() == ROOT {
        workspace_type = Some(ROOT.to_owned());
    } else {
        let (parent, name) = target.split();
        if !name.is_empty() {
            match client.get_workspace(&parent, name).await {
                Ok(ws) => workspace_type = type_of(&ws),
                Err(Error::Api(e)) if e.is_not_found() => not_found = true,
                // a 403 in the parent does not stop entering the workspace
                Err(_) => {}
            }
        }
    }
    match (denied, not_found) {
        (true, true) => Err(Error::msg(format!(
            "workspace {:?} not found",
            target.as_str()
        ))),
        (true, false) => Err(Error::msg(format!(
            "access to workspace {:?} denied",
            target.as_str()
        ))),
        _ => Ok(workspace_type),
    }
}

/// `spec.type` as `path:name`, if set.
pub fn type_of(workspace: &Value) -> Option<String> {
    let typ = workspace.pointer("/spec/type")?;
    let name = typ.get("name").and_then(Value::as_str).unwrap_or_default();
    let path = typ.get("path").and_then(Value::as_str).unwrap_or_default();
    Some(path::type_reference(path, name))
}

/// Upstream `commitConfig`: rewrite the kubeconfig, warn about claims, print the result.
async fn commit(
    session: &mut Session,
    server: &str,
    short: bool,
    workspace_type: Option<&str>,
) -> Result<(), Error> {
    session.kubeconfig.switch_to(&session.selected, server)?;
    session.kubeconfig.save()?;
    warn_about_bindings(session, server).await;
    print_current(server, short, workspace_type);
    Ok(())
}

/// Upstream `getAPIBindings` + `findUnresolvedPermissionClaims`: never fails the command.
async fn warn_about_bindings(session: &Session, server: &str) {
    let Some(url) = path::ClusterUrl::parse(server).ok().flatten() else {
        return;
    };
    let bindings = match session.client() {
        Ok(client) => client.list_apibindings(&url.path).await,
        Err(e) => Err(e),
    };
    match bindings {
        Ok(bindings) => {
            for warning in output::permission_claim_warnings(&bindings) {
                eprintln!("{warning}");
            }
        }
        Err(Error::Api(e)) if e.is_forbidden() || e.is_not_found() => {}
        Err(e) => eprintln!("error checking APIBindings: {e}"),
    }
}
