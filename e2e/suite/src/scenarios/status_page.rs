//! Scenario 12: the operator's status page in a real browser. With the full deployment of
//! scenario 8 running, headless Chromium opens `/` on the operator's metrics Service (reached the
//! way the suite reaches every in-cluster Service), the page must name every CacheServer,
//! RootShard, Shard and FrontProxy with the phase its status reports, and the screenshot is
//! kept as an artifact under the target directory (`<target>/<profile>/e2e-artifacts/`). Then
//! the operator's requests to its cluster are counted over a minute of idleness (its
//! `kcp_operator_api_requests_total` on the same port), and on the local host (where the suite
//! sees the operator's process, as for its RSS) the CPU time it used over that minute: figures,
//! issue 24's "no hot loop".

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::time::Duration;

use kcp_testing::binaries::profile_dir;

use super::chart::{OPERATOR_NAMESPACE, RELEASE};
use super::{CACHE_SERVER, FRONT_PROXY, NAMESPACE, POLL, ROOT_SHARD, SHARD, SHARD_KIND, Suite};
use crate::Outcome;
use crate::browser::Chromium;
use crate::cluster::{Cluster, eventually};

/// The port of the chart's metrics Service (`metrics.service.port`).
pub const METRICS_PORT: u16 = 8080;
/// How long the idle operator's requests are counted.
const IDLE_WINDOW: Duration = Duration::from_secs(60);
/// The operator's counter of its requests to the host cluster, by verb.
const API_REQUESTS: &str = "kcp_operator_api_requests_total{verb=\"";

/// The chart's metrics Service, in front of `/metrics` and the status page.
pub fn metrics_service() -> String {
    format!("{RELEASE}-metrics")
}

/// Where the suite keeps what a person may want to look at after a run.
pub fn artifacts_dir() -> Result<PathBuf, String> {
    let dir = profile_dir().join("e2e-artifacts");
    std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    Ok(dir)
}

/// The components of the full deployment: the kind the page names, kubectl's name for it, the
/// object's name.
const COMPONENTS: [(&str, &str, &str); 4] = [
    ("CacheServer", "cacheserver", CACHE_SERVER),
    ("RootShard", "rootshard", ROOT_SHARD),
    ("Shard", SHARD_KIND, SHARD),
    ("FrontProxy", "frontproxy", FRONT_PROXY),
];

/// What `dom` lacks of the summary row of every component with its current phase.
fn missing_rows(dom: &str, admin: &Cluster) -> Result<Vec<String>, String> {
    let mut missing = Vec::new();
    for (kind, resource, name) in COMPONENTS {
        let object = admin
            .get(&[resource, "-n", NAMESPACE, name])?
            .ok_or_else(|| format!("no {kind} {name}"))?;
        let phase = object["status"]["phase"].as_str().unwrap_or("Unknown");
        let anchor = format!(r##"href="#{kind}-{NAMESPACE}-{name}">{name}</a></td><td class=""##);
        let shown = dom.find(&anchor).is_some_and(|at| {
            let row = &dom[at..];
            let row = &row[..row.find("</tr>").unwrap_or(row.len())];
            row.contains(&format!(">{phase}</td>"))
        });
        if !shown {
            missing.push(format!("{kind} {name} {phase}"));
        }
    }
    Ok(missing)
}

/// `http://<address>/` of the metrics Service, reached as the suite reaches every Service.
pub fn url(suite: &mut Suite) -> Result<String, String> {
    Ok(format!("http://{}/", metrics_address(suite)?))
}

fn metrics_address(suite: &mut Suite) -> Result<String, String> {
    suite
        .host
        .service_address(OPERATOR_NAMESPACE, &metrics_service(), METRICS_PORT)
}

/// The body of `GET <path>` from the plain-HTTP endpoint at `address`.
fn http_get(address: &str, path: &str) -> Result<String, String> {
    let fail = |e: std::io::Error| format!("GET http://{address}{path}: {e}");
    let mut stream = TcpStream::connect(address).map_err(fail)?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(fail)?;
    write!(
        stream,
        "GET {path} HTTP/1.0\r\nHost: {address}\r\nConnection: close\r\n\r\n"
    )
    .map_err(fail)?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).map_err(fail)?;
    let (head, body) = answer
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("GET http://{address}{path}: no HTTP answer"))?;
    if !head.starts_with("HTTP/1.1 200") && !head.starts_with("HTTP/1.0 200") {
        return Err(format!("GET http://{address}{path}: {head}"));
    }
    Ok(body.to_owned())
}

