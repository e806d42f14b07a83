//! The kubeconfig file (client-go's `clientcmd/api/v1` `Config`), as kcp's programs read and
//! write it.
//!
//! `kcp start` writes an admin kubeconfig, the kubectl plugins rewrite the user's contexts the way
//! upstream `kubectl ws` does, `kcp-bench` reads the server and credentials it loads from one, and
//! the operator renders kubeconfig Secrets for the components it deploys. They share this model
//! and these helpers, and each keeps only what is its own (which contexts, which bookkeeping,
//! which rules about servers). The model follows client-go's field names and kubectl's reading
//! rules: entries are looked up by name, an empty file is an empty config, relative file
//! references resolve against the kubeconfig's directory, embedded `*-data` wins over a file.
//! Fields not modelled here (`preferences`, `extensions`, `exec`, ...) are kept in `other`, so a
//! file read and written back keeps them, as kubectl does.

#[cfg(feature = "https")]
pub mod https;

use std::path::{Path, PathBuf};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

/// Why a kubeconfig could not be read, written or used.
#[derive(Debug, thiserror::Error)]
pub enum KubeconfigError {
    #[error("reading {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("writing {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("parsing the kubeconfig: {0}")]
    Parse(#[source] yaml_serde::Error),
    #[error("rendering the kubeconfig: {0}")]
    Render(#[source] yaml_serde::Error),
    #[error("{field} is not valid base64: {source}")]
    Base64 {
        field: &'static str,
        source: base64::DecodeError,
    },
}

/// Why [`Kubeconfig::select`] found no context to use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectError {
    #[error("no context was named and the kubeconfig has no current-context")]
    NoContext,
    #[error("context {0:?} is not in the kubeconfig")]
    UnknownContext(String),
    #[error("cluster {0:?} is not in the kubeconfig")]
    UnknownCluster(String),
}

/// A kubeconfig document. Field order is the order written.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Kubeconfig {
    #[serde(
        rename = "apiVersion",
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "String::is_empty"
    )]
    pub api_version: String,
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "String::is_empty"
    )]
    pub kind: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub clusters: Vec<NamedCluster>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub users: Vec<NamedUser>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub contexts: Vec<NamedContext>,
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "String::is_empty"
    )]
    pub current_context: String,
    /// Everything else (`preferences`, `extensions`), kept as read.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// A `clusters` entry.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NamedCluster {
    pub name: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub cluster: Cluster,
}

/// Where a server is and how to trust it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Cluster {
    #[serde(default, deserialize_with = "null_as_default")]
    pub server: String,
    /// A CA file, relative to the kubeconfig's directory unless absolute.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certificate_authority: Option<String>,
    /// The CA PEM, base64.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certificate_authority_data: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub insecure_skip_tls_verify: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_server_name: Option<String>,
    /// Everything else (`proxy-url`, `extensions`, ...), kept as read.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// A `users` entry.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NamedUser {
    pub name: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub user: User,
}

/// Who the client is (client-go's `AuthInfo`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct User {
    /// A client certificate file, relative to the kubeconfig's directory unless absolute.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_certificate: Option<String>,
    /// The client certificate PEM, base64.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_certificate_data: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_key_data: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// client-go spells this one in camel case.
    #[serde(rename = "tokenFile", default, skip_serializing_if = "Option::is_none")]
    pub token_file: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,
    /// Everything else (`exec`, `auth-provider`, `as`, ...), kept as read.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// A `contexts` entry.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NamedContext {
    pub name: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub context: Context,
}

/// Which cluster with which user (and namespace).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Context {
    #[serde(default, deserialize_with = "null_as_default")]
    pub cluster: String,
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "String::is_empty"
    )]
    pub user: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Everything else (`extensions`), kept as read.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// A context with its cluster and user, resolved by [`Kubeconfig::select`].
#[derive(Debug, Clone, PartialEq)]
pub struct Selected {
    pub context_name: String,
    pub context: Context,
    pub cluster_name: String,
    pub cluster: Cluster,
    /// The context's user; empty when the context names none or one the file lacks (kubectl
    /// then connects without credentials).
    pub user: User,
}

impl Selected {
    pub fn server(&self) -> &str {
        &self.cluster.server
    }
}

impl Kubeconfig {
    /// An empty `v1` `Config`.
    pub fn new() -> Self {
        Kubeconfig {
            api_version: "v1".to_owned(),
            kind: "Config".to_owned(),
            ..Kubeconfig::default()
        }
    }

    /// Parses kubeconfig YAML; an empty document is an empty config, as kubectl reads it.
    pub fn from_yaml(text: &str) -> Result<Self, KubeconfigError> {
        yaml_serde::from_str::<Option<Kubeconfig>>(text)
            .map(Option::unwrap_or_default)
            .map_err(KubeconfigError::Parse)
    }

