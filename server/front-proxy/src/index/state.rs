//! What the index knows, and the walk that resolves a path (upstream `pkg/index`'s `State` and
//! `Lookup`): which shard holds which logical cluster, and per (parent logical cluster,
//! workspace name) the child logical cluster. Pure data, no I/O: the watches feed it, the proxy
//! reads it.
//!
//! Every watch event changes only its own entries, and a relist of one shard's resource
//! replaces only what that shard reported (the difference is computed; nothing is rebuilt).
//! Each feed carries its shard's generation: events of a watch stopped because its shard was
//! removed or moved are ignored, so they can never resurrect entries.
//!
//! Entries are small: shard names are interned ([`ShardId`]), names are boxed strs, a Workspace
//! is its name, its child's name, two shard ids and a flag.

use std::collections::{HashMap, HashSet};
use std::mem::size_of;
use std::sync::Arc;

use kcp_tenancy::paths::{self, ROOT, SEPARATOR, SYSTEM_PREFIX};
use kcp_tenancy::shard::ROOT_SHARD_NAME;

use crate::route::{Route, Unroutable};
use crate::services::virtual_workspaces_target;

/// A shard's interned name: its index in [`State::shards`].
pub(crate) type ShardId = u32;

/// What a watch of one shard writes with: the shard and the generation the watch was started
/// for (a stale generation writes nothing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Feed {
    pub shard: ShardId,
    pub generation: u64,
}

/// The two resources watched on every shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Watched {
    Workspaces,
    LogicalClusters,
}

/// One shard name ever seen (a Shard object, or a Workspace's `core.kcp.io/shard`).
#[derive(Debug)]
struct ShardSlot {
    name: Arc<str>,
    /// `Some` while its Shard object exists.
    base_url: Option<Arc<str>>,
    /// Where its virtual workspaces are reached (see [`virtual_workspaces_target`]).
    virtual_workspaces: Option<Arc<str>>,
    generation: u64,
    workspaces_listed: bool,
    logical_clusters_listed: bool,
}

/// A `Shard` object, decoded: its name and URLs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ShardEntry {
    pub name: String,
    /// `spec.baseURL`.
    pub base_url: String,
    /// `spec.virtualWorkspaceURL` (empty: the base URL).
    pub virtual_workspace_url: String,
}

/// A workspace as its parent's shard reports it.
#[derive(Debug, PartialEq, Eq)]
struct Child {
    /// Its own logical cluster (`spec.cluster`).
    cluster: Box<str>,
    /// The shard it was scheduled to (`core.kcp.io/shard`), when it says.
    scheduled_to: Option<ShardId>,
    /// The shard whose watch reported the Workspace.
    reported_by: ShardId,
    /// Phase `Unavailable`: 503.
    unavailable: bool,
}

/// A Workspace event, decoded: where it is, what it points to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct WorkspaceEntry {
    pub parent: String,
    pub name: String,
    pub cluster: String,
    pub scheduled_to: Option<String>,
    pub phase: String,
}

/// How big the index is (for `/metrics`: no per-workspace labels).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IndexCounts {
    /// Shards with a Shard object.
    pub shards: usize,
    /// Logical clusters with a known shard.
    pub logical_clusters: usize,
    /// Routable workspaces (not `Scheduling`).
    pub workspaces: usize,
}

#[derive(Debug, Default)]
pub(crate) struct State {
    shards: Vec<ShardSlot>,
    shard_ids: HashMap<Arc<str>, ShardId>,
    /// Logical cluster -> the shard that reported its LogicalCluster.
    clusters: HashMap<Box<str>, ShardId>,
    /// Parent logical cluster -> workspace name -> child.
    workspaces: HashMap<Box<str>, HashMap<Box<str>, Child>>,
    workspace_count: usize,
    shards_listed: bool,
}

impl State {
    fn intern(&mut self, name: &str) -> ShardId {
        if let Some(id) = self.shard_ids.get(name) {
            return *id;
        }
        let id = ShardId::try_from(self.shards.len()).unwrap_or(ShardId::MAX);
        let name: Arc<str> = Arc::from(name);
        self.shards.push(ShardSlot {
            name: name.clone(),
            base_url: None,
            virtual_workspaces: None,
            generation: 0,
            workspaces_listed: false,
            logical_clusters_listed: false,
        });
        self.shard_ids.insert(name, id);
        id
    }

