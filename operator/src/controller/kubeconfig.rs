//! Kubeconfig: a client certificate signed by the root shard's client CA, in a Secret this
//! Kubeconfig owns (upstream leaks it), and the self-contained kubeconfig Secret built from it.
//! Both carry an owner reference, so deleting the Kubeconfig deletes them.
//!
//! `authorization.clusterRoleBindings` binds the Kubeconfig's group inside kcp; a finalizer is
//! on while such bindings may exist, so deleting the Kubeconfig (or dropping the field) removes
//! them.

use std::collections::BTreeMap;
use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::runtime::controller::Action;
use kube::{Api, Resource, ResourceExt};

use crate::api::conditions::REFERENCES_VALID;
use crate::api::kubeconfig::{KubeconfigAuthorizationStatus, KubeconfigPhase};
use crate::api::{FrontProxy, Kubeconfig, KubeconfigStatus, RootShard, Shard};
use crate::naming::{Certificate, KUBECONFIG_FINALIZER};
use crate::paths;
use crate::pki::catalog::{CertificateSpec, Issuer};
use crate::render::children::Child;
use crate::render::cluster_role_bindings;
use crate::render::kubeconfig_secret::{self, EmbeddedKubeconfig};
use crate::render::pod;
use crate::validate::{self, KubeconfigConfig, KubeconfigTarget};

use super::apply::apply_children;
use super::component::requeue_for_renewal;
use super::finalizer::{self, Cleaned};
use super::status::{self, Wanted};
use super::{Context, Error, INVALID_REQUEUE, bindings, certificates, kcp};

/// The referenced objects, read from the API.
struct Targets {
    root: Option<RootShard>,
    shard: Option<Shard>,
    proxy: Option<FrontProxy>,
}

async fn dereference(ctx: &Context, kubeconfig: &Kubeconfig) -> Result<Targets, Error> {
    let namespace = kubeconfig.namespace().unwrap_or_default();
    let target = &kubeconfig.spec.target;
    let shards: Api<Shard> = Api::namespaced(ctx.client.clone(), &namespace);
    let proxies: Api<FrontProxy> = Api::namespaced(ctx.client.clone(), &namespace);
    let roots: Api<RootShard> = Api::namespaced(ctx.client.clone(), &namespace);
    let shard = match &target.shard_ref {
        Some(reference) => shards.get_opt(&reference.name).await.map_err(Error::Kube)?,
        None => None,
    };
    let proxy = match &target.front_proxy_ref {
        Some(reference) => proxies
            .get_opt(&reference.name)
            .await
            .map_err(Error::Kube)?,
        None => None,
    };
    let root_name = target
        .root_shard_ref
        .as_ref()
        .map(|r| r.name.clone())
        .or_else(|| {
            shard
                .as_ref()
                .map(|s| s.spec.root_shard.reference.name.clone())
        })
        .or_else(|| {
            proxy
                .as_ref()
                .map(|p| p.spec.root_shard.reference.name.clone())
        });
    let root = match root_name {
        Some(name) => roots.get_opt(&name).await.map_err(Error::Kube)?,
        None => None,
    };
    Ok(Targets { root, shard, proxy })
}

fn target(targets: &Targets) -> Option<KubeconfigTarget<'_>> {
    let root = targets.root.as_ref()?;
    Some(match (&targets.shard, &targets.proxy) {
        (Some(shard), _) => KubeconfigTarget::Shard(shard, root),
        (None, Some(proxy)) => KubeconfigTarget::FrontProxy(proxy, root),
        (None, None) => KubeconfigTarget::RootShard(root),
    })
}

/// The cluster roles the Kubeconfig wants bound inside kcp.
fn cluster_roles(kubeconfig: &Kubeconfig) -> &[String] {
    kubeconfig
        .spec
        .authorization
        .as_ref()
        .map_or(&[], |a| a.cluster_role_bindings.cluster_roles.as_slice())
}

