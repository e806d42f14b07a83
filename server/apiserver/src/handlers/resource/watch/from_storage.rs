//! A watch served by storage: a storage watch of its own, every event decoded and encoded for
//! this watcher, in a task feeding the response.
//!
//! Used where the type's shared watch cache cannot serve (see [`super::from_cache`]): a type not
//! read often enough to have a cache, a cache still filling, a revision older than the cache's
//! history (storage answers 410 once its own history is compacted), a revision the cache did not
//! reach in time. The initial state of a WatchList is one list at one revision, and the watch
//! continues right after it, so nothing is missed or repeated between the two.

use std::convert::Infallible;

use bytes::Bytes;
use futures::{StreamExt, stream};
use http_body::Frame;
use http_body_util::{BodyExt, StreamBody};
use kcp_apimachinery::ApiError;
use kcp_registry::storage::objects::ListRequest;
use kcp_storage::Revision;
use tokio::sync::mpsc;

use super::encoder::Encoder;
use super::{BOOKMARK_INTERVAL, Start, Stream};
use crate::handlers::resource::Resolved;
use crate::handlers::response::Body;

/// Sends a frame, or the ERROR event for a frame that could not be encoded; `false` when the stream
/// must end (client gone or error sent).
async fn emit(tx: &mpsc::Sender<Bytes>, encoder: &Encoder, frame: Result<Bytes, ApiError>) -> bool {
    match frame {
        Ok(frame) => tx.send(frame).await.is_ok(),
        Err(error) => {
            let _ = tx.send(encoder.error(&error)).await;
            false
        }
    }
}

/// The response body of a watch served from storage.
pub(super) async fn body(
    r: &Resolved<'_>,
    prefix: &str,
    start: Start,
    stream: Stream,
) -> Result<Body, ApiError> {
    let Stream {
        encoder,
        keep,
        bookmarks,
        timeout,
        shutdown,
    } = stream;
    let rt = r.rt.clone();
    let store = r.scope.store.clone();
    let (tx, rx) = mpsc::channel::<Bytes>(256);
    let matches = |object: &serde_json::Value| keep.as_ref().is_none_or(|keep| keep(object));

    let mut initial = Vec::new();
    // An error the stream reports (as its only event) instead of starting.
    let mut refused = None;
    let from = if start.initial {
        let page = store
            .list(&rt, ListRequest::everything(prefix), &matches)
            .await?;
        if let Some(rv) = start.requested.filter(|rv| *rv > page.revision) {
            // kube's watch cache waits for N, then ends the stream with this Timeout.
            let (rv, current) = (
                u64::try_from(rv).unwrap_or_default(),
                u64::try_from(page.revision).unwrap_or_default(),
            );
            refused = Some(ApiError::too_large_resource_version(rv, current, 1));
        } else {
            initial = page.items;
        }
        page.revision
    } else {
        match start.requested {
            Some(rv) => rv,
            None => store.objects().current_revision().await?,
        }
    };
    let changes = store.objects().watch(prefix, from + 1).await;

    tokio::spawn(async move {
        if let Some(error) = refused {
            emit(&tx, &encoder, Err(error)).await;
            return;
        }
        for object in &initial {
            if !emit(&tx, &encoder, encoder.event("ADDED", object)).await {
                return;
            }
        }
        if start.initial && bookmarks && !emit(&tx, &encoder, encoder.bookmark(from, true)).await {
            return;
        }
        let mut changes = match changes {
            Ok(changes) => changes,
            Err(error) => {
                emit(&tx, &encoder, Err(error)).await;
                return;
            }
        };
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        let mut bookmark_timer = tokio::time::interval(BOOKMARK_INTERVAL);
        bookmark_timer.tick().await;
        let mut last_revision: Revision = from;
        let matches = |object: &serde_json::Value| keep.as_ref().is_none_or(|keep| keep(object));
        loop {
            tokio::select! {
                _ = &mut deadline => return,
                _ = shutdown.cancelled() => return,
                _ = tx.closed() => return,
                _ = bookmark_timer.tick(), if bookmarks => {
                    if !emit(&tx, &encoder, encoder.bookmark(last_revision, false)).await { return; }
                }
                change = changes.next() => match change {
                    None => return,
                    Some(Err(error)) => { emit(&tx, &encoder, Err(error)).await; return; }
                    Some(Ok(change)) => {
                        last_revision = change.revision;
                        let object = rt.strategy.storage_to_api(change.object);
                        let before = change
                            .previous
                            .is_some_and(|p| matches(&rt.strategy.storage_to_api(p)));
                        if let Some(kind) = change.kind.seen_through_filter(matches(&object), before)
                            && !emit(&tx, &encoder, encoder.event(kind.as_str(), &object)).await
                        {
                            return;
                        }
                    }
                }
            }
        }
    });

    let frames = stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|bytes| (Ok::<_, Infallible>(Frame::data(bytes)), rx))
    });
    Ok(BodyExt::boxed(StreamBody::new(frames)))
}
