//! `kubectl ws create-context [<name>] [--overwrite]`: upstream `context.go`. A named context
//! pins a workspace, independent of the `workspace.kcp.io/current` context `use` rewrites.

use super::Session;
use crate::error::Error;
use crate::path::ClusterUrl;

pub fn run(session: &mut Session, name: Option<&str>, overwrite: bool) -> Result<(), Error> {
    create(session, name, None, overwrite, false)
}

/// Creates (or with `overwrite` updates) a context named `name` (default: the workspace path)
/// for the current workspace or for `server`; switches to it unless `keep_current`.
pub fn create(
    session: &mut Session,
    name: Option<&str>,
    server: Option<&str>,
    overwrite: bool,
    keep_current: bool,
) -> Result<(), Error> {
    let host = session.server().to_owned();
    let current = ClusterUrl::parse(&host).ok().flatten().ok_or_else(|| {
        Error::msg(format!(
            "current URL {host:?} does not point to a workspace"
        ))
    })?;
    let name = name
        .filter(|n| !n.is_empty())
        .map_or_else(|| current.path.to_string(), str::to_owned);
    let was_current = session.kubeconfig.current_context() == name;
    let existed = session.kubeconfig.create_context(
        &session.selected,
        &name,
        server,
        overwrite,
        keep_current,
    )?;
    session.kubeconfig.save()?;
    let verb = if existed { "Updated" } else { "Created" };
    if keep_current || was_current {
        println!("{verb} context {name:?}.");
    } else {
        println!("{verb} context {name:?} and switched to it.");
    }
    Ok(())
}
