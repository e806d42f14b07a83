//! Pieces every rendered pod shares: mounts, metadata, security context, probes, user
//! templates and the default anti-affinity for more than one replica.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, Capabilities, ConfigMapVolumeSource, EmptyDirVolumeSource, HTTPGetAction,
    PodAffinityTerm, PodAntiAffinity, PodSpec, Probe, SeccompProfile, SecretVolumeSource,
    SecurityContext, Volume, VolumeMount, WeightedPodAffinityTerm,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::api::common::{DeploymentTemplate, TemplateMetadata};
use crate::naming::{self, Names};
use crate::pki::revision::REVISION_ANNOTATION;
use crate::validate::Owner;

/// What a volume is filled from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    Secret(String),
    ConfigMap(String),
    EmptyDir,
}

/// One volume and where container 0 sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mount {
    pub volume: String,
    pub source: Source,
    pub path: String,
}

impl Mount {
    pub fn secret(volume: &str, secret: impl Into<String>, path: &str) -> Self {
        Self {
            volume: volume.to_owned(),
            source: Source::Secret(secret.into()),
            path: path.to_owned(),
        }
    }

    pub fn config_map(volume: &str, config_map: impl Into<String>, path: &str) -> Self {
        Self {
            volume: volume.to_owned(),
            source: Source::ConfigMap(config_map.into()),
            path: path.to_owned(),
        }
    }

    pub fn empty_dir(volume: &str, path: &str) -> Self {
        Self {
            volume: volume.to_owned(),
            source: Source::EmptyDir,
            path: path.to_owned(),
        }
    }

    /// Secret and ConfigMap names that feed the pod, for the content revision.
    pub fn source_name(&self) -> Option<&str> {
        match &self.source {
            Source::Secret(name) | Source::ConfigMap(name) => Some(name),
            Source::EmptyDir => None,
        }
    }
}

/// Arguments and mounts one feature contributes to a container.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Fragment {
    pub args: Vec<String>,
    pub mounts: Vec<Mount>,
}

impl Fragment {
    pub fn extend(&mut self, other: Fragment) {
        self.args.extend(other.args);
        self.mounts.extend(other.mounts);
    }
}

/// Volumes and read-only mounts for `mounts`, plus the user's extra volumes.
pub fn volumes(
    mounts: &[Mount],
    extra_volumes: &[Volume],
    extra_mounts: &[VolumeMount],
) -> (Vec<Volume>, Vec<VolumeMount>) {
    let mut volumes: Vec<Volume> = mounts
        .iter()
        .map(|mount| {
            let mut volume = Volume {
                name: mount.volume.clone(),
                ..Volume::default()
            };
            match &mount.source {
                Source::Secret(name) => {
                    volume.secret = Some(SecretVolumeSource {
                        secret_name: Some(name.clone()),
                        ..Default::default()
                    })
                }
                Source::ConfigMap(name) => {
                    volume.config_map = Some(ConfigMapVolumeSource {
                        name: name.clone(),
                        ..Default::default()
                    })
                }
                Source::EmptyDir => volume.empty_dir = Some(EmptyDirVolumeSource::default()),
            }
            volume
        })
        .collect();
    let mut volume_mounts: Vec<VolumeMount> = mounts
        .iter()
        .map(|mount| VolumeMount {
            name: mount.volume.clone(),
            mount_path: mount.path.clone(),
            // `readOnly: false` is Go's zero value: a real server drops it, so rendering it
            // would make every reconcile see a change.
            read_only: (mount.source != Source::EmptyDir).then_some(true),
            ..Default::default()
        })
        .collect();
    volumes.extend(extra_volumes.iter().cloned());
    volume_mounts.extend(extra_mounts.iter().cloned());
    (volumes, volume_mounts)
}

/// Metadata of an object owned by a custom resource.
pub fn object_meta(owner: &Owner, name: String, labels: BTreeMap<String, String>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name),
        namespace: Some(owner.names.namespace.clone()),
        labels: Some(labels),
        owner_references: Some(vec![owner.reference.clone()]),
        ..ObjectMeta::default()
    }
}

