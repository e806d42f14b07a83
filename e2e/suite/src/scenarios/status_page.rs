//! Scenario 12: the operator's status page in a real browser. With the full deployment of
//! scenario 8 running, headless Chromium opens `/` on the operator's metrics Service (reached the
//! way the suite reaches every in-cluster Service), the page must name every CacheServer,
//! RootShard, Shard and FrontProxy with the phase its status reports, and the screenshot is
//! kept as an artifact under the target directory (`<target>/<profile>/e2e-artifacts/`).

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
    let address =
        suite
            .host
            .service_address(OPERATOR_NAMESPACE, &metrics_service(), METRICS_PORT)?;
    Ok(format!("http://{address}/"))
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
    Ok(())
}
