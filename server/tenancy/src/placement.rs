//! Which shard a new workspace's logical cluster goes to, as a pure decision over the `Shard`
//! objects of `root`.
//!
//! Upstream kcp's scheduler lists the Shards matching the Workspace's `spec.location.selector`
//! (a label selector over Shard labels; none means every shard), skips those annotated
//! `experimental.core.kcp.io/unschedulable`, and picks one uniformly at random. Ours also skips
//! shards that are not live (no `Ready=True` heartbeat within the staleness bound shard
//! registration uses) and full ones (`status.capacity`), and picks the shard with the most
//! headroom (`maxLogicalClusters - logicalClusters`; a shard without a limit has the most), then
//! among those the one holding the fewest logical clusters (so a shard added to scale out takes
//! the new workspaces until it holds as many as the others; uniform choice would leave it as
//! empty as chance has it), breaking remaining ties at random. When none fits, [`Unschedulable`] says why, naming the shards and
//! what ruled each out; it becomes the Workspace's `WorkspaceScheduled=False` message.

use std::collections::BTreeMap;
use std::fmt;

use kcp_apimachinery::labels::LabelSelector;
use kcp_apimachinery::meta;
use serde_json::Value;

use crate::shard::{self, Capacity};
use crate::workspace::UNSCHEDULABLE_SHARD_ANNOTATION;

/// A shard as placement sees it, read from its `Shard`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    pub name: String,
    labels: BTreeMap<String, String>,
    unschedulable: bool,
    live: bool,
    /// `None`: the shard has not reported its capacity yet.
    capacity: Option<Capacity>,
    /// Placed on it lately, which `capacity` may not show yet.
    placed: u64,
    /// `spec.baseURL`: where other shards reach it.
    pub base_url: String,
    /// `spec.externalURL`: what `Workspace.spec.URL` starts with.
    pub external_url: String,
}

impl Candidate {
    /// Reads a `Shard` as seen at `now` (liveness: a heartbeat no older than
    /// `stale_after_seconds`); `None` for an object without a name.
    pub fn of(shard: &Value, now: jiff::Timestamp, stale_after_seconds: i64) -> Option<Candidate> {
        let name = meta::name(shard)?.to_string();
        let labels = meta::labels(shard);
        let unschedulable = meta::annotations(shard).contains_key(UNSCHEDULABLE_SHARD_ANNOTATION);
        let url = |field: &str| {
            shard
                .pointer(&format!("/spec/{field}"))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .trim_end_matches('/')
                .to_string()
        };
        let base_url = url("baseURL");
        let external_url = Some(url("externalURL"))
            .filter(|u| !u.is_empty())
            .unwrap_or_else(|| base_url.clone());
        Some(Candidate {
            name,
            labels,
            unschedulable,
            live: shard::is_live(shard, now, stale_after_seconds),
            capacity: Capacity::of(shard),
            placed: 0,
            base_url,
            external_url,
        })
    }

    /// The same shard with `capacity` (a shard knows its own count better than its `Shard`).
    pub fn with_capacity(mut self, capacity: Capacity) -> Candidate {
        self.capacity = Some(capacity);
        self.placed = 0;
        self
    }

    /// The same shard with `count` logical clusters placed on it lately, which its `Shard` may
    /// not show yet: they count against its room.
    pub fn with_placed(mut self, count: u64) -> Candidate {
        self.placed = count;
        self
    }

    /// Room left: `None` for a shard without a limit (or that has not said), which ranks first.
    fn headroom(&self) -> Option<u64> {
        self.capacity
            .and_then(|c| c.headroom())
            .map(|room| room.saturating_sub(self.placed))
    }

    fn has_room(&self) -> bool {
        self.headroom().is_none_or(|room| room > 0)
    }

    /// Logical clusters it holds, counting those placed on it lately (0 before it has said).
    fn load(&self) -> u64 {
        self.capacity
            .map_or(0, |c| c.logical_clusters)
            .saturating_add(self.placed)
    }

    /// How good a home it is: more headroom first (`None`, unlimited, above every number), then
    /// fewer logical clusters.
    fn rank(&self) -> (u128, std::cmp::Reverse<u64>) {
        let headroom = self.headroom().map_or(u128::MAX, u128::from);
        (headroom, std::cmp::Reverse(self.load()))
    }
}

