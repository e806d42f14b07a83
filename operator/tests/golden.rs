//! A reference RootShard, Shard, FrontProxy, CacheServer and VirtualWorkspace render to the manifests checked in
//! under `tests/golden/`. Run with `UPDATE_GOLDEN=1` to rewrite them after an intended change.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use kcp_operator::api::{CacheServer, FrontProxy, RootShard, Shard, VirtualWorkspace};
use kcp_operator::etcd::{self, Observed};
use kcp_operator::render::children::{self, Child};
use kcp_operator::validate::{self, Etcd, Owner};

/// Fixed instead of a content hash, so the goldens do not depend on generated keys.
const REVISION: &str = "golden";

fn golden_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

fn input<T: serde::de::DeserializeOwned>(name: &str) -> T {
    let text =
        std::fs::read_to_string(golden_dir().join("input").join(name)).expect("input exists");
    yaml_serde::from_str(&text).expect("input parses")
}

fn render(children: &[Child]) -> String {
    children
        .iter()
        .map(|child| {
            format!(
                "---\n{}",
                yaml_serde::to_string(&child.to_value().expect("serialises")).expect("yaml")
            )
        })
        .collect()
}

/// The objects of a managed etcd as they are first created (all members bootstrap together).
fn bootstrapped_etcd(owner: &Owner, etcd_config: &Etcd) -> Vec<Child> {
    let Etcd::Managed(managed) = etcd_config else {
        return Vec::new();
    };
    let fresh = Observed {
        statefulset_replicas: None,
        cluster_state: None,
        members: None,
    };
    let plan = etcd::plan(&owner.names, managed.replicas, &fresh);
    etcd::objects::children(owner, managed, &plan, REVISION)
}

fn check(name: &str, rendered: String) {
    let path = golden_dir().join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, rendered).expect("write golden");
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        expected == rendered,
        "{name} differs from the rendering; rerun with UPDATE_GOLDEN=1 and review the diff"
    );
}

#[test]
fn root_shard_renders_its_golden_manifests() {
    let root: RootShard = input("rootshard.yaml");
    let config = validate::root_shard(&root).expect("valid");
    let mut rendered = children::server(&config, REVISION).expect("renders");
    rendered.extend(bootstrapped_etcd(&config.owner, &config.etcd));
    check("rootshard.yaml", render(&rendered));
}

#[test]
fn shard_renders_its_golden_manifests() {
    let root: RootShard = input("rootshard.yaml");
    let shard: Shard = input("shard.yaml");
    let config = validate::shard(&shard, Some(&root)).expect("valid");
    check(
        "shard.yaml",
        render(&children::server(&config, REVISION).expect("renders")),
    );
}

#[test]
fn front_proxy_renders_its_golden_manifests() {
    let root: RootShard = input("rootshard.yaml");
    let proxy: FrontProxy = input("frontproxy.yaml");
    let config = validate::front_proxy(&proxy, Some(&root)).expect("valid");
    check(
        "frontproxy.yaml",
        render(&children::front_proxy(&config, REVISION).expect("renders")),
    );
}

#[test]
fn cache_server_renders_its_golden_manifests() {
    let cache: CacheServer = input("cacheserver.yaml");
    let config = validate::cache_server(&cache).expect("valid");
    check(
        "cacheserver.yaml",
        render(&children::cache_server(&config, REVISION).expect("renders")),
    );
}

#[test]
fn virtual_workspace_renders_its_golden_manifests() {
    let root: RootShard = input("rootshard.yaml");
    let shard: Shard = input("shard.yaml");
    let vw: VirtualWorkspace = input("virtualworkspace.yaml");
    let target = validate::shard(&shard, Some(&root)).expect("valid shard");
    let config = validate::virtual_workspace(&vw, &target).expect("valid");
    check(
        "virtualworkspace.yaml",
        render(&children::virtual_workspace(&config, REVISION).expect("renders")),
    );
}
