//! The body of a list served from the watch cache, sent in chunks made as the connection takes them.
//!
//! kube-apiserver encodes list items one at a time onto the response (its streaming collection
//! encoders, on since 1.33) so that a large list is never one buffer. Here the page holds the
//! snapshot of `Arc`s the cache took under its lock, and the body is a stream of chunks of about
//! [`CHUNK`] bytes: hyper asks for the next one only when the connection has room for it (HTTP/1
//! write buffer, HTTP/2 flow-control window), and each is made then, from the next items' kept
//! encodings (made on the spot for an item that has none yet). A list of 10,000 objects holds one
//! or two chunks at a time instead of its whole body, and 20 concurrent lists 20 such pairs. The
//! bytes are those of the one-buffer encoding: in JSON the envelope storage's lists render
//! (`kind`, `apiVersion`, `metadata`) without its closing brace, then `,"items":[`, the items'
//! JSON between commas, and `]}`; in protobuf [`protobuf::ListFrame`] around the items' messages.
//!
//! - **Before the first byte.** The first chunk is made before the response is: an item failing
//!   to encode there is a 500 `Status` like any error. A list whose body fits in that chunk (most
//!   lists) is sent whole, with its `Content-Length`, as today and as Go's server does for small
//!   responses; larger ones go without it (HTTP/1.1 chunked, HTTP/2 data frames).
//! - **Protobuf** announces the list's length before its items (the envelope's `raw` field is
//!   length-delimited), so every item's protobuf encoding is made (or found kept: the cache keeps
//!   it beside the object) before the first byte; the chunks then copy them. A failure there is a
//!   500 too, so a protobuf list never fails after its headers.
//! - **A JSON item failing after the headers** (only an object served in a form other than the
//!   stored one can, and only if its conversion cannot be encoded) cannot change the status any
//!   more: kube-apiserver is in the same position once it has written. The body's error type
//!   cannot abort the stream (`Infallible`, shared by every response), so the chunks made before
//!   the item go out and the body ends there, without its closing `]}`: no client decodes it
//!   (client-go's reflector lists again), and the server logs the object's error.
//! - **Tables, `PartialObjectMetadataList` and YAML** keep the one-buffer path (`render_list`):
//!   they are made from decoded objects by the same code as storage's lists (a Table's columns,
//!   metadata-only items, YAML's serializer, which writes one document at once), and are what
//!   kubectl and metadata informers ask for, not the large lists of typed informers; a streamed
//!   twin of each renderer would copy that code.

use std::convert::Infallible;
use std::fmt::Display;
use std::sync::Arc;

use bytes::Bytes;
use futures::stream;
use http::Response;
use http_body::Frame;
use http_body_util::{BodyExt, StreamBody};
use kcp_apimachinery::{ApiError, protobuf};
use kcp_registry::ResourceType;
use kcp_watchcache::CachedObject;
use serde_json::{Value, json};

use crate::handlers::response::{self, Body};

/// About how many bytes each chunk of a list holds: an item is never split, so a chunk ends with
/// the first item that reaches this size.
pub(super) const CHUNK: usize = 64 * 1024;

/// A list in JSON from the cache's objects, in `rt`'s served form.
pub(super) fn json(
    rt: &Arc<ResourceType>,
    metadata: &Value,
    items: Vec<Arc<CachedObject>>,
) -> Result<Response<Body>, ApiError> {
    let envelope =
        json!({"kind": rt.list_kind(), "apiVersion": rt.api_version(), "metadata": metadata});
    let mut head = serde_json::to_vec(&envelope)
        .map_err(|e| ApiError::internal_error(&format!("encoding a list: {e}")))?;
    // The envelope's closing brace comes after the items.
    head.pop();
    head.extend_from_slice(b",\"items\":[");
    let served = rt.clone();
    let chunks = Chunks::new(
        head,
        items,
        move |chunk: &mut Vec<u8>, index, object: Arc<CachedObject>| {
            let json = object.served_json(&served)?;
            if index > 0 {
                chunk.push(b',');
            }
            chunk.extend_from_slice(&json);
            Ok::<_, kcp_watchcache::EncodeError>(())
        },
        b"]}".to_vec(),
    );
    respond(rt, "application/json", chunks)
}

