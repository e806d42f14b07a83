//! The server side of a SPDY/3.1 connection as kubectl's streams use it: the client opens every
//! stream (SYN_STREAM, answered at once with SYN_REPLY, as kubelet's spdystream server does),
//! each side ends its half with FIN, PINGs are answered. kubectl's spdystream sends no
//! WINDOW_UPDATE it would wait for and ignores the ones it gets, so no flow control is kept.
//!
//! A reader task turns frames into [`Stream`]s (their headers and a channel of their data) and a
//! writer task owns the socket's write half; [`Session`] sends data and closes streams. The
//! connection ends when the client closes it or [`Session::close`] is called.

use std::collections::HashMap;

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};
use tokio::sync::mpsc;

use crate::spdy::frame::{self, FLAG_FIN, Frame};
use crate::spdy::headers::{Compressor, Decompressor, Headers};

/// One stream the client opened.
pub struct Stream {
    pub id: u32,
    pub headers: Headers,
    /// The client's data; ends when the client ends its half (FIN) or resets the stream.
    pub data: mpsc::Receiver<Bytes>,
}

impl Stream {
    /// The value of a header (names are lower case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Sends on the connection (cheap to clone).
#[derive(Clone)]
pub struct Session {
    frames: mpsc::Sender<Outgoing>,
}

enum Outgoing {
    Frame(Frame),
    /// Ends the connection after the frames before it.
    Close,
}

impl Session {
    /// Sends data on a stream (`fin`: the last of this side).
    pub async fn send(&self, stream_id: u32, data: Bytes, fin: bool) -> bool {
        let flags = if fin { FLAG_FIN } else { 0 };
        let frame = Frame::Data {
            stream_id,
            flags,
            data,
        };
        self.frames.send(Outgoing::Frame(frame)).await.is_ok()
    }

    /// Ends this side of a stream.
    pub async fn finish(&self, stream_id: u32) {
        self.send(stream_id, Bytes::new(), true).await;
    }

    /// Refuses a stream the client opened.
    pub async fn reset(&self, stream_id: u32, status: u32) {
        let frame = Frame::RstStream { stream_id, status };
        let _ = self.frames.send(Outgoing::Frame(frame)).await;
    }

    /// Sends GOAWAY and closes the connection once everything queued is written.
    pub async fn close(&self) {
        let goaway = Frame::GoAway {
            last_good_stream_id: 0,
            status: 0,
        };
        let _ = self.frames.send(Outgoing::Frame(goaway)).await;
        let _ = self.frames.send(Outgoing::Close).await;
    }
}

/// Starts serving a connection the client switched to SPDY/3.1: the session and the streams
/// the client opens, as it opens them.
pub fn serve<T>(io: T) -> (Session, mpsc::Receiver<Stream>)
where
    T: AsyncRead + AsyncWrite + Send + 'static,
{
    let (read, write) = tokio::io::split(io);
    let (frames_tx, frames_rx) = mpsc::channel(64);
    let (streams_tx, streams_rx) = mpsc::channel(16);
    let session = Session { frames: frames_tx };
    tokio::spawn(write_frames(write, frames_rx));
    tokio::spawn(read_frames(read, session.clone(), streams_tx));
    (session, streams_rx)
}

async fn write_frames(mut write: impl AsyncWrite + Unpin, mut frames: mpsc::Receiver<Outgoing>) {
    let mut compressor = match Compressor::new() {
        Ok(compressor) => compressor,
        Err(error) => {
            tracing::warn!(%error, "SPDY header compression");
            return;
        }
    };
    while let Some(outgoing) = frames.recv().await {
        let Outgoing::Frame(frame) = outgoing else {
            break;
        };
        let bytes = match frame::encode(&frame, &mut compressor) {
            Ok(bytes) => bytes,
            Err(error) => {
                tracing::warn!(%error, "encoding a SPDY frame");
                break;
            }
        };
        if write.write_all(&bytes).await.is_err() {
            break;
        }
    }
    let _ = write.shutdown().await;
}

async fn read_frames(
    mut read: impl AsyncRead + Unpin,
    session: Session,
    streams: mpsc::Sender<Stream>,
) {
    let mut decompressor = Decompressor::new();
    let mut open: HashMap<u32, mpsc::Sender<Bytes>> = HashMap::new();
    let mut buffer: Vec<u8> = Vec::with_capacity(16 * 1024);
    let mut chunk = vec![0u8; 16 * 1024];
    loop {
        loop {
            let decoded = match frame::decode(&buffer, &mut decompressor) {
                Ok(decoded) => decoded,
                Err(error) => {
                    tracing::debug!(%error, "bad SPDY frame; closing the connection");
                    session.close().await;
                    return;
                }
            };
            let Some((frame, used)) = decoded else {
                break;
            };
            buffer.drain(..used);
            if !handle(frame, &session, &streams, &mut open).await {
                return;
            }
        }
        match read.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(read) => buffer.extend_from_slice(&chunk[..read]),
        }
        if buffer.len() > frame::MAX_LENGTH + 8 {
            session.close().await;
            return;
        }
    }
}

