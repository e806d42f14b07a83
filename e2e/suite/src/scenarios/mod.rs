//! The scenarios, in the order they run. Each asserts with deadlines and cleans up what it made
//! (the CacheServer and RootShard of scenario 2, the Shard and FrontProxy of scenario 8 live on
//! through the later ones until scenario 6 deletes them).

mod bad_input;
mod cache_etcd;
mod chart;
mod deletion;
mod full;
mod kubeconfigs;
pub mod olm;
mod poller;
mod proxy_rotation;
mod resumed_watch;
mod rootshard;
mod rotation;
mod scale;
mod served;
mod shards;
mod status_page;
mod upgrade;
mod virtual_workspace;

use std::path::PathBuf;
use std::time::Duration;

use tempfile::TempDir;

use crate::cluster::Cluster;
use crate::host::Host;
use crate::{Narrator, Outcome};

/// Namespace of the kcp deployment the scenarios drive.
pub const NAMESPACE: &str = "kcp";
/// Name of the RootShard.
pub const ROOT_SHARD: &str = "root";
/// Name of the CacheServer the RootShard's `cache.ref` names.
pub const CACHE_SERVER: &str = "cache";
/// Name of the Shard of scenario 8 (it registers under this name).
pub const SHARD: &str = "shard-1";
/// Name of the Shard scenario 10 adds and scenario 11 deletes.
pub const SECOND_SHARD: &str = "shard-2";
/// The operator's Shard kind as kubectl must name it on a host that is this project's server,
/// which serves kcp's own `shards.core.kcp.io` too.
pub const SHARD_KIND: &str = "shards.operator.kcp.io";
/// Name of the FrontProxy.
pub const FRONT_PROXY: &str = "public";
/// The port of the FrontProxy's pods and Service.
pub const PROXY_PORT: u16 = 6443;

/// The figures the suite measures for docs/performance.md (reported, never asserted).
#[derive(Debug, Default)]
pub struct Figures {
    pub operator_ready: Option<Duration>,
    pub root_shard_available: Option<Duration>,
    pub upgrade: Option<Duration>,
    pub upgrade_requests: Option<(usize, usize)>,
    /// (sent, failed) of the client polling a workspace on the Shard through the FrontProxy.
    pub upgrade_proxied_requests: Option<(usize, usize)>,
    /// (sent, failed) of the client polling through the FrontProxy while its certificates rotate.
    pub proxy_rotation_requests: Option<(usize, usize)>,
    pub operator_memory_mib: Option<f64>,
    /// Shard + FrontProxy applied (next to the running CacheServer and RootShard) -> all Available.
    pub full_deployment_available: Option<Duration>,
    /// The operator's requests to its host cluster per minute, by verb, while the full
    /// deployment is idle (its `kcp_operator_api_requests_total` over a minute).
    pub operator_idle_requests: Option<Vec<(String, f64)>>,
    /// The operator's CPU over the same idle minute, in percent of one core (the local host).
    pub operator_idle_cpu_percent: Option<f64>,
    /// Connections the kubeconfig host's Service stand-ins sent again to another pod because the
    /// first closed them before answering (none of them had carried a request).
    pub connections_failed_over: Option<usize>,
}

/// What the scenarios share: the host, where they write files, what earlier ones made.
pub struct Suite {
    pub host: Host,
    pub narrator: Narrator,
    pub dir: TempDir,
    pub figures: Figures,
    /// Admin kubeconfig of the kcp that scenario 2 brought up (reachable from here).
    pub kcp_kubeconfig: Option<PathBuf>,
    /// Admin kubeconfig through the FrontProxy of scenario 8 (reachable from here).
    pub proxy_kubeconfig: Option<PathBuf>,
    /// Workspaces made through the FrontProxy and the shard each landed on.
    pub placed: Vec<(String, String)>,
}

impl Suite {
    /// A suite on `host` with nothing made yet and a fresh directory for its files.
    pub fn new(host: Host, narrator: Narrator) -> Result<Suite, String> {
        let dir = tempfile::Builder::new()
            .prefix("kcp-e2e-files-")
            .tempdir()
            .map_err(|e| format!("no temporary directory: {e}"))?;
        Ok(Suite {
            host,
            narrator,
            dir,
            figures: Figures::default(),
            kcp_kubeconfig: None,
            proxy_kubeconfig: None,
            placed: Vec::new(),
        })
    }
}

