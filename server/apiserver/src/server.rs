//! The server: shared state ([`App`]), the request pipeline, and the listener's lifecycle.
//!
//! Pipeline, outside in: panic guard and access log -> logical-cluster resolution -> request info ->
//! authentication -> impersonation -> authorization -> health / version / discovery / OpenAPI /
//! resource handlers. Each step answers with a Kubernetes `Status` when it refuses, so no input
//! reaches a handler it cannot serve, and no handler failure takes other clients down.

use std::net::SocketAddr;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::FutureExt;
use futures::future::BoxFuture;
use http::{Method, Request, Response, header};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use kcp_apimachinery::validation::MAX_REQUEST_BODY_BYTES;
use kcp_apimachinery::{ApiError, StatusReason};
use kcp_storage::Storage;
use rustls_pki_types::CertificateDer;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::filters::UserInfo;
use crate::filters::authentication::{self, Authentication, rbac_user};
use crate::filters::authorization::webhook::{Webhook, WebhookConfig, WebhookError};
use crate::filters::authorization::{self, Authorizer};
use crate::filters::impersonation;
use crate::handlers::resource::{self, ResourceRequest};
use crate::handlers::response::{self, Body};
use crate::handlers::{self, Scope, discovery, elsewhere, health, openapi};
use crate::pod_connect;
use crate::request::RequestInfo;
use crate::request::cluster::{ClusterPathError, split_cluster};
use crate::request::query::Query;
use crate::services::{Loopback, ServiceRequest, Services};
use kcp_admission::chain::Admission;
use kcp_admission::configs::ConfigIndex;
use kcp_admission::object_count::ObjectCounts;
use kcp_controllers::TenancyIndex;
use kcp_controllers::policies::PolicyCache;
use kcp_controllers::tenancy_index::Unresolved;
use kcp_rbac::Attributes;
use kcp_registry::ClusterTarget;
use kcp_registry::Registry;
use kcp_registry::storage::ObjectStore;
use kcp_registry::store::RestStore;
use kcp_watchcache::WatchCaches;

/// The Kubernetes version this server speaks (its built-in types are those of this release).
pub const KUBERNETES_VERSION: (&str, &str) = ("1", "35");

/// What the API server needs to know, independent of how flags spell it.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub bind_address: SocketAddr,
    /// PEM certificate chain and key the server presents.
    pub serving_cert_chain_pem: String,
    pub serving_key_pem: String,
    /// PEM CAs client certificates are verified against; `None` accepts no client certificates.
    pub client_ca_pem: Option<String>,
    /// PEM CAs of front-proxy client certificates (`--requestheader-client-ca-file`).
    pub requestheader_ca_pem: Option<String>,
    /// Storage key prefix (`--etcd-prefix`).
    pub storage_prefix: String,
    /// Paths anybody may read, authenticated or not (`--authorization-always-allow-paths`).
    pub always_allow_paths: Vec<String>,
    /// `--authorization-webhook-*`.
    pub authorization_webhook: Option<WebhookConfig>,
    /// The CA bundle published to every namespace as `kube-root-ca.crt` (`--root-ca-file`, else
    /// the CA of the serving certificate).
    pub root_ca_pem: String,
    /// What root holds from the start (built-in WorkspaceTypes with the `workspace-types`
    /// battery, who may create home workspaces).
    pub tenancy: kcp_tenancy::bootstrap::Options,
    /// The URL users reach this shard at (`--shard-external-url`), for `Workspace.spec.URL`;
    /// `None`: `https://` and the address clients reached us at.
    pub external_url: Option<String>,
    /// How long in-flight requests may take to finish after a shutdown signal.
    pub shutdown_grace: Duration,
    /// The most objects a logical cluster other than root and `system:` ones may hold
    /// (`--logical-cluster-total-object-limit`); `0`: no limit but the clusters' own annotations.
    pub logical_cluster_total_object_limit: u64,
    /// How often the objects of every logical cluster are counted in storage
    /// (`--logical-cluster-object-count-scan-interval`).
    pub logical_cluster_object_count_scan_interval: Duration,
    /// `--max-logical-clusters`: a full shard refuses LogicalClusters created through the API
    /// (by other shards' schedulers) with 429.
    pub max_logical_clusters: Option<u64>,
    /// `--shard-name`: a Workspace scheduled to another shard makes its path answer 429 here.
    pub shard_name: String,
}

