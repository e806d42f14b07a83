//! A secure port: accept TCP, handshake TLS, serve HTTP/1.1 or HTTP/2 on each connection with a
//! [`Handler`], and shut down gracefully (stop accepting, tell long requests to end, let in-flight
//! requests finish within a grace period). The API server serves through it, and so do other
//! servers of the binary (the standalone cache server, the front-proxy), so every port of kcp-rs
//! handshakes, picks its protocol and drains the same way, as every upstream server shares
//! k8s.io/apiserver's. Connections may be upgraded (HTTP/1.1 `Upgrade`, as `kubectl exec` asks
//! for): a handler that answers 101 takes the connection over.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{CONNECTION, UPGRADE};
use http::{HeaderMap, HeaderValue, Request, Response};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use rustls_pki_types::CertificateDer;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

use crate::serve::ServeError;
use crate::tls::{self, TlsMaterial};

/// A TLS handshake that takes longer than this is abandoned.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Answers the requests of a secure port. The client's certificate chain is the one the TLS layer
/// received (checked against the client CAs when one was sent); the handler decides what it
/// proves.
pub trait Handler: Send + Sync + 'static {
    /// The response body. The API server's bodies cannot fail ([`crate::response::Body`]); a
    /// proxy's carry the error of the stream they relay, so that a broken backend stream breaks
    /// the client's response instead of ending it as if it were complete.
    type Body: http_body::Body<Data = Bytes, Error: Into<Box<dyn std::error::Error + Send + Sync>>>
        + Send
        + 'static;

    fn handle(
        self: Arc<Self>,
        peer_certificates: Arc<Vec<CertificateDer<'static>>>,
        request: Request<Incoming>,
    ) -> impl Future<Output = Response<Self::Body>> + Send;
}

/// A bound secure port that several threads accept on, each with a runtime of its own
/// ([`SharedPort::try_clone`] and [`SharedPort::into_listener`] per thread): a server that keeps
/// each connection's work on one thread (the front-proxy) trades the multi-threaded scheduler's
/// cross-thread wake-ups for the kernel spreading accepts over the threads.
pub struct SharedPort {
    listener: std::net::TcpListener,
    acceptor: TlsAcceptor,
}

impl SharedPort {
    /// Binds `address` (port 0: any free port) with this certificate and client CAs.
    pub fn bind(address: SocketAddr, material: TlsMaterial<'_>) -> Result<SharedPort, ServeError> {
        let acceptor = TlsAcceptor::from(tls::server_config(material)?);
        let bind_error = |source| ServeError::Bind { address, source };
        let listener = std::net::TcpListener::bind(address).map_err(bind_error)?;
        listener.set_nonblocking(true).map_err(bind_error)?;
        Ok(SharedPort { listener, acceptor })
    }

    /// The address actually bound (useful with port 0).
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.listener.local_addr().ok()
    }

    /// Another handle on the same port, for another thread.
    pub fn try_clone(&self) -> Result<SharedPort, ServeError> {
        Ok(SharedPort {
            listener: self
                .listener
                .try_clone()
                .map_err(|source| bind_error(self.local_addr(), source))?,
            acceptor: self.acceptor.clone(),
        })
    }

    /// This handle as a listener of the calling thread's runtime (call it inside that runtime).
    /// Consumed, so that the port closes when the last thread stops accepting: a port left open
    /// while in-flight requests drain would take connections nobody accepts, and clients would
    /// wait for their timeout instead of being refused and trying another replica.
    pub fn into_listener(self) -> Result<TlsListener, ServeError> {
        let address = self.local_addr();
        let SharedPort { listener, acceptor } = self;
        let listener =
            TcpListener::from_std(listener).map_err(|source| bind_error(address, source))?;
        Ok(TlsListener { listener, acceptor })
    }
}

/// A failure on a bound port (its address when it still has one).
fn bind_error(address: Option<SocketAddr>, source: std::io::Error) -> ServeError {
    ServeError::Bind {
        address: address.unwrap_or(SocketAddr::from(([0, 0, 0, 0], 0))),
        source,
    }
}

/// A bound secure port, ready to [`serve`](TlsListener::serve).
pub struct TlsListener {
    listener: TcpListener,
    acceptor: TlsAcceptor,
}

impl TlsListener {
    /// Binds `address` (port 0: any free port) with this certificate and client CAs.
    pub async fn bind(
        address: SocketAddr,
        material: TlsMaterial<'_>,
    ) -> Result<TlsListener, ServeError> {
        let acceptor = TlsAcceptor::from(tls::server_config(material)?);
        let listener = TcpListener::bind(address)
            .await
            .map_err(|source| ServeError::Bind { address, source })?;
        Ok(TlsListener { listener, acceptor })
    }

