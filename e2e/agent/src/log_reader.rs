//! Reading a container's run logs (written by [`crate::container_log`]) as kubelet's
//! `/containerLogs/<ns>/<pod>/<container>` answers: the options of `kubectl logs`
//! (`follow`, `previous`, `timestamps`, `tailLines`, `sinceSeconds`, `sinceTime`, `limitBytes`,
//! the query parameters of kube's `PodLogOptions`), whole lines with partial entries joined, the
//! entry's time in front of each line with `timestamps`, and `follow` ending when the run ends.

use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;
use jiff::Timestamp;
use tokio::io::{AsyncReadExt as _, AsyncSeekExt as _};
use tokio::sync::mpsc;

/// How often a followed log is checked for more lines.
const FOLLOW_POLL: Duration = Duration::from_millis(100);

/// The query of a log request, as kube's `PodLogOptions`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogOptions {
    pub follow: bool,
    pub previous: bool,
    pub timestamps: bool,
    pub tail_lines: Option<usize>,
    pub since: Option<Timestamp>,
    pub limit_bytes: Option<u64>,
}

impl LogOptions {
    /// Parses the query string; `now` anchors `sinceSeconds`. Errors are kube's validation
    /// messages.
    pub fn parse(query: &str, now: Timestamp) -> Result<LogOptions, String> {
        let mut options = LogOptions::default();
        let mut since_seconds = None;
        let mut since_time = None;
        for (key, value) in form_urlencoded::parse(query.as_bytes()) {
            let flag = || value == "true" || value == "1";
            match key.as_ref() {
                "follow" => options.follow = flag(),
                "previous" => options.previous = flag(),
                "timestamps" => options.timestamps = flag(),
                "tailLines" => {
                    let lines: i64 = number(&key, &value)?;
                    if lines < 0 {
                        return Err(
                            "tailLines: Invalid value: must be greater than or equal to 0".into(),
                        );
                    }
                    options.tail_lines = usize::try_from(lines).ok();
                }
                "limitBytes" => {
                    let bytes: i64 = number(&key, &value)?;
                    if bytes < 1 {
                        return Err("limitBytes: Invalid value: must be greater than 0".into());
                    }
                    options.limit_bytes = u64::try_from(bytes).ok();
                }
                "sinceSeconds" => {
                    let seconds: i64 = number(&key, &value)?;
                    if seconds < 1 {
                        return Err("sinceSeconds: Invalid value: must be greater than 0".into());
                    }
                    since_seconds = Some(seconds);
                }
                "sinceTime" => {
                    since_time = Some(
                        value
                            .parse::<Timestamp>()
                            .map_err(|e| format!("sinceTime: Invalid value: {value:?}: {e}"))?,
                    );
                }
                _ => {}
            }
        }
        options.since = match (since_seconds, since_time) {
            (Some(_), Some(_)) => {
                return Err("at most one of sinceTime or sinceSeconds may be specified".into());
            }
            (Some(seconds), None) => now
                .checked_sub(jiff::SignedDuration::from_secs(seconds))
                .ok(),
            (None, time) => time,
        };
        Ok(options)
    }
}

fn number(key: &str, value: &str) -> Result<i64, String> {
    value
        .parse()
        .map_err(|_| format!("{key}: Invalid value: {value:?}: must be an integer"))
}

/// One CRI log entry.
#[derive(Debug, PartialEq, Eq)]
pub struct Entry<'a> {
    pub time: Timestamp,
    /// `stdout` or `stderr`.
    pub stream: &'a [u8],
    pub partial: bool,
    pub text: &'a [u8],
}

/// Parses `<time> <stream> <F|P> <text>` (without its newline).
pub fn parse_entry(line: &[u8]) -> Option<Entry<'_>> {
    let mut fields = line.splitn(4, |&b| b == b' ');
    let time = std::str::from_utf8(fields.next()?).ok()?.parse().ok()?;
    let stream = fields.next()?;
    let partial = match fields.next()? {
        b"P" => true,
        b"F" => false,
        _ => return None,
    };
    Some(Entry {
        time,
        stream,
        partial,
        text: fields.next().unwrap_or_default(),
    })
}

/// Turns CRI entries into the lines a client sees. Keeps what a chunk of the file left
/// unfinished (an incomplete entry, partial entries waiting for their end).
#[derive(Debug, Default)]
struct Lines {
    timestamps: bool,
    since: Option<Timestamp>,
    /// Bytes of the file after the last complete entry.
    rest: Vec<u8>,
    /// A line being assembled from partial entries: its first entry's time and its text.
    partial: Option<(Timestamp, Vec<u8>)>,
}

