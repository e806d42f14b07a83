//! From a connect request to the kubelet URL it goes to, with kube-apiserver's checks and
//! messages (`pkg/registry/core/pod/strategy.go`): the pod must exist (404), the container must
//! be named when the pod has several and must be one of the pod's (400), the pod must be bound
//! to a node (400 `pod <name> does not have a host assigned`; a log request for such a pod is
//! an empty log, as in kube), and the node's `InternalIP` and kubelet port are where it goes
//! (port 10250 when the Node names none, kube-apiserver's default).

use std::net::IpAddr;

use kcp_apimachinery::ApiError;
use kcp_apiserver::pod_connect::{PodConnectRequest, PodSubresource};
use kcp_registry::store::Location;
use serde_json::Value;

/// kubelet's port when a Node does not name one (kube-apiserver's `--kubelet-port` default).
const DEFAULT_KUBELET_PORT: u16 = 10250;

/// Where a connect request goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Kubelet(Kubelet),
    /// A log request for a pod on no node: an empty log.
    EmptyLog,
}

/// The kubelet of `node` at `address:port`, and the path (with query) to ask it for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kubelet {
    pub node: String,
    pub address: IpAddr,
    pub port: u16,
    pub path_and_query: String,
}

/// The container a request is for (kube's `LogLocation`/`streamLocation` rules).
fn container(pod: &Value, name: &str, asked: Option<&str>) -> Result<String, ApiError> {
    let names = |list: &str| -> Vec<String> {
        pod["spec"][list]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c["name"].as_str().map(str::to_owned))
            .collect()
    };
    let containers = names("containers");
    if let Some(asked) = asked.filter(|a| !a.is_empty()) {
        let known = containers
            .iter()
            .chain(&names("initContainers"))
            .chain(&names("ephemeralContainers"))
            .any(|c| c == asked);
        return if known {
            Ok(asked.to_owned())
        } else {
            Err(ApiError::bad_request(&format!(
                "container {asked} is not valid for pod {name}"
            )))
        };
    }
    match containers.as_slice() {
        [only] => Ok(only.clone()),
        [] => Err(ApiError::bad_request(&format!(
            "a container name must be specified for pod {name}"
        ))),
        several => {
            let mut message = format!(
                "a container name must be specified for pod {name}, choose one of: [{}]",
                several.join(" ")
            );
            let init = names("initContainers");
            if !init.is_empty() {
                message.push_str(&format!(
                    " or one of the init containers: [{}]",
                    init.join(" ")
                ));
            }
            Err(ApiError::bad_request(&message))
        }
    }
}

/// The node's kubelet address (`InternalIP`) and port.
fn kubelet_endpoint(node_name: &str, node: &Value) -> Result<(IpAddr, u16), ApiError> {
    let addresses = node["status"]["addresses"].as_array();
    let internal = addresses
        .into_iter()
        .flatten()
        .filter(|a| a["type"] == "InternalIP")
        .find_map(|a| a["address"].as_str()?.parse::<IpAddr>().ok());
    let Some(address) = internal else {
        return Err(ApiError::service_unavailable(&format!(
            "error dialing backend: node {node_name} has no InternalIP address in status.addresses"
        )));
    };
    let port = node["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"]
        .as_u64()
        .and_then(|p| u16::try_from(p).ok())
        .filter(|p| *p > 0)
        .unwrap_or(DEFAULT_KUBELET_PORT);
    Ok((address, port))
}

/// The kubelet path of a subresource.
fn kubelet_path(
    subresource: PodSubresource,
    namespace: &str,
    pod: &str,
    container: &str,
) -> String {
    match subresource {
        PodSubresource::Log => format!("/containerLogs/{namespace}/{pod}/{container}"),
        PodSubresource::Exec => format!("/exec/{namespace}/{pod}/{container}"),
        PodSubresource::Attach => format!("/attach/{namespace}/{pod}/{container}"),
        PodSubresource::PortForward => format!("/portForward/{namespace}/{pod}"),
    }
}

