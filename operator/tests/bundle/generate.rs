//! Generates the bundle of this workspace version from the code, the way operator-sdk would lay
//! it out (`manifests/` with the ClusterServiceVersion and the CRDs, `metadata/annotations.yaml`,
//! and a `bundle.Dockerfile` whose labels repeat the annotations):
//!
//! - the CRDs are `kcp_operator::crds::definitions()` (byte-identical to `crds/`);
//! - the permissions are `kcp_operator::rbac::cluster_rules()` / `namespace_rules()` (derived
//!   from the controllers' source) for the ServiceAccount the Deployment runs as;
//! - the Deployment is the Helm chart's, rendered with its default values (one source for both
//!   installs), with the two Helm-only things taken out: the Helm labels, and
//!   `--leader-election-namespace=<release namespace>`, since OLM picks the namespace and the
//!   operator then takes it from `POD_NAMESPACE` (the downward API, already in the chart);
//! - the owned-CRD descriptions come from `owned`, the examples from `examples`, the icon from
//!   `bundles/kcp-operator/icon.svg`;
//! - `replaces` names the newest older version kept under `bundles/kcp-operator/`.

use std::collections::BTreeMap;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use kcp_operator::{crds, rbac};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::owned::{Descriptor, OWNED};
use super::{CHANNEL, CSV_FILE, PACKAGE, VERSION, chart_deployment, csv_name, kept_versions};

/// Where the images are published from (as `e2e/images` labels them).
const SOURCE_URL: &str = "https://github.com/kcp-rs/kcp-rs";
/// CRD validation rules (`x-kubernetes-validations`) are GA and on in every cluster from 1.29.
const MIN_KUBE_VERSION: &str = "1.29.0";
/// Deployments, Services, Secrets, ConfigMaps, StatefulSets and PDBs for everything it manages,
/// in-order upgrades and certificate rotation: level 2 of the capability model.
const CAPABILITIES: &str = "Seamless Upgrades";
/// Labels the chart puts on its objects that are Helm's business only.
const HELM_LABELS: &[&str] = &["helm.sh/chart", "app.kubernetes.io/managed-by"];
/// The flag naming the release namespace; under OLM the operator reads `POD_NAMESPACE` instead.
const NAMESPACE_FLAG: &str = "--leader-election-namespace=";

/// The annotations of `metadata/annotations.yaml`, which are also the bundle image's labels.
pub fn annotations() -> Vec<(&'static str, String)> {
    vec![
        (
            "operators.operatorframework.io.bundle.mediatype.v1",
            "registry+v1".into(),
        ),
        (
            "operators.operatorframework.io.bundle.manifests.v1",
            "manifests/".into(),
        ),
        (
            "operators.operatorframework.io.bundle.metadata.v1",
            "metadata/".into(),
        ),
        (
            "operators.operatorframework.io.bundle.package.v1",
            PACKAGE.into(),
        ),
        (
            "operators.operatorframework.io.bundle.channels.v1",
            CHANNEL.into(),
        ),
        (
            "operators.operatorframework.io.bundle.channel.default.v1",
            CHANNEL.into(),
        ),
    ]
}

/// Every file of the bundle, by path relative to `bundles/kcp-operator/<version>/`.
pub fn files() -> BTreeMap<String, String> {
    let mut files = BTreeMap::new();
    for crd in crds::definitions() {
        let text = crds::render(&crd).expect("CRD renders");
        files.insert(format!("manifests/{}", crds::file_name(&crd)), text);
    }
    files.insert(
        format!("manifests/{CSV_FILE}"),
        yaml_serde::to_string(&csv()).expect("CSV renders"),
    );
    let annotations: Map<String, Value> = annotations()
        .into_iter()
        .map(|(key, value)| (key.to_owned(), Value::from(value)))
        .collect();
    files.insert(
        "metadata/annotations.yaml".into(),
        yaml_serde::to_string(&json!({ "annotations": annotations })).expect("renders"),
    );
    files.insert("bundle.Dockerfile".into(), dockerfile());
    files
}

fn dockerfile() -> String {
    let labels: String = annotations()
        .into_iter()
        .map(|(key, value)| format!("LABEL {key}={value}\n"))
        .collect();
    format!("FROM scratch\n\n{labels}\nCOPY manifests /manifests/\nCOPY metadata /metadata/\n")
}

/// The chart's Deployment as a CSV `install.spec.deployments` entry.
pub fn deployment() -> Value {
    let mut deployment = chart_deployment();
    for pointer in ["/metadata/labels", "/spec/template/metadata/labels"] {
        let labels = deployment
            .pointer_mut(pointer)
            .and_then(Value::as_object_mut)
            .expect("labels");
        for label in HELM_LABELS {
            labels.remove(*label);
        }
    }
    for container in deployment["spec"]["template"]["spec"]["containers"]
        .as_array_mut()
        .expect("containers")
    {
        container["args"]
            .as_array_mut()
            .expect("args")
            .retain(|arg| {
                !arg.as_str()
                    .is_some_and(|arg| arg.starts_with(NAMESPACE_FLAG))
            });
    }
    json!({
        "name": deployment["metadata"]["name"],
        "label": deployment["metadata"]["labels"],
        "spec": deployment["spec"],
    })
}