/// State shared by every request.
pub struct App {
    pub store: RestStore,
    /// LogicalClusters and WorkspaceTypes of every logical cluster.
    pub tenancy: Arc<TenancyIndex>,
    pub authentication: Authentication,
    pub authorizer: Authorizer,
    /// Webhooks, admission policies, quota, CSR rules and object limits of every logical cluster.
    pub admission: Admission,
    /// Cancelled when the server shuts down; watches end on it.
    pub shutdown: CancellationToken,
    /// One cache per listed resource type, shared by every logical cluster (lists read it).
    pub watch_caches: WatchCaches,
    pub config: ServerConfig,
    /// The address clients reached us at, for `/api` discovery.
    pub server_address: String,
    /// What is served under `/services/<name>/`.
    services: Services,
    bootstrapped: AtomicBool,
}

impl App {
    pub fn new(
        config: ServerConfig,
        authentication: Authentication,
        storage: Arc<dyn Storage>,
        server_address: String,
        services: Services,
    ) -> Result<App, WebhookError> {
        let registry = Arc::new(Registry::new());
        // Built before the first request, so kubectl's first discovery is not the one that pays.
        registry.builtin().openapi();
        let objects = ObjectStore::new(storage, &config.storage_prefix);
        let webhook = config
            .authorization_webhook
            .as_ref()
            .map(Webhook::new)
            .transpose()?;
        let tenancy = Arc::new(TenancyIndex::default());
        let policies = Arc::new(PolicyCache::new(objects.clone()));
        // The registry's admission policy and webhook strategies check CEL with kcp-admission's
        // compiler, which the registry cannot depend on.
        kcp_admission::policy::install_expression_checks();
        let admission_configs = Arc::new(ConfigIndex::new());
        let store = RestStore::new(objects, registry)
            .with_hook(policies.clone())
            .with_hook(admission_configs.clone());
        let object_counts = Arc::new(ObjectCounts::new(
            config.logical_cluster_total_object_limit,
            config.logical_cluster_object_count_scan_interval,
        ));
        let admission = Admission::new(admission_configs, store.clone(), object_counts);
        let authorizer = Authorizer::new(
            policies,
            tenancy.clone(),
            webhook,
            config.always_allow_paths.clone(),
        );
        let shutdown = CancellationToken::new();
        let watch_caches = WatchCaches::new(store.objects().clone(), &shutdown);
        Ok(App {
            store,
            admission,
            tenancy,
            authentication,
            authorizer,
            shutdown,
            watch_caches,
            config,
            server_address,
            services,
            bootstrapped: AtomicBool::new(false),
        })
    }

    pub fn bootstrapped(&self) -> bool {
        self.bootstrapped.load(Ordering::Acquire)
    }

