//! `exec` and `attach` over a WebSocket, with the subprotocols kubelet serves: every message's
//! first byte is the channel (0 stdin, 1 stdout, 2 stderr, 3 error, 4 resize) and the rest the
//! data. The `base64.` variants (`base64.channel.k8s.io`, `v4.base64.channel.k8s.io`, for
//! clients that can only send text, such as browsers) send text frames whose first character is
//! the channel's digit (`'0'`..`'4'`) and whose rest is the data in base64. The unversioned
//! protocols (`channel.k8s.io`, `base64.channel.k8s.io`, or none offered) are v1: the error
//! channel carries only a failure's message, as text; `v4.` and `v5.` carry the final `Status`
//! as JSON ([`Version`]). v5 (kubectl 1.30+) adds a message `[255, n]` that closes the client's
//! channel `n` (how stdin reaches end of file); before, stdin ends with the connection. As
//! kubelet, the server first sends an empty message on the lowest channel it writes (stdout,
//! stderr, else error: the client knows the exchange is open); the status is the last message
//! on channel 3, then the server closes the connection.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt as _, WriteHalf};
use tokio::sync::mpsc;

use crate::exec_process::Running;
use crate::remote_command::{self, Channel, ExecOptions, Input, Transport, Version};
use crate::websocket::{self, Message, OPCODE_BINARY, OPCODE_PONG, OPCODE_TEXT};

const V5: &str = "v5.channel.k8s.io";

/// The subprotocols served (`""`: the client offered none; kube serves it as
/// `channel.k8s.io`). The client's order decides.
pub const PROTOCOLS: [&str; 6] = [
    V5,
    "v4.channel.k8s.io",
    "v4.base64.channel.k8s.io",
    "channel.k8s.io",
    "base64.channel.k8s.io",
    "",
];

const STDIN: u8 = 0;
const STDOUT: u8 = 1;
const STDERR: u8 = 2;
const ERROR: u8 = 3;
const RESIZE: u8 = 4;
const CLOSE: u8 = 255;

/// What a negotiated subprotocol (one of [`PROTOCOLS`]) changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Flavor {
    base64: bool,
    version: Version,
    closes_channels: bool,
}

impl Flavor {
    fn of(protocol: &str) -> Flavor {
        let versioned = protocol.starts_with("v4.") || protocol.starts_with("v5.");
        Flavor {
            base64: protocol.contains("base64."),
            version: Version {
                resize: true,
                json_status: versioned,
            },
            closes_channels: protocol == V5,
        }
    }

    /// The frame of one message on `channel`.
    fn message(self, channel: u8, data: &[u8]) -> Vec<u8> {
        let mut payload = Vec::with_capacity(data.len() * 4 / 3 + 5);
        if self.base64 {
            payload.push(b'0' + channel);
            payload.extend_from_slice(STANDARD.encode(data).as_bytes());
            return websocket::frame(OPCODE_TEXT, &payload);
        }
        payload.push(channel);
        payload.extend_from_slice(data);
        websocket::frame(OPCODE_BINARY, &payload)
    }

    /// The channel and data of a client's message (`None`: not one of this protocol).
    fn decode(self, message: &[u8]) -> Option<(u8, Vec<u8>)> {
        let (&first, rest) = message.split_first()?;
        if self.base64 {
            let channel = first.checked_sub(b'0')?;
            return Some((channel, STANDARD.decode(rest).ok()?));
        }
        Some((first, rest.to_vec()))
    }
}

/// The server's side of the socket: one writer, shared by the output and the pong answers.
type Writer<T> = std::sync::Arc<tokio::sync::Mutex<WriteHalf<T>>>;

struct WebSocketTransport<T> {
    writer: Writer<T>,
    flavor: Flavor,
}

async fn send<T: AsyncWrite>(writer: &Writer<T>, bytes: &[u8]) -> bool {
    writer.lock().await.write_all(bytes).await.is_ok()
}

