//! A Rust client of the cache server, for shards (replication) and tests: get, list, watch,
//! create, update and delete of objects of one resource, at one shard and logical cluster (`*`
//! for either in lists and watches), over HTTPS with the credentials of a kubeconfig (as
//! upstream's cache client is built from `--cache-kubeconfig`). The kubeconfig names the bare
//! server; the client adds `/services/cache`. A failed answer is the server's `Status` as an
//! [`ApiError`] (404, 409, 410, ...).

use std::path::Path;

use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use kcp_apimachinery::ApiError;
use kcp_storage::Revision;
use serde_json::Value;

use crate::path::SERVICE_PREFIX;

/// A resource of the cache: group (`""` for the core group), version and plural name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resource {
    pub group: String,
    pub version: String,
    pub resource: String,
}

impl Resource {
    pub fn new(group: &str, version: &str, resource: &str) -> Resource {
        Resource {
            group: group.to_owned(),
            version: version.to_owned(),
            resource: resource.to_owned(),
        }
    }
}

/// Where in the cache: a shard and a logical cluster (`*` for every one, in lists and watches
/// only), and a namespace for namespaced objects.
#[derive(Debug, Clone, Copy)]
pub struct At<'a> {
    pub shard: &'a str,
    pub cluster: &'a str,
    pub namespace: Option<&'a str>,
}

/// One event of a watch: `ADDED`, `MODIFIED` or `DELETED` and the object.
#[derive(Debug, Clone, PartialEq)]
pub struct WatchEvent {
    pub kind: String,
    pub object: Value,
}

/// What a list read: the items and the revision they were read at (to watch from).
#[derive(Debug, Clone, PartialEq)]
pub struct Listed {
    pub items: Vec<Value>,
    pub revision: Revision,
}

/// Why no client could be built from a kubeconfig.
#[derive(Debug, thiserror::Error)]
#[error("cache kubeconfig {path}: {source}")]
pub struct ClientError {
    path: String,
    source: kcp_kubeconfig::https::HttpsError,
}

/// The cache server of one kubeconfig.
#[derive(Debug, Clone)]
pub struct CacheClient {
    http: reqwest::Client,
    /// `<server>/services/cache`.
    base: String,
}

impl CacheClient {
    /// A client of the server (and with the credentials) of the kubeconfig's current context; a
    /// server URL ending in `/clusters/<name>` (a shard's admin kubeconfig) is taken back to the
    /// server's base URL.
    pub fn from_kubeconfig(path: &Path) -> Result<CacheClient, ClientError> {
        let target = kcp_kubeconfig::https::client(path, None).map_err(|source| ClientError {
            path: path.display().to_string(),
            source,
        })?;
        Ok(CacheClient::new(target.client.clone(), target.base_url()))
    }

    /// A client of the cache at `server` (`https://host:port`) through `http`.
    pub fn new(http: reqwest::Client, server: &str) -> CacheClient {
        CacheClient {
            http,
            base: format!("{}{SERVICE_PREFIX}", server.trim_end_matches('/')),
        }
    }

    fn url(&self, resource: &Resource, at: At<'_>, name: Option<&str>) -> String {
        let api = if resource.group.is_empty() {
            format!("api/{}", resource.version)
        } else {
            format!("apis/{}/{}", resource.group, resource.version)
        };
        let namespace = at
            .namespace
            .map(|ns| format!("namespaces/{ns}/"))
            .unwrap_or_default();
        let name = name.map(|n| format!("/{n}")).unwrap_or_default();
        format!(
            "{}/shards/{}/clusters/{}/{api}/{namespace}{}{name}",
            self.base, at.shard, at.cluster, resource.resource
        )
    }

    /// Sends a request: the JSON answer on success, else the server's Status as an error.
    async fn send(&self, request: reqwest::RequestBuilder) -> Result<Value, ApiError> {
        let response = request.send().await.map_err(unreachable)?;
        let status = response.status();
        let body: Value = response.json().await.unwrap_or(Value::Null);
        if status.is_success() {
            Ok(body)
        } else {
            Err(ApiError::from_answer(status.as_u16(), &body))
        }
    }

    /// The object, or `None` when the cache has none.
    pub async fn get(
        &self,
        resource: &Resource,
        at: At<'_>,
        name: &str,
    ) -> Result<Option<Value>, ApiError> {
        match self
            .send(self.http.get(self.url(resource, at, Some(name))))
            .await
        {
            Ok(object) => Ok(Some(object)),
            Err(error) if error.code == 404 => Ok(None),
            Err(error) => Err(error),
        }
    }