    fn slot(&self, id: ShardId) -> Option<&ShardSlot> {
        self.shards.get(id as usize)
    }

    fn slot_mut(&mut self, id: ShardId) -> Option<&mut ShardSlot> {
        self.shards.get_mut(id as usize)
    }

    /// The base URL of a shard whose Shard object exists.
    pub fn base_url(&self, id: ShardId) -> Option<Arc<str>> {
        self.slot(id)?.base_url.clone()
    }

    /// Whether `feed` is still the current watch of its shard.
    fn accepts(&self, feed: Feed) -> bool {
        self.slot(feed.shard)
            .is_some_and(|slot| slot.base_url.is_some() && slot.generation == feed.generation)
    }

    /// Where the virtual workspaces of a shard whose Shard object exists are reached.
    pub fn virtual_workspaces(&self, name: &str) -> Option<Arc<str>> {
        let id = self.shard_ids.get(name)?;
        self.slot(*id)?.virtual_workspaces.clone()
    }

    /// Records a Shard object. `Some(feed)` when its watches must (re)start: it is new, or its
    /// base URL changed (its entries stay until the new watches' lists replace them).
    pub fn upsert_shard(&mut self, shard: &ShardEntry) -> Option<Feed> {
        let base_url = shard.base_url.trim_end_matches('/');
        let target = virtual_workspaces_target(&shard.name, base_url, &shard.virtual_workspace_url);
        let id = self.intern(&shard.name);
        let slot = self.slot_mut(id)?;
        if slot.virtual_workspaces.as_deref() != Some(target) {
            slot.virtual_workspaces = Some(Arc::from(target));
        }
        if slot.base_url.as_deref() == Some(base_url) {
            return None;
        }
        slot.base_url = Some(Arc::from(base_url));
        slot.generation += 1;
        slot.workspaces_listed = false;
        slot.logical_clusters_listed = false;
        Some(Feed {
            shard: id,
            generation: slot.generation,
        })
    }

    /// Forgets a Shard object: its watches' feeds go stale and every entry it reported goes.
    /// Returns its id when it was known.
    pub fn remove_shard(&mut self, name: &str) -> Option<ShardId> {
        let id = *self.shard_ids.get(name)?;
        let slot = self.slot_mut(id)?;
        slot.base_url.as_ref()?;
        slot.base_url = None;
        slot.virtual_workspaces = None;
        slot.generation += 1;
        slot.workspaces_listed = false;
        slot.logical_clusters_listed = false;
        self.clusters.retain(|_, shard| *shard != id);
        self.retain_workspaces(|_, _, child| child.reported_by != id);
        Some(id)
    }

    /// Replaces the set of shards with a fresh list of Shard objects: the feeds to (re)start
    /// and the shards that went away.
    pub fn relist_shards(&mut self, listed: &[ShardEntry]) -> (Vec<Feed>, Vec<ShardId>) {
        let names: HashSet<&str> = listed.iter().map(|shard| shard.name.as_str()).collect();
        let gone: Vec<Arc<str>> = self
            .shards
            .iter()
            .filter(|slot| slot.base_url.is_some() && !names.contains(&*slot.name))
            .map(|slot| slot.name.clone())
            .collect();
        let removed = gone
            .iter()
            .filter_map(|name| self.remove_shard(name))
            .collect();
        let started = listed
            .iter()
            .filter_map(|shard| self.upsert_shard(shard))
            .collect();
        self.shards_listed = true;
        (started, removed)
    }

    /// Whether `cluster`, reported by `feed`'s shard, may be routed to it: `system:` logical
    /// clusters are every shard's own and never routable through the proxy, and `root` belongs
    /// to the root shard (every kcp-rs shard bootstraps a `root` of its own; upstream's only
    /// exists on the root shard).
    fn routable(&self, feed: Feed, cluster: &str) -> bool {
        if cluster.starts_with(SYSTEM_PREFIX) {
            return false;
        }
        cluster != ROOT
            || self
                .slot(feed.shard)
                .is_some_and(|slot| &*slot.name == ROOT_SHARD_NAME)
    }

    /// Records a LogicalCluster reported by `feed`'s shard.
    pub fn upsert_logical_cluster(&mut self, feed: Feed, cluster: &str) {
        if !self.accepts(feed) || !self.routable(feed, cluster) {
            return;
        }
        match self.clusters.get_mut(cluster) {
            Some(shard) => *shard = feed.shard,
            None => {
                self.clusters.insert(cluster.into(), feed.shard);
            }
        }
    }

