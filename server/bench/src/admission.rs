//! Admission figures (issue 16): what a validating webhook and a ValidatingAdmissionPolicy add to
//! a ConfigMap create, measured through the real server.
//!
//! Five phases create ConfigMaps at the same rate in logical cluster `root`: with nothing
//! configured, with one ValidatingWebhookConfiguration matching ConfigMap creates (its webhook is
//! served by this command on 127.0.0.1 over HTTPS with a CA it makes, and allows everything), with
//! nothing again (the webhook configuration deleted), with one ValidatingAdmissionPolicy of three
//! CEL validations bound to ConfigMaps, and with nothing once more. Each configured phase is
//! compared with the mean of the unconfigured phases around it, so drift over the run (a growing
//! namespace, other work on the machine) cancels out: latency (p50, p99) beyond the webhook's own
//! handling time, and server CPU per request, the steadier figure on a busy machine. kube-apiserver
//! pays the same HTTPS round trip per webhook; the goals are p50 <= 1 ms added by a webhook and
//! <= 20 us of CPU per request for the policy.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use kcp_apimachinery::duration::parse_or_seconds;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, SanType};
use serde::Serialize;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::authz::{Object, create_all, outcome};
use crate::client::{Client, ClientError, Protocol};
use crate::kubeconfig::{KubeconfigError, Target};
use crate::load::{self, LoadError, check, to_bytes};
use crate::report::{LoadReport, Overhead, ServerReport};
use crate::schedule::{self, Plan};
use crate::server::{Server, ServerArgs, ServerError};
use crate::stats::PhaseReport;

const ADMISSION: &str = "/apis/admissionregistration.k8s.io/v1";
const NAMESPACE: &str = "bench-admission";

/// Options of the `admission` command (besides the server options).
#[derive(Debug, Clone, clap::Args)]
pub struct AdmissionArgs {
    /// Creates per second of each phase, scheduled on a clock (open loop).
    #[arg(long, default_value_t = 200.0)]
    pub rate: f64,
    /// Length of each phase (e.g. 10s, 500ms, 1m).
    #[arg(long, default_value = "10s", value_parser = parse_or_seconds)]
    pub duration: Duration,
    /// Connections (HTTP/2).
    #[arg(long, default_value_t = 4)]
    pub concurrency: usize,
    /// How long a phase waits for outstanding requests after the last is due.
    #[arg(long, default_value = "10s", value_parser = parse_or_seconds)]
    pub drain: Duration,
}

