//! Addresses on the pod subnet: the bridge (first address, also where the host API listens), pod
//! addresses from the bottom, Service virtual IPs from the top.
//!
//! Addresses are keyed by `namespace/name` so a StatefulSet pod that is deleted and created again
//! gets its old address back (its peers may have cached it), and the table is saved in the state
//! directory so a restarted agent hands out the same addresses. Pod addresses are given out
//! next-fit, so an address freed by a deleted Deployment pod is not reused at once by its
//! successor while clients may still hold connections to it.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::path::Path;

use serde::{Deserialize, Serialize};

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum IpamError {
    #[error("{0:?} is not an IPv4 CIDR such as 10.213.3.0/24")]
    BadSubnet(String),
    #[error("subnet {0} has no free address left")]
    Exhausted(String),
}

/// An IPv4 subnet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Subnet {
    network: u32,
    prefix: u8,
}

impl Subnet {
    pub fn parse(text: &str) -> Result<Subnet, IpamError> {
        let bad = || IpamError::BadSubnet(text.to_owned());
        let (address, prefix) = text.split_once('/').ok_or_else(bad)?;
        let address: Ipv4Addr = address.parse().map_err(|_| bad())?;
        let prefix: u8 = prefix.parse().map_err(|_| bad())?;
        if !(8..=29).contains(&prefix) {
            return Err(bad());
        }
        let mask = u32::MAX << (32 - prefix);
        Ok(Subnet {
            network: u32::from(address) & mask,
            prefix,
        })
    }

    pub fn prefix(&self) -> u8 {
        self.prefix
    }

    fn size(&self) -> u32 {
        1u32 << (32 - self.prefix)
    }

    /// The first usable address: the bridge's.
    pub fn gateway(&self) -> Ipv4Addr {
        Ipv4Addr::from(self.network + 1)
    }

    pub fn contains(&self, ip: Ipv4Addr) -> bool {
        u32::from(ip) & (u32::MAX << (32 - self.prefix)) == self.network
    }

    /// The offset of `ip` in the subnet (names netns and veths uniquely per address).
    pub fn offset(&self, ip: Ipv4Addr) -> u32 {
        u32::from(ip).wrapping_sub(self.network)
    }

    fn at(&self, offset: u32) -> Ipv4Addr {
        Ipv4Addr::from(self.network + offset)
    }
}

impl std::fmt::Display for Subnet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", Ipv4Addr::from(self.network), self.prefix)
    }
}

/// The allocation table.
#[derive(Debug, Clone, Serialize, Deserialize, Default, PartialEq, Eq)]
pub struct Table {
    pub pods: BTreeMap<String, Ipv4Addr>,
    pub services: BTreeMap<String, Ipv4Addr>,
    #[serde(default)]
    cursor: u32,
}

#[derive(Debug, Clone)]
pub struct Ipam {
    subnet: Subnet,
    table: Table,
}

impl Ipam {
    #[cfg(test)]
    pub fn new(subnet: Subnet) -> Ipam {
        Ipam {
            subnet,
            table: Table::default(),
        }
    }

    /// The table saved at `path`, or an empty one; entries outside the subnet are dropped.
    pub fn load(subnet: Subnet, path: &Path) -> Ipam {
        let mut table: Table = std::fs::read(path)
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or_default();
        table.pods.retain(|_, ip| subnet.contains(*ip));
        table.services.retain(|_, ip| subnet.contains(*ip));
        Ipam { subnet, table }
    }

