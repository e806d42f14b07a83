//! kubelet's `GET /containerLogs/<namespace>/<pod>/<container>`: a container's log from the
//! agent's run logs ([`crate::container_log`]), with the options of `kubectl logs`
//! ([`crate::log_reader`]). Errors are kubelet's: plain text, 404 for a pod it does not know,
//! 400 for a container that has not run (`... is waiting to start`) or has no previous run.

use std::sync::Arc;

use bytes::Bytes;
use http::{Response, StatusCode};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use k8s_openapi::api::core::v1::{Container, ContainerStatus, Pod};
use kube::runtime::reflector::ObjectRef;
use tokio::sync::mpsc;

use crate::container_log;
use crate::context::Ctx;
use crate::kubelet_server::{Body, text};
use crate::log_reader::{self, LogOptions, Source};

/// The status of a container (or init container) of a pod.
pub fn container_status<'a>(pod: &'a Pod, container: &str) -> Option<&'a ContainerStatus> {
    let status = pod.status.as_ref()?;
    status
        .container_statuses
        .iter()
        .chain(status.init_container_statuses.iter())
        .flatten()
        .find(|c| c.name == container)
}

/// The spec of a pod's container (init and sidecar containers included).
pub fn container_spec<'a>(pod: &'a Pod, container: &str) -> Option<&'a Container> {
    let spec = pod.spec.as_ref()?;
    spec.containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .find(|c| c.name == container)
}

/// Whether a pod's spec has this container.
pub fn has_container(pod: &Pod, container: &str) -> bool {
    container_spec(pod, container).is_some()
}

/// The pod of this node named so, from the agent's cache.
pub fn pod_of_node(ctx: &Ctx, namespace: &str, name: &str) -> Option<Arc<Pod>> {
    let pod = ctx
        .cache
        .pods
        .get(&ObjectRef::new(name).within(namespace))?;
    let node = pod.spec.as_ref().and_then(|s| s.node_name.as_deref());
    (node == Some(ctx.settings.node_name.as_str())).then_some(pod)
}

/// Whether run `run` of a container may still write: it is the latest run and the container
/// runs.
pub fn run_goes_on(
    ctx: &Arc<Ctx>,
    namespace: &str,
    pod: &str,
    container: &str,
    run: u32,
) -> impl Fn() -> bool + Send + 'static {
    let ctx = ctx.clone();
    let (namespace, pod, container) = (namespace.to_owned(), pod.to_owned(), container.to_owned());
    move || {
        container_log::runs(&ctx.settings.pod_dir(&namespace, &pod), &container).last()
            == Some(&run)
            && pod_of_node(&ctx, &namespace, &pod).is_some_and(|pod| {
                container_status(&pod, &container)
                    .and_then(|c| c.state.as_ref())
                    .is_some_and(|s| s.running.is_some())
            })
    }
}

pub fn serve(
    ctx: &Arc<Ctx>,
    namespace: &str,
    pod_name: &str,
    container: &str,
    query: &str,
) -> Response<Body> {
    let Some(pod) = pod_of_node(ctx, namespace, pod_name) else {
        return text(
            StatusCode::NOT_FOUND,
            format!("pod {namespace}/{pod_name} not found"),
        );
    };
    if !has_container(&pod, container) {
        return text(
            StatusCode::BAD_REQUEST,
            format!("container {container} is not valid for pod {pod_name}"),
        );
    }
    let options = match LogOptions::parse(query, jiff::Timestamp::now()) {
        Ok(options) => options,
        Err(message) => return text(StatusCode::BAD_REQUEST, message),
    };
    let pod_dir = ctx.settings.pod_dir(namespace, pod_name);
    let runs = container_log::runs(&pod_dir, container);
    let wanted = if options.previous {
        runs.len().checked_sub(2).map(|i| runs[i])
    } else {
        runs.last().copied()
    };
    let Some(run) = wanted else {
        let message = if options.previous {
            format!("previous terminated container {container:?} in pod {pod_name:?} not found")
        } else {
            let reason = container_status(&pod, container)
                .and_then(|c| c.state.as_ref()?.waiting.as_ref()?.reason.clone())
                .unwrap_or_else(|| "ContainerCreating".into());
            format!("container {container:?} in pod {pod_name:?} is waiting to start: {reason}")
        };
        return text(StatusCode::BAD_REQUEST, message);
    };
    let running: Box<dyn Fn() -> bool + Send> = if options.previous {
        Box::new(|| false)
    } else {
        Box::new(run_goes_on(ctx, namespace, pod_name, container, run))
    };
    let source = Source {
        file: container_log::run_log(&pod_dir, container, run),
        running,
    };
    let (tx, rx) = mpsc::channel::<Bytes>(16);
    tokio::spawn(log_reader::send(source, options, tx));
    let frames = futures::stream::unfold(rx, |mut rx| async move {
        let chunk = rx.recv().await?;
        Some((Ok(Frame::data(chunk)), rx))
    });
    let mut response = Response::new(BodyExt::boxed(StreamBody::new(frames)));
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain"),
    );
    response
}