fn descriptors(descriptors: &[&Descriptor]) -> Value {
    descriptors
        .iter()
        .map(|descriptor| {
            json!({
                "path": descriptor.path,
                "displayName": descriptor.display_name,
                "description": descriptor.description,
                "x-descriptors": descriptor.x_descriptors,
            })
        })
        .collect()
}

fn owned() -> Value {
    crds::definitions()
        .into_iter()
        .map(|crd| {
            let kind = crd.spec.names.kind.clone();
            let owned = OWNED
                .iter()
                .find(|owned| owned.kind == kind)
                .unwrap_or_else(|| panic!("kind {kind} has no entry in tests/bundle/owned.rs"));
            let version = crd
                .spec
                .versions
                .iter()
                .find(|version| version.storage)
                .expect("a storage version");
            json!({
                "name": crd.metadata.name,
                "version": version.name,
                "kind": kind,
                "displayName": owned.display_name,
                "description": owned.description,
                "resources": owned.resources.iter().map(|(kind, version)| {
                    json!({ "kind": kind, "name": "", "version": version })
                }).collect::<Vec<_>>(),
                "specDescriptors": descriptors(&owned.spec.iter().copied().flatten().collect::<Vec<_>>()),
                "statusDescriptors": descriptors(&owned.status.iter().collect::<Vec<_>>()),
            })
        })
        .collect()
}

fn examples() -> Vec<Value> {
    yaml_serde::Deserializer::from_str(super::examples::EXAMPLES)
        .map(|document| Value::deserialize(document).expect("example parses"))
        .collect()
}

fn icon() -> String {
    let svg =
        std::fs::read(super::bundles().join("icon.svg")).expect("bundles/kcp-operator/icon.svg");
    STANDARD.encode(svg)
}

/// The newest kept version older than this one, if any.
fn replaces() -> Option<String> {
    let own = semver::Version::parse(VERSION).expect("workspace version is semver");
    kept_versions()
        .into_iter()
        .filter(|version| *version < own)
        .max()
        .map(|version| csv_name(&version.to_string()))
}

fn permissions(account: &str, rules: Vec<k8s_openapi::api::rbac::v1::PolicyRule>) -> Value {
    json!([{ "serviceAccountName": account, "rules": rules }])
}

/// The ClusterServiceVersion.
pub fn csv() -> Value {
    let deployment = deployment();
    let pod = &deployment["spec"]["template"]["spec"];
    let account = pod["serviceAccountName"]
        .as_str()
        .expect("serviceAccountName");
    let image = pod["containers"][0]["image"].clone();
    let examples = serde_json::to_string_pretty(&examples()).expect("examples serialise");
    let mut spec = json!({
        "displayName": "kcp operator",
        "description": "Runs [kcp](https://www.kcp.io), the multi-tenant Kubernetes control plane, on a \
    Kubernetes cluster: create a `RootShard` (plus `Shard`, `FrontProxy`, `CacheServer` and `Kubeconfig` \
    objects) and the operator deploys and operates kcp with its own PKI (no cert-manager needed), \
    managed or external etcd, ordered upgrades and certificate rotation.\n\n\
    This is the operator of kcp-rs, kcp rebuilt in Rust; its API (`operator.kcp.io/v1alpha1`) keeps \
    upstream kcp-operator's field names.",
        "version": VERSION,
        "maturity": "alpha",
        "minKubeVersion": MIN_KUBE_VERSION,
        "provider": { "name": "kcp-rs", "url": SOURCE_URL },
        "maintainers": [{ "name": "kcp-rs maintainers" }],
        "links": [
            { "name": "Source", "url": SOURCE_URL },
            { "name": "Documentation", "url": format!("{SOURCE_URL}/tree/main/docs") },
            { "name": "Upstream kcp", "url": "https://www.kcp.io" },
        ],
        "keywords": ["kcp", "control plane", "multi-tenancy", "workspaces", "kubernetes"],
        "icon": [{ "base64data": icon(), "mediatype": "image/svg+xml" }],
        "installModes": [
            { "type": "OwnNamespace", "supported": false },
            { "type": "SingleNamespace", "supported": false },
            { "type": "MultiNamespace", "supported": false },
            { "type": "AllNamespaces", "supported": true },
        ],
        "customresourcedefinitions": { "owned": owned() },
        "install": {
            "strategy": "deployment",
            "spec": {
                "clusterPermissions": permissions(account, rbac::cluster_rules()),
                "permissions": permissions(account, rbac::namespace_rules()),
                "deployments": [deployment],
            },
        },
    });
    if let Some(replaces) = replaces() {
        spec["replaces"] = Value::from(replaces);
    }
    json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "ClusterServiceVersion",
        "metadata": {
            "name": csv_name(VERSION),
            "annotations": {
                "alm-examples": examples,
                "capabilities": CAPABILITIES,
                "categories": "Developer Tools,Integration & Delivery",
                "containerImage": image,
                "description": "Runs kcp (RootShard, Shard, FrontProxy, CacheServer, Kubeconfig) with its own PKI",
                "repository": SOURCE_URL,
                "support": "kcp-rs",
                "operatorframework.io/suggested-namespace": "kcp-operator",
            },
        },
        "spec": spec,
    })
}