/// A client for the Kubeconfig's workspace, as the operator.
async fn workspace_client(ctx: &Context, config: &KubeconfigConfig) -> Result<kube::Client, Error> {
    let endpoint =
        kcp::endpoint(ctx, &config.root, &config.internal_url, &config.workspace).await?;
    ctx.kcp.connect(&endpoint)
}

/// Creates, updates or (when `authorization` was dropped) removes the bindings in kcp; the
/// finalizer is on while bindings may exist. Returns the workspace they are provisioned in.
async fn provision(
    ctx: &Context,
    kubeconfig: &Kubeconfig,
    config: &KubeconfigConfig,
) -> Result<Option<String>, Error> {
    let uid = kubeconfig.uid().unwrap_or_default();
    let roles = cluster_roles(kubeconfig);
    if roles.is_empty() {
        if finalizer::has(kubeconfig, KUBECONFIG_FINALIZER) {
            bindings::remove(workspace_client(ctx, config).await?, &uid).await?;
            finalizer::remove(&ctx.client, kubeconfig, KUBECONFIG_FINALIZER).await?;
        }
        return Ok(None);
    }
    let desired = cluster_role_bindings::desired(&kubeconfig.name_any(), &uid, roles);
    bindings::sync(workspace_client(ctx, config).await?, &uid, &desired).await?;
    Ok(Some(config.workspace.clone()))
}

/// Removes the bindings of a deleted Kubeconfig (best effort), then its finalizer.
async fn finalize(ctx: &Context, kubeconfig: &Kubeconfig) -> Result<Action, Error> {
    if !finalizer::has(kubeconfig, KUBECONFIG_FINALIZER) {
        return Ok(Action::await_change());
    }
    let cleanup = async {
        let targets = dereference(ctx, kubeconfig).await?;
        let Ok(config) = validate::kubeconfig(kubeconfig, target(&targets)) else {
            return Ok(Cleaned {
                reason: "TargetGone",
                note: "the target is gone; no bindings to remove".into(),
            });
        };
        let client = workspace_client(ctx, &config).await?;
        let removed = bindings::remove(client, &kubeconfig.uid().unwrap_or_default()).await?;
        Ok(Cleaned {
            reason: "BindingsRemoved",
            note: format!(
                "deleted {removed} ClusterRoleBindings in workspace {}",
                config.workspace
            ),
        })
    }
    .await;
    finalizer::release(ctx, kubeconfig, KUBECONFIG_FINALIZER, cleanup).await
}

