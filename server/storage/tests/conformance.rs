//! One conformance suite for every backend: the contract of `kcp_storage::Storage`, checked the
//! same way against the embedded file, a plain etcd and an etcd with TLS client certificates.
//!
//! Each case is a generic async function over the context's `Arc<dyn Storage>`; the `suite!` macro
//! turns the list of cases into one `#[tokio::test]` per backend and case. Cases write only under
//! their own key prefix, so the ones marked `Shared` can use one etcd together; cases that compact or
//! restart the store change it for everybody and run `Exclusive`ly. The etcd cases need the etcd
//! binary (`/usr/bin/etcd` or `$ETCD_BIN`) and fail, not skip, without it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::BTreeSet;

use bytes::Bytes;
use kcp_storage::{EventKind, KeyValue, RangeRequest, StorageError, WatchEvent};

use support::{Backend, Ctx, Isolation, next_event, next_events};

fn val(text: &str) -> Bytes {
    Bytes::copy_from_slice(text.as_bytes())
}

fn list(prefix: &str) -> RangeRequest {
    RangeRequest {
        prefix: prefix.to_owned(),
        ..RangeRequest::default()
    }
}

fn keys(kvs: &[KeyValue]) -> Vec<&str> {
    kvs.iter().map(|kv| kv.key.as_str()).collect()
}

fn put(kv: &KeyValue, prev: Option<&KeyValue>) -> WatchEvent {
    WatchEvent {
        kind: EventKind::Put,
        kv: kv.clone(),
        prev: prev.cloned(),
    }
}

fn deleted(key: &str, revision: i64, prev: &KeyValue) -> WatchEvent {
    let kv = KeyValue {
        key: key.to_owned(),
        value: Bytes::new(),
        create_revision: 0,
        mod_revision: revision,
    };
    WatchEvent {
        kind: EventKind::Delete,
        kv,
        prev: Some(prev.clone()),
    }
}

async fn revisions_strictly_increase(ctx: &mut Ctx) {
    let store = &ctx.store;
    let start = store.current_revision().await.unwrap();
    assert!(start >= 1);
    let a = store.create(&ctx.key("a"), val("1")).await.unwrap();
    assert!(a.mod_revision > start);
    assert_eq!(a.create_revision, a.mod_revision);
    // A failed write in between does not disturb the order.
    assert!(store.create(&ctx.key("a"), val("again")).await.is_err());
    let a2 = store
        .update(&ctx.key("a"), val("2"), a.mod_revision)
        .await
        .unwrap();
    assert!(a2.mod_revision > a.mod_revision);
    assert_eq!(a2.create_revision, a.create_revision);
    let b = store.create(&ctx.key("b"), val("1")).await.unwrap();
    assert!(b.mod_revision > a2.mod_revision);
    let (_, deleted_at) = store.delete(&ctx.key("a"), None).await.unwrap();
    assert!(deleted_at > b.mod_revision);
    assert!(store.current_revision().await.unwrap() >= deleted_at);
}

async fn create_only_if_absent(ctx: &mut Ctx) {
    let store = &ctx.store;
    let key = ctx.key("x");
    let created = store.create(&key, val("1")).await.unwrap();
    assert_eq!(
        (created.key.as_str(), &created.value),
        (key.as_str(), &val("1"))
    );
    match store.create(&key, val("2")).await {
        Err(StorageError::AlreadyExists { key: reported }) => assert_eq!(reported, key),
        other => panic!("expected AlreadyExists, got {other:?}"),
    }
    assert_eq!(store.get(&key).await.unwrap(), Some(created.clone()));
    store.delete(&key, None).await.unwrap();
    let again = store.create(&key, val("3")).await.unwrap();
    assert!(again.create_revision > created.create_revision);
    assert_eq!(again.create_revision, again.mod_revision);
}

