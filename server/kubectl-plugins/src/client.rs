//! A minimal Kubernetes API client for the few kcp endpoints the plugins call.
//!
//! Upstream builds a kcp cluster clientset from the kubeconfig and strips the server URL's
//! path (`newKCPClusterClient`), addressing each workspace as `<scheme://host>/clusters/<path>`.
//! This client does the same with reqwest, taking TLS and credentials from the kubeconfig
//! stanzas (`tls-server-name` included, as client-go) so it works against upstream kcp and
//! kcp-rs alike.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};

use kcp_kubeconfig::KubeconfigError;
use reqwest::{Method, StatusCode};
use serde_json::{Map, Value};

use crate::error::{ApiError, Error};
use crate::kubeconfig::Selected;
use crate::path::{ClusterPath, split_origin};

const TENANCY: &str = "apis/tenancy.kcp.io/v1alpha1";

/// Command-line overrides of the kubeconfig's connection settings (kubectl's flags).
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    pub token: Option<String>,
    pub certificate_authority: Option<PathBuf>,
    pub insecure_skip_tls_verify: bool,
}

#[derive(Debug, Clone)]
enum Auth {
    None,
    Bearer(String),
    Basic(String, String),
}

/// Talks to `scheme://host` of the selected cluster's server.
#[derive(Debug, Clone)]
pub struct ApiClient {
    http: reqwest::Client,
    origin: String,
    auth: Auth,
}

/// Certificate material of the kubeconfig: inline base64 data, else a file relative to `dir`.
fn material(read: Result<Option<Vec<u8>>, KubeconfigError>) -> Result<Option<Vec<u8>>, Error> {
    read.map_err(|error| match error {
        KubeconfigError::Base64 { field, source } => {
            Error::msg(format!("decoding {field}: {source}"))
        }
        KubeconfigError::Read { path, source } => Error::io(path, source),
        other => Error::msg(other.to_string()),
    })
}

fn read_relative(file: &Path, dir: &Path) -> Result<Vec<u8>, Error> {
    let path = if file.is_absolute() {
        file.to_path_buf()
    } else {
        dir.join(file)
    };
    std::fs::read(&path).map_err(|e| Error::io(path, e))
}

/// A kubeconfig's `tls-server-name`, as client-go honours it: the server certificate is
/// verified for (and SNI names) that name while the connection goes to the server URL's address.
/// reqwest takes its TLS name from the URL, so the origin is rewritten to the name and the name
/// resolves to the original address. `None` when there is no such name or it is the URL's host.
fn tls_server_name_origin(
    origin: &str,
    tls_server_name: Option<&str>,
) -> Result<Option<(String, String, SocketAddr)>, Error> {
    let Some(name) = tls_server_name.filter(|name| !name.is_empty()) else {
        return Ok(None);
    };
    let (scheme, authority) = origin
        .split_once("://")
        .ok_or_else(|| Error::msg(format!("invalid server URL {origin:?}")))?;
    let (host, port) = match authority.rsplit_once(':') {
        Some((host, port)) if !port.contains(']') => (
            host,
            port.parse::<u16>()
                .map_err(|_| Error::msg(format!("invalid port in server URL {origin:?}")))?,
        ),
        _ => (authority, if scheme == "http" { 80 } else { 443 }),
    };
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    if bare == name {
        return Ok(None);
    }
    let address = (bare, port)
        .to_socket_addrs()
        .map_err(|e| Error::msg(format!("resolving {bare}: {e}")))?
        .next()
        .ok_or_else(|| Error::msg(format!("{bare} has no address")))?;
    Ok(Some((
        format!("{scheme}://{name}:{port}"),
        name.to_owned(),
        address,
    )))
}

