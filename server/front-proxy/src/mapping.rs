//! The mapping file (`--mapping-file`): which URL prefixes go to which backend, with which CA and
//! client certificate.
//!
//! Upstream's `PathMapping` list, in YAML with snake_case keys (`path`, `backend`,
//! `backend_server_ca`, `proxy_client_cert`, `proxy_client_key`, and optionally `user_header`,
//! `group_header`, `extra_header_prefix`), as kcp-operator renders it. The entry `/clusters/` is
//! special: its requests are routed by the index to the shard holding the workspace, so its
//! `backend` is ignored while its CA and client certificate serve every shard. Every other entry
//! is a path prefix (whole segments: `/services` matches `/services` and `/services/x`, not
//! `/servicesx`) forwarded to its backend; the longest prefix wins and `/` is the default.

use std::path::{Path, PathBuf};

use http::Uri;
use serde::Deserialize;

/// The path whose requests the index routes.
pub const CLUSTERS_PATH: &str = "/clusters/";

/// One entry of the mapping file.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct PathMapping {
    /// The path prefix (`/clusters/` for workspaces).
    pub path: String,
    /// Where requests go (ignored for `/clusters/`).
    #[serde(default)]
    pub backend: String,
    /// CA bundle the backend's serving certificate is verified against.
    pub backend_server_ca: PathBuf,
    /// Client certificate presented to the backend (signed by its requestheader client CA).
    pub proxy_client_cert: PathBuf,
    /// Key of `proxy_client_cert`.
    pub proxy_client_key: PathBuf,
    /// Header carrying the user name (default `X-Remote-User`).
    #[serde(default)]
    pub user_header: Option<String>,
    /// Header carrying each group (default `X-Remote-Group`).
    #[serde(default)]
    pub group_header: Option<String>,
    /// Prefix of the headers carrying extra user information (default `X-Remote-Extra-`).
    #[serde(default)]
    pub extra_header_prefix: Option<String>,
}

impl PathMapping {
    /// True for the entry the index routes.
    pub fn is_clusters(&self) -> bool {
        self.path == CLUSTERS_PATH
    }

    /// The path without a trailing slash (`/` stays `/`): what prefixes are compared with.
    fn prefix(&self) -> &str {
        match self.path.trim_end_matches('/') {
            "" => "/",
            trimmed => trimmed,
        }
    }

    /// Whether `path` is under this entry's prefix, by whole segments.
    fn covers(&self, path: &str) -> bool {
        let prefix = self.prefix();
        prefix == "/"
            || path
                .strip_prefix(prefix)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
    }
}

/// Why the mapping file is unusable.
#[derive(Debug, thiserror::Error)]
pub enum MappingError {
    #[error("reading {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("parsing {}: {source}", path.display())]
    Parse {
        path: PathBuf,
        source: yaml_serde::Error,
    },
    #[error("the mapping file has no entries")]
    Empty,
    #[error("mapping {path:?}: the path must start with '/'")]
    RelativePath { path: String },
    #[error("mapping {path:?} appears twice")]
    Duplicate { path: String },
    #[error("mapping {path:?}: backend {backend:?} is not an http(s) URL")]
    Backend { path: String, backend: String },
    #[error("mapping {path:?}: {field} must not be empty")]
    MissingFile { path: String, field: &'static str },
}

/// Every entry of the mapping file, checked, in the order longest prefix first.
#[derive(Debug, Clone)]
pub struct Mappings {
    entries: Vec<PathMapping>,
}

impl Mappings {
    /// Reads and checks the mapping file.
    pub fn load(path: &Path) -> Result<Mappings, MappingError> {
        let text = std::fs::read_to_string(path).map_err(|source| MappingError::Read {
            path: path.to_owned(),
            source,
        })?;
        let entries: Vec<PathMapping> =
            yaml_serde::from_str(&text).map_err(|source| MappingError::Parse {
                path: path.to_owned(),
                source,
            })?;
        Mappings::new(entries)
    }

    /// Checks the entries: absolute, distinct paths, backends that are URLs (but for
    /// `/clusters/`), and the TLS files named.
    pub fn new(mut entries: Vec<PathMapping>) -> Result<Mappings, MappingError> {
        if entries.is_empty() {
            return Err(MappingError::Empty);
        }
        for entry in &entries {
            check(entry)?;
        }
        entries.sort_by_key(|entry| std::cmp::Reverse(entry.prefix().len()));
        for pair in entries.windows(2) {
            if pair[0].prefix() == pair[1].prefix() {
                return Err(MappingError::Duplicate {
                    path: pair[0].path.clone(),
                });
            }
        }
        Ok(Mappings { entries })
    }

    /// The position in [`entries`](Self::entries) of the entry a request path goes to: the
    /// longest prefix covering it.
    pub fn select(&self, path: &str) -> Option<usize> {
        self.entries.iter().position(|entry| entry.covers(path))
    }