async fn update_is_compare_and_swap(ctx: &mut Ctx) {
    let store = &ctx.store;
    let key = ctx.key("cas");
    let v1 = store.create(&key, val("1")).await.unwrap();
    let v2 = store.update(&key, val("2"), v1.mod_revision).await.unwrap();
    assert_eq!(v2.value, val("2"));
    assert_eq!(v2.create_revision, v1.create_revision);
    assert!(v2.mod_revision > v1.mod_revision);
    assert_eq!(store.get(&key).await.unwrap(), Some(v2.clone()));
    match store.update(&key, val("stale"), v1.mod_revision).await {
        Err(StorageError::Conflict {
            key: reported,
            expected,
            current,
        }) => {
            assert_eq!(reported, key);
            assert_eq!(expected, v1.mod_revision);
            assert_eq!(current, Some(v2.clone()));
        }
        other => panic!("expected Conflict, got {other:?}"),
    }
    assert_eq!(store.get(&key).await.unwrap(), Some(v2));
}

async fn missing_keys_are_not_found(ctx: &mut Ctx) {
    let store = &ctx.store;
    let key = ctx.key("missing");
    assert_eq!(store.get(&key).await.unwrap(), None);
    let not_found = |result: Result<_, StorageError>| match result {
        Err(StorageError::NotFound { key: reported }) => assert_eq!(reported, key),
        Err(other) => panic!("expected NotFound, got {other:?}"),
        Ok(_) => panic!("expected NotFound, got success"),
    };
    not_found(store.update(&key, val("1"), 0).await.map(drop));
    not_found(store.update(&key, val("1"), 1).await.map(drop));
    not_found(store.delete(&key, None).await.map(drop));
    not_found(store.delete(&key, Some(1)).await.map(drop));
    // Deleted keys are as missing as never-written ones.
    let created = store.create(&key, val("1")).await.unwrap();
    store.delete(&key, None).await.unwrap();
    not_found(
        store
            .update(&key, val("2"), created.mod_revision)
            .await
            .map(drop),
    );
    not_found(
        store
            .delete(&key, Some(created.mod_revision))
            .await
            .map(drop),
    );
}

async fn delete_guarded_and_unguarded(ctx: &mut Ctx) {
    let store = &ctx.store;
    let guarded = ctx.key("guarded");
    let v1 = store.create(&guarded, val("1")).await.unwrap();
    let v2 = store
        .update(&guarded, val("2"), v1.mod_revision)
        .await
        .unwrap();
    match store.delete(&guarded, Some(v1.mod_revision)).await {
        Err(StorageError::Conflict {
            expected, current, ..
        }) => {
            assert_eq!(expected, v1.mod_revision);
            assert_eq!(current, Some(v2.clone()));
        }
        other => panic!("expected Conflict, got {other:?}"),
    }
    let (gone, at) = store.delete(&guarded, Some(v2.mod_revision)).await.unwrap();
    assert_eq!(gone, v2);
    assert!(at > v2.mod_revision);
    assert_eq!(store.get(&guarded).await.unwrap(), None);

    let unguarded = ctx.key("unguarded");
    let created = store.create(&unguarded, val("1")).await.unwrap();
    let (gone, at) = store.delete(&unguarded, None).await.unwrap();
    assert_eq!(gone, created);
    assert!(at > created.mod_revision);
    assert_eq!(store.get(&unguarded).await.unwrap(), None);
}

async fn get_reads_exactly_one_key(ctx: &mut Ctx) {
    let store = &ctx.store;
    let short = store.create(&ctx.key("k"), val("short")).await.unwrap();
    let long = store.create(&ctx.key("k2"), val("long")).await.unwrap();
    assert_eq!(store.get(&ctx.key("k")).await.unwrap(), Some(short));
    assert_eq!(store.get(&ctx.key("k2")).await.unwrap(), Some(long));
    assert_eq!(store.get(&ctx.key("")).await.unwrap(), None);
}