impl ApiClient {
    /// Builds the client for the selected context; relative files resolve against `dir`.
    pub fn new(selected: &Selected, dir: &Path, overrides: &Overrides) -> Result<Self, Error> {
        let (origin, _) = split_origin(selected.server())?;
        let cluster = &selected.cluster;
        let user = &selected.user;

        let mut builder = reqwest::Client::builder()
            .user_agent(concat!("kubectl-ws/v", env!("CARGO_PKG_VERSION")))
            .use_rustls_tls();
        let mut origin = origin.to_owned();
        if let Some((renamed, name, address)) =
            tls_server_name_origin(&origin, cluster.tls_server_name.as_deref())?
        {
            builder = builder.resolve(&name, address);
            origin = renamed;
        }

        let insecure = overrides.insecure_skip_tls_verify || cluster.insecure_skip_tls_verify;
        if insecure {
            builder = builder.danger_accept_invalid_certs(true);
        } else {
            let ca = match &overrides.certificate_authority {
                Some(file) => Some(read_relative(file, Path::new("."))?),
                None => material(cluster.ca_pem(dir))?,
            };
            if let Some(ca) = ca {
                // like client-go, a configured CA replaces the system roots
                builder = builder.tls_built_in_root_certs(false);
                for cert in reqwest::Certificate::from_pem_bundle(&ca)
                    .map_err(|e| Error::msg(format!("unable to load root certificates: {e}")))?
                {
                    builder = builder.add_root_certificate(cert);
                }
            }
        }

        let cert = material(user.client_certificate_pem(dir))?;
        let key = material(user.client_key_pem(dir))?;
        match (cert, key) {
            (Some(mut pem), Some(key)) => {
                pem.push(b'\n');
                pem.extend_from_slice(&key);
                let identity = reqwest::Identity::from_pem(&pem)
                    .map_err(|e| Error::msg(format!("loading client certificate: {e}")))?;
                builder = builder.identity(identity);
            }
            (None, None) => {}
            _ => {
                return Err(Error::msg(
                    "client-certificate and client-key must be specified together",
                ));
            }
        }

        let field = |value: &Option<String>| value.clone().unwrap_or_default();
        let token_file = field(&user.token_file);
        let auth = if let Some(token) = overrides.token.as_deref().filter(|t| !t.is_empty()) {
            Auth::Bearer(token.to_owned())
        } else if !token_file.is_empty() {
            // client-go: a tokenFile wins over an inline token
            let bytes = read_relative(Path::new(&token_file), dir)?;
            Auth::Bearer(String::from_utf8_lossy(&bytes).trim().to_owned())
        } else if !field(&user.token).is_empty() {
            Auth::Bearer(field(&user.token))
        } else if !field(&user.username).is_empty() {
            Auth::Basic(field(&user.username), field(&user.password))
        } else {
            Auth::None
        };

        Ok(Self {
            http: builder.build()?,
            origin,
            auth,
        })
    }

