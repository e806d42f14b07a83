//! The HTTP endpoints in process: `/metrics`, the status page, `/healthz` and `/readyz` served by hyper on
//! 127.0.0.1 port 0, asked with plain HTTP/1.1 requests, then shut down gracefully.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use kcp_operator::controller::Metrics;
use kcp_operator::manager::health::{Health, Phase};
use kcp_operator::manager::http::{self, Reply};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

async fn start<R>(reply: R) -> (SocketAddr, CancellationToken, JoinHandle<()>)
where
    R: Fn(&str) -> Reply + Clone + Send + Sync + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("address");
    let stop = CancellationToken::new();
    let server = tokio::spawn(http::serve(listener, reply, stop.clone()));
    (address, stop, server)
}

/// Status line, headers and body of one request.
async fn request(address: SocketAddr, method: &str, path: &str) -> (u16, String, String) {
    let mut stream = TcpStream::connect(address).await.expect("connect");
    stream
        .write_all(
            format!("{method} {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        )
        .await
        .expect("send");
    let mut response = String::new();
    stream.read_to_string(&mut response).await.expect("read");
    let (head, body) = response.split_once("\r\n\r\n").expect("head and body");
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .expect("status code");
    (status, head.to_lowercase(), body.to_owned())
}

async fn stop(stop: CancellationToken, server: JoinHandle<()>) {
    stop.cancel();
    tokio::time::timeout(Duration::from_secs(2), server)
        .await
        .expect("server stops")
        .expect("server task");
}

#[tokio::test]
async fn metrics_after_reconciles() {
    let metrics = Arc::new(Metrics::default());
    let served = metrics.clone();
    let (address, token, server) = start(move |path| http::metrics_reply(&served, path)).await;

    metrics.reconciled("rootshard", Duration::from_millis(12), false);
    metrics.reconciled("rootshard", Duration::from_millis(30), true);
    metrics.reconciled("kubeconfig", Duration::from_millis(1), false);
    let (status, head, body) = request(address, "GET", "/metrics").await;
    assert_eq!(status, 200);
    assert!(
        head.contains("content-type: application/openmetrics-text"),
        "{head}"
    );
    for line in [
        "kcp_operator_reconcile_total{controller=\"rootshard\"} 2",
        "kcp_operator_reconcile_errors_total{controller=\"rootshard\"} 1",
        "kcp_operator_reconcile_total{controller=\"kubeconfig\"} 1",
        "kcp_operator_reconcile_duration_seconds_count{controller=\"rootshard\"} 2",
        "kcp_operator_leader 0",
    ] {
        assert!(body.lines().any(|l| l == line), "{line} missing in\n{body}");
    }

    metrics.set_leader(true);
    let (_, _, body) = request(address, "GET", "/metrics").await;
    assert!(body.lines().any(|l| l == "kcp_operator_leader 1"), "{body}");

    assert_eq!(request(address, "GET", "/healthz").await.0, 404);
    assert_eq!(request(address, "POST", "/metrics").await.0, 405);
    stop(token, server).await;
    assert!(
        TcpStream::connect(address).await.is_err(),
        "listener closed after shutdown"
    );
}

#[tokio::test]
async fn probes_follow_the_phase() {
    let health = Arc::new(Health::default());
    let served = health.clone();
    let (address, token, server) = start(move |path| http::health_reply(&served, path)).await;

    for (phase, ready) in [
        (Phase::Starting, false),
        (Phase::Standby, true),
        (Phase::Leading, false),
        (Phase::Synced, true),
    ] {
        health.set(phase);
        let (status, _, body) = request(address, "GET", "/healthz").await;
        assert_eq!((status, body.as_str()), (200, "ok\n"), "{phase:?}");
        let (status, _, body) = request(address, "GET", "/readyz").await;
        assert_eq!(status, if ready { 200 } else { 503 }, "{phase:?}");
        assert_eq!(body, format!("{}\n", phase.describe()));
    }
    assert_eq!(request(address, "HEAD", "/readyz").await.0, 200);
    assert_eq!(request(address, "GET", "/metrics").await.0, 404);
    stop(token, server).await;
}

#[tokio::test]
async fn shutdown_closes_idle_connections() {
    let (address, token, server) =
        start(|_: &str| http::health_reply(&Health::default(), "/healthz")).await;
    // A keep-alive connection that already got its answer does not hold the shutdown back.
    let mut idle = TcpStream::connect(address).await.expect("connect");
    idle.write_all(b"GET /healthz HTTP/1.1\r\nHost: test\r\n\r\n")
        .await
        .expect("send");
    let mut buffer = [0u8; 256];
    let read = idle.read(&mut buffer).await.expect("answer");
    assert!(String::from_utf8_lossy(&buffer[..read]).starts_with("HTTP/1.1 200"));
    stop(token, server).await;
    assert_eq!(
        idle.read(&mut buffer).await.expect("closed"),
        0,
        "connection closed"
    );
}

#[tokio::test]
async fn the_metrics_port_serves_the_status_page_at_the_root() {
    let metrics = Arc::new(Metrics::default());
    let caches = Arc::new(kcp_operator::status_page::Caches::default());
    let health = Arc::new(Health::default());
    health.set(Phase::Standby);
    let (served, pages, phase) = (metrics.clone(), caches.clone(), health.clone());
    let (address, token, server) = start(move |path| {
        http::metrics_port_reply(
            &served,
            || pages.render(phase.phase(), jiff::Timestamp::now()),
            path,
        )
    })
    .await;

    let (status, head, body) = request(address, "GET", "/").await;
    assert_eq!(status, 200);
    assert!(head.contains("content-type: text/html"), "{head}");
    assert!(
        body.contains("<title>kcp-operator status</title>"),
        "{body}"
    );
    assert!(
        body.contains(r#"id="standby""#),
        "a standby says so: {body}"
    );
    assert!(
        body.contains(r#"id="not-synced""#),
        "no watch has listed yet: {body}"
    );
    let (status, head, _) = request(address, "GET", "/metrics").await;
    assert_eq!(status, 200);
    assert!(head.contains("openmetrics"), "{head}");
    assert_eq!(request(address, "GET", "/status").await.0, 404);
    stop(token, server).await;

    let failing = http::metrics_port_reply(
        &metrics,
        || Err::<String, _>(std::io::Error::other("template broke")),
        "/",
    );
    assert_eq!(failing.status, 500);
    assert!(failing.body.contains("template broke"), "{}", failing.body);
}