/// The whole deployment as scenarios 1, 2 and 8 make it (operator by its chart, CacheServer,
/// RootShard, Shard, FrontProxy, all Available), without their checks: what `kcp-managed up`
/// runs. Returns an admin kubeconfig through the FrontProxy, reachable from here.
pub fn deploy_full(suite: &mut Suite) -> Result<PathBuf, String> {
    suite.narrator.scenario("operator");
    chart::install(suite)?;
    suite
        .narrator
        .scenario("kcp: CacheServer, RootShard, Shard, FrontProxy");
    rootshard::deploy(suite)?;
    full::deploy(suite)?;
    let kubeconfig = rootshard::admin_kubeconfig(
        suite,
        full::PROXY_KUBECONFIG,
        rootshard::Target::FrontProxy(FRONT_PROXY),
    )?;
    suite.proxy_kubeconfig = Some(kubeconfig.clone());
    Ok(kubeconfig)
}

/// Applies the deployment's namespace [`NAMESPACE`]; whether it did not exist before (then the
/// scenario that made it removes it again).
pub fn ensure_namespace(admin: &Cluster) -> Result<bool, String> {
    let existed = admin.get(&["namespace", NAMESPACE])?.is_some();
    admin.apply(&format!(
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {NAMESPACE}\n"
    ))?;
    Ok(!existed)
}

/// `http://<address>/`: the operator's status page as this machine reaches it.
pub fn status_page_url(suite: &mut Suite) -> Result<String, String> {
    status_page::url(suite)
}

/// One scenario: its title, what it needs to have passed before, and its body.
pub struct Scenario {
    pub title: &'static str,
    pub needs: &'static [usize],
    pub run: fn(&mut Suite) -> Outcome,
}

impl Scenario {
    /// The number its title starts with (`8.` -> 8).
    pub fn number(&self) -> usize {
        self.title
            .split('.')
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    }
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
            title: "8. full deployment: Shard and FrontProxy; workspaces on every shard, used through the FrontProxy only",
            needs: &[2],
            run: full::deploy_and_use,
        },
        Scenario {
            title: "12. the operator's status page in headless Chromium: every component with its phase; its idle requests per minute",
            needs: &[8],
            run: status_page::in_a_browser,
        },
        Scenario {
            title: "9. a Kubeconfig for every target kind, with ClusterRoleBindings inside kcp",
            needs: &[8],
            run: kubeconfigs::every_target,
        },
        Scenario {
            title: "10. scale out: a second Shard takes new workspaces; FrontProxy 1 -> 2 replicas",
            needs: &[8],
            run: shards::scale_out,
        },
        Scenario {
            title: "11. delete a Shard: its finalizer waits for its workspaces, then deregisters it",
            needs: &[10],
            run: shards::delete_second,
        },
        Scenario {
            title: "14. a VirtualWorkspace serves the Shard's virtual workspaces; removed, the Shard serves them again",
            needs: &[8],
            run: virtual_workspace::serve_a_shard,
        },
        Scenario {
            title: "15. certificate rotation through the FrontProxy: serving and requestheader certificates re-issued while a client polls",
            needs: &[8],
            run: proxy_rotation::rotate_through_proxy,
        },
        Scenario {
            title: "3. upgrade: one version change on every CR rolls out in order while clients keep polling",
            needs: &[8],
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
            title: "7. bad input: missing CA Secret, invalid etcd endpoints, missing RootShard, bad path mapping; all recover",
            needs: &[1],
            run: bad_input::report_and_recover,
        },
        Scenario {
            title: "16. a CacheServer with managed etcd: Available, its etcd and certificates, /readyz; deleted, nothing left",
            needs: &[1],
            run: cache_etcd::managed_etcd,
        },
        Scenario {
            title: "6. delete the whole deployment: everything it made is gone",
            needs: &[2],
            run: deletion::delete_everything,
        },
        Scenario {
            title: "13. install the operator from its OLM bundle as OLM would, then the RootShard scenario on it",
            needs: &[],
            run: olm::install_and_run,
        },
    ]
}

/// How often waits look again.
pub const POLL: Duration = Duration::from_millis(500);

#[cfg(test)]
mod tests {
    //! `needs` checked against what each scenario's module names: a scenario that uses what an
    //! earlier one makes (the `kcp` namespace, the RootShard, the Shard, ...) must need that one,
    //! directly or through its own needs, or make it itself, or `E2E_SCENARIOS` with its needs
    //! alone fails (scenario 16 once needed only 1 but ran in scenario 2's namespace). Read from
    //! the sources, so it needs no host; what a module reaches only through another module's
    //! helpers is not seen.

    use std::collections::BTreeSet;

    use super::all;