impl<T: AsyncWrite + Send + 'static> Transport for WebSocketTransport<T> {
    async fn output(&mut self, channel: Channel, data: Bytes) -> bool {
        let id = match channel {
            Channel::Stdout => STDOUT,
            Channel::Stderr => STDERR,
        };
        send(&self.writer, &self.flavor.message(id, &data)).await
    }

    async fn finish(self, status: Value) {
        if let Some(body) = self.flavor.version.status_body(&status) {
            send(&self.writer, &self.flavor.message(ERROR, &body)).await;
        }
        send(&self.writer, &websocket::close_frame()).await;
        let _ = self.writer.lock().await.shutdown().await;
    }
}

/// Reads the client's messages into the stdin and resize channels until it closes.
async fn demultiplex<R: AsyncRead + Unpin, T: AsyncWrite>(
    mut reader: R,
    writer: Writer<T>,
    stdin: Option<mpsc::Sender<Bytes>>,
    resize: mpsc::Sender<Bytes>,
    flavor: Flavor,
) {
    let mut stdin = stdin;
    loop {
        let message = match websocket::read_message(&mut reader).await {
            Ok(message) => message,
            Err(_) => return,
        };
        let data = match message {
            Message::Close => return,
            Message::Ping(payload) => {
                send(&writer, &websocket::frame(OPCODE_PONG, &payload)).await;
                continue;
            }
            Message::Data(data) => data,
        };
        match flavor.decode(&data) {
            Some((STDIN, rest)) => {
                if let Some(sender) = &stdin {
                    let _ = sender.send(Bytes::from(rest)).await;
                }
            }
            Some((RESIZE, rest)) => {
                let _ = resize.send(Bytes::from(rest)).await;
            }
            Some((CLOSE, rest)) if flavor.closes_channels && rest == [STDIN] => stdin = None,
            _ => {}
        }
    }
}

/// The channel of the empty message that tells the client the exchange is open.
fn first_channel(options: &ExecOptions) -> u8 {
    if options.stdout {
        STDOUT
    } else if options.stderr {
        STDERR
    } else {
        ERROR
    }
}

