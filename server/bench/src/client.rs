//! A minimal HTTPS client with a fixed number of connections we own.
//!
//! A general client (hyper-util's pool, reqwest) decides on its own how many connections to open
//! and, for HTTP/2, shares one per host; a benchmark has to state that number, so this client opens
//! exactly `--concurrency` connections and spreads requests over them: HTTP/2 connections are shared
//! round-robin (many streams each), HTTP/1.1 connections are checked out one request at a time (a
//! request waits for a free connection, and that wait counts as latency). A connection that breaks
//! is reopened on next use. Watches get a connection of their own, so a long stream never holds a
//! pooled HTTP/1.1 connection, or (`stream_pooled`, HTTP/2) share the pool as informers do.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::ClientConfig;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::net::TcpStream;
use tokio::sync::{Mutex, mpsc};
use tokio_rustls::TlsConnector;

use crate::kubeconfig::Target;

/// Why a request (or setting up the client) failed below the HTTP status level.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("TLS setup: {0}")]
    Tls(#[from] rustls::Error),
    #[error("PEM: {0}")]
    Pem(#[from] rustls_pki_types::pem::Error),
    #[error("the server name {0:?} is not a valid TLS name")]
    ServerName(String),
    #[error("connect: {0}")]
    Connect(#[from] std::io::Error),
    #[error("http: {0}")]
    Http(#[from] hyper::Error),
    #[error("request: {0}")]
    Request(#[from] http::Error),
    #[error("the client is closed")]
    Closed,
}

impl ClientError {
    /// A short label for error tables: `connect`, `http`, ...
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Tls(_) | Self::Pem(_) | Self::ServerName(_) => "tls",
            Self::Connect(_) => "connect",
            Self::Http(_) => "http",
            Self::Request(_) => "request",
            Self::Closed => "closed",
        }
    }
}

/// Which HTTP version the connections speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    Http1,
    Http2,
}

enum Sender {
    H1(http1::SendRequest<Full<Bytes>>),
    H2(http2::SendRequest<Full<Bytes>>),
}

impl Sender {
    async fn send(
        &mut self,
        request: Request<Full<Bytes>>,
    ) -> Result<Response<Incoming>, ClientError> {
        Ok(match self {
            Self::H1(s) => {
                s.ready().await?;
                s.send_request(request).await?
            }
            Self::H2(s) => {
                s.ready().await?;
                s.send_request(request).await?
            }
        })
    }

    fn is_closed(&self) -> bool {
        match self {
            Self::H1(s) => s.is_closed(),
            Self::H2(s) => s.is_closed(),
        }
    }
}

/// The connections to one [`Target`].
pub struct Client {
    target: Target,
    protocol: Protocol,
    connector: TlsConnector,
    server_name: ServerName<'static>,
    slots: Vec<Mutex<Option<Sender>>>,
    next: AtomicUsize,
    /// HTTP/1.1 only: indexes of idle slots.
    free: Option<(mpsc::Sender<usize>, Mutex<mpsc::Receiver<usize>>)>,
}

/// How request bodies are encoded and which response encoding is asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Media {
    Json,
    /// Kubernetes protobuf, as client-go's typed clients speak it (JSON accepted as fallback).
    Protobuf,
}

impl Media {
    fn accept(self) -> &'static str {
        match self {
            Media::Json => "application/json",
            Media::Protobuf => "application/vnd.kubernetes.protobuf, application/json",
        }
    }

    fn content_type(self) -> &'static str {
        match self {
            Media::Json => "application/json",
            Media::Protobuf => kcp_apimachinery::protobuf::CONTENT_TYPE,
        }
    }
}

/// A fully read response.
pub struct Reply {
    pub status: StatusCode,
    pub body: Bytes,
}

impl Client {
    /// Prepares `connections` connections (opened lazily, on first use).
    pub fn new(
        target: Target,
        protocol: Protocol,
        connections: usize,
    ) -> Result<Self, ClientError> {
        let connections = connections.max(1);
        let connector = TlsConnector::from(Arc::new(tls_config(&target, protocol)?));
        let server_name = ServerName::try_from(target.host.clone())
            .map_err(|_| ClientError::ServerName(target.host.clone()))?;
        let free = (protocol == Protocol::Http1).then(|| {
            let (tx, rx) = mpsc::channel(connections);
            for i in 0..connections {
                // Capacity is `connections`, so this cannot fail.
                let _ = tx.try_send(i);
            }
            (tx, Mutex::new(rx))
        });
        Ok(Self {
            target,
            protocol,
            connector,
            server_name,
            slots: (0..connections).map(|_| Mutex::new(None)).collect(),
            next: AtomicUsize::new(0),
            free,
        })
    }

    /// The server this client talks to.
    pub fn target(&self) -> &Target {
        &self.target
    }

    /// Opens every connection now, so the first requests of a phase do not pay for handshakes.
    pub async fn warm_up(&self) -> Result<(), ClientError> {
        for slot in &self.slots {
            let mut slot = slot.lock().await;
            if slot.is_none() {
                *slot = Some(self.connect().await?);
            }
        }
        Ok(())
    }

    /// `path` is below the kubeconfig's server URL (e.g. `/api/v1/namespaces`); JSON both ways.
    pub async fn request(
        &self,
        method: Method,
        path: &str,
        body: Option<Bytes>,
    ) -> Result<Reply, ClientError> {
        self.request_as(Media::Json, method, path, body).await
    }

