//! The complete set of objects a custom resource renders to, in apply order (configuration
//! before the workloads that mount it).

use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use serde::Serialize;

use crate::validate::{
    CacheServerConfig, FrontProxyConfig, Owner, ServerConfig, VirtualWorkspaceConfig,
};

use super::{config_map, deployment, kubeconfig_secret, pdb, service};

/// One rendered object.
#[derive(Clone, Debug, PartialEq)]
pub enum Child {
    Secret(Secret),
    ConfigMap(ConfigMap),
    Service(Service),
    Deployment(Deployment),
    StatefulSet(StatefulSet),
    PodDisruptionBudget(PodDisruptionBudget),
}

impl Child {
    pub fn to_value(&self) -> Result<serde_json::Value, serde_json::Error> {
        fn value(object: &impl Serialize) -> Result<serde_json::Value, serde_json::Error> {
            serde_json::to_value(object)
        }
        match self {
            Child::Secret(o) => value(o),
            Child::ConfigMap(o) => value(o),
            Child::Service(o) => value(o),
            Child::Deployment(o) => value(o),
            Child::StatefulSet(o) => value(o),
            Child::PodDisruptionBudget(o) => value(o),
        }
    }
}

/// Failure to render a child object.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Kubeconfig(#[from] kubeconfig_secret::Error),
    #[error(transparent)]
    PathMapping(#[from] config_map::Error),
}

/// Kubeconfigs, Service, Deployment and PodDisruptionBudget of a root shard or shard.
pub fn server(config: &ServerConfig, revision: &str) -> Result<Vec<Child>, Error> {
    let mut children: Vec<Child> = kubeconfig_secret::server_kubeconfigs(config)?
        .into_iter()
        .map(Child::Secret)
        .collect();
    children.push(Child::Service(service::server_service(config)));
    children.push(Child::Deployment(deployment::server_deployment(
        config, revision,
    )));
    Ok(with_disruption_budget(
        children,
        &config.owner,
        config.replicas,
    ))
}

/// Kubeconfig, path mapping, Service, Deployment and PodDisruptionBudget of a front-proxy.
pub fn front_proxy(config: &FrontProxyConfig, revision: &str) -> Result<Vec<Child>, Error> {
    let children = vec![
        Child::Secret(kubeconfig_secret::front_proxy_kubeconfig(config)?),
        Child::ConfigMap(config_map::path_mapping_config_map(config)?),
        Child::Service(service::front_proxy_service(config)),
        Child::Deployment(deployment::front_proxy_deployment(config, revision)),
    ];
    Ok(with_disruption_budget(
        children,
        &config.owner,
        config.replicas,
    ))
}

/// Client kubeconfig, Service, Deployment and PodDisruptionBudget of a cache server.
pub fn cache_server(config: &CacheServerConfig, revision: &str) -> Result<Vec<Child>, Error> {
    let children = vec![
        Child::Secret(kubeconfig_secret::cache_server_kubeconfig(config)?),
        Child::Service(service::cache_server_service(config)),
        Child::Deployment(deployment::cache_server_deployment(config, revision)),
    ];
    Ok(with_disruption_budget(
        children,
        &config.owner,
        config.replicas,
    ))
}

/// Kubeconfig, Service, Deployment and PodDisruptionBudget of a virtual-workspace server.
pub fn virtual_workspace(
    config: &VirtualWorkspaceConfig,
    revision: &str,
) -> Result<Vec<Child>, Error> {
    let children = vec![
        Child::Secret(kubeconfig_secret::virtual_workspace_kubeconfig(config)?),
        Child::Service(service::virtual_workspace_service(config)),
        Child::Deployment(deployment::virtual_workspace_deployment(config, revision)),
    ];
    Ok(with_disruption_budget(
        children,
        &config.owner,
        config.replicas,
    ))
}

/// `children` and, with more than one replica, the budget of the owner's workload.
fn with_disruption_budget(mut children: Vec<Child>, owner: &Owner, replicas: i32) -> Vec<Child> {
    let names = &owner.names;
    children.extend(
        pdb::disruption_budget(owner, names.workload(), names.labels(), replicas)
            .map(Child::PodDisruptionBudget),
    );
    children
}
