//! `kubectl kcp bind apiexport <path>:<name>`: upstream `bind.go`.
//!
//! Creates the APIBinding in the current workspace in the version discovery prefers, with the
//! claims answered by the flags, then waits (polling every 500 ms up to `--timeout`) until its
//! phase is `Bound`, printing upstream's two lines; failures keep upstream's wording around the
//! server's message.

use std::time::Duration;

use super::{Session, poll};
use crate::apibinding::{APIS_GROUP, ExportRef, binding_object, is_bound};
use crate::claims::{Claim, ClaimState, export_claims, parse_claim_flags};
use crate::cli::BindArgs;
use crate::error::Error;

const BIND_INTERVAL: Duration = Duration::from_millis(500);

/// Upstream's `Validate`: flag combinations and the parsed claims, before any request.
pub fn validate(args: &BindArgs) -> Result<(ExportRef, Vec<Claim>), Error> {
    let conflicts = [
        (
            args.accept_all && args.reject_all,
            "cannot use both --accept-all-permission-claims and --reject-all-permission-claims",
        ),
        (
            args.accept_all && !args.accept.is_empty(),
            "cannot use --accept-all-permission-claims with --accept-permission-claim",
        ),
        (
            args.accept_all && !args.reject.is_empty(),
            "cannot use --accept-all-permission-claims together with --reject-permission-claim",
        ),
        (
            args.reject_all && !args.reject.is_empty(),
            "cannot use --reject-all-permission-claims with --reject-permission-claim",
        ),
        (
            args.reject_all && !args.accept.is_empty(),
            "cannot use --reject-all-permission-claims together with --accept-permission-claim",
        ),
    ];
    if args.export.is_empty() {
        // the missing-argument error comes first, as in upstream's Validate
        ExportRef::parse(&args.export)?;
    }
    if let Some((_, message)) = conflicts.iter().find(|(bad, _)| *bad) {
        return Err(Error::msg(*message));
    }
    let export = ExportRef::parse(&args.export)?;
    let accepted = parse_claim_flags(&args.accept, ClaimState::Accepted)?;
    let rejected = parse_claim_flags(&args.reject, ClaimState::Rejected)?;
    for a in &accepted {
        if let Some(r) = rejected
            .iter()
            .find(|r| r.group == a.group && r.resource == a.resource)
        {
            return Err(Error::msg(format!(
                "accepted permission claim {} conflicts with rejected permission claim {}",
                a.display(),
                r.display()
            )));
        }
    }
    Ok((export, accepted.into_iter().chain(rejected).collect()))
}

pub async fn run(session: &mut Session, args: &BindArgs) -> Result<(), Error> {
    let (export, mut claims) = validate(args)?;
    let (client, current, version) = session.connect_apis(args.workspace.as_deref()).await?;

    if args.accept_all || args.reject_all {
        let path = format!(
            "{}/apis/{APIS_GROUP}/v1alpha1/apiexports/{}",
            export.path.request_path(),
            export.name
        );
        let object = client
            .get(&path)
            .await
            .map_err(|e| e.context(format!("failed to get APIExport {:?}", export.name)))?;
        let state = if args.accept_all {
            ClaimState::Accepted
        } else {
            ClaimState::Rejected
        };
        claims = export_claims(&object, state);
    }

    let body = binding_object(version, &args.name, &export, &claims);
    let created = client
        .post(&version.collection(&current), &body)
        .await
        .map_err(|e| e.context("failed to create APIBinding"))?;
    let name = created
        .pointer("/metadata/name")
        .and_then(serde_json::Value::as_str)
        .unwrap_or_default()
        .to_owned();
    println!("apibinding {name} created. Waiting to successfully bind ...");

    if !is_bound(&created) {
        let path = format!("{}/{name}", version.collection(&current));
        poll(BIND_INTERVAL, args.timeout, async || {
            Ok(is_bound(&client.get(&path).await?).then_some(()))
        })
        .await
        .map_err(|e| e.context(format!("could not bind {name}")))?;
    }
    println!("{name} created and bound.");
    Ok(())
}