pub async fn reconcile(kubeconfig: Arc<Kubeconfig>, ctx: Arc<Context>) -> Result<Action, Error> {
    if kubeconfig.meta().deletion_timestamp.is_some() {
        return finalize(&ctx, &kubeconfig).await;
    }
    if !cluster_roles(&kubeconfig).is_empty() {
        finalizer::add(&ctx.client, &*kubeconfig, KUBECONFIG_FINALIZER).await?;
    }
    let previous = kubeconfig.status.clone().unwrap_or_default();
    let targets = dereference(&ctx, &kubeconfig).await?;
    let config = match validate::kubeconfig(&kubeconfig, target(&targets)) {
        Ok(config) => config,
        Err(error) => {
            let problem = error.to_string();
            let known = previous.conditions.iter().any(|c| {
                c.type_ == REFERENCES_VALID && c.status == "False" && c.message == problem
            });
            if !known {
                let error = Error::Invalid(problem.clone());
                ctx.publish_failure(&*kubeconfig, &error).await;
            }
            let next = kubeconfig_status(&kubeconfig, &previous, Err(problem), None, None);
            status::write(&ctx.client, &*kubeconfig, &previous, &next).await?;
            return Ok(Action::requeue(INVALID_REQUEUE));
        }
    };
    let now = Timestamp::now();
    let spec = CertificateSpec {
        certificate: Certificate::Client,
        secret: config.owner.names.certificate_secret(Certificate::Client),
        issuer: Issuer::Secret(config.root.names.certificate_secret(Certificate::ClientCa)),
        request: config.request.clone(),
    };
    let certs =
        certificates::ensure(&ctx.client, &config.owner, std::slice::from_ref(&spec), now).await?;
    let server_ca = config.root.names.certificate_secret(Certificate::ServerCa);
    let (_, server_ca) =
        certificates::read_material(&ctx.client, &config.owner.names.namespace, &server_ca)
            .await?
            .ok_or_else(|| Error::MissingSecret(server_ca.clone()))?;
    let server_ca = server_ca.ok_or(Error::BrokenCa(
        config.root.names.certificate_secret(Certificate::ServerCa),
    ))?;
    let material = certs
        .materials
        .get(&spec.secret)
        .ok_or_else(|| Error::MissingSecret(spec.secret.clone()))?;
    let mut objects: Vec<Child> = certs
        .issued
        .iter()
        .map(|(secret, _)| Child::Secret(secret.clone()))
        .collect();
    objects.push(Child::Secret(output_secret(
        &kubeconfig,
        &config,
        &server_ca.cert_pem,
        material,
    )?));
    apply_children(&ctx.client, &objects).await?;
    let provisioned = provision(&ctx, &kubeconfig, &config).await?;
    let next = kubeconfig_status(&kubeconfig, &previous, Ok(()), Some(&config), provisioned);
    status::write(&ctx.client, &*kubeconfig, &previous, &next).await?;
    Ok(requeue_for_renewal(certs.next_renewal, now))
}

fn output_secret(
    kubeconfig: &Kubeconfig,
    config: &KubeconfigConfig,
    ca_pem: &str,
    material: &crate::pki::TlsMaterial,
) -> Result<Secret, Error> {
    let text = kubeconfig_secret::embedded(&EmbeddedKubeconfig {
        base_url: &config.base_url,
        workspace: &config.workspace,
        username: &kubeconfig.spec.username,
        ca_pem,
        cert_pem: &material.cert_pem,
        key_pem: &material.key_pem,
    })
    .map_err(|error| Error::Render(error.into()))?;
    Ok(Secret {
        metadata: pod::object_meta(
            &config.owner,
            kubeconfig.spec.secret_ref.name.clone(),
            config.owner.names.labels(),
        ),
        type_: Some("Opaque".into()),
        data: Some(BTreeMap::from([(
            paths::KUBECONFIG_FILE.to_owned(),
            ByteString(text.into_bytes()),
        )])),
        ..Default::default()
    })
}

fn kubeconfig_status(
    kubeconfig: &Kubeconfig,
    previous: &KubeconfigStatus,
    references: Result<(), String>,
    config: Option<&KubeconfigConfig>,
    provisioned_cluster: Option<String>,
) -> KubeconfigStatus {
    let generation = kubeconfig.meta().generation;
    let references_ok = references.is_ok();
    let (phase, wanted) = match references {
        Ok(()) => (
            KubeconfigPhase::Ready,
            Wanted::new(REFERENCES_VALID, true, "Valid", "all references resolve"),
        ),
        Err(problem) => (
            KubeconfigPhase::Failed,
            Wanted::new(REFERENCES_VALID, false, "Invalid", problem),
        ),
    };
    KubeconfigStatus {
        phase: Some(phase),
        observed_generation: generation,
        target_name: config
            .map(|c| c.target_name.clone())
            .or_else(|| previous.target_name.clone()),
        authorization: match (&references_ok, provisioned_cluster) {
            (true, Some(workspace)) => Some(KubeconfigAuthorizationStatus {
                provisioned_cluster: Some(workspace),
            }),
            (true, None) => None,
            (false, _) => previous.authorization.clone(),
        },
        conditions: status::conditions(
            &previous.conditions,
            vec![wanted],
            generation,
            Timestamp::now(),
        ),
    }
}