    pub fn save(&self, path: &Path) -> std::io::Result<()> {
        let bytes = serde_json::to_vec_pretty(&self.table).map_err(std::io::Error::other)?;
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, bytes)?;
        std::fs::rename(tmp, path)
    }

    pub fn table(&self) -> &Table {
        &self.table
    }

    fn used(&self, ip: Ipv4Addr) -> bool {
        self.table.pods.values().any(|used| *used == ip)
            || self.table.services.values().any(|used| *used == ip)
    }

    /// The address of pod `key` (`namespace/name`): the one it had, else the next free one.
    pub fn pod(&mut self, key: &str) -> Result<Ipv4Addr, IpamError> {
        if let Some(ip) = self.table.pods.get(key) {
            return Ok(*ip);
        }
        // Offsets 0 (network) and 1 (bridge) and the broadcast address are never handed out.
        let usable = self.subnet.size() - 3;
        for step in 0..usable {
            let offset = 2 + (self.table.cursor + step) % usable;
            let ip = self.subnet.at(offset);
            if !self.used(ip) {
                self.table.cursor = (offset - 2 + 1) % usable;
                self.table.pods.insert(key.to_owned(), ip);
                return Ok(ip);
            }
        }
        Err(IpamError::Exhausted(self.subnet.to_string()))
    }

    pub fn release_pod(&mut self, key: &str) -> bool {
        self.table.pods.remove(key).is_some()
    }

    /// The virtual IP of Service `key`: the one it has, `wanted` when that is in the subnet and
    /// free, else the highest free address.
    pub fn service(&mut self, key: &str, wanted: Option<Ipv4Addr>) -> Result<Ipv4Addr, IpamError> {
        if let Some(ip) = self.table.services.get(key) {
            if wanted.is_none_or(|w| w == *ip || !self.subnet.contains(w)) {
                return Ok(*ip);
            }
            self.table.services.remove(key);
        }
        if let Some(ip) = wanted.filter(|ip| {
            self.subnet.contains(*ip)
                && self.subnet.offset(*ip) >= 2
                && self.subnet.offset(*ip) < self.subnet.size() - 1
                && !self.used(*ip)
        }) {
            self.table.services.insert(key.to_owned(), ip);
            return Ok(ip);
        }
        for offset in (2..self.subnet.size() - 1).rev() {
            let ip = self.subnet.at(offset);
            if !self.used(ip) {
                self.table.services.insert(key.to_owned(), ip);
                return Ok(ip);
            }
        }
        Err(IpamError::Exhausted(self.subnet.to_string()))
    }

    pub fn release_service(&mut self, key: &str) -> Option<Ipv4Addr> {
        self.table.services.remove(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subnet_parsing() {
        let subnet = Subnet::parse("10.213.3.7/24").expect("subnet");
        assert_eq!(subnet.to_string(), "10.213.3.0/24");
        assert_eq!(subnet.gateway(), Ipv4Addr::new(10, 213, 3, 1));
        assert!(subnet.contains(Ipv4Addr::new(10, 213, 3, 200)));
        assert!(!subnet.contains(Ipv4Addr::new(10, 213, 4, 1)));
        assert_eq!(subnet.offset(Ipv4Addr::new(10, 213, 3, 9)), 9);
        assert!(Subnet::parse("10.0.0.0").is_err());
        assert!(Subnet::parse("10.0.0.0/31").is_err());
        assert!(Subnet::parse("x/24").is_err());
    }

    #[test]
    fn pods_from_the_bottom_services_from_the_top() {
        let mut ipam = Ipam::new(Subnet::parse("10.1.2.0/24").expect("subnet"));
        assert_eq!(ipam.pod("ns/a").expect("a"), Ipv4Addr::new(10, 1, 2, 2));
        assert_eq!(ipam.pod("ns/b").expect("b"), Ipv4Addr::new(10, 1, 2, 3));
        assert_eq!(
            ipam.pod("ns/a").expect("a again"),
            Ipv4Addr::new(10, 1, 2, 2)
        );
        assert_eq!(
            ipam.service("ns/s", None).expect("s"),
            Ipv4Addr::new(10, 1, 2, 254)
        );
        assert_eq!(
            ipam.service("ns/t", None).expect("t"),
            Ipv4Addr::new(10, 1, 2, 253)
        );
        // A wanted address in the subnet is honoured; one outside is not.
        let wanted = Ipv4Addr::new(10, 1, 2, 100);
        assert_eq!(ipam.service("ns/u", Some(wanted)).expect("u"), wanted);
        let outside = Ipv4Addr::new(10, 96, 0, 10);
        assert_eq!(
            ipam.service("ns/v", Some(outside)).expect("v"),
            Ipv4Addr::new(10, 1, 2, 252)
        );
        assert_eq!(
            ipam.service("ns/v", Some(outside)).expect("v"),
            Ipv4Addr::new(10, 1, 2, 252)
        );
        // Next-fit: a released address is not the next one handed out.
        assert!(ipam.release_pod("ns/a"));
        assert_eq!(ipam.pod("ns/c").expect("c"), Ipv4Addr::new(10, 1, 2, 4));
    }

    #[test]
    fn exhaustion_and_persistence() {
        let subnet = Subnet::parse("10.1.2.0/29").expect("subnet");
        let mut ipam = Ipam::new(subnet);
        for i in 0..5 {
            ipam.pod(&format!("ns/p{i}")).expect("pod");
        }
        assert!(matches!(ipam.pod("ns/p9"), Err(IpamError::Exhausted(_))));
        assert!(ipam.service("ns/s", None).is_err());
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("ipam.json");
        ipam.save(&path).expect("save");
        let loaded = Ipam::load(subnet, &path);
        assert_eq!(loaded.table(), ipam.table());
        let other = Ipam::load(Subnet::parse("10.9.0.0/24").expect("other"), &path);
        assert!(other.table().pods.is_empty());
    }
}
