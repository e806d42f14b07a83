//! watch: a stream of events, one per change, as kube-apiserver's watch handler writes them.
//!
//! JSON watches (Table watches too) are `{"type": ..., "object": ...}` lines answered as
//! `application/json`; protobuf watches (PartialObjectMetadata ones too, when asked for in
//! protobuf) are 4-byte big-endian length-prefixed `metav1.WatchEvent` frames answered as
//! `application/vnd.kubernetes.protobuf;stream=watch`, the media type k8s.io/apiserver's
//! `serveWatchHandler` sets and client-go picks its decoder by. YAML has no stream form.
//!
//! Where the stream starts follows kube's WatchList semantics (the options are defaulted and checked
//! in [`ListOptions::parse_watch`]): with `sendInitialEvents=true` (which a watch from `""` or `"0"`
//! defaults to) the current state first, as synthetic ADDED events read at one revision (`""` and
//! `"0"`: the latest; `N`: not older than N, a Timeout ERROR event when the store has not reached N),
//! then, with `allowWatchBookmarks`, a BOOKMARK at that revision annotated
//! `k8s.io/initial-events-end: "true"`, then every change after that revision; otherwise every
//! change after `N` (or after now), or a 410 ERROR event when N was compacted. Events are filtered
//! by selectors with kube's transition rules (an object that stops matching is reported DELETED),
//! BOOKMARKs are sent periodically when asked, and the stream ends at `timeoutSeconds` or at server
//! shutdown.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::{StreamExt, stream};
use http::{Response, header};
use http_body::Frame;
use http_body_util::{BodyExt, StreamBody};
use kcp_apimachinery::{ApiError, meta, protobuf};
use kcp_storage::Revision;
use rand::Rng;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::Resolved;
use crate::handlers::negotiation::{Encoding, Output};
use crate::handlers::response::Body;
use crate::request::query::ListOptions;
use kcp_registry::storage::objects::{Change, ChangeType, ListRequest};
use kcp_registry::{ResourceType, table};

/// The media type of a protobuf watch stream (kube: the serializer's media type + `;stream=watch`).
const PROTOBUF_STREAM: &str = "application/vnd.kubernetes.protobuf;stream=watch";

/// How often a watch that asked for bookmarks gets one.
const BOOKMARK_INTERVAL: Duration = Duration::from_secs(30);

/// Turns objects into watch event lines in the negotiated encoding.
struct Encoder {
    output: Output,
    rt: Arc<ResourceType>,
}

impl Encoder {
    /// One `{type, object}` frame in the stream's format: a JSON line, or a length-delimited
    /// protobuf WatchEvent.
    fn frame(&self, kind: &str, object: &Value) -> Result<Bytes, ApiError> {
        if matches!(
            self.output,
            Output::Protobuf | Output::PartialMetadata(Encoding::Protobuf)
        ) {
            return protobuf::encode_watch_event(kind, object)
                .map(Bytes::from)
                .map_err(|e| ApiError::internal_error(&format!("encoding a watch event: {e}")));
        }
        let mut bytes = serde_json::to_vec(&json!({"type": kind, "object": object}))
            .map_err(|e| ApiError::internal_error(&format!("encoding a watch event: {e}")))?;
        bytes.push(b'\n');
        Ok(Bytes::from(bytes))
    }

    fn event(&self, kind: &str, object: &Value) -> Result<Bytes, ApiError> {
        match self.output {
            Output::Table(include) => {
                let metadata =
                    json!({"resourceVersion": meta::resource_version(object).unwrap_or_default()});
                self.frame(
                    kind,
                    &table::for_type(&self.rt, std::slice::from_ref(object), metadata, include),
                )
            }
            Output::PartialMetadata(_) => self.frame(kind, &table::partial_object_metadata(object)),
            Output::Protobuf | Output::Json | Output::Yaml => self.frame(kind, object),
        }
    }

