//! The listener: accept TCP, handshake TLS, serve HTTP/1.1 or HTTP/2 on each connection, and shut
//! down gracefully (stop accepting, end watches, let in-flight requests finish, close the store).

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
use crate::{bootstrap, controllers, tenancy, tls};
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
    #[error("closing the store: {0}")]
    Close(kcp_storage::StorageError),
}

/// A bound, bootstrapped API server, ready to [`run`](ApiServer::run).
pub struct ApiServer {
    app: Arc<App>,
    listener: TcpListener,
    acceptor: TlsAcceptor,
    storage: Arc<dyn Storage>,
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
                storage.clone(),
                format!("{host}:{}", local.port()),
            )
            .map_err(ServeError::Authorization)?,
        );
        bootstrap::ensure_root(&app.store)
            .await
            .map_err(ServeError::Bootstrap)?;
        bootstrap::ensure_bootstrap_policy(&app.store)
            .await
            .map_err(ServeError::Bootstrap)?;
        tenancy::bootstrap::ensure_root(&app.store, &app.config.tenancy)
            .await
            .map_err(ServeError::Bootstrap)?;
        let (Some(logical_clusters), Some(workspace_types)) = (
            app.store
                .registry()
                .builtin_type("core.kcp.io", "v1alpha1", "logicalclusters"),
            app.store
                .registry()
                .builtin_type("tenancy.kcp.io", "v1alpha1", "workspacetypes"),
        ) else {
            return Err(ServeError::Bootstrap(
                kcp_apimachinery::ApiError::internal_error("tenancy types are not registered"),
            ));
        };
        app.tenancy
            .load(&app.store, [&logical_clusters, &workspace_types])
            .await
            .map_err(ServeError::Bootstrap)?;
        controllers::crd::serve_existing(&app.store)
            .await
            .map_err(ServeError::Bootstrap)?;
        app.mark_bootstrapped();
        Ok(ApiServer {
            app,
            listener,
            acceptor,
            storage,
        })
    }

    /// The address actually bound (useful with port 0).
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.listener.local_addr().ok()
    }

    /// Serves until `shutdown` completes, then shuts down gracefully.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> Result<(), ServeError> {
        let ApiServer {
            app,
            listener,
            acceptor,
            storage,
        } = self;
        let registry = app.store.registry().clone();
        let (Some(logical_clusters), Some(workspace_types)) = (
            registry.builtin_type("core.kcp.io", "v1alpha1", "logicalclusters"),
            registry.builtin_type("tenancy.kcp.io", "v1alpha1", "workspacetypes"),
        ) else {
            return Err(ServeError::Bootstrap(
                kcp_apimachinery::ApiError::internal_error("tenancy types are not registered"),
            ));
        };
        let external_url = app
            .config
            .external_url
            .clone()
            .unwrap_or_else(|| format!("https://{}", app.server_address));
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
        ];
        let controller_task = {
            let (store, tenancy, root_ca_pem) = (
                app.store.clone(),
                app.tenancy.clone(),
                app.config.root_ca_pem.clone(),
            );
            let run_all = move |stop: CancellationToken| {
                let (store, tenancy, external_url, root_ca_pem) = (
                    store.clone(),
                    tenancy.clone(),
                    external_url.clone(),
                    root_ca_pem.clone(),
                );
                async move {
                    // Each controller is its own task, so that they run in parallel on the
                    // runtime's threads rather than taking turns inside one.
                    let tasks = [
                        tokio::spawn(controllers::namespace::run(store.clone(), stop.clone())),
                        tokio::spawn(controllers::garbage_collector::run(
                            store.clone(),
                            stop.clone(),
                        )),
                        tokio::spawn(controllers::crd::run(store.clone(), stop.clone())),
                        tokio::spawn(controllers::logical_clusters::run(
                            store.clone(),
                            tenancy.clone(),
                            external_url.clone(),
                            stop.clone(),
                        )),
                        tokio::spawn(controllers::workspaces::run(
                            store.clone(),
                            tenancy,
                            external_url,
                            stop.clone(),
                        )),
                        tokio::spawn(controllers::clusterrole_aggregation::run(
                            store.clone(),
                            stop.clone(),
                        )),
                        tokio::spawn(controllers::namespace_defaults::run(
                            store,
                            root_ca_pem,
                            stop,
                        )),
                    ];
                    for task in tasks {
                        let _ = task.await;
                    }
                }
            };
            tokio::spawn(controllers::election::run(
                app.store.clone(),
                app.config.controllers.clone(),
                app.shutdown.clone(),
                run_all,
            ))
        };
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
                let service = service_fn(move |request| {
                    let app = app.clone();
                    let certificates = certificates.clone();
                    async move {
                        Ok::<_, std::convert::Infallible>(app.handle(certificates, request).await)
                    }
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
        for task in caches.into_iter().chain([controller_task]) {
            let _ = task.await;
        }
        storage.close().await.map_err(ServeError::Close)?;
        tracing::info!("shutdown complete");
        Ok(())
    }
}
