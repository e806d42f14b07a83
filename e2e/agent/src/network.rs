//! The pod network, made with iproute2: one Linux bridge, one network namespace and veth pair per
//! pod, Service virtual IPs as /32 addresses on the bridge.
//!
//! Every name derives from the bridge name and the pod's address (`<bridge>-p<offset>` for the
//! namespace, `kv<hash of bridge><offset>` for the host end of the veth, which must fit in 15
//! characters), so `cleanup` can find everything a crashed run left from the bridge name alone,
//! and two agents with different bridges never touch each other's links. A pod's `eth0` gets a MAC
//! derived from its IP, so when a StatefulSet pod comes back with its old address the neighbours'
//! ARP caches are still right.
//!
//! The bridge gets a fixed MAC too (derived from its name). A Linux bridge whose address was never
//! set takes the lowest MAC of its ports, and the host ends of the veths have random ones: a pod
//! starting or stopping could change the bridge's address, and every pod's ARP entry for the
//! gateway and the Service virtual IPs (all the bridge's) then pointed at a MAC nobody answered
//! to. Connections from pods to Services stalled until the pods' neighbour entries were probed
//! again, 20 to 40 s later (TCP retransmitting meanwhile): the requests lost through the
//! FrontProxy while its pods or the shards' rolled (e2e/README.md, issue 24).
//!
//! Forwarding is switched off for packets arriving on the bridge, so pod traffic to addresses
//! outside the host never leaves the machine (it fails at once with "no route to host").
//!
//! The commands are synchronous (each takes milliseconds); async callers use `spawn_blocking`.

use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::Command;

use crate::error::{Error, Result};
use crate::ipam::Subnet;
use crate::names::fnv32a;

const NETNS_DIR: &str = "/var/run/netns";

/// Runs `ip` with `args`; a non-zero exit is an error carrying its stderr.
fn ip(args: &[&str]) -> Result<String> {
    let output = Command::new("ip")
        .args(args)
        .output()
        .map_err(|source| Error::Io {
            context: "running ip (iproute2)".into(),
            source,
        })?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        Err(Error::Command {
            command: format!("ip {}", args.join(" ")),
            message: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        })
    }
}

/// The names of the network objects of one agent (one bridge).
#[derive(Debug, Clone)]
pub struct Network {
    pub bridge: String,
    pub subnet: Subnet,
}

