//! VirtualWorkspace: a standalone virtual-workspace server for the RootShard or Shard of
//! `spec.target`, with certificates from the root shard's CAs, a kubeconfig for its shard, and
//! a Deployment behind a Service, as upstream kcp-operator's VirtualWorkspace controller.

use std::sync::Arc;

use kube::runtime::controller::Action;
use kube::{Api, ResourceExt};

use crate::api::common::Endpoints;
use crate::api::{RootShard, Shard, VirtualWorkspace};
use crate::naming::{Certificate, Kind};
use crate::pki::catalog;
use crate::render::{children, deployment};
use crate::upgrade::Decision;
use crate::validate::{self, Image, ServerConfig, VirtualWorkspaceConfig};

use super::component::{self, Bundle, Workload};
use super::status::Problem;
use super::{Context, Error};

pub async fn reconcile(vw: Arc<VirtualWorkspace>, ctx: Arc<Context>) -> Result<Action, Error> {
    if vw.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let previous = vw.status.clone().unwrap_or_default();
    let version = Image::resolve(vw.spec.image.as_ref()).version;
    let prepared = match target(&ctx, &vw).await? {
        Ok(target) => validate::virtual_workspace(&vw, &target)
            .map_err(Problem::from)
            .and_then(|config| {
                let certificates = catalog::virtual_workspace(&config).map_err(Problem::invalid)?;
                Ok((config, certificates))
            }),
        Err(error) => Err(Problem::from(error)),
    };
    let (config, certificates) = match prepared {
        Ok(prepared) => prepared,
        Err(problem) => return component::invalid(&ctx, &*vw, &previous, problem, version).await,
    };
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
            version: config.image.version.clone(),
            // Not part of the upgrade order: the server follows its shard's API, any version.
            upgrade: Decision::Proceed,
            warnings: config.warnings.clone(),
            etcd: None,
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
/// cannot be resolved; only API failures are errors.
async fn target(
    ctx: &Context,
    vw: &VirtualWorkspace,
) -> Result<Result<ServerConfig, validate::Error>, Error> {
    let (kind, name) = match validate::target_reference(vw) {
        Ok(reference) => reference,
        Err(error) => return Ok(Err(error)),
    };
    let namespace = vw.namespace().unwrap_or_default();
    let roots: Api<RootShard> = Api::namespaced(ctx.client.clone(), &namespace);
    if kind == Kind::RootShard {
        let root = roots.get_opt(name).await.map_err(Error::Kube)?;
        return Ok(match root {
            Some(root) => validate::root_shard(&root),
            None => Err(validate::Error::ReferenceNotFound {
                kind: "RootShard",
                name: name.to_owned(),
            }),
        });
    }
    let shards: Api<Shard> = Api::namespaced(ctx.client.clone(), &namespace);
    let Some(shard) = shards.get_opt(name).await.map_err(Error::Kube)? else {
        return Ok(Err(validate::Error::ReferenceNotFound {
            kind: "Shard",
            name: name.to_owned(),
        }));
    };
    let root = roots
        .get_opt(&shard.spec.root_shard.reference.name)
        .await
        .map_err(Error::Kube)?;
    Ok(validate::shard(&shard, root.as_ref()))
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