/// The operator's request counters by verb, from its `/metrics` text.
fn api_requests(metrics: &str) -> BTreeMap<String, f64> {
    metrics
        .lines()
        .filter_map(|line| {
            let rest = line.strip_prefix(API_REQUESTS)?;
            let (verb, value) = rest.split_once("\"} ")?;
            Some((verb.to_owned(), value.trim().parse().ok()?))
        })
        .collect()
}

/// Requests per minute by verb while nothing changes: the counters a minute apart.
fn idle_requests(suite: &mut Suite) -> Result<Vec<(String, f64)>, String> {
    let address = metrics_address(suite)?;
    suite.narrator.step(&format!(
        "the idle operator's requests to its cluster counted for {}s (kcp_operator_api_requests_total)",
        IDLE_WINDOW.as_secs()
    ));
    let before = api_requests(&http_get(&address, "/metrics")?);
    if before.is_empty() {
        return Err("the operator's /metrics has no kcp_operator_api_requests_total".into());
    }
    let cpu_before = suite.host.operator_cpu_seconds();
    std::thread::sleep(IDLE_WINDOW);
    let after = api_requests(&http_get(&address, "/metrics")?);
    if let (Some(before), Some(after)) = (cpu_before, suite.host.operator_cpu_seconds()) {
        suite.figures.operator_idle_cpu_percent =
            Some(100.0 * (after - before) / IDLE_WINDOW.as_secs_f64());
    }
    let minutes = IDLE_WINDOW.as_secs_f64() / 60.0;
    Ok(after
        .iter()
        .map(|(verb, count)| {
            let earlier = before.get(verb).copied().unwrap_or(0.0);
            (verb.clone(), (count - earlier) / minutes)
        })
        .filter(|(_, rate)| *rate > 0.0)
        .collect())
}

pub fn in_a_browser(suite: &mut Suite) -> Outcome {
    let url = url(suite)?;
    suite
        .narrator
        .step(&format!("headless Chromium opens the status page at {url}"));
    let chromium = Chromium::new(&suite.dir.path().join("chromium-profile"))?;
    let admin = suite.host.admin();
    let dom = eventually(
        "the status page names every component with its phase",
        Duration::from_secs(60),
        POLL,
        || {
            let dom = chromium.dump_dom(&url)?;
            let missing = missing_rows(&dom, &admin)?;
            if !missing.is_empty() {
                return Err(format!("not shown: {missing:?} in\n{dom}"));
            }
            if !dom.contains("leading: caches synced") || dom.contains(r#"id="not-synced""#) {
                return Err(format!("not the synced leader's page:\n{dom}"));
            }
            Ok(dom)
        },
    )?;
    for secret in [
        format!("{ROOT_SHARD}-rootshard-server"),
        format!("{FRONT_PROXY}-frontproxy-server"),
    ] {
        if !dom.contains(&secret) {
            return Err(format!("certificate {secret} not listed:\n{dom}"));
        }
    }
    if dom.contains("BEGIN CERTIFICATE") || dom.contains("PRIVATE KEY") {
        return Err("the page shows Secret content".into());
    }
    let screenshot = artifacts_dir()?.join("status-page.png");
    chromium.screenshot(&url, &screenshot, 1280, 2400)?;
    suite.narrator.step(&format!(
        "every component shown with its phase; screenshot {}",
        screenshot.display()
    ));
    let idle = idle_requests(suite)?;
    suite
        .narrator
        .step(&format!("requests per minute when idle, by verb: {idle:?}"));
    suite.figures.operator_idle_requests = Some(idle);
    Ok(())
}
