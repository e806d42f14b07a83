//! The connect subresources of pods (`pods/log`, `pods/exec`, `pods/attach`,
//! `pods/portforward`), for a server whose pods are a core-group CRD (the end-to-end host): kube
//! serves them by proxying to the kubelet of the pod's node; here a [`PodConnector`] mounted by
//! the binary does that, and the API server only recognises the request, authorizes it as
//! kube-apiserver 1.35 does (`get pods/log`; `create` on the others, for the WebSocket `GET`
//! upgrades too, as `AuthorizePodWebsocketUpgradeCreatePermission`) and hands over the
//! connection's upgrade. Without a connector, or where `pods` is not served, these paths stay
//! the 404 they were.

use std::sync::Arc;

use futures::future::BoxFuture;
use http::request::Parts;
use http::{HeaderMap, Method, Response};
use hyper::upgrade::OnUpgrade;
use kcp_apimachinery::ApiError;
use kcp_registry::store::RestStore;
use kcp_registry::{ClusterTarget, LogicalClusterName};

use crate::filters::UserInfo;
use crate::filters::authentication::rbac_user;
use crate::filters::authorization::{self, Authorizer};
use crate::handlers::response::Body;
use crate::request::{RequestInfo, Verb};

/// Which connect subresource a request names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodSubresource {
    Log,
    Exec,
    Attach,
    PortForward,
}

impl PodSubresource {
    fn parse(subresource: &str) -> Option<PodSubresource> {
        match subresource {
            "log" => Some(PodSubresource::Log),
            "exec" => Some(PodSubresource::Exec),
            "attach" => Some(PodSubresource::Attach),
            "portforward" => Some(PodSubresource::PortForward),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            PodSubresource::Log => "log",
            PodSubresource::Exec => "exec",
            PodSubresource::Attach => "attach",
            PodSubresource::PortForward => "portforward",
        }
    }
}

/// One authorized connect request.
pub struct PodConnectRequest {
    /// Where the pod (and its Node) are read from.
    pub store: RestStore,
    pub cluster: LogicalClusterName,
    pub namespace: String,
    pub name: String,
    pub subresource: PodSubresource,
    pub method: Method,
    /// The raw query string (`container`, `command`, `ports`, `follow`, ...).
    pub query: Option<String>,
    /// The client's headers (`Connection`/`Upgrade` and the streaming protocol's).
    pub headers: HeaderMap,
    /// The client's side of an upgrade, when it asked for one.
    pub upgrade: Option<OnUpgrade>,
}

/// Serves the connect subresources (the binary mounts one; see `kcp-pod-streaming`).
pub trait PodConnector: Send + Sync + 'static {
    fn connect(
        self: Arc<Self>,
        request: PodConnectRequest,
    ) -> BoxFuture<'static, Result<Response<Body>, ApiError>>;
}

/// The connect subresources discovery lists for a type (name, kind, verbs), as kube-apiserver
/// lists them for core/v1 pods; none for any other type.
pub(crate) fn discovered(
    group: &str,
    version: &str,
    plural: &str,
) -> &'static [(&'static str, &'static str, &'static [&'static str])] {
    if (group, version, plural) != ("", "v1", "pods") {
        return &[];
    }
    &[
        ("attach", "PodAttachOptions", &["create", "get"]),
        ("exec", "PodExecOptions", &["create", "get"]),
        ("log", "Pod", &["get"]),
        ("portforward", "PodPortForwardOptions", &["create", "get"]),
    ]
}

/// The connect subresource a request addresses: `/api/v1/namespaces/<ns>/pods/<name>/<sub>`.
fn addressed(info: &RequestInfo) -> Option<PodSubresource> {
    let plain_pod = info.is_resource_request
        && info.group.is_empty()
        && info.version == "v1"
        && info.resource == "pods"
        && info.namespace.is_some()
        && info.name.is_some()
        && info.extra_parts == 0;
    plain_pod
        .then(|| PodSubresource::parse(info.subresource.as_deref()?))
        .flatten()
}

