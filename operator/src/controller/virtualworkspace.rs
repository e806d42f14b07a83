//! VirtualWorkspace: a standalone virtual-workspace server for the RootShard or Shard of
//! `spec.target`, with certificates from the root shard's CAs, a kubeconfig for its shard, and
//! a Deployment behind a Service, as upstream kcp-operator's VirtualWorkspace controller. A
//! version change waits for every Shard of its root shard (`crate::upgrade`).

use std::sync::Arc;

use kube::runtime::controller::Action;
use kube::{Api, ResourceExt};

use crate::api::common::Endpoints;
use crate::api::{RootShard, Shard, VirtualWorkspace};
use crate::naming::{Certificate, Kind};
use crate::pki::catalog;
use crate::render::{children, deployment};
use crate::upgrade::Stage;
use crate::validate::{self, Image, ServerConfig, VirtualWorkspaceConfig};

use super::component::{self, Bundle, Workload};
use super::status::Problem;
use super::upgrade::{self, Earlier};
use super::{Context, Error};

pub async fn reconcile(vw: Arc<VirtualWorkspace>, ctx: Arc<Context>) -> Result<Action, Error> {
    if vw.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let previous = vw.status.clone().unwrap_or_default();
    let version = Image::resolve(vw.spec.image.as_ref()).version;
    let (target, root) = target(&ctx, &vw).await?;
    let prepared = match target {
        Ok(target) => validate::virtual_workspace(&vw, &target)
            .map_err(Problem::from)
            .and_then(|config| {
                let certificates = catalog::virtual_workspace(&config).map_err(Problem::invalid)?;
                Ok((config, certificates))
            }),
        Err(error) => Err(Problem::from(error)),
    };
    let (mut config, certificates) = match prepared {
        Ok(prepared) => prepared,
        Err(problem) => return component::invalid(&ctx, &*vw, &previous, problem, version).await,
    };
    // After every shard of its root shard: the server serves its shard's API.
    let earlier = Earlier::root_and_its_shards(&config.root, root.as_ref());
    let decision = upgrade::gate(
        &ctx,
        &config.owner.names,
        Stage::VirtualWorkspace,
        previous.current_version.as_deref(),
        &mut config.image,
        earlier,
    )
    .await?;
    let render = |revision: &str| children::virtual_workspace(&config, revision);
    component::reconcile(
        &ctx,
        &*vw,
        &previous,
        Workload {
            owner: &config.owner,
            certificates,
            bundles: bundles(&config),
            mounts: deployment::virtual_workspace_fragment(&config).mounts,
            version,
            upgrade: decision,
            warnings: config.warnings.clone(),
            etcd: None,
            external_etcd: &[],
            advisories: Vec::new(),
            endpoints: Endpoints {
                internal: config.owner.names.service_url(),
                external: Some(config.external_url()),
            },
            render: &render,
        },
    )
    .await
}

/// The resolved RootShard or Shard of `spec.target` (a Shard with its RootShard), or why it
/// cannot be resolved, and the RootShard when it exists (the upgrade order's earlier stages);
/// only API failures are errors.
async fn target(
    ctx: &Context,
    vw: &VirtualWorkspace,
) -> Result<(Result<ServerConfig, validate::Error>, Option<RootShard>), Error> {
    let (kind, name) = match validate::target_reference(vw) {
        Ok(reference) => reference,
        Err(error) => return Ok((Err(error), None)),
    };
    let namespace = vw.namespace().unwrap_or_default();
    let roots: Api<RootShard> = Api::namespaced(ctx.client.clone(), &namespace);
    if kind == Kind::RootShard {
        let root = roots.get_opt(name).await.map_err(Error::Kube)?;
        let config = match &root {
            Some(root) => validate::root_shard(root),
            None => Err(validate::Error::ReferenceNotFound {
                kind: "RootShard",
                name: name.to_owned(),
            }),
        };
        return Ok((config, root));
    }
    let shards: Api<Shard> = Api::namespaced(ctx.client.clone(), &namespace);
    let Some(shard) = shards.get_opt(name).await.map_err(Error::Kube)? else {
        return Ok((
            Err(validate::Error::ReferenceNotFound {
                kind: "Shard",
                name: name.to_owned(),
            }),
            None,
        ));
    };
    let root = roots
        .get_opt(&shard.spec.root_shard.reference.name)
        .await
        .map_err(Error::Kube)?;
    Ok((validate::shard(&shard, root.as_ref()), root))
}

/// A merged client CA only when a client CA bundle is brought (the root's or this one's).
fn bundles(config: &VirtualWorkspaceConfig) -> Vec<Bundle> {
    if config.client_ca_bundles.is_empty() {
        return Vec::new();
    }
    let mut sources = vec![config.root.names.certificate_secret(Certificate::ClientCa)];
    sources.extend(config.client_ca_bundles.iter().cloned());
    vec![Bundle {
        name: config.owner.names.merged_client_ca_secret(),
        sources,
    }]
}
