//! SPDY/3.1 frames (draft-mbelshe-httpbis-spdy-00 with the 3.1 session flow control), the framing
//! kubectl's SPDY streams (`exec`, `attach`, `port-forward` before WebSockets) use through
//! moby/spdystream:
//!
//! ```text
//! control: |1| version (15) | type (16) | flags (8) | length (24) | data
//! data:    |0| stream id (31)           | flags (8) | length (24) | data
//! ```
//!
//! Header blocks are compressed by [`crate::spdy::headers`]. Frame types the streams of kubectl
//! never send (NOOP, CREDENTIAL) and unknown ones are read as [`Frame::Ignored`].

use bytes::Bytes;

use crate::spdy::headers::{Compressor, Decompressor, HeaderError, Headers};

/// The SPDY version of every control frame.
pub const VERSION: u16 = 3;
/// Last frame of its side of a stream.
pub const FLAG_FIN: u8 = 0x01;
/// The largest frame accepted (the length field has 24 bits).
pub const MAX_LENGTH: usize = (1 << 24) - 1;

const SYN_STREAM: u16 = 1;
const SYN_REPLY: u16 = 2;
const RST_STREAM: u16 = 3;
const SETTINGS: u16 = 4;
const PING: u16 = 6;
const GOAWAY: u16 = 7;
const HEADERS: u16 = 8;
const WINDOW_UPDATE: u16 = 9;

/// RST_STREAM status: the stream is refused (e.g. an unknown stream type).
pub const REFUSED_STREAM: u32 = 3;

/// One frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    SynStream {
        stream_id: u32,
        associated_to: u32,
        priority: u8,
        flags: u8,
        headers: Headers,
    },
    SynReply {
        stream_id: u32,
        flags: u8,
        headers: Headers,
    },
    RstStream {
        stream_id: u32,
        status: u32,
    },
    /// (flags, id, value) entries.
    Settings {
        entries: Vec<(u8, u32, u32)>,
    },
    Ping {
        id: u32,
    },
    GoAway {
        last_good_stream_id: u32,
        status: u32,
    },
    Headers {
        stream_id: u32,
        flags: u8,
        headers: Headers,
    },
    WindowUpdate {
        stream_id: u32,
        delta: u32,
    },
    Data {
        stream_id: u32,
        flags: u8,
        data: Bytes,
    },
    /// A control frame of a type this side does not use.
    Ignored {
        kind: u16,
    },
}