/// Why a shard matching the selector was passed over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Skipped {
    /// Annotated `experimental.core.kcp.io/unschedulable`.
    Unschedulable,
    /// No fresh `Ready` heartbeat.
    NotReady,
    /// No room by its capacity and what was `placed` on it lately.
    Full { capacity: Capacity, placed: u64 },
}

/// Why no shard takes a workspace now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unschedulable {
    /// `spec.location.selector` is not a valid label selector (retrying cannot help).
    InvalidSelector(String),
    /// No shard carries the labels the selector asks for.
    NoMatch { selector: String },
    /// Every matching shard was skipped, each for the reason given.
    NoneFits(Vec<(String, Skipped)>),
}

impl Unschedulable {
    /// Whether every shard that was passed over is full: room comes back by deletions alone.
    pub fn all_full(&self) -> bool {
        matches!(self, Unschedulable::NoneFits(skipped)
            if skipped.iter().all(|(_, why)| matches!(why, Skipped::Full { .. })))
    }
}

impl fmt::Display for Skipped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Skipped::Unschedulable => {
                write!(f, "is unschedulable ({UNSCHEDULABLE_SHARD_ANNOTATION})")
            }
            Skipped::NotReady => f.write_str("is not ready (no recent heartbeat)"),
            Skipped::Full { capacity, placed } => {
                let limit = capacity
                    .max_logical_clusters
                    .map_or_else(|| "unlimited".to_string(), |max| max.to_string());
                let lately = if *placed > 0 {
                    format!(" and {placed} placed in the last seconds")
                } else {
                    String::new()
                };
                write!(
                    f,
                    "is full ({} of {limit} logical clusters{lately}, --max-logical-clusters)",
                    capacity.logical_clusters
                )
            }
        }
    }
}

impl fmt::Display for Unschedulable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unschedulable::InvalidSelector(error) => {
                write!(f, "spec.location.selector is invalid: {error}")
            }
            Unschedulable::NoMatch { selector } => {
                write!(f, "no shard matches spec.location.selector {selector:?}")
            }
            Unschedulable::NoneFits(skipped) => {
                let reasons: Vec<String> = skipped
                    .iter()
                    .map(|(name, why)| format!("shard {name:?} {why}"))
                    .collect();
                let lead = if self.all_full() {
                    "no shard has room"
                } else {
                    "no shard can take the workspace"
                };
                write!(f, "{lead}: {}", reasons.join("; "))?;
                if self.all_full() {
                    f.write_str("; scheduling resumes when a logical cluster is deleted")?;
                }
                Ok(())
            }
        }
    }
}

/// The shard for a workspace whose `spec.location.selector` is `selector` (`None`: any shard):
/// among the matching, schedulable, live shards with room, one with the most headroom and then
/// the fewest logical clusters; `pick(n)` chooses among `n` equally good ones (a random index
/// below `n`).
pub fn choose<'a>(
    candidates: &'a [Candidate],
    selector: Option<&Value>,
    pick: impl FnOnce(usize) -> usize,
) -> Result<&'a Candidate, Unschedulable> {
    let selector = match selector {
        Some(selector) => LabelSelector::from_json(selector)
            .map_err(|e| Unschedulable::InvalidSelector(e.to_string()))?,
        None => LabelSelector::everything(),
    };
    let mut skipped = Vec::new();
    let mut fitting = Vec::new();
    for candidate in candidates.iter().filter(|c| selector.matches(&c.labels)) {
        let why = if candidate.unschedulable {
            Some(Skipped::Unschedulable)
        } else if !candidate.live {
            Some(Skipped::NotReady)
        } else if !candidate.has_room() {
            candidate.capacity.map(|capacity| Skipped::Full {
                capacity,
                placed: candidate.placed,
            })
        } else {
            None
        };
        match why {
            Some(why) => skipped.push((candidate.name.clone(), why)),
            None => fitting.push(candidate),
        }
    }
    if fitting.is_empty() {
        if skipped.is_empty() {
            return Err(Unschedulable::NoMatch {
                selector: selector.to_string(),
            });
        }
        skipped.sort_by(|a, b| a.0.cmp(&b.0));
        return Err(Unschedulable::NoneFits(skipped));
    }
    let best = fitting.iter().map(|c| c.rank()).max().unwrap_or_default();
    let ties: Vec<&Candidate> = fitting.into_iter().filter(|c| c.rank() == best).collect();
    let index = pick(ties.len()).min(ties.len() - 1);
    Ok(ties[index])
}