    /// What handlers may use of the server.
    fn scope(&self) -> Scope<'_> {
        Scope {
            store: &self.store,
            tenancy: &self.tenancy,
            authentication: &self.authentication,
            authorizer: &self.authorizer,
            admission: &self.admission,
            shutdown: &self.shutdown,
            watch_caches: &self.watch_caches,
            max_logical_clusters: self.config.max_logical_clusters,
        }
    }

    pub(crate) fn mark_bootstrapped(&self) {
        self.bootstrapped.store(true, Ordering::Release);
    }

    /// Serves one request: never panics, always answers.
    async fn handle_request(
        self: Arc<Self>,
        peer_certificates: Arc<Vec<CertificateDer<'static>>>,
        request: Request<Incoming>,
    ) -> Response<Body> {
        let started = Instant::now();
        let method = request.method().clone();
        let uri = request.uri().clone();
        let mut user_name = String::new();
        let response =
            match AssertUnwindSafe(self.route(&peer_certificates, request, &mut user_name))
                .catch_unwind()
                .await
            {
                Ok(Ok(response)) => response,
                Ok(Err(error)) => response::error(&error),
                Err(_) => {
                    tracing::error!(%method, %uri, "handler panicked");
                    response::error(&ApiError::internal_error(
                        "an internal error occurred while serving the request",
                    ))
                }
            };
        access_log(&method, &uri, &user_name, &response, started);
        response
    }

    async fn route(
        &self,
        peer_certificates: &[CertificateDer<'static>],
        request: Request<Incoming>,
        user_name: &mut String,
    ) -> Result<Response<Body>, ApiError> {
        let (mut parts, body) = request.into_parts();
        let full_path = crate::request::path::decoded(parts.uri.path())?;
        let raw_query = parts.uri.query().map(str::to_string);
        let (cluster, path) = match self.split_cluster(&full_path) {
            Ok(split) => split,
            // Upstream answers an unknown workspace path as a missing workspace named by the
            // path, and one whose logical cluster is on another shard with 429.
            Err(ClusterPathError::NotFound(p)) if !p.starts_with('/') => {
                let shard = &self.config.shard_name;
                return match elsewhere::on_another_shard(&self.store, &self.tenancy, shard, &p)
                    .await
                {
                    Some(answer) => Ok(answer),
                    None => Err(ApiError::not_found(
                        kcp_tenancy::workspace::GROUP,
                        kcp_tenancy::workspace::RESOURCE,
                        &p,
                    )),
                };
            }
            Err(ClusterPathError::NotFound(_)) => return Err(resource::no_such_resource()),
            Err(e) => return Err(ApiError::bad_request(&e.to_string())),
        };
        let path = path.to_string();
        let query = Query::parse(raw_query.as_deref());
        let info = RequestInfo::parse(&parts.method, &path, query.is_watch());

        let service = self.services.find(&full_path);
        let always_allowed = !info.is_resource_request && self.authorizer.always_allowed(&path);
        let user = if always_allowed {
            UserInfo::anonymous()
        } else {
            let user = authentication::authenticate(
                &self.authentication,
                &self.store,
                peer_certificates,
                &mut parts.headers,
            )
            .await?;
            user_name.clone_from(&user.name);
            let user =
                impersonation::impersonate(&self.authorizer, &cluster, user, &mut parts.headers)
                    .await?;
            // A service that authorizes its requests itself (virtual workspaces) gets every
            // authenticated user; the others are authorized for their path first.
            if !service.is_some_and(|s| s.authorizes_itself()) {
                let attributes =
                    authorization::attributes(rbac_user(&user), &info, &parts.method, &path);
                self.authorizer.authorize(&cluster, &attributes).await?;
            }
            user
        };
        let accept = parts
            .headers
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);

        if let Some(service) = service {
            let body = read_body(&parts.headers, body).await?;
            let request = ServiceRequest {
                user,
                method: parts.method,
                path: full_path,
                query: raw_query,
                headers: parts.headers,
                body,
                shutdown: self.shutdown.clone(),
            };
            return Ok(service.clone().serve(request).await);
        }
        if !info.is_resource_request {
            if !matches!(parts.method, Method::GET | Method::HEAD) {
                return Err(ApiError::method_not_supported(
                    "",
                    "",
                    parts.method.as_str(),
                ));
            }
            if let Some(response) = health::serve(
                &self.scope(),
                self.bootstrapped(),
                &path,
                raw_query.as_deref(),
            )
            .await
            {
                return Ok(response);
            }
            if path == "/version" {
                return Ok(response::json(200, &version()));
            }
            if full_path == "/metrics" {
                return Ok(handlers::metrics::serve(&self.watch_caches));
            }
            return self.serve_api_documents(&cluster, &full_path, &path, accept.as_deref());
        }

        let connect = pod_connect::Server {
            connector: self.services.pod_connector(),
            store: &self.store,
            authorizer: &self.authorizer,
        };
        if let Some(answer) =
            pod_connect::serve(connect, &cluster, &user, &info, &mut parts, &path).await
        {
            return answer;
        }
        let body = read_body(&parts.headers, body).await?;
        let request = resource_request(cluster, info, query, &parts.headers, user, body);
        handlers::serve_resource(&self.scope(), request).await
    }
}

