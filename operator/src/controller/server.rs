//! RootShard and Shard: the kcp servers. A root shard issues the CAs every other component
//! trusts; a shard borrows them from its root shard, which must exist first.

use std::sync::Arc;

use kube::runtime::controller::Action;
use kube::{Api, ResourceExt};

use crate::api::common::Endpoints;
use crate::api::conditions::CACHE_SHARED;
use crate::api::{CacheServer, CommonShardSpec, RootShard, Shard, VirtualWorkspace};
use crate::naming::{Certificate, Names, SHARD_FINALIZER};
use crate::pki::catalog::{self, CertificateSpec};
use crate::render::{children, deployment};
use crate::upgrade::Stage;
use crate::validate::{self, Etcd, Image, ServerConfig, ServerRole};

use super::component::{self, Bundle, Workload};
use super::status::{Problem, Wanted};
use super::upgrade::{self, Earlier};
use super::{Context, Error, Watched, deregister, finalizer, shard_list};

pub async fn reconcile_root_shard(
    root: Arc<RootShard>,
    ctx: Arc<Context>,
) -> Result<Action, Error> {
    if root.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let stored = root.status.clone().unwrap_or_default();
    let previous = stored.component.clone();
    let version = Image::resolve(root.spec.common.image.as_ref()).version;
    let vw = virtual_workspace_of(&ctx, &*root, &root.spec.common).await?;
    let prepared = validate::root_shard(&root)
        .and_then(|config| validate::with_virtual_workspace(config, vw.as_ref()))
        .map_err(Problem::from)
        .and_then(|config| {
            let certificates = catalog::root_shard(&config).map_err(Problem::invalid)?;
            Ok((config, certificates))
        });
    let prepared = match prepared {
        Ok((config, certificates)) => missing_cache(&ctx, config.cache.as_ref())
            .await?
            .map_or(Ok((config, certificates)), Err),
        Err(problem) => Err(problem),
    };
    match prepared {
        Ok((config, certificates)) => {
            let earlier = Earlier {
                caches: config.cache.iter().map(|c| c.instance.clone()).collect(),
                ..Earlier::default()
            };
            let action = reconcile(&ctx, &*root, &previous, config, certificates, earlier).await?;
            let shards = shard_list::of_root(&ctx, Some(&*root)).await?;
            shard_list::write(&ctx, &*root, &stored.shards, shards).await?;
            Ok(action)
        }
        Err(problem) => component::invalid(&ctx, &*root, &previous, problem, version).await,
    }
}

/// The shard's work proper; the Shard finalizer wraps it.
pub async fn apply_shard(shard: &Shard, ctx: &Context) -> Result<Action, Error> {
    let previous = shard.status.clone().unwrap_or_default();
    let version = Image::resolve(shard.spec.common.image.as_ref()).version;
    let roots: Api<RootShard> =
        Api::namespaced(ctx.client.clone(), &shard.namespace().unwrap_or_default());
    let root = roots
        .get_opt(&shard.spec.root_shard.reference.name)
        .await
        .map_err(Error::Kube)?;
    let vw = virtual_workspace_of(ctx, shard, &shard.spec.common).await?;
    let prepared = validate::shard(shard, root.as_ref())
        .and_then(|config| validate::with_virtual_workspace(config, vw.as_ref()))
        .map_err(Problem::from)
        .and_then(|config| {
            let certificates = catalog::shard(&config).map_err(Problem::invalid)?;
            Ok((config, certificates))
        });
    let prepared = match prepared {
        Ok((config, certificates)) => missing_cache(ctx, config.cache.as_ref())
            .await?
            .map_or(Ok((config, certificates)), Err),
        Err(problem) => Err(problem),
    };
    match prepared {
        Ok((config, certificates)) => {
            let mut caches: Vec<String> = config.cache.iter().map(|c| c.instance.clone()).collect();
            caches.extend(config.root.cache.iter().map(|c| c.instance.clone()));
            caches.sort();
            caches.dedup();
            let earlier = Earlier {
                caches,
                root: root.as_ref(),
                ..Earlier::default()
            };
            reconcile(ctx, shard, &previous, config, certificates, earlier).await
        }
        Err(problem) => component::invalid(ctx, shard, &previous, problem, version).await,
    }
}

/// `ReferenceNotFound` when the CacheServer a server uses (its own `cache.ref`, or for a Shard
/// without one its RootShard's) does not exist: its pods would otherwise wait for the cache's
/// kubeconfig Secret with nothing saying why. Created later, the CacheServer's watch brings the
/// server back (upstream kcp-operator#205: every combination works or says why not).
async fn missing_cache(ctx: &Context, cache: Option<&Names>) -> Result<Option<Problem>, Error> {
    let Some(cache) = cache else {
        return Ok(None);
    };
    let caches: Api<CacheServer> = Api::namespaced(ctx.client.clone(), &cache.namespace);
    let found = caches.get_opt(&cache.instance).await.map_err(Error::Kube)?;
    Ok(found.is_none().then(|| {
        Problem::from(validate::Error::ReferenceNotFound {
            kind: "CacheServer",
            name: cache.instance.clone(),
        })
    }))
}

