//! The cache answers what storage answers: randomized creates, updates and deletes across logical
//! clusters and namespaces while lists run (on the embedded store and on a real etcd), each page
//! compared with storage's page at the revision the cache reported (items, order, `continue`
//! token), pages continued across the two;
//! a new cache over existing data after a restart of the store; continuations after compaction;
//! storage watches that break (the cache lists again, the progress watch makes every cache do so).
//! kube-apiserver's cacher tests compare cache and etcd the same way (`cacher_whitebox_test`,
//! the storage consistency checker).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;

use kcp_registry::LogicalClusterName;
use kcp_registry::storage::continuation::Continuation;
use kcp_registry::storage::objects::{ListPage, ListRequest};
use kcp_registry::storage::{KeyLayout, ObjectStore};
use kcp_storage::Storage;
use kcp_watchcache::{CachedPage, Freshness, ListQuery, NotServed, WatchCaches};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use common::{
    Breakable, Keep, OwnEtcd, Scope, configmap, configmaps, random_write, served, storage_page,
    what,
};

fn tier_a(object: &Value) -> bool {
    object["metadata"]["labels"]["tier"] == "a"
}

fn assert_same(cache: &CachedPage, storage: &ListPage, context: &str) {
    let items: Vec<Value> = cache.items.iter().map(|o| o.decode().unwrap()).collect();
    assert_eq!(items, storage.items, "{context}");
    assert_eq!(cache.revision, storage.revision, "{context}");
    assert_eq!(cache.continue_token, storage.continue_token, "{context}");
    for (object, stored) in cache.items.iter().zip(&storage.items) {
        assert_eq!(object.json(), &serde_json::to_vec(stored).unwrap()[..]);
    }
}

