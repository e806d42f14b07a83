//! The workspace scheduler's way to LogicalClusters on other shards: their API at each
//! `Shard.spec.baseURL`, with the CA and client certificate of
//! `--logical-cluster-admin-kubeconfig` (upstream's scheduler uses the same credentials; the
//! kubeconfig's server is not used, each shard's base URL is).
//!
//! A LogicalCluster is created, read and deleted at
//! `/clusters/<cluster>/apis/core.kcp.io/v1alpha1/logicalclusters[/cluster]`; every
//! LogicalCluster of a shard is listed and watched at `/clusters/*/...` (a watch is a stream of
//! JSON lines; an `ERROR` event such as `410 Gone` ends it with that code).

use std::path::Path;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use kcp_apimachinery::ApiError;
use kcp_controllers::remote_shards::{Listed, RemoteShards, WatchEvent, WatchEventKind};
use serde_json::Value;

use crate::shard_client::{self, ShardClient, ShardClientError};

const LOGICAL_CLUSTERS: &str = "apis/core.kcp.io/v1alpha1/logicalclusters";
/// How long a request (not a watch) may take: a shard that hangs must not hold a scheduler
/// worker; the pass is retried.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// LogicalClusters of other shards, with the logical-cluster-admin's credentials.
pub struct LogicalClusterAdmin {
    http: reqwest::Client,
}

impl LogicalClusterAdmin {
    /// The client of the scheduler of shard `shard`, with upstream's user agent for it
    /// (`kcp-workspace+<shard>`): the LogicalClusters it creates are managed by `kcp`.
    pub fn from_kubeconfig(
        path: &Path,
        shard: &str,
    ) -> Result<LogicalClusterAdmin, ShardClientError> {
        let client = ShardClient::from_kubeconfig(
            "logical-cluster-admin-kubeconfig",
            path,
            "base",
            &format!("kcp-workspace+{shard}"),
        )?;
        Ok(LogicalClusterAdmin { http: client.http })
    }
}

fn collection(base_url: &str, cluster: &str) -> String {
    format!("{base_url}/clusters/{cluster}/{LOGICAL_CLUSTERS}")
}

fn object(base_url: &str, cluster: &str) -> String {
    format!(
        "{}/{}",
        collection(base_url, cluster),
        kcp_tenancy::logical_cluster::NAME
    )
}

fn who(base_url: &str) -> String {
    format!("shard {base_url}")
}

/// One line of a watch: `{"type": ..., "object": ...}`.
fn parse_event(line: &[u8]) -> Result<WatchEvent, ApiError> {
    let event: Value = serde_json::from_slice(line)
        .map_err(|e| ApiError::service_unavailable(&format!("a watch event: {e}")))?;
    let object = event.get("object").cloned().unwrap_or(Value::Null);
    let kind = match event.get("type").and_then(Value::as_str) {
        Some("ADDED") => WatchEventKind::Added,
        Some("MODIFIED") => WatchEventKind::Modified,
        Some("DELETED") => WatchEventKind::Deleted,
        Some("BOOKMARK") => WatchEventKind::Bookmark,
        _ => {
            let code = object
                .get("code")
                .and_then(Value::as_u64)
                .and_then(|c| u16::try_from(c).ok())
                .unwrap_or(500);
            let message = object
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("watch error");
            return Err(shard_client::remote_error(code, message.to_string()));
        }
    };
    Ok(WatchEvent { kind, object })
}

/// The events of a watch body, one per line; ends after an error.
fn events<B: AsRef<[u8]>>(
    body: impl Stream<Item = reqwest::Result<B>> + Send + 'static,
) -> BoxStream<'static, Result<WatchEvent, ApiError>> {
    let state = Some((Box::pin(body), Vec::<u8>::new()));
    futures::stream::unfold(state, |state| async move {
        let (mut body, mut buffer) = state?;
        loop {
            if let Some(newline) = buffer.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = buffer.drain(..=newline).collect();
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                let event = parse_event(&line);
                let next = event.is_ok().then_some((body, buffer));
                return Some((event, next));
            }
            match body.next().await {
                Some(Ok(chunk)) => buffer.extend_from_slice(chunk.as_ref()),
                Some(Err(e)) => {
                    let error = ApiError::service_unavailable(&format!("the watch: {e}"));
                    return Some((Err(error), None));
                }
                None => return None,
            }
        }
    })
    .boxed()
}