    /// Every entry.
    pub fn entries(&self) -> &[PathMapping] {
        &self.entries
    }
}

fn check(entry: &PathMapping) -> Result<(), MappingError> {
    let path = || entry.path.clone();
    if !entry.path.starts_with('/') {
        return Err(MappingError::RelativePath { path: path() });
    }
    if !entry.is_clusters() && backend_uri(&entry.backend).is_none() {
        return Err(MappingError::Backend {
            path: path(),
            backend: entry.backend.clone(),
        });
    }
    for (field, file) in [
        ("backend_server_ca", &entry.backend_server_ca),
        ("proxy_client_cert", &entry.proxy_client_cert),
        ("proxy_client_key", &entry.proxy_client_key),
    ] {
        if file.as_os_str().is_empty() {
            return Err(MappingError::MissingFile {
                path: path(),
                field,
            });
        }
    }
    Ok(())
}

/// A backend URL: http or https with a host.
pub fn backend_uri(backend: &str) -> Option<Uri> {
    let uri: Uri = backend.parse().ok()?;
    let scheme_ok = matches!(uri.scheme_str(), Some("https" | "http"));
    (scheme_ok && uri.host().is_some()).then_some(uri)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(path: &str, backend: &str) -> PathMapping {
        PathMapping {
            path: path.into(),
            backend: backend.into(),
            backend_server_ca: "/ca.crt".into(),
            proxy_client_cert: "/tls.crt".into(),
            proxy_client_key: "/tls.key".into(),
            user_header: None,
            group_header: None,
            extra_header_prefix: None,
        }
    }

    #[test]
    fn parses_what_the_operator_renders() {
        let yaml = r#"
- path: /clusters/
  backend: https://root:6443
  backend_server_ca: /etc/kcp/tls/ca/tls.crt
  proxy_client_cert: /etc/kcp-front-proxy/requestheader-client/tls.crt
  proxy_client_key: /etc/kcp-front-proxy/requestheader-client/tls.key
- path: /services/
  backend: https://root:6443
  backend_server_ca: /etc/kcp/tls/ca/tls.crt
  proxy_client_cert: /etc/kcp-front-proxy/requestheader-client/tls.crt
  proxy_client_key: /etc/kcp-front-proxy/requestheader-client/tls.key
  user_header: X-Other-User
"#;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("mapping.yaml");
        std::fs::write(&file, yaml).unwrap();
        let mappings = Mappings::load(&file).unwrap();
        assert_eq!(mappings.entries().len(), 2);
        let entry = |path: &str| &mappings.entries()[mappings.select(path).unwrap()];
        let services = entry("/services/x/clusters/root/api");
        assert_eq!(services.user_header.as_deref(), Some("X-Other-User"));
        assert!(entry("/clusters/root/api").is_clusters());
        assert!(entry("/clusters").is_clusters());
        assert!(mappings.select("/api").is_none());
    }

    #[test]
    fn the_longest_whole_segment_prefix_wins() {
        let mappings = Mappings::new(vec![
            entry("/", "https://default"),
            entry("/services/", "https://services"),
            entry("/services/cache", "https://cache"),
            entry("/clusters/", ""),
        ])
        .unwrap();
        let backend = |path: &str| {
            let index = mappings.select(path)?;
            Some(mappings.entries()[index].backend.as_str())
        };
        assert_eq!(backend("/services/cache/x"), Some("https://cache"));
        assert_eq!(backend("/services/cache"), Some("https://cache"));
        assert_eq!(backend("/services/cachex"), Some("https://services"));
        assert_eq!(backend("/services"), Some("https://services"));
        assert_eq!(backend("/servicesx"), Some("https://default"));
        assert_eq!(backend("/clusters/root"), Some(""));
        assert_eq!(backend("/openapi/v2"), Some("https://default"));
    }

    #[test]
    fn rejects_bad_entries() {
        let bad = [
            (vec![], "no entries"),
            (vec![entry("services/", "https://x")], "must start with '/'"),
            (vec![entry("/services/", "root:6443")], "not an http(s) URL"),
            (
                vec![entry("/x", "https://a"), entry("/x/", "https://b")],
                "twice",
            ),
            (
                vec![PathMapping {
                    proxy_client_key: PathBuf::new(),
                    ..entry("/x", "https://a")
                }],
                "proxy_client_key must not be empty",
            ),
        ];
        for (entries, message) in bad {
            let error = Mappings::new(entries).unwrap_err().to_string();
            assert!(error.contains(message), "{error}");
        }
        // The index routes /clusters/: its backend may be anything.
        Mappings::new(vec![entry("/clusters/", "")]).unwrap();
    }

    #[test]
    fn an_unreadable_or_invalid_file_names_itself() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.yaml");
        assert!(
            Mappings::load(&missing)
                .unwrap_err()
                .to_string()
                .contains("missing.yaml")
        );
        let invalid = dir.path().join("invalid.yaml");
        std::fs::write(&invalid, "- path: [").unwrap();
        assert!(
            Mappings::load(&invalid)
                .unwrap_err()
                .to_string()
                .contains("invalid.yaml")
        );
    }
}
