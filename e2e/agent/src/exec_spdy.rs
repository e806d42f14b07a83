//! `exec` and `attach` over SPDY/3.1 with kubelet's protocols, `v4.channel.k8s.io` (kubectl's
//! first choice since Kubernetes 1.4) down to `channel.k8s.io`: the client opens one stream per
//! channel, named by its `streamtype` header (`error`, `stdin`, `stdout`, `stderr`, and from v3
//! `resize`), and kubelet waits for exactly the ones the request asked for (up to
//! [`STREAM_WAIT`]) before running the command; the status goes on the `error` stream (JSON from
//! v4, a failure's text before, [`Version`]), then every stream is finished and the connection
//! closed.

use std::time::Duration;

use bytes::Bytes;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;

use crate::exec_process::Running;
use crate::remote_command::{self, Channel, ExecOptions, Input, Transport, Version};
use crate::spdy::session::{self, Session};

/// The subprotocols kubelet speaks over SPDY.
pub const PROTOCOLS: [&str; 4] = [
    "v4.channel.k8s.io",
    "v3.channel.k8s.io",
    "v2.channel.k8s.io",
    "channel.k8s.io",
];

/// What a negotiated subprotocol (one of [`PROTOCOLS`]) changes.
fn version(protocol: &str) -> Version {
    match protocol {
        "v4.channel.k8s.io" => Version::V4,
        "v3.channel.k8s.io" => Version {
            resize: true,
            json_status: false,
        },
        _ => Version {
            resize: false,
            json_status: false,
        },
    }
}

/// How long kubelet waits for the client to open its streams.
const STREAM_WAIT: Duration = Duration::from_secs(30);

/// The channel streams of one exchange.
#[derive(Default)]
struct Streams {
    error: Option<u32>,
    stdout: Option<u32>,
    stderr: Option<u32>,
    stdin: Option<mpsc::Receiver<Bytes>>,
    stdin_id: Option<u32>,
    resize: Option<mpsc::Receiver<Bytes>>,
    resize_id: Option<u32>,
}

impl Streams {
    fn complete(&self, options: &ExecOptions, version: Version) -> bool {
        self.error.is_some()
            && self.stdout.is_some() == options.stdout
            && self.stderr.is_some() == options.stderr
            && self.stdin_id.is_some() == options.stdin
            && self.resize_id.is_some() == (options.tty && version.resize)
    }
}

struct SpdyTransport {
    session: Session,
    streams: Streams,
    version: Version,
}

impl Transport for SpdyTransport {
    async fn output(&mut self, channel: Channel, data: Bytes) -> bool {
        let id = match channel {
            Channel::Stdout => self.streams.stdout,
            Channel::Stderr => self.streams.stderr,
        };
        match id {
            Some(id) => self.session.send(id, data, false).await,
            None => true,
        }
    }

    async fn finish(self, status: Value) {
        if let Some(error) = self.streams.error {
            match self.version.status_body(&status) {
                Some(body) => {
                    self.session.send(error, Bytes::from(body), true).await;
                }
                None => self.session.finish(error).await,
            }
        }
        for id in [self.streams.stdout, self.streams.stderr]
            .into_iter()
            .flatten()
        {
            self.session.finish(id).await;
        }
        self.session.close().await;
    }
}

/// Serves one exchange on a connection the client switched to SPDY/3.1: waits for the
/// streams, starts the command with `start` and relays until it ends.
pub async fn serve<T, F>(io: T, protocol: &str, options: ExecOptions, start: F)
where
    T: AsyncRead + AsyncWrite + Send + 'static,
    F: FnOnce(&ExecOptions) -> Result<Running, String>,
{
    let version = version(protocol);
    let (session, mut incoming) = session::serve(io);
    let mut streams = Streams::default();
    let waited = tokio::time::timeout(STREAM_WAIT, async {
        while !streams.complete(&options, version) {
            let Some(stream) = incoming.recv().await else {
                return false;
            };
            match stream.header("streamtype") {
                Some("error") => streams.error = Some(stream.id),
                Some("stdout") => streams.stdout = Some(stream.id),
                Some("stderr") => streams.stderr = Some(stream.id),
                Some("stdin") => {
                    streams.stdin_id = Some(stream.id);
                    streams.stdin = Some(stream.data);
                }
                Some("resize") => {
                    streams.resize_id = Some(stream.id);
                    streams.resize = Some(stream.data);
                }
                _ => {
                    session
                        .reset(stream.id, crate::spdy::frame::REFUSED_STREAM)
                        .await
                }
            }
        }
        true
    })
    .await;
    if !matches!(waited, Ok(true)) {
        tracing::debug!("exec: the client did not open its streams");
        session.close().await;
        return;
    }
    let input = Input {
        stdin: streams.stdin.take(),
        resize: streams.resize.take(),
    };
    let transport = SpdyTransport {
        session,
        streams,
        version,
    };
    remote_command::run(start, &options, input, transport).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_resize_stream_is_awaited_from_v3_on() {
        let options = ExecOptions::parse("command=sh&stdin=true&stdout=true&tty=true");
        let (_, stdin) = mpsc::channel(1);
        let opened = Streams {
            error: Some(1),
            stdout: Some(3),
            stdin: Some(stdin),
            stdin_id: Some(5),
            ..Streams::default()
        };
        assert!(opened.complete(&options, version("v2.channel.k8s.io")));
        assert!(opened.complete(&options, version("channel.k8s.io")));
        assert!(!opened.complete(&options, version("v3.channel.k8s.io")));
        assert!(!opened.complete(&options, version("v4.channel.k8s.io")));
        assert_eq!(version("v4.channel.k8s.io"), Version::V4);
        assert!(!version("v3.channel.k8s.io").json_status);
    }
}
