//! A WebSocket as a byte stream, for `SPDY/3.1+portforward.k8s.io` (kubectl 1.31+
//! `port-forward`): the client tunnels a SPDY/3.1 connection through binary messages, so the
//! bytes of the messages it sends are read, and what is written goes back as binary messages.
//! Pings are answered; the tunnel ends when either side closes.

use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _, DuplexStream};

use crate::websocket::{self, Message, OPCODE_BINARY, OPCODE_PONG};

/// The size of the buffer between the socket and the tunnelled stream.
const BUFFER: usize = 64 * 1024;

/// The tunnelled stream of a WebSocket connection.
pub fn open<T>(io: T) -> DuplexStream
where
    T: AsyncRead + AsyncWrite + Send + 'static,
{
    let (inner, outer) = tokio::io::duplex(BUFFER);
    let (mut socket_read, socket_write) = tokio::io::split(io);
    let (mut outer_read, mut outer_write) = tokio::io::split(outer);
    let writer = std::sync::Arc::new(tokio::sync::Mutex::new(socket_write));
    let pong_writer = writer.clone();
    tokio::spawn(async move {
        loop {
            match websocket::read_message(&mut socket_read).await {
                Ok(Message::Data(data)) => {
                    if outer_write.write_all(&data).await.is_err() {
                        break;
                    }
                }
                Ok(Message::Ping(payload)) => {
                    let pong = websocket::frame(OPCODE_PONG, &payload);
                    let _ = pong_writer.lock().await.write_all(&pong).await;
                }
                Ok(Message::Close) | Err(_) => break,
            }
        }
        let _ = outer_write.shutdown().await;
    });
    tokio::spawn(async move {
        let mut buffer = vec![0u8; BUFFER];
        loop {
            match outer_read.read(&mut buffer).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let message = websocket::frame(OPCODE_BINARY, &buffer[..n]);
                    if writer.lock().await.write_all(&message).await.is_err() {
                        return;
                    }
                }
            }
        }
        let mut writer = writer.lock().await;
        let _ = writer.write_all(&websocket::close_frame()).await;
        let _ = writer.shutdown().await;
    });
    inner
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn message_bytes_flow_both_ways() {
        let (client, server) = tokio::io::duplex(4096);
        let mut tunnel = open(server);
        let (mut client_read, mut client_write) = tokio::io::split(client);
        // A masked binary message "abc" (mask 0): the tunnelled stream reads "abc".
        client_write
            .write_all(&[0x82, 0x83, 0, 0, 0, 0, b'a', b'b', b'c'])
            .await
            .unwrap();
        let mut read = [0u8; 3];
        tunnel.read_exact(&mut read).await.unwrap();
        assert_eq!(&read, b"abc");
        tunnel.write_all(b"xyz").await.unwrap();
        let mut frame = [0u8; 5];
        client_read.read_exact(&mut frame).await.unwrap();
        assert_eq!(frame, [0x82, 0x03, b'x', b'y', b'z']);
    }
}
