//! The listener: accept TCP, handshake TLS, serve HTTP/1.1 or HTTP/2 on each connection, and shut
//! down gracefully (stop accepting, end watches, let in-flight requests finish). Bootstrap runs before the
//! first connection is accepted; the controllers are started and stopped by the binary beside it.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use kcp_storage::Storage;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use crate::filters::authentication::Authentication;
use crate::server::{App, ServerConfig};
use crate::tls;
use kcp_controllers::TenancyIndex;
use rustls_pki_types::CertificateDer;
use tokio_util::sync::CancellationToken;

/// A TLS handshake that takes longer than this is abandoned.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(transparent)]
    Tls(#[from] tls::TlsError),
    #[error("binding {address}: {source}")]
    Bind {
        address: SocketAddr,
        source: std::io::Error,
    },
    #[error("authorization webhook: {0}")]
    Authorization(#[from] crate::filters::authorization::webhook::WebhookError),
    #[error("bootstrapping the root logical cluster and the RBAC policy: {0}")]
    Bootstrap(kcp_apimachinery::ApiError),
}

/// A bound, bootstrapped API server, ready to [`run`](ApiServer::run).
pub struct ApiServer {
    app: Arc<App>,
    listener: TcpListener,
    acceptor: TlsAcceptor,
}

impl ApiServer {
    /// Binds the secure port and bootstraps the root logical cluster.
    pub async fn bind(
        config: ServerConfig,
        authentication: Authentication,
        storage: Arc<dyn Storage>,
    ) -> Result<ApiServer, ServeError> {
        let acceptor = TlsAcceptor::from(tls::server_config(&config)?);
        let address = config.bind_address;
        let listener = TcpListener::bind(address)
            .await
            .map_err(|source| ServeError::Bind { address, source })?;
        let local = listener
            .local_addr()
            .map_err(|source| ServeError::Bind { address, source })?;
        let host = if local.ip().is_unspecified() {
            "127.0.0.1".to_string()
        } else {
            local.ip().to_string()
        };
        let app = Arc::new(
            App::new(
                config,
                authentication,
                storage,
                format!("{host}:{}", local.port()),
            )
            .map_err(ServeError::Authorization)?,
        );
        kcp_controllers::bootstrap::before_serving(&app.store, &app.tenancy, &app.config.tenancy)
            .await
            .map_err(ServeError::Bootstrap)?;
        app.mark_bootstrapped();
        Ok(ApiServer {
            app,
            listener,
            acceptor,
        })
    }

    /// What the shard's controllers work with: this server's store and tenancy index, and the
    /// URL it is reached at.
    pub fn controller_context(&self) -> kcp_controllers::Context {
        let app = &self.app;
        kcp_controllers::Context {
            store: app.store.clone(),
            tenancy: app.tenancy.clone(),
            external_url: app
                .config
                .external_url
                .clone()
                .unwrap_or_else(|| format!("https://{}", app.server_address)),
            root_ca_pem: app.config.root_ca_pem.clone(),
        }
    }

    /// Cancelled when the server starts shutting down (when it stops accepting connections and
    /// ends watches): what the controllers stop on.
    pub fn stopping(&self) -> CancellationToken {
        self.app.shutdown.clone()
    }

    /// The address actually bound (useful with port 0).
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.listener.local_addr().ok()
    }

    /// Serves until `shutdown` completes, then shuts down gracefully. The storage stays open: its
    /// owner closes it once everything else using it (the controllers) has stopped.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> Result<(), ServeError> {
        let ApiServer {
            app,
            listener,
            acceptor,
        } = self;
        let [logical_clusters, workspace_types] =
            TenancyIndex::types(&app.store).map_err(ServeError::Bootstrap)?;
        // The caches requests read: they follow the store on every replica, elected or not.
        let caches = [
            tokio::spawn(app.tenancy.clone().run(
                app.store.clone(),
                logical_clusters,
                workspace_types,
                app.shutdown.clone(),
            )),
            tokio::spawn(
                app.authorizer
                    .policies
                    .clone()
                    .watch_changes(app.shutdown.clone()),
            ),
            tokio::spawn(
                app.admission
                    .configs()
                    .clone()
                    .follow(app.store.clone(), app.shutdown.clone()),
            ),
            tokio::spawn(
                app.admission
                    .object_counts()
                    .clone()
                    .run(app.store.clone(), app.shutdown.clone()),
            ),
        ];
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
            let app = app.clone();
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
                // Verified by the TLS layer against the union of the client and front-proxy CAs;
                // authentication decides per request which CA, and so what, they prove.
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
                    let app = app.clone();
                    let certificates = certificates.clone();
                    Box::pin(async move {
                        Ok::<_, std::convert::Infallible>(app.handle(certificates, request).await)
                    })
                });
                let builder = auto::Builder::new(TokioExecutor::new());
                let connection = builder
                    .serve_connection(TokioIo::new(tls), service)
                    .into_owned();
                if let Err(error) = watcher.watch(connection).await {
                    tracing::debug!(%peer, %error, "connection ended with an error");
                }
            });
        }
        tracing::info!("shutting down: no new connections, ending watches");
        drop(listener);
        app.shutdown.cancel();
        if tokio::time::timeout(app.config.shutdown_grace, graceful.shutdown())
            .await
            .is_err()
        {
            tracing::warn!("in-flight requests did not finish within the grace period");
        }
        for task in caches {
            let _ = task.await;
        }
        Ok(())
    }
}
