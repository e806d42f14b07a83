//! Watches of the cache: the JSON event stream kube-apiserver writes (frames from
//! kcp-apimachinery's [`json_event`], the API server's own), over a storage watch of the
//! narrowest key prefix, filtered to the path's cluster and namespace and the `labelSelector`
//! with kube's transition rules ([`ChangeType::seen_through_filter`]).
//!
//! Without a `resourceVersion` (or with `"0"`, or `sendInitialEvents=true`) the current state
//! comes first as ADDED events read at one revision, then every change after it; with `N`, every
//! change after `N`. A revision the store has compacted is refused before the stream starts, as a
//! 410 Expired `Status` (an error later in the stream is its last, ERROR, event). The stream ends
//! at `timeoutSeconds` (default 30 minutes) or when the server shuts down.

use std::convert::Infallible;
use std::time::Duration;

use bytes::Bytes;
use futures::{Stream, StreamExt, stream};
use http::{HeaderValue, Response, header};
use http_body::Frame;
use http_body_util::{BodyExt, StreamBody};
use kcp_apimachinery::watch::json_event;
use kcp_apimachinery::{ApiError, meta};
use kcp_apiserver::ListOptions;
use kcp_apiserver::response::Body;
use kcp_registry::storage::ObjectStore;
use kcp_registry::storage::objects::{Change, ChangeType, ListRequest};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::handler::parse_revision;
use crate::keys;
use crate::path::CachePath;

/// How long a watch lasts when the client does not say.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// Opens the watch `path` and `options` ask for; the response streams its events.
pub async fn serve(
    objects: &ObjectStore,
    path: &CachePath,
    options: &ListOptions,
    shutdown: CancellationToken,
) -> Result<Response<Body>, ApiError> {
    let prefix = keys::list_prefix(objects.prefix(), path);
    let selector = options.label_selector.clone();
    let scope = path.clone();
    let keep = move |object: &Value| {
        keys::in_scope(&scope, object) && selector.matches(&meta::labels(object))
    };
    let requested = match options.resource_version.as_deref() {
        None | Some("0") => None,
        Some(rv) => Some(parse_revision(rv)?),
    };
    let (initial, from) = match requested {
        Some(rv) if options.send_initial_events != Some(true) => (Vec::new(), rv),
        _ => {
            let page = objects
                .list(ListRequest::everything(&prefix), &keep)
                .await?;
            (page.items, page.revision)
        }
    };
    let changes = objects.watch(&prefix, from + 1).await?;
    let timeout = options
        .timeout_seconds
        .map_or(DEFAULT_TIMEOUT, Duration::from_secs);
    let (tx, rx) = mpsc::channel::<Bytes>(256);
    tokio::spawn(pump(initial, changes, keep, tx, timeout, shutdown));
    let frames = stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|bytes| (Ok::<_, Infallible>(Frame::data(bytes)), rx))
    });
    let mut response = Response::new(BodyExt::boxed(StreamBody::new(frames)));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Ok(response)
}

/// Sends the frame of one event; `false` when the client is gone.
async fn send(tx: &mpsc::Sender<Bytes>, kind: &str, object: &Value) -> bool {
    match json_event(kind, object) {
        Ok(frame) => tx.send(Bytes::from(frame)).await.is_ok(),
        Err(error) => {
            tracing::warn!(%error, "encoding a watch event");
            false
        }
    }
}

/// Feeds the stream: the initial objects, then the changes that pass `keep`, until the client
/// leaves, the time is up, the server shuts down or the storage watch fails (an ERROR event).
async fn pump(
    initial: Vec<Value>,
    changes: impl Stream<Item = Result<Change, ApiError>> + Send + 'static,
    keep: impl Fn(&Value) -> bool + Send + 'static,
    tx: mpsc::Sender<Bytes>,
    timeout: Duration,
    shutdown: CancellationToken,
) {
    for object in &initial {
        if !send(&tx, ChangeType::Added.as_str(), object).await {
            return;
        }
    }
    let deadline = tokio::time::sleep(timeout);
    tokio::pin!(deadline);
    tokio::pin!(changes);
    loop {
        let change = tokio::select! {
            _ = &mut deadline => return,
            _ = shutdown.cancelled() => return,
            _ = tx.closed() => return,
            change = changes.next() => change,
        };
        match change {
            None => return,
            Some(Err(error)) => {
                send(&tx, "ERROR", &error.to_status()).await;
                return;
            }
            Some(Ok(change)) => {
                let before = change.previous.as_ref().is_some_and(&keep);
                if let Some(kind) = change
                    .kind
                    .seen_through_filter(keep(&change.object), before)
                    && !send(&tx, kind.as_str(), &change.object).await
                {
                    return;
                }
            }
        }
    }
}
