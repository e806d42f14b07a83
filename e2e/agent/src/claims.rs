//! PersistentVolumeClaims: the agent is the node's local-path provisioner.
//!
//! Every claim is bound at once (`status.phase: Bound`, capacity = the request, the requested
//! access modes) to a directory `<state>/volumes/<namespace>_<claim>_<uid>`, which a pod mounting
//! the claim gets and which survives pod restarts, rolling updates and scale-downs. The directory is
//! removed once its claim is deleted and no pod of this node uses it any more. The claim's UID is
//! in the name as a provisioner gives each claim a volume of its own: a claim deleted and created
//! again under the same name (a StatefulSet's, while its old pod still stops) starts empty, never
//! with the data of its predecessor.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::Api;
use kube::runtime::reflector::ObjectRef;
use serde_json::json;

use crate::context::Ctx;
use crate::controller;

/// The status that marks `claim` bound, or None when it already is.
pub fn bound_status(claim: &PersistentVolumeClaim) -> Option<serde_json::Value> {
    if claim.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound") {
        return None;
    }
    let spec = claim.spec.clone().unwrap_or_default();
    let capacity = spec
        .resources
        .as_ref()
        .and_then(|r| r.requests.clone())
        .and_then(|r| r.get("storage").cloned())
        .map(|q| json!({ "storage": q.0 }));
    Some(json!({
        "phase": "Bound",
        "accessModes": spec.access_modes.unwrap_or_else(|| vec!["ReadWriteOnce".into()]),
        "capacity": capacity,
    }))
}

/// The directory name of `claim`'s volume: `<namespace>_<name>_<uid>`.
pub fn dir_name(claim: &PersistentVolumeClaim) -> String {
    format!(
        "{}_{}_{}",
        claim.metadata.namespace.as_deref().unwrap_or_default(),
        claim.metadata.name.as_deref().unwrap_or_default(),
        claim.metadata.uid.as_deref().unwrap_or_default()
    )
}

/// The volume directory of the claim `namespace/name`, if that claim exists and is not being
/// deleted (a pod waits for its claim, as the kubelet does).
pub fn live_dir(ctx: &Ctx, namespace: &str, name: &str) -> Option<PathBuf> {
    let claim = ctx
        .cache
        .claims
        .get(&ObjectRef::new(name).within(namespace))?;
    if claim.metadata.deletion_timestamp.is_some() {
        return None;
    }
    Some(ctx.settings.claims_dir().join(dir_name(&claim)))
}

/// Binds unbound claims and removes directories of deleted claims not in use (`in_use`: the
/// `<ns>_<claim>_<uid>` directory names mounted by pods of this node).
pub async fn sync(ctx: &Arc<Ctx>, in_use: &HashSet<String>) {
    let claims = ctx.cache.claims.state();
    for claim in &claims {
        if claim.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let Some(status) = bound_status(claim) else {
            continue;
        };
        let namespace = claim.metadata.namespace.clone().unwrap_or_default();
        let name = claim.metadata.name.clone().unwrap_or_default();
        let api: Api<PersistentVolumeClaim> = Api::namespaced(ctx.client.clone(), &namespace);
        match controller::patch_status(&api, &name, status).await {
            Ok(()) => tracing::info!(claim = %format!("{namespace}/{name}"), "claim bound"),
            Err(error) => {
                tracing::warn!(claim = %format!("{namespace}/{name}"), %error, "binding claim")
            }
        }
    }
    let known: HashSet<String> = claims.iter().map(|c| dir_name(c)).collect();
    remove_unclaimed(&ctx.settings.claims_dir(), &known, in_use).await;
}

async fn remove_unclaimed(dir: &Path, known: &HashSet<String>, in_use: &HashSet<String>) {
    let Ok(mut entries) = tokio::fs::read_dir(dir).await else {
        return;
    };
    while let Ok(Some(entry)) = entries.next_entry().await {
        let name = entry.file_name().to_string_lossy().into_owned();
        if known.contains(&name) || in_use.contains(&name) {
            continue;
        }
        tracing::info!(dir = %entry.path().display(), "removing the data of a deleted claim");
        if let Err(error) = tokio::fs::remove_dir_all(entry.path()).await {
            tracing::warn!(dir = %entry.path().display(), %error, "removing claim data");
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::api::core::v1::{
        PersistentVolumeClaimSpec, PersistentVolumeClaimStatus, VolumeResourceRequirements,
    };
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    use super::*;

    #[test]
    fn binding() {
        let mut claim = PersistentVolumeClaim {
            spec: Some(PersistentVolumeClaimSpec {
                access_modes: Some(vec!["ReadWriteOnce".into()]),
                resources: Some(VolumeResourceRequirements {
                    requests: Some(BTreeMap::from([(
                        "storage".to_owned(),
                        Quantity("1Gi".into()),
                    )])),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        let status = bound_status(&claim).expect("unbound");
        assert_eq!(status["phase"], "Bound");
        assert_eq!(status["capacity"]["storage"], "1Gi");
        assert_eq!(status["accessModes"][0], "ReadWriteOnce");
        claim.status = Some(PersistentVolumeClaimStatus {
            phase: Some("Bound".into()),
            ..Default::default()
        });
        assert!(bound_status(&claim).is_none());
    }

    #[tokio::test]
    async fn unclaimed_directories_go() {
        let dir = tempfile::tempdir().expect("dir");
        for name in ["ns_kept", "ns_used", "ns_gone"] {
            std::fs::create_dir(dir.path().join(name)).expect("mkdir");
        }
        let known = HashSet::from(["ns_kept".to_owned()]);
        let in_use = HashSet::from(["ns_used".to_owned()]);
        remove_unclaimed(dir.path(), &known, &in_use).await;
        assert!(dir.path().join("ns_kept").exists());
        assert!(dir.path().join("ns_used").exists());
        assert!(!dir.path().join("ns_gone").exists());
    }

    #[test]
    fn a_claim_created_again_under_its_name_gets_another_directory() {
        let claim = |uid: &str| PersistentVolumeClaim {
            metadata: kube::api::ObjectMeta {
                namespace: Some("kcp".into()),
                name: Some("data-etcd-0".into()),
                uid: Some(uid.into()),
                ..Default::default()
            },
            ..Default::default()
        };
        assert_eq!(dir_name(&claim("u1")), "kcp_data-etcd-0_u1");
        assert_ne!(dir_name(&claim("u1")), dir_name(&claim("u2")));
    }
}
