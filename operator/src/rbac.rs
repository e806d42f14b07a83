//! The permissions the operator needs on the host cluster, derived from what its code touches.
//!
//! Why a table in code: the Helm chart's ClusterRole and Role are rendered from these rules
//! (`charts/kcp-operator/files/*-rules.yaml`, compared byte for byte by `tests/chart.rs`), so
//! the only way to change what the operator may do is to change [`uses`]. And [`uses`] cannot
//! drift from the controllers: a unit test below reads every source file and fails when
//!
//! - a file names an `Api<Kind>` that no entry claims (a newly used kind without a rule),
//! - an entry's evidence no longer occurs in its file (a rule nothing needs any more),
//! - the client calls of a file (`get_opt`, `list`, `patch`, `patch_status`, `delete`,
//!   server-side apply, the controller's list+watch, ...) ask for a verb its entries do not
//!   grant, or its entries grant one no call asks for,
//! - a library that talks to the API on its own (the event recorder) or a
//!   raw request appears in a file without an entry.
//!
//! Generic helpers (`Api<K>` in `apply`, `status`, `finalizer`, `run`) are expanded here: the
//! children from [`Child`] (an exhaustive match, so a new child kind does not compile until it
//! has a rule), the custom resources from [`crds::definitions`].
//!
//! Least privilege: the kinds the operator creates or watches get exactly the verbs it uses
//! (events: `create`/`patch` for the recorder, `list`/`watch` for the status page);
//! nothing is deleted on the host (garbage collection follows the owner references, which do
//! not set `blockOwnerDeletion`, so no `<kind>/finalizers` permission is needed either); the
//! finalizers the operator adds are a merge patch of `metadata.finalizers`, so only Shards and
//! Kubeconfigs (the kinds with a finalizer) get `patch`; server-side apply needs `create` too
//! because it creates missing objects. The leader Lease lives in the operator's own namespace,
//! so it is a Role there, with `get`/`update` limited to the Lease by name. What the operator
//! does inside kcp (ClusterRoleBindings, shard registrations) uses its own client certificate
//! and is listed only for the source check.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;

use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule, Role};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;

use crate::api::{CacheServer, FrontProxy, Kubeconfig, RootShard, Shard, VirtualWorkspace};
use crate::crds;
use crate::naming::{FIELD_MANAGER, LEADER_LEASE};
use crate::render::children::Child;

/// Name of the ClusterRole (and of the Role, with [`ROLE_SUFFIX`]) `kcp-operator rbac` prints.
pub const CLUSTER_ROLE_NAME: &str = FIELD_MANAGER;
/// Suffix of the leader-election Role's name.
pub const ROLE_SUFFIX: &str = "-leader-election";

/// One API resource, `resource` possibly with a subresource (`rootshards/status`).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct GroupResource {
    pub group: String,
    pub resource: String,
}

impl GroupResource {
    pub fn of<K: Resource<DynamicType = ()>>() -> Self {
        Self {
            group: K::group(&()).into_owned(),
            resource: K::plural(&()).into_owned(),
        }
    }

    /// The same resource's `status` subresource.
    pub fn status(self) -> Self {
        Self {
            resource: format!("{}/status", self.resource),
            ..self
        }
    }

    /// The subresource part (`status` of `rootshards/status`), if any.
    pub fn subresource(&self) -> Option<&str> {
        self.resource.split_once('/').map(|(_, sub)| sub)
    }
}

/// Which API server a use talks to, and where its rule goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Target {
    /// The host cluster, any namespace: the ClusterRole.
    Cluster,
    /// The host cluster, the operator's own namespace: the Role.
    OwnNamespace,
    /// kcp itself, with the operator's client certificate: no host RBAC.
    Kcp,
}

/// One place in the source that talks to an API server, and what it needs there.
#[derive(Clone, Debug)]
pub struct Use {
    /// File under `operator/src/`.
    pub file: &'static str,
    /// Text that occurs in `file` and makes the use: `Api<Secret>` (turbofish `Api::<Secret>`
    /// counts as the same), or a library call such as `Recorder::new`.
    pub evidence: &'static str,
    pub resources: Vec<GroupResource>,
    /// Limits the rule to these object names (never together with `create`).
    pub names: Vec<&'static str>,
    pub verbs: Vec<&'static str>,
    pub target: Target,
    pub why: &'static str,
}

