//! The pod bridge keeps its MAC address while ports come and go. A Linux bridge whose address was
//! never set takes the lowest MAC of its ports; the host ends of pod veths have random MACs, so a
//! pod starting or stopping could move the address of the gateway and of every Service virtual
//! IP, and the other pods' ARP entries then pointed nowhere until probed again (20-40 s of stalled
//! connections through Services: the requests lost while the FrontProxy or the shards rolled,
//! issue 24). Here a port with the lowest possible MAC joins and leaves a bridge made by
//! `kcp-node-agent network up`; the bridge's address must not change either time.
//!
//! Needs root and iproute2, as the node agent does. Names derive from the PID so parallel runs do
//! not collide; the bridge is removed by `cleanup --bridge` whatever happens.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

const AGENT: &str = env!("CARGO_BIN_EXE_kcp-node-agent");

fn run(program: &str, args: &[&str]) -> String {
    let output = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running {program} {args:?}: {e}"));
    assert!(
        output.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn mac_of(link: &str) -> String {
    std::fs::read_to_string(format!("/sys/class/net/{link}/address"))
        .unwrap_or_else(|e| panic!("reading the address of {link}: {e}"))
        .trim()
        .to_owned()
}

/// Removes the bridge (and the test's veth, if still there) when the test ends.
struct Cleanup {
    bridge: String,
    veth: String,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["link", "del", &self.veth])
            .output();
        let _ = Command::new(AGENT)
            .args(["cleanup", "--bridge", &self.bridge])
            .output();
    }
}

#[test]
fn the_bridge_keeps_its_mac_when_a_port_with_a_lower_one_joins_and_leaves() {
    // SAFETY: geteuid has no preconditions.
    assert_eq!(unsafe { libc::geteuid() }, 0, "this test needs root");
    let pid = std::process::id();
    let bridge = format!("knm{}", pid % 100_000);
    let veth = format!("knmv{}", pid % 100_000);
    let subnet = format!("10.{}.{}.0/24", 150 + (pid >> 8) % 100, pid & 255);
    let _cleanup = Cleanup {
        bridge: bridge.clone(),
        veth: veth.clone(),
    };
    let _ = Command::new(AGENT)
        .args(["cleanup", "--bridge", &bridge])
        .output();
    run(
        AGENT,
        &["network", "up", "--bridge", &bridge, "--subnet", &subnet],
    );
    let before = mac_of(&bridge);
    assert!(
        before.starts_with("02:62:"),
        "the bridge's MAC is the agent's, not a port's: {before}"
    );

    let peer = format!("{veth}p");
    run(
        "ip",
        &[
            "link",
            "add",
            &veth,
            "address",
            "00:00:00:00:00:01",
            "type",
            "veth",
            "peer",
            "name",
            &peer,
        ],
    );
    run("ip", &["link", "set", &veth, "master", &bridge, "up"]);
    assert_eq!(
        mac_of(&bridge),
        before,
        "a port with a lower MAC joined the bridge"
    );

    run("ip", &["link", "del", &veth]);
    assert_eq!(mac_of(&bridge), before, "a port left the bridge");

    // `network up` again (an agent restarting on its bridge) keeps the same address.
    run(
        AGENT,
        &["network", "up", "--bridge", &bridge, "--subnet", &subnet],
    );
    assert_eq!(mac_of(&bridge), before, "network up on the existing bridge");
}