async fn range_lists_a_prefix_in_key_order(ctx: &mut Ctx) {
    let store = &ctx.store;
    for name in [
        "list/b", "list/a", "list/c/d", "list/c", "list", "list0", "lisu",
    ] {
        store.create(&ctx.key(name), val(name)).await.unwrap();
    }
    let written = store.current_revision().await.unwrap();
    let all = store.range(list(&ctx.key("list/"))).await.unwrap();
    let expected = ["list/a", "list/b", "list/c", "list/c/d"].map(|n| ctx.key(n));
    assert_eq!(
        keys(&all.kvs),
        expected.iter().map(String::as_str).collect::<Vec<_>>()
    );
    assert!(
        all.kvs
            .iter()
            .all(|kv| kv.value == val(&kv.key[ctx.prefix.len()..]))
    );
    assert!(!all.more);
    assert!(all.revision >= written);

    let nested = store.range(list(&ctx.key("list/c"))).await.unwrap();
    assert_eq!(
        keys(&nested.kvs),
        vec![ctx.key("list/c"), ctx.key("list/c/d")]
    );
    let whole = store.range(list(&ctx.prefix)).await.unwrap();
    assert_eq!(whole.kvs.len(), 7);
    assert!(
        store
            .range(list(&ctx.key("nothing/")))
            .await
            .unwrap()
            .kvs
            .is_empty()
    );
}

async fn paginated_list_is_one_snapshot(ctx: &mut Ctx) {
    let store = &ctx.store;
    let prefix = ctx.key("page/");
    let mut original = Vec::new();
    for i in 0..10 {
        original.push(
            store
                .create(&format!("{prefix}k{i:02}"), val(&format!("v{i}")))
                .await
                .unwrap(),
        );
    }
    let page = |start_after: Option<&str>, revision| RangeRequest {
        prefix: prefix.clone(),
        start_after: start_after.map(str::to_owned),
        revision,
        limit: 4,
    };
    let first = store.range(page(None, 0)).await.unwrap();
    assert_eq!(first.kvs, original[..4]);
    assert!(first.more);
    let pinned = first.revision;

    // Writes between pages: later pages must not see them.
    store
        .update(&original[5].key, val("changed"), original[5].mod_revision)
        .await
        .unwrap();
    store.delete(&original[7].key, None).await.unwrap();
    store
        .create(&format!("{prefix}k035"), val("new"))
        .await
        .unwrap();
    store
        .create(&format!("{prefix}k99"), val("new"))
        .await
        .unwrap();

    let second = store
        .range(page(Some(&original[3].key), pinned))
        .await
        .unwrap();
    assert_eq!(second.kvs, original[4..8]);
    assert!(second.more);
    assert_eq!(second.revision, pinned);
    let third = store
        .range(page(Some(&original[7].key), pinned))
        .await
        .unwrap();
    assert_eq!(third.kvs, original[8..]);
    assert!(!third.more);

    // A fresh list sees the new state.
    let now = store.range(list(&prefix)).await.unwrap();
    let names: Vec<&str> = now.kvs.iter().map(|kv| &kv.key[prefix.len()..]).collect();
    assert_eq!(
        names,
        [
            "k00", "k01", "k02", "k03", "k035", "k04", "k05", "k06", "k08", "k09", "k99"
        ]
    );
    assert!(now.revision > pinned);
}

async fn range_at_an_old_revision(ctx: &mut Ctx) {
    let store = &ctx.store;
    let a = store.create(&ctx.key("a"), val("1")).await.unwrap();
    let c = store.create(&ctx.key("c"), val("1")).await.unwrap();
    let then = c.mod_revision;
    let a2 = store
        .update(&ctx.key("a"), val("2"), a.mod_revision)
        .await
        .unwrap();
    let b = store.create(&ctx.key("b"), val("1")).await.unwrap();
    store.delete(&ctx.key("c"), None).await.unwrap();

    let old = store.range(RangeRequest {
        prefix: ctx.prefix.clone(),
        revision: then,
        ..Default::default()
    });
    let old = old.await.unwrap();
    assert_eq!(old.kvs, vec![a, c]);
    assert_eq!(old.revision, then);
    let now = store.range(list(&ctx.prefix)).await.unwrap();
    assert_eq!(now.kvs, vec![a2, b]);
}

