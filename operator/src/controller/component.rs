//! The pipeline every workload kind (RootShard, Shard, FrontProxy, CacheServer) shares once its
//! custom resource is validated: certificates -> merged CA bundles -> render -> apply -> status.
//!
//! The kind-specific reconcilers only dereference and validate, then describe their workload
//! as a [`Workload`]; this module does the rest the same way for all of them.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType};
use kube::{Api, Resource};

use crate::api::common::{ComponentStatus, Endpoints};
use crate::api::conditions::{DEGRADED, ETCD_UNREACHABLE, REFERENCES_VALID};
use crate::etcd::{self, ClusterState, Observed, Step, members::Members, reachability};
use crate::naming::Certificate;
use crate::pki::IssueReason;
use crate::pki::catalog::CertificateSpec;
use crate::pki::material::TLS_CERT_KEY;
use crate::pki::revision::content_revision;
use crate::render::ca_bundle;
use crate::render::children::{self, Child};
use crate::render::pod::{Mount, Source};
use crate::upgrade::Decision;
use crate::validate::{ManagedEtcd, Owner};

use super::apply::{AppliedChildren, apply_children};
use super::certificates::{self, Certificates};
use super::status::{self, Observation, Problem, Rollout, Wanted};
use super::{Context, Error, HELD_REQUEUE, MAX_REQUEUE, MISSING_REFERENCE_REQUEUE, Watched};

/// A Secret that concatenates CA certificates (`tls.crt` of each source, in order).
#[derive(Clone, Debug)]
pub struct Bundle {
    pub name: String,
    pub sources: Vec<String>,
}

/// Everything the shared pipeline needs to know about one workload.
pub struct Workload<'a> {
    pub owner: &'a Owner,
    pub certificates: Vec<CertificateSpec>,
    pub bundles: Vec<Bundle>,
    /// What the pods mount; their content makes up the pod revision.
    pub mounts: Vec<Mount>,
    /// The version the spec asks for (rendered unless `upgrade` holds it back).
    pub version: String,
    /// The upgrade order's decision; `render` already renders the version it allows.
    pub upgrade: Decision,
    pub warnings: Vec<String>,
    /// A managed etcd to run (its certificates are part of `certificates`).
    pub etcd: Option<&'a ManagedEtcd>,
    /// The endpoints of an external etcd, probed while the rollout is incomplete.
    pub external_etcd: &'a [String],
    /// Conditions of this kind only; each that is False is also a Warning event when new.
    pub advisories: Vec<Wanted>,
    /// Where the component is reached, for its status.
    pub endpoints: Endpoints,
    /// Renders the children for a pod revision.
    pub render: &'a (dyn Fn(&str) -> Result<Vec<Child>, children::Error> + Sync),
}

/// Runs the pipeline for `object` and writes its status. What only the user can fix (a Secret or
/// ConfigMap the spec names that does not exist, an unreadable CA) becomes a `ReferencesValid`
/// condition and a Warning event, like an invalid spec, and is looked at again periodically (and
/// on every change of the object).
pub async fn reconcile<K>(
    ctx: &Context,
    object: &K,
    previous: &ComponentStatus,
    workload: Workload<'_>,
) -> Result<Action, Error>
where
    K: Watched,
{
    let version = workload.version.clone();
    match run_pipeline(ctx, object, previous, workload).await {
        Err(error) if error.is_for_the_user() => {
            let problem = Problem {
                reason: error.reason(),
                message: super::error_chain(&error),
            };
            invalid(ctx, object, previous, problem, version).await
        }
        outcome => outcome,
    }
}