    /// Forgets a LogicalCluster, if `feed`'s shard is the one that holds it.
    pub fn delete_logical_cluster(&mut self, feed: Feed, cluster: &str) {
        if self.accepts(feed) && self.clusters.get(cluster) == Some(&feed.shard) {
            self.clusters.remove(cluster);
        }
    }

    /// Replaces what `feed`'s shard reported of its LogicalClusters with a fresh list.
    pub fn relist_logical_clusters(&mut self, feed: Feed, clusters: &[&str]) {
        if !self.accepts(feed) {
            return;
        }
        let listed: HashSet<&str> = clusters.iter().copied().collect();
        self.clusters
            .retain(|cluster, shard| *shard != feed.shard || listed.contains(&**cluster));
        for cluster in clusters {
            self.upsert_logical_cluster(feed, cluster);
        }
        self.mark_listed(feed, Watched::LogicalClusters);
    }

    /// Records a Workspace reported by `feed`'s shard; one still `Scheduling` (or without a
    /// logical cluster yet) is not routable and is left as it was, as upstream does.
    pub fn upsert_workspace(&mut self, feed: Feed, workspace: &WorkspaceEntry) {
        if !self.accepts(feed) || workspace.phase == "Scheduling" || workspace.cluster.is_empty() {
            return;
        }
        let scheduled_to = workspace.scheduled_to.as_deref().map(|s| self.intern(s));
        let child = Child {
            cluster: workspace.cluster.as_str().into(),
            scheduled_to,
            reported_by: feed.shard,
            unavailable: workspace.phase == "Unavailable",
        };
        let siblings = match self.workspaces.get_mut(workspace.parent.as_str()) {
            Some(siblings) => siblings,
            None => self
                .workspaces
                .entry(workspace.parent.as_str().into())
                .or_default(),
        };
        match siblings.get_mut(workspace.name.as_str()) {
            Some(existing) => *existing = child,
            None => {
                siblings.insert(workspace.name.as_str().into(), child);
                self.workspace_count += 1;
            }
        }
    }

    /// Forgets a Workspace, if `feed`'s shard is the one that reported it.
    pub fn delete_workspace(&mut self, feed: Feed, parent: &str, name: &str) {
        if !self.accepts(feed) {
            return;
        }
        let Some(siblings) = self.workspaces.get_mut(parent) else {
            return;
        };
        if siblings
            .get(name)
            .is_some_and(|c| c.reported_by == feed.shard)
        {
            siblings.remove(name);
            self.workspace_count -= 1;
            if siblings.is_empty() {
                self.workspaces.remove(parent);
            }
        }
    }

    /// Replaces what `feed`'s shard reported of its Workspaces with a fresh list.
    pub fn relist_workspaces(&mut self, feed: Feed, workspaces: &[WorkspaceEntry]) {
        if !self.accepts(feed) {
            return;
        }
        let listed: HashSet<(&str, &str)> = workspaces
            .iter()
            .map(|w| (w.parent.as_str(), w.name.as_str()))
            .collect();
        self.retain_workspaces(|parent, name, child| {
            child.reported_by != feed.shard || listed.contains(&(parent, name))
        });
        for workspace in workspaces {
            self.upsert_workspace(feed, workspace);
        }
        self.mark_listed(feed, Watched::Workspaces);
    }

    fn retain_workspaces(&mut self, mut keep: impl FnMut(&str, &str, &Child) -> bool) {
        let mut removed = 0;
        self.workspaces.retain(|parent, siblings| {
            let before = siblings.len();
            siblings.retain(|name, child| keep(parent, name, child));
            removed += before - siblings.len();
            !siblings.is_empty()
        });
        self.workspace_count -= removed;
    }

    fn mark_listed(&mut self, feed: Feed, watched: Watched) {
        if let Some(slot) = self.slot_mut(feed.shard) {
            match watched {
                Watched::Workspaces => slot.workspaces_listed = true,
                Watched::LogicalClusters => slot.logical_clusters_listed = true,
            }
        }
    }

    /// The Shard list is done and every shard's two resources have been listed once.
    pub fn is_ready(&self) -> bool {
        self.shards_listed
            && self
                .shards
                .iter()
                .filter(|slot| slot.base_url.is_some())
                .all(|slot| slot.workspaces_listed && slot.logical_clusters_listed)
    }

