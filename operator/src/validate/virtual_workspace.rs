//! A VirtualWorkspace resolved against the shard it serves: the target's configuration (a
//! RootShard's or a Shard's, exactly as their own reconciles resolve it) decides which URL the
//! server reaches the shard at and which CAs sign its certificates, as upstream kcp-operator's
//! VirtualWorkspace takes them from the target's root shard. The other direction, a shard naming
//! the VirtualWorkspace that serves it (`kcpVirtualWorkspace`), is resolved here too.

use crate::api::common::ExternalConfig;
use crate::api::{VirtualWorkspace, VirtualWorkspaceSpec};
use crate::naming::{Kind, Names};

use super::{
    DEFAULT_SERVER_REPLICAS, Error, Image, Owner, RootShardFacts, ServerConfig,
    cert_manager_warnings, owner,
};

/// A virtual-workspace server, resolved.
#[derive(Clone, Debug, PartialEq)]
pub struct VirtualWorkspaceConfig {
    pub owner: Owner,
    pub root: RootShardFacts,
    /// The shard (or root shard) whose virtual workspaces are served.
    pub target: Names,
    /// Where the server reaches its shard: the target's `shardBaseURL`.
    pub shard_url: String,
    pub image: Image,
    pub replicas: i32,
    pub external: ExternalConfig,
    /// User client CA bundles merged with the root client CA (RootShard's, then this one's).
    pub client_ca_bundles: Vec<String>,
    pub spec: VirtualWorkspaceSpec,
    pub warnings: Vec<String>,
}

impl VirtualWorkspaceConfig {
    /// The URL the targeted shard advertises as `--shard-virtual-workspace-url`.
    pub fn external_url(&self) -> String {
        external_url(&self.external)
    }
}

/// `https://<external.hostname>:<external.port>`, as upstream renders the shard's flag.
pub fn external_url(external: &ExternalConfig) -> String {
    format!("https://{}:{}", external.hostname, external.port)
}

/// The name and kind of the object `spec.target` points at; exactly one is set.
pub fn target_reference(vw: &VirtualWorkspace) -> Result<(Kind, &str), Error> {
    let target = &vw.spec.target;
    match (&target.root_shard_ref, &target.shard_ref) {
        (Some(root), None) => Ok((Kind::RootShard, root.name.as_str())),
        (None, Some(shard)) => Ok((Kind::Shard, shard.name.as_str())),
        _ => Err(Error::NoVirtualWorkspaceTarget),
    }
}

/// `target` is the resolved RootShard or Shard of `spec.target` (its own validation's result).
pub fn virtual_workspace(
    vw: &VirtualWorkspace,
    target: &ServerConfig,
) -> Result<VirtualWorkspaceConfig, Error> {
    let spec = &vw.spec;
    let cluster_domain = spec
        .cluster_domain
        .as_deref()
        .unwrap_or(&target.names().cluster_domain);
    let owner = owner(vw, Kind::VirtualWorkspace, Some(cluster_domain))?;
    let client_ca_bundles = target
        .root
        .client_ca_bundle
        .iter()
        .chain(spec.client_ca_bundle_ref.as_ref().map(|r| &r.name))
        .cloned()
        .collect();
    Ok(VirtualWorkspaceConfig {
        root: target.root.clone(),
        target: target.names().clone(),
        shard_url: target.shard_base_url.clone(),
        image: Image::resolve(spec.image.as_ref()),
        replicas: spec.replicas.unwrap_or(DEFAULT_SERVER_REPLICAS),
        external: spec.external.clone(),
        client_ca_bundles,
        spec: spec.clone(),
        warnings: cert_manager_warnings(&spec.certificate_templates),
        owner,
    })
}

/// `config` with the URL of the VirtualWorkspace its `kcpVirtualWorkspace` names; `vw` is that
/// object (`None` when it does not exist, which is a reference problem).
pub fn with_virtual_workspace(
    mut config: ServerConfig,
    vw: Option<&VirtualWorkspace>,
) -> Result<ServerConfig, Error> {
    let Some(reference) = &config.spec.kcp_virtual_workspace else {
        return Ok(config);
    };
    let vw = vw.ok_or_else(|| Error::ReferenceNotFound {
        kind: "VirtualWorkspace",
        name: reference.name.clone(),
    })?;
    config.virtual_workspace_url = Some(external_url(&vw.spec.external));
    Ok(config)
}