async fn watch_replays_history_then_follows(ctx: &mut Ctx) {
    let store = &ctx.store;
    let prefix = ctx.key("w/");
    let a = store.create(&ctx.key("w/a"), val("1")).await.unwrap();
    let a2 = store
        .update(&ctx.key("w/a"), val("2"), a.mod_revision)
        .await
        .unwrap();
    store.create(&ctx.key("elsewhere"), val("x")).await.unwrap();
    let (_, deleted_at) = store.delete(&ctx.key("w/a"), None).await.unwrap();
    let b = store.create(&ctx.key("w/b"), val("1")).await.unwrap();

    let mut watch = store.watch(&prefix, a.mod_revision).await.unwrap();
    let history = next_events(&mut watch, 4).await;
    assert_eq!(
        history,
        vec![
            put(&a, None),
            put(&a2, Some(&a)),
            deleted(&ctx.key("w/a"), deleted_at, &a2),
            put(&b, None),
        ]
    );
    let c = store.create(&ctx.key("w/c"), val("1")).await.unwrap();
    assert_eq!(next_event(&mut watch).await, put(&c, None));
    let b2 = store
        .update(&ctx.key("w/b"), val("2"), b.mod_revision)
        .await
        .unwrap();
    assert_eq!(next_event(&mut watch).await, put(&b2, Some(&b)));

    // Starting in the middle of history starts exactly there.
    let mut middle = store.watch(&prefix, a2.mod_revision).await.unwrap();
    assert_eq!(next_event(&mut middle).await, put(&a2, Some(&a)));
}

async fn watch_from_zero_sees_only_new_changes(ctx: &mut Ctx) {
    let store = &ctx.store;
    let a = store.create(&ctx.key("a"), val("1")).await.unwrap();
    let mut watch = store.watch(&ctx.prefix, 0).await.unwrap();
    let b = store.create(&ctx.key("b"), val("1")).await.unwrap();
    assert_eq!(next_event(&mut watch).await, put(&b, None));
    let a2 = store
        .update(&ctx.key("a"), val("2"), a.mod_revision)
        .await
        .unwrap();
    assert_eq!(next_event(&mut watch).await, put(&a2, Some(&a)));
}

async fn delete_events_carry_the_previous_value(ctx: &mut Ctx) {
    let store = &ctx.store;
    let key = ctx.key("d");
    let created = store.create(&key, val("1")).await.unwrap();
    let mut watch = store.watch(&ctx.prefix, 0).await.unwrap();
    let (gone, at) = store
        .delete(&key, Some(created.mod_revision))
        .await
        .unwrap();
    assert_eq!(gone, created);
    assert_eq!(next_event(&mut watch).await, deleted(&key, at, &created));
}

