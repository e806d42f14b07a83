//! List, then watch, one collection of a kcp server, for as long as the index runs (what a
//! client-go informer does for upstream's index): a list gives every object and a
//! resourceVersion, a watch from there gives every change; when the watch ends (the server
//! closed it, an `ERROR` event such as `410 Gone`, a dropped connection, an unreachable server)
//! the collection is listed again, so the consumer always ends up with the server's state: at
//! once after a `410 Gone` (the server is there, only the resourceVersion was too old), after a
//! second otherwise (a server that is down is not hammered).
//!
//! kcp-rs has two such clients already, both decoding into `serde_json::Value`: the workspace
//! scheduler's watch of remote LogicalClusters (in the kcp binary, which depends on this crate,
//! so it cannot be reused from here) and the cache server's client (cache paths only). This one
//! decodes each list and each event line straight into the caller's small typed struct (serde
//! skips the fields it does not name), which is what keeps an index of 10,000 workspaces cheap
//! to list and to follow. Lines are cut from the response's chunks as they come.

use std::time::Duration;

use serde::Deserialize;
use serde::de::{DeserializeOwned, IgnoredAny};
use tokio_util::sync::CancellationToken;

/// How long after a watch ended the collection is listed again.
const RELIST_AFTER: Duration = Duration::from_secs(1);
/// How long a list may take (a watch has no limit).
const LIST_TIMEOUT: Duration = Duration::from_secs(60);

/// What a watch tells its consumer.
#[derive(Debug)]
pub(crate) enum Update<T> {
    /// Every object, from a fresh list: replaces whatever the consumer had of this collection.
    Listed(Vec<T>),
    /// Added or modified.
    Upserted(T),
    Deleted(T),
}

