//! `pods/log`, `pods/exec`, `pods/attach` and `pods/portforward` for a server whose pods are a
//! core-group CRD (the end-to-end host, where the node agent runs them), as kube-apiserver serves
//! them: the pod is read, the container checked, the pod's `Node` gives the kubelet's address
//! (`InternalIP`) and port (`status.daemonEndpoints.kubeletEndpoint.Port`), and the request goes
//! to the kubelet path of the subresource (`/containerLogs`, `/exec`, `/attach`, `/portForward`)
//! over TLS with the client certificate of `--kubelet-client-certificate`. Logs are relayed as
//! they come; the streaming protocols (SPDY/3.1 and WebSocket) are proxied byte for byte once
//! the kubelet switched protocols. kcp-apiserver recognises and authorizes the requests
//! (`kcp_apiserver::pod_connect`); the binary mounts a [`KubeletConnector`].

mod client_tls;
mod proxy;
mod target;

use std::sync::Arc;

use futures::future::BoxFuture;
use http::Response;
use kcp_apimachinery::ApiError;
use kcp_apiserver::pod_connect::{PodConnectRequest, PodConnector};
use kcp_apiserver::response::{self, Body};

use crate::target::Target;

pub use client_tls::{KubeletClientFiles, KubeletTlsError};

/// Connects the pods' streaming subresources to the kubelet of their node.
pub struct KubeletConnector {
    /// `None`: the server has no kubelet client credentials, so no kubelet can be reached.
    tls: Option<Arc<rustls::ClientConfig>>,
}

impl KubeletConnector {
    /// With the kubelet client credentials of `files`.
    pub fn new(files: &KubeletClientFiles) -> Result<KubeletConnector, KubeletTlsError> {
        Ok(KubeletConnector {
            tls: Some(client_tls::client_config(files)?),
        })
    }

    /// Without credentials: every request that gets as far as the kubelet is answered 503, as
    /// kube-apiserver answers when it cannot reach one.
    pub fn without_credentials() -> KubeletConnector {
        KubeletConnector { tls: None }
    }
}

impl PodConnector for KubeletConnector {
    fn connect(
        self: Arc<Self>,
        request: PodConnectRequest,
    ) -> BoxFuture<'static, Result<Response<Body>, ApiError>> {
        Box::pin(async move {
            let kubelet = match target::resolve(&request).await? {
                Target::EmptyLog => return Ok(response::bytes(200, "text/plain", "")),
                Target::Kubelet(kubelet) => kubelet,
            };
            let Some(tls) = self.tls.clone() else {
                return Err(ApiError::service_unavailable(&format!(
                    "error dialing backend: no kubelet client certificate is configured (--kubelet-client-certificate) to reach node {}",
                    kubelet.node
                )));
            };
            proxy::forward(tls, kubelet, request).await
        })
    }
}