    /// The address actually bound (useful with port 0).
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.listener.local_addr().ok()
    }

    /// Serves until `shutdown` completes; then stops accepting, cancels `stopping` (what long
    /// requests such as watches end on) and waits up to `grace` for in-flight requests.
    pub async fn serve<H: Handler>(
        self,
        handler: Arc<H>,
        shutdown: impl Future<Output = ()>,
        stopping: &CancellationToken,
        grace: Duration,
    ) {
        let TlsListener { listener, acceptor } = self;
        let graceful = GracefulShutdown::new();
        tokio::pin!(shutdown);
        loop {
            let (stream, peer) = tokio::select! {
                _ = &mut shutdown => break,
                accepted = listener.accept() => match accepted {
                    Ok(accepted) => accepted,
                    Err(error) => {
                        tracing::warn!(%error, "accepting a connection failed");
                        continue;
                    }
                },
            };
            // Small responses and watch events must leave at once, not wait for Nagle's algorithm
            // to meet the client's delayed ACK (tens of milliseconds).
            if let Err(error) = stream.set_nodelay(true) {
                tracing::debug!(%peer, %error, "setting TCP_NODELAY failed");
            }
            let acceptor = acceptor.clone();
            let handler = handler.clone();
            let watcher = graceful.watcher();
            tokio::spawn(async move {
                let tls =
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                        Ok(Ok(tls)) => tls,
                        Ok(Err(error)) => {
                            tracing::debug!(%peer, %error, "TLS handshake failed");
                            return;
                        }
                        Err(_) => {
                            tracing::debug!(%peer, "TLS handshake timed out");
                            return;
                        }
                    };
                // Verified by the TLS layer against the union of the client CAs; the handler
                // decides per request which CA, and so what, they prove.
                let certificates: Arc<Vec<CertificateDer<'static>>> = Arc::new(
                    tls.get_ref()
                        .1
                        .peer_certificates()
                        .map(|certs| certs.iter().map(|c| c.clone().into_owned()).collect())
                        .unwrap_or_default(),
                );
                // Boxed: hyper keeps each HTTP/2 stream's task as large as the future it first
                // runs, and a watch's task lives as long as the watch; unboxed, every open watch
                // would keep room for the largest handler's state.
                let service = service_fn(move |request| {
                    let handler = handler.clone();
                    let certificates = certificates.clone();
                    Box::pin(async move {
                        Ok::<_, std::convert::Infallible>(
                            handler.handle(certificates, request).await,
                        )
                    })
                });
                let builder = auto::Builder::new(TokioExecutor::new());
                let connection = builder
                    .serve_connection_with_upgrades(TokioIo::new(tls), service)
                    .into_owned();
                if let Err(error) = watcher.watch(connection).await {
                    tracing::debug!(%peer, %error, "connection ended with an error");
                }
            });
        }
        tracing::info!("shutting down: no new connections, ending watches");
        drop(listener);
        stopping.cancel();
        if tokio::time::timeout(grace, graceful.shutdown())
            .await
            .is_err()
        {
            tracing::warn!("in-flight requests did not finish within the grace period");
        }
    }
}

/// The protocol an upgrade request asks for (`Connection: Upgrade` and `Upgrade: <protocol>`).
pub fn upgrade_protocol(headers: &HeaderMap) -> Option<HeaderValue> {
    let asks = headers
        .get_all(CONNECTION)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .any(|token| token.trim().eq_ignore_ascii_case("upgrade"));
    asks.then(|| headers.get(UPGRADE).cloned()).flatten()
}

