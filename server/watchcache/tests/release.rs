//! A type's cache that has served no list, opened no watch and had no watcher for
//! [`IDLE_RELEASE`] is released (its objects dropped, forgotten by the feed), counted, and built
//! again by the next two reads, as a type read for the first time. Runs on tokio's paused clock,
//! which moves on by itself whenever every task waits.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use kcp_registry::LogicalClusterName;
use kcp_registry::storage::objects::ObjectRef;
use kcp_registry::storage::{KeyLayout, ObjectStore};
use kcp_watchcache::{
    Freshness, IDLE_RELEASE, ListQuery, NotServed, WatchCaches, WatchQuery, WatchStart,
};
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// Lists every ConfigMap until the cache serves it (the first read of a type is `Cold`, the
/// second creates the cache, which then fills); how many items it served.
/// A list of everything of the type, as the cache holds it (`resourceVersion=0`).
fn whole_list(root: &str) -> ListQuery<'_> {
    ListQuery {
        root,
        namespaced: true,
        prefix: root,
        after: None,
        limit: 0,
        freshness: Freshness::Any,
    }
}

async fn list_until_served(caches: &WatchCaches, root: &str) -> usize {
    for _ in 0..100 {
        match caches.list(whole_list(root), None).await {
            Ok(page) => return page.items.len(),
            Err(NotServed::Cold | NotServed::NotReady) => {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Err(other) => panic!("{other}"),
        }
    }
    panic!("the cache did not serve");
}

#[tokio::test(start_paused = true)]
async fn an_idle_cache_without_watchers_is_released_and_built_again_on_demand() {
    let storage = kcp_storage::open_in_memory().await.unwrap();
    let objects = ObjectStore::new(storage, "/registry");
    let shutdown = CancellationToken::new();
    let caches = WatchCaches::new(objects.clone(), &shutdown);
    let keys = objects.keys("", "configmaps", KeyLayout::BuiltIn);
    let root = keys.all_clusters();
    let cluster = LogicalClusterName::root();
    let created = objects
        .create(
            &keys.object(&cluster, Some("default"), "x"),
            &json!({"metadata": {"name": "x", "namespace": "default"}}),
            ObjectRef {
                group: "",
                resource: "configmaps",
                name: "x",
            },
        )
        .await
        .unwrap();
    assert_eq!(list_until_served(&caches, root).await, 1);
    assert_eq!(caches.cached_types(), 1);

    // A list within the idle time keeps the cache for another idle time.
    tokio::time::sleep(IDLE_RELEASE - Duration::from_secs(60)).await;
    assert_eq!(list_until_served(&caches, root).await, 1);
    tokio::time::sleep(IDLE_RELEASE - Duration::from_secs(60)).await;
    assert_eq!(caches.cached_types(), 1);

    // So does a watcher, however long ago it started.
    let query = WatchQuery {
        root,
        namespaced: true,
        prefix: root,
    };
    let watch = caches
        .watch(query, WatchStart::After(created.revision))
        .await
        .unwrap();
    tokio::time::sleep(IDLE_RELEASE * 2).await;
    assert_eq!(caches.cached_types(), 1);
    assert_eq!(caches.stats()[0].objects, 1);
    assert!(caches.released().is_empty());

    // Without it, the cache is released at the next check (every 10 s).
    drop(watch);
    tokio::time::sleep(Duration::from_secs(11)).await;
    assert_eq!(caches.cached_types(), 0);
    assert_eq!(caches.released(), [(root.to_string(), 1)]);

    // The next read is a first read again; the one after builds the cache anew.
    let first = whole_list(root);
    assert!(matches!(
        caches.list(first, None).await,
        Err(NotServed::Cold)
    ));
    assert_eq!(list_until_served(&caches, root).await, 1);
    assert_eq!(caches.cached_types(), 1);
    shutdown.cancel();
}
