//! The upgrade order (`crate::upgrade`) inside a reconcile: reads what the planner needs (the
//! live Deployment and the statuses of the components of earlier stages) and returns its
//! decision. Nothing is read unless the component's version changes, so a quiet reconcile stays
//! as cheap as before.

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::ListParams;
use kube::{Api, ResourceExt};

use crate::api::{CacheServer, RootShard, Shard, VirtualWorkspace};
use crate::naming::{LABEL_VERSION, Names};
use crate::upgrade::{self, Decision, Peer, Stage, Subject};
use crate::validate::{Image, RootShardFacts};

use super::{Context, Error};

/// The components that must be rolled out before this one.
#[derive(Default)]
pub struct Earlier<'a> {
    /// CacheServers (by name) the component or its root shard uses.
    pub caches: Vec<String>,
    pub root: Option<&'a RootShard>,
    /// Whether every Shard of `root` comes first too (for VirtualWorkspaces and FrontProxies).
    pub shards: bool,
    /// Whether every VirtualWorkspace of `root` or of its Shards comes first too (for
    /// FrontProxies).
    pub virtual_workspaces: bool,
}

impl<'a> Earlier<'a> {
    /// The CacheServer(s) of the root shard `facts` describes, that RootShard and every Shard
    /// of it.
    pub fn root_and_its_shards(facts: &RootShardFacts, root: Option<&'a RootShard>) -> Self {
        Earlier {
            caches: facts.cache.iter().map(|c| c.instance.clone()).collect(),
            root,
            shards: true,
            virtual_workspaces: false,
        }
    }
}

/// Whether the component owning `names` may render `image` (its target version) now; when it
/// may not, `image` is turned back to the version the component runs.
pub async fn gate(
    ctx: &Context,
    names: &Names,
    stage: Stage,
    current: Option<&str>,
    image: &mut Image,
    earlier: Earlier<'_>,
) -> Result<Decision, Error> {
    let decision = decide(ctx, names, stage, current, &image.version, earlier).await?;
    if let Some(held) = decision.held_version() {
        *image = image.at_version(held);
    }
    Ok(decision)
}

async fn decide(
    ctx: &Context,
    names: &Names,
    stage: Stage,
    current: Option<&str>,
    target: &str,
    earlier: Earlier<'_>,
) -> Result<Decision, Error> {
    let mut subject = Subject {
        stage,
        current,
        target,
        deployed: None,
    };
    if !subject.is_upgrading() {
        return Ok(Decision::Proceed);
    }
    let deployments: Api<Deployment> = Api::namespaced(ctx.client.clone(), &names.namespace);
    let deployment = deployments
        .get_opt(&names.workload())
        .await
        .map_err(Error::Kube)?;
    let deployed = deployment.as_ref().and_then(deployed_version);
    subject.deployed = deployed.as_deref();
    if subject.deployed == Some(target) {
        return Ok(Decision::Proceed);
    }
    let peers = peers(ctx, &names.namespace, &earlier).await?;
    Ok(upgrade::plan(&subject, &peers))
}

/// The version label of the Deployment's pod template.
fn deployed_version(deployment: &Deployment) -> Option<String> {
    deployment
        .spec
        .as_ref()?
        .template
        .metadata
        .as_ref()?
        .labels
        .as_ref()?
        .get(LABEL_VERSION)
        .cloned()
}

async fn peers(ctx: &Context, namespace: &str, earlier: &Earlier<'_>) -> Result<Vec<Peer>, Error> {
    let mut peers = Vec::new();
    let caches: Api<CacheServer> = Api::namespaced(ctx.client.clone(), namespace);
    for name in &earlier.caches {
        // A missing cache server is a reference problem reported by validation, not a hold.
        if let Some(cache) = caches.get_opt(name).await.map_err(Error::Kube)? {
            peers.push(Peer::from_status(
                format!("CacheServer/{name}"),
                Stage::CacheServer,
                &Image::resolve(cache.spec.image.as_ref()).version,
                cache.metadata.generation,
                &cache.status.clone().unwrap_or_default(),
            ));
        }
    }
    if let Some(root) = earlier.root {
        peers.push(Peer::from_status(
            format!("RootShard/{}", root.name_any()),
            Stage::RootShard,
            &Image::resolve(root.spec.common.image.as_ref()).version,
            root.metadata.generation,
            &root.status.clone().unwrap_or_default().component,
        ));
        let mut shard_names = Vec::new();
        if earlier.shards || earlier.virtual_workspaces {
            let shards: Api<Shard> = Api::namespaced(ctx.client.clone(), namespace);
            let list = shards
                .list(&ListParams::default())
                .await
                .map_err(Error::Kube)?;
            for shard in list
                .items
                .iter()
                .filter(|shard| shard.spec.root_shard.reference.name == root.name_any())
            {
                shard_names.push(shard.name_any());
                if earlier.shards {
                    peers.push(Peer::from_status(
                        format!("Shard/{}", shard.name_any()),
                        Stage::Shard,
                        &Image::resolve(shard.spec.common.image.as_ref()).version,
                        shard.metadata.generation,
                        &shard.status.clone().unwrap_or_default(),
                    ));
                }
            }
        }
        if earlier.virtual_workspaces {
            let servers: Api<VirtualWorkspace> = Api::namespaced(ctx.client.clone(), namespace);
            let list = servers
                .list(&ListParams::default())
                .await
                .map_err(Error::Kube)?;
            for server in list
                .items
                .iter()
                .filter(|server| serves(server, &root.name_any(), &shard_names))
            {
                peers.push(Peer::from_status(
                    format!("VirtualWorkspace/{}", server.name_any()),
                    Stage::VirtualWorkspace,
                    &Image::resolve(server.spec.image.as_ref()).version,
                    server.metadata.generation,
                    &server.status.clone().unwrap_or_default(),
                ));
            }
        }
    }
    Ok(peers)
}

/// Whether a VirtualWorkspace targets the root shard `root` or one of its `shards`.
fn serves(server: &VirtualWorkspace, root: &str, shards: &[String]) -> bool {
    let target = &server.spec.target;
    target
        .root_shard_ref
        .as_ref()
        .is_some_and(|r| r.name == root)
        || target
            .shard_ref
            .as_ref()
            .is_some_and(|s| shards.contains(&s.name))
}
