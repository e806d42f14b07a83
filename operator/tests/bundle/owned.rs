//! What the CSV says about each owned CRD beyond what the CRD itself says: a display name, a
//! description for people browsing a catalog, the native kinds it creates, and descriptors for its
//! main spec and status fields (OLM consoles render forms and status panels from them). The rules
//! test `descriptors_name_fields_of_the_crd_schema` checks every path against the CRD schema, and
//! generation fails for a kind of `kcp_operator::crds::definitions` without an entry here (a new
//! kind, such as VirtualWorkspace, must be described before the bundle regenerates).

/// One spec or status descriptor: a dotted path under `spec`/`status`, its label, what it means,
/// and the console widgets (`x-descriptors`) that render it.
pub struct Descriptor {
    pub path: &'static str,
    pub display_name: &'static str,
    pub description: &'static str,
    pub x_descriptors: &'static [&'static str],
}

/// One owned kind.
pub struct Owned {
    pub kind: &'static str,
    pub display_name: &'static str,
    pub description: &'static str,
    /// Native kinds (`Kind`, `version`) its reconcile creates.
    pub resources: &'static [(&'static str, &'static str)],
    /// Spec descriptors, in groups (kinds share some).
    pub spec: &'static [&'static [Descriptor]],
    pub status: &'static [Descriptor],
}

const TEXT: &str = "urn:alm:descriptor:com.tectonic.ui:text";
const NUMBER: &str = "urn:alm:descriptor:com.tectonic.ui:number";
const POD_COUNT: &str = "urn:alm:descriptor:com.tectonic.ui:podCount";
const SECRET: &str = "urn:alm:descriptor:io.kubernetes:Secret";
const CONDITIONS: &str = "urn:alm:descriptor:io.kubernetes.conditions";
const PHASE: &str = "urn:alm:descriptor:io.kubernetes.phase";

const WORKLOAD: &[(&str, &str)] = &[
    ("Deployment", "v1"),
    ("Service", "v1"),
    ("Secret", "v1"),
    ("ConfigMap", "v1"),
    ("PodDisruptionBudget", "v1"),
];
const SHARD_WORKLOAD: &[(&str, &str)] = &[
    ("Deployment", "v1"),
    ("StatefulSet", "v1"),
    ("Service", "v1"),
    ("Secret", "v1"),
    ("ConfigMap", "v1"),
    ("PodDisruptionBudget", "v1"),
];

const fn field(
    path: &'static str,
    display_name: &'static str,
    description: &'static str,
    x_descriptors: &'static [&'static str],
) -> Descriptor {
    Descriptor {
        path,
        display_name,
        description,
        x_descriptors,
    }
}

const IMAGE_TAG: Descriptor = field(
    "image.tag",
    "Image tag",
    "kcp image tag; changing it upgrades the component (the operator rolls components in order)",
    &[TEXT],
);
const COMPONENT_STATUS: &[Descriptor] = &[
    field("phase", "Phase", "Lifecycle summary", &[PHASE]),
    field(
        "conditions",
        "Conditions",
        "Available, Progressing, Degraded and the checks behind them",
        &[CONDITIONS],
    ),
    field(
        "currentVersion",
        "Current version",
        "Image tag every replica runs",
        &[TEXT],
    ),
    field(
        "targetVersion",
        "Target version",
        "Image tag the spec asks for",
        &[TEXT],
    ),
];
/// What every shard (root or not) has.
const SHARD_SPEC: &[Descriptor] = &[
    field("replicas", "Replicas", "kcp server pods", &[POD_COUNT]),
    IMAGE_TAG,
    field(
        "etcd.managed.replicas",
        "Managed etcd members",
        "etcd members the operator runs (odd; scaled one member at a time)",
        &[NUMBER],
    ),
    field(
        "etcd.managed.storage.size",
        "Managed etcd volume size",
        "Size of each member's PersistentVolumeClaim",
        &[TEXT],
    ),
];