/// Why the admission figures could not be produced.
#[derive(Debug, thiserror::Error)]
pub enum AdmissionError {
    #[error(transparent)]
    Load(#[from] LoadError),
    #[error(transparent)]
    Server(#[from] ServerError),
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error(transparent)]
    Kubeconfig(#[from] KubeconfigError),
    #[error(transparent)]
    Setup(#[from] crate::authz::AuthzError),
    #[error("making the webhook's certificates: {0}")]
    Certificate(#[from] rcgen::Error),
    #[error("serving the webhook: {0}")]
    Webhook(String),
}

/// What `admission` prints.
#[derive(Debug, Serialize)]
pub struct AdmissionReport {
    pub load: LoadReport,
    /// The webhook phase minus the mean of the plain phases around it, less the webhook's own
    /// mean handling time.
    pub webhook: Overhead,
    /// Mean time the webhook spent on one review (parse, answer), in microseconds.
    pub webhook_handler_us: Option<f64>,
    /// Reviews the webhook answered.
    pub webhook_reviews: u64,
    /// The policy phase minus the mean of the plain phases around it.
    pub policy: Overhead,
}

/// Starts a server, runs the three phases, stops it.
pub async fn run(
    server: &ServerArgs,
    args: &AdmissionArgs,
) -> Result<AdmissionReport, AdmissionError> {
    let plan = Plan::new(args.rate, args.duration, None).map_err(LoadError::from)?;
    let started = Server::start(server).await?;
    tokio::time::sleep(Duration::from_secs(server.idle_seconds)).await;
    let idle = started.memory()?;
    let webhook = WebhookServer::start().await?;
    let result = measure(&started, args, &plan, &webhook).await;
    webhook.stop.cancel();
    let after_load = started.memory();
    let startup_ms = started.startup.as_secs_f64() * 1e3;
    let stopped = started.stop().await?;
    let mut report = result?;
    report.server = Some(ServerReport {
        backend: server.backend,
        startup_ms,
        idle,
        after_load: Some(after_load?),
        after_cleanup: None,
        stopped: Some(stopped),
    });
    let reviews = webhook.reviews.load(Ordering::Relaxed);
    let handler_us = (reviews > 0)
        .then(|| webhook.handler_ns.load(Ordering::Relaxed) as f64 / reviews as f64 / 1e3);
    let (webhook_overhead, policy) = match report.phases.as_slice() {
        [before, webhooked, between, policed, after, ..] => {
            let mut added = Overhead::against_mean(before, between, webhooked);
            let own_ms = handler_us.unwrap_or(0.0) / 1e3;
            added.p50_ms = added.p50_ms.map(|ms| ms - own_ms);
            added.p99_ms = added.p99_ms.map(|ms| ms - own_ms);
            (added, Overhead::against_mean(between, after, policed))
        }
        _ => (Overhead::default(), Overhead::default()),
    };
    Ok(AdmissionReport {
        load: report,
        webhook: webhook_overhead,
        webhook_handler_us: handler_us,
        webhook_reviews: reviews,
        policy,
    })
}

async fn measure(
    started: &Server,
    args: &AdmissionArgs,
    plan: &Plan,
    webhook: &WebhookServer,
) -> Result<LoadReport, AdmissionError> {
    let target = Target::from_file(&started.kubeconfig, None)?;
    let connections = args.concurrency.max(1);
    let admin = Arc::new(Client::new(target, Protocol::Http2, connections)?);
    admin.warm_up().await?;
    let namespace = Object {
        path: "/api/v1/namespaces".into(),
        body: json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}),
    };
    create_all(&admin, vec![namespace], 1).await?;
    let pid = Some(started.pid());
    let mut phases = Vec::new();
    let plain = "create configmap (no admission)";
    phases.push(creates(&admin, plan, args, pid, plain, "plain-a").await?);

    let configuration = webhook.configuration();
    post(
        &admin,
        &format!("{ADMISSION}/validatingwebhookconfigurations"),
        &configuration,
    )
    .await?;
    phases.push(
        creates(
            &admin,
            plan,
            args,
            pid,
            "create configmap (validating webhook)",
            "hooked",
        )
        .await?,
    );
    delete(&admin, "validatingwebhookconfigurations").await?;
    phases.push(creates(&admin, plan, args, pid, plain, "plain-b").await?);

    post(
        &admin,
        &format!("{ADMISSION}/validatingadmissionpolicies"),
        &policy(),
    )
    .await?;
    post(
        &admin,
        &format!("{ADMISSION}/validatingadmissionpolicybindings"),
        &binding(),
    )
    .await?;
    phases.push(
        creates(
            &admin,
            plan,
            args,
            pid,
            "create configmap (VAP, 3 CEL rules)",
            "policed",
        )
        .await?,
    );
    delete(&admin, "validatingadmissionpolicybindings").await?;
    phases.push(creates(&admin, plan, args, pid, plain, "plain-c").await?);
    Ok(LoadReport {
        protocol: "HTTP/2",
        concurrency: connections,
        loadavg: crate::server::loadavg(),
        server: None,
        phases,
    })
}

/// Deletes the object named `bench` in the admissionregistration collection `plural`.
async fn delete(client: &Client, plural: &str) -> Result<(), AdmissionError> {
    let path = format!("{ADMISSION}/{plural}/bench");
    let reply = client.request(Method::DELETE, &path, None).await?;
    check(&format!("deleting {path}"), reply)?;
    Ok(())
}

async fn post(client: &Client, path: &str, body: &Value) -> Result<(), AdmissionError> {
    let reply = client
        .request(Method::POST, path, Some(to_bytes(body)))
        .await?;
    check(&format!("creating in {path}"), reply)?;
    Ok(())
}

/// One phase: ConfigMaps `<prefix>-<n>` created at the plan's rate, each expected to be allowed.
async fn creates(
    client: &Arc<Client>,
    plan: &Plan,
    args: &AdmissionArgs,
    pid: Option<u32>,
    label: &str,
    prefix: &str,
) -> Result<PhaseReport, AdmissionError> {
    tracing::info!(phase = label, "phase starting");
    let path = format!("/api/v1/namespaces/{NAMESPACE}/configmaps");
    let report = load::with_server_cpu(pid, async {
        let run = schedule::drive(plan, args.drain, |n| {
            let client = client.clone();
            let path = path.clone();
            let body = to_bytes(&json!({
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": format!("{prefix}-{n}"), "labels": {"app": "bench"}},
                "data": {"payload": "x".repeat(256)},
            }));
            async move {
                outcome(
                    client.request(Method::POST, &path, Some(body)).await,
                    StatusCode::CREATED,
                )
            }
        })
        .await;
        Ok(PhaseReport::of(label, plan.rate(), &run))
    })
    .await?;
    tracing::info!(
        phase = label,
        ok = report.ok,
        requests = report.requests,
        "phase done"
    );
    Ok(report)
}

/// Three validations every benchmark ConfigMap passes, of the kinds policies use: a label, a size
/// bound over a map, a string rule.
fn policy() -> Value {
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "bench"},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{
                "apiGroups": [""], "apiVersions": ["v1"],
                "operations": ["CREATE", "UPDATE"], "resources": ["configmaps"]}]},
            "validations": [
                {"expression": "has(object.metadata.labels) && 'app' in object.metadata.labels"},
                {"expression": "!has(object.data) || size(object.data) <= 16"},
                {"expression": "object.metadata.name.startsWith('policed-') || object.metadata.name.size() < 64"}
            ]
        }
    })
}

