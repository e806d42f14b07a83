//! The controllers: kube-runtime loops that run, per custom resource,
//! dereference (client) -> validate (pure) -> render (pure) -> apply (server-side apply) -> status.
//!
//! A spec or reference problem is not an error of the loop: it becomes a condition and an event,
//! and the object waits for a change. Errors (API failures, broken CA Secrets) are retried with a
//! per-object exponential backoff, so a failing object never hot-loops.

pub mod apply;
pub mod backoff;
pub mod bindings;
pub mod cacheserver;
pub mod certificates;
pub mod component;
pub mod deregister;
pub mod finalizer;
pub mod frontproxy;
pub mod kcp;
pub mod kubeconfig;
pub mod metrics;
pub mod report;
pub mod run;
pub mod server;
pub mod shard_list;
pub mod status;
pub mod upgrade;
pub mod virtualworkspace;

use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::NamespaceResourceScope;
use kube::api::PatchParams;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;

use crate::naming::FIELD_MANAGER;

pub use backoff::Backoff;
use kcp::{Connector, Direct};
/// `error: cause: cause` in one line, as conditions, events and logs print errors.
pub use kcp_apimachinery::gofmt::error_chain;
pub use metrics::Metrics;

/// Longest time between two reconciles of a healthy object.
pub const MAX_REQUEUE: Duration = Duration::from_secs(3600);
/// How soon a component whose upgrade is held back looks at the earlier stages again.
pub const HELD_REQUEUE: Duration = Duration::from_secs(30);
/// How soon an invalid object is looked at again even without a change (its references may
/// appear in objects the controller does not watch).
pub const INVALID_REQUEUE: Duration = Duration::from_secs(300);
/// How soon an object naming a Secret or ConfigMap that does not exist looks again: creating it
/// changes nothing the controller watches, and users expect the fix to take at once.
pub const MISSING_REFERENCE_REQUEUE: Duration = Duration::from_secs(10);

/// Parameters of the operator's merge patches (status, finalizers): they name the operator as
/// field manager, so managedFields never show `unknown`.
pub fn merge_params() -> PatchParams {
    PatchParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PatchParams::default()
    }
}

/// Why a reconcile failed (and will be retried with backoff).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("Kubernetes API request failed")]
    Kube(#[source] kube::Error),
    #[error("failed to serialise an object")]
    Serialize(#[source] serde_json::Error),
    #[error("failed to render the child objects")]
    Render(#[source] crate::render::children::Error),
    #[error("failed to issue a certificate")]
    Pki(#[source] crate::pki::Error),
    #[error("invalid certificate template")]
    Template(#[source] kcp_apimachinery::duration::DurationError),
    #[error("CA Secret {0:?} is unreadable; it is never regenerated while it exists")]
    BrokenCa(String),
    #[error("Secret {0:?} does not exist")]
    MissingSecret(String),
    #[error("Secret {secret:?} has no key {key:?}")]
    MissingKey { secret: String, key: &'static str },
    #[error("ConfigMap {0:?} does not exist")]
    MissingConfigMap(String),
    #[error("{0}")]
    Invalid(String),
    #[error("managed etcd")]
    Etcd(#[source] crate::etcd::members::Error),
    #[error("request to kcp failed")]
    Kcp(#[source] kube::Error),
}

impl Error {
    /// Whether only a change by the user (a missing Secret or ConfigMap created, a broken CA
    /// replaced) can make this go away; such errors are reported in the status, not retried hot.
    pub fn is_for_the_user(&self) -> bool {
        matches!(
            self,
            Error::MissingSecret(_)
                | Error::MissingKey { .. }
                | Error::MissingConfigMap(_)
                | Error::BrokenCa(_)
                | Error::Invalid(_)
        )
    }

    /// CamelCase reason for events and metrics.
    pub fn reason(&self) -> &'static str {
        match self {
            Error::Kube(_) => "ApiError",
            Error::Serialize(_) | Error::Render(_) => "RenderFailed",
            Error::Pki(_) | Error::Template(_) | Error::BrokenCa(_) => "CertificateFailed",
            Error::MissingSecret(_) | Error::MissingKey { .. } | Error::MissingConfigMap(_) => {
                "ReferenceNotFound"
            }
            Error::Etcd(_) => "EtcdFailed",
            Error::Kcp(_) => "KcpRequestFailed",
            Error::Invalid(_) => "InvalidSpec",
        }
    }
}

/// A kind the controllers read, watch and write: namespaced, with a static type (no dynamic
/// type), and everything kube-runtime and the typed `Api` calls ask of it. Implemented for every
/// such type, so a generic helper names this one trait instead of the whole list.
pub trait Watched:
    Resource<DynamicType = (), Scope = NamespaceResourceScope>
    + Clone
    + DeserializeOwned
    + Debug
    + Send
    + Sync
    + 'static
{
}

impl<K> Watched for K where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + Debug
        + Send
        + Sync
        + 'static
{
}

/// State shared by every reconcile.
pub struct Context {
    /// The host cluster.
    pub client: Client,
    pub reporter: Reporter,
    pub backoff: Backoff,
    /// How to reach kcp itself (shard registrations, Kubeconfig bindings).
    pub kcp: Arc<dyn Connector>,
    /// Reconcile counts and durations, served at `/metrics`.
    pub metrics: Arc<Metrics>,
}

impl Context {
    pub fn new(client: Client) -> Self {
        Self {
            client,
            reporter: Reporter {
                controller: FIELD_MANAGER.into(),
                instance: std::env::var("POD_NAME").ok(),
            },
            backoff: Backoff::default(),
            kcp: Arc::new(Direct),
            metrics: Arc::default(),
        }
    }

    /// The same context counting into `metrics` (shared with the host cluster's client).
    pub fn with_metrics(self, metrics: Arc<Metrics>) -> Self {
        Self { metrics, ..self }
    }

    /// The same context reaching kcp through `connector`.
    pub fn with_connector(self, connector: Arc<dyn Connector>) -> Self {
        Self {
            kcp: connector,
            ..self
        }
    }

    /// Publishes an event about `object` (its note on one line, within the server's limit); a
    /// failure to publish is logged, never fatal.
    pub async fn publish<K: Resource<DynamicType = ()>>(&self, object: &K, mut event: Event) {
        event.note = event.note.as_deref().map(report::bounded);
        let recorder = Recorder::new(self.client.clone(), self.reporter.clone());
        let reference = object.object_ref(&());
        if let Err(error) = recorder.publish(&event, &reference).await {
            tracing::warn!(%error, reason = %event.reason, "failed to publish event");
        }
    }

    /// Warning event for a failed reconcile: one line (the log has the whole chain).
    pub async fn publish_failure<K: Resource<DynamicType = ()>>(&self, object: &K, error: &Error) {
        let note = report::summary(error);
        self.publish(
            object,
            Event {
                type_: EventType::Warning,
                reason: error.reason().into(),
                note: Some(note),
                action: "Reconcile".into(),
                secondary: None,
            },
        )
        .await;
    }
}
