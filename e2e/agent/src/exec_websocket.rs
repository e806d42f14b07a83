//! `exec` and `attach` over a WebSocket with `v5.channel.k8s.io` (kubectl 1.30+) or
//! `v4.channel.k8s.io` (the Python client and other libraries): every message's first byte is the
//! channel (0 stdin, 1 stdout, 2 stderr, 3 error, 4 resize) and the rest the data (the client may
//! send text frames, read alike). v5 adds a message `[255, n]` that closes the client's channel
//! `n` (how stdin reaches end of file); with v4 stdin ends with the connection. The status is the
//! last message on channel 3, then the server closes the connection.

use bytes::Bytes;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt as _, WriteHalf};
use tokio::sync::mpsc;

use crate::exec_process::Running;
use crate::remote_command::{self, Channel, ExecOptions, Input, Transport};
use crate::websocket::{self, Message, OPCODE_BINARY, OPCODE_PONG};

/// The subprotocols served, in the server's order of preference (kubelet's).
pub const PROTOCOLS: [&str; 2] = [V5, "v4.channel.k8s.io"];
const V5: &str = "v5.channel.k8s.io";

const STDIN: u8 = 0;
const STDOUT: u8 = 1;
const STDERR: u8 = 2;
const ERROR: u8 = 3;
const RESIZE: u8 = 4;
const CLOSE: u8 = 255;

/// The server's side of the socket: one writer, shared by the output and the pong answers.
type Writer<T> = std::sync::Arc<tokio::sync::Mutex<WriteHalf<T>>>;

struct WebSocketTransport<T> {
    writer: Writer<T>,
}

async fn send<T: AsyncWrite>(writer: &Writer<T>, bytes: &[u8]) -> bool {
    writer.lock().await.write_all(bytes).await.is_ok()
}

fn channel_message(channel: u8, data: &[u8]) -> Vec<u8> {
    let mut payload = Vec::with_capacity(data.len() + 1);
    payload.push(channel);
    payload.extend_from_slice(data);
    websocket::frame(OPCODE_BINARY, &payload)
}

impl<T: AsyncWrite + Send + 'static> Transport for WebSocketTransport<T> {
    async fn output(&mut self, channel: Channel, data: Bytes) -> bool {
        let id = match channel {
            Channel::Stdout => STDOUT,
            Channel::Stderr => STDERR,
        };
        send(&self.writer, &channel_message(id, &data)).await
    }

    async fn finish(self, status: Value) {
        let body = serde_json::to_vec(&status).unwrap_or_default();
        send(&self.writer, &channel_message(ERROR, &body)).await;
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
    closes_channels: bool,
) {
    let mut stdin = stdin;
    loop {
        let message = match websocket::read_message(&mut reader).await {
            Ok(message) => message,
            Err(_) => return,
        };
        match message {
            Message::Close => return,
            Message::Ping(payload) => {
                send(&writer, &websocket::frame(OPCODE_PONG, &payload)).await;
            }
            Message::Data(data) => match data.split_first() {
                Some((&STDIN, rest)) => {
                    if let Some(sender) = &stdin {
                        let _ = sender.send(Bytes::copy_from_slice(rest)).await;
                    }
                }
                Some((&RESIZE, rest)) => {
                    let _ = resize.send(Bytes::copy_from_slice(rest)).await;
                }
                Some((&CLOSE, [STDIN])) if closes_channels => stdin = None,
                _ => {}
            },
        }
    }
}

/// Serves one exchange on a connection the client switched to a WebSocket with `protocol` (one
/// of [`PROTOCOLS`]).
pub async fn serve<T, F>(io: T, protocol: &str, options: ExecOptions, start: F)
where
    T: AsyncRead + AsyncWrite + Send + 'static,
    F: FnOnce(&ExecOptions) -> Result<Running, String>,
{
    let (reader, writer) = tokio::io::split(io);
    let writer: Writer<T> = std::sync::Arc::new(tokio::sync::Mutex::new(writer));
    let (stdin_tx, stdin_rx) = mpsc::channel(16);
    let (resize_tx, resize_rx) = mpsc::channel(4);
    let stdin_tx = options.stdin.then_some(stdin_tx);
    tokio::spawn(demultiplex(
        reader,
        writer.clone(),
        stdin_tx,
        resize_tx,
        protocol == V5,
    ));
    let transport = WebSocketTransport { writer };
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
        let task = tokio::spawn(demultiplex(reader, writer, Some(stdin_tx), resize_tx, true));
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
            false,
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
        assert_eq!(channel_message(STDOUT, b"ok"), [0x82, 0x03, 1, b'o', b'k']);
    }
}