async fn run_pipeline<K>(
    ctx: &Context,
    object: &K,
    previous: &ComponentStatus,
    workload: Workload<'_>,
) -> Result<Action, Error>
where
    K: Watched,
{
    let now = Timestamp::now();
    let client = &ctx.client;
    let owner = workload.owner;
    let certs = certificates::ensure(client, owner, &workload.certificates, now).await?;
    let mut objects: Vec<Child> = certs
        .issued
        .iter()
        .map(|(secret, _)| Child::Secret(secret.clone()))
        .collect();
    if let Some(managed) = workload.etcd {
        objects.extend(managed_etcd(ctx, owner, managed, &certs).await?);
    }
    for bundle in &workload.bundles {
        objects.push(Child::Secret(
            merged_bundle(ctx, owner, bundle, &certs).await?,
        ));
    }
    let draft = (workload.render)("").map_err(Error::Render)?;
    let revision = revision(ctx, owner, &workload.mounts, &certs, &objects, &draft).await?;
    objects.extend((workload.render)(&revision).map_err(Error::Render)?);
    let applied = apply_children(client, &objects).await?;
    publish_changes(ctx, object, &applied, &certs).await;

    let rollout = applied.deployment.as_ref().map(status::rollout);
    let etcd_unreachable = match rollout {
        Some(Rollout::InProgress { .. }) => {
            let targets = reachability::targets(workload.external_etcd);
            reachability::probe(&targets, reachability::PROBE_TIMEOUT)
                .await
                .err()
        }
        _ => None,
    };
    if let Some(message) = &etcd_unreachable {
        publish_new_warning(ctx, object, previous, DEGRADED, ETCD_UNREACHABLE, message).await;
    }
    for advisory in workload.advisories.iter().filter(|a| !a.status) {
        publish_new_warning(
            ctx,
            object,
            previous,
            advisory.type_,
            &advisory.reason,
            &advisory.message,
        )
        .await;
    }
    let observation = Observation {
        generation: object.meta().generation,
        references: Ok(()),
        rollout,
        upgrade: workload.upgrade,
        warnings: workload.warnings,
        target_version: workload.version,
        endpoints: Some(workload.endpoints),
        etcd_unreachable,
        advisories: workload.advisories,
    };
    let held = observation.upgrade != Decision::Proceed;
    let waits_for_etcd = observation.etcd_unreachable.is_some();
    let next = status::component_status(previous, observation, now);
    status::write(client, object, previous, &next).await?;
    let action = requeue_for_renewal(certs.next_renewal, now);
    // Earlier stages are not all watched (a shard's root's cache server), so a held upgrade
    // looks again soon; an etcd is not watched at all, so its recovery is looked for as often
    // as a missing reference.
    Ok(if held {
        Action::requeue(HELD_REQUEUE)
    } else if waits_for_etcd {
        Action::requeue(MISSING_REFERENCE_REQUEUE)
    } else {
        action
    })
}

/// A Warning event for a problem the condition `type_` reports with `reason`, once when it
/// appears or its message changes, not on every reconcile: the stored condition already says it.
async fn publish_new_warning<K: Watched>(
    ctx: &Context,
    object: &K,
    previous: &ComponentStatus,
    type_: &str,
    reason: &str,
    message: &str,
) {
    let known = previous
        .conditions
        .iter()
        .any(|c| c.type_ == type_ && c.reason == reason && c.message == message);
    if known {
        return;
    }
    ctx.publish(
        object,
        Event {
            type_: EventType::Warning,
            reason: reason.into(),
            note: Some(message.to_owned()),
            action: "Observe".into(),
            secondary: None,
        },
    )
    .await;
}

/// Reconcile again when the first kept certificate becomes due, at the latest after an hour.
pub fn requeue_for_renewal(next_renewal: Option<Timestamp>, now: Timestamp) -> Action {
    let wait = next_renewal
        .and_then(|at| at.duration_since(now).try_into().ok())
        .map_or(MAX_REQUEUE, |wait: std::time::Duration| {
            wait.min(MAX_REQUEUE)
        });
    Action::requeue(wait)
}

async fn publish_changes<K: Resource<DynamicType = ()>>(
    ctx: &Context,
    object: &K,
    applied: &AppliedChildren,
    certs: &Certificates,
) {
    let created: Vec<&str> = certs
        .created
        .iter()
        .chain(&applied.created)
        .map(String::as_str)
        .collect();
    if !created.is_empty() {
        ctx.publish(
            object,
            Event {
                type_: EventType::Normal,
                reason: "Created".into(),
                note: Some(format!("created {}", created.join(", "))),
                action: "Create".into(),
                secondary: None,
            },
        )
        .await;
    }
    for (secret, reason) in &certs.issued {
        if *reason == IssueReason::Missing {
            continue;
        }
        ctx.publish(
            object,
            Event {
                type_: EventType::Normal,
                reason: "CertificateRotated".into(),
                note: Some(format!(
                    "re-issued {}: {reason}",
                    secret.metadata.name.as_deref().unwrap_or_default()
                )),
                action: "Rotate".into(),
                secondary: None,
            },
        )
        .await;
    }
}

