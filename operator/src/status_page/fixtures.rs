//! A deployment as the page's tests see it: one object of each kind with statuses, certificates
//! in each state and events, built from JSON as the API server would send them.

use jiff::Timestamp;
use serde_json::json;

use super::certificate::CertificateExpiry;
use super::events::EventRecord;
use super::view::Snapshot;
use crate::manager::health::Phase;

/// The moment the fixtures are rendered at.
pub fn now() -> Timestamp {
    Timestamp::from_second(1_800_000_000).expect("timestamp")
}

fn at(offset: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + offset).expect("timestamp")
}

fn condition(type_: &str, status: &str, reason: &str, message: &str) -> serde_json::Value {
    json!({"type": type_, "status": status, "reason": reason, "message": message,
           "lastTransitionTime": "2027-01-15T08:00:00Z"})
}

fn certificate(owner_kind: &str, owner: &str, secret: &str, not_after: i64) -> CertificateExpiry {
    CertificateExpiry {
        namespace: "kcp".into(),
        secret: secret.into(),
        owner_kind: owner_kind.into(),
        owner_name: owner.into(),
        not_before: at(not_after - 3000),
        not_after: at(not_after),
    }
}

/// CacheServer `cache` and RootShard `root` Running, Shard `shard-1` upgrading, FrontProxy
/// `public` Degraded (its RootShard reference is broken), VirtualWorkspace `shard-1-vw` Running.
pub fn snapshot() -> Snapshot {
    let available = condition(
        "Available",
        "True",
        "Available",
        "every replica is available",
    );
    Snapshot {
        cache_servers: vec![
            serde_json::from_value(json!({
                "apiVersion": "operator.kcp.io/v1alpha1", "kind": "CacheServer",
                "metadata": {"name": "cache", "namespace": "kcp"},
                "spec": {},
                "status": {"phase": "Running", "currentVersion": "v1", "targetVersion": "v1",
                           "conditions": [available],
                           "endpoints": {"internal": "https://cache-cacheserver.kcp.svc.cluster.local:6443"}}
            }))
            .expect("cache server"),
        ],
        root_shards: vec![
            serde_json::from_value(json!({
                "apiVersion": "operator.kcp.io/v1alpha1", "kind": "RootShard",
                "metadata": {"name": "root", "namespace": "kcp"},
                "spec": {"external": {"hostname": "kcp.example.com", "port": 6443}, "replicas": 1,
                         "etcd": {"endpoints": ["https://etcd:2379"]}},
                "status": {"phase": "Running", "currentVersion": "v1", "targetVersion": "v1",
                           "conditions": [available],
                           "endpoints": {"internal": "https://root-rootshard.kcp.svc.cluster.local:6443",
                                         "external": "https://kcp.example.com:6443"},
                           "shards": [{"name": "shard-1", "url": "https://shard-1-shard.kcp.svc.cluster.local:6443"}]}
            }))
            .expect("root shard"),
        ],
        shards: vec![
            serde_json::from_value(json!({
                "apiVersion": "operator.kcp.io/v1alpha1", "kind": "Shard",
                "metadata": {"name": "shard-1", "namespace": "kcp"},
                "spec": {"rootShard": {"ref": {"name": "root"}}, "etcd": {"endpoints": ["https://etcd:2379"]}},
                "status": {"phase": "Provisioning", "currentVersion": "v1", "targetVersion": "v2",
                           "conditions": [condition("Progressing", "True", "Upgrading", "waiting for RootShard root")]}
            }))
            .expect("shard"),
        ],
        front_proxies: vec![
            serde_json::from_value(json!({
                "apiVersion": "operator.kcp.io/v1alpha1", "kind": "FrontProxy",
                "metadata": {"name": "public", "namespace": "kcp"},
                "spec": {"rootShard": {"ref": {"name": "gone"}}, "replicas": 3},
                "status": {"phase": "Degraded",
                           "conditions": [condition("ReferencesValid", "False", "ReferenceNotFound", "RootShard \"gone\" <missing>")]}
            }))
            .expect("front proxy"),
        ],
        virtual_workspaces: vec![
            serde_json::from_value(json!({
                "apiVersion": "operator.kcp.io/v1alpha1", "kind": "VirtualWorkspace",
                "metadata": {"name": "shard-1-vw", "namespace": "kcp"},
                "spec": {"target": {"shardRef": {"name": "shard-1"}},
                         "external": {"hostname": "vw-shard-1.kcp.example.com", "port": 443}},
                "status": {"phase": "Running", "currentVersion": "v1", "targetVersion": "v1",
                           "conditions": [available],
                           "endpoints": {"internal": "https://shard-1-vw-virtualworkspace.kcp.svc.cluster.local:6443",
                                         "external": "https://vw-shard-1.kcp.example.com:443"}}
            }))
            .expect("virtual workspace"),
        ],
        certificates: vec![
            certificate("RootShard", "root", "root-rootshard-server", 5000),
            certificate("RootShard", "root", "root-rootshard-client", 500),
            certificate("CacheServer", "cache", "cache-cacheserver-server", -10),
            certificate("Shard", "elsewhere", "elsewhere-shard-server", 5000),
        ],
        events: vec![
            EventRecord {
                namespace: "kcp".into(),
                name: "public.1".into(),
                kind: "FrontProxy".into(),
                object: "public".into(),
                type_: "Warning".into(),
                reason: "ReferenceNotFound".into(),
                note: "RootShard \"gone\" does not exist".into(),
                count: 4,
                last_seen: Some(at(-60)),
            },
            EventRecord {
                namespace: "kcp".into(),
                name: "root.1".into(),
                kind: "RootShard".into(),
                object: "root".into(),
                type_: "Normal".into(),
                reason: "CertificateIssued".into(),
                note: "server: certificate does not exist yet".into(),
                count: 1,
                last_seen: Some(at(-600)),
            },
        ],
        synced: true,
        replica: Phase::Synced,
    }
}