impl Network {
    pub fn new(bridge: &str, subnet: Subnet) -> Result<Network> {
        if bridge.is_empty()
            || bridge.len() > 15
            || !bridge
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return Err(Error::Config(format!(
                "bridge name {bridge:?} must be 1-15 characters of [A-Za-z0-9_-]"
            )));
        }
        Ok(Network {
            bridge: bridge.to_owned(),
            subnet,
        })
    }

    fn netns_prefix(&self) -> String {
        format!("{}-p", self.bridge)
    }

    fn veth_prefix(&self) -> String {
        format!("kv{:06x}", fnv32a(self.bridge.as_bytes()) & 0x00ff_ffff)
    }

    /// The network namespace of the pod at `ip`.
    pub fn netns_name(&self, ip: Ipv4Addr) -> String {
        format!("{}{}", self.netns_prefix(), self.subnet.offset(ip))
    }

    pub fn netns_path(&self, ip: Ipv4Addr) -> PathBuf {
        PathBuf::from(NETNS_DIR).join(self.netns_name(ip))
    }

    /// The host end of the pod's veth pair.
    pub fn veth_name(&self, ip: Ipv4Addr) -> String {
        format!("{}{:x}", self.veth_prefix(), self.subnet.offset(ip))
    }

    /// The bridge's own MAC: locally administered, from the bridge name (pods' are `02:4b:<IP>`).
    pub fn bridge_mac(&self) -> String {
        let [a, b, c, d] = fnv32a(self.bridge.as_bytes()).to_be_bytes();
        format!("02:62:{a:02x}:{b:02x}:{c:02x}:{d:02x}")
    }

    fn bridge_exists(&self) -> bool {
        ip(&["link", "show", "dev", &self.bridge]).is_ok()
    }

    /// Creates the bridge with the subnet's first address (when missing) and brings it up;
    /// returns whether it had to be created.
    pub fn bridge_up(&self) -> Result<bool> {
        let created = if self.bridge_exists() {
            false
        } else {
            ip(&["link", "add", &self.bridge, "type", "bridge"])?;
            true
        };
        // Set on an existing bridge too: one an older agent made still follows its ports.
        ip(&[
            "link",
            "set",
            "dev",
            &self.bridge,
            "address",
            &self.bridge_mac(),
        ])?;
        let address = format!("{}/{}", self.subnet.gateway(), self.subnet.prefix());
        ip(&["addr", "replace", &address, "dev", &self.bridge])?;
        ip(&["link", "set", &self.bridge, "up"])?;
        // Packets from pods to anything but the host and other pods must not leave the machine,
        // even where the host forwards: forwarding is decided by the interface they arrive on.
        let sysctl = format!("/proc/sys/net/ipv4/conf/{}/forwarding", self.bridge);
        std::fs::write(&sysctl, "0").map_err(|source| Error::Io {
            context: format!("disabling forwarding from the bridge ({sysctl})"),
            source,
        })?;
        Ok(created)
    }

    pub fn bridge_down(&self) -> Result<()> {
        if self.bridge_exists() {
            ip(&["link", "del", &self.bridge])?;
        }
        Ok(())
    }

    /// Adds a Service virtual IP to the bridge.
    pub fn add_vip(&self, vip: Ipv4Addr) -> Result<()> {
        ip(&["addr", "replace", &format!("{vip}/32"), "dev", &self.bridge]).map(drop)
    }

    pub fn remove_vip(&self, vip: Ipv4Addr) -> Result<()> {
        ip(&["addr", "del", &format!("{vip}/32"), "dev", &self.bridge]).map(drop)
    }

    /// The /32 addresses on the bridge (virtual IPs, ours or a crashed run's).
    pub fn vips(&self) -> Vec<Ipv4Addr> {
        let Ok(text) = ip(&["-o", "-4", "addr", "show", "dev", &self.bridge]) else {
            return Vec::new();
        };
        text.split_whitespace()
            .filter_map(|word| word.strip_suffix("/32"))
            .filter_map(|address| address.parse().ok())
            .collect()
    }

    /// Gives the pod at `ip` its namespace, `lo`, `eth0` on the bridge and a default route via the
    /// bridge. Leftovers with the same names (a crashed run) are removed first.
    pub fn pod_up(&self, ip_address: Ipv4Addr) -> Result<PathBuf> {
        let netns = self.netns_name(ip_address);
        let veth = self.veth_name(ip_address);
        self.pod_down(ip_address);
        let octets = ip_address.octets();
        let mac = format!(
            "02:4b:{:02x}:{:02x}:{:02x}:{:02x}",
            octets[0], octets[1], octets[2], octets[3]
        );
        let address = format!("{ip_address}/{}", self.subnet.prefix());
        let gateway = self.subnet.gateway().to_string();
        let steps: Vec<Vec<&str>> = vec![
            vec!["netns", "add", &netns],
            vec![
                "link", "add", &veth, "type", "veth", "peer", "name", "eth0", "address", &mac,
                "netns", &netns,
            ],
            vec!["link", "set", &veth, "master", &self.bridge, "up"],
            vec!["-n", &netns, "link", "set", "lo", "up"],
            vec!["-n", &netns, "addr", "add", &address, "dev", "eth0"],
            vec!["-n", &netns, "link", "set", "eth0", "up"],
            vec!["-n", &netns, "route", "add", "default", "via", &gateway],
        ];
        for step in steps {
            if let Err(error) = ip(&step) {
                self.pod_down(ip_address);
                return Err(error);
            }
        }
        Ok(self.netns_path(ip_address))
    }

    /// Kills whatever still runs in the pod's namespace and removes it and its veth. Idempotent.
    pub fn pod_down(&self, ip_address: Ipv4Addr) {
        remove_netns(&self.netns_name(ip_address));
        let veth = self.veth_name(ip_address);
        if ip(&["link", "show", "dev", &veth]).is_ok() {
            let _ = ip(&["link", "del", &veth]);
        }
    }

    /// The namespaces of this bridge's pods that exist now.
    pub fn pod_namespaces(&self) -> Vec<String> {
        let prefix = self.netns_prefix();
        std::fs::read_dir(NETNS_DIR)
            .map(|entries| {
                entries
                    .filter_map(|entry| entry.ok())
                    .map(|entry| entry.file_name().to_string_lossy().into_owned())
                    .filter(|name| {
                        name.strip_prefix(&prefix).is_some_and(|rest| {
                            !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit())
                        })
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Host ends of veths of this bridge's pods that exist now.
    pub fn pod_veths(&self) -> Vec<String> {
        let prefix = self.veth_prefix();
        let Ok(text) = ip(&["-o", "link", "show"]) else {
            return Vec::new();
        };
        text.lines()
            .filter_map(|line| line.split(':').nth(1))
            .map(|name| name.trim().split('@').next().unwrap_or_default().to_owned())
            .filter(|name| name.starts_with(&prefix))
            .collect()
    }

    /// Removes every pod namespace (killing what runs in it), veth and virtual IP of this bridge,
    /// and the bridge itself when `bridge_too`.
    pub fn cleanup(&self, bridge_too: bool) -> Result<()> {
        for netns in self.pod_namespaces() {
            tracing::info!(netns, "removing leftover pod network namespace");
            remove_netns(&netns);
        }
        for veth in self.pod_veths() {
            let _ = ip(&["link", "del", &veth]);
        }
        for vip in self.vips() {
            let _ = self.remove_vip(vip);
        }
        if bridge_too {
            self.bridge_down()?;
        }
        Ok(())
    }
}

/// SIGKILLs every process in `netns` and deletes it.
fn remove_netns(netns: &str) {
    if !PathBuf::from(NETNS_DIR).join(netns).exists() {
        return;
    }
    kill_netns_processes(netns);
    if let Err(error) = ip(&["netns", "del", netns]) {
        tracing::warn!(netns, %error, "removing network namespace");
    }
}

/// SIGKILLs every process whose network namespace is `netns` (daemons a container left behind).
pub fn kill_netns_processes(netns: &str) {
    for _ in 0..10 {
        let Ok(text) = ip(&["netns", "pids", netns]) else {
            return;
        };
        let pids: Vec<i32> = text
            .split_whitespace()
            .filter_map(|pid| pid.parse().ok())
            .collect();
        if pids.is_empty() {
            return;
        }
        for pid in pids {
            // SAFETY: kill(2) on a PID read from the kernel's list for our namespace.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_fit_and_differ_per_bridge() {
        let subnet = Subnet::parse("10.213.3.0/24").expect("subnet");
        let a = Network::new("kcpe2e3", subnet).expect("a");
        let b = Network::new("kcpe2e4", subnet).expect("b");
        let ip = Ipv4Addr::new(10, 213, 3, 254);
        assert_eq!(a.netns_name(ip), "kcpe2e3-p254");
        assert!(a.veth_name(ip).len() <= 15, "{}", a.veth_name(ip));
        assert_ne!(a.veth_name(ip), b.veth_name(ip));
        let wide = Subnet::parse("10.0.0.0/8").expect("wide");
        let c = Network::new("kcpe2e-bridge12", wide).expect("c");
        assert!(c.veth_name(Ipv4Addr::new(10, 255, 255, 254)).len() <= 15);
        assert!(Network::new("a-name-that-is-too-long", subnet).is_err());
        assert!(Network::new("bad name", subnet).is_err());
    }

    #[test]
    fn the_bridge_mac_is_fixed_per_bridge_and_unlike_a_pods() {
        let subnet = Subnet::parse("10.213.3.0/24").expect("subnet");
        let a = Network::new("kcpe2e3", subnet).expect("a");
        let b = Network::new("kcpe2e4", subnet).expect("b");
        assert_eq!(a.bridge_mac(), a.bridge_mac());
        assert_ne!(a.bridge_mac(), b.bridge_mac());
        assert!(a.bridge_mac().starts_with("02:62:"), "{}", a.bridge_mac());
        assert_eq!(a.bridge_mac().len(), 17);
    }
}