async fn compaction_forgets_older_history(ctx: &mut Ctx) {
    let store = &ctx.store;
    let key = ctx.key("a");
    let a1 = store.create(&key, val("1")).await.unwrap();
    let a2 = store.update(&key, val("2"), a1.mod_revision).await.unwrap();
    let a3 = store.update(&key, val("3"), a2.mod_revision).await.unwrap();
    let b = store.create(&ctx.key("b"), val("1")).await.unwrap();
    let a4 = store.update(&key, val("4"), a3.mod_revision).await.unwrap();

    let point = a3.mod_revision;
    store.compact(point).await.unwrap();
    assert_eq!(store.compacted_revision().await.unwrap(), point);

    let at = |revision| RangeRequest {
        prefix: ctx.prefix.clone(),
        revision,
        ..Default::default()
    };
    match store.range(at(a2.mod_revision)).await {
        Err(StorageError::Compacted {
            requested,
            compacted,
        }) => {
            assert_eq!((requested, compacted), (a2.mod_revision, point));
        }
        other => panic!("expected Compacted, got {other:?}"),
    }
    assert_eq!(store.range(at(point)).await.unwrap().kvs, vec![a3.clone()]);
    assert_eq!(
        store.range(at(0)).await.unwrap().kvs,
        vec![a4.clone(), b.clone()]
    );

    match store.watch(&ctx.prefix, a2.mod_revision).await {
        Err(StorageError::Compacted {
            requested,
            compacted,
        }) => {
            assert_eq!((requested, compacted), (a2.mod_revision, point));
        }
        Err(other) => panic!("expected Compacted, got {other:?}"),
        Ok(_) => panic!("expected Compacted, got a watch"),
    }
    // History from the compaction point on is complete. (etcd may omit `prev` for the event at
    // exactly the compaction point, since the value before it is compacted; later events have it.)
    let mut watch = store.watch(&ctx.prefix, point).await.unwrap();
    let events = next_events(&mut watch, 3).await;
    assert_eq!(events[0].kv, a3);
    assert_eq!(events[1..], [put(&b, None), put(&a4, Some(&a3))]);

    // Compacting again, or to an older revision, changes nothing.
    store.compact(point).await.unwrap();
    store.compact(a1.mod_revision).await.unwrap();
    assert_eq!(store.compacted_revision().await.unwrap(), point);
}

async fn future_revisions_are_refused(ctx: &mut Ctx) {
    let store = &ctx.store;
    store.create(&ctx.key("a"), val("1")).await.unwrap();
    let current = store.current_revision().await.unwrap();
    let future = current + 1_000_000;
    let request = RangeRequest {
        prefix: ctx.prefix.clone(),
        revision: future,
        ..Default::default()
    };
    match store.range(request).await {
        Err(StorageError::FutureRevision {
            requested,
            current: reported,
        }) => {
            assert_eq!(requested, future);
            assert!(reported >= current && reported < future);
        }
        other => panic!("expected FutureRevision, got {other:?}"),
    }
    match store.compact(future).await {
        Err(StorageError::FutureRevision { requested, .. }) => assert_eq!(requested, future),
        other => panic!("expected FutureRevision, got {other:?}"),
    }
}

async fn restart_keeps_everything(ctx: &mut Ctx) {
    let store = ctx.store.clone();
    let prefix = ctx.prefix.clone();
    let k = |name: &str| format!("{prefix}{name}");
    let a = store.create(&k("a"), val("1")).await.unwrap();
    store.create(&k("b"), val("1")).await.unwrap();
    let c = store.create(&k("c"), val("1")).await.unwrap();
    let a2 = store
        .update(&k("a"), val("2"), a.mod_revision)
        .await
        .unwrap();
    store.delete(&k("b"), None).await.unwrap();
    let checkpoint = store.current_revision().await.unwrap();
    let d = store.create(&k("d"), val("1")).await.unwrap();
    let c2 = store
        .update(&k("c"), val("2"), c.mod_revision)
        .await
        .unwrap();
    let (_, a_deleted) = store.delete(&k("a"), Some(a2.mod_revision)).await.unwrap();
    let before = store.range(list(&ctx.prefix)).await.unwrap();
    let revision = store.current_revision().await.unwrap();
    drop(store);

    ctx.restart().await;
    let store = ctx.store.clone();
    assert_eq!(store.current_revision().await.unwrap(), revision);
    let after = store.range(list(&ctx.prefix)).await.unwrap();
    assert_eq!(after.kvs, before.kvs);
    assert_eq!(after.kvs, vec![c2.clone(), d.clone()]);
    assert_eq!(store.get(&k("d")).await.unwrap(), Some(d.clone()));

    // A watch from before the restart replays exactly the later changes, then follows.
    let mut watch = store.watch(&ctx.prefix, checkpoint + 1).await.unwrap();
    let replayed = next_events(&mut watch, 3).await;
    assert_eq!(
        replayed,
        vec![
            put(&d, None),
            put(&c2, Some(&c)),
            deleted(&k("a"), a_deleted, &a2)
        ]
    );
    let e = store.create(&k("e"), val("1")).await.unwrap();
    assert_eq!(e.mod_revision, revision + 1);
    assert_eq!(next_event(&mut watch).await, put(&e, None));
}