/// Serves one exchange on a connection the client switched to a WebSocket with `protocol` (one
/// of [`PROTOCOLS`]).
pub async fn serve<T, F>(io: T, protocol: &str, options: ExecOptions, start: F)
where
    T: AsyncRead + AsyncWrite + Send + 'static,
    F: FnOnce(&ExecOptions) -> Result<Running, String>,
{
    let flavor = Flavor::of(protocol);
    let (reader, writer) = tokio::io::split(io);
    let writer: Writer<T> = std::sync::Arc::new(tokio::sync::Mutex::new(writer));
    if !send(&writer, &flavor.message(first_channel(&options), &[])).await {
        return;
    }
    let (stdin_tx, stdin_rx) = mpsc::channel(16);
    let (resize_tx, resize_rx) = mpsc::channel(4);
    let stdin_tx = options.stdin.then_some(stdin_tx);
    tokio::spawn(demultiplex(
        reader,
        writer.clone(),
        stdin_tx,
        resize_tx,
        flavor,
    ));
    let transport = WebSocketTransport { writer, flavor };
    let input = Input {
        stdin: options.stdin.then_some(stdin_rx),
        resize: options.tty.then_some(resize_rx),
    };
    remote_command::run(start, &options, input, transport).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt as _;

    fn masked(payload: &[u8]) -> Vec<u8> {
        let key = [1u8, 2, 3, 4];
        let mut out = vec![0x82, 0x80 | payload.len() as u8];
        out.extend_from_slice(&key);
        out.extend(payload.iter().enumerate().map(|(i, b)| b ^ key[i % 4]));
        out
    }

    #[tokio::test]
    async fn channels_are_demultiplexed_and_stdin_closes_with_the_v5_signal() {
        let (client, server) = tokio::io::duplex(4096);
        let (reader, writer) = tokio::io::split(server);
        let writer = std::sync::Arc::new(tokio::sync::Mutex::new(writer));
        let (stdin_tx, mut stdin_rx) = mpsc::channel(4);
        let (resize_tx, mut resize_rx) = mpsc::channel(4);
        let task = tokio::spawn(demultiplex(
            reader,
            writer,
            Some(stdin_tx),
            resize_tx,
            Flavor::of(V5),
        ));
        let (mut client_read, mut client_write) = tokio::io::split(client);
        client_write.write_all(&masked(b"\x00hi")).await.unwrap();
        client_write
            .write_all(&masked(b"\x04{\"Width\":80,\"Height\":24}"))
            .await
            .unwrap();
        client_write
            .write_all(&masked(&[CLOSE, STDIN]))
            .await
            .unwrap();
        client_write
            .write_all(&[0x89, 0x80, 0, 0, 0, 0])
            .await
            .unwrap();
        assert_eq!(stdin_rx.recv().await.unwrap(), Bytes::from_static(b"hi"));
        assert_eq!(
            resize_rx.recv().await.unwrap(),
            Bytes::from_static(b"{\"Width\":80,\"Height\":24}")
        );
        assert!(stdin_rx.recv().await.is_none(), "stdin closed by [255, 0]");
        let mut pong = [0u8; 2];
        client_read.read_exact(&mut pong).await.unwrap();
        assert_eq!(pong, [0x8a, 0x00]);
        client_write.shutdown().await.unwrap();
        task.await.unwrap();
    }

    #[tokio::test]
    async fn with_v4_stdin_ends_with_the_connection_not_a_close_message() {
        let (client, server) = tokio::io::duplex(4096);
        let (reader, writer) = tokio::io::split(server);
        let writer = std::sync::Arc::new(tokio::sync::Mutex::new(writer));
        let (stdin_tx, mut stdin_rx) = mpsc::channel(4);
        let (resize_tx, _resize_rx) = mpsc::channel(4);
        let task = tokio::spawn(demultiplex(
            reader,
            writer,
            Some(stdin_tx),
            resize_tx,
            Flavor::of("v4.channel.k8s.io"),
        ));
        let (_client_read, mut client_write) = tokio::io::split(client);
        client_write
            .write_all(&masked(&[CLOSE, STDIN]))
            .await
            .unwrap();
        client_write.write_all(&masked(b"\x00after")).await.unwrap();
        assert_eq!(
            stdin_rx.recv().await.unwrap(),
            Bytes::from_static(b"after"),
            "[255, 0] is no signal in v4: stdin stays open"
        );
        client_write.shutdown().await.unwrap();
        task.await.unwrap();
        assert!(
            stdin_rx.recv().await.is_none(),
            "stdin ends with the connection"
        );
    }

    #[test]
    fn output_messages_start_with_their_channel() {
        let binary = Flavor::of("v4.channel.k8s.io");
        assert_eq!(binary.message(STDOUT, b"ok"), [0x82, 0x03, 1, b'o', b'k']);
        // "ok" in base64 is "b2s=", after the channel's digit, in a text frame.
        let text = Flavor::of("v4.base64.channel.k8s.io");
        assert_eq!(text.message(STDOUT, b"ok"), *b"\x81\x051b2s=");
        assert_eq!(text.decode(b"0aGk="), Some((STDIN, b"hi".to_vec())));
        assert_eq!(text.decode(b"0not base64!"), None);
        assert_eq!(binary.decode(b"\x04{}"), Some((RESIZE, b"{}".to_vec())));
    }

    #[test]
    fn versions_and_encodings_follow_the_protocol_name() {
        let v5 = Flavor::of(V5);
        assert!(v5.closes_channels && v5.version.json_status && !v5.base64);
        let v4_base64 = Flavor::of("v4.base64.channel.k8s.io");
        assert!(v4_base64.base64 && v4_base64.version.json_status && !v4_base64.closes_channels);
        for v1 in ["channel.k8s.io", "base64.channel.k8s.io", ""] {
            let flavor = Flavor::of(v1);
            assert!(
                !flavor.version.json_status && flavor.version.resize,
                "{v1:?}"
            );
            assert_eq!(flavor.base64, v1.starts_with("base64"), "{v1:?}");
        }
    }
}