fn entry(
    file: &'static str,
    evidence: &'static str,
    resources: Vec<GroupResource>,
    verbs: &[&'static str],
    target: Target,
    why: &'static str,
) -> Use {
    Use {
        file,
        evidence,
        resources,
        names: Vec::new(),
        verbs: verbs.to_vec(),
        target,
        why,
    }
}

/// The API resource of every child kind. A new [`Child`] variant does not compile until it is
/// added here, and then to [`child_resources`].
fn child_resource(child: &Child) -> GroupResource {
    match child {
        Child::Secret(_) => GroupResource::of::<Secret>(),
        Child::ConfigMap(_) => GroupResource::of::<ConfigMap>(),
        Child::Service(_) => GroupResource::of::<Service>(),
        Child::Deployment(_) => GroupResource::of::<Deployment>(),
        Child::StatefulSet(_) => GroupResource::of::<StatefulSet>(),
        Child::PodDisruptionBudget(_) => GroupResource::of::<PodDisruptionBudget>(),
    }
}

/// Every kind the workloads create, in [`Child`] order.
fn child_resources() -> Vec<GroupResource> {
    [
        Child::Secret(Secret::default()),
        Child::ConfigMap(ConfigMap::default()),
        Child::Service(Service::default()),
        Child::Deployment(Deployment::default()),
        Child::StatefulSet(StatefulSet::default()),
        Child::PodDisruptionBudget(PodDisruptionBudget::default()),
    ]
    .iter()
    .map(child_resource)
    .collect()
}

/// Every custom resource of the API (generating the CRDs takes a while, so only once).
fn custom_resources() -> Vec<GroupResource> {
    static CUSTOM: OnceLock<Vec<GroupResource>> = OnceLock::new();
    CUSTOM
        .get_or_init(|| {
            crds::definitions()
                .into_iter()
                .map(|crd| GroupResource {
                    group: crd.spec.group,
                    resource: crd.spec.names.plural,
                })
                .collect()
        })
        .clone()
}

/// What the status page watches: the four component kinds, Secrets and events.
fn status_page_resources() -> Vec<GroupResource> {
    vec![
        GroupResource::of::<RootShard>(),
        GroupResource::of::<Shard>(),
        GroupResource::of::<FrontProxy>(),
        GroupResource::of::<CacheServer>(),
        GroupResource::of::<Secret>(),
        GroupResource::of::<Event>(),
    ]
}

/// Every place the operator talks to an API server, with the verbs it uses there.
pub fn uses() -> Vec<Use> {
    use Target::{Cluster, Kcp, OwnNamespace};
    let get = &["get"][..];
    let watch = &["list", "watch"][..];
    let mut lease_by_name = entry(
        "manager/leader.rs",
        "Api<Lease>",
        vec![GroupResource::of::<Lease>()],
        &["get", "update"],
        OwnNamespace,
        "a standby reads the leader Lease; taking, renewing (one update each) and releasing it are updates with the held resourceVersion",
    );
    lease_by_name.names = vec![LEADER_LEASE];
    vec![
        // The controllers: list+watch of every reconciled, owned and followed kind.
        entry(
            "controller/run.rs",
            "Api<K>",
            custom_resources(),
            watch,
            Cluster,
            "one controller per custom resource",
        ),
        entry(
            "controller/run.rs",
            "Api<P>",
            vec![
                GroupResource::of::<RootShard>(),
                GroupResource::of::<Shard>(),
                GroupResource::of::<CacheServer>(),
            ],
            watch,
            Cluster,
            "follow(): the referenced RootShard, CacheServer and Shards of the same root",
        ),
        entry(
            "controller/run.rs",
            "Api<Kubeconfig>",
            vec![GroupResource::of::<Kubeconfig>()],
            watch,
            Cluster,
            "the Kubeconfig controller",
        ),
        entry(
            "controller/run.rs",
            "Api<Secret>",
            vec![GroupResource::of::<Secret>()],
            watch,
            Cluster,
            "owns(): certificate, bundle and kubeconfig Secrets",
        ),
        entry(
            "controller/run.rs",
            "Api<ConfigMap>",
            vec![GroupResource::of::<ConfigMap>()],
            watch,
            Cluster,
            "owns(): path mapping and etcd membership ConfigMaps",
        ),
        entry(
            "controller/run.rs",
            "Api<Service>",
            vec![GroupResource::of::<Service>()],
            watch,
            Cluster,
            "owns(): component and etcd Services",
        ),
        entry(
            "controller/run.rs",
            "Api<Deployment>",
            vec![GroupResource::of::<Deployment>()],
            watch,
            Cluster,
            "owns(): component Deployments",
        ),
        entry(
            "controller/run.rs",
            "Api<StatefulSet>",
            vec![GroupResource::of::<StatefulSet>()],
            watch,
            Cluster,
            "owns(): managed etcd StatefulSets",
        ),
        entry(
            "controller/run.rs",
            "Api<PodDisruptionBudget>",
            vec![GroupResource::of::<PodDisruptionBudget>()],
            watch,
            Cluster,
            "owns(): PodDisruptionBudgets",
        ),
        // Writing children and status.
        entry(
            "controller/apply.rs",
            "Api<K>",
            child_resources(),
            &["create", "get", "patch"],
            Cluster,
            "read each child, then server-side apply it (apply creates missing objects)",
        ),
        entry(
            "controller/status.rs",
            "Api<K>",
            custom_resources()
                .into_iter()
                .map(GroupResource::status)
                .collect(),
            &["patch"],
            Cluster,
            "status of every custom resource (merge patch of the status subresource)",
        ),
        entry(
            "controller/finalizer.rs",
            "Api<K>",
            vec![
                GroupResource::of::<Shard>(),
                GroupResource::of::<Kubeconfig>(),
            ],
            &["patch"],
            Cluster,
            "adding/removing finalizers is a merge patch of metadata.finalizers (see finalizer_callers)",
        ),
        // Reads.
        entry(
            "controller/certificates.rs",
            "Api<Secret>",
            vec![GroupResource::of::<Secret>()],
            &["get", "create"],
            Cluster,
            "existing certificates and CAs; a missing one is created (409: another reconcile won)",
        ),
        entry(
            "controller/component.rs",
            "Api<Secret>",
            vec![GroupResource::of::<Secret>()],
            get,
            Cluster,
            "CA bundle sources and mounted Secrets for the pod revision",
        ),
        entry(
            "controller/component.rs",
            "Api<ConfigMap>",
            vec![GroupResource::of::<ConfigMap>()],
            get,
            Cluster,
            "etcd membership and mounted ConfigMaps",
        ),
        entry(
            "controller/component.rs",
            "Api<StatefulSet>",
            vec![GroupResource::of::<StatefulSet>()],
            get,
            Cluster,
            "managed etcd replicas for the scaling planner",
        ),
        entry(
            "controller/server.rs",
            "Api<RootShard>",
            vec![GroupResource::of::<RootShard>()],
            get,
            Cluster,
            "a Shard's RootShard",
        ),
        entry(
            "controller/frontproxy.rs",
            "Api<RootShard>",
            vec![GroupResource::of::<RootShard>()],
            get,
            Cluster,
            "a FrontProxy's RootShard",
        ),
        entry(
            "controller/server.rs",
            "Api<VirtualWorkspace>",
            vec![GroupResource::of::<VirtualWorkspace>()],
            get,
            Cluster,
            "the VirtualWorkspace a RootShard or Shard names (kcpVirtualWorkspace)",
        ),
        entry(
            "controller/virtualworkspace.rs",
            "Api<RootShard>",
            vec![GroupResource::of::<RootShard>()],
            get,
            Cluster,
            "a VirtualWorkspace's RootShard (its target's)",
        ),
        entry(
            "controller/virtualworkspace.rs",
            "Api<Shard>",
            vec![GroupResource::of::<Shard>()],
            get,
            Cluster,
            "a VirtualWorkspace's target Shard",
        ),
        entry(
            "controller/deregister.rs",
            "Api<RootShard>",
            vec![GroupResource::of::<RootShard>()],
            get,
            Cluster,
            "the deleted Shard's RootShard",
        ),
        entry(
            "controller/kubeconfig.rs",
            "Api<RootShard>",
            vec![GroupResource::of::<RootShard>()],
            get,
            Cluster,
            "a Kubeconfig's target",
        ),
        entry(
            "controller/kubeconfig.rs",
            "Api<Shard>",
            vec![GroupResource::of::<Shard>()],
            get,
            Cluster,
            "a Kubeconfig's target",
        ),
        entry(
            "controller/kubeconfig.rs",
            "Api<FrontProxy>",
            vec![GroupResource::of::<FrontProxy>()],
            get,
            Cluster,
            "a Kubeconfig's target",
        ),
        entry(
            "controller/upgrade.rs",
            "Api<Deployment>",
            vec![GroupResource::of::<Deployment>()],
            get,
            Cluster,
            "the version a component's Deployment runs",
        ),
        entry(
            "controller/server.rs",
            "Api<CacheServer>",
            vec![GroupResource::of::<CacheServer>()],
            get,
            Cluster,
            "the CacheServer a RootShard or Shard uses exists (else a condition)",
        ),
        entry(
            "controller/upgrade.rs",
            "Api<CacheServer>",
            vec![GroupResource::of::<CacheServer>()],
            get,
            Cluster,
            "status of the earlier upgrade stage",
        ),
        entry(
            "controller/upgrade.rs",
            "Api<Shard>",
            vec![GroupResource::of::<Shard>()],
            &["list"],
            Cluster,
            "every Shard of a root before its VirtualWorkspaces and FrontProxies upgrade",
        ),
        entry(
            "controller/upgrade.rs",
            "Api<VirtualWorkspace>",
            vec![GroupResource::of::<VirtualWorkspace>()],
            &["list"],
            Cluster,
            "every VirtualWorkspace of a root before its FrontProxies upgrade",
        ),
        entry(
            "controller/shard_list.rs",
            "Api<Shard>",
            vec![GroupResource::of::<Shard>()],
            &["list"],
            Cluster,
            "the Shards a RootShard and its FrontProxies list in their statuses",
        ),
        // The status page (every replica, leader or standby).
        entry(
            "status_page/caches.rs",
            "Api<K>",
            status_page_resources(),
            watch,
            Cluster,
            "the status page's watches: the components, the operator's certificate Secrets (validity only) and events",
        ),
        entry(
            "status_page/caches.rs",
            "watcher::watcher",
            status_page_resources(),
            watch,
            Cluster,
            "kube-runtime's watcher lists and watches what the status page shows",
        ),
        // Libraries that talk to the API on their own.
        entry(
            "controller/mod.rs",
            "Recorder::new",
            vec![GroupResource::of::<Event>()],
            &["create", "patch"],
            Cluster,
            "kube-runtime's recorder creates events.k8s.io Events and patches repeated ones",
        ),
        entry(
            "manager/leader.rs",
            "Api<Lease>",
            vec![GroupResource::of::<Lease>()],
            &["create"],
            OwnNamespace,
            "the first candidate creates the leader Lease when it is missing",
        ),
        lease_by_name,
        // Inside kcp, as the operator's client certificate.
        entry(
            "controller/bindings.rs",
            "Api<ClusterRoleBinding>",
            vec![GroupResource {
                group: "rbac.authorization.k8s.io".into(),
                resource: "clusterrolebindings".into(),
            }],
            &["create", "delete", "list", "patch"],
            Kcp,
            "Kubeconfig bindings in the target workspace",
        ),
        entry(
            "controller/deregister.rs",
            "Api<DynamicObject>",
            vec![GroupResource {
                group: "core.kcp.io".into(),
                resource: "shards".into(),
            }],
            &["get", "delete"],
            Kcp,
            "the Shard's registration in the root workspace (its capacity, then itself)",
        ),
    ]
}

/// The files calling `finalizer::add` and the kind each adds its finalizer to; the finalizer
/// entry of [`uses`] must grant `patch` on exactly these kinds.
pub fn finalizer_callers() -> Vec<(&'static str, GroupResource)> {
    vec![
        ("controller/server.rs", GroupResource::of::<Shard>()),
        (
            "controller/kubeconfig.rs",
            GroupResource::of::<Kubeconfig>(),
        ),
    ]
}

/// The rules for `target`: resources with the same group, names and verbs share a rule;
/// groups, resources and verbs are sorted, so the output is stable.
pub fn rules(target: Target) -> Vec<PolicyRule> {
    type Key = (String, Vec<&'static str>, BTreeSet<&'static str>);
    let mut verbs: BTreeMap<(GroupResource, Vec<&'static str>), BTreeSet<&'static str>> =
        BTreeMap::new();
    for used in uses().into_iter().filter(|used| used.target == target) {
        let mut names = used.names.clone();
        names.sort_unstable();
        for resource in used.resources {
            verbs
                .entry((resource, names.clone()))
                .or_default()
                .extend(used.verbs.iter().copied());
        }
    }
    let mut grouped: BTreeMap<Key, BTreeSet<String>> = BTreeMap::new();
    for ((resource, names), verbs) in verbs {
        grouped
            .entry((resource.group, names, verbs))
            .or_default()
            .insert(resource.resource);
    }
    let mut rules: Vec<PolicyRule> = grouped
        .into_iter()
        .map(|((group, names, verbs), resources)| PolicyRule {
            api_groups: Some(vec![group]),
            resources: Some(resources.into_iter().collect()),
            resource_names: (!names.is_empty())
                .then(|| names.into_iter().map(str::to_owned).collect()),
            verbs: verbs.into_iter().map(str::to_owned).collect(),
            non_resource_urls: None,
        })
        .collect();
    rules.sort_by(|a, b| {
        (&a.api_groups, &a.resources, &a.resource_names).cmp(&(
            &b.api_groups,
            &b.resources,
            &b.resource_names,
        ))
    });
    rules
}

/// The ClusterRole rules: everything on the host outside the operator's namespace.
pub fn cluster_rules() -> Vec<PolicyRule> {
    rules(Target::Cluster)
}

/// The Role rules in the operator's own namespace (leader election).
pub fn namespace_rules() -> Vec<PolicyRule> {
    rules(Target::OwnNamespace)
}

/// Failure to serialise RBAC objects.
#[derive(Debug, thiserror::Error)]
#[error("failed to serialise RBAC rules as YAML")]
pub struct RenderError(#[from] yaml_serde::Error);

/// A list of rules as a YAML sequence (what the chart's `files/*-rules.yaml` hold).
pub fn rules_yaml(rules: &[PolicyRule]) -> Result<String, RenderError> {
    Ok(yaml_serde::to_string(rules)?)
}

/// The ClusterRole `kcp-operator` and the Role `kcp-operator-leader-election` in `namespace`,
/// as a multi-document YAML stream (`kcp-operator rbac`).
pub fn render_all(namespace: &str) -> Result<String, RenderError> {
    let cluster_role = ClusterRole {
        metadata: ObjectMeta {
            name: Some(CLUSTER_ROLE_NAME.into()),
            ..ObjectMeta::default()
        },
        rules: Some(cluster_rules()),
        aggregation_rule: None,
    };
    let role = Role {
        metadata: ObjectMeta {
            name: Some(format!("{CLUSTER_ROLE_NAME}{ROLE_SUFFIX}")),
            namespace: Some(namespace.into()),
            ..ObjectMeta::default()
        },
        rules: Some(namespace_rules()),
    };
    Ok(format!(
        "---\n{}---\n{}",
        yaml_serde::to_string(&cluster_role)?,
        yaml_serde::to_string(&role)?
    ))
}

#[cfg(test)]
mod tests {
    //! The source check: what the files under `src/` do against [`uses`].

    use std::collections::{BTreeMap, BTreeSet};
    use std::path::{Path, PathBuf};

    use super::*;

    /// Client calls and the (subresource, verb) they need. `Patch::Apply` is server-side apply,
    /// which creates a missing object (and then needs `create`). kube's `list`, `watch` and
    /// `create` take their parameters by reference, which tells them from the etcd members
    /// API's `list()` and from collections.
    const CALLS: &[(&str, Option<&str>, &[&str])] = &[
        (".get(", None, &["get"]),
        (".get_opt(", None, &["get"]),
        (".list(&", None, &["list"]),
        (".watch(&", None, &["watch"]),
        ("Controller::new(", None, &["list", "watch"]),
        ("watcher::watcher(", None, &["list", "watch"]),
        (".owns(", None, &["list", "watch"]),
        (".watches(", None, &["list", "watch"]),
        (".create(&", None, &["create"]),
        (".patch(", None, &["patch"]),
        ("Patch::Apply(", None, &["create"]),
        (".replace(", None, &["update"]),
        (".delete(", None, &["delete"]),
        (".delete_collection(", None, &["deletecollection"]),
        (".get_status(", Some("status"), &["get"]),
        (".patch_status(", Some("status"), &["patch"]),
        (".replace_status(", Some("status"), &["update"]),
    ];

    /// Code that reaches an API server without an `Api<Kind>` in sight; each occurrence needs an
    /// entry with that evidence in the same file.
    const LIBRARIES: &[&str] = &[
        "Recorder::new",
        "Controller::new_with",
        "watcher::watcher",
        "metadata_watcher",
        "Discovery::",
        ".request::<",
        ".request_text(",
        ".request_stream(",
        "block_owner_deletion",
    ];

    /// `Api` constructors whose type may be inferred rather than written.
    const CONSTRUCTORS: &[&str] = &[
        "Api::all(",
        "Api::namespaced(",
        "Api::default_namespaced(",
        "Api::all_with(",
        "Api::namespaced_with(",
        "Api::default_namespaced_with(",
    ];

    fn src() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src")
    }

    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("read src") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|ext| ext == "rs") {
                out.push(path);
            }
        }
    }

    /// Every source file but this one (its table names all the evidence), keyed by its path
    /// under `src/`, without unit test modules (they talk to mock clients).
    fn sources() -> BTreeMap<String, String> {
        let root = src();
        let mut files = Vec::new();
        walk(&root, &mut files);
        files
            .into_iter()
            .filter_map(|path| {
                let name = path
                    .strip_prefix(&root)
                    .expect("under src")
                    .to_string_lossy()
                    .replace('\\', "/");
                if name == "rbac.rs" {
                    return None;
                }
                let text = std::fs::read_to_string(&path).expect("read source");
                let code = match text.find("#[cfg(test)]") {
                    Some(at) => text[..at].to_owned(),
                    None => text,
                };
                Some((name, code))
            })
            .collect()
    }

    /// The `Api<T>` (or `Api::<T>`) types named in `code`, as `Api<T>`.
    fn api_types(code: &str) -> BTreeSet<String> {
        let mut found = BTreeSet::new();
        for opener in ["Api<", "Api::<"] {
            for (at, _) in code.match_indices(opener) {
                let before = code[..at].chars().next_back();
                if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                    continue;
                }
                let rest = &code[at + opener.len()..];
                let mut depth = 1;
                let mut end = None;
                for (i, c) in rest.char_indices() {
                    match c {
                        '<' => depth += 1,
                        '>' => {
                            depth -= 1;
                            if depth == 0 {
                                end = Some(i);
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                let ty: String = rest[..end.expect("closing >")]
                    .chars()
                    .filter(|c| !c.is_whitespace())
                    .collect();
                found.insert(format!("Api<{ty}>"));
            }
        }
        found
    }

    fn occurs(code: &str, evidence: &str) -> bool {
        match evidence.strip_prefix("Api<") {
            Some(_) => api_types(code).contains(evidence),
            None => code.contains(evidence),
        }
    }

    type Sources = BTreeMap<String, String>;

    /// `Api<Kind>`s and library calls no entry of `uses` claims, as `file: evidence`.
    fn unclaimed(sources: &Sources, uses: &[Use]) -> Vec<String> {
        let mut missing = Vec::new();
        for (file, code) in sources {
            let claimed: BTreeSet<&str> = uses
                .iter()
                .filter(|used| used.file == file)
                .map(|used| used.evidence)
                .collect();
            for api in api_types(code) {
                if !claimed.contains(api.as_str()) {
                    missing.push(format!("{file}: {api}"));
                }
            }
            for library in LIBRARIES {
                if code.contains(library) && !claimed.contains(library) {
                    missing.push(format!("{file}: {library}"));
                }
            }
        }
        missing
    }

    /// Entries whose evidence no longer occurs in their file.
    fn stale(sources: &Sources, uses: &[Use]) -> Vec<String> {
        uses.iter()
            .filter(|used| {
                !sources
                    .get(used.file)
                    .is_some_and(|code| occurs(code, used.evidence))
            })
            .map(|used| format!("{}: {}", used.file, used.evidence))
            .collect()
    }

    /// (subresource, verb) pairs.
    type Needs = BTreeSet<(Option<String>, String)>;

    /// Files whose client calls need other verbs than their `Api` entries grant.
    fn verb_mismatches(sources: &Sources, uses: &[Use]) -> Vec<String> {
        let files: BTreeSet<&str> = uses
            .iter()
            .filter(|used| used.evidence.starts_with("Api<"))
            .map(|used| used.file)
            .collect();
        let mut problems = Vec::new();
        for file in files {
            let code = sources.get(file).map(String::as_str).unwrap_or_default();
            let called: Needs = CALLS
                .iter()
                .filter(|(call, _, _)| code.contains(call))
                .flat_map(|(_, sub, verbs)| {
                    verbs
                        .iter()
                        .map(|verb| (sub.map(str::to_owned), (*verb).to_owned()))
                })
                .collect();
            let granted: Needs = uses
                .iter()
                .filter(|used| used.file == file && used.evidence.starts_with("Api<"))
                .flat_map(|used| {
                    used.resources.iter().flat_map(|resource| {
                        used.verbs.iter().map(|verb| {
                            (
                                resource.subresource().map(str::to_owned),
                                (*verb).to_owned(),
                            )
                        })
                    })
                })
                .collect();
            if called != granted {
                problems.push(format!(
                    "{file}: calls need {called:?}, entries grant {granted:?}"
                ));
            }
        }
        problems
    }

    /// Files with more `Api` constructor calls than written `Api<Kind>` types: an
    /// `Api::namespaced(..)` whose kind is inferred would escape the scan.
    fn inferred(sources: &Sources) -> Vec<String> {
        let mut problems = Vec::new();
        for (file, code) in sources {
            let constructors: usize = CONSTRUCTORS
                .iter()
                .map(|constructor| code.matches(constructor).count())
                .sum();
            let written = code.matches("Api<").count();
            if constructors > written {
                problems.push(format!(
                    "{file}: {constructors} Api constructors but {written} written Api<Kind> types"
                ));
            }
        }
        problems
    }

    #[test]
    fn every_api_use_in_the_source_has_an_entry() {
        let missing = unclaimed(&sources(), &uses());
        assert!(
            missing.is_empty(),
            "API uses without an entry in rbac::uses() (add one, then refresh the chart with \
             UPDATE_CHART=1 cargo test -p kcp-operator --test chart): {missing:#?}"
        );
    }

    #[test]
    fn every_entry_is_still_used() {
        let stale = stale(&sources(), &uses());
        assert!(
            stale.is_empty(),
            "entries whose evidence is gone: {stale:#?}"
        );
    }

    #[test]
    fn the_client_calls_of_each_file_match_its_verbs() {
        let problems = verb_mismatches(&sources(), &uses());
        assert!(problems.is_empty(), "{problems:#?}");
    }

    #[test]
    fn no_api_is_built_with_an_inferred_type() {
        let problems = inferred(&sources());
        assert!(problems.is_empty(), "{problems:#?}");
    }

    #[test]
    fn the_source_checks_catch_drift() {
        let uses = uses();
        let mut sources = sources();
        let edit = |sources: &mut Sources, file: &str, f: &dyn Fn(&str) -> String| {
            let code = sources.get_mut(file).expect("file");
            *code = f(code);
        };
        // A new kind, read by name.
        edit(&mut sources, "controller/server.rs", &|code| {
            format!(
                "{code}\nfn pods(c: Client) {{ let pods: Api<Pod> = Api::all(c); pods.get_opt(\"x\"); }}"
            )
        });
        // A new verb on a known kind.
        edit(&mut sources, "controller/frontproxy.rs", &|code| {
            format!("{code}\nfn gone(roots: Api<RootShard>) {{ roots.delete(\"x\", &dp); }}")
        });
        // An Api whose kind is inferred.
        edit(&mut sources, "naming.rs", &|code| {
            format!("{code}\nfn hidden(c: Client) {{ let x = Api::namespaced(c, \"ns\"); }}")
        });
        // The recorder gone from one file, used in another.
        edit(&mut sources, "controller/mod.rs", &|code| {
            code.replace("Recorder::new", "Recorder::gone")
        });
        edit(&mut sources, "controller/status.rs", &|code| {
            format!("{code}\nfn record(c: Client) {{ Recorder::new(c, r); }}")
        });
        assert_eq!(
            unclaimed(&sources, &uses),
            vec![
                "controller/server.rs: Api<Pod>",
                "controller/status.rs: Recorder::new"
            ]
        );
        assert_eq!(
            stale(&sources, &uses),
            vec!["controller/mod.rs: Recorder::new"]
        );
        let mismatches = verb_mismatches(&sources, &uses);
        assert_eq!(mismatches.len(), 1, "{mismatches:#?}");
        assert!(
            mismatches[0].starts_with("controller/frontproxy.rs:")
                && mismatches[0].contains("\"delete\""),
            "{mismatches:#?}"
        );
        assert_eq!(
            inferred(&sources),
            vec!["naming.rs: 1 Api constructors but 0 written Api<Kind> types"]
        );
    }

    #[test]
    fn api_types_are_read_from_annotations_and_turbofish() {
        let code = "let a: Api<Secret> = x; Api::<Foo>::all(c); struct S { b: Api< Lease > } \
                    MyApi<Nope>; fn f(api: &Api<K>) {} Api<DynamicObject>";
        let found: Vec<String> = api_types(code).into_iter().collect();
        assert_eq!(
            found,
            vec![
                "Api<DynamicObject>",
                "Api<Foo>",
                "Api<K>",
                "Api<Lease>",
                "Api<Secret>"
            ]
        );
    }

    #[test]
    fn finalizers_are_patched_on_exactly_the_kinds_that_have_one() {
        let sources = sources();
        let adding: BTreeSet<&str> = sources
            .iter()
            .filter(|(_, code)| code.contains("finalizer::add("))
            .map(|(file, _)| file.as_str())
            .collect();
        let callers = finalizer_callers();
        let known: BTreeSet<&str> = callers.iter().map(|(file, _)| *file).collect();
        assert_eq!(adding, known, "files adding finalizers");
        let kinds: BTreeSet<GroupResource> = callers.into_iter().map(|(_, kind)| kind).collect();
        let patched: BTreeSet<GroupResource> = uses()
            .into_iter()
            .filter(|used| used.file == "controller/finalizer.rs")
            .flat_map(|used| used.resources)
            .collect();
        assert_eq!(patched, kinds);
    }

    #[test]
    fn every_child_and_custom_resource_is_covered() {
        let rules = cluster_rules();
        let allows = |resource: &GroupResource, verb: &str| {
            rules.iter().any(|rule| {
                rule.api_groups
                    .as_ref()
                    .is_some_and(|groups| groups.contains(&resource.group))
                    && rule
                        .resources
                        .as_ref()
                        .is_some_and(|resources| resources.contains(&resource.resource))
                    && rule.verbs.iter().any(|v| v == verb)
                    && rule.resource_names.is_none()
            })
        };
        for child in child_resources() {
            for verb in ["get", "list", "watch", "create", "patch"] {
                assert!(allows(&child, verb), "{child:?} {verb}");
            }
            assert!(!allows(&child, "delete"), "{child:?} is never deleted");
            assert!(!allows(&child, "update"), "{child:?} is never updated");
        }
        for custom in custom_resources() {
            for verb in ["list", "watch"] {
                assert!(allows(&custom, verb), "{custom:?} {verb}");
            }
            assert!(
                allows(&custom.clone().status(), "patch"),
                "{custom:?} status"
            );
            assert!(!allows(&custom, "create"), "{custom:?} is never created");
            assert!(!allows(&custom, "delete"), "{custom:?} is never deleted");
        }
    }

    #[test]
    fn rules_are_what_the_operator_needs() {
        let yaml = rules_yaml(&cluster_rules()).expect("yaml");
        let expected = "\
- apiGroups:
  - ''
  resources:
  - configmaps
  - secrets
  - services
  verbs:
  - create
  - get
  - list
  - patch
  - watch
- apiGroups:
  - apps
  resources:
  - deployments
  - statefulsets
  verbs:
  - create
  - get
  - list
  - patch
  - watch
- apiGroups:
  - events.k8s.io
  resources:
  - events
  verbs:
  - create
  - list
  - patch
  - watch
";
        assert!(yaml.starts_with(expected), "{yaml}");
        let kcp_side: Vec<GroupResource> = uses()
            .into_iter()
            .filter(|used| used.target == Target::Kcp)
            .flat_map(|used| used.resources)
            .collect();
        for rule in cluster_rules().iter().chain(&namespace_rules()) {
            for group in rule.api_groups.iter().flatten() {
                for resource in rule.resources.iter().flatten() {
                    let used = GroupResource {
                        group: group.clone(),
                        resource: resource.clone(),
                    };
                    assert!(
                        !kcp_side.contains(&used),
                        "{used:?} is used inside kcp only"
                    );
                }
            }
        }
    }

    #[test]
    fn leases_are_namespaced_and_named() {
        let rules = namespace_rules();
        assert_eq!(rules.len(), 2, "{rules:?}");
        let create = &rules[0];
        assert_eq!(create.verbs, vec!["create"]);
        assert_eq!(
            create.resource_names, None,
            "create cannot be limited by name"
        );
        let named = &rules[1];
        assert_eq!(named.verbs, vec!["get", "update"]);
        assert_eq!(named.resource_names, Some(vec![LEADER_LEASE.to_owned()]));
        for rule in &rules {
            assert_eq!(
                rule.api_groups,
                Some(vec!["coordination.k8s.io".to_owned()])
            );
            assert_eq!(rule.resources, Some(vec!["leases".to_owned()]));
        }
        assert!(
            !cluster_rules().iter().any(|rule| rule
                .resources
                .iter()
                .flatten()
                .any(|r| r == "leases")),
            "no cluster-wide lease access"
        );
    }

    #[test]
    fn render_all_prints_both_roles() {
        let yaml = render_all("ops").expect("renders");
        let documents: Vec<serde_json::Value> = yaml_serde::Deserializer::from_str(&yaml)
            .map(|document| serde::Deserialize::deserialize(document).expect("document"))
            .collect();
        assert_eq!(documents.len(), 2);
        let cluster_role: ClusterRole =
            serde_json::from_value(documents[0].clone()).expect("ClusterRole");
        assert_eq!(cluster_role.rules, Some(cluster_rules()));
        let role: Role = serde_json::from_value(documents[1].clone()).expect("Role");
        assert_eq!(role.metadata.namespace.as_deref(), Some("ops"));
        assert_eq!(
            role.metadata.name.as_deref(),
            Some("kcp-operator-leader-election")
        );
        assert_eq!(role.rules, Some(namespace_rules()));
    }
}
