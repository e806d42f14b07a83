//! The server side of WebSocket (RFC 6455), as far as kubectl's streams use it (kubectl 1.30+
//! `exec`/`attach` with `v5.channel.k8s.io`, 1.31+ `port-forward` tunnelling SPDY): the
//! handshake's accept key, frames read from the client (masked, possibly fragmented, with pings
//! and a close in between) assembled into messages, and unmasked frames written back. Written
//! here rather than with tokio-tungstenite, which the workspace does not have: this is the
//! whole of what is needed.

use ring::digest;
use tokio::io::{AsyncRead, AsyncReadExt as _};

/// The GUID the handshake appends to the client's key (RFC 6455 section 1.3).
const HANDSHAKE_GUID: &str = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// The largest message accepted.
const MAX_MESSAGE: usize = 16 << 20;

pub const OPCODE_CONTINUATION: u8 = 0x0;
pub const OPCODE_TEXT: u8 = 0x1;
pub const OPCODE_BINARY: u8 = 0x2;
pub const OPCODE_CLOSE: u8 = 0x8;
pub const OPCODE_PING: u8 = 0x9;
pub const OPCODE_PONG: u8 = 0xa;

/// `Sec-WebSocket-Accept` for a `Sec-WebSocket-Key`.
pub fn accept_key(key: &str) -> String {
    use base64::Engine as _;
    let hash = digest::digest(
        &digest::SHA1_FOR_LEGACY_USE_ONLY,
        format!("{key}{HANDSHAKE_GUID}").as_bytes(),
    );
    base64::engine::general_purpose::STANDARD.encode(hash.as_ref())
}

/// A message from the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    /// Text or binary data (kubectl's channels are binary).
    Data(Vec<u8>),
    Ping(Vec<u8>),
    Close,
}

#[derive(Debug, thiserror::Error)]
pub enum WebSocketError {
    #[error("reading: {0}")]
    Io(#[from] std::io::Error),
    #[error("message larger than {MAX_MESSAGE} bytes")]
    TooLarge,
    #[error("protocol error: {0}")]
    Protocol(&'static str),
}

struct FrameHead {
    fin: bool,
    opcode: u8,
    length: usize,
    mask: Option<[u8; 4]>,
}

async fn read_head(reader: &mut (impl AsyncRead + Unpin)) -> Result<FrameHead, WebSocketError> {
    let mut first = [0u8; 2];
    reader.read_exact(&mut first).await?;
    let length = match first[1] & 0x7f {
        126 => {
            let mut extended = [0u8; 2];
            reader.read_exact(&mut extended).await?;
            usize::from(u16::from_be_bytes(extended))
        }
        127 => {
            let mut extended = [0u8; 8];
            reader.read_exact(&mut extended).await?;
            usize::try_from(u64::from_be_bytes(extended)).map_err(|_| WebSocketError::TooLarge)?
        }
        short => usize::from(short),
    };
    let mask = if first[1] & 0x80 != 0 {
        let mut key = [0u8; 4];
        reader.read_exact(&mut key).await?;
        Some(key)
    } else {
        None
    };
    Ok(FrameHead {
        fin: first[0] & 0x80 != 0,
        opcode: first[0] & 0x0f,
        length,
        mask,
    })
}

/// Reads the next message (pings and the close are messages too; pongs are skipped).
pub async fn read_message(
    reader: &mut (impl AsyncRead + Unpin),
) -> Result<Message, WebSocketError> {
    let mut message: Option<Vec<u8>> = None;
    loop {
        let head = read_head(reader).await?;
        if head.length > MAX_MESSAGE {
            return Err(WebSocketError::TooLarge);
        }
        let mut payload = vec![0u8; head.length];
        reader.read_exact(&mut payload).await?;
        if let Some(key) = head.mask {
            for (i, byte) in payload.iter_mut().enumerate() {
                *byte ^= key[i % 4];
            }
        }
        match head.opcode {
            OPCODE_CLOSE => return Ok(Message::Close),
            OPCODE_PING => return Ok(Message::Ping(payload)),
            OPCODE_PONG => continue,
            OPCODE_TEXT | OPCODE_BINARY if message.is_none() => message = Some(payload),
            OPCODE_CONTINUATION => match message.as_mut() {
                Some(so_far) => {
                    so_far.extend_from_slice(&payload);
                    if so_far.len() > MAX_MESSAGE {
                        return Err(WebSocketError::TooLarge);
                    }
                }
                None => return Err(WebSocketError::Protocol("continuation without a start")),
            },
            _ => return Err(WebSocketError::Protocol("unexpected opcode")),
        }
        if head.fin
            && let Some(whole) = message.take()
        {
            return Ok(Message::Data(whole));
        }
    }
}

/// One unmasked, final frame (what a server sends).
pub fn frame(opcode: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload.len() + 10);
    out.push(0x80 | opcode);
    match payload.len() {
        short @ 0..=125 => out.push(short as u8),
        medium @ 126..=0xffff => {
            out.push(126);
            out.extend_from_slice(&(medium as u16).to_be_bytes());
        }
        long => {
            out.push(127);
            out.extend_from_slice(&(long as u64).to_be_bytes());
        }
    }
    out.extend_from_slice(payload);
    out
}

/// A close frame with status 1000 (normal closure).
pub fn close_frame() -> Vec<u8> {
    frame(OPCODE_CLOSE, &1000u16.to_be_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_accept_key_is_rfc_6455s_example() {
        assert_eq!(
            accept_key("dGhlIHNhbXBsZSBub25jZQ=="),
            "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
        );
    }

    #[tokio::test]
    async fn masked_and_fragmented_client_frames_read_as_messages() {
        // RFC 6455 section 5.7: a masked "Hello" and a fragmented unmasked "Hello".
        let masked = [
            0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58,
        ];
        let fragmented = [0x01, 0x03, 0x48, 0x65, 0x6c, 0x80, 0x02, 0x6c, 0x6f];
        // A ping between fragments is delivered first; the message follows.
        let ping = [0x89, 0x05, 0x48, 0x65, 0x6c, 0x6c, 0x6f];
        let close = [0x88, 0x02, 0x03, 0xe8];
        let mut wire: Vec<u8> = Vec::new();
        wire.extend(masked);
        wire.extend(ping);
        wire.extend(fragmented);
        wire.extend(close);
        let mut reader = &wire[..];
        assert_eq!(
            read_message(&mut reader).await.unwrap(),
            Message::Data(b"Hello".to_vec())
        );
        assert_eq!(
            read_message(&mut reader).await.unwrap(),
            Message::Ping(b"Hello".to_vec())
        );
        assert_eq!(
            read_message(&mut reader).await.unwrap(),
            Message::Data(b"Hello".to_vec())
        );
        assert_eq!(read_message(&mut reader).await.unwrap(), Message::Close);
        assert!(read_message(&mut reader).await.is_err(), "end of input");
    }

    #[tokio::test]
    async fn server_frames_have_the_spec_layout() {
        assert_eq!(
            frame(OPCODE_TEXT, b"Hello"),
            [0x81, 0x05, 0x48, 0x65, 0x6c, 0x6c, 0x6f]
        );
        let long = vec![7u8; 256];
        let encoded = frame(OPCODE_BINARY, &long);
        assert_eq!(&encoded[..4], [0x82, 0x7e, 0x01, 0x00]);
        let mut reader = &encoded[..];
        assert_eq!(
            read_message(&mut reader).await.unwrap(),
            Message::Data(long)
        );
        assert_eq!(close_frame(), [0x88, 0x02, 0x03, 0xe8]);
    }
}