/// A list in protobuf from the cache's objects, in `rt`'s served form: every item's encoding is
/// made (or found kept) first, as the list's length comes before its items.
pub(super) fn protobuf(
    rt: &Arc<ResourceType>,
    metadata: &Value,
    items: &[Arc<CachedObject>],
) -> Result<Response<Body>, ApiError> {
    let failed =
        |e: &dyn Display| ApiError::internal_error(&format!("a cached object in protobuf: {e}"));
    let messages = items
        .iter()
        .map(|object| {
            let body = object.served_protobuf(rt).map_err(|e| failed(&e))?;
            let message = protobuf::enveloped_message(&body).map_err(|e| failed(&e))?;
            Ok(body.slice_ref(message))
        })
        .collect::<Result<Vec<Bytes>, ApiError>>()?;
    let frame = protobuf::ListFrame::new(
        &rt.api_version(),
        &rt.list_kind(),
        metadata,
        messages.iter().map(Bytes::len),
    )
    .map_err(|e| failed(&e))?;
    let head = frame.head().to_vec();
    let tail = frame.tail().to_vec();
    let chunks = Chunks::new(
        head,
        messages,
        move |chunk: &mut Vec<u8>, _, message: Bytes| {
            frame.item_header(message.len(), chunk);
            chunk.extend_from_slice(&message);
            Ok::<_, Infallible>(())
        },
        tail,
    );
    respond(rt, protobuf::CONTENT_TYPE, chunks)
}

/// The response of a list: its first chunk made now (a failure there is a 500), sent whole when
/// nothing follows it, else followed by a stream of the other chunks.
fn respond<T, F, E>(
    rt: &ResourceType,
    content_type: &str,
    mut chunks: Chunks<T, F, E>,
) -> Result<Response<Body>, ApiError>
where
    T: Send + Sync + 'static,
    F: FnMut(&mut Vec<u8>, usize, T) -> Result<(), E> + Send + Sync + 'static,
    E: Display + Send + Sync + 'static,
{
    let failed = |e: E| ApiError::internal_error(&format!("a cached object: {e}"));
    let first = chunks.next().transpose().map_err(failed)?;
    // An item of the first chunk failed after others were written to it.
    if let Some(failure) = chunks.failure.take() {
        return Err(failed(failure));
    }
    let first = first.unwrap_or_default();
    if chunks.finished() {
        return Ok(response::bytes(200, content_type, first));
    }
    let resource = rt.plural.clone();
    let rest = chunks.map_while(move |chunk| {
        chunk
            .inspect_err(|error| {
                tracing::error!(%resource, %error, "a list from the watch cache cut short");
            })
            .ok()
    });
    let frames = std::iter::once(first)
        .chain(rest)
        .map(|chunk| Ok::<_, Infallible>(Frame::data(chunk)));
    let body = BodyExt::boxed(StreamBody::new(stream::iter(frames)));
    Ok(response::streamed(200, content_type, body))
}

/// The chunks of a list body: `head`, each item as `write` appends it (given its index), then
/// `tail`, cut after the item that brings a chunk to [`CHUNK`] bytes. When `write` fails, the
/// chunk made so far comes first (if any), then the error, then nothing.
struct Chunks<T, F, E> {
    /// Made, not yet handed out: the head at first.
    pending: Vec<u8>,
    items: std::iter::Enumerate<std::vec::IntoIter<T>>,
    write: F,
    /// Until it is appended (or the list failed).
    tail: Option<Vec<u8>>,
    /// An item's failure, handed out after the chunk made before it.
    failure: Option<E>,
}

