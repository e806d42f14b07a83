//! Services mounted under `/services/<name>/`: whole APIs that live beside the Kubernetes API on
//! the same port, as upstream kcp serves its cache server (`/services/cache/...`) and virtual
//! workspaces (`/services/<workspace-type>/...`) from a shard.
//!
//! The API server does for a service what it does for every request (TLS, authentication,
//! impersonation, authorization of the path as a non-resource URL, the body size limit) and hands
//! it the authenticated user and the request; the service does the rest, and its answer goes back
//! as it is. A service lives in its own crate and is mounted by the binary: the API server knows
//! only this trait, so it depends on none of them.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use bytes::Bytes;
use futures::future::BoxFuture;
use http::{HeaderMap, Method, Response};
use tokio_util::sync::CancellationToken;

use crate::filters::UserInfo;
use crate::handlers::response::Body;
use crate::pod_connect::PodConnector;

/// One request to a service, after authentication.
#[derive(Debug, Clone)]
pub struct ServiceRequest {
    /// Who is asking (after impersonation).
    pub user: UserInfo,
    pub method: Method,
    /// The percent-decoded path, `/services/<name>/` included.
    pub path: String,
    /// The raw query string, if any.
    pub query: Option<String>,
    pub headers: HeaderMap,
    pub body: Bytes,
    /// Cancelled when the server shuts down: long requests (watches) end on it.
    pub shutdown: CancellationToken,
}

/// An API served under `/services/<name>/`.
pub trait Service: Send + Sync + 'static {
    /// Answers one request (errors as a Kubernetes `Status`, like every answer of the server).
    fn serve(self: Arc<Self>, request: ServiceRequest) -> BoxFuture<'static, Response<Body>>;

    /// Whether the service authorizes every request itself (virtual workspaces, whose
    /// permissions live in other logical clusters); otherwise the server first authorizes the
    /// path as a non-resource URL for the user.
    fn authorizes_itself(&self) -> bool {
        false
    }
}

/// The API server as a service may call it back ([`crate::ApiServer::loopback`]): a request
/// dispatched as a given user into the server's own authorization, admission and handlers, as
/// upstream's virtual workspaces call their shard with a client. The same trait can be served by
/// a client of a remote shard (a standalone virtual-workspace server).
pub trait Loopback: Send + Sync + 'static {
    /// Serves `request` (a `/clusters/<name|path|*>/...` path) as the server serves a client's
    /// request from `request.user` after authentication: authorization, then discovery, OpenAPI
    /// or the resource handlers (watches stream, and end on the server's shutdown).
    fn dispatch(&self, request: ServiceRequest) -> BoxFuture<'static, Response<Body>>;

    /// A deep SubjectAccessReview in logical cluster `cluster` (a name or a workspace path): its
    /// RBAC decides, without the workspace access gate (upstream's deep SAR, as admission asks
    /// for `bind`). A cluster the server does not know allows nothing.
    fn allowed_deep(
        &self,
        cluster: &str,
        attributes: kcp_rbac::Attributes,
    ) -> BoxFuture<'static, Result<bool, kcp_apimachinery::ApiError>>;
}

/// The services a server mounts, by name, and the connector of the pods' connect
/// subresources ([`crate::pod_connect`]), which the binary mounts the same way.
#[derive(Clone, Default)]
pub struct Services {
    by_name: BTreeMap<String, Arc<dyn Service>>,
    pods: Option<Arc<dyn PodConnector>>,
}

impl Services {
    /// Mounts `service` at `/services/<name>/`.
    pub fn with(mut self, name: &str, service: Arc<dyn Service>) -> Services {
        self.by_name.insert(name.to_owned(), service);
        self
    }

    /// Serves `pods/log`, `exec`, `attach` and `portforward` with `connector`.
    pub fn with_pod_connector(mut self, connector: Arc<dyn PodConnector>) -> Services {
        self.pods = Some(connector);
        self
    }

    /// The service a (percent-decoded, unprefixed) path is for: `/services/<name>` or below.
    pub(crate) fn find(&self, path: &str) -> Option<&Arc<dyn Service>> {
        let rest = path.strip_prefix("/services/")?;
        let name = rest.split('/').next()?;
        self.by_name.get(name)
    }

    pub(crate) fn pod_connector(&self) -> Option<&Arc<dyn PodConnector>> {
        self.pods.as_ref()
    }
}

impl fmt::Debug for Services {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Services")
            .field("services", &self.by_name.keys().collect::<Vec<_>>())
            .field("pod_connector", &self.pods.is_some())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Nothing;

    impl Service for Nothing {
        fn serve(self: Arc<Self>, _: ServiceRequest) -> BoxFuture<'static, Response<Body>> {
            Box::pin(async { crate::handlers::response::text(200, "") })
        }
    }

    #[test]
    fn a_path_finds_its_service_by_name() {
        let services = Services::default().with("cache", Arc::new(Nothing));
        assert!(services.find("/services/cache").is_some());
        assert!(services.find("/services/cache/shards/a").is_some());
        assert!(services.find("/services/cachex/shards").is_none());
        assert!(services.find("/services/").is_none());
        assert!(services.find("/clusters/root/services/cache").is_none());
    }
}
