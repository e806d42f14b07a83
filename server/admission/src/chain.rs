//! The admission chain of one request, in kube-apiserver's plugin order: mutating admission
//! policies, then mutating webhooks; then validating admission policies, validating webhooks,
//! ResourceQuota, the CertificateSigningRequest rules and the total object count limit of the
//! logical cluster.
//!
//! [`Admission`] is the server-wide part (the configuration index, the webhook client, the store);
//! [`Admission::for_request`] binds it to the requesting user and the write's options and is what
//! the store calls through [`Admit`]. Like kube-apiserver, the webhooks and policies never admit
//! writes of `admissionregistration.k8s.io` objects themselves, so a broken webhook can always be
//! removed.

use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use kcp_apimachinery::ApiError;
use kcp_authn::UserInfo;
use kcp_registry::admission::{Admit, Operation, Write};
use kcp_registry::store::{Location, RestStore};
use serde_json::Value;

use crate::configs::{ClusterConfig, ConfigIndex};
use crate::object_count::ObjectCounts;
use crate::objects::StoreObjects;
use crate::sources::Authorizer;
use crate::webhook::WebhookClient;
use crate::{Attributes, Outcome, certificates, object_limit, quota};

const ADMISSION_GROUP: &str = "admissionregistration.k8s.io";
const CERTIFICATES_GROUP: &str = "certificates.k8s.io";

/// The server-wide part of admission.
#[derive(Clone)]
pub struct Admission {
    configs: Arc<ConfigIndex>,
    client: WebhookClient,
    store: RestStore,
    object_counts: Arc<ObjectCounts>,
}

impl Admission {
    /// Admission over `store`, whose configuration index must be one of the store's write hooks,
    /// limiting the objects of logical clusters by `object_counts`.
    pub fn new(
        configs: Arc<ConfigIndex>,
        store: RestStore,
        object_counts: Arc<ObjectCounts>,
    ) -> Admission {
        Admission {
            configs,
            client: WebhookClient::new(),
            store,
            object_counts,
        }
    }

    /// The configuration index (to [`follow`](ConfigIndex::follow) the store with).
    pub fn configs(&self) -> &Arc<ConfigIndex> {
        &self.configs
    }

    /// The object counts of the logical clusters (to [`run`](ObjectCounts::run) their scans).
    pub fn object_counts(&self) -> &Arc<ObjectCounts> {
        &self.object_counts
    }

    /// The admission of one request's writes by `user`, with the write's `options` as sent.
    pub fn for_request<'a>(
        &'a self,
        user: &'a UserInfo,
        options: Option<Value>,
        authorizer: Box<dyn Authorizer + 'a>,
    ) -> RequestAdmission<'a> {
        RequestAdmission {
            admission: self,
            user,
            options,
            authorizer,
            outcome: Mutex::new(Outcome::default()),
        }
    }
}

/// The admission of one request; collects its warnings and audit annotations.
pub struct RequestAdmission<'a> {
    admission: &'a Admission,
    user: &'a UserInfo,
    options: Option<Value>,
    authorizer: Box<dyn Authorizer + 'a>,
    outcome: Mutex<Outcome>,
}

