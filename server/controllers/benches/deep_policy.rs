//! What a deep SubjectAccessReview about another shard's cluster costs (`bind` on an APIExport
//! of a workspace held by another shard, as APIBinding admission asks it): the policy built from
//! the RBAC copies that shard replicated, rebuilt for every review (each review preceded by a
//! change of the copies, which is what every review paid before the policy was cached) against
//! the cached policy (no change in between). Upstream's global authorizer answers from informers
//! over the cache server; this measures our equivalent in-process.
//!
//! `cargo bench -p kcp-controllers --bench deep_policy` prints nanoseconds per review.

use std::hint::black_box;
use std::time::Instant;

use kcp_controllers::TenancyIndex;
use kcp_controllers::policies::PolicyCache;
use kcp_rbac::{Attributes, Policy, ResourceAttributes, User};
use kcp_registry::LogicalClusterName;
use kcp_registry::storage::ObjectStore;
use serde_json::{Value, json};

/// Exports of the provider's workspace, each with a ClusterRole granting `bind` on it and a
/// ClusterRoleBinding of its own user.
const EXPORTS: usize = 20;

fn copy(kind: &str, name: &str, body: Value) -> Value {
    let mut object = json!({"kind": kind, "metadata": {"name": name,
        "annotations": {"kcp.io/cluster": "provider", "kcp.io/shard": "root"}}});
    if let (Some(object), Value::Object(body)) = (object.as_object_mut(), body) {
        object.extend(body);
    }
    object
}

fn grants(export: usize) -> [Value; 2] {
    let name = format!("bind-export-{export}");
    [
        copy(
            "ClusterRole",
            &name,
            json!({"rules": [{"apiGroups": ["apis.kcp.io"], "resources": ["apiexports"],
                "resourceNames": [format!("export-{export}")], "verbs": ["bind"]}]}),
        ),
        copy(
            "ClusterRoleBinding",
            &name,
            json!({"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                "name": name},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                    "name": format!("user-{export}")}]}),
        ),
    ]
}

fn bind(export: usize) -> Attributes {
    Attributes::resource(
        User::new(&format!("user-{export}"), &[]),
        "bind",
        ResourceAttributes {
            api_group: "apis.kcp.io".into(),
            resource: "apiexports".into(),
            name: format!("export-{export}"),
            ..ResourceAttributes::default()
        },
    )
}

/// Nanoseconds per review over `reviews` reviews, the copies changed before each when `change`.
async fn measure(
    cache: &PolicyCache,
    tenancy: &TenancyIndex,
    cluster: &LogicalClusterName,
    reviews: usize,
    change: bool,
) -> f64 {
    let start = Instant::now();
    for review in 0..reviews {
        let export = review % EXPORTS;
        if change {
            let [_, binding] = grants(export);
            tenancy.apply_copy(false, binding);
        }
        let policy = match cache.deep_policy(cluster, tenancy).await {
            Ok(policy) => policy,
            Err(error) => panic!("deep policy: {error:?}"),
        };
        assert!(
            policy
                .layers()
                .as_slice()
                .authorize(&bind(export))
                .is_allowed()
        );
        black_box(policy);
    }
    start.elapsed().as_nanos() as f64 / reviews as f64
}

fn main() {
    let runtime = match tokio::runtime::Builder::new_current_thread().build() {
        Ok(runtime) => runtime,
        Err(error) => panic!("runtime: {error}"),
    };
    runtime.block_on(async {
        let storage = match kcp_storage::open_in_memory().await {
            Ok(storage) => storage,
            Err(error) => panic!("store: {error}"),
        };
        let cache = PolicyCache::new(ObjectStore::new(storage, "/registry"));
        let tenancy = TenancyIndex::default();
        for export in 0..EXPORTS {
            for object in grants(export) {
                tenancy.apply_copy(false, object);
            }
        }
        let Some(cluster) = LogicalClusterName::parse("provider") else {
            panic!("cluster name");
        };
        // Warm up: the bootstrap layer is built once either way.
        measure(&cache, &tenancy, &cluster, 100, true).await;
        for round in 1..=3 {
            let rebuilt = measure(&cache, &tenancy, &cluster, 2_000, true).await;
            let cached = measure(&cache, &tenancy, &cluster, 200_000, false).await;
            println!(
                "round {round}: {EXPORTS} exports' grants copied; rebuilt per review {:.1} µs, \
                 cached {:.2} µs",
                rebuilt / 1_000.0,
                cached / 1_000.0
            );
        }
    });
}
