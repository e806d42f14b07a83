//! The cache's REST verbs over kcp-registry's object store: get, list, watch, create, update and
//! delete of objects of any resource, stored as they were written (no schema, as upstream's cache
//! server serves its types unstructured), for `system:masters` only.
//!
//! Like upstream: a list or watch may name every shard (`shards/*`) and every logical cluster
//! (`clusters/*`) and filter by `labelSelector`; a create of an existing object is 409
//! AlreadyExists, an update with a stale `resourceVersion` 409 Conflict (without one it
//! overwrites), a watch from a compacted `resourceVersion` 410 Expired. Every object read carries
//! `kcp.io/shard`, `kcp.io/cluster` and the store revision as `resourceVersion`.

use std::sync::Arc;

use futures::future::BoxFuture;
use http::{Method, Response};
use kcp_apimachinery::{ApiError, meta};
use kcp_apiserver::response::{self, Body};
use kcp_apiserver::services::{Service, ServiceRequest};
use kcp_apiserver::{ListOptions, Query};
use kcp_rbac::MASTERS_GROUP;
use kcp_registry::storage::ObjectStore;
use kcp_registry::storage::continuation::Continuation;
use kcp_registry::storage::objects::{ListRequest, ObjectRef, list_metadata};
use kcp_storage::{Revision, Storage};
use serde_json::{Value, json};

use crate::keys::{self, ShardAndCluster};
use crate::path::CachePath;
use crate::watch;

/// The cache's objects and verbs; mounted in a shard at `/services/cache/` or served alone.
pub struct CacheService {
    objects: ObjectStore,
}

impl CacheService {
    /// The cache over `storage`, its keys under `prefix` (`--etcd-prefix`).
    pub fn new(storage: Arc<dyn Storage>, prefix: &str) -> CacheService {
        CacheService {
            objects: ObjectStore::with_key_annotations(storage, prefix, ShardAndCluster),
        }
    }

    /// The cache's objects (its key layout, its store).
    pub(crate) fn objects(&self) -> &ObjectStore {
        &self.objects
    }

    /// Answers one request, errors as a `Status`.
    pub async fn answer(&self, request: ServiceRequest) -> Response<Body> {
        match self.route(request).await {
            Ok(response) => response,
            Err(error) => response::error(&error),
        }
    }

    async fn route(&self, request: ServiceRequest) -> Result<Response<Body>, ApiError> {
        if !request.user.groups.iter().any(|g| g == MASTERS_GROUP) {
            return Err(ApiError::forbidden(
                "",
                "",
                "",
                &format!(
                    "User {:?} cannot access the cache server: only {MASTERS_GROUP} may",
                    request.user.name
                ),
            ));
        }
        let path = CachePath::parse(&request.path)?;
        let query = Query::parse(request.query.as_deref());
        match (&request.method, path.name.is_some()) {
            (&Method::GET, true) => self.get(&path).await,
            (&Method::GET, false) if query.is_watch() => {
                let options = ListOptions::parse_watch(&query)?;
                watch::serve(&self.objects, &path, &options, request.shutdown).await
            }
            (&Method::GET, false) => self.list(&path, &ListOptions::parse(&query)?).await,
            (&Method::POST, false) => self.create(&path, &request.body).await,
            (&Method::PUT, true) => self.update(&path, &request.body).await,
            (&Method::DELETE, true) => self.delete(&path, &request.body).await,
            (method, _) => Err(ApiError::method_not_supported(
                &path.group,
                &path.resource,
                method.as_str(),
            )),
        }
    }

    fn key(&self, path: &CachePath, name: &str) -> Result<String, ApiError> {
        let (shard, cluster) = path.exact()?;
        Ok(keys::object_key(
            self.objects.prefix(),
            path,
            shard,
            cluster.as_str(),
            name,
        ))
    }

    async fn get(&self, path: &CachePath) -> Result<Response<Body>, ApiError> {
        let name = path.name.as_deref().unwrap_or_default();
        let what = what(path, name);
        let stored = self
            .objects
            .get(&self.key(path, name)?, what)
            .await?
            .ok_or_else(|| ApiError::not_found(&path.group, &path.resource, name))?;
        Ok(response::json(200, &stored.object))
    }

