//! The cache server on a port of its own (`kcp cache-server`): kcp-apiserver's TLS listener, and
//! in front of [`CacheService`] what a shard's pipeline would do for it: unauthenticated health
//! checks (`/healthz`, `/livez`, `/readyz`, as upstream's cache server lets through), client
//! certificate authentication with kcp-authn (no certificate, or one the client CA did not sign:
//! 401), the body size limit, and an access log line per request.

use std::sync::Arc;
use std::time::Instant;

use http::{Method, Request, Response};
use hyper::body::Incoming;
use kcp_apimachinery::ApiError;
use kcp_apiserver::listener::Handler;
use kcp_apiserver::response::{self, Body};
use kcp_apiserver::services::ServiceRequest;
use kcp_authn::{Authenticators, CertificateAuthenticator, X509Error};
use rustls_pki_types::CertificateDer;
use tokio_util::sync::CancellationToken;

use crate::CacheService;

/// Paths anybody may GET.
const HEALTH_PATHS: [&str; 3] = ["/healthz", "/livez", "/readyz"];

/// The standalone cache server's request handler.
pub struct StandaloneCache {
    service: CacheService,
    authenticators: Authenticators,
    shutdown: CancellationToken,
}

impl StandaloneCache {
    /// Serves `service` to holders of client certificates `client_ca_pem` signed; watches end
    /// when `shutdown` is cancelled.
    pub fn new(
        service: CacheService,
        client_ca_pem: &str,
        shutdown: CancellationToken,
    ) -> Result<StandaloneCache, X509Error> {
        Ok(StandaloneCache {
            service,
            authenticators: Authenticators {
                x509: Some(CertificateAuthenticator::from_pem(client_ca_pem)?),
                ..Authenticators::default()
            },
            shutdown,
        })
    }

    async fn route(
        &self,
        peer_certificates: &[CertificateDer<'static>],
        request: Request<Incoming>,
        user_name: &mut String,
    ) -> Result<Response<Body>, ApiError> {
        let (mut parts, body) = request.into_parts();
        let path = kcp_apiserver::percent_decode(parts.uri.path()).ok_or_else(|| {
            ApiError::bad_request("the request path is not valid percent-encoded UTF-8")
        })?;
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
        let body = kcp_apiserver::read_body(&parts.headers, body).await?;
        Ok(self
            .service
            .answer(ServiceRequest {
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

impl Handler for StandaloneCache {
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
        kcp_apiserver::access_log(&method, &uri, &user_name, &response, started);
        response
    }
}