    /// Every object at `at` (wildcards allowed) matching `label_selector` (`""`: all).
    pub async fn list(
        &self,
        resource: &Resource,
        at: At<'_>,
        label_selector: &str,
    ) -> Result<Listed, ApiError> {
        let request = self
            .http
            .get(self.url(resource, at, None))
            .query(&[("labelSelector", label_selector)]);
        let list = self.send(request).await?;
        let revision = list
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .and_then(|rv| rv.parse().ok())
            .ok_or_else(|| ApiError::internal_error("the cache's list has no resourceVersion"))?;
        let items = match list.get("items") {
            Some(Value::Array(items)) => items.clone(),
            _ => Vec::new(),
        };
        Ok(Listed { items, revision })
    }

    /// The changes at `at` after `revision` (`None`: the current objects first, as ADDED). A
    /// revision the cache has compacted is a 410 Expired error before any event. The stream
    /// ends when the server ends it; an ERROR event or a broken stream is its last item.
    pub async fn watch(
        &self,
        resource: &Resource,
        at: At<'_>,
        revision: Option<Revision>,
        label_selector: &str,
    ) -> Result<BoxStream<'static, Result<WatchEvent, ApiError>>, ApiError> {
        let mut query = vec![
            ("watch", "1".to_owned()),
            ("labelSelector", label_selector.to_owned()),
        ];
        if let Some(revision) = revision {
            query.push(("resourceVersion", revision.to_string()));
        }
        let response = self
            .http
            .get(self.url(resource, at, None))
            .query(&query)
            .send()
            .await
            .map_err(unreachable)?;
        let status = response.status();
        if !status.is_success() {
            let body: Value = response.json().await.unwrap_or(Value::Null);
            return Err(ApiError::from_answer(status.as_u16(), &body));
        }
        Ok(events(response.bytes_stream()).boxed())
    }

    /// Creates the object (409 AlreadyExists when it is there); returns it as stored.
    pub async fn create(
        &self,
        resource: &Resource,
        at: At<'_>,
        object: &Value,
    ) -> Result<Value, ApiError> {
        self.send(self.http.post(self.url(resource, at, None)).json(object))
            .await
    }

    /// Replaces the object; with a `resourceVersion` only if it is still that one (409 Conflict).
    pub async fn update(
        &self,
        resource: &Resource,
        at: At<'_>,
        object: &Value,
    ) -> Result<Value, ApiError> {
        let name = kcp_apimachinery::meta::name(object).unwrap_or_default();
        self.send(
            self.http
                .put(self.url(resource, at, Some(name)))
                .json(object),
        )
        .await
    }

    /// Deletes the object; returns it as it was.
    pub async fn delete(
        &self,
        resource: &Resource,
        at: At<'_>,
        name: &str,
    ) -> Result<Value, ApiError> {
        self.send(self.http.delete(self.url(resource, at, Some(name))))
            .await
    }
}

fn unreachable(error: reqwest::Error) -> ApiError {
    ApiError::service_unavailable(&format!("the cache server: {error}"))
}

/// The JSON events of a watch body, one per line.
fn events(
    body: impl Stream<Item = reqwest::Result<bytes::Bytes>> + Send + 'static,
) -> impl Stream<Item = Result<WatchEvent, ApiError>> + Send {
    let lines = futures::stream::unfold(
        (Box::pin(body), Vec::<u8>::new(), false),
        |(mut body, mut buffer, done)| async move {
            if done {
                return None;
            }
            loop {
                if let Some(end) = buffer.iter().position(|b| *b == b'\n') {
                    let line: Vec<u8> = buffer.drain(..=end).collect();
                    return Some((Ok(line), (body, buffer, false)));
                }
                match body.next().await {
                    Some(Ok(chunk)) => buffer.extend_from_slice(&chunk),
                    Some(Err(error)) => {
                        return Some((Err(unreachable(error)), (body, buffer, true)));
                    }
                    None => return None,
                }
            }
        },
    );
    lines.map(|line| {
        let event: Value = serde_json::from_slice(&line?)
            .map_err(|e| ApiError::internal_error(&format!("a watch event is not JSON: {e}")))?;
        let kind = event["type"].as_str().unwrap_or_default().to_owned();
        let object = event.get("object").cloned().unwrap_or(Value::Null);
        if kind == "ERROR" {
            let code = object["code"].as_u64().and_then(|c| u16::try_from(c).ok());
            return Err(ApiError::from_answer(code.unwrap_or(500), &object));
        }
        Ok(WatchEvent { kind, object })
    })
}
