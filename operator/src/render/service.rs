//! Services in front of the component Deployments.

use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::api::common::ServiceTemplate;
use crate::naming;
use crate::validate::{
    CacheServerConfig, FrontProxyConfig, Owner, ServerConfig, VirtualWorkspaceConfig,
};

use super::pod;

fn https_port(name: &str, port: i32, target: i32) -> ServicePort {
    ServicePort {
        name: Some(name.to_owned()),
        port,
        target_port: Some(IntOrString::Int(target)),
        protocol: Some("TCP".into()),
        app_protocol: Some("https".into()),
        ..Default::default()
    }
}

fn service(owner: &Owner, ports: Vec<ServicePort>, template: Option<&ServiceTemplate>) -> Service {
    let labels = owner.names.labels();
    let mut metadata = pod::object_meta(
        owner,
        owner.names.workload(),
        pod::object_labels(labels.clone(), None),
    );
    if let Some(user) = template.and_then(|t| t.metadata.as_ref()) {
        let mut annotations = std::collections::BTreeMap::new();
        pod::merge_metadata(
            metadata.labels.get_or_insert_with(Default::default),
            &mut annotations,
            user,
        );
        metadata.annotations = (!annotations.is_empty()).then_some(annotations);
    }
    let user_spec = template.and_then(|t| t.spec.as_ref());
    Service {
        metadata,
        spec: Some(ServiceSpec {
            type_: Some(
                user_spec
                    .and_then(|s| s.type_.clone())
                    .unwrap_or_else(|| "ClusterIP".into()),
            ),
            cluster_ip: user_spec.and_then(|s| s.cluster_ip.clone()),
            selector: Some(labels),
            ports: Some(ports),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// kcp API port, plus the in-process virtual workspaces port.
pub fn server_service(config: &ServerConfig) -> Service {
    let ports = vec![
        https_port(naming::KCP_PORT_NAME, naming::KCP_PORT, naming::KCP_PORT),
        https_port(
            naming::VIRTUAL_WORKSPACES_PORT_NAME,
            naming::VIRTUAL_WORKSPACES_PORT,
            naming::VIRTUAL_WORKSPACES_PORT,
        ),
    ];
    service(&config.owner, ports, config.spec.service_template.as_ref())
}

/// Listens on the external port so a LoadBalancer exposes kcp at the advertised address.
pub fn front_proxy_service(config: &FrontProxyConfig) -> Service {
    let ports = vec![https_port(
        naming::KCP_PORT_NAME,
        config.external_port,
        naming::KCP_PORT,
    )];
    service(&config.owner, ports, config.spec.service_template.as_ref())
}

/// One HTTPS port, the kcp port on both sides.
fn kcp_port() -> Vec<ServicePort> {
    vec![https_port(
        naming::KCP_PORT_NAME,
        naming::KCP_PORT,
        naming::KCP_PORT,
    )]
}

pub fn cache_server_service(config: &CacheServerConfig) -> Service {
    service(
        &config.owner,
        kcp_port(),
        config.spec.service_template.as_ref(),
    )
}

/// The virtual-workspace server listens on the kcp port, as upstream's.
pub fn virtual_workspace_service(config: &VirtualWorkspaceConfig) -> Service {
    service(
        &config.owner,
        kcp_port(),
        config.spec.service_template.as_ref(),
    )
}