/// Observes the etcd, takes the planner's next step through the members API, and renders the
/// etcd objects for the state after that step.
async fn managed_etcd(
    ctx: &Context,
    owner: &Owner,
    managed: &ManagedEtcd,
    certs: &Certificates,
) -> Result<Vec<Child>, Error> {
    let names = &owner.names;
    let namespace = &names.namespace;
    let sets: Api<StatefulSet> = Api::namespaced(ctx.client.clone(), namespace);
    let maps: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), namespace);
    let statefulset_replicas = sets
        .get_opt(&names.etcd())
        .await
        .map_err(Error::Kube)?
        .map(|set| set.spec.and_then(|spec| spec.replicas).unwrap_or(0));
    let cluster_state = maps
        .get_opt(&names.etcd_cluster_config_map())
        .await
        .map_err(Error::Kube)?
        .and_then(|map| map.data)
        .and_then(|data| {
            data.get(etcd::objects::INITIAL_CLUSTER_STATE_KEY)
                .and_then(|state| ClusterState::parse(state))
        });
    let client_certificate = certs
        .materials
        .get(&names.certificate_secret(Certificate::EtcdClient))
        .ok_or_else(|| Error::MissingSecret(names.certificate_secret(Certificate::EtcdClient)))?;
    let mut connection = None;
    let mut members = None;
    if let Some(replicas) = statefulset_replicas {
        match Members::connect(names, replicas, client_certificate).await {
            Ok(mut connected) => {
                match connected.list().await {
                    Ok(list) => members = Some(list),
                    Err(error) => {
                        tracing::info!(error = %super::error_chain(&error), "etcd members unknown")
                    }
                }
                connection = Some(connected);
            }
            Err(error) => tracing::info!(error = %super::error_chain(&error), "etcd unreachable"),
        }
    }
    let observed = Observed {
        statefulset_replicas,
        cluster_state,
        members,
    };
    let plan = etcd::plan(names, managed.replicas, &observed);
    match (&plan.step, connection.as_mut()) {
        (Step::Add { peer_url, ordinal }, Some(members)) => {
            tracing::info!(ordinal, "adding etcd member");
            members.add(peer_url).await.map_err(Error::Etcd)?;
        }
        (Step::Remove { id, ordinal }, Some(members)) => {
            tracing::info!(ordinal, "removing etcd member");
            members.remove(*id).await.map_err(Error::Etcd)?;
        }
        (Step::Wait(reason), _) => tracing::info!(%reason, "etcd scaling waits"),
        _ => {}
    }
    let mounted: Vec<(String, BTreeMap<String, ByteString>)> =
        etcd::objects::mounted_secrets(names)
            .iter()
            .filter_map(|mount| mount.source_name())
            .filter_map(|name| {
                certs
                    .materials
                    .get(name)
                    .map(|material| (format!("Secret/{name}"), material.to_secret_data()))
            })
            .collect();
    let revision = content_revision(mounted.iter().map(|(name, data)| (name.as_str(), data)));
    Ok(etcd::objects::children(owner, managed, &plan, &revision))
}

/// The `tls.crt` of a Secret: from this pass's certificates, or read from the API.
async fn ca_certificate(
    ctx: &Context,
    namespace: &str,
    name: &str,
    certs: &Certificates,
) -> Result<String, Error> {
    if let Some(material) = certs.materials.get(name) {
        return Ok(material.cert_pem.clone());
    }
    let api: Api<Secret> = Api::namespaced(ctx.client.clone(), namespace);
    let secret = api
        .get_opt(name)
        .await
        .map_err(Error::Kube)?
        .ok_or_else(|| Error::MissingSecret(name.to_owned()))?;
    secret
        .data
        .as_ref()
        .and_then(|data| data.get(TLS_CERT_KEY))
        .map(|bytes| String::from_utf8_lossy(&bytes.0).into_owned())
        .ok_or_else(|| Error::MissingKey {
            secret: name.to_owned(),
            key: TLS_CERT_KEY,
        })
}

async fn merged_bundle(
    ctx: &Context,
    owner: &Owner,
    bundle: &Bundle,
    certs: &Certificates,
) -> Result<Secret, Error> {
    let mut pems = Vec::with_capacity(bundle.sources.len());
    for source in &bundle.sources {
        pems.push(ca_certificate(ctx, &owner.names.namespace, source, certs).await?);
    }
    let pems: Vec<&str> = pems.iter().map(String::as_str).collect();
    Ok(ca_bundle::merged_bundle_secret(
        owner,
        bundle.name.clone(),
        &pems,
    ))
}