/// Non-root, read-only root filesystem, no capabilities, runtime-default seccomp.
pub fn restricted_security_context() -> SecurityContext {
    SecurityContext {
        allow_privilege_escalation: Some(false),
        read_only_root_filesystem: Some(true),
        capabilities: Some(Capabilities {
            drop: Some(vec!["ALL".into()]),
            ..Default::default()
        }),
        seccomp_profile: Some(SeccompProfile {
            type_: "RuntimeDefault".into(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// HTTPS GET probe on the named port.
pub fn https_probe(path: &str, failure_threshold: i32, initial_delay: i32, period: i32) -> Probe {
    Probe {
        http_get: Some(HTTPGetAction {
            path: Some(path.to_owned()),
            port: IntOrString::String(naming::KCP_PORT_NAME.into()),
            scheme: Some("HTTPS".into()),
            ..Default::default()
        }),
        failure_threshold: Some(failure_threshold),
        initial_delay_seconds: Some(initial_delay),
        period_seconds: Some(period),
        timeout_seconds: Some(10),
        ..Default::default()
    }
}

/// Prefer spreading replicas over nodes; upstream leaves them free to share one node.
pub fn spread_over_nodes(selector_labels: &BTreeMap<String, String>) -> Affinity {
    Affinity {
        pod_anti_affinity: Some(PodAntiAffinity {
            preferred_during_scheduling_ignored_during_execution: Some(vec![
                WeightedPodAffinityTerm {
                    weight: 100,
                    pod_affinity_term: PodAffinityTerm {
                        label_selector: Some(LabelSelector {
                            match_labels: Some(selector_labels.clone()),
                            ..Default::default()
                        }),
                        topology_key: "kubernetes.io/hostname".into(),
                        ..Default::default()
                    },
                },
            ]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Pod-template metadata: selector labels, the content revision that rolls pods, user additions.
pub fn pod_template_meta(
    selector_labels: &BTreeMap<String, String>,
    version: &str,
    revision: &str,
    template: Option<&DeploymentTemplate>,
) -> ObjectMeta {
    let mut labels = selector_labels.clone();
    labels.insert(naming::LABEL_VERSION.into(), version.to_owned());
    let mut annotations = BTreeMap::from([(REVISION_ANNOTATION.to_owned(), revision.to_owned())]);
    if let Some(user) = template
        .and_then(|t| t.spec.as_ref())
        .and_then(|s| s.template.as_ref())
        .and_then(|t| t.metadata.as_ref())
    {
        merge_metadata(&mut labels, &mut annotations, user);
    }
    ObjectMeta {
        labels: Some(labels),
        annotations: Some(annotations),
        ..Default::default()
    }
}

/// User labels and annotations never replace the operator's own keys.
pub fn merge_metadata(
    labels: &mut BTreeMap<String, String>,
    annotations: &mut BTreeMap<String, String>,
    user: &TemplateMetadata,
) {
    for (key, value) in &user.labels {
        labels.entry(key.clone()).or_insert_with(|| value.clone());
    }
    for (key, value) in &user.annotations {
        annotations
            .entry(key.clone())
            .or_insert_with(|| value.clone());
    }
}

/// Applies the scheduling fields of `deploymentTemplate` that are set, keeping everything else.
pub fn apply_pod_template(pod: &mut PodSpec, template: Option<&DeploymentTemplate>) {
    let Some(user) = template
        .and_then(|t| t.spec.as_ref())
        .and_then(|s| s.template.as_ref())
        .and_then(|t| t.spec.as_ref())
    else {
        return;
    };
    if let Some(node_selector) = &user.node_selector {
        pod.node_selector = Some(node_selector.clone());
    }
    if let Some(affinity) = &user.affinity {
        pod.affinity = Some(affinity.clone());
    }
    if let Some(tolerations) = &user.tolerations {
        pod.tolerations = Some(tolerations.clone());
    }
    if let Some(host_aliases) = &user.host_aliases {
        pod.host_aliases = Some(host_aliases.clone());
    }
    if let Some(secrets) = &user.image_pull_secrets {
        pod.image_pull_secrets
            .get_or_insert_with(Vec::new)
            .extend(secrets.iter().cloned());
    }
    if let Some(constraints) = &user.topology_spread_constraints {
        pod.topology_spread_constraints = Some(constraints.clone());
    }
}

/// Object labels: selector labels plus the user's (which never override ours).
pub fn object_labels(
    names_labels: BTreeMap<String, String>,
    template: Option<&TemplateMetadata>,
) -> BTreeMap<String, String> {
    let mut labels = names_labels;
    if let Some(user) = template {
        for (key, value) in &user.labels {
            labels.entry(key.clone()).or_insert_with(|| value.clone());
        }
    }
    labels
}

/// Selector labels of a workload.
pub fn selector(names: &Names) -> LabelSelector {
    LabelSelector {
        match_labels: Some(names.labels()),
        ..Default::default()
    }
}