async fn concurrent_writers_get_distinct_revisions(ctx: &mut Ctx) {
    let start = ctx.store.current_revision().await.unwrap();
    let writers: Vec<_> = (0..200)
        .map(|i| {
            let (store, key) = (ctx.store.clone(), ctx.key(&format!("w{i:03}")));
            tokio::spawn(async move { store.create(&key, val("x")).await })
        })
        .collect();
    let mut revisions = BTreeSet::new();
    for writer in writers {
        let kv = writer.await.unwrap().unwrap();
        assert!(kv.mod_revision > start);
        assert!(
            revisions.insert(kv.mod_revision),
            "revision {} given twice",
            kv.mod_revision
        );
    }
    assert_eq!(revisions.len(), 200);
    assert!(ctx.store.current_revision().await.unwrap() >= *revisions.last().unwrap());
    assert_eq!(
        ctx.store.range(list(&ctx.prefix)).await.unwrap().kvs.len(),
        200
    );
}

async fn a_closed_store_is_unavailable(ctx: &mut Ctx) {
    let store = &ctx.store;
    store.create(&ctx.key("a"), val("1")).await.unwrap();
    store.close().await.unwrap();
    assert!(matches!(
        store.get(&ctx.key("a")).await,
        Err(StorageError::Unavailable(_))
    ));
    assert!(matches!(
        store.create(&ctx.key("b"), val("1")).await,
        Err(StorageError::Unavailable(_))
    ));
    assert!(matches!(
        store.current_revision().await,
        Err(StorageError::Unavailable(_))
    ));
}

/// One test per case for the backend in scope.
macro_rules! cases {
    ($backend:expr; $($case:ident: $isolation:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                let mut ctx = Ctx::new($backend, Isolation::$isolation, stringify!($case)).await;
                super::$case(&mut ctx).await;
            }
        )*
    };
}

/// The whole suite for one backend.
macro_rules! suite {
    ($backend:expr) => {
        use super::*;
        cases! { $backend;
            revisions_strictly_increase: Shared,
            create_only_if_absent: Shared,
            update_is_compare_and_swap: Shared,
            missing_keys_are_not_found: Shared,
            delete_guarded_and_unguarded: Shared,
            get_reads_exactly_one_key: Shared,
            range_lists_a_prefix_in_key_order: Shared,
            paginated_list_is_one_snapshot: Shared,
            range_at_an_old_revision: Shared,
            watch_replays_history_then_follows: Shared,
            watch_from_zero_sees_only_new_changes: Shared,
            delete_events_carry_the_previous_value: Shared,
            future_revisions_are_refused: Shared,
            concurrent_writers_get_distinct_revisions: Shared,
            a_closed_store_is_unavailable: Shared,
            compaction_forgets_older_history: Exclusive,
            restart_keeps_everything: Exclusive,
        }
    };
}

mod embedded {
    suite!(Backend::Embedded);
}

mod etcd {
    suite!(Backend::Etcd);
}

mod etcd_tls {
    suite!(Backend::EtcdTls);

    /// The TLS cases only prove something if etcd really insists on a client certificate.
    #[tokio::test]
    async fn clients_without_a_certificate_are_refused() {
        let ctx = Ctx::new(Backend::EtcdTls, Isolation::Shared, "no_client_certificate").await;
        let mut config = ctx.etcd_config().unwrap();
        config.cert_file = None;
        config.key_file = None;
        match kcp_storage::etcd::EtcdStore::connect(&config).await {
            Err(StorageError::Unavailable(_)) => {}
            Err(other) => panic!("expected Unavailable, got {other}"),
            Ok(_) => panic!("etcd accepted a client without a certificate"),
        }
    }
}