impl App {
    /// Splits `/clusters/<name|path|*>` off a percent-decoded path (paths resolved by the
    /// tenancy index); other paths are root's.
    fn split_cluster<'p>(
        &self,
        full_path: &'p str,
    ) -> Result<(ClusterTarget, &'p str), ClusterPathError> {
        let resolve = |reference: &str| {
            self.tenancy.resolve(reference).map_err(|e| match e {
                Unresolved::Invalid(p) => ClusterPathError::Invalid(p),
                Unresolved::NotFound(p) => ClusterPathError::NotFound(p),
            })
        };
        split_cluster(full_path, resolve)
    }

    /// OpenAPI and discovery documents of a request target, or kube-apiserver's 404.
    fn serve_api_documents(
        &self,
        cluster: &ClusterTarget,
        full_path: &str,
        path: &str,
        accept: Option<&str>,
    ) -> Result<Response<Body>, ApiError> {
        let base = match cluster {
            ClusterTarget::One(name) if full_path.starts_with("/clusters/") => {
                format!("/clusters/{name}")
            }
            ClusterTarget::Wildcard => "/clusters/*".to_string(),
            ClusterTarget::One(_) => String::new(),
        };
        let apis = self.store.registry().for_target(cluster);
        if let Some(response) = openapi::serve(apis.openapi(), path, accept, &base) {
            return Ok(response);
        }
        if let Some(result) = discovery::serve(&apis, path, accept, &self.server_address) {
            return result;
        }
        Err(ApiError {
            code: 404,
            reason: StatusReason::NotFound,
            message: "the server could not find the requested resource".into(),
            details: None,
        })
    }

    /// Serves a request of a mounted service on the service's behalf ([`Loopback`]): an
    /// already-authenticated user, a `/clusters/...` path, authorized and served by the handlers
    /// as a client's request would be (no services, health or pod connections).
    async fn serve_as(&self, request: ServiceRequest) -> Result<Response<Body>, ApiError> {
        let (cluster, path) = self
            .split_cluster(&request.path)
            .map_err(|_| resource::no_such_resource())?;
        let query = Query::parse(request.query.as_deref());
        let info = RequestInfo::parse(&request.method, path, query.is_watch());
        let attributes =
            authorization::attributes(rbac_user(&request.user), &info, &request.method, path);
        self.authorizer.authorize(&cluster, &attributes).await?;
        let accept = header_text(&request.headers, header::ACCEPT);
        if !info.is_resource_request {
            if !matches!(request.method, Method::GET | Method::HEAD) {
                return Err(ApiError::method_not_supported(
                    "",
                    "",
                    request.method.as_str(),
                ));
            }
            return self.serve_api_documents(&cluster, &request.path, path, accept.as_deref());
        }
        let request = resource_request(
            cluster,
            info,
            query,
            &request.headers,
            request.user,
            request.body,
        );
        handlers::serve_resource(&self.scope(), request).await
    }
}

/// The server as its services see it (see [`Loopback`]); weak, as the server owns its services.
pub(crate) struct AppLoopback(pub(crate) Weak<App>);