/// Hash over the data of every mounted Secret and ConfigMap. What this pass writes is taken
/// from memory; what others own (user bundles, another resource's CAs) is read.
async fn revision(
    ctx: &Context,
    owner: &Owner,
    mounts: &[Mount],
    certs: &Certificates,
    written: &[Child],
    draft: &[Child],
) -> Result<String, Error> {
    let mut known: BTreeMap<String, BTreeMap<String, ByteString>> = certs
        .materials
        .iter()
        .map(|(name, material)| (format!("Secret/{name}"), material.to_secret_data()))
        .collect();
    for child in written.iter().chain(draft) {
        match child {
            Child::Secret(secret) => {
                known.insert(
                    format!(
                        "Secret/{}",
                        secret.metadata.name.as_deref().unwrap_or_default()
                    ),
                    secret.data.clone().unwrap_or_default(),
                );
            }
            Child::ConfigMap(map) => {
                let data = map
                    .data
                    .iter()
                    .flatten()
                    .map(|(key, value)| (key.clone(), ByteString(value.clone().into_bytes())))
                    .collect();
                known.insert(
                    format!(
                        "ConfigMap/{}",
                        map.metadata.name.as_deref().unwrap_or_default()
                    ),
                    data,
                );
            }
            _ => {}
        }
    }
    let namespace = &owner.names.namespace;
    let mut sources = BTreeMap::new();
    for mount in mounts {
        let key = match &mount.source {
            Source::Secret(name) => format!("Secret/{name}"),
            Source::ConfigMap(name) => format!("ConfigMap/{name}"),
            Source::EmptyDir => continue,
        };
        if sources.contains_key(&key) {
            continue;
        }
        let data = match (known.get(&key), &mount.source) {
            (Some(data), _) => data.clone(),
            (None, Source::Secret(name)) => {
                let api: Api<Secret> = Api::namespaced(ctx.client.clone(), namespace);
                api.get_opt(name)
                    .await
                    .map_err(Error::Kube)?
                    .ok_or_else(|| Error::MissingSecret(name.clone()))?
                    .data
                    .unwrap_or_default()
            }
            (None, Source::ConfigMap(name)) => {
                let api: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), namespace);
                api.get_opt(name)
                    .await
                    .map_err(Error::Kube)?
                    .ok_or_else(|| Error::MissingConfigMap(name.clone()))?
                    .data
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(key, value)| (key, ByteString(value.into_bytes())))
                    .collect()
            }
            (None, Source::EmptyDir) => continue,
        };
        sources.insert(key, data);
    }
    Ok(content_revision(
        sources.iter().map(|(name, data)| (name.as_str(), data)),
    ))
}

/// Reports a spec or reference problem as conditions (and, when the problem is new, a Warning
/// event), then waits: a change to the object or its references triggers the next attempt.
pub async fn invalid<K>(
    ctx: &Context,
    object: &K,
    previous: &ComponentStatus,
    problem: Problem,
    version: String,
) -> Result<Action, Error>
where
    K: Watched,
{
    let known = previous.conditions.iter().any(|c| {
        c.type_ == REFERENCES_VALID && c.status == "False" && c.message == problem.message
    });
    if !known {
        ctx.publish(
            object,
            Event {
                type_: EventType::Warning,
                reason: problem.reason.into(),
                note: Some(problem.message.clone()),
                action: "Validate".into(),
                secondary: None,
            },
        )
        .await;
    }
    let problem_reason = problem.reason;
    let observation = Observation {
        generation: object.meta().generation,
        references: Err(problem),
        rollout: None,
        upgrade: Decision::Proceed,
        warnings: Vec::new(),
        target_version: version,
        // Kept from the last rendering: a status merge patch cannot drop a field by leaving
        // it out, so dropping it here would be a write on every reconcile.
        endpoints: previous.endpoints.clone(),
        etcd_unreachable: None,
        advisories: Vec::new(),
    };
    let next = status::component_status(previous, observation, Timestamp::now());
    let again = if problem_reason == "ReferenceNotFound" {
        super::MISSING_REFERENCE_REQUEUE
    } else {
        super::INVALID_REQUEUE
    };
    status::write(&ctx.client, object, previous, &next).await?;
    Ok(Action::requeue(again))
}