/// Acts on one frame from the client; false when the connection is over.
async fn handle(
    frame: Frame,
    session: &Session,
    streams: &mpsc::Sender<Stream>,
    open: &mut HashMap<u32, mpsc::Sender<Bytes>>,
) -> bool {
    match frame {
        Frame::SynStream {
            stream_id,
            flags,
            headers,
            ..
        } => {
            let reply = Frame::SynReply {
                stream_id,
                flags: 0,
                headers: Vec::new(),
            };
            if session.frames.send(Outgoing::Frame(reply)).await.is_err() {
                return false;
            }
            let (data_tx, data_rx) = mpsc::channel(64);
            if flags & FLAG_FIN == 0 {
                open.insert(stream_id, data_tx);
            }
            let stream = Stream {
                id: stream_id,
                headers,
                data: data_rx,
            };
            // Nobody listens any more: the exchange is over, but the client may still close.
            let _ = streams.send(stream).await;
        }
        Frame::Data {
            stream_id,
            flags,
            data,
        } => {
            if let Some(sender) = open.get(&stream_id)
                && !data.is_empty()
            {
                let _ = sender.send(data).await;
            }
            if flags & FLAG_FIN != 0 {
                open.remove(&stream_id);
            }
        }
        Frame::RstStream { stream_id, .. } => {
            open.remove(&stream_id);
        }
        Frame::Ping { id } => {
            let pong = Outgoing::Frame(Frame::Ping { id });
            if session.frames.send(pong).await.is_err() {
                return false;
            }
        }
        Frame::GoAway { .. } => return false,
        Frame::SynReply { .. }
        | Frame::Headers { .. }
        | Frame::Settings { .. }
        | Frame::WindowUpdate { .. }
        | Frame::Ignored { .. } => {}
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A client written against the frame codec: opens a stream, sends data with FIN, and reads
    /// what the server answers.
    #[tokio::test]
    async fn streams_open_carry_data_and_close() {
        let (client, server) = tokio::io::duplex(64 * 1024);
        let (session, mut streams) = serve(server);
        let (mut client_read, mut client_write) = tokio::io::split(client);
        let mut deflate = Compressor::new().unwrap();
        let mut inflate = Decompressor::new();
        let open = Frame::SynStream {
            stream_id: 1,
            associated_to: 0,
            priority: 0,
            flags: 0,
            headers: vec![("streamtype".into(), "stdin".into())],
        };
        let data = Frame::Data {
            stream_id: 1,
            flags: FLAG_FIN,
            data: Bytes::from_static(b"hello"),
        };
        for frame in [open, Frame::Ping { id: 9 }, data] {
            client_write
                .write_all(&frame::encode(&frame, &mut deflate).unwrap())
                .await
                .unwrap();
        }
        let mut stream = streams.recv().await.unwrap();
        assert_eq!(stream.header("streamtype"), Some("stdin"));
        assert_eq!(
            stream.data.recv().await.unwrap(),
            Bytes::from_static(b"hello")
        );
        assert!(stream.data.recv().await.is_none(), "FIN ends the stream");
        session.send(1, Bytes::from_static(b"out"), true).await;
        session.close().await;

        let mut wire = Vec::new();
        client_read.read_to_end(&mut wire).await.unwrap();
        let mut frames = Vec::new();
        let mut at = 0;
        while let Some((frame, used)) = frame::decode(&wire[at..], &mut inflate).unwrap() {
            frames.push(frame);
            at += used;
        }
        assert_eq!(
            frames,
            vec![
                Frame::SynReply {
                    stream_id: 1,
                    flags: 0,
                    headers: Vec::new()
                },
                Frame::Ping { id: 9 },
                Frame::Data {
                    stream_id: 1,
                    flags: FLAG_FIN,
                    data: Bytes::from_static(b"out")
                },
                Frame::GoAway {
                    last_good_stream_id: 0,
                    status: 0
                },
            ]
        );
    }
}