    async fn list(
        &self,
        path: &CachePath,
        options: &ListOptions,
    ) -> Result<Response<Body>, ApiError> {
        let prefix = keys::list_prefix(self.objects.prefix(), path);
        let revision = match options.resource_version.as_deref() {
            None | Some("0") => 0,
            Some(rv) => parse_revision(rv)?,
        };
        let continuation = options
            .continue_token
            .as_deref()
            .map(Continuation::decode)
            .transpose()?;
        let keep = |object: &Value| {
            keys::in_scope(path, object) && options.label_selector.matches(&meta::labels(object))
        };
        let page = self
            .objects
            .list(
                ListRequest {
                    prefix: &prefix,
                    revision,
                    limit: options.limit,
                    continuation,
                },
                &keep,
            )
            .await?;
        let metadata = list_metadata(page.revision, page.continue_token);
        Ok(response::json(
            200,
            &json!({
                "kind": "List",
                "apiVersion": path.api_version(),
                "metadata": metadata,
                "items": page.items,
            }),
        ))
    }

    async fn create(&self, path: &CachePath, body: &[u8]) -> Result<Response<Body>, ApiError> {
        let object = self.body_object(path, body)?;
        let name = meta::name(&object).unwrap_or_default().to_owned();
        let key = self.key(path, &name)?;
        let stored = self
            .objects
            .create(&key, &object, what(path, &name))
            .await?;
        Ok(response::json(201, &stored.object))
    }

    async fn update(&self, path: &CachePath, body: &[u8]) -> Result<Response<Body>, ApiError> {
        let object = self.body_object(path, body)?;
        let name = path.name.as_deref().unwrap_or_default();
        if meta::name(&object) != Some(name) {
            return Err(ApiError::bad_request(
                "the name of the object does not match the name on the URL",
            ));
        }
        let key = self.key(path, name)?;
        let what = what(path, name);
        let expected = match meta::resource_version(&object).filter(|rv| !rv.is_empty()) {
            Some(rv) => parse_revision(rv)?,
            None => {
                self.objects
                    .get(&key, what)
                    .await?
                    .ok_or_else(|| ApiError::not_found(&path.group, &path.resource, name))?
                    .revision
            }
        };
        let stored = self.objects.update(&key, &object, expected, what).await?;
        Ok(response::json(200, &stored.object))
    }

    /// Deletes at once (the cache keeps no finalizers); `preconditions.resourceVersion` of the
    /// body's DeleteOptions guards it. Answers the object as it was, at the delete's revision.
    async fn delete(&self, path: &CachePath, body: &[u8]) -> Result<Response<Body>, ApiError> {
        let name = path.name.as_deref().unwrap_or_default();
        let expected = if body.iter().all(u8::is_ascii_whitespace) {
            None
        } else {
            let options: Value = serde_json::from_slice(body)
                .map_err(|e| ApiError::bad_request(&format!("decoding DeleteOptions: {e}")))?;
            options
                .pointer("/preconditions/resourceVersion")
                .and_then(Value::as_str)
                .map(parse_revision)
                .transpose()?
        };
        let key = self.key(path, name)?;
        let stored = self
            .objects
            .delete(&key, expected, what(path, name))
            .await?;
        Ok(response::json(200, &stored.object))
    }

    /// The body of a create or update: a JSON object of this API version with a name, in the
    /// path's namespace (which it gets when it names none).
    fn body_object(&self, path: &CachePath, body: &[u8]) -> Result<Value, ApiError> {
        let mut object: Value = serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(&format!("the body is not a JSON object: {e}")))?;
        if !object.is_object() {
            return Err(ApiError::bad_request("the body is not a JSON object"));
        }
        if object
            .get("kind")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            return Err(ApiError::bad_request("Object 'Kind' is missing"));
        }
        if meta::api_version(&object) != Some(path.api_version().as_str()) {
            return Err(ApiError::bad_request(&format!(
                "the API version in the data ({}) does not match the expected API version ({})",
                meta::api_version(&object).unwrap_or_default(),
                path.api_version()
            )));
        }
        if meta::name(&object).is_none_or(str::is_empty) {
            return Err(ApiError::bad_request("metadata.name is required"));
        }
        match (meta::namespace(&object), path.namespace.as_deref()) {
            (None, Some(ns)) => meta::set_namespace(&mut object, ns),
            (found, wanted) if found == wanted => {}
            _ => {
                return Err(ApiError::bad_request(
                    "the namespace of the object does not match the namespace on the URL",
                ));
            }
        }
        Ok(object)
    }
}

impl Service for CacheService {
    fn serve(self: Arc<Self>, request: ServiceRequest) -> BoxFuture<'static, Response<Body>> {
        Box::pin(async move { self.answer(request).await })
    }
}

fn what<'a>(path: &'a CachePath, name: &'a str) -> ObjectRef<'a> {
    ObjectRef {
        group: &path.group,
        resource: &path.resource,
        name,
    }
}

pub(crate) fn parse_revision(rv: &str) -> Result<Revision, ApiError> {
    rv.parse::<Revision>()
        .ok()
        .filter(|rv| *rv >= 0)
        .ok_or_else(|| ApiError::bad_request(&format!("invalid resource version: {rv:?}")))
}
