//! How Kubernetes merges the fields of the workload types, as the `x-kubernetes-*` extensions its
//! published OpenAPI carries.
//!
//! k8s-openapi's `schemars` impls describe shapes only; list types, map types and patch
//! strategies live in Kubernetes' Go markers (`+listType`, `+listMapKey`, `+mapType`,
//! `+structType`, `+patchStrategy`, `+patchMergeKey`). Without them a CRD's lists are atomic for
//! server-side apply, so two managers editing one Deployment's containers would fight over the
//! whole list. The table below lists the Kubernetes 1.35 markers of every type reachable from the
//! generated kinds, except `+listType=atomic`: a CRD list without a list type already is atomic,
//! for server-side apply as for strategic merge patch, so spelling it out would change nothing.

use serde_json::{Map, Value, json};

/// One field's merge behaviour.
#[derive(Debug, Clone, Copy)]
enum Merge {
    /// `+listType=set`.
    Set,
    /// `+listType=set`, `+patchStrategy=merge`.
    MergedSet,
    /// `+listType=map` keyed by these fields, `+patchStrategy=merge` keyed by the first one.
    ListMap(&'static [&'static str]),
    /// Like [`Merge::ListMap`] with `+patchStrategy=merge,retainKeys`.
    MapRetainKeys(&'static [&'static str]),
    /// `+listType=map` keyed by these fields, without a patch strategy.
    MapOnly(&'static [&'static str]),
    /// `+listType=atomic` with `+patchStrategy=merge` keyed by this field (PodStatus.hostIPs).
    AtomicMergedBy(&'static str),
    /// `+mapType=atomic` on a map field, or `+structType=atomic` on the type itself (field `""`).
    AtomicMap,
    /// A patch strategy alone.
    Patch(&'static str),
}

impl Merge {
    fn extensions(self) -> Value {
        let map = |keys: &[&str], strategy: Option<&str>| {
            let mut extensions = json!({
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": keys,
            });
            if let (Some(strategy), Some(key), Value::Object(object)) =
                (strategy, keys.first(), &mut extensions)
            {
                object.insert("x-kubernetes-patch-merge-key".into(), json!(key));
                object.insert("x-kubernetes-patch-strategy".into(), json!(strategy));
            }
            extensions
        };
        match self {
            Merge::Set => json!({ "x-kubernetes-list-type": "set" }),
            Merge::MergedSet => json!({
                "x-kubernetes-list-type": "set",
                "x-kubernetes-patch-strategy": "merge",
            }),
            Merge::ListMap(keys) => map(keys, Some("merge")),
            Merge::MapRetainKeys(keys) => map(keys, Some("merge,retainKeys")),
            Merge::MapOnly(keys) => map(keys, None),
            Merge::AtomicMergedBy(key) => json!({
                "x-kubernetes-list-type": "atomic",
                "x-kubernetes-patch-merge-key": key,
                "x-kubernetes-patch-strategy": "merge",
            }),
            Merge::AtomicMap => json!({ "x-kubernetes-map-type": "atomic" }),
            Merge::Patch(strategy) => json!({ "x-kubernetes-patch-strategy": strategy }),
        }
    }
}

use Merge::{AtomicMap, AtomicMergedBy, ListMap, MapOnly, MapRetainKeys, MergedSet, Patch, Set};

/// (definition, [(property or `""` for the type itself, merge)]).
const MARKERS: &[(&str, &[(&str, Merge)])] = &[
    (
        "io.k8s.api.apps.v1.DaemonSetStatus",
        &[("conditions", ListMap(&["type"]))],
    ),
    (
        "io.k8s.api.apps.v1.DeploymentSpec",
        &[("strategy", Patch("retainKeys"))],
    ),
    (
        "io.k8s.api.apps.v1.DeploymentStatus",
        &[("conditions", ListMap(&["type"]))],
    ),
    (
        "io.k8s.api.apps.v1.ReplicaSetStatus",
        &[("conditions", ListMap(&["type"]))],
    ),
    (
        "io.k8s.api.apps.v1.StatefulSetStatus",
        &[("conditions", ListMap(&["type"]))],
    ),
    (
        "io.k8s.api.core.v1.ConfigMapKeySelector",
        &[("", AtomicMap)],
    ),
    (
        "io.k8s.api.core.v1.Container",
        &[
            ("env", ListMap(&["name"])),
            ("ports", ListMap(&["containerPort", "protocol"])),
            ("volumeDevices", ListMap(&["devicePath"])),
            ("volumeMounts", ListMap(&["mountPath"])),
        ],
    ),
    (
        "io.k8s.api.core.v1.ContainerRestartRuleOnExitCodes",
        &[("values", Set)],
    ),
    (
        "io.k8s.api.core.v1.ContainerStatus",
        &[
            ("allocatedResourcesStatus", ListMap(&["name"])),
            ("volumeMounts", ListMap(&["mountPath"])),
        ],
    ),
    ("io.k8s.api.core.v1.EndpointAddress", &[("", AtomicMap)]),
    ("io.k8s.api.core.v1.EndpointPort", &[("", AtomicMap)]),
    (
        "io.k8s.api.core.v1.EphemeralContainer",
        &[
            ("env", ListMap(&["name"])),
            ("ports", ListMap(&["containerPort", "protocol"])),
            ("volumeDevices", ListMap(&["devicePath"])),
            ("volumeMounts", ListMap(&["mountPath"])),
        ],
    ),
    ("io.k8s.api.core.v1.FileKeySelector", &[("", AtomicMap)]),
    (
        "io.k8s.api.core.v1.LocalObjectReference",
        &[("", AtomicMap)],
    ),
    ("io.k8s.api.core.v1.NodeSelector", &[("", AtomicMap)]),
    ("io.k8s.api.core.v1.NodeSelectorTerm", &[("", AtomicMap)]),
    ("io.k8s.api.core.v1.ObjectFieldSelector", &[("", AtomicMap)]),
    ("io.k8s.api.core.v1.ObjectReference", &[("", AtomicMap)]),
    (
        "io.k8s.api.core.v1.PersistentVolumeClaimStatus",
        &[("conditions", ListMap(&["type"]))],
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        &[
            ("containers", ListMap(&["name"])),
            ("ephemeralContainers", ListMap(&["name"])),
            ("hostAliases", ListMap(&["ip"])),
            ("imagePullSecrets", ListMap(&["name"])),
            ("initContainers", ListMap(&["name"])),
            ("nodeSelector", AtomicMap),
            ("resourceClaims", MapRetainKeys(&["name"])),
            ("schedulingGates", ListMap(&["name"])),
            (
                "topologySpreadConstraints",
                ListMap(&["topologyKey", "whenUnsatisfiable"]),
            ),
            ("volumes", MapRetainKeys(&["name"])),
        ],
    ),
    (
        "io.k8s.api.core.v1.PodStatus",
        &[
            ("conditions", ListMap(&["type"])),
            ("hostIPs", AtomicMergedBy("ip")),
            ("podIPs", ListMap(&["ip"])),
            ("resourceClaimStatuses", MapRetainKeys(&["name"])),
        ],
    ),
    (
        "io.k8s.api.core.v1.ResourceFieldSelector",
        &[("", AtomicMap)],
    ),
    (
        "io.k8s.api.core.v1.ResourceRequirements",
        &[("claims", MapOnly(&["name"]))],
    ),
    (
        "io.k8s.api.core.v1.ResourceStatus",
        &[("resources", MapOnly(&["resourceID"]))],
    ),
    ("io.k8s.api.core.v1.SecretKeySelector", &[("", AtomicMap)]),
    (
        "io.k8s.api.core.v1.ServiceSpec",
        &[
            ("ports", ListMap(&["port", "protocol"])),
            ("selector", AtomicMap),
        ],
    ),
    (
        "io.k8s.api.core.v1.ServiceStatus",
        &[("conditions", ListMap(&["type"]))],
    ),
    (
        "io.k8s.api.core.v1.TypedLocalObjectReference",
        &[("", AtomicMap)],
    ),
    ("io.k8s.api.discovery.v1.Endpoint", &[("addresses", Set)]),
    ("io.k8s.api.discovery.v1.EndpointPort", &[("", AtomicMap)]),
    (
        "io.k8s.api.policy.v1.PodDisruptionBudgetSpec",
        &[("selector", Patch("replace"))],
    ),
    (
        "io.k8s.api.policy.v1.PodDisruptionBudgetStatus",
        &[("conditions", ListMap(&["type"]))],
    ),
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector",
        &[("", AtomicMap)],
    ),
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
        &[
            ("finalizers", MergedSet),
            ("ownerReferences", ListMap(&["uid"])),
        ],
    ),
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.OwnerReference",
        &[("", AtomicMap)],
    ),
];

/// The value Kubernetes defaults a list-map key to when the key field is optional: a CRD's map
/// keys must be required or defaulted, and these are the defaults Kubernetes publishes
/// (`protocol` of container and service ports, `name` of `imagePullSecrets` entries).
pub(super) fn map_key_default(key: &str) -> Option<Value> {
    match key {
        "protocol" => Some(json!("TCP")),
        "name" => Some(json!("")),
        _ => None,
    }
}

/// Adds the markers to `definitions` (k8s-openapi definition name → schema) in place. Markers of
/// definitions or properties that are absent are skipped: the definitions hold only what the
/// generated kinds reach.
pub(crate) fn apply(definitions: &mut Map<String, Value>) {
    for (definition, fields) in MARKERS {
        let Some(schema) = definitions.get_mut(*definition) else {
            continue;
        };
        for (property, merge) in *fields {
            let target = if property.is_empty() {
                Some(&mut *schema)
            } else {
                schema
                    .get_mut("properties")
                    .and_then(|properties| properties.get_mut(*property))
            };
            if let (Some(Value::Object(target)), Value::Object(extensions)) =
                (target, merge.extensions())
            {
                target.extend(extensions);
            }
        }
    }
}
