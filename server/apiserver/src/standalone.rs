//! A server of mounted services alone, on a port of its own (the standalone cache server,
//! `kcp cache-server`; the standalone virtual workspaces, `kcp virtual-workspaces`): the TLS
//! listener's handler, doing in front of the services what a shard's pipeline would do for them:
//! unauthenticated health checks (`/healthz`, `/livez`, `/readyz`, as upstream's cache server lets
//! through), authentication with the kcp-authn chain it is given (client certificates for the
//! cache server; for the virtual workspaces also front-proxy request headers and tokens reviewed by
//! the shard; no credentials it accepts: 401), the body size limit, the service by the name in
//! `/services/<name>/` (404 for others), and an access log line per request.

use std::sync::Arc;
use std::time::Instant;

use http::{Method, Request, Response};
use hyper::body::Incoming;
use kcp_apimachinery::ApiError;
use kcp_authn::{Authenticators, CertificateAuthenticator, X509Error};
use rustls_pki_types::CertificateDer;
use tokio_util::sync::CancellationToken;

use crate::handlers::resource::no_such_resource;
use crate::handlers::response::{self, Body};
use crate::listener::Handler;
use crate::services::{ServiceRequest, Services};

/// Paths anybody may GET.
const HEALTH_PATHS: [&str; 3] = ["/healthz", "/livez", "/readyz"];

/// The request handler of a server of services alone.
pub struct ServicesServer {
    services: Services,
    authenticators: Authenticators,
    shutdown: CancellationToken,
}

impl ServicesServer {
    /// Serves `services` to the users `authenticators` accept (anonymous requests only if they
    /// allow them); watches end when `shutdown` is cancelled.
    pub fn new(
        services: Services,
        authenticators: Authenticators,
        shutdown: CancellationToken,
    ) -> ServicesServer {
        ServicesServer {
            services,
            authenticators,
            shutdown,
        }
    }

    /// Serves `services` to holders of client certificates `client_ca_pem` signed.
    pub fn with_client_ca(
        services: Services,
        client_ca_pem: &str,
        shutdown: CancellationToken,
    ) -> Result<ServicesServer, X509Error> {
        let authenticators = Authenticators {
            x509: Some(CertificateAuthenticator::from_pem(client_ca_pem)?),
            ..Authenticators::default()
        };
        Ok(ServicesServer::new(services, authenticators, shutdown))
    }

    async fn route(
        &self,
        peer_certificates: &[CertificateDer<'static>],
        request: Request<Incoming>,
        user_name: &mut String,
    ) -> Result<Response<Body>, ApiError> {
        let (mut parts, body) = request.into_parts();
        let path = crate::request::path::decoded(parts.uri.path())?;
        if HEALTH_PATHS.contains(&path.as_str())
            && matches!(parts.method, Method::GET | Method::HEAD)
        {
            return Ok(response::text(200, "ok"));
        }
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
        let user = self
            .authenticators
            .authenticate(peer_certificates, &mut parts.headers, now)
            .await
            .map_err(|error| {
                tracing::debug!(%error, "authentication failed");
                ApiError::unauthorized("Unauthorized")
            })?
            .into_user();
        user_name.clone_from(&user.name);
        let service = self
            .services
            .find(&path)
            .ok_or_else(no_such_resource)?
            .clone();
        let body = crate::read_body(&parts.headers, body).await?;
        Ok(service
            .serve(ServiceRequest {
                user,
                method: parts.method,
                path,
                query: parts.uri.query().map(str::to_owned),
                headers: parts.headers,
                body,
                shutdown: self.shutdown.clone(),
            })
            .await)
    }
}

impl Handler for ServicesServer {
    type Body = Body;

    async fn handle(
        self: Arc<Self>,
        peer_certificates: Arc<Vec<CertificateDer<'static>>>,
        request: Request<Incoming>,
    ) -> Response<Body> {
        let started = Instant::now();
        let (method, uri) = (request.method().clone(), request.uri().clone());
        let mut user_name = String::new();
        let response = match self
            .route(&peer_certificates, request, &mut user_name)
            .await
        {
            Ok(response) => response,
            Err(error) => response::error(&error),
        };
        crate::access_log(&method, &uri, &user_name, &response, started);
        response
    }
}