impl RequestAdmission<'_> {
    /// What admission added to the response (warnings, audit annotations) so far.
    pub fn outcome(&self) -> Outcome {
        self.outcome
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    fn record(&self, outcome: Outcome) {
        let mut recorded = self
            .outcome
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        for warning in outcome.warnings {
            recorded.warn(warning);
        }
        recorded.audit_annotations.extend(outcome.audit_annotations);
    }

    /// The admission configuration of the write's logical cluster.
    async fn configured(&self, write: &Write<'_>) -> Result<Arc<ClusterConfig>, ApiError> {
        self.admission
            .configs
            .get(&self.admission.store, write.cluster)
            .await
    }

    /// The Namespace object of a namespaced write (for namespace selectors and
    /// `namespaceObject`), `None` when it does not exist.
    async fn namespace_of(&self, write: &Write<'_>) -> Result<Option<Value>, ApiError> {
        let Some(namespace) = write.namespace.filter(|_| write.rt.namespaced) else {
            return Ok(None);
        };
        let Some(namespaces) = self
            .admission
            .store
            .registry()
            .builtin_type("", "v1", "namespaces")
        else {
            return Ok(None);
        };
        let at = Location {
            cluster: write.cluster,
            namespace: None,
        };
        match self.admission.store.get(&namespaces, at, namespace).await {
            Ok(stored) => Ok(Some(stored.object)),
            Err(e) if e.code == 404 => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// What the cluster's webhooks and policies need to judge `write`; `None` when the write is
    /// exempt from them or none are configured.
    async fn dispatch<'w>(
        &'w self,
        write: &Write<'w>,
        config: &Arc<ClusterConfig>,
    ) -> Result<Option<Dispatch<'w>>, ApiError> {
        if write.rt.group == ADMISSION_GROUP
            || (config.webhooks.is_empty() && config.policies.is_empty())
        {
            return Ok(None);
        }
        Ok(Some(Dispatch {
            config: config.clone(),
            namespace: self.namespace_of(write).await?,
            objects: StoreObjects::new(&self.admission.store, write.cluster),
            client: &self.admission.client,
        }))
    }

    async fn mutate_write(
        &self,
        write: Write<'_>,
        object: &mut Value,
        old: Option<&Value>,
    ) -> Result<(), ApiError> {
        let attrs = Attributes::new(write, self.user, self.options.clone());
        if is_csr(&write) && write.operation == Operation::Create {
            certificates::set_requester(&attrs, object);
        }
        let config = self.configured(&write).await?;
        let Some(dispatch) = self.dispatch(&write, &config).await? else {
            return Ok(());
        };
        let mut outcome = Outcome::default();
        let result = dispatch.mutate(&attrs, object, old, &mut outcome).await;
        self.record(outcome);
        result
    }

    async fn validate_write(
        &self,
        write: Write<'_>,
        object: Option<&Value>,
        old: Option<&Value>,
    ) -> Result<(), ApiError> {
        let attrs = Attributes::new(write, self.user, self.options.clone());
        let config = self.configured(&write).await?;
        if let Some(dispatch) = self.dispatch(&write, &config).await? {
            let mut outcome = Outcome::default();
            let result = dispatch.validate(&attrs, object, old, &mut outcome).await;
            self.record(outcome);
            result?;
        }
        let quota_applies = write.operation != Operation::Delete
            && write
                .namespace
                .filter(|_| write.rt.namespaced)
                .is_some_and(|ns| config.quota_namespaces.contains(ns));
        if quota_applies {
            quota::admit(&self.admission.store, &attrs, object, old).await?;
        }
        if is_csr(&write) {
            certificates::admit(self.authorizer.as_ref(), &attrs, object, old).await?;
        }
        object_limit::admit(&self.admission.object_counts, &self.admission.store, &write).await
    }
}

/// A write to judge by its cluster's policies and webhooks (policies first, as kube orders its
/// plugins).
struct Dispatch<'a> {
    config: Arc<ClusterConfig>,
    namespace: Option<Value>,
    objects: StoreObjects<'a>,
    client: &'a WebhookClient,
}

impl Dispatch<'_> {
    async fn mutate(
        &self,
        attrs: &Attributes,
        object: &mut Value,
        old: Option<&Value>,
        outcome: &mut Outcome,
    ) -> Result<(), ApiError> {
        let namespace = self.namespace.as_ref();
        let policies = &self.config.policies;
        policies
            .mutate(&self.objects, attrs, namespace, object, old, outcome)
            .await?;
        let webhooks = &self.config.webhooks;
        webhooks
            .mutate(self.client, attrs, namespace, object, old, outcome)
            .await
    }

    async fn validate(
        &self,
        attrs: &Attributes,
        object: Option<&Value>,
        old: Option<&Value>,
        outcome: &mut Outcome,
    ) -> Result<(), ApiError> {
        let namespace = self.namespace.as_ref();
        let policies = &self.config.policies;
        policies
            .validate(&self.objects, attrs, namespace, object, old, outcome)
            .await?;
        let webhooks = &self.config.webhooks;
        webhooks
            .validate(self.client, attrs, namespace, object, old, outcome)
            .await
    }
}

fn is_csr(write: &Write<'_>) -> bool {
    write.rt.group == CERTIFICATES_GROUP && write.rt.plural == "certificatesigningrequests"
}

impl Admit for RequestAdmission<'_> {
    fn mutate<'a>(
        &'a self,
        write: Write<'a>,
        object: &'a mut Value,
        old: Option<&'a Value>,
    ) -> BoxFuture<'a, Result<(), ApiError>> {
        Box::pin(self.mutate_write(write, object, old))
    }

    fn validate<'a>(
        &'a self,
        write: Write<'a>,
        object: Option<&'a Value>,
        old: Option<&'a Value>,
    ) -> BoxFuture<'a, Result<(), ApiError>> {
        Box::pin(self.validate_write(write, object, old))
    }
}
