//! The `kube-system/extension-apiserver-authentication` ConfigMap: how a server authenticates its
//! clients (its client CA, and the request-header CA, header names and allowed names of the
//! proxies it believes), published for the servers that delegate authentication to it, as
//! kube-apiserver's cluster-authentication-trust controller (which upstream kcp's shards run)
//! publishes it.
//!
//! `kcp start` writes it at startup into the `system:admin` logical cluster, where upstream's
//! shards keep what their cluster-less clients read ([`publish`]). `kcp virtual-workspaces
//! --authentication-skip-lookup=false` reads it through `--authentication-kubeconfig` ([`lookup`])
//! and takes from it what its own flags do not give, as k8s.io/apiserver's
//! `DelegatingAuthenticationOptions` does in its in-cluster lookup: the client CA when
//! `--client-ca-file` is not set, the request-header settings when
//! `--requestheader-client-ca-file` is not set.

use kcp_apimachinery::ApiError;
use kcp_authn::RequestHeaderConfig;
use kcp_registry::LogicalClusterName;
use kcp_registry::store::{Location, RestStore};
use serde_json::{Value, json};

/// The ConfigMap's namespace and name.
pub const NAMESPACE: &str = "kube-system";
pub const NAME: &str = "extension-apiserver-authentication";
/// The logical cluster it is published in.
pub const CLUSTER: &str = kcp_rbac::bootstrap::BOOTSTRAP_CLUSTER;

const CLIENT_CA: &str = "client-ca-file";
const REQUESTHEADER_CA: &str = "requestheader-client-ca-file";
const USERNAME_HEADERS: &str = "requestheader-username-headers";
const GROUP_HEADERS: &str = "requestheader-group-headers";
const EXTRA_HEADERS_PREFIX: &str = "requestheader-extra-headers-prefix";
const ALLOWED_NAMES: &str = "requestheader-allowed-names";
const UID_HEADERS: &str = "requestheader-uid-headers";

/// What a server publishes of its authentication.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuthenticationInfo {
    pub client_ca_pem: Option<String>,
    pub request_header: Option<RequestHeaderConfig>,
}

impl AuthenticationInfo {
    /// The ConfigMap's `data`: the CAs as PEM, the lists as JSON arrays (kube's format).
    pub fn data(&self) -> Value {
        let mut data = serde_json::Map::new();
        if let Some(pem) = &self.client_ca_pem {
            data.insert(CLIENT_CA.into(), json!(pem));
        }
        if let Some(header) = &self.request_header {
            let list = |items: &[String]| json!(json!(items).to_string());
            data.insert(REQUESTHEADER_CA.into(), json!(header.ca_pem));
            data.insert(USERNAME_HEADERS.into(), list(&header.username_headers));
            data.insert(GROUP_HEADERS.into(), list(&header.group_headers));
            data.insert(
                EXTRA_HEADERS_PREFIX.into(),
                list(&header.extra_headers_prefixes),
            );
            data.insert(ALLOWED_NAMES.into(), list(&header.allowed_names));
            data.insert(UID_HEADERS.into(), list(&header.uid_headers));
        }
        Value::Object(data)
    }

    /// What a ConfigMap's `data` says (an empty CA is no CA; a list that is not a JSON array of
    /// strings is empty).
    pub fn of_data(data: &Value) -> AuthenticationInfo {
        let text = |key: &str| {
            data.get(key)
                .and_then(Value::as_str)
                .filter(|text| !text.trim().is_empty())
                .map(str::to_owned)
        };
        let list = |key: &str| -> Vec<String> {
            text(key)
                .and_then(|text| serde_json::from_str(&text).ok())
                .unwrap_or_default()
        };
        AuthenticationInfo {
            client_ca_pem: text(CLIENT_CA),
            request_header: text(REQUESTHEADER_CA).map(|ca_pem| RequestHeaderConfig {
                ca_pem,
                allowed_names: list(ALLOWED_NAMES),
                username_headers: list(USERNAME_HEADERS),
                group_headers: list(GROUP_HEADERS),
                extra_headers_prefixes: list(EXTRA_HEADERS_PREFIX),
                uid_headers: list(UID_HEADERS),
            }),
        }
    }
}

