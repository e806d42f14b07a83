//! The APIExport controller (upstream's `pkg/reconciler/apis/apiexport`): an export that names no
//! identity gets a generated one (Secret `<export-name>` in namespace `kcp-system` of the export's
//! logical cluster, created with the namespace if absent, data key `key` = a random 256-bit
//! string) and `spec.identity.secretRef` pointing at it; `status.identityHash` is the key's
//! SHA-256, recorded once (a Secret whose hash differs later makes `IdentityValid` False with
//! upstream's message, the recorded hash stays). Unless annotated
//! `apiexports.apis.kcp.io/skip-endpointslice`, the export gets its default
//! APIExportEndpointSlice of the same name, owned by the export.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kcp_apimachinery::{ApiError, meta, time};
use kcp_apis::conditions::{self, Condition, Severity};
use kcp_apis::identity;
use kcp_registry::storage::objects::ListRequest;
use kcp_registry::store::{Location, RestStore};
use kcp_registry::{LogicalClusterName, ResourceType};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::{cluster_of, core_type, stored_type};
use crate::TenancyIndex;
use crate::runner::{self, Controller, Pass, Queue};

/// The annotation that keeps an export without a default endpoint slice.
pub const SKIP_ENDPOINT_SLICE_ANNOTATION: &str = "apiexports.apis.kcp.io/skip-endpointslice";

/// Runs until `shutdown`.
pub async fn run(store: RestStore, tenancy: Arc<TenancyIndex>, shutdown: CancellationToken) {
    let types = match Types::of(&store) {
        Ok(types) => types,
        Err(error) => {
            tracing::error!(%error, "the APIExport controller cannot start");
            return;
        }
    };
    runner::run(
        Exports {
            store,
            tenancy,
            types,
        },
        shutdown,
    )
    .await;
}

struct Types {
    exports: Arc<ResourceType>,
    slices: Arc<ResourceType>,
    secrets: Arc<ResourceType>,
    namespaces: Arc<ResourceType>,
}

impl Types {
    fn of(store: &RestStore) -> Result<Types, ApiError> {
        Ok(Types {
            exports: stored_type(store, kcp_apis::API_EXPORTS)?,
            slices: stored_type(store, kcp_apis::API_EXPORT_ENDPOINT_SLICES)?,
            secrets: core_type(store, "secrets")?,
            namespaces: core_type(store, "namespaces")?,
        })
    }
}

struct Exports {
    store: RestStore,
    tenancy: Arc<TenancyIndex>,
    types: Types,
}

impl Controller for Exports {
    type Key = (LogicalClusterName, String);
    const NAME: &'static str = "apiexports";
    const RETRY_AFTER: Duration = Duration::from_secs(1);

    async fn follow(&self, queue: &Queue<Self::Key>) -> Result<(), ApiError> {
        let prefix = self
            .store
            .keys(&self.types.exports)
            .all_clusters()
            .to_string();
        let page = self
            .store
            .list(
                &self.types.exports,
                ListRequest::everything(&prefix),
                &|_| true,
            )
            .await?;
        let key = |export: &Value| Some((cluster_of(export)?, meta::name(export)?.to_string()));
        for key in page.items.iter().filter_map(key) {
            queue.add(key);
        }
        let mut changes = self
            .store
            .objects()
            .watch_current(&prefix, page.revision + 1)
            .await?;
        while let Some(change) = changes.next().await {
            if let Some(key) = key(&change?.object) {
                queue.add(key);
            }
        }
        Err(ApiError::service_unavailable("APIExport watch closed"))
    }

    async fn reconcile(&self, (cluster, name): &Self::Key) -> Result<Pass, ApiError> {
        let at = Location {
            cluster,
            namespace: None,
        };
        let export = match self.store.get(&self.types.exports, at, name).await {
            Ok(stored) => stored.object,
            Err(e) if e.code == 404 => return Ok(Pass::Done),
            Err(e) => return Err(e),
        };
        if export.pointer("/spec/identity/secretRef").is_none() {
            return self.generate_identity(cluster, name).await;
        }
        let verified = self.verify_identity(cluster, &export).await?;
        if !meta::annotations(&export).contains_key(SKIP_ENDPOINT_SLICE_ANNOTATION) {
            self.ensure_endpoint_slice(cluster, &export).await?;
        }
        Ok(if verified { Pass::Done } else { Pass::Again })
    }
}

