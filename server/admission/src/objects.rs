//! [`Objects`] over the store: admission policies read their params (any kind the logical cluster
//! serves, custom resources included) from the cluster being written to, as kube's policy plugins
//! read them from informers of the param kind.

use futures::future::BoxFuture;
use kcp_apimachinery::ApiError;
use kcp_registry::storage::objects::ListRequest;
use kcp_registry::store::{Location, RestStore};
use kcp_registry::{LogicalClusterName, ResourceType};
use serde_json::Value;
use std::sync::Arc;

use crate::sources::Objects;

/// The objects of one logical cluster.
pub struct StoreObjects<'a> {
    store: &'a RestStore,
    cluster: &'a LogicalClusterName,
}

impl<'a> StoreObjects<'a> {
    pub fn new(store: &'a RestStore, cluster: &'a LogicalClusterName) -> StoreObjects<'a> {
        StoreObjects { store, cluster }
    }

    /// The served type of `kind` in `api_version` (`group/version`, or `version` for core).
    fn resource_type(&self, api_version: &str, kind: &str) -> Option<Arc<ResourceType>> {
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        self.store
            .registry()
            .for_cluster(self.cluster)
            .types()
            .iter()
            .find(|t| t.group == group && t.version == version && t.kind == kind)
            .cloned()
    }
}

impl Objects for StoreObjects<'_> {
    fn get<'b>(
        &'b self,
        api_version: &'b str,
        kind: &'b str,
        namespace: Option<&'b str>,
        name: &'b str,
    ) -> BoxFuture<'b, Result<Option<Value>, ApiError>> {
        Box::pin(async move {
            let Some(rt) = self.resource_type(api_version, kind) else {
                return Ok(None);
            };
            let at = Location {
                cluster: self.cluster,
                namespace: namespace.filter(|_| rt.namespaced),
            };
            match self.store.get(&rt, at, name).await {
                Ok(stored) => Ok(Some(stored.object)),
                Err(e) if e.code == 404 => Ok(None),
                Err(e) => Err(e),
            }
        })
    }

    fn list<'b>(
        &'b self,
        api_version: &'b str,
        kind: &'b str,
        namespace: Option<&'b str>,
    ) -> BoxFuture<'b, Result<Vec<Value>, ApiError>> {
        Box::pin(async move {
            let Some(rt) = self.resource_type(api_version, kind) else {
                return Ok(Vec::new());
            };
            let prefix = self
                .store
                .keys(&rt)
                .scope(self.cluster, namespace.filter(|_| rt.namespaced));
            let page = self
                .store
                .list(&rt, ListRequest::everything(&prefix), &|_| true)
                .await?;
            Ok(page.items)
        })
    }
}