    fn bookmark(&self, revision: Revision, initial_events_end: bool) -> Result<Bytes, ApiError> {
        let mut metadata = json!({"resourceVersion": revision.to_string()});
        if initial_events_end {
            metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        let object = json!({"kind": self.rt.kind, "apiVersion": self.rt.api_version(), "metadata": metadata});
        self.frame("BOOKMARK", &object)
    }

    /// The ERROR event that ends a stream (a Status, which every format can carry).
    fn error(&self, error: &ApiError) -> Bytes {
        self.frame("ERROR", &error.to_status()).unwrap_or_default()
    }
}

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

/// What a change means to a client filtering with `keep`.
fn filtered(change: &Change, keep: &dyn Fn(&Value) -> bool) -> Option<ChangeType> {
    let now = keep(&change.object);
    let before = change.previous.as_ref().is_some_and(keep);
    match change.kind {
        ChangeType::Added if now => Some(ChangeType::Added),
        ChangeType::Modified if now && before => Some(ChangeType::Modified),
        ChangeType::Modified if now => Some(ChangeType::Added),
        ChangeType::Modified if before => Some(ChangeType::Deleted),
        ChangeType::Deleted if now => Some(ChangeType::Deleted),
        _ => None,
    }
}

pub async fn watch(r: &Resolved<'_>) -> Result<Response<Body>, ApiError> {
    let options = ListOptions::parse_watch(&r.request.query)?;
    // Watches stream JSON lines, or length-delimited protobuf frames for kinds with an encoding.
    let protobuf_kind = protobuf::supports(&r.rt.api_version(), &r.rt.kind);
    let output = match r.output()? {
        // YAML has no stream form (kube-apiserver negotiates watches among stream serializers
        // only): the client's next acceptable range, or 406.
        Output::Yaml => {
            let streams: &[&str] = match protobuf_kind {
                true => &["application/json", protobuf::CONTENT_TYPE],
                false => &["application/json"],
            };
            match r.output_without(|range| range.essence == "application/yaml", streams)? {
                Output::Yaml => Output::Json,
                other => other,
            }
        }
        other => other,
    };
    let output = match output {
        Output::Protobuf if !protobuf_kind => Output::Json,
        other => other,
    };
    let content_type = match output {
        Output::Protobuf | Output::PartialMetadata(Encoding::Protobuf) => PROTOBUF_STREAM,
        _ => "application/json",
    };
    let keep = r.selector(&options)?;
    let prefix = r.list_prefix();
    let rt = r.rt.clone();
    let encoder = Encoder {
        output,
        rt: rt.clone(),
    };
    let store = r.scope.store.clone();
    let shutdown = r.scope.shutdown.clone();
    let (tx, rx) = mpsc::channel::<Bytes>(256);

    // `""` and `"0"`: from the latest revision; `N`: not older than N.
    let requested: Option<Revision> = match options.resource_version.as_deref() {
        None | Some("0") => None,
        Some(rv) => Some(
            rv.parse()
                .map_err(|_| ApiError::bad_request(&format!("invalid resource version: {rv:?}")))?,
        ),
    };
    let send_initial = options.send_initial_events == Some(true);
    let mut initial = Vec::new();
    // An error the stream reports (as its only event) instead of starting.
    let mut refused = None;
    let start = if send_initial {
        // The initial state at one revision; live events continue right after it, so nothing is
        // missed or repeated between the list and the watch.
        let page = store
            .list(&rt, ListRequest::everything(&prefix), &keep)
            .await?;
        if let Some(rv) = requested.filter(|rv| *rv > page.revision) {
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
        match requested {
            Some(rv) => rv,
            None => store.objects().current_revision().await?,
        }
    };
    let timeout = Duration::from_secs(
        options
            .timeout_seconds
            .unwrap_or_else(|| rand::rng().random_range(1800..3600)),
    );
    let bookmarks = options.allow_watch_bookmarks;
    let changes = store.objects().watch(&prefix, start + 1).await;

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
        if send_initial && bookmarks && !emit(&tx, &encoder, encoder.bookmark(start, true)).await {
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
        let mut last_revision = start;
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
                    Some(Ok(mut change)) => {
                        last_revision = change.revision;
                        change.object = rt.strategy.storage_to_api(change.object);
                        change.previous = change.previous.map(|p| rt.strategy.storage_to_api(p));
                        if let Some(kind) = filtered(&change, &keep)
                            && !emit(&tx, &encoder, encoder.event(kind.as_str(), &change.object)).await
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
    let mut response = Response::new(BodyExt::boxed(StreamBody::new(frames)));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static(content_type),
    );
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(kind: ChangeType, now: &str, before: Option<&str>) -> Change {
        Change {
            kind,
            object: json!({"metadata": {"labels": {"app": now}}}),
            previous: before.map(|b| json!({"metadata": {"labels": {"app": b}}})),
            revision: 1,
        }
    }

    #[test]
    fn selector_transitions() {
        let keep = |o: &Value| o.pointer("/metadata/labels/app") == Some(&json!("web"));
        assert_eq!(
            filtered(&change(ChangeType::Added, "web", None), &keep),
            Some(ChangeType::Added)
        );
        assert_eq!(
            filtered(&change(ChangeType::Added, "db", None), &keep),
            None
        );
        assert_eq!(
            filtered(&change(ChangeType::Modified, "web", Some("web")), &keep),
            Some(ChangeType::Modified)
        );
        assert_eq!(
            filtered(&change(ChangeType::Modified, "web", Some("db")), &keep),
            Some(ChangeType::Added)
        );
        assert_eq!(
            filtered(&change(ChangeType::Modified, "db", Some("web")), &keep),
            Some(ChangeType::Deleted)
        );
        assert_eq!(
            filtered(&change(ChangeType::Modified, "db", Some("db")), &keep),
            None
        );
        assert_eq!(
            filtered(&change(ChangeType::Deleted, "web", Some("web")), &keep),
            Some(ChangeType::Deleted)
        );
    }

    #[test]
    fn include_object_none_is_still_a_row() {
        use kcp_registry::table::IncludeObject;
        let registry = kcp_registry::Registry::new();
        let rt = registry.builtin_type("", "v1", "configmaps").unwrap();
        let encoder = Encoder {
            output: Output::Table(IncludeObject::None),
            rt,
        };
        let event: Value = serde_json::from_slice(
            &encoder
                .event("ADDED", &json!({"metadata": {"name": "a"}}))
                .unwrap(),
        )
        .unwrap();
        assert_eq!(event["type"], "ADDED");
        assert_eq!(event["object"]["kind"], "Table");
        assert!(event["object"]["rows"][0].get("object").is_none());
    }
}