impl Loopback for AppLoopback {
    fn dispatch(&self, request: ServiceRequest) -> BoxFuture<'static, Response<Body>> {
        let app = self.0.upgrade();
        Box::pin(async move {
            let Some(app) = app else {
                return response::error(&ApiError::service_unavailable("the server is stopping"));
            };
            app.serve_as(request)
                .await
                .unwrap_or_else(|error| response::error(&error))
        })
    }

    fn allowed_deep(
        &self,
        cluster: &str,
        attributes: Attributes,
    ) -> BoxFuture<'static, Result<bool, ApiError>> {
        let app = self.0.upgrade();
        let cluster = cluster.to_string();
        Box::pin(async move {
            let app = app.ok_or_else(|| ApiError::service_unavailable("the server is stopping"))?;
            // A cluster name or a workspace path this shard knows; others decide nothing.
            let Ok(cluster) = app.tenancy.resolve(&cluster) else {
                return Ok(false);
            };
            Ok(app
                .authorizer
                .decide_deep(&cluster, &attributes)
                .await?
                .is_allowed())
        })
    }
}

impl crate::listener::Handler for App {
    type Body = Body;

    fn handle(
        self: Arc<Self>,
        peer_certificates: Arc<Vec<CertificateDer<'static>>>,
        request: Request<Incoming>,
    ) -> impl Future<Output = Response<Body>> + Send {
        self.handle_request(peer_certificates, request)
    }
}

/// The access log line of one request (every server of the binary writes the same fields).
pub fn access_log(
    method: &Method,
    uri: &http::Uri,
    user_name: &str,
    response: &Response<Body>,
    started: Instant,
) {
    tracing::info!(
        verb = %method,
        uri = %uri,
        user = %user_name,
        status = response.status().as_u16(),
        latency_us = started.elapsed().as_micros() as u64,
        "request"
    );
}

/// A resource request for the handlers, its content negotiation read from `headers`.
fn resource_request(
    cluster: ClusterTarget,
    info: RequestInfo,
    query: Query,
    headers: &http::HeaderMap,
    user: UserInfo,
    body: Bytes,
) -> ResourceRequest {
    ResourceRequest {
        cluster,
        info,
        query,
        accept: header_text(headers, header::ACCEPT),
        content_type: header_text(headers, header::CONTENT_TYPE),
        user_agent: header_text(headers, header::USER_AGENT),
        user,
        body,
        deep_review: header_text(headers, DEEP_SUBJECT_ACCESS_REVIEW).as_deref() == Some("true"),
    }
}

/// The header that makes a SubjectAccessReview deep (upstream's `deepSARHeader`).
pub const DEEP_SUBJECT_ACCESS_REVIEW: &str = "x-kcp-internal-deep-subjectaccessreview";

fn header_text(headers: &http::HeaderMap, name: impl header::AsHeaderName) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

/// Reads a request body, refusing more than kube-apiserver's limit with 413.
pub async fn read_body(headers: &http::HeaderMap, body: Incoming) -> Result<Bytes, ApiError> {
    let too_large =
        || ApiError::request_entity_too_large(&format!("limit is {MAX_REQUEST_BODY_BYTES}"));
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|len| len > MAX_REQUEST_BODY_BYTES) {
        return Err(too_large());
    }
    match Limited::new(body, MAX_REQUEST_BODY_BYTES).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => Err(too_large()),
        Err(e) => Err(ApiError::bad_request(&format!(
            "reading the request body: {e}"
        ))),
    }
}

/// `/version`.
pub fn version() -> serde_json::Value {
    let (major, minor) = KUBERNETES_VERSION;
    json!({
        "major": major,
        "minor": minor,
        "gitVersion": format!("v{major}.{minor}.0+kcp-rs-v{}", env!("CARGO_PKG_VERSION")),
        "gitCommit": "",
        "gitTreeState": "clean",
        "buildDate": "",
        "goVersion": "",
        "compiler": "rustc",
        "platform": format!("{}/{}", std::env::consts::OS, if std::env::consts::ARCH == "x86_64" { "amd64" } else if std::env::consts::ARCH == "aarch64" { "arm64" } else { std::env::consts::ARCH }),
    })
}
