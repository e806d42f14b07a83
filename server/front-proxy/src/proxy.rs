//! The front-proxy's request handler: health and metrics of its own, and for everything else
//! authenticate, replace the identity headers, pick the destination and forward (upstream
//! `pkg/proxy`: `WithOptionalAuthentication`, `WithInClusterServiceAccountRequestRewrite`,
//! `WithClusterResolver`, `WithProxyAuthHeaders` and the reverse proxies, in that order).
//!
//! Authentication is optional as upstream's: a request with no credentials is forwarded with no
//! identity (the shard sees an anonymous request), and when the proxy checks no tokens (no
//! `--token-auth-file`, service-account keys, OIDC or token webhook) a request without a client
//! certificate is forwarded as sent, for the shard to authenticate its token. Credentials the proxy checks
//! and refuses are a 401 `Status`. An authenticated user's groups pass the [`GroupFilter`], and the
//! proxy vouches for the user with the identity headers; the `Authorization` header it consumed
//! is not forwarded.
//!
//! `/metrics` is the proxy's own, for users a SubjectAccessReview in root allows `get /metrics`
//! ([`MetricsAccess`]): 401 without a user, 403 when not allowed.
//!
//! Answers of the proxy itself: `/clusters/<path>` the index does not know (or that names a
//! wildcard, or `~` without a user) is the 403 "workspace access not permitted" a shard gives at
//! its workspace gate, so no answer tells whether the workspace exists (kcp #4012); an `Unavailable` workspace or a shard that is gone is 503;
//! a path no mapping covers is 404; a backend that cannot be reached is 503.
//!
//! Virtual workspaces ([`services`]): a `/services/` path naming a cluster goes to that
//! cluster's shard at its virtual-workspace URL (unknown: the same 403); `/shards/<shard>/services/...`
//! goes to that shard's virtual workspaces, the marker stripped (a shard without a `Shard`
//! object: 503); other `/services/` paths (`clusters/*`) to the mapping's backend.

use std::sync::Arc;
use std::time::Instant;

use http::header::AUTHORIZATION;
use http::{HeaderMap, Method, Request, Response, Uri};
use hyper::body::Incoming;
use kcp_apimachinery::ApiError;
use kcp_apiserver::listener::Handler;
use kcp_apiserver::response;
use kcp_apiserver::{no_such_resource, workspace_access_not_permitted};
use kcp_authn::{
    Authenticated, Authenticators, AuthnError, LookupError, ServiceAccountLookup, UserInfo,
    cluster_url,
};
use rustls_pki_types::CertificateDer;

use crate::backend::{Backend, BackendError};
use crate::forward::{self, ProxyBody, own};
use crate::groups::GroupFilter;
use crate::identity::{self, IdentityHeaders, InvalidHeaderName};
use crate::index::IndexCounts;
use crate::mapping::{Mappings, PathMapping};
use crate::metrics::{self, OPENMETRICS, ProxyMetrics};
use crate::metrics_access::MetricsAccess;
use crate::request_path::{expand_home, in_cluster_rewrite, split_cluster};
use crate::route::{Resolve, Unroutable};
use crate::services;

/// What the proxy is made of.
pub struct ProxyConfig {
    pub mappings: Mappings,
    /// Every authenticator the flags configure, `anonymous` set: no credentials, no identity.
    pub authenticators: Authenticators,
    /// `--service-account-lookup`: whether a service-account token's objects must still exist.
    pub service_account_lookup: Option<ServiceAccountLookup>,
    pub groups: GroupFilter,
    /// The index (`/clusters/` routes and readiness).
    pub resolver: Arc<dyn Resolve>,
    /// The index's size for `/metrics`, when it reports one.
    pub index_counts: Option<Box<dyn Fn() -> IndexCounts + Send + Sync>>,
    /// Who may read `/metrics` (a SubjectAccessReview in root).
    pub metrics_access: MetricsAccess,
}