impl Lines {
    fn new(options: &LogOptions) -> Lines {
        Lines {
            timestamps: options.timestamps,
            since: options.since,
            ..Lines::default()
        }
    }

    /// Feeds file content; returns the lines it completed.
    fn feed(&mut self, chunk: &[u8]) -> Vec<Vec<u8>> {
        self.rest.extend_from_slice(chunk);
        let mut lines = Vec::new();
        let mut consumed = 0;
        while let Some(newline) = self.rest[consumed..].iter().position(|&b| b == b'\n') {
            let raw = &self.rest[consumed..consumed + newline];
            consumed += newline + 1;
            let Some(entry) = parse_entry(raw) else {
                continue;
            };
            let (time, mut text) = self
                .partial
                .take()
                .unwrap_or_else(|| (entry.time, Vec::new()));
            text.extend_from_slice(entry.text);
            if entry.partial {
                self.partial = Some((time, text));
                continue;
            }
            if self.since.is_some_and(|since| time < since) {
                continue;
            }
            let mut line = Vec::with_capacity(text.len() + 40);
            if self.timestamps {
                line.extend_from_slice(format!("{time} ").as_bytes());
            }
            line.extend_from_slice(&text);
            line.push(b'\n');
            lines.push(line);
        }
        self.rest.drain(..consumed);
        lines
    }
}

/// Caps what is sent at `limitBytes`.
struct Budget(Option<u64>);

impl Budget {
    /// The part of `bytes` that may still be sent; `None` once the limit is reached.
    fn take(&mut self, mut bytes: Vec<u8>) -> Option<Vec<u8>> {
        let Some(left) = self.0.as_mut() else {
            return Some(bytes);
        };
        if *left == 0 {
            return None;
        }
        let allowed = usize::try_from(*left).unwrap_or(usize::MAX);
        bytes.truncate(allowed);
        *left -= bytes.len() as u64;
        Some(bytes)
    }
}

/// Where a log request reads from and how long it may follow.
pub struct Source {
    pub file: PathBuf,
    /// Whether the run may still write (checked when the file has nothing new).
    pub running: Box<dyn Fn() -> bool + Send>,
}

/// Sends the log's lines to `out` as the options ask, following the file while the run lasts
/// when `follow` is set. Ends early when the receiver is gone (the client disconnected).
pub async fn send(source: Source, options: LogOptions, out: mpsc::Sender<Bytes>) {
    let mut lines = Lines::new(&options);
    let mut budget = Budget(options.limit_bytes);
    let existing = match tokio::fs::read(&source.file).await {
        Ok(content) => content,
        Err(error) => {
            tracing::debug!(file = %source.file.display(), %error, "reading a run log");
            return;
        }
    };
    let mut offset = existing.len() as u64;
    let mut all = lines.feed(&existing);
    if let Some(tail) = options.tail_lines {
        all.drain(..all.len().saturating_sub(tail));
    }
    let first: Vec<u8> = all.concat();
    if !first.is_empty() {
        let Some(first) = budget.take(first) else {
            return;
        };
        if out.send(Bytes::from(first)).await.is_err() {
            return;
        }
    }
    if !options.follow {
        return;
    }
    loop {
        let more = read_from(&source.file, offset).await;
        if more.is_empty() {
            if !(source.running)() {
                // One last look: the run may have written just before it ended.
                let last = read_from(&source.file, offset).await;
                if last.is_empty() {
                    return;
                }
                let _ = emit(&mut lines, &mut budget, &out, &last).await;
                return;
            }
            tokio::select! {
                () = tokio::time::sleep(FOLLOW_POLL) => {}
                () = out.closed() => return,
            }
            continue;
        }
        offset += more.len() as u64;
        if !emit(&mut lines, &mut budget, &out, &more).await {
            return;
        }
    }
}

/// Sends the lines `chunk` completes; false when nothing more may or can be sent.
async fn emit(
    lines: &mut Lines,
    budget: &mut Budget,
    out: &mpsc::Sender<Bytes>,
    chunk: &[u8],
) -> bool {
    let text: Vec<u8> = lines.feed(chunk).concat();
    if text.is_empty() {
        return true;
    }
    match budget.take(text) {
        Some(text) => out.send(Bytes::from(text)).await.is_ok(),
        None => false,
    }
}

