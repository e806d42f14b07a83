//! Scenario 15: the FrontProxy's serving certificate and its requestheader client certificate
//! (the one it presents to the shards) are re-issued while a client reads a workspace on the
//! Shard through the FrontProxy every 100 ms. The re-issue is forced the operator's way, as
//! scenario 5 does for the root shard: a `certificateTemplates` entry per certificate shortening
//! its validity, which makes the operator issue both at once (`ValidityShortened`) and roll the
//! proxy's pods (new `operator.kcp.io/mounted-content-revision`). The scenario waits until the
//! proxy's Service serves the new certificate (serial and notBefore read in a TLS handshake)
//! and counts the client's requests: none may fail. It starts once
//! every Deployment of the deployment has finished rolling out (an earlier scenario's roll of the
//! Shard or the FrontProxy still replacing pods would be measured as this one's).
//!
//! The entry stays on the FrontProxy (as scenario 5's on the RootShard): removing it would be a
//! second rotation, since a certificate shorter-lived than the default is due at once.

use std::time::{Duration, Instant};

use super::full::shard_workspace_through_proxy;
use super::poller::{Poller, READ_CONFIG_MAPS};
use super::rootshard::wait_kind_available;
use super::rotation::{SHORT_HOURS, revision, wait_rolled, wait_settled};
use super::served::CertificateFacts;
use super::{FRONT_PROXY, NAMESPACE, POLL, PROXY_PORT, SHARD, Suite};
use crate::Outcome;
use crate::cluster::eventually;

pub fn rotate_through_proxy(suite: &mut Suite) -> Outcome {
    let admin = suite.host.admin();
    let workload = format!("{FRONT_PROXY}-frontproxy");
    let server_secret = format!("{workload}-server");
    let requestheader_secret = format!("{workload}-requestheader");
    let server_name = format!("{workload}.{NAMESPACE}.svc.cluster.local");

    wait_settled(&admin, Duration::from_secs(180))?;
    let (on_shard, inside) = shard_workspace_through_proxy(suite)?;

    let address = suite
        .host
        .service_address(NAMESPACE, &workload, PROXY_PORT)?;
    let served_before = CertificateFacts::served(&address, &server_name)?;
    let server_before = CertificateFacts::of_secret(&admin, &server_secret)?;
    let requestheader_before = CertificateFacts::of_secret(&admin, &requestheader_secret)?;
    if served_before.serial != server_before.serial {
        return Err(format!(
            "before the rotation the proxy serves serial {}, its Secret holds {}",
            served_before.serial, server_before.serial
        ));
    }
    let revision_before = revision(&admin, &workload)?;
    suite.narrator.step(&format!(
        "serving certificate {} (notBefore {}), requestheader {}; a client polls root:{on_shard} on {SHARD} through the FrontProxy",
        served_before.serial, served_before.not_before, requestheader_before.serial
    ));
    let poller = Poller::start(inside, READ_CONFIG_MAPS);

    suite.narrator.step(&format!(
        "certificateTemplates: server and requestheader valid for {SHORT_HOURS}h"
    ));
    let began = Instant::now();
    let outcome = rotate(
        suite,
        &workload,
        &revision_before,
        &server_name,
        &served_before,
    );
    let took = began.elapsed();
    let polled = poller.finish()?;
    let (sent, failed) = (polled.sent, polled.failed());
    let served_after = outcome?;
    let requestheader_after = CertificateFacts::of_secret(&admin, &requestheader_secret)?;
    if requestheader_after.serial == requestheader_before.serial {
        return Err("the requestheader certificate was not re-issued".into());
    }
    for (what, facts) in [
        ("serving", &served_after),
        ("requestheader", &requestheader_after),
    ] {
        let hours = facts.remaining_hours()?;
        if hours > (SHORT_HOURS as f64) + 1.5 {
            return Err(format!(
                "the {what} certificate is still valid for {hours:.1}h"
            ));
        }
    }
    suite.figures.proxy_rotation_requests = Some((sent, failed));
    suite.narrator.step(&format!(
        "rotated in {:.1}s: serving {} (notBefore {}) -> {} (notBefore {}), requestheader {} -> {}; client: {sent} requests, {failed} failed",
        took.as_secs_f64(),
        served_before.serial,
        served_before.not_before,
        served_after.serial,
        served_after.not_before,
        requestheader_before.serial,
        requestheader_after.serial,
    ));
    if failed > 0 {
        return Err(format!(
            "{failed} of {sent} requests through the FrontProxy failed during the rotation:{}",
            polled.describe_failures()
        ));
    }
    Ok(())
}

/// Shortens both certificates' validity and waits until the pods rolled and the proxy's Service
/// serves the new serving certificate (the one now in its Secret); that certificate.
fn rotate(
    suite: &mut Suite,
    workload: &str,
    revision_before: &str,
    server_name: &str,
    served_before: &CertificateFacts,
) -> Result<CertificateFacts, String> {
    let admin = suite.host.admin();
    let patch = format!(
        r#"{{"spec":{{"certificateTemplates":{{"server":{{"spec":{{"duration":"{SHORT_HOURS}h"}}}},"requestheader":{{"spec":{{"duration":"{SHORT_HOURS}h"}}}}}}}}}}"#
    );
    admin.run(&[
        "patch",
        "frontproxy",
        "-n",
        NAMESPACE,
        FRONT_PROXY,
        "--type=merge",
        "-p",
        &patch,
    ])?;
    let revision_after = wait_rolled(&admin, workload, revision_before, Duration::from_secs(120))?;
    wait_kind_available(&admin, "frontproxy", FRONT_PROXY, Duration::from_secs(60))?;
    suite.narrator.step(&format!(
        "pods rolled: revision {revision_before} -> {revision_after}"
    ));
    let secret = format!("{workload}-server");
    // The Service's address (on the kubeconfig hosts a stand-in that follows its Endpoints, so
    // it reaches the new pods as it reached the old).
    let address = suite
        .host
        .service_address(NAMESPACE, workload, PROXY_PORT)?;
    eventually(
        "the Service serves the new certificate",
        Duration::from_secs(60),
        POLL,
        || {
            let stored = CertificateFacts::of_secret(&admin, &secret)?;
            let served = CertificateFacts::served(&address, server_name)?;
            if served.serial != served_before.serial && served == stored {
                Ok(served)
            } else {
                Err(format!(
                    "serves {}, Secret holds {}, before {}",
                    served.serial, stored.serial, served_before.serial
                ))
            }
        },
    )
}