    /// The module each scenario's body is in, by scenario number.
    const SOURCES: &[(usize, &str)] = &[
        (1, include_str!("chart.rs")),
        (2, include_str!("rootshard.rs")),
        (3, include_str!("upgrade.rs")),
        (4, include_str!("scale.rs")),
        (5, include_str!("rotation.rs")),
        (6, include_str!("deletion.rs")),
        (7, include_str!("bad_input.rs")),
        (8, include_str!("full.rs")),
        (9, include_str!("kubeconfigs.rs")),
        (10, include_str!("shards.rs")),
        (11, include_str!("shards.rs")),
        (12, include_str!("status_page.rs")),
        (13, include_str!("olm.rs")),
        (14, include_str!("virtual_workspace.rs")),
        (15, include_str!("proxy_rotation.rs")),
        (16, include_str!("cache_etcd.rs")),
    ];

    /// What a module can name that a scenario makes: the name (a constant imported from this
    /// module, or a field of `Suite`), the scenario that makes it, and the calls with which a
    /// module makes it itself.
    const MADE: &[(&str, usize, &[&str])] = &[
        (
            "NAMESPACE",
            2,
            &["ensure_namespace(", "rootshard::apply_and_use("],
        ),
        ("CACHE_SERVER", 2, &["rootshard::apply_and_use("]),
        ("ROOT_SHARD", 2, &["rootshard::apply_and_use("]),
        ("suite.kcp_kubeconfig", 2, &["rootshard::apply_and_use("]),
        ("SHARD", 8, &[]),
        ("FRONT_PROXY", 8, &[]),
        ("PROXY_PORT", 8, &[]),
        ("suite.proxy_kubeconfig", 8, &[]),
        ("suite.placed", 8, &[]),
        ("SECOND_SHARD", 10, &[]),
    ];

    /// Uses that need no prerequisite, with the reason.
    const UNNEEDED: &[(usize, &str, &str)] = &[(
        6,
        "FRONT_PROXY",
        "deleted with --ignore-not-found: scenario 6 also runs without 8",
    )];

    fn source_of(number: usize) -> &'static str {
        SOURCES
            .iter()
            .find(|(n, _)| *n == number)
            .map(|(_, source)| *source)
            .unwrap_or_else(|| panic!("scenario {number} has no entry in SOURCES"))
    }

    /// The names a module imports from `super` (`use super::{A, B, ...};`).
    fn imported_from_parent(source: &str) -> BTreeSet<&str> {
        let mut names = BTreeSet::new();
        for statement in source.split("use super::").skip(1) {
            let statement = statement.split(';').next().unwrap_or_default();
            names.extend(
                statement
                    .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .filter(|name| !name.is_empty()),
            );
        }
        names
    }

    fn uses(source: &str, name: &str) -> bool {
        if name.starts_with("suite.") {
            source.contains(name)
        } else {
            imported_from_parent(source).contains(name)
        }
    }

    /// `number` and every scenario it needs, directly or through others.
    fn closure(number: usize) -> BTreeSet<usize> {
        let scenarios = all();
        let mut seen = BTreeSet::new();
        let mut todo = vec![number];
        while let Some(n) = todo.pop() {
            if seen.insert(n) {
                let scenario = scenarios
                    .iter()
                    .find(|s| s.number() == n)
                    .unwrap_or_else(|| panic!("scenario {n} is needed but does not exist"));
                todo.extend(scenario.needs);
            }
        }
        seen
    }

    #[test]
    fn every_scenario_needs_what_it_uses() {
        let mut wrong = Vec::new();
        for scenario in all() {
            let number = scenario.number();
            let source = source_of(number);
            let needed = closure(number);
            for (name, maker, self_made_by) in MADE {
                let excused = UNNEEDED.iter().any(|(n, u, _)| *n == number && u == name);
                if uses(source, name)
                    && !needed.contains(maker)
                    && !self_made_by.iter().any(|call| source.contains(call))
                    && !excused
                {
                    wrong.push(format!(
                        "scenario {number} uses {name}, which scenario {maker} makes, but needs only {needed:?}"
                    ));
                }
            }
        }
        assert!(wrong.is_empty(), "{wrong:#?}");
    }

    #[test]
    fn prerequisites_run_before_the_scenarios_that_need_them() {
        let order: Vec<usize> = all().iter().map(|s| s.number()).collect();
        for scenario in all() {
            let at = order.iter().position(|n| *n == scenario.number());
            for need in scenario.needs {
                let before = order.iter().position(|n| n == need);
                assert!(
                    before < at && before.is_some(),
                    "scenario {} needs {need}, which does not run before it",
                    scenario.number()
                );
            }
        }
    }

    #[test]
    fn the_check_sees_a_missing_need() {
        let source =
            "use super::{NAMESPACE, POLL, Suite};\nfn f(suite: &mut Suite) { suite.placed.len(); }";
        assert!(uses(source, "NAMESPACE"));
        assert!(uses(source, "suite.placed"));
        assert!(!uses(source, "SHARD"));
        assert!(!closure(16).contains(&8));
    }
}
