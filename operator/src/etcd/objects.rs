//! The objects of a managed etcd: the membership ConfigMap, a headless Service, the StatefulSet
//! (one PersistentVolumeClaim per member, TLS for clients and peers) and a PodDisruptionBudget.
//!
//! Members find each other through the headless Service (`<etcd>-<n>.<etcd>.<ns>.svc.<domain>`),
//! which publishes pods before they are ready because peers must reach each other to become
//! ready at all. `--initial-cluster` and `--initial-cluster-state` come from the ConfigMap as
//! environment variables etcd reads natively: they only matter when a member starts on an empty
//! data directory, so changing them never restarts running members.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{
    StatefulSet, StatefulSetPersistentVolumeClaimRetentionPolicy, StatefulSetSpec,
};
use k8s_openapi::api::core::v1::{
    ConfigMap, ConfigMapKeySelector, Container, ContainerPort, EnvVar, EnvVarSource, HTTPGetAction,
    ObjectFieldSelector, PersistentVolumeClaim, PersistentVolumeClaimSpec, PodSpec,
    PodTemplateSpec, Probe, Service, ServicePort, ServiceSpec, VolumeMount,
    VolumeResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::naming::{self, Certificate, Names};
use crate::paths::{self, file};
use crate::render::children::Child;
use crate::render::pdb;
use crate::render::pod::{self, Mount};
use crate::validate::{ManagedEtcd, Owner};

use super::scaling::Plan;

pub const INITIAL_CLUSTER_KEY: &str = "initial-cluster";
pub const INITIAL_CLUSTER_STATE_KEY: &str = "initial-cluster-state";
const DATA_VOLUME: &str = "data";

/// Membership ConfigMap, headless Service, StatefulSet and (above one member) a PDB.
pub fn children(owner: &Owner, etcd: &ManagedEtcd, plan: &Plan, revision: &str) -> Vec<Child> {
    let names = &owner.names;
    let mut children = vec![
        Child::ConfigMap(cluster_config_map(owner, plan)),
        Child::Service(headless_service(owner)),
        Child::StatefulSet(statefulset(owner, etcd, plan.replicas, revision)),
    ];
    children.extend(
        pdb::disruption_budget(owner, names.etcd(), names.etcd_labels(), plan.replicas)
            .map(Child::PodDisruptionBudget),
    );
    children
}

/// `<etcd>-0=https://<etcd>-0...:2380,...` for the first `members` ordinals.
pub fn initial_cluster(names: &Names, members: i32) -> String {
    (0..members)
        .map(|ordinal| {
            format!(
                "{}={}",
                names.etcd_member_name(ordinal),
                names.etcd_peer_url(ordinal)
            )
        })
        .collect::<Vec<_>>()
        .join(",")
}

pub fn cluster_config_map(owner: &Owner, plan: &Plan) -> ConfigMap {
    let names = &owner.names;
    ConfigMap {
        metadata: pod::object_meta(owner, names.etcd_cluster_config_map(), names.etcd_labels()),
        data: Some(BTreeMap::from([
            (
                INITIAL_CLUSTER_KEY.to_owned(),
                initial_cluster(names, plan.initial_members),
            ),
            (
                INITIAL_CLUSTER_STATE_KEY.to_owned(),
                plan.state.as_str().to_owned(),
            ),
        ])),
        ..Default::default()
    }
}

fn tcp_port(name: &str, port: i32) -> ServicePort {
    ServicePort {
        name: Some(name.to_owned()),
        port,
        target_port: Some(IntOrString::Int(port)),
        protocol: Some("TCP".into()),
        ..Default::default()
    }
}

pub fn headless_service(owner: &Owner) -> Service {
    let names = &owner.names;
    Service {
        metadata: pod::object_meta(owner, names.etcd(), names.etcd_labels()),
        spec: Some(ServiceSpec {
            cluster_ip: Some("None".into()),
            publish_not_ready_addresses: Some(true),
            selector: Some(names.etcd_labels()),
            ports: Some(vec![
                tcp_port("client", naming::ETCD_CLIENT_PORT),
                tcp_port("peer", naming::ETCD_PEER_PORT),
            ]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn env_from_field(name: &str, path: &str) -> EnvVar {
    EnvVar {
        name: name.to_owned(),
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                field_path: path.to_owned(),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn env_from_config_map(name: &str, config_map: &str, key: &str) -> EnvVar {
    EnvVar {
        name: name.to_owned(),
        value_from: Some(EnvVarSource {
            config_map_key_ref: Some(ConfigMapKeySelector {
                name: config_map.to_owned(),
                key: key.to_owned(),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// HTTP probe on the metrics listener; `/health` there needs no client certificate.
fn health_probe(path: &str, failure_threshold: i32, period: i32) -> Probe {
    Probe {
        http_get: Some(HTTPGetAction {
            path: Some(path.to_owned()),
            port: IntOrString::Int(naming::ETCD_METRICS_PORT),
            scheme: Some("HTTP".into()),
            ..Default::default()
        }),
        failure_threshold: Some(failure_threshold),
        period_seconds: Some(period),
        timeout_seconds: Some(15),
        ..Default::default()
    }
}

fn etcd_args(names: &Names) -> Vec<String> {
    let member_host = format!("$(POD_NAME).{}", names.etcd_service_host());
    let server = |name: &str| file(paths::ETCD_SERVER_CERT_DIR, name);
    let peer = |name: &str| file(paths::ETCD_PEER_CERT_DIR, name);
    [
        ("name", "$(POD_NAME)".to_owned()),
        ("data-dir", paths::ETCD_DATA_DIR.to_owned()),
        (
            "listen-client-urls",
            format!("https://0.0.0.0:{}", naming::ETCD_CLIENT_PORT),
        ),
        (
            "advertise-client-urls",
            format!("https://{member_host}:{}", naming::ETCD_CLIENT_PORT),
        ),
        (
            "listen-peer-urls",
            format!("https://0.0.0.0:{}", naming::ETCD_PEER_PORT),
        ),
        (
            "initial-advertise-peer-urls",
            format!("https://{member_host}:{}", naming::ETCD_PEER_PORT),
        ),
        (
            "listen-metrics-urls",
            format!("http://0.0.0.0:{}", naming::ETCD_METRICS_PORT),
        ),
        ("initial-cluster-token", names.etcd()),
        ("client-cert-auth", "true".to_owned()),
        ("trusted-ca-file", server("ca.crt")),
        ("cert-file", server("tls.crt")),
        ("key-file", server("tls.key")),
        ("peer-client-cert-auth", "true".to_owned()),
        ("peer-trusted-ca-file", peer("ca.crt")),
        ("peer-cert-file", peer("tls.crt")),
        ("peer-key-file", peer("tls.key")),
        ("auto-compaction-retention", "1".to_owned()),
    ]
    .into_iter()
    .map(|(name, value)| format!("--{name}={value}"))
    .collect()
}

/// The mounted Secrets, for the pod revision: a renewed member certificate rolls the members.
pub fn mounted_secrets(names: &Names) -> Vec<Mount> {
    vec![
        Mount::secret(
            "server-cert",
            names.certificate_secret(Certificate::EtcdServer),
            paths::ETCD_SERVER_CERT_DIR,
        ),
        Mount::secret(
            "peer-cert",
            names.certificate_secret(Certificate::EtcdPeer),
            paths::ETCD_PEER_CERT_DIR,
        ),
    ]
}

pub fn statefulset(
    owner: &Owner,
    etcd: &ManagedEtcd,
    replicas: i32,
    revision: &str,
) -> StatefulSet {
    let names = &owner.names;
    let labels = names.etcd_labels();
    let mounts = mounted_secrets(names);
    let (volumes, mut volume_mounts) = pod::volumes(&mounts, &[], &[]);
    volume_mounts.push(VolumeMount {
        name: DATA_VOLUME.into(),
        mount_path: paths::ETCD_DATA_DIR.into(),
        ..Default::default()
    });
    let cluster = names.etcd_cluster_config_map();
    let container = Container {
        name: "etcd".into(),
        image: Some(etcd.image.clone()),
        command: Some(vec!["etcd".into()]),
        args: Some(etcd_args(names)),
        env: Some(vec![
            env_from_field("POD_NAME", "metadata.name"),
            env_from_config_map("ETCD_INITIAL_CLUSTER", &cluster, INITIAL_CLUSTER_KEY),
            env_from_config_map(
                "ETCD_INITIAL_CLUSTER_STATE",
                &cluster,
                INITIAL_CLUSTER_STATE_KEY,
            ),
        ]),
        ports: Some(vec![
            container_port("client", naming::ETCD_CLIENT_PORT),
            container_port("peer", naming::ETCD_PEER_PORT),
            container_port("metrics", naming::ETCD_METRICS_PORT),
        ]),
        volume_mounts: Some(volume_mounts),
        resources: etcd.resources.clone(),
        security_context: Some(pod::restricted_security_context()),
        // Serializable health answers without a leader, so losing quorum does not restart members.
        startup_probe: Some(health_probe("/health?serializable=true", 60, 5)),
        liveness_probe: Some(health_probe("/health?serializable=true", 8, 10)),
        readiness_probe: Some(health_probe("/health", 3, 10)),
        ..Default::default()
    };
    let mut template_labels = labels.clone();
    if let Some(tag) = image_tag(&etcd.image) {
        template_labels.insert(naming::LABEL_VERSION.into(), tag);
    }
    StatefulSet {
        metadata: pod::object_meta(owner, names.etcd(), labels.clone()),
        spec: Some(StatefulSetSpec {
            replicas: Some(replicas),
            service_name: Some(names.etcd()),
            // All members of a new cluster must start together: none is ready before quorum.
            pod_management_policy: Some("Parallel".into()),
            selector: LabelSelector {
                match_labels: Some(labels.clone()),
                ..Default::default()
            },
            // A removed member's volume must go: its old identity would stop a later member at
            // the same ordinal from joining. Deleting the owner keeps the data.
            persistent_volume_claim_retention_policy: Some(
                StatefulSetPersistentVolumeClaimRetentionPolicy {
                    when_scaled: Some("Delete".into()),
                    when_deleted: Some("Retain".into()),
                },
            ),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(template_labels),
                    annotations: Some(BTreeMap::from([(
                        crate::pki::revision::REVISION_ANNOTATION.to_owned(),
                        revision.to_owned(),
                    )])),
                    ..Default::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![container],
                    volumes: Some(volumes),
                    affinity: (replicas > 1).then(|| pod::spread_over_nodes(&labels)),
                    ..Default::default()
                }),
            },
            volume_claim_templates: Some(vec![data_claim(etcd)]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn container_port(name: &str, port: i32) -> ContainerPort {
    ContainerPort {
        name: Some(name.to_owned()),
        container_port: port,
        protocol: Some("TCP".into()),
        ..Default::default()
    }
}

fn data_claim(etcd: &ManagedEtcd) -> PersistentVolumeClaim {
    PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: Some(DATA_VOLUME.into()),
            ..Default::default()
        },
        spec: Some(PersistentVolumeClaimSpec {
            access_modes: Some(vec!["ReadWriteOnce".into()]),
            storage_class_name: etcd.storage_class.clone(),
            resources: Some(VolumeResourceRequirements {
                requests: Some(BTreeMap::from([(
                    "storage".to_owned(),
                    etcd.storage_size.clone(),
                )])),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The tag of an image reference, when it has one that fits a label value.
fn image_tag(image: &str) -> Option<String> {
    let name = image.rsplit('/').next().unwrap_or(image);
    if name.contains('@') {
        return None;
    }
    let (_, tag) = name.split_once(':')?;
    (tag.len() <= 63).then(|| tag.to_owned())
}
