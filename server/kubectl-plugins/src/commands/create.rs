//! `kubectl ws create` / `kubectl create workspace`: upstream `create.go`.
//!
//! Creating is asynchronous in kcp (scheduling, initializers), so like upstream the command
//! waits until the Workspace is visible and `status.phase` is `Ready` before it reports success
//! or enters it, so the next command never hits a half-initialized workspace.

use std::time::Duration;

use serde_json::{Map, Value, json};

use super::{Session, context, poll, selector, use_ws};
use crate::cli::CreateArgs;
use crate::error::Error;
use crate::output;
use crate::path::{ClusterPath, ROOT};

/// How long upstream waits for `Ready` (`ReadyWaitTimeout`).
const READY_TIMEOUT: Duration = Duration::from_secs(60);
const READY_INTERVAL: Duration = Duration::from_millis(500);
/// Upstream's "STOP THE BLEEDING" wait until the new Workspace shows up in GETs.
const VISIBLE_TIMEOUT: Duration = Duration::from_secs(5);
const VISIBLE_INTERVAL: Duration = Duration::from_millis(100);

/// `--type`: `name` (path defaulted by admission) or `path:name`; names are lower-cased.
pub fn type_reference(flag: &str) -> Option<Value> {
    if flag.is_empty() {
        return None;
    }
    Some(match flag.rfind(':') {
        None => json!({"name": flag.to_lowercase()}),
        Some(i) => json!({"name": flag[i + 1..].to_lowercase(), "path": &flag[..i]}),
    })
}

/// The Workspace object POSTed to `/clusters/<current>/apis/tenancy.kcp.io/v1alpha1/workspaces`.
pub fn workspace_object(args: &CreateArgs) -> Result<Value, Error> {
    let mut spec = Map::new();
    if let Some(typ) = type_reference(&args.workspace_type) {
        spec.insert("type".into(), typ);
    }
    if let Some(selector) = selector::parse(&args.location_selector)? {
        spec.insert("location".into(), json!({ "selector": selector }));
    }
    Ok(json!({
        "apiVersion": "tenancy.kcp.io/v1alpha1",
        "kind": "Workspace",
        "metadata": {"name": args.name},
        "spec": spec,
    }))
}

fn phase(workspace: &Value) -> &str {
    workspace
        .pointer("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn type_parts(workspace: &Value) -> (String, String) {
    let get = |k: &str| {
        workspace
            .pointer(&format!("/spec/type/{k}"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    (get("path"), get("name"))
}

pub async fn run(session: &mut Session, args: &CreateArgs) -> Result<(), Error> {
    // validate flags before talking to the server, as upstream's Validate does
    selector::parse(&args.location_selector)?;
    session.target_workspace(args.workspace.as_deref())?;
    let current = session.current()?;
    if args.ignore_existing
        && !args.workspace_type.is_empty()
        && !ClusterPath::new(args.workspace_type.as_str()).has_prefix(ROOT)
    {
        return Err(Error::msg(
            "--ignore-existing must not be used with non-absolute type path",
        ));
    }

    let client = session.client()?;
    let requested = type_reference(&args.workspace_type);
    let (mut ws, pre_existing) = match client
        .create_workspace(&current.path, &workspace_object(args)?)
        .await
    {
        Ok(ws) => (ws, false),
        Err(Error::Api(e)) if e.is_already_exists() && args.ignore_existing => {
            (client.get_workspace(&current.path, &args.name).await?, true)
        }
        Err(e) => return Err(e),
    };

    let (type_path, type_name) = type_parts(&ws);
    let reference = output::workspace_reference(
        &args.name,
        &crate::path::type_reference(&type_path, &type_name),
    );
    let ready = phase(&ws) == "Ready";
    if pre_existing {
        if let Some(requested) = &requested {
            let req_name = requested
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let req_path = requested
                .get("path")
                .and_then(Value::as_str)
                .unwrap_or_default();
            if (!type_name.is_empty() && type_name != req_name) || type_path != req_path {
                return Err(Error::msg(format!(
                    "workspace {:?} cannot be created with type {}, it already exists with different type {}",
                    args.name,
                    crate::path::type_reference(req_path, req_name),
                    crate::path::type_reference(&type_path, &type_name),
                )));
            }
        }
        if ready {
            println!("{reference} already exists.");
        } else {
            println!("{reference} already exists. Waiting for it to be ready...");
        }
    } else if !ready {
        println!("{reference} created. Waiting for it to be ready...");
    }

    // wait until the workspace is visible at all
    poll(VISIBLE_INTERVAL, VISIBLE_TIMEOUT, async || {
        match client.get_workspace(&current.path, &args.name).await {
            Ok(_) => Ok(Some(())),
            Err(Error::Api(e)) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    })
    .await?;

    if !ready {
        ws = poll(READY_INTERVAL, READY_TIMEOUT, async || {
            let got = client.get_workspace(&current.path, &args.name).await?;
            Ok((phase(&got) == "Ready").then_some(got))
        })
        .await?;
    }
    println!("{reference} is ready to use.");

    if !args.create_context.is_empty() {
        let url = ws
            .pointer("/spec/URL")
            .and_then(Value::as_str)
            .unwrap_or_default();
        return context::create(
            session,
            Some(&args.create_context),
            Some(url),
            args.ignore_existing,
            !args.enter,
        )
        .map_err(|e| Error::msg(format!("failed to create context: {e}")));
    }
    if args.enter {
        return use_ws::run(session, &args.name, false).await;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(name: &str, typ: &str, selector: &str) -> CreateArgs {
        CreateArgs {
            name: name.into(),
            workspace_type: typ.into(),
            enter: false,
            ignore_existing: false,
            location_selector: selector.into(),
            create_context: String::new(),
            workspace: None,
        }
    }

    #[test]
    fn type_flag_forms() {
        assert_eq!(type_reference(""), None);
        assert_eq!(
            type_reference("Universal"),
            Some(json!({"name": "universal"}))
        );
        assert_eq!(
            type_reference("root:org:Team"),
            Some(json!({"name": "team", "path": "root:org"}))
        );
    }

    #[test]
    fn workspace_bodies() {
        let body = workspace_object(&args("x", "", "")).ok();
        assert_eq!(
            body,
            Some(
                json!({"apiVersion": "tenancy.kcp.io/v1alpha1", "kind": "Workspace",
                "metadata": {"name": "x"}, "spec": {}})
            )
        );
        let body = workspace_object(&args("x", "root:universal", "region=eu")).ok();
        assert_eq!(
            body.and_then(|b| b.get("spec").cloned()),
            Some(json!({"type": {"name": "universal", "path": "root"},
                "location": {"selector": {"matchLabels": {"region": "eu"}}}}))
        );
    }
}