    pub fn counts(&self) -> IndexCounts {
        IndexCounts {
            shards: self.shards.iter().filter(|s| s.base_url.is_some()).count(),
            logical_clusters: self.clusters.len(),
            workspaces: self.workspace_count,
        }
    }

    /// Resolves a path as it appears after `/clusters/` (upstream `Lookup`): `user:<name>` is
    /// rewritten to the home cluster, the first segment must be a known logical cluster, every
    /// further segment is a workspace of the current cluster, whose shard is looked up again at
    /// every step (trees span shards).
    pub fn resolve(&self, path: &str) -> Result<Route, Unroutable> {
        let rewritten = paths::rewrite_home(path);
        let mut segments = rewritten.split(SEPARATOR);
        if !rewritten.split(SEPARATOR).all(paths::is_valid_segment) {
            return Err(Unroutable::Unknown);
        }
        let first = segments.next().ok_or(Unroutable::Unknown)?;
        let (mut cluster, mut shard) = self
            .clusters
            .get_key_value(first)
            .map(|(cluster, shard)| (&**cluster, *shard))
            .ok_or(Unroutable::Unknown)?;
        let mut unavailable = false;
        for segment in segments {
            let child = self
                .workspaces
                .get(cluster)
                .and_then(|siblings| siblings.get(segment))
                .ok_or(Unroutable::Unknown)?;
            unavailable |= child.unavailable;
            cluster = &child.cluster;
            shard = match self.clusters.get(cluster) {
                Some(shard) => *shard,
                None => return Err(self.missing_cluster(path, child)),
            };
        }
        if unavailable {
            return Err(Unroutable::Unavailable { path: path.into() });
        }
        let slot = self.slot(shard).ok_or(Unroutable::Unknown)?;
        let base_url = slot.base_url.clone().ok_or_else(|| gone(path, slot))?;
        let virtual_workspaces_url = slot
            .virtual_workspaces
            .clone()
            .unwrap_or_else(|| base_url.clone());
        Ok(Route {
            shard: slot.name.clone(),
            base_url,
            virtual_workspaces_url,
            cluster: Arc::from(cluster),
        })
    }

    /// Why a workspace's logical cluster has no shard: its shard's object is gone, or it is not
    /// (yet, or any more) known.
    fn missing_cluster(&self, path: &str, child: &Child) -> Unroutable {
        match child.scheduled_to.and_then(|id| self.slot(id)) {
            Some(slot) if slot.base_url.is_none() => gone(path, slot),
            _ => Unroutable::Unknown,
        }
    }

    /// An estimate of the heap the entries use: for each hash table its buckets (capacity
    /// rounded up as hashbrown does) times (entry size + 1 control byte), and for each boxed
    /// name its glibc malloc chunk (length + 8 rounded up to 16, at least 32 bytes).
    pub fn heap_bytes(&self) -> usize {
        let names: usize = self.clusters.keys().map(|k| chunk(k.len())).sum::<usize>()
            + self
                .workspaces
                .iter()
                .map(|(parent, siblings)| {
                    chunk(parent.len())
                        + table::<Box<str>, Child>(siblings.capacity())
                        + siblings
                            .iter()
                            .map(|(name, child)| chunk(name.len()) + chunk(child.cluster.len()))
                            .sum::<usize>()
                })
                .sum::<usize>();
        names
            + table::<Box<str>, ShardId>(self.clusters.capacity())
            + table::<Box<str>, HashMap<Box<str>, Child>>(self.workspaces.capacity())
    }
}

fn gone(path: &str, slot: &ShardSlot) -> Unroutable {
    Unroutable::ShardGone {
        path: path.into(),
        shard: slot.name.to_string(),
    }
}

/// Heap of a hash table of `capacity` entries (see [`State::heap_bytes`]).
fn table<K, V>(capacity: usize) -> usize {
    if capacity == 0 {
        return 0;
    }
    let buckets = (capacity * 8 / 7).next_power_of_two().max(4);
    buckets * (size_of::<(K, V)>() + 1) + 16
}

/// The malloc chunk of a `len`-byte allocation.
fn chunk(len: usize) -> usize {
    (len + 8).div_ceil(16).max(2) * 16
}

#[cfg(test)]
mod tests;