/// Lists once from the cache as `freshness` asks and pages through, each page from the cache or
/// from storage at random, comparing every page with storage's.
async fn list_and_compare(
    objects: &ObjectStore,
    caches: &WatchCaches,
    rng: &mut StdRng,
    freshness: Freshness,
) {
    let keys = configmaps(objects);
    let prefix = Scope::random(rng).prefix(&keys);
    let limit = [0, 1, 3, 7][rng.random_range(0..4)];
    let selective = rng.random_bool(0.3);
    let keep: &Keep = if selective { &tier_a } else { &|_| true };
    let query = ListQuery {
        root: keys.all_clusters(),
        namespaced: true,
        prefix: &prefix,
        after: None,
        limit,
        freshness,
    };
    let page = served(|| caches.list(query, selective.then_some(keep))).await;
    let context = format!("{prefix} limit {limit} selective {selective} {freshness:?}");
    let expected = storage_page(objects, &prefix, page.revision, limit, None, keep).await;
    assert_same(&page, &expected, &context);
    if let Freshness::AtLeast(revision) = freshness {
        assert!(page.revision >= revision, "{context}");
    }
    let mut token = page.continue_token;
    while let Some(next) = token {
        let revision = Continuation::decode(&next).unwrap().revision();
        let from_storage = storage_page(objects, &prefix, revision, limit, Some(&next), keep).await;
        let after = Continuation::decode(&next).unwrap();
        let query = ListQuery {
            after: Some(after.after()),
            freshness: Freshness::Exactly(revision),
            ..query
        };
        token = match caches.list(query, selective.then_some(keep)).await {
            Ok(page) if rng.random_bool(0.5) => {
                assert_same(&page, &from_storage, &format!("{context} continued"));
                page.continue_token
            }
            Ok(_) | Err(NotServed::Moved(_) | NotServed::Behind(_)) => from_storage.continue_token,
            Err(error) => panic!("{error}"),
        };
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn randomized_writes_and_lists_agree_with_storage() {
    randomized_writes_and_lists(kcp_storage::open_in_memory().await.unwrap()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn randomized_writes_and_lists_agree_with_storage_on_etcd() {
    let etcd = OwnEtcd::start().await;
    randomized_writes_and_lists(etcd.storage.clone()).await;
}

/// Two writers make random writes while lists from the cache, at random scopes, limits, selectors
/// and freshness, are compared page by page with storage's.
async fn randomized_writes_and_lists(storage: Arc<dyn Storage>) {
    let seed: u64 = rand::random();
    println!("seed {seed}");
    let objects = ObjectStore::new(storage, "/registry");
    let shutdown = CancellationToken::new();
    let caches = Arc::new(WatchCaches::new(objects.clone(), &shutdown));
    assert_eq!(caches.cached_types(), 0, "nothing is cached before a list");
    let keys = configmaps(&objects);
    let once = ListQuery {
        root: keys.all_clusters(),
        namespaced: true,
        prefix: keys.all_clusters(),
        after: None,
        limit: 1,
        freshness: Freshness::Any,
    };
    assert!(matches!(
        caches.list(once, None).await,
        Err(NotServed::Cold)
    ));
    assert_eq!(caches.cached_types(), 0, "one list does not earn a cache");

    let mut rng = StdRng::seed_from_u64(seed);
    for _ in 0..60 {
        random_write(&objects, &mut rng).await;
    }
    let writers: Vec<_> = (0..2)
        .map(|i| {
            let objects = objects.clone();
            tokio::spawn(async move {
                let mut rng = StdRng::seed_from_u64(seed ^ (i + 1));
                for _ in 0..400 {
                    random_write(&objects, &mut rng).await;
                }
            })
        })
        .collect();
    let mut lists = 0;
    while writers.iter().any(|w| !w.is_finished()) || lists < 50 {
        let freshness = match rng.random_range(0..3) {
            0 => Freshness::Any,
            1 => Freshness::AtLeast(objects.current_revision().await.unwrap()),
            _ => {
                Freshness::AtLeast(rng.random_range(1..=objects.current_revision().await.unwrap()))
            }
        };
        list_and_compare(&objects, &caches, &mut rng, freshness).await;
        lists += 1;
    }
    for writer in writers {
        writer.await.unwrap();
    }
    assert_eq!(caches.cached_types(), 1);
    // Quiet now: a consistent list is the store's latest state.
    let current = objects.current_revision().await.unwrap();
    let last = ListQuery {
        root: keys.all_clusters(),
        namespaced: true,
        prefix: keys.all_clusters(),
        after: None,
        limit: 0,
        freshness: Freshness::AtLeast(current),
    };
    let page = served(|| caches.list(last, None)).await;
    assert_eq!(page.revision, current);
    let expected = storage_page(&objects, keys.all_clusters(), 0, 0, None, &|_| true).await;
    assert_same(&page, &expected, "final");
    shutdown.cancel();
}

#[tokio::test]
async fn a_consistent_list_waits_for_writes_to_other_types_without_waiting_for_this_one() {
    let storage = kcp_storage::open_in_memory().await.unwrap();
    let objects = ObjectStore::new(storage, "/registry");
    let shutdown = CancellationToken::new();
    let caches = WatchCaches::new(objects.clone(), &shutdown);
    let keys = configmaps(&objects);
    let root = LogicalClusterName::root();
    let key = keys.object(&root, Some("default"), "x");
    objects
        .create(&key, &configmap("default", "x", "a", 1), what("x"))
        .await
        .unwrap();
    let query = |freshness| ListQuery {
        root: keys.all_clusters(),
        namespaced: true,
        prefix: keys.all_clusters(),
        after: None,
        limit: 0,
        freshness,
    };
    served(|| caches.list(query(Freshness::Any), None)).await;
    // Writes of another type move the store on; the cache has nothing to apply and still serves
    // a consistent list at once, at the store's revision.
    let secrets = objects.keys("", "secrets", KeyLayout::BuiltIn);
    for i in 0..5 {
        let name = format!("s{i}");
        objects
            .create(
                &secrets.object(&root, Some("default"), &name),
                &json!({"metadata": {"name": name, "namespace": "default"}}),
                what(&name),
            )
            .await
            .unwrap();
    }
    let current = objects.current_revision().await.unwrap();
    let page = caches
        .list(query(Freshness::AtLeast(current)), None)
        .await
        .unwrap();
    assert_eq!(page.revision, current);
    assert_eq!(page.items.len(), 1);
    // A write of this type is waited for.
    objects
        .update(&key, &configmap("default", "x", "b", 2), 0, what("x"))
        .await
        .unwrap_err();
    let stored = objects.get(&key, what("x")).await.unwrap().unwrap();
    let updated = objects
        .update(
            &key,
            &configmap("default", "x", "b", 2),
            stored.revision,
            what("x"),
        )
        .await
        .unwrap();
    let page = caches
        .list(query(Freshness::AtLeast(updated.revision)), None)
        .await
        .unwrap();
    assert_eq!(page.items[0].decode().unwrap(), updated.object);
    shutdown.cancel();
}

#[tokio::test]
async fn a_new_cache_over_a_reopened_store_agrees_and_follows() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db.redb");
    let mut rng = StdRng::seed_from_u64(7);
    let shutdown = CancellationToken::new();
    {
        let storage: Arc<dyn kcp_storage::Storage> = Arc::new(
            kcp_storage::embedded::EmbeddedStore::open(&path)
                .await
                .unwrap(),
        );
        let objects = ObjectStore::new(storage.clone(), "/registry");
        for _ in 0..150 {
            random_write(&objects, &mut rng).await;
        }
        // The first cache's watch tasks hold the store until they see their own shutdown.
        let first = CancellationToken::new();
        let caches = WatchCaches::new(objects.clone(), &first);
        list_and_compare(&objects, &caches, &mut rng, Freshness::Any).await;
        drop(caches);
        first.cancel();
        storage.close().await.unwrap();
    }
    // As a restarted process would: the file lock goes with the last handle of the old store,
    // which its stopping tasks drop shortly after the cancellation (bounded wait).
    let mut attempts = 0;
    let storage: Arc<dyn kcp_storage::Storage> = loop {
        match kcp_storage::embedded::EmbeddedStore::open(&path).await {
            Ok(store) => break Arc::new(store),
            Err(error) if attempts < 50 && error.to_string().contains("already open") => {
                attempts += 1;
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            Err(error) => panic!("reopening the store: {error}"),
        }
    };
    let objects = ObjectStore::new(storage, "/registry");
    let caches = WatchCaches::new(objects.clone(), &shutdown);
    for _ in 0..10 {
        let current = objects.current_revision().await.unwrap();
        list_and_compare(&objects, &caches, &mut rng, Freshness::AtLeast(current)).await;
        for _ in 0..20 {
            random_write(&objects, &mut rng).await;
        }
    }
    shutdown.cancel();
}

#[tokio::test]
async fn after_compaction_old_pages_go_to_storage_and_current_lists_still_agree() {
    let storage = kcp_storage::open_in_memory().await.unwrap();
    let objects = ObjectStore::new(storage.clone(), "/registry");
    let shutdown = CancellationToken::new();
    let caches = WatchCaches::new(objects.clone(), &shutdown);
    let mut rng = StdRng::seed_from_u64(11);
    for _ in 0..100 {
        random_write(&objects, &mut rng).await;
    }
    let keys = configmaps(&objects);
    let query = ListQuery {
        root: keys.all_clusters(),
        namespaced: true,
        prefix: keys.all_clusters(),
        after: None,
        limit: 2,
        freshness: Freshness::AtLeast(objects.current_revision().await.unwrap()),
    };
    let first = served(|| caches.list(query, None)).await;
    let token = Continuation::decode(first.continue_token.as_deref().unwrap()).unwrap();
    for _ in 0..50 {
        random_write(&objects, &mut rng).await;
    }
    let current = objects.current_revision().await.unwrap();
    storage.compact(current).await.unwrap();
    // The cache holds only the present: the old page's continuation is storage's to answer, 410.
    let old = ListQuery {
        after: Some(token.after()),
        freshness: Freshness::Exactly(token.revision()),
        ..query
    };
    assert!(matches!(
        caches.list(old, None).await,
        Err(NotServed::Moved(_))
    ));
    let expired = objects
        .list(
            ListRequest {
                prefix: keys.all_clusters(),
                revision: 0,
                limit: 2,
                continuation: Some(token.clone()),
            },
            &|_| true,
        )
        .await
        .unwrap_err();
    assert_eq!(expired.code, 410);
    for _ in 0..10 {
        let current = objects.current_revision().await.unwrap();
        list_and_compare(&objects, &caches, &mut rng, Freshness::AtLeast(current)).await;
        random_write(&objects, &mut rng).await;
    }
    shutdown.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broken_watches_are_recovered_from_by_listing_again() {
    let breakable = Breakable::over(kcp_storage::open_in_memory().await.unwrap());
    let objects = ObjectStore::new(breakable.clone(), "/registry");
    let shutdown = CancellationToken::new();
    let caches = WatchCaches::new(objects.clone(), &shutdown);
    let mut rng = StdRng::seed_from_u64(23);
    for round in 0..6 {
        for _ in 0..40 {
            random_write(&objects, &mut rng).await;
        }
        // Every watch (the type's and the store-wide progress watch) breaks now and then, while
        // writes go on; lists wait for the cache to list again, or go to storage meanwhile.
        if round % 2 == 1 {
            breakable.break_watches();
        }
        for _ in 0..5 {
            random_write(&objects, &mut rng).await;
            let current = objects.current_revision().await.unwrap();
            list_and_compare(&objects, &caches, &mut rng, Freshness::AtLeast(current)).await;
        }
    }
    shutdown.cancel();
}