#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("unsupported SPDY version {0}")]
    Version(u16),
    #[error("SPDY {kind} frame too short ({length} bytes)")]
    Short { kind: &'static str, length: usize },
    #[error("SPDY frame of {0} bytes is too large")]
    TooLarge(usize),
    #[error("SPDY header block: {0}")]
    Headers(#[from] HeaderError),
}

fn u32_at(data: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([data[at], data[at + 1], data[at + 2], data[at + 3]])
}

fn stream_id_at(data: &[u8], at: usize) -> u32 {
    u32_at(data, at) & 0x7fff_ffff
}

fn need(kind: &'static str, data: &[u8], length: usize) -> Result<(), FrameError> {
    if data.len() < length {
        return Err(FrameError::Short {
            kind,
            length: data.len(),
        });
    }
    Ok(())
}

/// Reads one frame from the start of `buffer`: the frame and the bytes it took, or `None` when
/// the buffer does not hold a whole frame yet.
pub fn decode(
    buffer: &[u8],
    decompressor: &mut Decompressor,
) -> Result<Option<(Frame, usize)>, FrameError> {
    if buffer.len() < 8 {
        return Ok(None);
    }
    let flags = buffer[4];
    let length =
        (usize::from(buffer[5]) << 16) | (usize::from(buffer[6]) << 8) | usize::from(buffer[7]);
    let total = 8 + length;
    if buffer.len() < total {
        return Ok(None);
    }
    let data = &buffer[8..total];
    if buffer[0] & 0x80 == 0 {
        let frame = Frame::Data {
            stream_id: stream_id_at(buffer, 0),
            flags,
            data: Bytes::copy_from_slice(data),
        };
        return Ok(Some((frame, total)));
    }
    let version = u16::from_be_bytes([buffer[0] & 0x7f, buffer[1]]);
    if version != VERSION {
        return Err(FrameError::Version(version));
    }
    let kind = u16::from_be_bytes([buffer[2], buffer[3]]);
    let frame = match kind {
        SYN_STREAM => {
            need("SYN_STREAM", data, 10)?;
            Frame::SynStream {
                stream_id: stream_id_at(data, 0),
                associated_to: stream_id_at(data, 4),
                priority: data[8] >> 5,
                flags,
                headers: decompressor.decode(&data[10..])?,
            }
        }
        SYN_REPLY => {
            need("SYN_REPLY", data, 4)?;
            Frame::SynReply {
                stream_id: stream_id_at(data, 0),
                flags,
                headers: decompressor.decode(&data[4..])?,
            }
        }
        RST_STREAM => {
            need("RST_STREAM", data, 8)?;
            Frame::RstStream {
                stream_id: stream_id_at(data, 0),
                status: u32_at(data, 4),
            }
        }
        SETTINGS => {
            need("SETTINGS", data, 4)?;
            let count = u32_at(data, 0) as usize;
            need("SETTINGS", data, 4 + count.saturating_mul(8))?;
            let entries = (0..count)
                .map(|i| {
                    let at = 4 + i * 8;
                    let id = u32_at(data, at) & 0x00ff_ffff;
                    (data[at], id, u32_at(data, at + 4))
                })
                .collect();
            Frame::Settings { entries }
        }
        PING => {
            need("PING", data, 4)?;
            Frame::Ping {
                id: u32_at(data, 0),
            }
        }
        GOAWAY => {
            need("GOAWAY", data, 8)?;
            Frame::GoAway {
                last_good_stream_id: stream_id_at(data, 0),
                status: u32_at(data, 4),
            }
        }
        HEADERS => {
            need("HEADERS", data, 4)?;
            Frame::Headers {
                stream_id: stream_id_at(data, 0),
                flags,
                headers: decompressor.decode(&data[4..])?,
            }
        }
        WINDOW_UPDATE => {
            need("WINDOW_UPDATE", data, 8)?;
            Frame::WindowUpdate {
                stream_id: stream_id_at(data, 0),
                delta: u32_at(data, 4) & 0x7fff_ffff,
            }
        }
        kind => Frame::Ignored { kind },
    };
    Ok(Some((frame, total)))
}

fn control(kind: u16, flags: u8, payload: &[u8]) -> Result<Vec<u8>, FrameError> {
    let mut out = Vec::with_capacity(8 + payload.len());
    out.extend_from_slice(&(0x8000 | VERSION).to_be_bytes());
    out.extend_from_slice(&kind.to_be_bytes());
    out.extend_from_slice(&length_field(flags, payload.len())?);
    out.extend_from_slice(payload);
    Ok(out)
}

fn length_field(flags: u8, length: usize) -> Result<[u8; 4], FrameError> {
    if length > MAX_LENGTH {
        return Err(FrameError::TooLarge(length));
    }
    let length = length as u32;
    Ok([
        flags,
        (length >> 16) as u8,
        (length >> 8) as u8,
        length as u8,
    ])
}

/// A stream id (31 bits) followed by `rest`: how most control frames start.
fn with_stream_id(stream_id: u32, rest: &[u8]) -> Vec<u8> {
    let mut payload = (stream_id & 0x7fff_ffff).to_be_bytes().to_vec();
    payload.extend_from_slice(rest);
    payload
}

/// Writes one frame (header blocks through `compressor`).
pub fn encode(frame: &Frame, compressor: &mut Compressor) -> Result<Vec<u8>, FrameError> {
    match frame {
        Frame::Data {
            stream_id,
            flags,
            data,
        } => {
            let mut out = with_stream_id(*stream_id, &length_field(*flags, data.len())?);
            out.extend_from_slice(data);
            Ok(out)
        }
        Frame::SynStream {
            stream_id,
            associated_to,
            priority,
            flags,
            headers,
        } => {
            let mut rest = with_stream_id(*associated_to, &[(priority & 0x07) << 5, 0]);
            rest.extend_from_slice(&compressor.encode(headers)?);
            control(SYN_STREAM, *flags, &with_stream_id(*stream_id, &rest))
        }
        Frame::SynReply {
            stream_id,
            flags,
            headers,
        } => {
            let block = compressor.encode(headers)?;
            control(SYN_REPLY, *flags, &with_stream_id(*stream_id, &block))
        }
        Frame::Headers {
            stream_id,
            flags,
            headers,
        } => {
            let block = compressor.encode(headers)?;
            control(HEADERS, *flags, &with_stream_id(*stream_id, &block))
        }
        Frame::RstStream { stream_id, status } => control(
            RST_STREAM,
            0,
            &with_stream_id(*stream_id, &status.to_be_bytes()),
        ),
        Frame::Settings { entries } => {
            let mut payload = (entries.len() as u32).to_be_bytes().to_vec();
            for (flags, id, value) in entries {
                let id = id & 0x00ff_ffff;
                payload.extend_from_slice(&[*flags, (id >> 16) as u8, (id >> 8) as u8, id as u8]);
                payload.extend_from_slice(&value.to_be_bytes());
            }
            control(SETTINGS, 0, &payload)
        }
        Frame::Ping { id } => control(PING, 0, &id.to_be_bytes()),
        Frame::GoAway {
            last_good_stream_id,
            status,
        } => control(
            GOAWAY,
            0,
            &with_stream_id(*last_good_stream_id, &status.to_be_bytes()),
        ),
        Frame::WindowUpdate { stream_id, delta } => control(
            WINDOW_UPDATE,
            0,
            &with_stream_id(*stream_id, &(delta & 0x7fff_ffff).to_be_bytes()),
        ),
        Frame::Ignored { kind } => control(*kind, 0, &[]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn codecs() -> (Compressor, Decompressor) {
        (Compressor::new().unwrap(), Decompressor::new())
    }

    /// Frames written by hand from the spec's layouts.
    #[test]
    fn hand_made_frames_decode() {
        let (_, mut inflate) = codecs();
        // DATA, stream 5, FIN, 3 bytes.
        let data = [0, 0, 0, 5, 0x01, 0, 0, 3, b'a', b'b', b'c'];
        let (frame, used) = decode(&data, &mut inflate).unwrap().unwrap();
        assert_eq!(used, 11);
        assert_eq!(
            frame,
            Frame::Data {
                stream_id: 5,
                flags: FLAG_FIN,
                data: Bytes::from_static(b"abc")
            }
        );
        // PING id 7.
        let ping = [0x80, 3, 0, 6, 0, 0, 0, 4, 0, 0, 0, 7];
        assert_eq!(
            decode(&ping, &mut inflate).unwrap().unwrap().0,
            Frame::Ping { id: 7 }
        );
        // RST_STREAM stream 3, status CANCEL (5).
        let rst = [0x80, 3, 0, 3, 0, 0, 0, 8, 0, 0, 0, 3, 0, 0, 0, 5];
        assert_eq!(
            decode(&rst, &mut inflate).unwrap().unwrap().0,
            Frame::RstStream {
                stream_id: 3,
                status: 5
            }
        );
        // SETTINGS with INITIAL_WINDOW_SIZE (7) = 65536, flags 0.
        let settings = [
            0x80, 3, 0, 4, 0, 0, 0, 12, 0, 0, 0, 1, 0, 0, 0, 7, 0, 1, 0, 0,
        ];
        assert_eq!(
            decode(&settings, &mut inflate).unwrap().unwrap().0,
            Frame::Settings {
                entries: vec![(0, 7, 65536)]
            }
        );
        // WINDOW_UPDATE stream 0 (the session, SPDY/3.1), delta 1024.
        let window = [0x80, 3, 0, 9, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 4, 0];
        assert_eq!(
            decode(&window, &mut inflate).unwrap().unwrap().0,
            Frame::WindowUpdate {
                stream_id: 0,
                delta: 1024
            }
        );
        // GOAWAY last good stream 9, status OK.
        let goaway = [0x80, 3, 0, 7, 0, 0, 0, 8, 0, 0, 0, 9, 0, 0, 0, 0];
        assert_eq!(
            decode(&goaway, &mut inflate).unwrap().unwrap().0,
            Frame::GoAway {
                last_good_stream_id: 9,
                status: 0
            }
        );
    }

    #[test]
    fn incomplete_frames_wait_and_bad_versions_fail() {
        let (_, mut inflate) = codecs();
        assert!(
            decode(&[0x80, 3, 0, 6, 0, 0, 0, 4, 0, 0], &mut inflate)
                .unwrap()
                .is_none()
        );
        assert!(decode(&[0, 0, 0], &mut inflate).unwrap().is_none());
        let v2 = [0x80, 2, 0, 6, 0, 0, 0, 4, 0, 0, 0, 7];
        assert!(matches!(
            decode(&v2, &mut inflate),
            Err(FrameError::Version(2))
        ));
    }

    #[test]
    fn control_frames_encode_to_the_spec_layout() {
        let (mut deflate, _) = codecs();
        assert_eq!(
            encode(&Frame::Ping { id: 7 }, &mut deflate).unwrap(),
            [0x80, 3, 0, 6, 0, 0, 0, 4, 0, 0, 0, 7]
        );
        assert_eq!(
            encode(
                &Frame::Data {
                    stream_id: 5,
                    flags: FLAG_FIN,
                    data: Bytes::from_static(b"abc")
                },
                &mut deflate
            )
            .unwrap(),
            [0, 0, 0, 5, 1, 0, 0, 3, b'a', b'b', b'c']
        );
        assert_eq!(
            encode(
                &Frame::RstStream {
                    stream_id: 3,
                    status: REFUSED_STREAM
                },
                &mut deflate
            )
            .unwrap(),
            [0x80, 3, 0, 3, 0, 0, 0, 8, 0, 0, 0, 3, 0, 0, 0, 3]
        );
    }

    #[test]
    fn frames_with_header_blocks_round_trip() {
        let (mut deflate, mut inflate) = codecs();
        let frames = [
            Frame::SynStream {
                stream_id: 1,
                associated_to: 0,
                priority: 0,
                flags: 0,
                headers: vec![("streamtype".into(), "error".into())],
            },
            Frame::SynStream {
                stream_id: 3,
                associated_to: 0,
                priority: 2,
                flags: FLAG_FIN,
                headers: vec![
                    ("streamtype".into(), "data".into()),
                    ("port".into(), "8080".into()),
                    ("requestid".into(), "0".into()),
                ],
            },
            Frame::SynReply {
                stream_id: 3,
                flags: 0,
                headers: Vec::new(),
            },
            Frame::Headers {
                stream_id: 3,
                flags: FLAG_FIN,
                headers: vec![("x".into(), "y".into())],
            },
        ];
        // One compression context per direction, kept across frames, as the spec requires.
        let mut wire = Vec::new();
        for frame in &frames {
            wire.extend(encode(frame, &mut deflate).unwrap());
        }
        let mut at = 0;
        for frame in &frames {
            let (decoded, used) = decode(&wire[at..], &mut inflate).unwrap().unwrap();
            assert_eq!(&decoded, frame);
            at += used;
        }
        assert_eq!(at, wire.len());
    }
}
