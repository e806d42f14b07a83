//! kubelet's port forwarding (`portforward.k8s.io` over SPDY/3.1): for every connection the
//! client forwards it opens two streams with the same `requestID` and `port` headers, an `error`
//! stream and a `data` stream. Once both are there the agent connects to `127.0.0.1:<port>`
//! inside the pod's network namespace (entered by a short-lived thread of its own, so no thread
//! of the runtime changes namespace) and copies bytes both ways; a connection that fails is
//! reported on the error stream in kubelet's words and both streams are finished.

use std::collections::HashMap;
use std::os::fd::AsRawFd as _;
use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tokio::sync::oneshot;

use crate::spdy::session::{self, Session, Stream};

/// The subprotocol of port forwarding over SPDY.
pub const PROTOCOL: &str = "portforward.k8s.io";

/// How long connecting inside the pod may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The two streams of one forwarded connection.
#[derive(Default)]
struct Pair {
    error: Option<Stream>,
    data: Option<Stream>,
}

/// Connects to `127.0.0.1:port` in the network namespace of process `pid`.
pub async fn connect_in_pod(pid: u32, port: u16) -> std::io::Result<TcpStream> {
    let (tx, rx) = oneshot::channel();
    std::thread::spawn(move || {
        let connected = (|| {
            let namespace = std::fs::File::open(format!("/proc/{pid}/ns/net"))?;
            // SAFETY: setns on a descriptor we own; it changes this (short-lived) thread only.
            if unsafe { libc::setns(namespace.as_raw_fd(), libc::CLONE_NEWNET) } == -1 {
                return Err(std::io::Error::last_os_error());
            }
            let address = std::net::SocketAddr::from(([127, 0, 0, 1], port));
            let stream = std::net::TcpStream::connect_timeout(&address, CONNECT_TIMEOUT)?;
            stream.set_nonblocking(true)?;
            Ok(stream)
        })();
        let _ = tx.send(connected);
    });
    let stream = rx
        .await
        .map_err(|_| std::io::Error::other("the connecting thread ended"))??;
    TcpStream::from_std(stream)
}

/// Serves port forwarding on a connection switched to SPDY/3.1, for the pod whose container
/// process is `pid`, until the client closes it.
pub async fn serve<T>(io: T, pod: String, pid: u32)
where
    T: AsyncRead + AsyncWrite + Send + 'static,
{
    let (session, mut streams) = session::serve(io);
    let mut pairs: HashMap<String, Pair> = HashMap::new();
    while let Some(stream) = streams.recv().await {
        let request = stream.header("requestid").unwrap_or("0").to_owned();
        let pair = pairs.entry(request.clone()).or_default();
        match stream.header("streamtype") {
            Some("error") => pair.error = Some(stream),
            Some("data") => pair.data = Some(stream),
            _ => {
                session
                    .reset(stream.id, crate::spdy::frame::REFUSED_STREAM)
                    .await;
                continue;
            }
        }
        if pair.error.is_some()
            && pair.data.is_some()
            && let Some(Pair {
                error: Some(error),
                data: Some(data),
            }) = pairs.remove(&request)
        {
            tokio::spawn(forward(session.clone(), pod.clone(), pid, error, data));
        }
    }
}

async fn forward(session: Session, pod: String, pid: u32, error: Stream, data: Stream) {
    let port = data.header("port").and_then(|p| p.parse::<u16>().ok());
    let connected = match port {
        Some(port) => connect_in_pod(pid, port).await.map_err(|e| {
            format!(
                "error forwarding port {port} to pod {pod}: failed to connect to localhost:{port} inside the pod's network namespace: {e}"
            )
        }),
        None => Err(format!(
            "error forwarding port to pod {pod}: invalid port {:?}",
            data.header("port").unwrap_or_default()
        )),
    };
    let socket = match connected {
        Ok(socket) => socket,
        Err(message) => {
            tracing::debug!(%message, "port-forward");
            session.send(error.id, Bytes::from(message), true).await;
            session.finish(data.id).await;
            return;
        }
    };
    copy(&session, socket, data).await;
    session.finish(error.id).await;
}

/// Copies between the socket and the data stream until both directions ended.
async fn copy(session: &Session, socket: TcpStream, mut data: Stream) {
    let (mut read, mut write) = socket.into_split();
    let id = data.id;
    let upstream = async move {
        while let Some(chunk) = data.data.recv().await {
            if write.write_all(&chunk).await.is_err() {
                break;
            }
        }
        let _ = write.shutdown().await;
    };
    let downstream = async {
        let mut buffer = vec![0u8; 32 * 1024];
        loop {
            match read.read(&mut buffer).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if !session
                        .send(id, Bytes::copy_from_slice(&buffer[..n]), false)
                        .await
                    {
                        break;
                    }
                }
            }
        }
        session.finish(id).await;
    };
    tokio::join!(upstream, downstream);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn connecting_in_our_own_namespace_reaches_a_local_listener() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let accept = tokio::spawn(async move { listener.accept().await.map(|_| ()) });
        let stream = connect_in_pod(std::process::id(), port).await.unwrap();
        assert_eq!(stream.peer_addr().unwrap().port(), port);
        accept.await.unwrap().unwrap();
    }

    #[tokio::test]
    async fn connecting_to_a_closed_port_fails() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        assert!(connect_in_pod(std::process::id(), port).await.is_err());
    }
}