/// Every owned kind, in the order of `kcp_operator::crds::definitions`.
pub const OWNED: &[Owned] = &[
    Owned {
        kind: "RootShard",
        display_name: "Root Shard",
        description: "The kcp root shard: the root workspace, its certificate authorities and its etcd (external or managed by the operator).",
        resources: SHARD_WORKLOAD,
        spec: &[
            &[
                field(
                    "external.hostname",
                    "External hostname",
                    "Name clients outside the host cluster use to reach kcp",
                    &[TEXT],
                ),
                field(
                    "external.port",
                    "External port",
                    "Port clients outside the host cluster use",
                    &[NUMBER],
                ),
                field(
                    "cache.ref.name",
                    "Cache server",
                    "CacheServer the shard replicates into",
                    &[TEXT],
                ),
            ],
            SHARD_SPEC,
        ],
        status: COMPONENT_STATUS,
    },
    Owned {
        kind: "Shard",
        display_name: "Shard",
        description: "A further kcp shard joining a RootShard: it registers in the root workspace and takes new workspaces.",
        resources: SHARD_WORKLOAD,
        spec: &[SHARD_SPEC],
        status: COMPONENT_STATUS,
    },
    Owned {
        kind: "FrontProxy",
        display_name: "Front Proxy",
        description: "The kcp front-proxy: one endpoint for every workspace on every shard of a RootShard.",
        resources: WORKLOAD,
        spec: &[&[
            field(
                "rootShard.ref.name",
                "Root shard",
                "RootShard whose shards the proxy routes to",
                &[TEXT],
            ),
            field(
                "external.hostname",
                "External hostname",
                "Name clients use to reach the proxy",
                &[TEXT],
            ),
            field(
                "replicas",
                "Replicas",
                "front-proxy pods (more than one adds a PodDisruptionBudget)",
                &[POD_COUNT],
            ),
            IMAGE_TAG,
        ]],
        status: COMPONENT_STATUS,
    },
    Owned {
        kind: "CacheServer",
        display_name: "Cache Server",
        description: "The kcp cache server shards replicate shared objects into (APIExports, workspace types, ...).",
        resources: WORKLOAD,
        spec: &[&[
            field("replicas", "Replicas", "cache server pods", &[POD_COUNT]),
            IMAGE_TAG,
        ]],
        status: COMPONENT_STATUS,
    },
    Owned {
        kind: "Kubeconfig",
        display_name: "Kubeconfig",
        description: "A kubeconfig for a user of kcp, signed by the operator's PKI and written to a Secret, optionally with ClusterRoleBindings inside kcp.",
        resources: &[("Secret", "v1")],
        spec: &[&[
            field(
                "username",
                "User name",
                "Common name of the client certificate",
                &[TEXT],
            ),
            field(
                "secretRef.name",
                "Secret",
                "Secret the kubeconfig is written to (key `kubeconfig`)",
                &[SECRET],
            ),
            field(
                "validity",
                "Validity",
                "Lifetime of the client certificate (Go duration)",
                &[TEXT],
            ),
        ]],
        status: &[
            field("phase", "Phase", "Lifecycle summary", &[PHASE]),
            field(
                "conditions",
                "Conditions",
                "Ready and the checks behind it",
                &[CONDITIONS],
            ),
            field(
                "targetName",
                "Target",
                "RootShard, Shard or FrontProxy the kubeconfig points at",
                &[TEXT],
            ),
        ],
    },
    Owned {
        kind: "VirtualWorkspace",
        display_name: "Virtual Workspace",
        description: "A standalone virtual-workspace server for one shard (or the root shard): the shard advertises it as its virtual-workspace URL.",
        resources: WORKLOAD,
        spec: &[&[
            field(
                "target.rootShardRef.name",
                "Root shard",
                "RootShard this server serves (exclusive with the shard)",
                &[TEXT],
            ),
            field(
                "target.shardRef.name",
                "Shard",
                "Shard this server serves (exclusive with the root shard)",
                &[TEXT],
            ),
            field(
                "external.hostname",
                "External hostname",
                "Name clients use to reach the virtual workspaces",
                &[TEXT],
            ),
            field(
                "replicas",
                "Replicas",
                "virtual-workspace server pods",
                &[POD_COUNT],
            ),
            IMAGE_TAG,
        ]],
        status: COMPONENT_STATUS,
    },
];