/// A uniformly random index below `n` (for [`choose`]).
pub fn random_index(n: usize) -> usize {
    use rand::Rng;
    if n <= 1 {
        0
    } else {
        rand::rng().random_range(0..n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const NOW: &str = "2026-01-01T00:10:00Z";

    fn now() -> jiff::Timestamp {
        kcp_apimachinery::time::parse_rfc3339(NOW).unwrap()
    }

    /// A live shard with `count` of `max` logical clusters and `labels`.
    fn shard(name: &str, count: u64, max: Option<u64>, labels: Value) -> Value {
        let mut capacity = json!({"logicalClusters": count});
        if let Some(max) = max {
            capacity["maxLogicalClusters"] = json!(max);
        }
        let mut labels = labels;
        labels["name"] = json!(name);
        json!({
            "metadata": {"name": name, "labels": labels},
            "spec": {"baseURL": format!("https://{name}:6443"), "externalURL": format!("https://{name}.example/")},
            "status": {
                "capacity": capacity,
                "conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": "2026-01-01T00:09:30Z"}],
            },
        })
    }

    fn candidates(shards: &[Value]) -> Vec<Candidate> {
        shards
            .iter()
            .filter_map(|s| Candidate::of(s, now(), 90))
            .collect()
    }

    fn chosen(shards: &[Value], selector: Option<&Value>) -> Result<String, Unschedulable> {
        choose(&candidates(shards), selector, |_| 0).map(|c| c.name.clone())
    }

    #[test]
    fn the_shard_with_most_headroom_wins() {
        let shards = [
            shard("a", 8, Some(10), json!({})),
            shard("b", 2, Some(10), json!({})),
            shard("c", 5, Some(10), json!({})),
        ];
        assert_eq!(chosen(&shards, None).unwrap(), "b");
    }

    #[test]
    fn an_unlimited_shard_has_the_most_headroom() {
        let shards = [
            shard("a", 0, Some(1000), json!({})),
            shard("b", 500, None, json!({})),
        ];
        assert_eq!(chosen(&shards, None).unwrap(), "b");
    }

    #[test]
    fn among_unlimited_shards_the_emptiest_wins() {
        let shards = [
            shard("a", 40, None, json!({})),
            shard("new", 0, None, json!({})),
            shard("b", 35, None, json!({})),
        ];
        assert_eq!(chosen(&shards, None).unwrap(), "new");
        let all = candidates(&shards);
        let filled: Vec<Candidate> = all
            .iter()
            .map(|c| match c.name.as_str() {
                "new" => c.clone().with_placed(36),
                _ => c.clone(),
            })
            .collect();
        assert_eq!(
            choose(&filled, None, |_| 0).unwrap().name,
            "b",
            "placed lately counts as held"
        );
    }

    #[test]
    fn ties_are_broken_by_the_pick() {
        let shards = [
            shard("a", 9, None, json!({})),
            shard("b", 1, Some(5), json!({})),
            shard("c", 9, None, json!({})),
        ];
        let all = candidates(&shards);
        let mut offered = 0;
        let last = choose(&all, None, |n| {
            offered = n;
            n - 1
        })
        .unwrap();
        assert_eq!(offered, 2, "a and c are both unlimited and hold as many");
        assert_eq!(last.name, "c");
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..200 {
            seen.insert(choose(&all, None, random_index).unwrap().name.clone());
        }
        assert_eq!(seen.into_iter().collect::<Vec<_>>(), ["a", "c"]);
    }

    #[test]
    fn the_selector_restricts_the_shards() {
        let shards = [
            shard("a", 0, None, json!({"region": "eu"})),
            shard("b", 0, None, json!({"region": "us"})),
        ];
        let selector = json!({"matchLabels": {"region": "us"}});
        assert_eq!(chosen(&shards, Some(&selector)).unwrap(), "b");
        let by_name =
            json!({"matchExpressions": [{"key": "name", "operator": "In", "values": ["a"]}]});
        assert_eq!(chosen(&shards, Some(&by_name)).unwrap(), "a");
        let nowhere = json!({"matchLabels": {"region": "mars"}});
        let error = chosen(&shards, Some(&nowhere)).unwrap_err();
        assert_eq!(
            error,
            Unschedulable::NoMatch {
                selector: "region=mars".into()
            }
        );
        assert_eq!(
            error.to_string(),
            "no shard matches spec.location.selector \"region=mars\""
        );
    }

    #[test]
    fn an_invalid_selector_says_so() {
        let bad = json!({"matchExpressions": [{"key": "a", "operator": "Gt"}]});
        let error = chosen(&[shard("a", 0, None, json!({}))], Some(&bad)).unwrap_err();
        assert!(
            matches!(error, Unschedulable::InvalidSelector(_)),
            "{error}"
        );
        assert!(
            error
                .to_string()
                .starts_with("spec.location.selector is invalid")
        );
    }

    #[test]
    fn unschedulable_shards_are_skipped() {
        let mut marked = shard("a", 0, None, json!({}));
        marked["metadata"]["annotations"] = json!({UNSCHEDULABLE_SHARD_ANNOTATION: ""});
        let shards = [marked.clone(), shard("b", 9, Some(10), json!({}))];
        assert_eq!(chosen(&shards, None).unwrap(), "b");
        let error = chosen(&[marked], None).unwrap_err();
        assert_eq!(
            error.to_string(),
            "no shard can take the workspace: shard \"a\" is unschedulable \
             (experimental.core.kcp.io/unschedulable)"
        );
    }

    #[test]
    fn shards_without_a_fresh_heartbeat_are_skipped() {
        let mut stale = shard("a", 0, None, json!({}));
        stale["status"]["conditions"][0]["lastHeartbeatTime"] = json!("2026-01-01T00:08:00Z");
        let mut stopped = shard("b", 0, None, json!({}));
        stopped["status"]["conditions"][0]["status"] = json!("False");
        let mut never = shard("c", 0, None, json!({}));
        never["status"] = json!({});
        let shards = [
            stale.clone(),
            stopped,
            never,
            shard("d", 9, Some(10), json!({})),
        ];
        assert_eq!(chosen(&shards, None).unwrap(), "d");
        let error = chosen(&[stale], None).unwrap_err();
        assert!(!error.all_full());
        assert_eq!(
            error.to_string(),
            "no shard can take the workspace: shard \"a\" is not ready (no recent heartbeat)"
        );
    }

    #[test]
    fn full_shards_are_skipped_and_named() {
        let shards = [
            shard("b", 3, Some(3), json!({})),
            shard("a", 5, Some(4), json!({})),
        ];
        let error = chosen(&shards, None).unwrap_err();
        assert!(error.all_full());
        assert_eq!(
            error.to_string(),
            "no shard has room: shard \"a\" is full (5 of 4 logical clusters, \
             --max-logical-clusters); shard \"b\" is full (3 of 3 logical clusters, \
             --max-logical-clusters); scheduling resumes when a logical cluster is deleted"
        );
        let with_room = [shards[0].clone(), shard("c", 3, Some(4), json!({}))];
        assert_eq!(chosen(&with_room, None).unwrap(), "c");
    }

    #[test]
    fn a_shard_reports_its_own_capacity() {
        let stale = candidates(&[shard("self", 0, Some(1), json!({}))]);
        let own = stale[0].clone().with_capacity(Capacity {
            logical_clusters: 1,
            max_logical_clusters: Some(1),
        });
        assert!(choose(&[own], None, |_| 0).unwrap_err().all_full());
        let placed_meanwhile = stale[0].clone().with_placed(1);
        assert!(
            choose(&[placed_meanwhile], None, |_| 0)
                .unwrap_err()
                .all_full()
        );
    }

    #[test]
    fn urls_come_from_the_spec() {
        let all = candidates(&[shard("a", 0, None, json!({}))]);
        assert_eq!(all[0].base_url, "https://a:6443");
        assert_eq!(all[0].external_url, "https://a.example");
        let mut bare = shard("b", 0, None, json!({}));
        bare["spec"] = json!({"baseURL": "https://b:6443"});
        assert_eq!(candidates(&[bare])[0].external_url, "https://b:6443");
    }
}