/// Why the proxy cannot be built from its configuration.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    #[error(transparent)]
    Backend(#[from] BackendError),
    #[error(transparent)]
    HeaderName(#[from] InvalidHeaderName),
}

/// A mapping entry with its identity header names.
struct Destination {
    mapping: PathMapping,
    identity: IdentityHeaders,
}

/// What every worker of the proxy shares: configuration, the index, metrics.
struct Shared {
    mappings: Mappings,
    /// Parallel to `mappings.entries()`.
    destinations: Vec<Destination>,
    /// Every identity header name any backend trusts: stripped from every request.
    identity_names: Vec<IdentityHeaders>,
    authenticators: Authenticators,
    service_account_lookup: Option<ServiceAccountLookup>,
    /// Whether the proxy itself checks bearer tokens.
    checks_tokens: bool,
    groups: GroupFilter,
    resolver: Arc<dyn Resolve>,
    metrics: ProxyMetrics,
    index_counts: Option<Box<dyn Fn() -> IndexCounts + Send + Sync>>,
    metrics_access: MetricsAccess,
}

/// The front-proxy: a [`Handler`] for a secure port. One per serving thread ([`FrontProxy::worker`]),
/// so that a request and the backend connection it travels on are driven by the same thread.
pub struct FrontProxy {
    shared: Arc<Shared>,
    /// This worker's connections, parallel to `shared.destinations`.
    backends: Vec<Backend>,
}

/// Who the proxy vouches for, if anybody.
type Identity = Option<UserInfo>;

/// Why the proxy refuses a client's credentials (401).
#[derive(Debug, thiserror::Error)]
enum Refused {
    #[error(transparent)]
    Authentication(#[from] AuthnError),
    #[error("service account token: {0}")]
    ServiceAccountLookup(#[from] LookupError),
}

impl FrontProxy {
    pub fn new(config: ProxyConfig) -> Result<FrontProxy, ProxyError> {
        let destinations = config
            .mappings
            .entries()
            .iter()
            .map(|mapping| {
                Ok(Destination {
                    mapping: mapping.clone(),
                    identity: IdentityHeaders::of(mapping)?,
                })
            })
            .collect::<Result<Vec<_>, ProxyError>>()?;
        let authenticators = config.authenticators;
        let checks_tokens = authenticators.token_file.is_some()
            || authenticators.service_accounts.is_some()
            || authenticators.oidc.is_some()
            || authenticators.token_review.is_some();
        let shared = Arc::new(Shared {
            identity_names: identity::all_names(config.mappings.entries())?,
            mappings: config.mappings,
            destinations,
            authenticators,
            service_account_lookup: config.service_account_lookup,
            checks_tokens,
            groups: config.groups,
            resolver: config.resolver,
            metrics: ProxyMetrics::default(),
            index_counts: config.index_counts,
            metrics_access: config.metrics_access,
        });
        Self::with_connections(shared)
    }

    /// Another worker: the same configuration, index and metrics, connections of its own.
    pub fn worker(&self) -> Result<FrontProxy, ProxyError> {
        Self::with_connections(self.shared.clone())
    }

    fn with_connections(shared: Arc<Shared>) -> Result<FrontProxy, ProxyError> {
        let backends = shared
            .destinations
            .iter()
            .map(|destination| Backend::new(&destination.mapping))
            .collect::<Result<Vec<_>, BackendError>>()?;
        Ok(FrontProxy { shared, backends })
    }

    /// The answer and the name of the user it was given to (for the access log).
    async fn answer(
        &self,
        certificates: &[CertificateDer<'static>],
        mut request: Request<Incoming>,
    ) -> (Response<ProxyBody>, String) {
        match request.uri().path() {
            "/livez" | "/healthz" => return (own(response::text(200, "ok")), String::new()),
            "/readyz" => return (self.readiness(), String::new()),
            _ => {}
        }
        let path = in_cluster_rewrite(request.uri().path(), request.headers());
        let identity = match self.authenticate(certificates, request.headers_mut()).await {
            Ok(identity) => identity,
            Err(error) => {
                tracing::debug!(%error, "authentication failed");
                return (
                    status(&ApiError::unauthorized("Unauthorized")),
                    String::new(),
                );
            }
        };
        let response = if request.uri().path() == "/metrics" {
            self.metrics_answer(identity.as_ref()).await
        } else {
            let path = path.unwrap_or_else(|| request.uri().path().to_owned());
            match self.target(&path, request.method(), request.uri(), identity.as_ref()) {
                Ok((destination, backend, target)) => {
                    self.send(destination, backend, request, target, identity.as_ref())
                        .await
                }
                Err(error) => status(&error),
            }
        };
        (response, identity.map(|user| user.name).unwrap_or_default())
    }

    fn readiness(&self) -> Response<ProxyBody> {
        if self.shared.resolver.is_ready() {
            own(response::text(200, "ok"))
        } else {
            own(response::text(
                500,
                "[-]index: not every shard has been listed yet\nreadyz check failed",
            ))
        }
    }

    /// `/metrics`, for users a SubjectAccessReview in root allows `get /metrics`.
    async fn metrics_answer(&self, identity: Option<&UserInfo>) -> Response<ProxyBody> {
        let Some(user) = identity else {
            return status(&ApiError::unauthorized("Unauthorized"));
        };
        let allowed = self
            .shared
            .metrics_access
            .allowed(user)
            .await
            .unwrap_or_else(|error| {
                tracing::warn!(%error, "refusing /metrics");
                false
            });
        if !allowed {
            let reason = format!("User {:?} cannot get path \"/metrics\"", user.name);
            return status(&ApiError::forbidden("", "", "", &reason));
        }
        let size = self.shared.index_counts.as_ref().map(|counts| counts());
        match self.shared.metrics.encode(size) {
            Ok(text) => own(response::bytes(200, OPENMETRICS, text)),
            Err(error) => status(&ApiError::internal_error(&error.to_string())),
        }
    }

    /// The authenticated user with its groups filtered, `None` to forward without identity.
    async fn authenticate(
        &self,
        certificates: &[CertificateDer<'static>],
        headers: &mut HeaderMap,
    ) -> Result<Identity, Refused> {
        if certificates.is_empty() && !self.shared.checks_tokens {
            return Ok(None);
        }
        let now = jiff::Timestamp::now().as_second();
        let authenticated = self
            .shared
            .authenticators
            .authenticate(certificates, headers, now)
            .await?;
        let mut user = match authenticated {
            Authenticated::Anonymous => return Ok(None),
            Authenticated::ServiceAccount(account) => {
                if let Some(lookup) = &self.shared.service_account_lookup {
                    // At the shard that holds the token's logical cluster.
                    let at_its_shard = || {
                        let route = self.shared.resolver.resolve(&account.token.cluster).ok()?;
                        Some(cluster_url(&route.base_url, &route.cluster))
                    };
                    lookup.check(&account.token, at_its_shard).await?;
                }
                account.user
            }
            Authenticated::User(user, _) => user,
        };
        self.shared.groups.apply(&mut user.groups);
        Ok(Some(user))
    }

    /// Where `path` goes: the destination and the backend URL, or the proxy's own error.
    fn target(
        &self,
        path: &str,
        method: &Method,
        uri: &Uri,
        identity: Option<&UserInfo>,
    ) -> Result<(&Destination, &Backend, Uri), ApiError> {
        let (shard, path) = match services::split_shard(path) {
            Some((shard, rest)) if rest.starts_with(services::SERVICES_PREFIX) => {
                (Some(shard), rest)
            }
            Some(_) => return Err(no_such_resource()),
            None => (None, path),
        };
        let index = self
            .shared
            .mappings
            .select(path)
            .ok_or_else(no_such_resource)?;
        let destination = self
            .shared
            .destinations
            .get(index)
            .ok_or_else(no_such_resource)?;
        let backend = self.backends.get(index).ok_or_else(no_such_resource)?;
        let resolve = |cluster: &str, rest: &str| {
            // The shard's own answer at its workspace gate, whether the workspace exists or not.
            let not_permitted = || {
                let user = identity.cloned().unwrap_or_else(UserInfo::anonymous);
                workspace_access_not_permitted(&user, method, rest, uri.query())
            };
            let user = identity.map(|user| user.name.as_str());
            let cluster = expand_home(cluster, user).ok_or_else(not_permitted)?;
            self.shared
                .resolver
                .resolve(&cluster)
                .map_err(|error| match error {
                    Unroutable::Unknown => not_permitted(),
                    other => ApiError::service_unavailable(&other.to_string()),
                })
        };
        let url = if destination.mapping.is_clusters() {
            let (cluster, rest) = split_cluster(path).ok_or_else(no_such_resource)?;
            let route = resolve(cluster, rest)?;
            format!("{}/clusters/{}{rest}", route.base_url, route.cluster)
        } else if let Some(shard) = shard {
            let base = self
                .shared
                .resolver
                .virtual_workspaces(shard)
                .ok_or_else(|| {
                    ApiError::service_unavailable(&format!("the shard {shard} is not available"))
                })?;
            format!("{base}{path}")
        } else if let Some(named) = services::named_cluster(path) {
            let route = resolve(named.cluster, named.after)?;
            format!(
                "{}{}{}{}",
                route.virtual_workspaces_url, named.before, route.cluster, named.after
            )
        } else {
            format!(
                "{}{path}",
                destination.mapping.backend.trim_end_matches('/')
            )
        };
        let mut url = url;
        if let Some(query) = uri.query() {
            url.push('?');
            url.push_str(query);
        }
        // Taking the string over: no copy of the URL.
        let target = Uri::try_from(url).map_err(|error| {
            ApiError::internal_error(&format!("forwarding to an invalid URL: {error}"))
        })?;
        Ok((destination, backend, target))
    }

    /// Replaces the identity headers and forwards.
    async fn send(
        &self,
        destination: &Destination,
        backend: &Backend,
        mut request: Request<Incoming>,
        target: Uri,
        identity: Option<&UserInfo>,
    ) -> Response<ProxyBody> {
        let headers = request.headers_mut();
        for names in &self.shared.identity_names {
            names.strip(headers);
        }
        if let Some(user) = identity {
            headers.remove(AUTHORIZATION);
            destination.identity.stamp(headers, user);
        }
        match forward::forward(backend, request, target).await {
            Ok(response) => response,
            Err(error) => {
                self.shared.metrics.backend_error();
                tracing::warn!(%error, path = %destination.mapping.path, "backend did not answer");
                status(&ApiError::service_unavailable(&format!(
                    "error trying to reach the backend: {error}"
                )))
            }
        }
    }
}

impl Handler for FrontProxy {
    type Body = ProxyBody;

    async fn handle(
        self: Arc<Self>,
        peer_certificates: Arc<Vec<CertificateDer<'static>>>,
        request: Request<Incoming>,
    ) -> Response<ProxyBody> {
        let started = Instant::now();
        let verb = metrics::verb(request.method(), request.uri().query());
        // Per request at debug (-v=2), as upstream's proxy logs requests only when verbose:
        // at info, the line costs a sixth of the proxy's CPU per request. Without it, nothing of
        // the request is kept for it.
        let logged = tracing::enabled!(tracing::Level::DEBUG)
            .then(|| (request.method().clone(), request.uri().clone()));
        let (response, user) = self.answer(&peer_certificates, request).await;
        self.shared
            .metrics
            .observe(verb, response.status().as_u16(), started.elapsed());
        if let Some((method, uri)) = logged {
            tracing::debug!(
                verb = %method,
                uri = %uri,
                user = %user,
                status = response.status().as_u16(),
                latency_us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX),
                "request"
            );
        }
        response
    }
}

/// A `Status` answer of the proxy's own.
pub fn status(error: &ApiError) -> Response<ProxyBody> {
    own(response::error(error))
}
