//! The index's state and `resolve`, without watches: trees across shards, home paths, what is
//! never routable, deletions, shards that go, and relists that change only their own shard.

use super::*;

const ROOT_URL: &str = "https://root:6443";
const SHARD_1_URL: &str = "https://shard-1:6443";

fn shard(name: &str, base_url: &str) -> ShardEntry {
    ShardEntry {
        name: name.into(),
        base_url: base_url.into(),
        virtual_workspace_url: String::new(),
    }
}

fn ws(parent: &str, name: &str, cluster: &str, shard: &str, phase: &str) -> WorkspaceEntry {
    WorkspaceEntry {
        parent: parent.into(),
        name: name.into(),
        cluster: cluster.into(),
        scheduled_to: Some(shard.into()),
        phase: phase.into(),
    }
}

/// root (root shard) with `org` on shard-1, `org:team` back on root, and `local` on root.
fn tree() -> (State, Feed, Feed) {
    let mut state = State::default();
    let (root, shard_1) = match &state.relist_shards(&[
        shard("root", ROOT_URL),
        shard("shard-1", &format!("{SHARD_1_URL}/")),
    ]) {
        (feeds, removed) if removed.is_empty() => (feeds[0], feeds[1]),
        other => panic!("{other:?}"),
    };
    state.relist_logical_clusters(root, &["root", "teamcluster", "localcluster"]);
    state.relist_logical_clusters(shard_1, &["orgcluster"]);
    state.relist_workspaces(
        root,
        &[
            ws("root", "org", "orgcluster", "shard-1", "Ready"),
            ws("root", "local", "localcluster", "root", "Initializing"),
        ],
    );
    state.relist_workspaces(
        shard_1,
        &[ws("orgcluster", "team", "teamcluster", "root", "Ready")],
    );
    (state, root, shard_1)
}

fn counts(shards: usize, logical_clusters: usize, workspaces: usize) -> IndexCounts {
    IndexCounts {
        shards,
        logical_clusters,
        workspaces,
    }
}

fn route(shard: &str, base_url: &str, cluster: &str) -> Route {
    Route {
        shard: shard.into(),
        base_url: base_url.into(),
        virtual_workspaces_url: base_url.into(),
        cluster: cluster.into(),
    }
}

#[test]
fn paths_walk_across_shards() {
    let (state, _, _) = tree();
    assert!(state.is_ready());
    for (path, shard, base_url, cluster) in [
        ("root", "root", ROOT_URL, "root"),
        ("root:org", "shard-1", SHARD_1_URL, "orgcluster"),
        ("root:org:team", "root", ROOT_URL, "teamcluster"),
        ("root:local", "root", ROOT_URL, "localcluster"),
        // A logical cluster name is a path of its own, and the walk goes on from there.
        ("orgcluster:team", "root", ROOT_URL, "teamcluster"),
    ] {
        assert_eq!(
            state.resolve(path),
            Ok(route(shard, base_url, cluster)),
            "{path}"
        );
    }
    assert_eq!(state.counts(), counts(2, 4, 3));
}

#[test]
fn unknown_invalid_and_wildcard_paths_are_unknown() {
    let (state, _, _) = tree();
    for path in [
        "",
        "*",
        "root:*",
        "nope",
        "root:nope",
        "root:org:nope",
        "root:org:team:deeper",
        "Root",
        "root::org",
        "root:org:",
        "system:admin",
        "user:nobody",
    ] {
        assert_eq!(state.resolve(path), Err(Unroutable::Unknown), "{path}");
    }
}

#[test]
fn home_paths_resolve_through_the_home_cluster() {
    let (mut state, root, _) = tree();
    let home = kcp_tenancy::names::home_cluster_name("alice");
    state.upsert_logical_cluster(root, &home);
    state.upsert_workspace(root, &ws(&home, "proj", "projcluster", "root", "Ready"));
    state.upsert_logical_cluster(root, "projcluster");
    assert_eq!(
        state.resolve("user:alice"),
        Ok(route("root", ROOT_URL, &home))
    );
    assert_eq!(
        state.resolve("user:alice:proj"),
        Ok(route("root", ROOT_URL, "projcluster"))
    );
    assert_eq!(state.resolve("user:bob"), Err(Unroutable::Unknown));
}

