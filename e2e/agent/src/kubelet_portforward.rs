//! kubelet's `/portForward/<namespace>/<pod>`: port forwarding into a running pod
//! ([`crate::port_forward`]) over SPDY/3.1 (`portforward.k8s.io`), or a WebSocket that tunnels
//! the same SPDY connection (`SPDY/3.1+portforward.k8s.io`, kubectl 1.31+; older kubectls fall
//! back to SPDY when it is refused).

use std::sync::Arc;

use http::{Request, Response, StatusCode};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;

use crate::context::Ctx;
use crate::kubelet_exec::{Transport, negotiate, running_pid, switching};
use crate::kubelet_logs::pod_of_node;
use crate::kubelet_server::{Body, text};
use crate::{port_forward, websocket_tunnel};

/// The WebSocket subprotocol that tunnels SPDY port forwarding.
pub const TUNNEL_PROTOCOL: &str = "SPDY/3.1+portforward.k8s.io";

pub fn serve(
    ctx: &Arc<Ctx>,
    mut request: Request<Incoming>,
    namespace: &str,
    pod: &str,
) -> Response<Body> {
    let Some(found) = pod_of_node(ctx, namespace, pod) else {
        return text(
            StatusCode::NOT_FOUND,
            format!("pod {namespace}/{pod} not found"),
        );
    };
    // Any running container's process is in the pod's network namespace.
    let pid = found
        .spec
        .iter()
        .flat_map(|spec| spec.containers.iter())
        .find_map(|c| running_pid(ctx, namespace, pod, &c.name));
    let Some(pid) = pid else {
        return text(
            StatusCode::BAD_REQUEST,
            format!("pod {pod} has no running container to forward ports into"),
        );
    };
    let transport = match negotiate(
        request.headers(),
        &[port_forward::PROTOCOL],
        &[TUNNEL_PROTOCOL],
    ) {
        Ok(transport) => transport,
        Err(message) => return text(StatusCode::FORBIDDEN, message),
    };
    tracing::info!(pod = %format!("{namespace}/{pod}"), transport = %transport.name(), "port-forward");
    let response = switching(transport, request.headers());
    let upgrade = hyper::upgrade::on(&mut request);
    let pod = pod.to_owned();
    tokio::spawn(async move {
        let io = match upgrade.await {
            Ok(upgraded) => TokioIo::new(upgraded),
            Err(error) => {
                tracing::debug!(%error, "port-forward upgrade did not complete");
                return;
            }
        };
        match transport {
            Transport::Spdy(_) => port_forward::serve(io, pod, pid).await,
            Transport::WebSocket(_) => {
                port_forward::serve(websocket_tunnel::open(io), pod, pid).await
            }
        }
    });
    response
}
