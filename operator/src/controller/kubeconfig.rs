//! Kubeconfig: a client certificate signed by the root shard's client CA, in a Secret this
//! Kubeconfig owns (upstream leaks it), and the self-contained kubeconfig Secret built from it.
//! Both carry an owner reference, so deleting the Kubeconfig deletes them.

use std::collections::BTreeMap;
use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::runtime::controller::Action;
use kube::{Api, Resource, ResourceExt};

use crate::api::kubeconfig::KubeconfigPhase;
use crate::api::{FrontProxy, Kubeconfig, KubeconfigStatus, RootShard, Shard};
use crate::build::children::Child;
use crate::build::kubeconfig_secret::{self, EmbeddedKubeconfig};
use crate::build::pod;
use crate::naming::Certificate;
use crate::paths;
use crate::pki::catalog::{CertificateSpec, Issuer};
use crate::validate::{self, KubeconfigConfig, KubeconfigTarget};

use super::apply::apply_children;
use super::component::requeue_for_renewal;
use super::status::{self, REFERENCES_VALID, Wanted};
use super::{Context, Error, INVALID_REQUEUE, certificates};

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

pub async fn reconcile(kubeconfig: Arc<Kubeconfig>, ctx: Arc<Context>) -> Result<Action, Error> {
    if kubeconfig.meta().deletion_timestamp.is_some() {
        return Ok(Action::await_change());
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
            let next = kubeconfig_status(&kubeconfig, &previous, Err(problem), None);
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
    let next = kubeconfig_status(&kubeconfig, &previous, Ok(()), Some(&config));
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
    .map_err(|error| Error::Build(error.into()))?;
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
) -> KubeconfigStatus {
    let generation = kubeconfig.meta().generation;
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
        authorization: previous.authorization.clone(),
        conditions: status::conditions(
            &previous.conditions,
            vec![wanted],
            generation,
            Timestamp::now(),
        ),
    }
}