    /// Reads and parses the file at `path`.
    pub fn read(path: &Path) -> Result<Self, KubeconfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| KubeconfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::from_yaml(&text)
    }

    pub fn to_yaml(&self) -> Result<String, KubeconfigError> {
        yaml_serde::to_string(self).map_err(KubeconfigError::Render)
    }

    /// Writes to `path` in place: truncating an existing file keeps its owner and permissions.
    /// (A kubeconfig that embeds a private key is better written like a private key.)
    pub fn write(&self, path: &Path) -> Result<(), KubeconfigError> {
        std::fs::write(path, self.to_yaml()?).map_err(|source| KubeconfigError::Write {
            path: path.to_owned(),
            source,
        })
    }

    pub fn cluster(&self, name: &str) -> Option<&Cluster> {
        self.clusters
            .iter()
            .find(|entry| entry.name == name)
            .map(|entry| &entry.cluster)
    }

    pub fn user(&self, name: &str) -> Option<&User> {
        self.users
            .iter()
            .find(|entry| entry.name == name)
            .map(|entry| &entry.user)
    }

    pub fn context(&self, name: &str) -> Option<&Context> {
        self.contexts
            .iter()
            .find(|entry| entry.name == name)
            .map(|entry| &entry.context)
    }

    /// Replaces the named cluster, or appends it.
    pub fn set_cluster(&mut self, name: &str, cluster: Cluster) {
        match self.clusters.iter_mut().find(|entry| entry.name == name) {
            Some(entry) => entry.cluster = cluster,
            None => self.clusters.push(NamedCluster {
                name: name.to_owned(),
                cluster,
            }),
        }
    }

    /// Replaces the named user, or appends it.
    pub fn set_user(&mut self, name: &str, user: User) {
        match self.users.iter_mut().find(|entry| entry.name == name) {
            Some(entry) => entry.user = user,
            None => self.users.push(NamedUser {
                name: name.to_owned(),
                user,
            }),
        }
    }

    /// Replaces the named context, or appends it.
    pub fn set_context(&mut self, name: &str, context: Context) {
        match self.contexts.iter_mut().find(|entry| entry.name == name) {
            Some(entry) => entry.context = context,
            None => self.contexts.push(NamedContext {
                name: name.to_owned(),
                context,
            }),
        }
    }

    /// The context named `context` (default: the current context) with its cluster and user.
    pub fn select(&self, context: Option<&str>) -> Result<Selected, SelectError> {
        let context_name = context.unwrap_or(&self.current_context);
        if context_name.is_empty() {
            return Err(SelectError::NoContext);
        }
        let context = self
            .context(context_name)
            .ok_or_else(|| SelectError::UnknownContext(context_name.to_owned()))?;
        let cluster = self
            .cluster(&context.cluster)
            .ok_or_else(|| SelectError::UnknownCluster(context.cluster.clone()))?;
        Ok(Selected {
            context_name: context_name.to_owned(),
            context: context.clone(),
            cluster_name: context.cluster.clone(),
            cluster: cluster.clone(),
            user: self.user(&context.user).cloned().unwrap_or_default(),
        })
    }
}

impl Cluster {
    /// The CA PEM: embedded, or read from its file (relative to `dir`).
    pub fn ca_pem(&self, dir: &Path) -> Result<Option<Vec<u8>>, KubeconfigError> {
        material(
            "certificate-authority-data",
            self.certificate_authority_data.as_deref(),
            self.certificate_authority.as_deref(),
            dir,
        )
    }
}

impl User {
    /// The client certificate PEM: embedded, or read from its file (relative to `dir`).
    pub fn client_certificate_pem(&self, dir: &Path) -> Result<Option<Vec<u8>>, KubeconfigError> {
        material(
            "client-certificate-data",
            self.client_certificate_data.as_deref(),
            self.client_certificate.as_deref(),
            dir,
        )
    }

    /// The client key PEM: embedded, or read from its file (relative to `dir`).
    pub fn client_key_pem(&self, dir: &Path) -> Result<Option<Vec<u8>>, KubeconfigError> {
        material(
            "client-key-data",
            self.client_key_data.as_deref(),
            self.client_key.as_deref(),
            dir,
        )
    }
}

/// The directory relative file references in the kubeconfig at `path` resolve against.
pub fn dir_of(path: &Path) -> &Path {
    path.parent().unwrap_or(Path::new("."))
}

/// Which file kubectl uses: `--kubeconfig`, else the first entry of `KUBECONFIG`, else
/// `~/.kube/config`; `None` without any of them.
pub fn locate(explicit: Option<&Path>, env: Option<&str>, home: Option<&Path>) -> Option<PathBuf> {
    if let Some(path) = explicit.filter(|p| !p.as_os_str().is_empty()) {
        return Some(path.to_path_buf());
    }
    if let Some(first) = env.and_then(|list| list.split(':').find(|entry| !entry.is_empty())) {
        return Some(PathBuf::from(first));
    }
    home.map(|h| h.join(".kube").join("config"))
}

/// Certificate material as kubectl reads it: the embedded base64 `data` (`field` names it in
/// errors) if set, else the `file` (relative to `dir` unless absolute), else `None`.
pub fn material(
    field: &'static str,
    data: Option<&str>,
    file: Option<&str>,
    dir: &Path,
) -> Result<Option<Vec<u8>>, KubeconfigError> {
    if let Some(data) = data.filter(|d| !d.is_empty()) {
        return STANDARD
            .decode(data.trim())
            .map(Some)
            .map_err(|source| KubeconfigError::Base64 { field, source });
    }
    match file.filter(|f| !f.is_empty()) {
        Some(file) => {
            let path = dir.join(file);
            std::fs::read(&path)
                .map(Some)
                .map_err(|source| KubeconfigError::Read { path, source })
        }
        None => Ok(None),
    }
}

/// `null` read as the type's default (kubectl writes `clusters: null` into empty configs).
fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

#[cfg(test)]
mod tests;
