//! kubelet's `/exec/<namespace>/<pod>/<container>`: a command in a running container
//! ([`crate::exec_process`]), and `/attach/...`: the container's own output, stdin and terminal
//! ([`crate::attach`]), over the streaming protocol the client's upgrade asks for and
//! kubelet offers: SPDY/3.1 with `v4.channel.k8s.io` down to `channel.k8s.io`
//! ([`crate::exec_spdy`]) or a WebSocket with `v5.channel.k8s.io`, the `v4.` and unversioned
//! binary and base64 channel protocols, or none ([`crate::exec_websocket`]); the first protocol
//! of the client's list the agent speaks wins, as in kube's handshakes. A request that cannot be served is
//! answered before switching protocols, in kubelet's words: 404 for an unknown pod, 400 for a
//! container that is not running, 403 when no protocol is shared (a SPDY client that offers
//! none gets the oldest, as kubelet's handshake does).

use std::sync::Arc;

use http::header::{CONNECTION, UPGRADE};
use http::{HeaderMap, HeaderValue, Request, Response, StatusCode};
use http_body_util::{BodyExt as _, Empty};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use k8s_openapi::api::core::v1::Pod;

use crate::context::Ctx;
use crate::exec::ExecSpec;
use crate::exec_process::{self, Running};
use crate::kubelet_logs::{container_spec, container_status, has_container, pod_of_node};
use crate::kubelet_server::{Body, text};
use crate::remote_command::ExecOptions;
use crate::{attach, exec_spdy, exec_websocket, probes};

/// The container's main process, when it runs (`containerID: kcp-node-agent://<pid>`).
pub fn running_pid(ctx: &Ctx, namespace: &str, pod: &str, container: &str) -> Option<u32> {
    let pod = pod_of_node(ctx, namespace, pod)?;
    let status = container_status(&pod, container)?;
    status.state.as_ref()?.running.as_ref()?;
    status
        .container_id
        .as_deref()?
        .strip_prefix("kcp-node-agent://")?
        .parse()
        .ok()
}

/// The transport a request's upgrade asks for, with the negotiated subprotocol (a WebSocket
/// client that offered none gets `""`: kube's first, binary channel protocol).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    Spdy(&'static str),
    WebSocket(&'static str),
}

impl Transport {
    /// For the agent's log.
    pub fn name(self) -> &'static str {
        match self {
            Transport::Spdy(_) => "spdy",
            Transport::WebSocket(_) => "websocket",
        }
    }
}

fn header_values(headers: &HeaderMap, name: &str) -> Vec<String> {
    headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
        .collect()
}