/// What [`serve`] needs of the server.
pub(crate) struct Server<'a> {
    pub connector: Option<&'a Arc<dyn PodConnector>>,
    pub store: &'a RestStore,
    pub authorizer: &'a Authorizer,
}

/// Serves a connect request (already authorized for its own verb), or `None` when the request
/// is not one this server connects (then it is answered as any other resource request).
pub(crate) async fn serve(
    server: Server<'_>,
    cluster: &ClusterTarget,
    user: &UserInfo,
    info: &RequestInfo,
    parts: &mut Parts,
    path: &str,
) -> Option<Result<Response<Body>, ApiError>> {
    let subresource = addressed(info)?;
    let connector = server.connector?;
    let ClusterTarget::One(cluster) = cluster else {
        return None;
    };
    server
        .store
        .registry()
        .for_cluster(cluster)
        .lookup("", "v1", "pods")?;
    Some(
        connect(
            connector,
            server,
            cluster,
            user,
            info,
            parts,
            path,
            subresource,
        )
        .await,
    )
}

#[allow(clippy::too_many_arguments)]
async fn connect(
    connector: &Arc<dyn PodConnector>,
    server: Server<'_>,
    cluster: &LogicalClusterName,
    user: &UserInfo,
    info: &RequestInfo,
    parts: &mut Parts,
    path: &str,
    subresource: PodSubresource,
) -> Result<Response<Body>, ApiError> {
    let method = parts.method.clone();
    let allowed = match subresource {
        PodSubresource::Log => method == Method::GET,
        _ => method == Method::GET || method == Method::POST,
    };
    if !allowed {
        return Err(ApiError::method_not_supported(
            "",
            &format!("pods/{}", subresource.as_str()),
            info.verb.as_str(),
        ));
    }
    if subresource != PodSubresource::Log && info.verb != Verb::Create {
        let create = RequestInfo {
            verb: Verb::Create,
            ..info.clone()
        };
        let attributes = authorization::attributes(rbac_user(user), &create, &method, path);
        server
            .authorizer
            .authorize(&ClusterTarget::One(cluster.clone()), &attributes)
            .await?;
    }
    let request = PodConnectRequest {
        store: server.store.clone(),
        cluster: cluster.clone(),
        namespace: info.namespace.clone().unwrap_or_default(),
        name: info.name.clone().unwrap_or_default(),
        subresource,
        method,
        query: parts.uri.query().map(str::to_owned),
        headers: parts.headers.clone(),
        upgrade: parts.extensions.remove::<OnUpgrade>(),
    };
    connector.clone().connect(request).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(path: &str) -> RequestInfo {
        RequestInfo::parse(&Method::GET, path, false)
    }

    #[test]
    fn discovery_lists_the_connect_subresources_of_pods_only() {
        let names: Vec<&str> = discovered("", "v1", "pods").iter().map(|d| d.0).collect();
        assert_eq!(names, ["attach", "exec", "log", "portforward"]);
        assert!(discovered("", "v1", "services").is_empty());
        assert!(discovered("example.com", "v1", "pods").is_empty());
    }

    #[test]
    fn only_pod_connect_subresources_are_addressed() {
        let pod = "/api/v1/namespaces/default/pods/web";
        assert_eq!(
            addressed(&info(&format!("{pod}/log"))),
            Some(PodSubresource::Log)
        );
        assert_eq!(
            addressed(&info(&format!("{pod}/exec"))),
            Some(PodSubresource::Exec)
        );
        assert_eq!(
            addressed(&info(&format!("{pod}/attach"))),
            Some(PodSubresource::Attach)
        );
        assert_eq!(
            addressed(&info(&format!("{pod}/portforward"))),
            Some(PodSubresource::PortForward)
        );
        assert_eq!(addressed(&info(&format!("{pod}/status"))), None);
        assert_eq!(addressed(&info(pod)), None);
        assert_eq!(addressed(&info(&format!("{pod}/log/x"))), None);
        assert_eq!(
            addressed(&info("/apis/example.com/v1/namespaces/d/pods/web/log")),
            None
        );
        assert_eq!(
            addressed(&info("/api/v1/namespaces/d/services/web/proxy")),
            None
        );
    }
}