/// The VirtualWorkspace `spec.kcpVirtualWorkspace` names, if set and it exists.
async fn virtual_workspace_of<K: Watched>(
    ctx: &Context,
    object: &K,
    spec: &CommonShardSpec,
) -> Result<Option<VirtualWorkspace>, Error> {
    let Some(reference) = &spec.kcp_virtual_workspace else {
        return Ok(None);
    };
    let vws: Api<VirtualWorkspace> =
        Api::namespaced(ctx.client.clone(), &object.namespace().unwrap_or_default());
    vws.get_opt(&reference.name).await.map_err(Error::Kube)
}

/// Merged client CA (root client CA + user bundles) and merged server CA bundle, when used.
pub fn server_bundles(config: &ServerConfig) -> Vec<Bundle> {
    let names = config.names();
    let root = &config.root.names;
    let mut bundles = Vec::new();
    if !config.client_ca_bundles.is_empty() {
        let mut sources = vec![root.certificate_secret(Certificate::ClientCa)];
        sources.extend(config.client_ca_bundles.iter().cloned());
        bundles.push(Bundle {
            name: names.merged_client_ca_secret(),
            sources,
        });
    }
    if let Some(ca_bundle) = &config.ca_bundle {
        bundles.push(Bundle {
            name: names.merged_ca_bundle_secret(),
            sources: vec![
                root.certificate_secret(Certificate::ServerCa),
                ca_bundle.clone(),
            ],
        });
    }
    bundles
}

async fn reconcile<K>(
    ctx: &Context,
    object: &K,
    previous: &crate::api::common::ComponentStatus,
    mut config: ServerConfig,
    mut certificates: Vec<CertificateSpec>,
    earlier: Earlier<'_>,
) -> Result<Action, Error>
where
    K: Watched,
{
    let stage = match config.role {
        ServerRole::Root => Stage::RootShard,
        ServerRole::Shard => Stage::Shard,
    };
    let version = config.image.version.clone();
    let decision = upgrade::gate(
        ctx,
        &config.owner.names,
        stage,
        previous.current_version.as_deref(),
        &mut config.image,
        earlier,
    )
    .await?;
    let config = &config;
    let managed = match &config.etcd {
        Etcd::Managed(managed) => {
            certificates.extend(catalog::managed_etcd(config.names()));
            Some(managed)
        }
        _ => None,
    };
    let render = |revision: &str| children::server(config, revision);
    let endpoints = Endpoints {
        internal: config.shard_base_url.clone(),
        external: Some(config.root.external_url()),
    };
    component::reconcile(
        ctx,
        object,
        previous,
        Workload {
            owner: &config.owner,
            certificates,
            bundles: server_bundles(config),
            mounts: deployment::server_fragment(config).mounts,
            version,
            upgrade: decision,
            warnings: config.warnings.clone(),
            etcd: managed,
            external_etcd: config.etcd.external_endpoints(),
            advisories: advisories(config),
            endpoints,
            render: &render,
        },
    )
    .await
}

/// Shard entry point for the controller loop: the finalizer that deregisters the shard goes on
/// before anything is created, and is handled when the Shard is deleted.
pub async fn reconcile_shard(shard: Arc<Shard>, ctx: Arc<Context>) -> Result<Action, Error> {
    if shard.metadata.deletion_timestamp.is_some() {
        return deregister::finalize(&shard, &ctx).await;
    }
    finalizer::add(&ctx.client, &*shard, SHARD_FINALIZER).await?;
    apply_shard(&shard, &ctx).await
}

/// A Shard's `CacheShared` condition: False while its own `cache.ref` is not its RootShard's
/// cache (it works, but what it replicates the other shards never see); a RootShard has none.
fn advisories(config: &ServerConfig) -> Vec<Wanted> {
    match (&config.role, &config.cache_mismatch) {
        (ServerRole::Root, _) => Vec::new(),
        (ServerRole::Shard, Some(mismatch)) => {
            vec![Wanted::new(
                CACHE_SHARED,
                false,
                "CacheDiffers",
                mismatch.clone(),
            )]
        }
        (ServerRole::Shard, None) => vec![Wanted::new(
            CACHE_SHARED,
            true,
            "SameAsRootShard",
            "the shard replicates into its root shard's cache",
        )],
    }
}