impl RemoteShards for LogicalClusterAdmin {
    fn create<'a>(
        &'a self,
        base_url: &'a str,
        cluster: &'a str,
        logical_cluster: &'a Value,
    ) -> BoxFuture<'a, Result<Value, ApiError>> {
        Box::pin(async move {
            let request = self
                .http
                .post(collection(base_url, cluster))
                .timeout(REQUEST_TIMEOUT)
                .json(logical_cluster);
            shard_client::send(request, &who(base_url)).await
        })
    }

    fn get<'a>(
        &'a self,
        base_url: &'a str,
        cluster: &'a str,
    ) -> BoxFuture<'a, Result<Option<Value>, ApiError>> {
        Box::pin(async move {
            let request = self
                .http
                .get(object(base_url, cluster))
                .timeout(REQUEST_TIMEOUT);
            match shard_client::send(request, &who(base_url)).await {
                Ok(found) => Ok(Some(found)),
                Err(e) if e.code == 404 => Ok(None),
                Err(e) => Err(e),
            }
        })
    }

    fn delete<'a>(
        &'a self,
        base_url: &'a str,
        cluster: &'a str,
    ) -> BoxFuture<'a, Result<(), ApiError>> {
        Box::pin(async move {
            let request = self
                .http
                .delete(object(base_url, cluster))
                .timeout(REQUEST_TIMEOUT);
            match shard_client::send(request, &who(base_url)).await {
                Err(e) if e.code != 404 => Err(e),
                _ => Ok(()),
            }
        })
    }

    fn list<'a>(&'a self, base_url: &'a str) -> BoxFuture<'a, Result<Listed, ApiError>> {
        Box::pin(async move {
            let request = self
                .http
                .get(collection(base_url, "*"))
                .timeout(REQUEST_TIMEOUT);
            let list = shard_client::send(request, &who(base_url)).await?;
            let resource_version = list
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            let items = match list.get("items") {
                Some(Value::Array(items)) => items.clone(),
                _ => Vec::new(),
            };
            Ok(Listed {
                items,
                resource_version,
            })
        })
    }

    fn watch<'a>(
        &'a self,
        base_url: &'a str,
        resource_version: &'a str,
    ) -> BoxFuture<'a, Result<BoxStream<'static, Result<WatchEvent, ApiError>>, ApiError>> {
        Box::pin(async move {
            let who = who(base_url);
            let response = self
                .http
                .get(collection(base_url, "*"))
                .query(&[
                    ("watch", "1"),
                    ("resourceVersion", resource_version),
                    ("allowWatchBookmarks", "true"),
                ])
                .send()
                .await
                .map_err(|e| ApiError::service_unavailable(&format!("{who}: {e}")))?;
            let status = response.status();
            if !status.is_success() {
                let body: Value = response.json().await.unwrap_or(Value::Null);
                return Err(shard_client::answered(&who, status, &body));
            }
            Ok(events(response.bytes_stream()))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunks(parts: &[&'static str]) -> impl Stream<Item = reqwest::Result<&'static [u8]>> {
        futures::stream::iter(parts.iter().map(|p| Ok(p.as_bytes())).collect::<Vec<_>>())
    }

    #[tokio::test]
    async fn events_are_read_line_by_line_across_chunks() {
        let body = chunks(&[
            "{\"type\":\"ADDED\",\"object\":{\"a\":1}}\n{\"type\":\"MOD",
            "IFIED\",\"object\":{\"a\":2}}\n\n{\"type\":\"DELETED\",\"object\":{}}\n",
        ]);
        let read: Vec<_> = events(body).collect().await;
        let kinds: Vec<WatchEventKind> = read.iter().map(|e| e.as_ref().unwrap().kind).collect();
        assert_eq!(
            kinds,
            [
                WatchEventKind::Added,
                WatchEventKind::Modified,
                WatchEventKind::Deleted
            ]
        );
        assert_eq!(read[1].as_ref().unwrap().object["a"], 2);
    }

    #[tokio::test]
    async fn an_error_event_ends_the_watch_with_its_code() {
        let body = chunks(&[
            "{\"type\":\"ERROR\",\"object\":{\"code\":410,\"message\":\"too old\"}}\n",
            "{\"type\":\"ADDED\",\"object\":{}}\n",
        ]);
        let read: Vec<_> = events(body).collect().await;
        assert_eq!(read.len(), 1);
        let error = read[0].as_ref().unwrap_err();
        assert_eq!((error.code, error.message.as_str()), (410, "too old"));
    }

    #[test]
    fn urls_name_the_cluster() {
        assert_eq!(
            object("https://s:1", "abc"),
            "https://s:1/clusters/abc/apis/core.kcp.io/v1alpha1/logicalclusters/cluster"
        );
        assert_eq!(
            collection("https://s:1", "*"),
            "https://s:1/clusters/*/apis/core.kcp.io/v1alpha1/logicalclusters"
        );
    }
}
