//! The operator's finalizers: adding and removing them, and ending a best-effort cleanup.
//!
//! Both writes are merge patches that carry the `resourceVersion` they were computed from, so a
//! concurrent change to the finalizer list is a conflict (retried) rather than overwritten.
//! Cleanups reach into kcp, which may be gone or broken; a finalizer that waited for it forever
//! would wedge the deletion of the object (and of its namespace), so after [`MAX_ATTEMPTS`]
//! failed cleanups (with the usual backoff in between) the finalizer is removed anyway, with a
//! Warning event that says what may have been left behind. Only failures of the cleanup itself
//! count: reconciles that failed before the deletion (say, while kcp was still starting) never
//! use up its attempts. That is the Kubeconfig's rule ([`release`]); the Shard finalizer
//! (`deregister`) waits instead, because giving up there orphans workspaces, and follows the
//! rule only once the user forces the deletion.

use kube::api::Patch;
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType};
use kube::{Api, Resource, ResourceExt};
use serde_json::json;

use super::{Context, Error, Watched, backoff, merge_params};

/// Failed cleanups of a deleted object before its finalizer is removed regardless.
pub const MAX_ATTEMPTS: u32 = 5;

/// What a successful cleanup did, for its event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cleaned {
    pub reason: &'static str,
    pub note: String,
}

/// Ends the cleanup behind `finalizer`: after success, or after the last allowed failure,
/// publishes an event and removes the finalizer; an earlier failure is returned for a retry.
pub async fn release<K>(
    ctx: &Context,
    object: &K,
    finalizer: &str,
    cleanup: Result<Cleaned, Error>,
) -> Result<Action, Error>
where
    K: Watched,
{
    match cleanup {
        Ok(cleaned) => succeed(ctx, object, finalizer, cleaned).await,
        Err(error) if ctx.backoff.cleanup_failed(&backoff::key(object)) >= MAX_ATTEMPTS => {
            abandon(ctx, object, finalizer, &error).await
        }
        Err(error) => Err(error),
    }
}

/// A cleanup that worked: a Normal event, then the finalizer goes.
pub async fn succeed<K: Watched>(
    ctx: &Context,
    object: &K,
    finalizer: &str,
    cleaned: Cleaned,
) -> Result<Action, Error> {
    finish(
        ctx,
        object,
        finalizer,
        EventType::Normal,
        cleaned.reason,
        cleaned.note,
    )
    .await
}

/// A cleanup given up: a Warning event `CleanupAbandoned` saying what may remain, then the
/// finalizer goes.
async fn abandon<K: Watched>(
    ctx: &Context,
    object: &K,
    finalizer: &str,
    error: &Error,
) -> Result<Action, Error> {
    let chain = super::error_chain(error);
    tracing::warn!(object = %backoff::key(object), %finalizer, error = %chain, "giving up the cleanup");
    let note = format!(
        "removing finalizer {finalizer} after {MAX_ATTEMPTS} failed attempts; what it cleans up may remain in kcp: {}",
        error.reason()
    );
    finish(
        ctx,
        object,
        finalizer,
        EventType::Warning,
        "CleanupAbandoned",
        note,
    )
    .await
}

async fn finish<K: Watched>(
    ctx: &Context,
    object: &K,
    finalizer: &str,
    type_: EventType,
    reason: &str,
    note: String,
) -> Result<Action, Error> {
    ctx.publish(
        object,
        Event {
            type_,
            reason: reason.into(),
            note: Some(note),
            action: "Cleanup".into(),
            secondary: None,
        },
    )
    .await;
    remove(&ctx.client, object, finalizer).await?;
    Ok(Action::await_change())
}

pub fn has<K: Resource>(object: &K, finalizer: &str) -> bool {
    object.finalizers().iter().any(|f| f == finalizer)
}

/// Adds `finalizer` unless `object` carries it already.
pub async fn add<K>(client: &kube::Client, object: &K, finalizer: &str) -> Result<(), Error>
where
    K: Watched,
{
    if has(object, finalizer) {
        return Ok(());
    }
    let mut finalizers = object.finalizers().to_vec();
    finalizers.push(finalizer.to_owned());
    write(client, object, finalizers).await
}

/// Removes `finalizer` from `object`.
pub async fn remove<K>(client: &kube::Client, object: &K, finalizer: &str) -> Result<(), Error>
where
    K: Watched,
{
    if !has(object, finalizer) {
        return Ok(());
    }
    let finalizers: Vec<String> = object
        .finalizers()
        .iter()
        .filter(|f| *f != finalizer)
        .cloned()
        .collect();
    write(client, object, finalizers).await
}

async fn write<K>(client: &kube::Client, object: &K, finalizers: Vec<String>) -> Result<(), Error>
where
    K: Watched,
{
    let api: Api<K> = Api::namespaced(client.clone(), &object.namespace().unwrap_or_default());
    let patch = json!({"metadata": {
        "finalizers": finalizers,
        "resourceVersion": object.resource_version(),
    }});
    api.patch(&object.name_any(), &merge_params(), &Patch::Merge(&patch))
        .await
        .map_err(Error::Kube)?;
    Ok(())
}
