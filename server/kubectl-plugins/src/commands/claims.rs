//! `kubectl kcp claims get apibinding [name]` and `kubectl kcp claims accept|reject <name>`:
//! upstream `claims.go`.
//!
//! `get` prints the permission claims in the bindings' specs with their state. `accept` and
//! `reject` set the state of the claims on one resource (`--resource resource.group`) or of the
//! claim with one identity hash (`--identity-hash`) and write `spec.permissionClaims` back as a
//! JSON merge patch guarded by the binding's resourceVersion (upstream sends an Update). Unlike
//! upstream, which then reports success whatever happened, a call naming no claim, or naming
//! one the binding does not have, fails instead of changing nothing.

use serde_json::{Value, json};

use super::Session;
use crate::claims::{ClaimState, ClaimTarget, claims_table, with_claim_state};
use crate::cli::ClaimAnswerArgs;
use crate::client::items;
use crate::error::Error;

pub async fn get(
    session: &mut Session,
    name: Option<&str>,
    workspace: Option<&str>,
) -> Result<(), Error> {
    let (client, cluster, version) = session.connect_apis(workspace).await?;
    let collection = version.collection(&cluster);
    let bindings = match name.filter(|n| !n.is_empty()) {
        None => items(client.get(&collection).await.map_err(|e| {
            e.context(format!(
                "error listing APIBindings in {:?} workspace",
                cluster.as_str()
            ))
        })?),
        Some(name) => vec![
            client
                .get(&format!("{collection}/{name}"))
                .await
                .map_err(|e| e.context("error finding APIBinding"))?,
        ],
    };
    print!("{}", claims_table(&bindings, version));
    Ok(())
}

pub async fn answer(
    session: &mut Session,
    args: &ClaimAnswerArgs,
    state: ClaimState,
) -> Result<(), Error> {
    if args.name.is_empty() {
        return Err(Error::msg("error APIBinding name is missing"));
    }
    let target = ClaimTarget::from_flags(&args.resource, &args.identity_hash)
        .ok_or_else(|| Error::msg("one of --resource or --identity-hash is required"))?;
    let (client, cluster, version) = session.connect_apis(args.workspace.as_deref()).await?;
    let path = format!("{}/{}", version.collection(&cluster), args.name);
    let failed = |e: Error| {
        e.context(format!(
            "error updating permission claim for APIBinding {:?}",
            args.name
        ))
    };
    let binding = client.get(&path).await.map_err(failed)?;
    let described = match &target {
        ClaimTarget::Resource { .. } => format!("claim {:?}", args.resource),
        ClaimTarget::IdentityHash(hash) => format!("claim with identity hash {hash:?}"),
    };
    let claims = with_claim_state(&binding, &target, state).ok_or_else(|| {
        Error::msg(format!(
            "APIBinding {:?} has no permission claim matching {described}",
            args.name
        ))
    })?;
    let resource_version = binding
        .pointer("/metadata/resourceVersion")
        .cloned()
        .unwrap_or(Value::Null);
    let patch = json!({
        "metadata": {"resourceVersion": resource_version},
        "spec": {"permissionClaims": claims},
    });
    client.merge_patch(&path, &patch).await.map_err(failed)?;
    println!(
        "{described} on APIBinding {:?} is {}",
        args.name,
        state.past_tense()
    );
    Ok(())
}
