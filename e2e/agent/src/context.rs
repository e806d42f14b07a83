//! What every part of the agent shares: settings from the command line, the host API client, the
//! watch caches, and the signal that wakes the reconcile loop.

use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim, Pod, Secret, Service};
use kube::runtime::reflector::{ObjectRef, Store};
use tokio::sync::Notify;

use crate::container_input::ContainerInputs;
use crate::env::Objects;
use crate::events::Events;
use crate::images::ImageMap;
use crate::network::Network;

/// Settings fixed for the agent's lifetime.
pub struct Settings {
    /// This binary (containers start as `<agent_exe> exec --spec FILE`).
    pub agent_exe: PathBuf,
    pub state_dir: PathBuf,
    pub images: ImageMap,
    pub network: Network,
    pub node_name: String,
    /// The bridge address: the pods' gateway and `status.hostIP`.
    pub host_ip: Ipv4Addr,
    pub api_host: Ipv4Addr,
    pub api_port: u16,
    pub ca_pem: Vec<u8>,
    pub cluster_domain: String,
    pub max_backoff: Duration,
}

impl Settings {
    /// `<state>/pods/<ns>_<pod>`: logs, hosts file, volumes of one pod.
    pub fn pod_dir(&self, namespace: &str, name: &str) -> PathBuf {
        self.state_dir
            .join("pods")
            .join(format!("{namespace}_{name}"))
    }

    /// `<state>/volumes`: one directory per PersistentVolumeClaim (`<ns>_<claim>_<uid>`).
    pub fn claims_dir(&self) -> PathBuf {
        self.state_dir.join("volumes")
    }
}

/// The watch caches (reflector stores) of the host objects the agent reads.
#[derive(Clone)]
pub struct Cache {
    pub deployments: Store<Deployment>,
    pub statefulsets: Store<StatefulSet>,
    pub services: Store<Service>,
    pub pods: Store<Pod>,
    pub secrets: Store<Secret>,
    pub config_maps: Store<ConfigMap>,
    pub claims: Store<PersistentVolumeClaim>,
}

impl Objects for Cache {
    fn secret(
        &self,
        namespace: &str,
        name: &str,
    ) -> Option<std::collections::BTreeMap<String, Vec<u8>>> {
        let secret = self.secrets.get(&ObjectRef::new(name).within(namespace))?;
        let mut data: std::collections::BTreeMap<String, Vec<u8>> = secret
            .string_data
            .iter()
            .flatten()
            .map(|(k, v)| (k.clone(), v.clone().into_bytes()))
            .collect();
        data.extend(
            secret
                .data
                .iter()
                .flatten()
                .map(|(k, v)| (k.clone(), v.0.clone())),
        );
        Some(data)
    }

    fn config_map(
        &self,
        namespace: &str,
        name: &str,
    ) -> Option<std::collections::BTreeMap<String, String>> {
        let cm = self
            .config_maps
            .get(&ObjectRef::new(name).within(namespace))?;
        Some(cm.data.clone().unwrap_or_default())
    }

    fn config_map_binary(
        &self,
        namespace: &str,
        name: &str,
    ) -> std::collections::BTreeMap<String, Vec<u8>> {
        self.config_maps
            .get(&ObjectRef::new(name).within(namespace))
            .and_then(|cm| cm.binary_data.clone())
            .map(|data| data.into_iter().map(|(k, v)| (k, v.0)).collect())
            .unwrap_or_default()
    }
}

pub struct Ctx {
    pub settings: Settings,
    pub client: kube::Client,
    pub cache: Cache,
    /// Wakes the reconcile loop (a pod's state changed).
    pub wake: Arc<Notify>,
    pub events: Events,
    pub probe_http: reqwest::Client,
    /// The open stdin and terminals of running containers, for attach.
    pub container_inputs: ContainerInputs,
}