pub async fn read_from(path: &Path, offset: u64) -> Vec<u8> {
    let mut content = Vec::new();
    if let Ok(mut file) = tokio::fs::File::open(path).await
        && file.seek(std::io::SeekFrom::Start(offset)).await.is_ok()
    {
        let _ = file.read_to_end(&mut content).await;
    }
    content
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    #[test]
    fn options_parse_like_pod_log_options() {
        let now = at("2026-01-01T00:01:00Z");
        let options = LogOptions::parse(
            "follow=true&tailLines=2&sinceSeconds=30&timestamps=true&limitBytes=10&previous=false",
            now,
        )
        .unwrap();
        assert_eq!(
            options,
            LogOptions {
                follow: true,
                previous: false,
                timestamps: true,
                tail_lines: Some(2),
                since: Some(at("2026-01-01T00:00:30Z")),
                limit_bytes: Some(10),
            }
        );
        let since = LogOptions::parse("sinceTime=2026-01-01T00:00:10Z", now).unwrap();
        assert_eq!(since.since, Some(at("2026-01-01T00:00:10Z")));
        assert!(LogOptions::parse("tailLines=-1", now).is_err());
        assert!(LogOptions::parse("limitBytes=0", now).is_err());
        assert!(LogOptions::parse("tailLines=x", now).is_err());
        assert!(LogOptions::parse("sinceSeconds=1&sinceTime=2026-01-01T00:00:10Z", now).is_err());
    }

    #[test]
    fn entries_parse_and_partials_join() {
        let entry = parse_entry(b"2026-01-01T00:00:01Z stdout F hello world").unwrap();
        assert_eq!(entry.text, b"hello world");
        assert_eq!(entry.stream, b"stdout");
        assert!(!entry.partial);
        assert!(parse_entry(b"garbage").is_none());

        let mut lines = Lines::new(&LogOptions {
            timestamps: true,
            ..LogOptions::default()
        });
        let out = lines.feed(
            b"2026-01-01T00:00:01Z stdout P ab\n2026-01-01T00:00:02Z stdout F cd\n2026-01-01T00:00:03Z stderr F e",
        );
        assert_eq!(out, vec![b"2026-01-01T00:00:01Z abcd\n".to_vec()]);
        let out = lines.feed(b"f\n");
        assert_eq!(out, vec![b"2026-01-01T00:00:03Z ef\n".to_vec()]);
    }

    #[test]
    fn since_drops_older_lines() {
        let mut lines = Lines::new(&LogOptions {
            since: Some(at("2026-01-01T00:00:02Z")),
            ..LogOptions::default()
        });
        let out =
            lines.feed(b"2026-01-01T00:00:01Z stdout F old\n2026-01-01T00:00:02Z stdout F new\n");
        assert_eq!(out, vec![b"new\n".to_vec()]);
    }

    #[test]
    fn the_budget_cuts_at_the_limit() {
        let mut budget = Budget(Some(5));
        assert_eq!(budget.take(b"abc".to_vec()), Some(b"abc".to_vec()));
        assert_eq!(budget.take(b"defg".to_vec()), Some(b"de".to_vec()));
        assert_eq!(budget.take(b"h".to_vec()), None);
        assert_eq!(Budget(None).take(b"x".to_vec()), Some(b"x".to_vec()));
    }

    #[tokio::test]
    async fn tail_and_follow_until_the_run_ends() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("0.log");
        std::fs::write(
            &file,
            "2026-01-01T00:00:01Z stdout F one\n2026-01-01T00:00:02Z stdout F two\n2026-01-01T00:00:03Z stdout F three\n",
        )
        .unwrap();
        let running = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
        let flag = running.clone();
        let (tx, mut rx) = mpsc::channel(8);
        let task = tokio::spawn(send(
            Source {
                file: file.clone(),
                running: Box::new(move || flag.load(std::sync::atomic::Ordering::SeqCst)),
            },
            LogOptions {
                follow: true,
                tail_lines: Some(1),
                ..LogOptions::default()
            },
            tx,
        ));
        assert_eq!(rx.recv().await.unwrap(), Bytes::from("three\n"));
        use std::io::Write as _;
        let mut append = std::fs::OpenOptions::new()
            .append(true)
            .open(&file)
            .unwrap();
        append
            .write_all(b"2026-01-01T00:00:04Z stdout F four\n")
            .unwrap();
        assert_eq!(rx.recv().await.unwrap(), Bytes::from("four\n"));
        running.store(false, std::sync::atomic::Ordering::SeqCst);
        assert!(rx.recv().await.is_none(), "follow ends with the run");
        task.await.unwrap();
    }
}