impl Exports {
    /// Creates the identity Secret (and its namespace) unless it exists, then points the export
    /// at it; the next pass records the hash.
    async fn generate_identity(
        &self,
        cluster: &LogicalClusterName,
        name: &str,
    ) -> Result<Pass, ApiError> {
        let in_cluster = Location {
            cluster,
            namespace: None,
        };
        let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": identity::SECRET_NAMESPACE}});
        self.store
            .create_if_absent(&self.types.namespaces, in_cluster, namespace)
            .await?;
        let in_namespace = Location {
            cluster,
            namespace: Some(identity::SECRET_NAMESPACE),
        };
        let secret = identity::secret(name, &identity::new_key());
        if let Err(error) = self
            .store
            .create_if_absent(&self.types.secrets, in_namespace, secret)
            .await
        {
            let message = format!("Error creating identity secret: {error}");
            self.write_condition(
                cluster,
                name,
                Condition::fails(
                    conditions::IDENTITY_VALID,
                    conditions::IDENTITY_GENERATION_FAILED,
                    Severity::Error,
                    message,
                ),
                None,
            )
            .await?;
            return Err(error);
        }
        let point_at_secret = |current: &Value| {
            let mut new = current.clone();
            new["spec"]["identity"]["secretRef"] = identity::default_secret_ref(name);
            meta::metadata_mut(&mut new).remove("resourceVersion");
            Ok(new)
        };
        match self
            .store
            .update(
                &self.types.exports,
                in_cluster,
                name,
                &point_at_secret,
                None,
                false,
            )
            .await
        {
            Ok(_) => Ok(Pass::Done),
            Err(e) if e.code == 404 => Ok(Pass::Done),
            Err(e) => Err(e),
        }
    }

    /// Records the identity hash (once) and `IdentityValid`; returns whether the identity is valid.
    async fn verify_identity(
        &self,
        cluster: &LogicalClusterName,
        export: &Value,
    ) -> Result<bool, ApiError> {
        let name = meta::name(export).unwrap_or_default();
        let reference = |field: &str| {
            export
                .pointer(&format!("/spec/identity/secretRef/{field}"))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        let (secret_namespace, secret_name) = (reference("namespace"), reference("name"));
        let at = Location {
            cluster,
            namespace: Some(&secret_namespace),
        };
        let hash = match self.store.get(&self.types.secrets, at, &secret_name).await {
            Ok(secret) => identity::hash_of_secret(&secret.object).map_err(|e| e.to_string()),
            Err(e) if e.code == 404 => Err(e.message.clone()),
            Err(e) => return Err(e),
        };
        let recorded = export
            .pointer("/status/identityHash")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let (condition, new_hash) = match hash {
            Err(message) => (
                Condition::fails(
                    conditions::IDENTITY_VALID,
                    conditions::IDENTITY_VERIFICATION_FAILED,
                    Severity::Error,
                    message,
                ),
                None,
            ),
            Ok(hash) if recorded.is_empty() => {
                (Condition::holds(conditions::IDENTITY_VALID), Some(hash))
            }
            Ok(hash) if hash == recorded => (Condition::holds(conditions::IDENTITY_VALID), None),
            Ok(hash) => {
                let message = format!(
                    "hash mismatch: identity secret hash {hash:?} must match status.identityHash {recorded:?}"
                );
                (
                    Condition::fails(
                        conditions::IDENTITY_VALID,
                        conditions::IDENTITY_VERIFICATION_FAILED,
                        Severity::Error,
                        message,
                    ),
                    None,
                )
            }
        };
        let valid = condition.is_true();
        let mut desired = export.clone();
        let changed = condition.set_on(&mut desired, &time::now_rfc3339()) || new_hash.is_some();
        if changed {
            self.write_condition(cluster, name, condition, new_hash)
                .await?;
        }
        Ok(valid)
    }

    /// Writes a condition (and a first identity hash) into the stored export's status.
    async fn write_condition(
        &self,
        cluster: &LogicalClusterName,
        name: &str,
        condition: Condition,
        hash: Option<String>,
    ) -> Result<(), ApiError> {
        let now = time::now_rfc3339();
        let set_status = |current: &Value| {
            let mut new = current.clone();
            if let Some(hash) = &hash
                && new
                    .pointer("/status/identityHash")
                    .and_then(Value::as_str)
                    .is_none_or(str::is_empty)
            {
                if !new["status"].is_object() {
                    new["status"] = json!({});
                }
                new["status"]["identityHash"] = json!(hash);
            }
            condition.set_on(&mut new, &now);
            meta::metadata_mut(&mut new).remove("resourceVersion");
            Ok(new)
        };
        let at = Location {
            cluster,
            namespace: None,
        };
        match self
            .store
            .update(
                &self.types.exports,
                at,
                name,
                &set_status,
                Some("status"),
                false,
            )
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if e.code == 404 => Ok(()),
            Err(e) => Err(e),
        }
    }

    async fn ensure_endpoint_slice(
        &self,
        cluster: &LogicalClusterName,
        export: &Value,
    ) -> Result<(), ApiError> {
        let name = meta::name(export).unwrap_or_default();
        let mut reference = json!({"name": name});
        let path = self.tenancy.path(cluster);
        if !path.is_empty() {
            reference["path"] = json!(path);
        }
        let slice = json!({
            "apiVersion": "apis.kcp.io/v1alpha1",
            "kind": "APIExportEndpointSlice",
            "metadata": {
                "name": name,
                "ownerReferences": [{
                    "apiVersion": "apis.kcp.io/v1alpha2",
                    "kind": "APIExport",
                    "name": name,
                    "uid": meta::uid(export).unwrap_or_default(),
                }],
            },
            "spec": {"export": reference},
        });
        let at = Location {
            cluster,
            namespace: None,
        };
        self.store
            .create_if_absent(&self.types.slices, at, slice)
            .await
            .map(|_| ())
    }
}
