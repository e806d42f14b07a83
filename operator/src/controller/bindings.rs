//! Keeps a Kubeconfig's ClusterRoleBindings inside kcp (see `render::cluster_role_bindings`):
//! creates or updates the desired ones, deletes the ones it labelled that are no longer wanted.
//! The client comes from `controller::kcp`, pointed at the Kubeconfig's workspace.

use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::{Api, Client, ResourceExt};

use crate::naming::FIELD_MANAGER;
use crate::render::cluster_role_bindings::selector;

use super::Error;
use super::apply::contains;
use super::kcp::is_not_found;

/// Makes the bindings labelled with `uid` exactly `desired`; returns how many were written or
/// deleted.
pub async fn sync(
    client: Client,
    uid: &str,
    desired: &[ClusterRoleBinding],
) -> Result<usize, Error> {
    let api: Api<ClusterRoleBinding> = Api::all(client);
    let existing = api
        .list(&ListParams::default().labels(&selector(uid)))
        .await
        .map_err(Error::Kcp)?
        .items;
    let mut changes = 0;
    for binding in desired {
        let name = binding.name_any();
        let wanted = serde_json::to_value(binding).map_err(Error::Serialize)?;
        let live = existing.iter().find(|live| live.name_any() == name);
        let current = live
            .map(serde_json::to_value)
            .transpose()
            .map_err(Error::Serialize)?;
        if current.is_some_and(|current| contains(&current, &wanted)) {
            continue;
        }
        api.patch(
            &name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(binding),
        )
        .await
        .map_err(Error::Kcp)?;
        changes += 1;
    }
    for stale in existing
        .iter()
        .filter(|live| !desired.iter().any(|d| d.name_any() == live.name_any()))
    {
        delete(&api, &stale.name_any()).await?;
        changes += 1;
    }
    Ok(changes)
}

/// Deletes every binding labelled with `uid`; returns how many there were.
pub async fn remove(client: Client, uid: &str) -> Result<usize, Error> {
    sync(client, uid, &[]).await
}

async fn delete(api: &Api<ClusterRoleBinding>, name: &str) -> Result<(), Error> {
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(error) if is_not_found(&error) => Ok(()),
        Err(error) => Err(Error::Kcp(error)),
    }
}
