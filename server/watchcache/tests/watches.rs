//! Watches served from the cache deliver what storage's watches deliver: randomized writes across
//! logical clusters and namespaces while watches open at random moments, scopes and starts (on the
//! embedded store and on a real etcd), each compared event by event (kind, revision, object,
//! previous object) with a storage watch from the revision the cache reported, and its initial
//! objects with storage's list at that revision; a watcher that never reads is cut off after what
//! it was given, without holding up the writes or the other watchers; a watch from before the
//! bounded history is `TooOld`, one from just inside it is served; a re-list ends the open watches;
//! the settled revision (bookmarks) follows other types' writes but never passes an event not yet
//! handed over; a logical cluster's watchers get nothing of another, even one whose name starts
//! with theirs. These mirror kube-apiserver's cacher tests: `RunTestWatch`,
//! `RunTestNamespaceScopedWatch` and `RunTestClusterScopedWatch` (storage/testing, run against the
//! cacher), `TestDispatchEventWillNotBeBlockedByTimedOutWatcher`,
//! `TestCacheIntervalInvalidationStopsWatch`, `TestCacherDontMissEventsOnReinitialization` and
//! `TestCacherSendBookmarkEvents` (cacher_whitebox_test.go), and `TestEvents` ("too old resource
//! version", watch_cache_test.go).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::{Stream, StreamExt};
use kcp_apimachinery::ApiError;
use kcp_registry::storage::objects::{CLUSTER_ANNOTATION, Change, ChangeType};
use kcp_registry::storage::{KeyLayout, ObjectStore};
use kcp_storage::{Revision, Storage};
use kcp_watchcache::{
    CachedEvents, CachedWatch, Event, Freshness, NotServed, WatchCaches, WatchQuery, WatchStart,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use common::{
    Breakable, CLUSTERS, DEADLINE, NAMESPACES, OwnEtcd, Scope, answer, configmap, configmaps,
    logical_cluster, random_write, served, storage_page, what,
};

/// Events a watcher may have pending before it is cut off (`WATCHER_BUFFER` in watchers.rs).
const WATCHER_BUFFER: usize = 1024;
/// How long the store-wide progress watch waits before it opens again (`RETRY_AFTER` in
/// progress.rs).
const PROGRESS_RETRY: Duration = Duration::from_secs(1);
/// Bytes of objects the history of a type holds at most (`HISTORY_BYTES` in history.rs).
const HISTORY_BYTES: usize = 32 << 20;

/// An event as a client sees it, from either side.
#[derive(Debug, PartialEq)]
struct Seen {
    kind: ChangeType,
    revision: Revision,
    object: Value,
    previous: Option<Value>,
    /// The object's JSON as sent: the cache's kept bytes, storage's object encoded.
    json: Bytes,
}

impl Seen {
    fn cached(event: &Event) -> Seen {
        Seen {
            kind: event.kind,
            revision: event.revision,
            object: event.object.decode().unwrap(),
            previous: event.previous.as_ref().map(|p| p.decode().unwrap()),
            json: event.object.json().clone(),
        }
    }

    fn stored(change: Change) -> Seen {
        Seen {
            kind: change.kind,
            revision: change.revision,
            json: Bytes::from(serde_json::to_vec(&change.object).unwrap()),
            object: change.object,
            previous: change.previous,
        }
    }

    fn cluster(&self) -> &str {
        self.object["metadata"]["annotations"][CLUSTER_ANNOTATION]
            .as_str()
            .unwrap()
    }

    fn namespace(&self) -> &str {
        self.object["metadata"]["namespace"].as_str().unwrap()
    }

    fn name(&self) -> &str {
        self.object["metadata"]["name"].as_str().unwrap()
    }

    fn in_scope(&self, scope: Scope) -> bool {
        match scope {
            Scope::All => true,
            Scope::Cluster(cluster) => self.cluster() == cluster,
            Scope::Namespace(cluster, namespace) => {
                self.cluster() == cluster && self.namespace() == namespace
            }
        }
    }
}

type Changes = Pin<Box<dyn Stream<Item = Result<Change, ApiError>> + Send>>;

fn start_caches(storage: Arc<dyn Storage>) -> (ObjectStore, WatchCaches, CancellationToken) {
    let objects = ObjectStore::new(storage, "/registry");
    let shutdown = CancellationToken::new();
    let caches = WatchCaches::new(objects.clone(), &shutdown);
    (objects, caches, shutdown)
}

/// The cache's answer to a watch of `prefix` from `start`, asked until it is ready.
async fn watch(
    caches: &WatchCaches,
    objects: &ObjectStore,
    prefix: &str,
    start: WatchStart,
) -> Result<CachedWatch, NotServed> {
    let keys = configmaps(objects);
    let query = WatchQuery {
        root: keys.all_clusters(),
        namespaced: true,
        prefix,
    };
    answer(|| caches.watch(query, start)).await
}

/// A watch served from the cache, and `storage`'s watch of the same prefix from the same revision.
async fn open(
    caches: &WatchCaches,
    storage: &ObjectStore,
    prefix: &str,
    start: WatchStart,
) -> (CachedWatch, Changes) {
    let cached = served(|| watch(caches, storage, prefix, start)).await;
    let changes = storage.watch(prefix, cached.revision + 1).await.unwrap();
    (cached, Box::pin(changes))
}

/// The cache's initial objects are storage's list at the revision the watch reported.
async fn assert_initial_agrees(
    storage: &ObjectStore,
    prefix: &str,
    cached: &CachedWatch,
    context: &str,
) {
    let expected = storage_page(storage, prefix, cached.revision, 0, None, &|_| true).await;
    let initial: Vec<Value> = cached.initial.iter().map(|o| o.decode().unwrap()).collect();
    assert_eq!(initial, expected.items, "{context}: initial objects");
}

/// Reads the cache's events up to the first one `last` picks (`false`), or until the watch ends
/// (`true`).
async fn read_cached(
    events: &mut CachedEvents,
    mut last: impl FnMut(&Seen) -> bool,
) -> (Vec<Seen>, bool) {
    let mut seen = Vec::new();
    loop {
        let next = tokio::time::timeout(DEADLINE, events.next())
            .await
            .unwrap_or_else(|_| panic!("no cached event within {DEADLINE:?} after {}", seen.len()));
        let Some(event) = next else {
            return (seen, true);
        };
        let event = Seen::cached(&event);
        let done = last(&event);
        seen.push(event);
        if done {
            return (seen, false);
        }
    }
}

/// Reads storage's events up to the first one `last` picks.
async fn read_stored(changes: &mut Changes, mut last: impl FnMut(&Seen) -> bool) -> Vec<Seen> {
    let mut seen = Vec::new();
    loop {
        let change = match tokio::time::timeout(DEADLINE, changes.next()).await {
            Ok(Some(Ok(change))) => change,
            Ok(Some(Err(error))) => panic!("the storage watch failed: {}", error.message),
            Ok(None) => panic!("the storage watch ended after {} events", seen.len()),
            Err(_) => panic!("no stored event within {DEADLINE:?} after {}", seen.len()),
        };
        let event = Seen::stored(change);
        let done = last(&event);
        seen.push(event);
        if done {
            return seen;
        }
    }
}

/// Storage's next `count` events.
async fn take_stored(changes: &mut Changes, count: usize) -> Vec<Seen> {
    if count == 0 {
        return Vec::new();
    }
    let mut left = count;
    read_stored(changes, |_| {
        left -= 1;
        left == 0
    })
    .await
}

fn assert_same_events(cached: &[Seen], stored: &[Seen], context: &str) {
    if let Some(at) = (0..cached.len().min(stored.len())).find(|&i| cached[i] != stored[i]) {
        panic!(
            "{context}: event {at} differs\n  cache:   {:?}\n  storage: {:?}",
            cached[at], stored[at]
        );
    }
    assert_eq!(
        cached.len(),
        stored.len(),
        "{context}: the cache delivered {} events, storage {}",
        cached.len(),
        stored.len()
    );
}

/// Waits until `events` reports a settled revision of at least `revision`, collecting what it
/// hands over meanwhile (read after the settled revision, as a bookmark is sent).
async fn settle(events: &mut CachedEvents, revision: Revision, into: &mut Vec<Seen>) {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let settled = events.settled_revision().expect("the watch is open");
        while let Some(event) = events.try_next() {
            into.push(Seen::cached(&event));
        }
        if settled >= revision {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "settled at {settled}, not {revision}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn create(objects: &ObjectStore, cluster: &str, namespace: &str, name: &str) -> Revision {
    let keys = configmaps(objects);
    let key = keys.object(&logical_cluster(cluster), Some(namespace), name);
    objects
        .create(&key, &configmap(namespace, name, "a", 0), what(name))
        .await
        .unwrap()
        .revision
}

/// A write of another type than the watched one.
async fn create_secret(objects: &ObjectStore, i: usize) -> Revision {
    let secrets = objects.keys("", "secrets", KeyLayout::BuiltIn);
    let name = format!("s{i}");
    let key = secrets.object(&logical_cluster("c1"), Some("default"), &name);
    let object = json!({"metadata": {"name": name, "namespace": "default"}});
    objects
        .create(&key, &object, what(&name))
        .await
        .unwrap()
        .revision
}

/// The sentinel written last in a scope, when one is written in every namespace of every cluster
/// in order: a watch of the scope has seen everything once it has seen this one.
fn last_sentinel(scope: Scope) -> (&'static str, &'static str) {
    match scope {
        Scope::All => (CLUSTERS[2], NAMESPACES[2]),
        Scope::Cluster(cluster) => (cluster, NAMESPACES[2]),
        Scope::Namespace(cluster, namespace) => (cluster, namespace),
    }
}

const SENTINEL: &str = "sentinel";

fn is_last_sentinel(event: &Seen, scope: Scope) -> bool {
    let (cluster, namespace) = last_sentinel(scope);
    event.name() == SENTINEL && event.cluster() == cluster && event.namespace() == namespace
}

fn random_start(rng: &mut StdRng, oldest: Revision, current: Revision) -> WatchStart {
    match rng.random_range(0..3) {
        0 => WatchStart::After(rng.random_range(oldest..=current)),
        1 => WatchStart::Initial(Freshness::Any),
        _ => WatchStart::Initial(Freshness::AtLeast(current)),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn randomized_watches_deliver_what_storage_watches_deliver() {
    randomized_watches(kcp_storage::open_in_memory().await.unwrap()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn randomized_watches_deliver_what_storage_watches_deliver_on_etcd() {
    let etcd = OwnEtcd::start().await;
    randomized_watches(etcd.storage.clone()).await;
}

/// Two writers make random writes while watches open at random moments, scopes and starts; each
/// is compared event by event with storage's watch from its revision.
async fn randomized_watches(storage: Arc<dyn Storage>) {
    let seed: u64 = rand::random();
    println!("seed {seed}");
    let (objects, caches, shutdown) = start_caches(storage);
    let keys = configmaps(&objects);
    let mut rng = StdRng::seed_from_u64(seed);
    for _ in 0..60 {
        random_write(&objects, &mut rng).await;
    }
    // The history starts with the list that filled the cache.
    let all = keys.all_clusters();
    let filled = open(&caches, &objects, all, WatchStart::Initial(Freshness::Any))
        .await
        .0
        .revision;
    // Each write makes at most one event, so no watch here holds more than its buffer unread.
    let writes_per_writer = 400;
    assert!(2 * writes_per_writer + CLUSTERS.len() * NAMESPACES.len() < WATCHER_BUFFER);
    let writers: Vec<_> = (0..2)
        .map(|i| {
            let objects = objects.clone();
            tokio::spawn(async move {
                let mut rng = StdRng::seed_from_u64(seed ^ (i + 1));
                for _ in 0..writes_per_writer {
                    random_write(&objects, &mut rng).await;
                }
            })
        })
        .collect();
    let mut watches = Vec::new();
    while watches.len() < 60 && (writers.iter().any(|w| !w.is_finished()) || watches.len() < 20) {
        tokio::time::sleep(Duration::from_millis(rng.random_range(0..30))).await;
        let scope = Scope::random(&mut rng);
        let prefix = scope.prefix(&keys);
        let current = objects.current_revision().await.unwrap();
        let start = random_start(&mut rng, filled, current);
        let (cached, changes) = open(&caches, &objects, &prefix, start).await;
        let context = format!("seed {seed}: {scope:?} {start:?} at {}", cached.revision);
        match start {
            WatchStart::After(revision) => {
                assert_eq!(cached.revision, revision, "{context}");
                assert!(cached.initial.is_empty(), "{context}");
            }
            WatchStart::Initial(freshness) => {
                if let Freshness::AtLeast(revision) = freshness {
                    assert!(cached.revision >= revision, "{context}");
                }
                assert_initial_agrees(&objects, &prefix, &cached, &context).await;
            }
        }
        watches.push((scope, context, cached.events, changes));
    }
    for writer in writers {
        writer.await.unwrap();
    }
    for cluster in CLUSTERS {
        for namespace in NAMESPACES {
            create(&objects, cluster, namespace, SENTINEL).await;
        }
    }
    println!("{} watches", watches.len());
    for (scope, context, mut events, mut changes) in watches {
        let (cached, ended) = read_cached(&mut events, |e| is_last_sentinel(e, scope)).await;
        let stored = read_stored(&mut changes, |e| is_last_sentinel(e, scope)).await;
        assert!(
            !ended,
            "{context}: the watch ended after {} events",
            cached.len()
        );
        assert_same_events(&cached, &stored, &context);
        assert!(events.try_next().is_none(), "{context}: more than storage");
    }
    // Every watch is gone: none is left behind in the cache.
    let stats = caches.stats();
    assert_eq!(stats[0].watchers, 0, "{stats:?}");
    shutdown.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watcher_that_never_reads_is_cut_off_without_holding_up_writes_or_other_watchers() {
    let (objects, caches, shutdown) = start_caches(kcp_storage::open_in_memory().await.unwrap());
    let keys = configmaps(&objects);
    create(&objects, "c1", "default", "first").await;
    let from = open(
        &caches,
        &objects,
        keys.all_clusters(),
        WatchStart::Initial(Freshness::Any),
    )
    .await
    .0
    .revision;
    let prefix = Scope::Cluster("c1").prefix(&keys);
    let mut idle = served(|| watch(&caches, &objects, &prefix, WatchStart::After(from))).await;
    let elsewhere = Scope::Cluster("c2").prefix(&keys);
    let mut quiet = served(|| watch(&caches, &objects, &elsewhere, WatchStart::After(from))).await;
    let (reading, mut changes) = open(&caches, &objects, &prefix, WatchStart::After(from)).await;
    let writes = WATCHER_BUFFER + 100;
    let reader = tokio::spawn(async move {
        let mut events = reading.events;
        let mut left = writes;
        let (seen, ended) = read_cached(&mut events, |_| {
            left -= 1;
            left == 0
        })
        .await;
        assert!(
            !ended,
            "the reading watcher was cut off after {}",
            seen.len()
        );
        seen
    });
    let started = Instant::now();
    let writers: Vec<_> = (0..4)
        .map(|writer| {
            let objects = objects.clone();
            tokio::spawn(async move {
                for i in (writer..writes).step_by(4) {
                    let namespace = NAMESPACES[i % NAMESPACES.len()];
                    create(&objects, "c1", namespace, &format!("cm-{i}")).await;
                }
            })
        })
        .collect();
    for writer in writers {
        writer.await.unwrap();
    }
    let took = started.elapsed();
    println!("{writes} writes in {took:?}");
    assert!(
        took < Duration::from_secs(10),
        "{writes} writes took {took:?}"
    );
    let stored = take_stored(&mut changes, writes).await;
    let read = reader.await.unwrap();
    assert_same_events(&read, &stored, "the reading watcher");
    // What the idle watcher was given stays readable, then its stream ends.
    let (given, ended) = read_cached(&mut idle.events, |_| false).await;
    assert!(ended);
    assert_same_events(&given, &stored[..WATCHER_BUFFER], "the idle watcher");
    let stats = caches.stats();
    assert_eq!(stats[0].cut_watchers, 1, "{stats:?}");
    // A watcher of another logical cluster was offered nothing, and is still watching.
    let mut offered = Vec::new();
    settle(&mut quiet.events, stored[writes - 1].revision, &mut offered).await;
    assert!(offered.is_empty(), "{offered:?}");
    let still = tokio::time::timeout(Duration::from_millis(50), quiet.events.next()).await;
    assert!(still.is_err(), "the quiet watcher's stream ended");
    shutdown.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_from_before_the_history_is_too_old_and_one_from_inside_it_agrees() {
    let (objects, caches, shutdown) = start_caches(kcp_storage::open_in_memory().await.unwrap());
    let keys = configmaps(&objects);
    let all = keys.all_clusters();
    create(&objects, "c1", "default", "first").await;
    let filled = open(&caches, &objects, all, WatchStart::Initial(Freshness::Any))
        .await
        .0
        .revision;
    // Objects of 1 MiB overflow the history's bytes bound after 32 events, long before its count
    // bound (10,000 events, which would take too long to write in a debug build). Half of them in
    // another logical cluster, which a watch of one cluster replays none of.
    let writes = 34;
    let writers: Vec<_> = ["c1", "c2"]
        .into_iter()
        .map(|cluster| {
            let objects = objects.clone();
            tokio::spawn(async move {
                let keys = configmaps(&objects);
                let big = "x".repeat(1 << 20);
                let mut revisions = Vec::new();
                for i in 0..writes / 2 {
                    let name = format!("big-{i}");
                    let key = keys.object(&logical_cluster(cluster), Some("default"), &name);
                    let object = json!({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": name, "namespace": "default"}, "data": {"v": big}});
                    let created = objects.create(&key, &object, what(&name)).await.unwrap();
                    revisions.push((created.revision, cluster));
                }
                revisions
            })
        })
        .collect();
    let mut revisions = Vec::new();
    for writer in writers {
        revisions.extend(writer.await.unwrap());
    }
    revisions.sort();
    let current = revisions.last().unwrap().0;
    assert_eq!(
        revisions.iter().map(|(r, _)| *r).collect::<Vec<_>>(),
        (filled + 1..=current).collect::<Vec<_>>(),
        "nothing else writes, so the revisions follow each other"
    );
    // Once the cache has applied the last write, its history holds the newest events only.
    watch(&caches, &objects, all, WatchStart::After(current))
        .await
        .unwrap();
    let stats = caches.stats();
    let kept = stats[0].history_events;
    assert!(kept > 0 && kept < writes, "{stats:?}");
    assert!(stats[0].history_bytes <= HISTORY_BYTES, "{stats:?}");
    let complete_after = current - kept as Revision;
    for old in [filled, complete_after - 1] {
        assert!(
            matches!(
                watch(&caches, &objects, all, WatchStart::After(old)).await,
                Err(NotServed::TooOld(r)) if r == old
            ),
            "a watch after {old} (history complete after {complete_after})"
        );
    }
    let from_inside = WatchStart::After(complete_after);
    watch(&caches, &objects, all, from_inside).await.unwrap();
    let prefix = Scope::Cluster("c1").prefix(&keys);
    let (mut cached, mut changes) = open(&caches, &objects, &prefix, from_inside).await;
    let mut replayed = Vec::new();
    settle(&mut cached.events, current, &mut replayed).await;
    let in_c1 = revisions
        .iter()
        .filter(|(r, cluster)| *r > complete_after && *cluster == "c1")
        .count();
    let stored = take_stored(&mut changes, in_c1).await;
    assert_same_events(&replayed, &stored, &format!("c1 after {complete_after}"));
    shutdown.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relist_ends_the_open_watches_and_later_ones_agree_with_storage() {
    let unbroken = kcp_storage::open_in_memory().await.unwrap();
    let breakable = Breakable::over(unbroken.clone());
    let (objects, caches, shutdown) = start_caches(breakable.clone());
    let storage = ObjectStore::new(unbroken, "/registry");
    let keys = configmaps(&objects);
    let mut rng = StdRng::seed_from_u64(29);
    for _ in 0..60 {
        random_write(&objects, &mut rng).await;
    }
    let all = keys.all_clusters();
    let filled = open(&caches, &storage, all, WatchStart::Initial(Freshness::Any))
        .await
        .0
        .revision;
    let mut open_watches = Vec::new();
    for (scope, start) in [
        (Scope::All, WatchStart::After(filled)),
        (Scope::Cluster("c1"), WatchStart::Initial(Freshness::Any)),
        (Scope::Namespace("c2", "ns1"), WatchStart::After(filled)),
    ] {
        let prefix = scope.prefix(&keys);
        let (cached, changes) = open(&caches, &storage, &prefix, start).await;
        open_watches.push((format!("{scope:?} {start:?}"), cached, changes));
    }
    for _ in 0..30 {
        random_write(&objects, &mut rng).await;
    }
    breakable.break_watches();
    for _ in 0..30 {
        random_write(&objects, &mut rng).await;
    }
    // Every open watch ends, after events storage sent too.
    for (context, mut cached, mut changes) in open_watches {
        let (delivered, ended) = read_cached(&mut cached.events, |_| false).await;
        assert!(ended);
        let stored = take_stored(&mut changes, delivered.len()).await;
        assert_same_events(&delivered, &stored, &context);
    }
    // The relisted cache's history starts at its list: the revision before it is storage's to
    // serve.
    assert!(matches!(
        watch(&caches, &objects, all, WatchStart::After(filled)).await,
        Err(NotServed::TooOld(_))
    ));
    // The store-wide progress watch broke too: once it is open again (a second later) every cache
    // lists once more, which may end the watches opened before. One opened now, read through
    // that while writes go on, agrees with storage as far as it goes, and ends cleanly if it ends.
    let (mut through, mut changes) =
        open(&caches, &storage, all, WatchStart::Initial(Freshness::Any)).await;
    assert_initial_agrees(&storage, all, &through, "through the second re-list").await;
    let mut delivered = Vec::new();
    let mut through_ended = false;
    let until = Instant::now() + 2 * PROGRESS_RETRY;
    for round in 0.. {
        if through_ended || Instant::now() > until {
            break;
        }
        for _ in 0..5 {
            random_write(&objects, &mut rng).await;
        }
        let marker = format!("{SENTINEL}-{round}");
        create(&objects, "root", "default", &marker).await;
        let (events, end) = read_cached(&mut through.events, |e| e.name() == marker).await;
        delivered.extend(events);
        through_ended = end;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let stored = take_stored(&mut changes, delivered.len()).await;
    assert_same_events(&delivered, &stored, "through the second re-list");
    // With no re-list to come (if it came late, the next attempt), a watch opened now follows
    // every write.
    let mut complete = false;
    for attempt in 0..3 {
        let (mut after, mut changes) =
            open(&caches, &storage, all, WatchStart::Initial(Freshness::Any)).await;
        let context = format!("after the re-lists, attempt {attempt}");
        assert_initial_agrees(&storage, all, &after, &context).await;
        for _ in 0..30 {
            random_write(&objects, &mut rng).await;
        }
        let marker = format!("{SENTINEL}-after-{attempt}");
        create(&objects, "root", "default", &marker).await;
        let (delivered, ended) = read_cached(&mut after.events, |e| e.name() == marker).await;
        let stored = take_stored(&mut changes, delivered.len()).await;
        assert_same_events(&delivered, &stored, &context);
        if !ended {
            complete = true;
            break;
        }
    }
    assert!(
        complete,
        "every watch opened after the re-lists ended early"
    );
    println!("the watch opened before the second re-list ended: {through_ended}");
    shutdown.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_settled_revision_follows_other_types_and_never_passes_an_undelivered_event() {
    let (objects, caches, shutdown) = start_caches(kcp_storage::open_in_memory().await.unwrap());
    let keys = configmaps(&objects);
    let all = keys.all_clusters();
    create(&objects, "c1", "default", "first").await;
    let (mut cached, mut changes) =
        open(&caches, &objects, all, WatchStart::Initial(Freshness::Any)).await;
    // Configmaps quiet, secrets written: the settled revision follows the store.
    let mut received = Vec::new();
    let mut last = 0;
    for i in 0..5 {
        last = create_secret(&objects, i).await;
    }
    settle(&mut cached.events, last, &mut received).await;
    assert!(received.is_empty(), "{received:?}");
    // Both written at once: every settled revision read covers only events handed over after it.
    let writer = {
        let objects = objects.clone();
        tokio::spawn(async move {
            let mut rng = StdRng::seed_from_u64(31);
            for i in 5..400 {
                if rng.random_bool(0.5) {
                    random_write(&objects, &mut rng).await;
                } else {
                    create_secret(&objects, i).await;
                }
            }
        })
    };
    let mut checkpoints = Vec::new();
    while !writer.is_finished() {
        let settled = cached.events.settled_revision().expect("the watch is open");
        while let Some(event) = cached.events.try_next() {
            received.push(Seen::cached(&event));
        }
        checkpoints.push((settled, received.len()));
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    writer.await.unwrap();
    let last = create(&objects, "root", "default", SENTINEL).await;
    settle(&mut cached.events, last, &mut received).await;
    let stored = read_stored(&mut changes, |e| e.name() == SENTINEL).await;
    assert_same_events(&received, &stored, "settled");
    assert!(checkpoints.len() > 10, "{} checkpoints", checkpoints.len());
    for (settled, handed_over) in checkpoints {
        let due = stored.iter().filter(|e| e.revision <= settled).count();
        assert!(
            handed_over >= due,
            "settled at {settled} when {handed_over} events had been handed over, but {due} are at \
             or before it (the next: {:?})",
            stored[handed_over]
        );
    }
    shutdown.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watchers_of_a_logical_cluster_get_nothing_of_another_even_one_named_like_it() {
    let (objects, caches, shutdown) = start_caches(kcp_storage::open_in_memory().await.unwrap());
    let keys = configmaps(&objects);
    let places = [("c1", "ns"), ("c1", "ns1"), ("c10", "ns"), ("c10", "ns1")];
    for (cluster, namespace) in places {
        create(&objects, cluster, namespace, "before").await;
    }
    let all = keys.all_clusters();
    let (mut everything, mut changes) =
        open(&caches, &objects, all, WatchStart::Initial(Freshness::Any)).await;
    let from = everything.revision;
    let scopes = [
        Scope::Cluster("c1"),
        Scope::Cluster("c10"),
        Scope::Namespace("c1", "ns"),
        Scope::Namespace("c10", "ns"),
    ];
    let mut watches = Vec::new();
    for scope in scopes {
        for start in [WatchStart::After(from), WatchStart::Initial(Freshness::Any)] {
            let prefix = scope.prefix(&keys);
            let cached = served(|| watch(&caches, &objects, &prefix, start)).await;
            let context = format!("{scope:?} {start:?}");
            if let WatchStart::Initial(_) = start {
                assert_initial_agrees(&objects, &prefix, &cached, &context).await;
                let places = if let Scope::Cluster(_) = scope { 2 } else { 1 };
                assert_eq!(cached.initial.len(), places, "{context}");
            }
            watches.push((scope, context, cached));
        }
    }
    // Three events in each place: created, updated, deleted.
    let mut last = 0;
    for (cluster, namespace) in places {
        create(&objects, cluster, namespace, "after").await;
        let key = keys.object(&logical_cluster(cluster), Some(namespace), "before");
        let current = objects.get(&key, what("before")).await.unwrap().unwrap();
        let changed = configmap(namespace, "before", "b", 1);
        objects
            .update(&key, &changed, current.revision, what("before"))
            .await
            .unwrap();
        let key = keys.object(&logical_cluster(cluster), Some(namespace), "after");
        last = objects
            .delete(&key, None, what("after"))
            .await
            .unwrap()
            .revision;
    }
    let mut received = Vec::new();
    settle(&mut everything.events, last, &mut received).await;
    let stored = take_stored(&mut changes, 3 * places.len()).await;
    assert_same_events(&received, &stored, "every cluster");
    for (scope, context, mut cached) in watches {
        let mut received = Vec::new();
        settle(&mut cached.events, last, &mut received).await;
        let expected: Vec<&Seen> = stored.iter().filter(|e| e.in_scope(scope)).collect();
        let received: Vec<&Seen> = received.iter().collect();
        assert_eq!(received, expected, "{context}");
        assert_eq!(
            expected.len(),
            if let Scope::Cluster(_) = scope { 6 } else { 3 }
        );
    }
    shutdown.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_cut_off_never_reports_a_settled_revision_past_what_it_missed() {
    let (objects, caches, shutdown) = start_caches(kcp_storage::open_in_memory().await.unwrap());
    let keys = configmaps(&objects);
    create(&objects, "c1", "default", "first").await;
    let all = keys.all_clusters();
    let from = open(&caches, &objects, all, WatchStart::Initial(Freshness::Any))
        .await
        .0
        .revision;
    let prefix = Scope::Cluster("c1").prefix(&keys);
    let (mut idle, mut changes) = open(&caches, &objects, &prefix, WatchStart::After(from)).await;
    let writes = WATCHER_BUFFER + 10;
    let mut last = 0;
    for i in 0..writes {
        last = create(&objects, "c1", "default", &format!("cm-{i}")).await;
    }
    // The cache has applied every write (and cut the idle watch off).
    watch(&caches, &objects, all, WatchStart::After(last))
        .await
        .unwrap();
    // As the handler sends a bookmark: the settled revision first, then what the watch hands over.
    let settled = idle.events.settled_revision();
    assert_eq!(settled, None, "a watch cut off has no settled revision");
    let mut given = Vec::new();
    while let Some(event) = idle.events.try_next() {
        given.push(Seen::cached(&event));
    }
    let stored = take_stored(&mut changes, writes).await;
    assert_same_events(&given, &stored[..given.len()], "the cut watch");
    assert_eq!(
        given.len(),
        WATCHER_BUFFER,
        "it was handed what fit before it was cut"
    );
    shutdown.cancel();
}