#[test]
fn unavailable_is_503_and_scheduling_is_not_routable() {
    let (mut state, root, shard_1) = tree();
    state.upsert_workspace(
        root,
        &ws("root", "org", "orgcluster", "shard-1", "Unavailable"),
    );
    let unavailable = |path: &str| Err(Unroutable::Unavailable { path: path.into() });
    assert_eq!(state.resolve("root:org"), unavailable("root:org"));
    assert_eq!(state.resolve("root:org:team"), unavailable("root:org:team"));
    state.upsert_workspace(root, &ws("root", "org", "orgcluster", "shard-1", "Ready"));
    assert!(state.resolve("root:org").is_ok());

    state.upsert_workspace(
        root,
        &ws("root", "new", "newcluster", "shard-1", "Scheduling"),
    );
    state.upsert_logical_cluster(shard_1, "newcluster");
    assert_eq!(state.resolve("root:new"), Err(Unroutable::Unknown));
    // Scheduled but without a logical cluster name yet: not routable either.
    state.upsert_workspace(root, &ws("root", "new", "", "shard-1", "Initializing"));
    assert_eq!(state.resolve("root:new"), Err(Unroutable::Unknown));
    state.upsert_workspace(
        root,
        &ws("root", "new", "newcluster", "shard-1", "Initializing"),
    );
    assert_eq!(
        state.resolve("root:new"),
        Ok(route("shard-1", SHARD_1_URL, "newcluster"))
    );
}

#[test]
fn deletions_make_paths_unknown() {
    let (mut state, root, shard_1) = tree();
    // A delete from a shard that did not report the entry changes nothing.
    state.delete_workspace(shard_1, "root", "org");
    state.delete_logical_cluster(root, "orgcluster");
    assert!(state.resolve("root:org").is_ok());

    state.delete_workspace(root, "root", "org");
    assert_eq!(state.resolve("root:org"), Err(Unroutable::Unknown));
    assert_eq!(state.resolve("root:org:team"), Err(Unroutable::Unknown));
    assert!(state.resolve("orgcluster:team").is_ok());
    state.delete_logical_cluster(root, "teamcluster");
    assert_eq!(state.resolve("orgcluster:team"), Err(Unroutable::Unknown));
    assert_eq!(state.counts().workspaces, 2);
    assert_eq!(state.counts().logical_clusters, 3);
}

#[test]
fn a_removed_shard_takes_its_entries_and_its_children_are_gone() {
    let (mut state, _, shard_1) = tree();
    assert!(state.remove_shard("shard-1").is_some());
    assert!(state.remove_shard("shard-1").is_none());
    assert_eq!(
        state.resolve("root:org"),
        Err(Unroutable::ShardGone {
            path: "root:org".into(),
            shard: "shard-1".into()
        })
    );
    assert_eq!(state.resolve("orgcluster"), Err(Unroutable::Unknown));
    assert_eq!(state.counts().workspaces, 2);
    assert!(state.is_ready());
    // The stopped watch's late events change nothing.
    state.upsert_logical_cluster(shard_1, "orgcluster");
    state.relist_workspaces(
        shard_1,
        &[ws("orgcluster", "x", "xcluster", "root", "Ready")],
    );
    assert_eq!(state.counts().logical_clusters, 3);
    assert_eq!(state.counts().workspaces, 2);

    // The shard comes back: a new feed, not ready until it is listed again.
    let back = state.upsert_shard(&shard("shard-1", SHARD_1_URL)).unwrap();
    assert_ne!(back, shard_1);
    assert!(!state.is_ready());
    state.relist_logical_clusters(back, &["orgcluster"]);
    state.relist_workspaces(
        back,
        &[ws("orgcluster", "team", "teamcluster", "root", "Ready")],
    );
    assert!(state.is_ready());
    assert!(state.resolve("root:org:team").is_ok());
}

#[test]
fn a_shard_list_without_a_shard_removes_it_and_a_new_url_restarts_its_watches() {
    let (mut state, root, _) = tree();
    assert_eq!(
        state.upsert_shard(&shard("root", &format!("{ROOT_URL}/"))),
        None
    );
    let (started, removed) = state.relist_shards(&[shard("root", "https://moved:1")]);
    assert_eq!(removed.len(), 1);
    assert_eq!(started.len(), 1);
    assert_ne!(started[0], root);
    assert!(!state.is_ready());
    // Entries stay while the new watches list (the URL is the new one at once).
    assert_eq!(
        state.resolve("root:local"),
        Ok(route("root", "https://moved:1", "localcluster"))
    );
    state.upsert_logical_cluster(root, "stale");
    assert_eq!(state.resolve("stale"), Err(Unroutable::Unknown));
}

