//! watch: a stream of events, one per change, as kube-apiserver's watch handler writes them.
//!
//! JSON watches (Table watches too) are answered as `application/json`; protobuf watches
//! (PartialObjectMetadata ones too, when asked for in protobuf) as
//! `application/vnd.kubernetes.protobuf;stream=watch`, the media type k8s.io/apiserver's
//! `serveWatchHandler` sets and client-go picks its decoder by. YAML has no stream form.
//!
//! Where the stream starts follows kube's WatchList semantics (the options are defaulted and checked
//! in [`ListOptions::parse_watch`]): with `sendInitialEvents=true` (which a watch from `""` or `"0"`
//! defaults to) the current state first, as synthetic ADDED events read at one revision (`""`: the
//! latest; `"0"`: whatever the cache holds, or the latest; `N`: not older than N, a Timeout ERROR
//! event when the store has not reached N), then, with `allowWatchBookmarks`, a BOOKMARK at that
//! revision annotated `k8s.io/initial-events-end: "true"`, then every change after that revision;
//! otherwise every change after `N` (or after now), or a 410 ERROR event when N was compacted.
//! Events are filtered by selectors with kube's transition rules (an object that stops matching is
//! reported DELETED), BOOKMARKs are sent periodically when asked, and the stream ends at
//! `timeoutSeconds` or at server shutdown.
//!
//! Like kube's cacher, the type's shared watch cache serves the watch when it can
//! ([`from_cache`]); storage serves the rest ([`from_storage`]): a type not read often enough to
//! have a cache, a cache still filling, a revision older than its history.

mod encoder;
mod from_cache;
mod from_storage;

use std::sync::Arc;
use std::time::Duration;

use http::{Response, header};
use kcp_apimachinery::{ApiError, protobuf};
use kcp_storage::Revision;
use rand::Rng;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::Resolved;
use crate::handlers::negotiation::{Encoding, Output};
use crate::handlers::response::Body;
use crate::request::query::ListOptions;

use encoder::Encoder;

/// The media type of a protobuf watch stream (kube: the serializer's media type + `;stream=watch`).
const PROTOBUF_STREAM: &str = "application/vnd.kubernetes.protobuf;stream=watch";

/// How often a watch that asked for bookmarks gets one.
const BOOKMARK_INTERVAL: Duration = Duration::from_secs(30);

/// What the client's selectors keep, judged on objects as the type serves them.
type Keep = Arc<dyn Fn(&Value) -> bool + Send + Sync>;

/// How one watch streams, whoever serves it.
struct Stream {
    encoder: Encoder,
    /// `None` without selectors: every event under the prefix is sent as it is.
    keep: Option<Keep>,
    bookmarks: bool,
    timeout: Duration,
    shutdown: CancellationToken,
}

/// Where the watch starts, as asked.
#[derive(Debug, Clone, Copy)]
struct Start {
    /// `sendInitialEvents=true`: the state first.
    initial: bool,
    /// The `resourceVersion` asked for, when it names one (not `""` nor `"0"`).
    requested: Option<Revision>,
    /// `resourceVersion="0"`: any state will do.
    any: bool,
}

/// The stream's output: the negotiated one, with YAML (no stream form) replaced by the client's
/// next acceptable range, and protobuf only for kinds with an encoding.
fn stream_output(r: &Resolved<'_>) -> Result<Output, ApiError> {
    let protobuf_kind = protobuf::supports(&r.rt.api_version(), &r.rt.kind);
    let output = match r.output()? {
        // kube-apiserver negotiates watches among stream serializers only: the client's next
        // acceptable range, or 406.
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
    Ok(match output {
        Output::Protobuf if !protobuf_kind => Output::Json,
        other => other,
    })
}

pub async fn watch(r: &Resolved<'_>) -> Result<Response<Body>, ApiError> {
    let options = ListOptions::parse_watch(&r.request.query)?;
    let output = stream_output(r)?;
    let content_type = match output {
        Output::Protobuf | Output::PartialMetadata(Encoding::Protobuf) => PROTOBUF_STREAM,
        _ => "application/json",
    };
    let keep: Keep = Arc::new(r.selector(&options)?);
    let selective = options.selects();
    let start = Start {
        initial: options.send_initial_events == Some(true),
        requested: match options.resource_version.as_deref() {
            None | Some("0") => None,
            Some(rv) => Some(rv.parse().map_err(|_| {
                ApiError::bad_request(&format!("invalid resource version: {rv:?}"))
            })?),
        },
        any: options.resource_version.as_deref() == Some("0"),
    };
    let stream = Stream {
        encoder: Encoder {
            output,
            rt: r.rt.clone(),
        },
        keep: selective.then_some(keep),
        bookmarks: options.allow_watch_bookmarks,
        timeout: Duration::from_secs(
            options
                .timeout_seconds
                .unwrap_or_else(|| rand::rng().random_range(1800..3600)),
        ),
        shutdown: r.scope.shutdown.clone(),
    };
    let prefix = r.list_prefix();
    let body = match from_cache::open(r, &prefix, start).await? {
        Ok(watch) => from_cache::body(watch, stream, start.initial),
        Err(reason) => {
            tracing::debug!(%reason, resource = %r.rt.plural, "watch served from storage");
            from_storage::body(r, &prefix, start, stream).await?
        }
    };
    let mut response = Response::new(body);
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static(content_type),
    );
    Ok(response)
}