/// Why a list or a watch ended.
#[derive(Debug, thiserror::Error)]
pub(crate) enum WatchError {
    #[error("unreachable: {0}")]
    Unreachable(#[from] reqwest::Error),
    #[error("answered {code}: {message}")]
    Answered { code: u16, message: String },
    #[error("an undecodable answer: {0}")]
    Decode(#[from] serde_json::Error),
    #[error("the server ended the watch")]
    Ended,
}

#[derive(Deserialize)]
struct List<T> {
    metadata: ListMeta,
    #[serde(default = "Vec::new")]
    items: Vec<T>,
}

#[derive(Deserialize)]
struct ListMeta {
    #[serde(rename = "resourceVersion", default)]
    resource_version: String,
}

/// A `Status` (an error answer, or an `ERROR` event's object).
#[derive(Debug, Default, Deserialize)]
struct Status {
    #[serde(default)]
    code: u16,
    #[serde(default)]
    message: String,
}

/// One line of a JSON watch.
#[derive(Deserialize)]
#[serde(tag = "type", content = "object", rename_all = "UPPERCASE")]
enum Event<T> {
    Added(T),
    Modified(T),
    Deleted(T),
    Bookmark(IgnoredAny),
    Error(Status),
}

/// Lists and watches `url` with `http` until `stop`, feeding `apply`; relists after every end.
pub(crate) async fn follow<T: DeserializeOwned>(
    http: &reqwest::Client,
    url: &str,
    apply: impl Fn(Update<T>),
    stop: &CancellationToken,
) {
    loop {
        let error = tokio::select! {
            _ = stop.cancelled() => return,
            ended = list_then_watch(http, url, &apply) => ended.err().unwrap_or(WatchError::Ended),
        };
        tracing::debug!(%url, %error, "index watch ended, listing again");
        if error.is_expired() {
            continue;
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(RELIST_AFTER) => {}
        }
    }
}

impl WatchError {
    /// `410 Gone`: the watch's resourceVersion is older than the server keeps.
    fn is_expired(&self) -> bool {
        matches!(self, WatchError::Answered { code: 410, .. })
    }
}

/// One list and the watch that follows it, until it ends (always with an error).
async fn list_then_watch<T: DeserializeOwned>(
    http: &reqwest::Client,
    url: &str,
    apply: &impl Fn(Update<T>),
) -> Result<(), WatchError> {
    let listed = success(http.get(url).timeout(LIST_TIMEOUT).send().await?).await?;
    let list: List<T> = serde_json::from_slice(&listed.bytes().await?)?;
    apply(Update::Listed(list.items));
    let mut watch = success(
        http.get(url)
            .query(&[
                ("watch", "true"),
                ("allowWatchBookmarks", "true"),
                ("resourceVersion", list.metadata.resource_version.as_str()),
            ])
            .send()
            .await?,
    )
    .await?;
    let mut pending: Vec<u8> = Vec::new();
    while let Some(chunk) = watch.chunk().await? {
        pending.extend_from_slice(&chunk);
        apply_lines(&mut pending, apply)?;
    }
    Err(WatchError::Ended)
}

/// Applies every complete line of `pending` (a watch's bytes so far) and keeps the incomplete
/// rest; an `ERROR` event or an undecodable line ends the watch.
fn apply_lines<T: DeserializeOwned>(
    pending: &mut Vec<u8>,
    apply: &impl Fn(Update<T>),
) -> Result<(), WatchError> {
    let mut consumed = 0;
    while let Some(end) = pending[consumed..].iter().position(|b| *b == b'\n') {
        let line = &pending[consumed..consumed + end];
        consumed += end + 1;
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice(line)? {
            Event::Added(object) | Event::Modified(object) => apply(Update::Upserted(object)),
            Event::Deleted(object) => apply(Update::Deleted(object)),
            Event::Bookmark(_) => {}
            Event::Error(status) => return Err(answered(status)),
        }
    }
    pending.drain(..consumed);
    Ok(())
}

/// The response when it is a success, else its `Status` as an error.
async fn success(response: reqwest::Response) -> Result<reqwest::Response, WatchError> {
    let code = response.status();
    if code.is_success() {
        return Ok(response);
    }
    let body = response.bytes().await.unwrap_or_default();
    let status = serde_json::from_slice(&body).unwrap_or(Status {
        code: code.as_u16(),
        message: String::from_utf8_lossy(&body).into_owned(),
    });
    Err(answered(Status {
        code: code.as_u16(),
        ..status
    }))
}

fn answered(status: Status) -> WatchError {
    WatchError::Answered {
        code: status.code,
        message: status.message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize, PartialEq)]
    struct Thing {
        a: u32,
    }

    #[test]
    fn events_decode_into_the_typed_object() {
        let line = br#"{"type":"MODIFIED","object":{"a":2,"b":{"ignored":true}}}"#;
        assert!(matches!(
            serde_json::from_slice::<Event<Thing>>(line).unwrap(),
            Event::Modified(Thing { a: 2 })
        ));
        let line = br#"{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"9"}}}"#;
        assert!(matches!(
            serde_json::from_slice::<Event<Thing>>(line).unwrap(),
            Event::Bookmark(_)
        ));
        let line = br#"{"type":"ERROR","object":{"kind":"Status","code":410,"message":"too old"}}"#;
        match serde_json::from_slice::<Event<Thing>>(line).unwrap() {
            Event::Error(status) => {
                assert_eq!((status.code, status.message.as_str()), (410, "too old"))
            }
            _ => panic!("not an error"),
        }
    }

    /// What `apply_lines` applied, as `+a`/`-a`, after each chunk in turn.
    #[test]
    fn only_gone_relists_at_once() {
        let answered = |code| WatchError::Answered {
            code,
            message: String::new(),
        };
        assert!(answered(410).is_expired());
        assert!(!answered(500).is_expired());
        assert!(!WatchError::Ended.is_expired());
    }

    fn applied(chunks: &[&str]) -> (Vec<String>, Result<(), WatchError>) {
        let seen = std::cell::RefCell::new(Vec::new());
        let apply = |update: Update<Thing>| {
            seen.borrow_mut().push(match update {
                Update::Upserted(t) => format!("+{}", t.a),
                Update::Deleted(t) => format!("-{}", t.a),
                Update::Listed(_) => "listed".into(),
            })
        };
        let mut pending = Vec::new();
        let mut result = Ok(());
        for chunk in chunks {
            pending.extend_from_slice(chunk.as_bytes());
            result = apply_lines(&mut pending, &apply);
            if result.is_err() {
                break;
            }
        }
        (seen.into_inner(), result)
    }

    #[test]
    fn lines_are_cut_across_chunks() {
        let (seen, result) = applied(&[
            "{\"type\":\"ADDED\",\"object\":{\"a\":1}}\n{\"type\":\"DEL",
            "ETED\",\"object\":{\"a\":1}}",
            "\n\n{\"type\":\"MODIFIED\",\"object\":{\"a\":2}}\n{\"type\"",
        ]);
        assert_eq!(seen, ["+1", "-1", "+2"]);
        assert!(result.is_ok());
    }

    #[test]
    fn an_error_event_ends_the_watch_with_its_code() {
        let (seen, result) = applied(&[
            "{\"type\":\"ADDED\",\"object\":{\"a\":1}}\n",
            "{\"type\":\"ERROR\",\"object\":{\"code\":410,\"message\":\"gone\"}}\n",
            "{\"type\":\"ADDED\",\"object\":{\"a\":2}}\n",
        ]);
        assert_eq!(seen, ["+1"]);
        assert!(matches!(
            result,
            Err(WatchError::Answered { code: 410, .. })
        ));
    }

    #[test]
    fn a_list_gives_items_and_its_resource_version() {
        let list: List<Thing> = serde_json::from_slice(
            br#"{"kind":"List","metadata":{"resourceVersion":"12"},"items":[{"a":1},{"a":3}]}"#,
        )
        .unwrap();
        assert_eq!(list.metadata.resource_version, "12");
        assert_eq!(list.items, [Thing { a: 1 }, Thing { a: 3 }]);
    }
}