fn binding() -> Value {
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": "bench"},
        "spec": {"policyName": "bench", "validationActions": ["Deny"]}
    })
}

/// The webhook: HTTPS on 127.0.0.1 with its own CA, allowing every review.
struct WebhookServer {
    address: SocketAddr,
    ca_pem: String,
    reviews: Arc<AtomicU64>,
    handler_ns: Arc<AtomicU64>,
    stop: CancellationToken,
}

impl WebhookServer {
    async fn start() -> Result<WebhookServer, AdmissionError> {
        let ca_key = KeyPair::generate()?;
        let mut ca_params = CertificateParams::default();
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "kcp-bench webhook CA");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca = ca_params.self_signed(&ca_key)?;
        let issuer = Issuer::new(ca_params, ca_key);
        let mut params = CertificateParams::default();
        params
            .distinguished_name
            .push(DnType::CommonName, "kcp-bench webhook");
        params.subject_alt_names = vec![SanType::IpAddress([127, 0, 0, 1].into())];
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &issuer)?;
        let tls = rustls::ServerConfig::builder()
            .with_no_client_auth()
            .with_single_cert(
                vec![cert.der().clone()],
                rustls_pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
            )
            .map_err(|e| AdmissionError::Webhook(e.to_string()))?;
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| AdmissionError::Webhook(e.to_string()))?;
        let address = listener
            .local_addr()
            .map_err(|e| AdmissionError::Webhook(e.to_string()))?;
        let reviews = Arc::new(AtomicU64::new(0));
        let handler_ns = Arc::new(AtomicU64::new(0));
        let stop = CancellationToken::new();
        let counters = (reviews.clone(), handler_ns.clone());
        let stopped = stop.clone();
        tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    _ = stopped.cancelled() => return,
                    accepted = listener.accept() => accepted,
                };
                let Ok((stream, _)) = accepted else { continue };
                let acceptor = acceptor.clone();
                let (reviews, handler_ns) = (counters.0.clone(), counters.1.clone());
                tokio::spawn(async move {
                    let Ok(stream) = acceptor.accept(stream).await else {
                        return;
                    };
                    let service = hyper::service::service_fn(move |request| {
                        review(request, reviews.clone(), handler_ns.clone())
                    });
                    let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Ok(WebhookServer {
            address,
            ca_pem: ca.pem(),
            reviews,
            handler_ns,
            stop,
        })
    }

    fn configuration(&self) -> Value {
        use base64::Engine as _;
        json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "bench"},
            "webhooks": [{
                "name": "allow.bench.kcp.io",
                "clientConfig": {
                    "url": format!("https://{}/validate", self.address),
                    "caBundle": base64::engine::general_purpose::STANDARD.encode(&self.ca_pem),
                },
                "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                    "resources": ["configmaps"]}],
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
                "failurePolicy": "Fail",
                "timeoutSeconds": 5
            }]
        })
    }
}

/// Answers one AdmissionReview: allowed, with the request's uid.
async fn review(
    request: Request<Incoming>,
    reviews: Arc<AtomicU64>,
    handler_ns: Arc<AtomicU64>,
) -> Result<Response<Full<Bytes>>, std::convert::Infallible> {
    let body = match request.into_body().collect().await {
        Ok(body) => body.to_bytes(),
        Err(_) => Bytes::new(),
    };
    let began = Instant::now();
    let uid = serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|review| review.pointer("/request/uid").cloned())
        .unwrap_or(Value::Null);
    let answer = json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {"uid": uid, "allowed": true}
    });
    let bytes = Bytes::from(answer.to_string());
    handler_ns.fetch_add(began.elapsed().as_nanos() as u64, Ordering::Relaxed);
    reviews.fetch_add(1, Ordering::Relaxed);
    let mut response = Response::new(Full::new(bytes));
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    Ok(response)
}