#[test]
fn a_relist_replaces_only_its_own_shard_s_entries() {
    let (mut state, root, shard_1) = tree();
    state.relist_logical_clusters(shard_1, &["orgcluster", "othercluster"]);
    state.relist_workspaces(
        shard_1,
        &[ws(
            "orgcluster",
            "other",
            "othercluster",
            "shard-1",
            "Ready",
        )],
    );
    assert_eq!(state.resolve("root:org:team"), Err(Unroutable::Unknown));
    assert_eq!(
        state.resolve("root:org:other"),
        Ok(route("shard-1", SHARD_1_URL, "othercluster"))
    );
    assert!(state.resolve("root:local").is_ok());

    state.relist_logical_clusters(root, &["root", "teamcluster"]);
    assert_eq!(state.resolve("root:local"), Err(Unroutable::Unknown));
    assert!(state.resolve("root:org:other").is_ok());
    assert_eq!(state.counts(), counts(2, 4, 3));
}

#[test]
fn not_ready_until_shards_and_each_resource_are_listed() {
    let mut state = State::default();
    assert!(!state.is_ready());
    let (started, _) = state.relist_shards(&[shard("root", ROOT_URL)]);
    assert!(!state.is_ready());
    state.relist_workspaces(started[0], &[]);
    assert!(!state.is_ready());
    state.relist_logical_clusters(started[0], &[]);
    assert!(state.is_ready());
}

#[test]
fn entries_stay_small() {
    let (mut state, root, _) = tree();
    let before = state.heap_bytes();
    for i in 0..1000 {
        let cluster = format!("{i:016}");
        state.upsert_logical_cluster(root, &cluster);
        state.upsert_workspace(
            root,
            &ws("root", &format!("ws-{i:05}"), &cluster, "root", "Ready"),
        );
    }
    let per_workspace = (state.heap_bytes() - before) / 1000;
    assert!(per_workspace > 64 && per_workspace < 512, "{per_workspace}");
}

#[test]
fn root_is_the_root_shards_and_system_clusters_are_never_routed() {
    let (mut state, root, shard_1) = tree();
    // Every kcp-rs shard has a `root` of its own and `system:` clusters: only the root shard's
    // `root` counts, in whichever order the shards report them.
    state.upsert_logical_cluster(shard_1, "root");
    state.upsert_logical_cluster(shard_1, "system:admin");
    state.upsert_logical_cluster(root, "system:admin");
    assert_eq!(state.resolve("root"), Ok(route("root", ROOT_URL, "root")));
    assert_eq!(state.resolve("system:admin"), Err(Unroutable::Unknown));
    state.relist_logical_clusters(shard_1, &["root", "orgcluster"]);
    assert_eq!(state.resolve("root"), Ok(route("root", ROOT_URL, "root")));
    assert_eq!(
        state.resolve("root:org"),
        Ok(route("shard-1", SHARD_1_URL, "orgcluster"))
    );
}

#[test]
fn virtual_workspaces_are_at_the_advertised_url_or_the_base_url_behind_a_marker() {
    let (mut state, _, _) = tree();
    assert_eq!(state.virtual_workspaces("root").as_deref(), Some(ROOT_URL));
    let standalone = ShardEntry {
        virtual_workspace_url: "https://vw:6444/".into(),
        ..shard("shard-1", SHARD_1_URL)
    };
    // A new virtual-workspace URL alone restarts no watch.
    assert_eq!(state.upsert_shard(&standalone), None);
    assert_eq!(
        state.virtual_workspaces("shard-1").as_deref(),
        Some("https://vw:6444")
    );
    assert_eq!(
        state
            .resolve("root:org")
            .unwrap()
            .virtual_workspaces_url
            .as_ref(),
        "https://vw:6444"
    );
    let behind_proxy = ShardEntry {
        virtual_workspace_url: "https://proxy:6447/shards/shard-1".into(),
        ..shard("shard-1", SHARD_1_URL)
    };
    assert_eq!(state.upsert_shard(&behind_proxy), None);
    assert_eq!(
        state.virtual_workspaces("shard-1").as_deref(),
        Some(SHARD_1_URL)
    );
    state.remove_shard("shard-1");
    assert_eq!(state.virtual_workspaces("shard-1"), None);
    assert_eq!(state.virtual_workspaces("unknown"), None);
}
