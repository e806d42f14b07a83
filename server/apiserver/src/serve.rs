//! The API server's lifecycle: bind the secure port ([`crate::listener`]), bootstrap the root
//! logical cluster before the first connection is accepted, run the caches requests read beside
//! the listener, and shut down gracefully. The controllers are started and stopped by the binary
//! beside it.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use kcp_storage::Storage;

use crate::filters::authentication::Authentication;
use crate::listener::TlsListener;
use crate::server::{App, ServerConfig};
use crate::services::Services;
use crate::tls::{self, TlsMaterial};
use kcp_controllers::TenancyIndex;
use tokio_util::sync::CancellationToken;

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
    listener: TlsListener,
}

impl ApiServer {
    /// Binds the secure port and bootstraps the root logical cluster. `services` are served under
    /// `/services/<name>/` (see [`crate::services`]).
    pub async fn bind(
        config: ServerConfig,
        authentication: Authentication,
        storage: Arc<dyn Storage>,
        services: Services,
    ) -> Result<ApiServer, ServeError> {
        let address = config.bind_address;
        let client_ca_pems: Vec<&str> = config
            .client_ca_pem
            .iter()
            .chain(&config.requestheader_ca_pem)
            .map(String::as_str)
            .collect();
        let listener = TlsListener::bind(
            address,
            TlsMaterial {
                serving_cert_chain_pem: &config.serving_cert_chain_pem,
                serving_key_pem: &config.serving_key_pem,
                client_ca_pems: &client_ca_pems,
            },
        )
        .await?;
        let local = listener.local_addr().ok_or_else(|| ServeError::Bind {
            address,
            source: std::io::Error::other("the listener has no local address"),
        })?;
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
                services,
            )
            .map_err(ServeError::Authorization)?,
        );
        kcp_controllers::bootstrap::before_serving(&app.store, &app.tenancy, &app.config.tenancy)
            .await
            .map_err(ServeError::Bootstrap)?;
        app.mark_bootstrapped();
        Ok(ApiServer { app, listener })
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

    /// The server as mounted services call it back (virtual workspaces; see
    /// [`crate::services::Loopback`]). It holds the server weakly: once the server is gone,
    /// dispatched requests answer 503.
    pub fn loopback(&self) -> Arc<dyn crate::services::Loopback> {
        Arc::new(crate::server::AppLoopback(Arc::downgrade(&self.app)))
    }

    /// Cancelled when the server starts shutting down (when it stops accepting connections and
    /// ends watches): what the controllers stop on.
    pub fn stopping(&self) -> CancellationToken {
        self.app.shutdown.clone()
    }

    /// The address actually bound (useful with port 0).
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until `shutdown` completes, then shuts down gracefully. The storage stays open: its
    /// owner closes it once everything else using it (the controllers) has stopped.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> Result<(), ServeError> {
        let ApiServer { app, listener } = self;
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
        let grace = app.config.shutdown_grace;
        let stopping = app.shutdown.clone();
        listener
            .serve(app.clone(), shutdown, &stopping, grace)
            .await;
        for task in caches {
            let _ = task.await;
        }
        Ok(())
    }
}
