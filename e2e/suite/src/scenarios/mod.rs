//! The scenarios, in the order they run. Each asserts with deadlines and cleans up what it made
//! (the RootShard of scenario 2 lives on through the later ones until scenario 6 deletes it).

mod bad_input;
mod chart;
mod deletion;
mod rootshard;
mod rotation;
mod scale;
mod upgrade;

use std::path::PathBuf;
use std::time::Duration;

use tempfile::TempDir;

use crate::host::Host;
use crate::{Narrator, Outcome};

/// Namespace of the kcp deployment the scenarios drive.
pub const NAMESPACE: &str = "kcp";
/// Name of the RootShard.
pub const ROOT_SHARD: &str = "root";

/// The figures the suite measures for docs/performance.md (reported, never asserted).
#[derive(Debug, Default)]
pub struct Figures {
    pub operator_ready: Option<Duration>,
    pub root_shard_available: Option<Duration>,
    pub upgrade: Option<Duration>,
    pub upgrade_requests: Option<(usize, usize)>,
    pub operator_memory_mib: Option<f64>,
}

/// What the scenarios share: the host, where they write files, what earlier ones made.
pub struct Suite {
    pub host: Host,
    pub narrator: Narrator,
    pub dir: TempDir,
    pub figures: Figures,
    /// Admin kubeconfig of the kcp that scenario 2 brought up (reachable from here).
    pub kcp_kubeconfig: Option<PathBuf>,
}

/// One scenario: its title, what it needs to have passed before, and its body.
pub struct Scenario {
    pub title: &'static str,
    pub needs: &'static [usize],
    pub run: fn(&mut Suite) -> Outcome,
}

/// All scenarios in order (numbered from 1 as in the README).
pub fn all() -> Vec<Scenario> {
    vec![
        Scenario {
            title: "1. install the operator with its Helm chart",
            needs: &[],
            run: chart::install,
        },
        Scenario {
            title: "2. RootShard with managed etcd, a Kubeconfig, a workspace with a CRD and objects",
            needs: &[1],
            run: rootshard::apply_and_use,
        },
        Scenario {
            title: "3. upgrade: a new version rolls out while a client keeps polling",
            needs: &[2],
            run: upgrade::roll_out,
        },
        Scenario {
            title: "4. scale: root shard replicas 1 -> 2 (leader-elected controllers), etcd 1 -> 3",
            needs: &[2],
            run: scale::scale_out,
        },
        Scenario {
            title: "5. certificate rotation forced by a shortened validity",
            needs: &[4],
            run: rotation::rotate,
        },
        Scenario {
            title: "7. bad input: missing CA Secret, invalid etcd endpoints; both recover",
            needs: &[1],
            run: bad_input::report_and_recover,
        },
        Scenario {
            title: "6. delete the RootShard: everything it made is gone",
            needs: &[2],
            run: deletion::delete_everything,
        },
    ]
}

/// How often waits look again.
pub const POLL: Duration = Duration::from_millis(500);