    /// A request whose body is in `media` and which asks for `media` first.
    pub async fn request_as(
        &self,
        media: Media,
        method: Method,
        path: &str,
        body: Option<Bytes>,
    ) -> Result<Reply, ClientError> {
        let request = self.build(media, method, path, body)?;
        let response = match &self.free {
            None => self.next_h2().await?.send(request).await?,
            Some((tx, rx)) => {
                let i = rx.lock().await.recv().await.ok_or(ClientError::Closed)?;
                let result = async {
                    let mut slot = self.slots[i].lock().await;
                    let response = self
                        .ensure_connected(&mut slot)
                        .await?
                        .send(request)
                        .await?;
                    read(response).await
                }
                .await;
                // The slot goes back whether or not the request worked; a broken
                // connection is reopened by the next user.
                let _ = tx.send(i).await;
                return result;
            }
        };
        read(response).await
    }

    /// Starts a request on a connection of its own and returns as soon as the headers arrive.
    pub async fn stream(&self, path: &str) -> Result<Response<Incoming>, ClientError> {
        let request = self.build(Media::Json, Method::GET, path, None)?;
        self.connect().await?.send(request).await
    }

    /// Starts a request as one more HTTP/2 stream on the next pooled connection (round-robin),
    /// returning as soon as the headers arrive; with HTTP/1.1, on a connection of its own.
    ///
    /// The server limits concurrent streams per connection (kcp: 200); a stream beyond that waits
    /// for a free one, so long-running streams must be spread over enough connections.
    pub async fn stream_pooled(&self, path: &str) -> Result<Response<Incoming>, ClientError> {
        if self.free.is_some() {
            return self.stream(path).await;
        }
        let request = self.build(Media::Json, Method::GET, path, None)?;
        self.next_h2().await?.send(request).await
    }

    /// A handle on the next HTTP/2 connection of the pool (connecting it if needed).
    async fn next_h2(&self) -> Result<Sender, ClientError> {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.slots.len();
        let mut slot = self.slots[i].lock().await;
        match self.ensure_connected(&mut slot).await? {
            Sender::H2(s) => Ok(Sender::H2(s.clone())),
            Sender::H1(_) => Err(ClientError::Closed),
        }
    }

    fn build(
        &self,
        media: Media,
        method: Method,
        path: &str,
        body: Option<Bytes>,
    ) -> Result<Request<Full<Bytes>>, ClientError> {
        let full_path = format!("{}{path}", self.target.path_prefix);
        let host = format!("{}:{}", self.target.host, self.target.addr.port());
        // HTTP/2 needs :scheme and :authority (an absolute URI); HTTP/1.1 the origin form + Host.
        let builder = match self.protocol {
            Protocol::Http2 => Request::builder().uri(format!("https://{host}{full_path}")),
            Protocol::Http1 => Request::builder().uri(full_path).header(header::HOST, host),
        };
        let builder = builder
            .method(method)
            .header(header::ACCEPT, media.accept())
            .header(header::USER_AGENT, "kcp-bench");
        Ok(match body {
            Some(body) => builder
                .header(header::CONTENT_TYPE, media.content_type())
                .body(Full::new(body))?,
            None => builder.body(Full::new(Bytes::new()))?,
        })
    }

    async fn ensure_connected<'a>(
        &self,
        slot: &'a mut Option<Sender>,
    ) -> Result<&'a mut Sender, ClientError> {
        if slot.as_ref().is_none_or(Sender::is_closed) {
            *slot = Some(self.connect().await?);
        }
        slot.as_mut().ok_or(ClientError::Closed)
    }

    async fn connect(&self) -> Result<Sender, ClientError> {
        let tcp = TcpStream::connect(self.target.addr).await?;
        tcp.set_nodelay(true)?;
        let tls = self
            .connector
            .connect(self.server_name.clone(), tcp)
            .await?;
        let io = TokioIo::new(tls);
        Ok(match self.protocol {
            Protocol::Http2 => {
                let (sender, connection) = http2::Builder::new(TokioExecutor::new())
                    .handshake(io)
                    .await?;
                tokio::spawn(connection);
                Sender::H2(sender)
            }
            Protocol::Http1 => {
                let (sender, connection) = http1::handshake(io).await?;
                tokio::spawn(connection);
                Sender::H1(sender)
            }
        })
    }
}

async fn read(response: Response<Incoming>) -> Result<Reply, ClientError> {
    let status = response.status();
    let body = response.into_body().collect().await?.to_bytes();
    Ok(Reply { status, body })
}

fn tls_config(target: &Target, protocol: Protocol) -> Result<ClientConfig, ClientError> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&target.ca_pem) {
        roots.add(cert?)?;
    }
    let builder =
        ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots);
    let mut config = match &target.client_pem {
        Some((cert, key)) => {
            let chain = CertificateDer::pem_slice_iter(cert).collect::<Result<Vec<_>, _>>()?;
            builder.with_client_auth_cert(chain, PrivateKeyDer::from_pem_slice(key)?)?
        }
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = vec![match protocol {
        Protocol::Http2 => b"h2".to_vec(),
        Protocol::Http1 => b"http/1.1".to_vec(),
    }];
    Ok(config)
}