/// The first protocol the client offers that the server supports (kube's handshakes go by the
/// client's order).
fn first_shared(offered: &[String], supported: &[&'static str]) -> Option<&'static str> {
    offered
        .iter()
        .find_map(|o| supported.iter().find(|s| *s == o).copied())
}

/// Picks the transport and subprotocol: SPDY with one of `spdy_protocols` among
/// `X-Stream-Protocol-Version` (the last, oldest one when the client offers none), or a
/// WebSocket with one of `websocket_protocols` among `Sec-WebSocket-Protocol` (`""` among them:
/// a client that offers none is served too).
pub fn negotiate(
    headers: &HeaderMap,
    spdy_protocols: &[&'static str],
    websocket_protocols: &[&'static str],
) -> Result<Transport, String> {
    let upgrade = headers
        .get(UPGRADE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_ascii_lowercase();
    let (offered, supported, transport): (_, _, fn(&'static str) -> Transport) =
        if upgrade == "websocket" {
            let mut offered = header_values(headers, "sec-websocket-protocol");
            if offered.is_empty() {
                offered.push(String::new());
            }
            (offered, websocket_protocols, Transport::WebSocket)
        } else if upgrade.starts_with("spdy/3.1") {
            let offered = header_values(headers, "x-stream-protocol-version");
            // A client that offers none predates negotiation (kube 1.0): kubelet's handshake
            // serves it the oldest protocol.
            if offered.is_empty()
                && let Some(oldest) = spdy_protocols.last()
            {
                return Ok(Transport::Spdy(oldest));
            }
            (offered, spdy_protocols, Transport::Spdy)
        } else {
            return Err("Upgrade request required".into());
        };
    first_shared(&offered, supported).map(transport).ok_or_else(|| {
        format!("unable to upgrade: unable to negotiate protocol: client supports {offered:?}, server supports {supported:?}")
    })
}

/// The 101 answer of a negotiated transport (for a WebSocket, with the handshake's accept key).
pub fn switching(transport: Transport, request: &HeaderMap) -> Response<Body> {
    let mut response = Response::new(Empty::new().map_err(|never| match never {}).boxed());
    *response.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let headers = response.headers_mut();
    headers.insert(CONNECTION, HeaderValue::from_static("Upgrade"));
    match transport {
        Transport::Spdy(protocol) => {
            headers.insert(UPGRADE, HeaderValue::from_static("SPDY/3.1"));
            headers.insert(
                "x-stream-protocol-version",
                HeaderValue::from_static(protocol),
            );
        }
        Transport::WebSocket(protocol) => {
            headers.insert(UPGRADE, HeaderValue::from_static("websocket"));
            let key = request
                .get("sec-websocket-key")
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default();
            if let Ok(value) = HeaderValue::from_str(&crate::websocket::accept_key(key)) {
                headers.insert("sec-websocket-accept", value);
            }
            if !protocol.is_empty() {
                headers.insert("sec-websocket-protocol", HeaderValue::from_static(protocol));
            }
        }
    }
    response
}

/// What the exchange does: run a command, or show the container's own output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Exec,
    Attach,
}

/// How a command (or the attached output) is started once the client's streams are there.
pub type Start = Box<dyn FnOnce(&ExecOptions) -> Result<Running, String> + Send>;

/// Runs the request's command in the namespaces of the container's main process `pid`.
fn exec_start(ctx: &Ctx, found: &Pod, target: (&str, &str, &str), pid: u32) -> Start {
    let (namespace, pod, container) = target;
    let image = container_spec(found, container)
        .and_then(|c| c.image.clone())
        .unwrap_or_default();
    let image_commands = ctx
        .settings
        .images
        .entry(&image)
        .map(|entry| entry.commands.clone())
        .unwrap_or_default();
    let spec_dir = ctx.settings.pod_dir(namespace, pod).join("specs");
    let agent_exe = ctx.settings.agent_exe.clone();
    Box::new(move |options: &ExecOptions| -> Result<Running, String> {
        let env = exec_process::environment(pid);
        let spec = ExecSpec {
            program: probes::exec_program(&options.command[0], &image_commands, &env),
            argv: options.command.clone(),
            env,
            workdir: exec_process::working_directory(pid),
            netns: None,
            join_pid: Some(pid),
            hostname: None,
            mounts: Vec::new(),
        };
        exec_process::start(exec_process::Request {
            agent_exe,
            spec,
            spec_file: spec_dir.join(format!("exec-{}.json", crate::names::random_suffix())),
            stdin: options.stdin,
            tty: options.tty,
        })
        .map_err(|e| format!("starting the command: {e}"))
    })
}

pub fn serve(
    ctx: &Arc<Ctx>,
    mut request: Request<Incoming>,
    target: (&str, &str, &str),
    mode: Mode,
) -> Response<Body> {
    let (namespace, pod, container) = target;
    let Some(found) = pod_of_node(ctx, namespace, pod) else {
        return text(
            StatusCode::NOT_FOUND,
            format!("pod {namespace}/{pod} not found"),
        );
    };
    if !has_container(&found, container) {
        return text(
            StatusCode::BAD_REQUEST,
            format!("container {container} is not valid for pod {pod}"),
        );
    }
    let Some(pid) = running_pid(ctx, namespace, pod, container) else {
        return text(
            StatusCode::BAD_REQUEST,
            format!("container not found ({container:?})"),
        );
    };
    let options = ExecOptions::parse(request.uri().query().unwrap_or_default());
    if let Err(message) = options.validate() {
        return text(StatusCode::BAD_REQUEST, message);
    }
    let start = match mode {
        Mode::Exec if options.command.is_empty() => {
            return text(
                StatusCode::BAD_REQUEST,
                "you must specify at least one command for the container",
            );
        }
        Mode::Exec => exec_start(ctx, &found, (namespace, pod, container), pid),
        Mode::Attach => {
            match attach::start(ctx, &found, (namespace, pod, container), pid, &options) {
                Ok(start) => start,
                Err(message) => return text(StatusCode::BAD_REQUEST, message),
            }
        }
    };
    let transport = match negotiate(
        request.headers(),
        &exec_spdy::PROTOCOLS,
        &exec_websocket::PROTOCOLS,
    ) {
        Ok(transport) => transport,
        Err(message) => return text(StatusCode::FORBIDDEN, message),
    };
    let action = match mode {
        Mode::Exec => "exec",
        Mode::Attach => "attach",
    };
    tracing::info!(pod = %format!("{namespace}/{pod}"), container, transport = %transport.name(), command = ?options.command, "{action}");
    let response = switching(transport, request.headers());
    let upgrade = hyper::upgrade::on(&mut request);
    tokio::spawn(async move {
        let io = match upgrade.await {
            Ok(upgraded) => TokioIo::new(upgraded),
            Err(error) => {
                tracing::debug!(%error, "exec upgrade did not complete");
                return;
            }
        };
        match transport {
            Transport::Spdy(protocol) => exec_spdy::serve(io, protocol, options, start).await,
            Transport::WebSocket(protocol) => {
                exec_websocket::serve(io, protocol, options, start).await
            }
        }
    });
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The headers of a request carrying `pairs`.
    fn sent(pairs: &[(&str, &str)]) -> HeaderMap {
        pairs
            .iter()
            .fold(http::Request::builder(), |request, (name, value)| {
                request.header(*name, *value)
            })
            .body(())
            .unwrap()
            .into_parts()
            .0
            .headers
    }

    #[test]
    fn the_upgrade_picks_the_transport_in_the_clients_order() {
        let spdy_protocols = ["v4.channel.k8s.io", "v3.channel.k8s.io"];
        let websocket_protocols = ["v5.channel.k8s.io", "v4.channel.k8s.io", ""];
        let spdy = sent(&[
            ("Upgrade", "SPDY/3.1"),
            ("X-Stream-Protocol-Version", "v3.channel.k8s.io"),
            ("X-Stream-Protocol-Version", "v4.channel.k8s.io"),
        ]);
        assert_eq!(
            negotiate(&spdy, &spdy_protocols, &websocket_protocols),
            Ok(Transport::Spdy("v3.channel.k8s.io"))
        );
        let websocket = sent(&[
            ("Upgrade", "websocket"),
            (
                "Sec-WebSocket-Protocol",
                "v4.channel.k8s.io, v5.channel.k8s.io",
            ),
        ]);
        assert_eq!(
            negotiate(&websocket, &spdy_protocols, &websocket_protocols),
            Ok(Transport::WebSocket("v4.channel.k8s.io"))
        );
        let none = sent(&[("Upgrade", "websocket")]);
        assert_eq!(
            negotiate(&none, &spdy_protocols, &websocket_protocols),
            Ok(Transport::WebSocket(""))
        );
        assert!(negotiate(&none, &spdy_protocols, &["v5.channel.k8s.io"]).is_err());
        let old = sent(&[
            ("Upgrade", "SPDY/3.1"),
            ("X-Stream-Protocol-Version", "channel.k8s.io"),
        ]);
        assert!(negotiate(&old, &spdy_protocols, &[]).is_err());
        assert!(negotiate(&HeaderMap::new(), &spdy_protocols, &[]).is_err());
        let unversioned = sent(&[("Upgrade", "SPDY/3.1")]);
        assert_eq!(
            negotiate(&unversioned, &spdy_protocols, &[]),
            Ok(Transport::Spdy("v3.channel.k8s.io"))
        );
    }

    #[test]
    fn the_websocket_answer_carries_the_handshake() {
        let request = sent(&[("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")]);
        let response = switching(Transport::WebSocket("v5.channel.k8s.io"), &request);
        assert_eq!(response.status(), StatusCode::SWITCHING_PROTOCOLS);
        assert_eq!(
            response.headers()["sec-websocket-accept"],
            "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
        );
        assert_eq!(
            response.headers()["sec-websocket-protocol"],
            "v5.channel.k8s.io"
        );
    }
}