/// Copies bytes both ways between two upgraded connections (a handler's client and the backend
/// it proxies to) until one side closes: what a proxy does once both agreed to switch protocols.
pub async fn splice(client_side: OnUpgrade, backend_side: OnUpgrade) {
    let (client, backend) = match tokio::try_join!(client_side, backend_side) {
        Ok(both) => both,
        Err(error) => {
            tracing::debug!(%error, "upgrade did not complete");
            return;
        }
    };
    let mut client = TokioIo::new(client);
    let mut backend = TokioIo::new(backend);
    if let Err(error) = tokio::io::copy_bidirectional(&mut client, &mut backend).await {
        tracing::debug!(%error, "upgraded connection ended with an error");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use http_body_util::Full;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::sync::{Notify, mpsc};

    /// Answers nothing until released, and says when a request arrived.
    struct Held {
        arrived: mpsc::UnboundedSender<()>,
        release: Arc<Notify>,
    }

    impl Handler for Held {
        type Body = Full<Bytes>;

        async fn handle(
            self: Arc<Self>,
            _: Arc<Vec<CertificateDer<'static>>>,
            _: Request<Incoming>,
        ) -> Response<Full<Bytes>> {
            let _ = self.arrived.send(());
            self.release.notified().await;
            Response::new(Full::new(Bytes::from_static(b"late")))
        }
    }

    /// The front-proxy's case: two threads accept on one port; after shutdown, while a request
    /// is still draining, new connections are refused at once instead of waiting in a backlog
    /// nobody accepts from.
    #[test]
    fn a_shared_port_refuses_connections_while_requests_drain() {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["localhost".to_owned()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let (cert_pem, key_pem) = (cert.pem(), key.serialize_pem());
        let port = SharedPort::bind(
            SocketAddr::from(([127, 0, 0, 1], 0)),
            TlsMaterial {
                serving_cert_chain_pem: &cert_pem,
                serving_key_pem: &key_pem,
                client_ca_pems: &[],
            },
        )
        .unwrap();
        let address = port.local_addr().unwrap();
        let (arrived, mut arrivals) = mpsc::unbounded_channel();
        let release = Arc::new(Notify::new());
        let handler = Arc::new(Held {
            arrived,
            release: release.clone(),
        });
        let shutdown = CancellationToken::new();
        let threads: Vec<_> = [port.try_clone().unwrap(), port]
            .into_iter()
            .map(|port| {
                let (handler, shutdown) = (handler.clone(), shutdown.clone());
                std::thread::spawn(move || {
                    let runtime = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .unwrap();
                    runtime.block_on(async move {
                        let stopping = CancellationToken::new();
                        port.into_listener()
                            .unwrap()
                            .serve(
                                handler,
                                shutdown.cancelled_owned(),
                                &stopping,
                                Duration::from_secs(120),
                            )
                            .await;
                    });
                })
            })
            .collect();

        let client = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        client.block_on(async {
            let mut roots = rustls::RootCertStore::empty();
            roots.add(cert.der().clone()).unwrap();
            let config = rustls::ClientConfig::builder_with_provider(Arc::new(
                rustls::crypto::ring::default_provider(),
            ))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
            let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
            let tcp = tokio::net::TcpStream::connect(address).await.unwrap();
            let name = rustls_pki_types::ServerName::try_from("localhost").unwrap();
            let mut tls = connector.connect(name, tcp).await.unwrap();
            tls.write_all(b"GET / HTTP/1.1\r\nhost: localhost\r\n\r\n")
                .await
                .unwrap();
            arrivals.recv().await.unwrap();

            shutdown.cancel();
            // The request is in flight, so the servers are in their grace period; the port must
            // close (refuse) rather than accept connections no thread will serve.
            let refused = async {
                loop {
                    match tokio::net::TcpStream::connect(address).await {
                        Err(error) if error.kind() == std::io::ErrorKind::ConnectionRefused => {
                            break;
                        }
                        Err(error) => panic!("unexpected connect error: {error}"),
                        Ok(_) => tokio::time::sleep(Duration::from_millis(20)).await,
                    }
                }
            };
            tokio::time::timeout(Duration::from_secs(60), refused)
                .await
                .expect("the port still accepts connections while a request drains");

            release.notify_one();
            let mut answer = Vec::new();
            let _ = tls.read_to_end(&mut answer).await;
            assert!(
                String::from_utf8_lossy(&answer).contains("late"),
                "the drained request was answered"
            );
        });
        for thread in threads {
            thread.join().unwrap();
        }
    }

    #[test]
    fn upgrade_requests_are_recognised() {
        let mut spdy = HeaderMap::new();
        spdy.insert(CONNECTION, HeaderValue::from_static("Upgrade"));
        spdy.insert(UPGRADE, HeaderValue::from_static("SPDY/3.1"));
        assert_eq!(upgrade_protocol(&spdy).unwrap(), "SPDY/3.1");
        let mut websocket = HeaderMap::new();
        websocket.append(CONNECTION, HeaderValue::from_static("keep-alive"));
        websocket.append(CONNECTION, HeaderValue::from_static("upgrade"));
        websocket.insert(UPGRADE, HeaderValue::from_static("websocket"));
        assert_eq!(upgrade_protocol(&websocket).unwrap(), "websocket");
        let mut upgrade_alone = HeaderMap::new();
        upgrade_alone.insert(UPGRADE, HeaderValue::from_static("websocket"));
        assert!(upgrade_protocol(&upgrade_alone).is_none());
        let mut connection_alone = HeaderMap::new();
        connection_alone.insert(CONNECTION, HeaderValue::from_static("upgrade"));
        assert!(upgrade_protocol(&connection_alone).is_none());
    }
}