/// Reads the pod and its Node and decides where the request goes.
pub async fn resolve(request: &PodConnectRequest) -> Result<Target, ApiError> {
    let apis = request.store.registry().for_cluster(&request.cluster);
    let pods = apis
        .lookup("", "v1", "pods")
        .ok_or_else(kcp_apiserver::no_such_resource)?;
    let at = Location {
        cluster: &request.cluster,
        namespace: Some(&request.namespace),
    };
    let pod = request.store.get(pods, at, &request.name).await?.object;
    let query: Vec<(String, String)> =
        form_urlencoded::parse(request.query.as_deref().unwrap_or_default().as_bytes())
            .into_owned()
            .collect();
    let container = match request.subresource {
        PodSubresource::PortForward => String::new(),
        _ => {
            let asked = query
                .iter()
                .find(|(k, _)| k == "container")
                .map(|(_, v)| v.as_str());
            container(&pod, &request.name, asked)?
        }
    };
    let node_name = pod["spec"]["nodeName"].as_str().unwrap_or_default();
    if node_name.is_empty() {
        return match request.subresource {
            PodSubresource::Log => Ok(Target::EmptyLog),
            _ => Err(ApiError::bad_request(&format!(
                "pod {} does not have a host assigned",
                request.name
            ))),
        };
    }
    let nodes = apis.lookup("", "v1", "nodes").ok_or_else(|| {
        ApiError::service_unavailable(&format!(
            "error dialing backend: nodes are not served here, so node {node_name} cannot be found"
        ))
    })?;
    let cluster_scoped = Location {
        cluster: &request.cluster,
        namespace: None,
    };
    let node = request
        .store
        .get(nodes, cluster_scoped, node_name)
        .await?
        .object;
    let (address, port) = kubelet_endpoint(node_name, &node)?;
    let path = kubelet_path(
        request.subresource,
        &request.namespace,
        &request.name,
        &container,
    );
    let path_and_query = match request.query.as_deref().filter(|q| !q.is_empty()) {
        Some(query) => format!("{path}?{query}"),
        None => path,
    };
    Ok(Target::Kubelet(Kubelet {
        node: node_name.to_owned(),
        address,
        port,
        path_and_query,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(containers: &[&str], init: &[&str]) -> Value {
        let list =
            |names: &[&str]| -> Vec<Value> { names.iter().map(|n| json!({ "name": n })).collect() };
        json!({ "spec": { "containers": list(containers), "initContainers": list(init) } })
    }

    #[test]
    fn the_container_is_chosen_as_kube_does() {
        assert_eq!(container(&pod(&["app"], &[]), "p", None).unwrap(), "app");
        assert_eq!(
            container(&pod(&["a", "b"], &["i"]), "p", Some("i")).unwrap(),
            "i"
        );
        let missing = container(&pod(&["app"], &[]), "p", Some("nope")).unwrap_err();
        assert_eq!(missing.code, 400);
        assert_eq!(missing.message, "container nope is not valid for pod p");
        let ambiguous = container(&pod(&["a", "b"], &["i"]), "p", None).unwrap_err();
        assert_eq!(
            ambiguous.message,
            "a container name must be specified for pod p, choose one of: [a b] or one of the init containers: [i]"
        );
    }

    #[test]
    fn the_kubelet_endpoint_comes_from_the_node_status() {
        let node = json!({ "status": {
            "addresses": [
                { "type": "Hostname", "address": "n1" },
                { "type": "InternalIP", "address": "10.0.0.1" },
            ],
            "daemonEndpoints": { "kubeletEndpoint": { "Port": 10300 } },
        }});
        assert_eq!(
            kubelet_endpoint("n1", &node).unwrap(),
            ("10.0.0.1".parse().unwrap(), 10300)
        );
        let no_port =
            json!({ "status": { "addresses": [{ "type": "InternalIP", "address": "10.0.0.1" }] } });
        assert_eq!(kubelet_endpoint("n1", &no_port).unwrap().1, 10250);
        let no_address = json!({ "status": {} });
        assert_eq!(kubelet_endpoint("n1", &no_address).unwrap_err().code, 503);
    }

    #[test]
    fn kubelet_paths_are_kubelets() {
        assert_eq!(
            kubelet_path(PodSubresource::Log, "ns", "p", "c"),
            "/containerLogs/ns/p/c"
        );
        assert_eq!(
            kubelet_path(PodSubresource::Exec, "ns", "p", "c"),
            "/exec/ns/p/c"
        );
        assert_eq!(
            kubelet_path(PodSubresource::Attach, "ns", "p", "c"),
            "/attach/ns/p/c"
        );
        assert_eq!(
            kubelet_path(PodSubresource::PortForward, "ns", "p", ""),
            "/portForward/ns/p"
        );
    }
}