/// Writes `info` into the ConfigMap in `system:admin` (creating its namespace and it, or
/// replacing its data).
pub async fn publish(store: &RestStore, info: &AuthenticationInfo) -> Result<(), ApiError> {
    let cluster = LogicalClusterName::parse(CLUSTER)
        .ok_or_else(|| ApiError::internal_error("invalid system:admin cluster name"))?;
    let registry = store.registry();
    let (Some(namespaces), Some(configmaps)) = (
        registry.builtin_type("", "v1", "namespaces"),
        registry.builtin_type("", "v1", "configmaps"),
    ) else {
        return Err(ApiError::internal_error(
            "namespaces and configmaps are not registered",
        ));
    };
    let namespace =
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}});
    let cluster_scope = Location {
        cluster: &cluster,
        namespace: None,
    };
    match store
        .create(&namespaces, cluster_scope, namespace, false)
        .await
    {
        Ok(_) => {}
        Err(error) if error.code == 409 => {}
        Err(error) => return Err(error),
    }
    let at = Location {
        cluster: &cluster,
        namespace: Some(NAMESPACE),
    };
    let data = info.data();
    let configmap = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": NAME, "namespace": NAMESPACE},
        "data": data,
    });
    match store.create(&configmaps, at, configmap, false).await {
        Ok(_) => return Ok(()),
        Err(error) if error.code == 409 => {}
        Err(error) => return Err(error),
    }
    let replace = move |current: &Value| {
        let mut updated = current.clone();
        updated["data"] = data.clone();
        Ok(updated)
    };
    store
        .update(&configmaps, at, NAME, &replace, None, false)
        .await?;
    Ok(())
}

/// Why the published configuration could not be read.
#[derive(Debug, thiserror::Error)]
pub enum LookupError {
    #[error("reading {NAMESPACE}/{NAME} in {CLUSTER}: {0}")]
    Transport(#[from] reqwest::Error),
    #[error("reading {NAMESPACE}/{NAME} in {CLUSTER}: the server answered {0}")]
    Status(reqwest::StatusCode),
}

/// Reads the ConfigMap from the server `client` reaches at `base_url`; a server that publishes
/// none has nothing to say (upstream ignores a missing ConfigMap too).
pub async fn lookup(
    client: &reqwest::Client,
    base_url: &str,
) -> Result<AuthenticationInfo, LookupError> {
    let url = format!(
        "{}/clusters/{CLUSTER}/api/v1/namespaces/{NAMESPACE}/configmaps/{NAME}",
        base_url.trim_end_matches('/')
    );
    let answer = client.get(url).send().await?;
    match answer.status() {
        reqwest::StatusCode::NOT_FOUND => Ok(AuthenticationInfo::default()),
        status if status.is_success() => {
            let configmap: Value = answer.json().await?;
            Ok(AuthenticationInfo::of_data(&configmap["data"]))
        }
        status => Err(LookupError::Status(status)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_data_reads_back_as_written() {
        let info = AuthenticationInfo {
            client_ca_pem: Some("client CA".into()),
            request_header: Some(RequestHeaderConfig {
                ca_pem: "proxy CA".into(),
                allowed_names: vec!["kcp-front-proxy".into()],
                username_headers: vec!["X-Remote-User".into()],
                group_headers: vec!["X-Remote-Group".into()],
                extra_headers_prefixes: vec!["X-Remote-Extra-".into()],
                uid_headers: Vec::new(),
            }),
        };
        let data = info.data();
        assert_eq!(
            data["requestheader-username-headers"],
            "[\"X-Remote-User\"]"
        );
        assert_eq!(AuthenticationInfo::of_data(&data), info);
    }

    #[test]
    fn missing_or_empty_cas_are_no_cas() {
        let info = AuthenticationInfo::of_data(&json!({
            "client-ca-file": "  ",
            "requestheader-username-headers": "[\"X-Remote-User\"]",
        }));
        assert_eq!(info, AuthenticationInfo::default());
        let info = AuthenticationInfo::of_data(&json!({
            "requestheader-client-ca-file": "proxy CA",
            "requestheader-group-headers": "not json",
        }));
        let header = info.request_header.unwrap();
        assert!(header.group_headers.is_empty());
        assert!(info.client_ca_pem.is_none());
    }
}