    async fn request(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Value, Error> {
        let content_type = if method == Method::PATCH {
            "application/merge-patch+json"
        } else {
            "application/json"
        };
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.origin))
            .header(reqwest::header::ACCEPT, "application/json");
        request = match &self.auth {
            Auth::None => request,
            Auth::Bearer(token) => request.bearer_auth(token),
            Auth::Basic(user, password) => request.basic_auth(user, Some(password)),
        };
        if let Some(body) = body {
            request = request
                .header(reqwest::header::CONTENT_TYPE, content_type)
                .body(body.to_string());
        }
        let response = request.send().await?;
        let status = response.status();
        let bytes = response.bytes().await?;
        if status.is_success() {
            return serde_json::from_slice(&bytes)
                .map_err(|e| Error::msg(format!("decoding response of {path}: {e}")));
        }
        Err(api_error(status, &bytes).into())
    }

    pub async fn get(&self, path: &str) -> Result<Value, Error> {
        self.request(Method::GET, path, None).await
    }

    pub async fn post(&self, path: &str, body: &Value) -> Result<Value, Error> {
        self.request(Method::POST, path, Some(body)).await
    }

    /// A JSON merge patch (`application/merge-patch+json`).
    pub async fn merge_patch(&self, path: &str, patch: &Value) -> Result<Value, Error> {
        self.request(Method::PATCH, path, Some(patch)).await
    }

    /// client-go `ServerPreferredResources` narrowed to one resource: the group's preferred
    /// version if it serves `resource`, else the first listed version that does.
    pub async fn preferred_version(
        &self,
        cluster: &ClusterPath,
        group: &str,
        resource: &str,
    ) -> Result<String, Error> {
        let base = cluster.request_path();
        let groups = self.get(&format!("{base}/apis")).await?;
        let entry = groups
            .get("groups")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .find(|g| g.get("name").and_then(Value::as_str) == Some(group));
        let version_of = |v: &Value| {
            v.get("version")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        let preferred = entry
            .and_then(|g| g.get("preferredVersion"))
            .map(version_of)
            .unwrap_or_default();
        let versions: Vec<String> = entry
            .and_then(|g| g.get("versions"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(version_of)
            .collect();
        let mut serving = Vec::new();
        for version in versions {
            let list = self.get(&format!("{base}/apis/{group}/{version}")).await?;
            let serves = items_of(&list, "resources")
                .iter()
                .any(|r| r.get("name").and_then(Value::as_str) == Some(resource));
            if serves {
                serving.push(version);
            }
        }
        match serving.iter().find(|v| **v == preferred) {
            Some(version) => Ok(version.clone()),
            None => serving
                .into_iter()
                .next()
                .ok_or_else(|| Error::msg(format!("server does not serve {resource}.{group}"))),
        }
    }

    pub async fn get_workspace(&self, cluster: &ClusterPath, name: &str) -> Result<Value, Error> {
        let path = format!("{}/{TENANCY}/workspaces/{name}", cluster.request_path());
        self.get(&path).await
    }

    pub async fn list_workspaces(&self, cluster: &ClusterPath) -> Result<Vec<Value>, Error> {
        let path = format!("{}/{TENANCY}/workspaces", cluster.request_path());
        Ok(items(self.get(&path).await?))
    }

    pub async fn create_workspace(
        &self,
        cluster: &ClusterPath,
        workspace: &Value,
    ) -> Result<Value, Error> {
        let path = format!("{}/{TENANCY}/workspaces", cluster.request_path());
        self.request(Method::POST, &path, Some(workspace)).await
    }

    /// The `cluster` LogicalCluster singleton of a workspace (for `tree --wide`).
    pub async fn get_logical_cluster(&self, cluster: &ClusterPath) -> Result<Value, Error> {
        let path = format!(
            "{}/apis/core.kcp.io/v1alpha1/logicalclusters/cluster",
            cluster.request_path()
        );
        self.get(&path).await
    }

    pub async fn list_apibindings(&self, cluster: &ClusterPath) -> Result<Vec<Value>, Error> {
        let path = format!(
            "{}/apis/apis.kcp.io/v1alpha2/apibindings",
            cluster.request_path()
        );
        Ok(items(self.get(&path).await?))
    }

    /// client-go `ServerGroups`: `/api` (a 404 is tolerated) plus `/apis`; the number of groups.
    pub async fn discovery_group_count(&self, cluster: &ClusterPath) -> Result<usize, Error> {
        let base = cluster.request_path();
        let legacy = match self.get(&format!("{base}/api")).await {
            Ok(versions) => usize::from(
                versions
                    .get("versions")
                    .and_then(Value::as_array)
                    .is_some_and(|v| !v.is_empty()),
            ),
            Err(Error::Api(e)) if e.is_not_found() => 0,
            Err(e) => return Err(e),
        };
        let groups = self.get(&format!("{base}/apis")).await?;
        let count = groups
            .get("groups")
            .and_then(Value::as_array)
            .map_or(0, Vec::len);
        Ok(legacy + count)
    }
}

/// The array under `key` of a JSON object, empty when absent.
fn items_of<'a>(object: &'a Value, key: &str) -> &'a [Value] {
    object
        .get(key)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

pub fn items(list: Value) -> Vec<Value> {
    match list {
        Value::Object(mut map) => match map.remove("items") {
            Some(Value::Array(items)) => items,
            _ => Vec::new(),
        },
        _ => Vec::new(),
    }
}

/// A `Status` body as-is, otherwise client-go's generic message for the HTTP code.
pub fn api_error(status: StatusCode, body: &[u8]) -> ApiError {
    if let Ok(Value::Object(map)) = serde_json::from_slice::<Value>(body)
        && map.get("kind").and_then(Value::as_str) == Some("Status")
    {
        return ApiError {
            code: map
                .get("code")
                .and_then(Value::as_u64)
                .and_then(|c| u16::try_from(c).ok())
                .unwrap_or(status.as_u16()),
            reason: str_field(&map, "reason").to_owned(),
            message: str_field(&map, "message").to_owned(),
        };
    }
    let text = String::from_utf8_lossy(body).trim().to_owned();
    let (reason, message) = match status.as_u16() {
        400 => ("BadRequest", "the server rejected our request for an unknown reason".to_owned()),
        401 => ("Unauthorized", "the server has asked for the client to provide credentials".to_owned()),
        403 => ("Forbidden", "the server does not allow access to the requested resource".to_owned()),
        404 => ("NotFound", "the server could not find the requested resource".to_owned()),
        405 => ("MethodNotAllowed", "the server does not allow this method on the requested resource".to_owned()),
        409 => ("Conflict", "the server reported a conflict".to_owned()),
        422 => ("Invalid", "the server rejected our request due to an error in our request".to_owned()),
        429 => ("TooManyRequests", "the server has received too many requests and has asked us to try again later".to_owned()),
        503 => ("ServiceUnavailable", "the server is currently unable to handle the request".to_owned()),
        504 => ("Timeout", "the server was unable to return a response in the time allotted, but may still be processing the request".to_owned()),
        500 => ("InternalError", format!("an error on the server ({text:?}) has prevented the request from succeeding")),
        _ => ("", format!("an error on the server ({text:?}) has prevented the request from succeeding")),
    };
    ApiError {
        code: status.as_u16(),
        reason: reason.to_owned(),
        message,
    }
}

/// A string field of a JSON object, empty when absent.
fn str_field<'a>(map: &'a Map<String, Value>, key: &str) -> &'a str {
    map.get(key).and_then(Value::as_str).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_bodies_keep_reason_and_message() {
        let body = br#"{"kind":"Status","status":"Failure","reason":"NotFound","code":404,
            "message":"workspaces.tenancy.kcp.io \"x\" not found"}"#;
        let err = api_error(StatusCode::NOT_FOUND, body);
        assert!(err.is_not_found());
        assert_eq!(err.message, "workspaces.tenancy.kcp.io \"x\" not found");
    }

    #[test]
    fn tls_server_name_keeps_the_address_and_names_the_certificate() {
        let (origin, name, address) = tls_server_name_origin(
            "https://10.214.3.7:6443",
            Some("proxy.kcp.svc.cluster.local"),
        )
        .expect("valid")
        .expect("renamed");
        assert_eq!(origin, "https://proxy.kcp.svc.cluster.local:6443");
        assert_eq!(name, "proxy.kcp.svc.cluster.local");
        assert_eq!(address, "10.214.3.7:6443".parse().expect("address"));
        let (_, _, address) = tls_server_name_origin("https://[::1]", Some("kcp.example"))
            .expect("valid")
            .expect("renamed");
        assert_eq!(address, "[::1]:443".parse().expect("address"));
        for unchanged in [None, Some(""), Some("10.0.0.1")] {
            assert!(
                tls_server_name_origin("https://10.0.0.1:6443", unchanged)
                    .expect("valid")
                    .is_none(),
                "{unchanged:?}"
            );
        }
    }

    #[test]
    fn other_bodies_get_client_go_messages() {
        let err = api_error(StatusCode::FORBIDDEN, b"nope");
        assert!(err.is_forbidden());
        assert_eq!(err.reason, "Forbidden");
        let err = api_error(StatusCode::BAD_GATEWAY, b"upstream down");
        assert_eq!(err.reason, "");
        assert!(err.message.contains("upstream down"));
    }
}
