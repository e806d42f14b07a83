//! `/healthz`, `/livez`, `/readyz` with named checks, as kube-apiserver serves them: `ok` when all
//! pass, a `[+]name ok` / `[-]name failed` listing with `?verbose` or on failure, and `/readyz/<name>`
//! for one check.
//!
//! The check of what a shard sets up before serving (system types, `system:` clusters, and on
//! the root shard `root`; on other shards root's copies from the cache) carries the name of
//! upstream kcp's post-start hook that covers the same phase, `kcp-start-informers`, on every
//! shard.

use std::time::Duration;

use http::Response;

use super::Scope;
use super::response::{self, Body};

/// One named check and whether it passed.
struct Check {
    name: &'static str,
    ok: bool,
}

async fn checks(scope: &Scope<'_>, bootstrapped: bool, endpoint: &str) -> Vec<Check> {
    let storage_ok = matches!(
        tokio::time::timeout(
            Duration::from_secs(2),
            scope.store.objects().current_revision()
        )
        .await,
        Ok(Ok(_))
    );
    let mut checks = vec![
        Check {
            name: "ping",
            ok: true,
        },
        Check {
            name: "log",
            ok: true,
        },
    ];
    checks.push(Check {
        name: "etcd",
        ok: storage_ok,
    });
    checks.push(Check {
        name: "poststarthook/kcp-start-informers",
        ok: bootstrapped,
    });
    if endpoint == "readyz" {
        checks.push(Check {
            name: "shutdown",
            ok: !scope.shutdown.is_cancelled(),
        });
    }
    checks
}

/// Serves `/<endpoint>` and `/<endpoint>/<check>` (`bootstrapped`: whether what must exist before
/// the first request does); `None` if the path is not a health path.
pub async fn serve(
    scope: &Scope<'_>,
    bootstrapped: bool,
    path: &str,
    query: Option<&str>,
) -> Option<Response<Body>> {
    let mut parts = path.trim_matches('/').splitn(2, '/');
    let endpoint = parts.next()?;
    if !matches!(endpoint, "healthz" | "livez" | "readyz") {
        return None;
    }
    let checks = checks(scope, bootstrapped, endpoint).await;
    if let Some(single) = parts.next() {
        return Some(match checks.iter().find(|c| c.name == single) {
            Some(check) if check.ok => response::text(200, "ok"),
            Some(check) => response::text(
                500,
                format!("internal server error: {} check failed", check.name),
            ),
            None => response::text(404, "404 page not found"),
        });
    }
    let verbose = query.is_some_and(|q| {
        q.split('&')
            .any(|p| p == "verbose" || p.starts_with("verbose="))
    });
    let healthy = checks.iter().all(|c| c.ok);
    if healthy && !verbose {
        return Some(response::text(200, "ok"));
    }
    let mut text = String::new();
    for check in &checks {
        text.push_str(&format!(
            "[{}]{} {}\n",
            if check.ok { '+' } else { '-' },
            check.name,
            if check.ok {
                "ok"
            } else {
                "failed: reason withheld"
            }
        ));
    }
    text.push_str(&format!(
        "{endpoint} check {}\n",
        if healthy { "passed" } else { "failed" }
    ));
    Some(response::text(if healthy { 200 } else { 500 }, text))
}
