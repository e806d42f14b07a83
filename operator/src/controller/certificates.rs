//! Keeps the certificates of one custom resource: reads their Secrets, keeps what is still good,
//! issues what is missing or due, and says when to look again.
//!
//! CAs are never replaced while their Secret exists: a broken CA Secret is an error for a person
//! to fix, not something to paper over by minting a CA that invalidates every credential.
//!
//! A missing certificate is created, not applied: two reconciles that both found it missing
//! (RootShard, Shard and FrontProxy applied together) would otherwise each issue one and the
//! later apply would replace the first, so a certificate already handed out changed (upstream
//! kcp-operator leaves this to cert-manager, which issues once). The create is the claim: a 409
//! AlreadyExists means another reconcile won, and its Secret is read and used as the truth.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Secret;
use kube::api::PostParams;
use kube::{Api, Client};

use crate::naming::FIELD_MANAGER;
use crate::pki::catalog::{CertificateSpec, Issuer};
use crate::pki::{self, Authority, IssueReason, TlsMaterial, renewal};
use crate::render::pod;
use crate::validate::Owner;

use super::Error;

/// The certificates after a pass: every material by Secret name, the Secrets to write, and why.
#[derive(Debug, Default)]
pub struct Certificates {
    pub materials: BTreeMap<String, TlsMaterial>,
    /// Re-issued certificates, to apply over their Secrets.
    pub issued: Vec<(Secret, IssueReason)>,
    /// `Secret/<name>` of every missing certificate this pass created.
    pub created: Vec<String>,
    /// The earliest time a kept certificate becomes due.
    pub next_renewal: Option<Timestamp>,
}

/// Reads a Secret's TLS material; `Ok(None)` when the Secret does not exist.
pub async fn read_material(
    client: &Client,
    namespace: &str,
    name: &str,
) -> Result<Option<(Secret, Option<TlsMaterial>)>, Error> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let Some(secret) = api.get_opt(name).await.map_err(Error::Kube)? else {
        return Ok(None);
    };
    let material = secret.data.as_ref().and_then(TlsMaterial::from_secret_data);
    Ok(Some((secret, material)))
}

fn tls_secret(owner: &Owner, name: &str, material: &TlsMaterial) -> Secret {
    Secret {
        metadata: pod::object_meta(owner, name.to_owned(), owner.names.labels()),
        type_: Some("kubernetes.io/tls".into()),
        data: Some(material.to_secret_data()),
        ..Default::default()
    }
}

/// Ensures every certificate of `specs` (CAs before the leaves they sign) at `now`.
pub async fn ensure(
    client: &Client,
    owner: &Owner,
    specs: &[CertificateSpec],
    now: Timestamp,
) -> Result<Certificates, Error> {
    let namespace = &owner.names.namespace;
    let mut result = Certificates::default();
    for spec in specs {
        let existing = read_material(client, namespace, &spec.secret).await?;
        let issuer = match &spec.issuer {
            Issuer::SelfSigned => None,
            Issuer::Secret(name) => Some(issuer(client, namespace, name, &mut result).await?),
        };
        if spec.request.is_ca
            && let Some((_, stored)) = &existing
        {
            let material = stored
                .clone()
                .ok_or_else(|| Error::BrokenCa(spec.secret.clone()))?;
            result.materials.insert(spec.secret.clone(), material);
            continue;
        }
        let stored = existing
            .as_ref()
            .and_then(|(_, material)| material.as_ref());
        let reason = match (&issuer, existing.is_some(), stored) {
            (_, true, None) => Some(IssueReason::Unreadable),
            (Some(issuer), _, stored) => {
                renewal::leaf_issue_reason(stored, &spec.request, issuer.cert_pem(), now)
            }
            (None, false, _) => Some(IssueReason::Missing),
            (None, true, Some(_)) => None,
        };
        let material = match (reason, stored) {
            (None, Some(stored)) => {
                if let Some(at) = renewal::renewal_time(stored, &spec.request) {
                    result.next_renewal = Some(result.next_renewal.map_or(at, |next| next.min(at)));
                }
                stored.clone()
            }
            (reason, _) => {
                let reason = reason.unwrap_or(IssueReason::Missing);
                let material = match &issuer {
                    Some(issuer) => issuer.issue(&spec.request, now).map_err(Error::Pki)?,
                    None => Authority::generate_root(&spec.request, now)
                        .map_err(Error::Pki)?
                        .material()
                        .clone(),
                };
                tracing::info!(secret = %spec.secret, %reason, "issuing certificate");
                let secret = tls_secret(owner, &spec.secret, &material);
                if existing.is_some() {
                    result.issued.push((secret, reason));
                    material
                } else {
                    create(client, namespace, &secret, &mut result)
                        .await?
                        .unwrap_or(material)
                }
            }
        };
        result.materials.insert(spec.secret.clone(), material);
    }
    Ok(result)
}

/// Creates the Secret of a missing certificate. `Ok(None)`: created, the new material holds;
/// `Ok(Some(stored))`: another reconcile created it first, and its material holds.
async fn create(
    client: &Client,
    namespace: &str,
    secret: &Secret,
    result: &mut Certificates,
) -> Result<Option<TlsMaterial>, Error> {
    let name = secret.metadata.name.clone().unwrap_or_default();
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let params = PostParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PostParams::default()
    };
    match api.create(&params, secret).await {
        Ok(_) => {
            result.created.push(format!("Secret/{name}"));
            Ok(None)
        }
        Err(kube::Error::Api(status)) if status.code == 409 => {
            tracing::info!(secret = %name, "certificate created concurrently; using the stored one");
            let (_, stored) = read_material(client, namespace, &name)
                .await?
                .ok_or_else(|| Error::MissingSecret(name.clone()))?;
            stored.map(Some).ok_or(Error::BrokenCa(name))
        }
        Err(error) => Err(Error::Kube(error)),
    }
}

/// The CA in Secret `name`: issued in this pass, or read (a brought CA, or another resource's).
async fn issuer(
    client: &Client,
    namespace: &str,
    name: &str,
    result: &mut Certificates,
) -> Result<Authority, Error> {
    let material = match result.materials.get(name) {
        Some(material) => material.clone(),
        None => {
            let (_, material) = read_material(client, namespace, name)
                .await?
                .ok_or_else(|| Error::MissingSecret(name.to_owned()))?;
            let material = material.ok_or_else(|| Error::BrokenCa(name.to_owned()))?;
            result.materials.insert(name.to_owned(), material.clone());
            material
        }
    };
    Authority::load(material).map_err(|source| match source {
        pki::Error::InvalidPrivateKey(_) | pki::Error::InvalidCaCertificate(_) => {
            Error::BrokenCa(name.to_owned())
        }
        other => Error::Pki(other),
    })
}