impl<T, F, E> Chunks<T, F, E>
where
    F: FnMut(&mut Vec<u8>, usize, T) -> Result<(), E>,
{
    fn new(head: Vec<u8>, items: Vec<T>, write: F, tail: Vec<u8>) -> Chunks<T, F, E> {
        Chunks {
            pending: head,
            items: items.into_iter().enumerate(),
            write,
            tail: Some(tail),
            failure: None,
        }
    }

    /// Whether every byte (or the failure) has been handed out.
    fn finished(&self) -> bool {
        self.pending.is_empty() && self.tail.is_none() && self.failure.is_none()
    }
}

impl<T, F, E> Iterator for Chunks<T, F, E>
where
    F: FnMut(&mut Vec<u8>, usize, T) -> Result<(), E>,
{
    type Item = Result<Bytes, E>;

    fn next(&mut self) -> Option<Result<Bytes, E>> {
        if let Some(failure) = self.failure.take() {
            return Some(Err(failure));
        }
        self.tail.as_ref()?;
        let mut chunk = std::mem::take(&mut self.pending);
        chunk.reserve(CHUNK + CHUNK / 16);
        while chunk.len() < CHUNK {
            match self.items.next() {
                Some((index, item)) => {
                    if let Err(failure) = (self.write)(&mut chunk, index, item) {
                        self.tail = None;
                        if chunk.is_empty() {
                            return Some(Err(failure));
                        }
                        self.failure = Some(failure);
                        break;
                    }
                }
                None => {
                    if let Some(tail) = self.tail.take() {
                        chunk.extend_from_slice(&tail);
                    }
                    break;
                }
            }
        }
        Some(Ok(Bytes::from(chunk)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body::Body as _;

    fn config_maps(count: usize, data_bytes: usize) -> Vec<Arc<CachedObject>> {
        (0..count)
            .map(|i| {
                let stored = json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": format!("cm-{i}"), "namespace": "default",
                        "resourceVersion": (i + 2).to_string(),
                        "annotations": {"kcp.io/cluster": "root"}},
                    "data": {"v": "x".repeat(data_bytes)}});
                Arc::new(CachedObject::new(&stored).unwrap())
            })
            .collect()
    }

    fn config_maps_type() -> Arc<ResourceType> {
        kcp_registry::Registry::new()
            .builtin_type("", "v1", "configmaps")
            .unwrap()
    }

    /// The list as storage's lists render it: one value, encoded at once.
    fn one_buffer(rt: &ResourceType, metadata: &Value, items: &[Arc<CachedObject>]) -> Value {
        let items: Vec<Value> = items.iter().map(|o| o.served_value(rt).unwrap()).collect();
        json!({"kind": rt.list_kind(), "apiVersion": rt.api_version(),
            "metadata": metadata, "items": items})
    }

    /// The body's chunks, and whether it announced its length (hyper sends `Content-Length`
    /// exactly when it does).
    async fn chunks_of(response: Response<Body>) -> (Vec<Bytes>, Option<u64>) {
        let mut body = response.into_body();
        let length = body.size_hint().exact();
        let mut chunks = Vec::new();
        while let Some(frame) = body.frame().await {
            chunks.push(frame.unwrap().into_data().unwrap());
        }
        (chunks, length)
    }

    fn cases() -> Vec<(&'static str, Value, Vec<Arc<CachedObject>>)> {
        vec![
            ("empty", json!({"resourceVersion": "7"}), Vec::new()),
            (
                "one item",
                json!({"resourceVersion": "8"}),
                config_maps(1, 10),
            ),
            (
                "several chunks, continued",
                json!({"resourceVersion": "9", "continue": "eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ",
                    "remainingItemCount": 1234}),
                config_maps(300, 1_000),
            ),
        ]
    }

    #[tokio::test]
    async fn json_lists_stream_the_bytes_of_the_one_buffer_encoding() {
        let rt = config_maps_type();
        for (case, metadata, items) in cases() {
            let expected = serde_json::to_vec(&one_buffer(&rt, &metadata, &items)).unwrap();
            let response = json(&rt, &metadata, items).unwrap();
            assert_eq!(response.headers()["content-type"], "application/json");
            let (chunks, length) = chunks_of(response).await;
            assert_eq!(chunks.concat(), expected, "{case}");
            assert_chunking(case, &chunks, length, expected.len());
        }
    }

    #[tokio::test]
    async fn protobuf_lists_stream_the_bytes_of_the_one_buffer_encoding() {
        let rt = config_maps_type();
        for (case, metadata, items) in cases() {
            let expected = protobuf::encode(&one_buffer(&rt, &metadata, &items)).unwrap();
            let response = protobuf(&rt, &metadata, &items).unwrap();
            assert_eq!(response.headers()["content-type"], protobuf::CONTENT_TYPE);
            let (chunks, length) = chunks_of(response).await;
            assert_eq!(chunks.concat(), expected, "{case}");
            assert_chunking(case, &chunks, length, expected.len());
        }
    }

    /// One buffer with its length when the list fits in a chunk, else chunks of about
    /// [`CHUNK`] bytes and no length.
    fn assert_chunking(case: &str, chunks: &[Bytes], length: Option<u64>, total: usize) {
        if total <= CHUNK {
            assert_eq!(chunks.len(), 1, "{case}");
            assert_eq!(length, Some(total as u64), "{case}");
        } else {
            assert!(chunks.len() > 2, "{case}: {} chunks", chunks.len());
            assert_eq!(length, None, "{case}");
            for chunk in &chunks[..chunks.len() - 1] {
                assert!((CHUNK..CHUNK + 2_000).contains(&chunk.len()), "{case}");
            }
        }
    }

    /// Items of 1,000 bytes, the one at `failing` not encodable.
    fn numbered_items(count: usize, failing: usize) -> Chunks<usize, impl WriteItem, String> {
        Chunks::new(
            b"[".to_vec(),
            (0..count).collect(),
            move |chunk: &mut Vec<u8>, _, item: usize| {
                if item == failing {
                    return Err(format!("item {item}"));
                }
                chunk.extend_from_slice(&[b'x'; 1_000]);
                Ok(())
            },
            b"]".to_vec(),
        )
    }

    trait WriteItem:
        FnMut(&mut Vec<u8>, usize, usize) -> Result<(), String> + Send + Sync + 'static
    {
    }
    impl<F> WriteItem for F where
        F: FnMut(&mut Vec<u8>, usize, usize) -> Result<(), String> + Send + Sync + 'static
    {
    }

    #[test]
    fn a_failing_item_ends_the_chunks_after_those_made_before_it() {
        // Failing in the third chunk (66 items fill one): two chunks, the items of the third
        // before the failing one, the error, nothing more.
        let mut chunks = numbered_items(500, 150);
        let sizes: Vec<Result<usize, String>> = chunks
            .by_ref()
            .map(|chunk| chunk.map(|c| c.len()))
            .collect();
        assert_eq!(
            sizes,
            [
                Ok(1 + 66 * 1_000),
                Ok(66 * 1_000),
                Ok(18 * 1_000),
                Err("item 150".to_string())
            ]
        );
        assert!(chunks.finished());
        // Failing first thing in a chunk: the error at once.
        let mut chunks = numbered_items(500, 132);
        assert!(chunks.nth(1).unwrap().is_ok());
        assert_eq!(chunks.next().unwrap().unwrap_err(), "item 132");
        assert!(chunks.next().is_none());
    }

    #[tokio::test]
    async fn before_the_first_byte_a_failure_is_a_status_after_it_a_truncated_body() {
        let rt = config_maps_type();
        for failing in [0, 3] {
            let error = respond(&rt, "application/json", numbered_items(500, failing)).unwrap_err();
            assert_eq!(error.code, 500);
            assert!(
                error.message.contains(&format!("item {failing}")),
                "{}",
                error.message
            );
        }
        let response = respond(&rt, "application/json", numbered_items(500, 150)).unwrap();
        assert_eq!(response.status(), 200);
        let (chunks, length) = chunks_of(response).await;
        assert_eq!(length, None);
        let body = chunks.concat();
        assert_eq!(body.len(), 1 + 150 * 1_000);
        assert!(!body.ends_with(b"]"));
    }
}
