//! The image map: which local binary runs a container of which image.
//!
//! There is no container runtime and no registry on the end-to-end host, so an image reference only
//! selects a binary. The map is keyed by repository (tag and digest are ignored: every tag of
//! `ghcr.io/kcp-rs/kcp` runs the freshly built `kcp`), gives the binary that plays the image's
//! `ENTRYPOINT`, and the binaries of the other command names the image ships (`etcdctl` beside
//! `etcd`, or `kcp-front-proxy` as another name of the multi-call `kcp`).
//!
//! ```yaml
//! ghcr.io/kcp-rs/kcp:
//!   entrypoint: <checkout>/target/debug/kcp
//!   commands: {kcp: <checkout>/target/debug/kcp, kcp-front-proxy: <checkout>/target/debug/kcp}
//! ghcr.io/kcp-rs/kcp-operator: <checkout>/target/debug/kcp-operator # entrypoint only
//! quay.io/coreos/etcd:
//!   entrypoint: /usr/bin/etcd
//!   commands: {etcd: /usr/bin/etcd, etcdctl: /usr/bin/etcdctl}
//!   args: []                                                      # the image's CMD, optional
//! ```

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// Why a container's program could not be chosen.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ImageError {
    #[error("image {0:?} is not in the node agent's image map")]
    UnknownImage(String),
    #[error(
        "command {command:?} is not provided by image {image:?} (not in its commands, not an executable absolute path)"
    )]
    UnknownCommand { image: String, command: String },
    #[error("container has no image")]
    NoImage,
}

/// Why an image map file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ImageMapError {
    #[error("not a YAML map of repositories: {0}")]
    Yaml(#[from] yaml_serde::Error),
    #[error("entry {repository:?}: {message} (expected a path, or {{entrypoint, commands, args}})")]
    Entry { repository: String, message: String },
}

/// One image in the file: the entrypoint and the other programs it provides.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
struct FullEntry {
    entrypoint: PathBuf,
    #[serde(default)]
    commands: BTreeMap<String, PathBuf>,
    #[serde(default)]
    args: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageEntry {
    pub entrypoint: PathBuf,
    pub commands: BTreeMap<String, PathBuf>,
    /// The image's default arguments (`CMD`), used when the container sets neither command nor args.
    pub args: Vec<String>,
}

/// The program to execute and the argument vector it gets (`argv[0]` as the pod spec wrote it,
/// so multi-call binaries dispatch on it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Program {
    pub path: PathBuf,
    pub argv: Vec<String>,
}

#[derive(Debug, Clone, Default)]
pub struct ImageMap {
    entries: BTreeMap<String, ImageEntry>,
}

impl ImageMap {
    /// Parses the YAML map (repository -> path or `{entrypoint, commands, args}`).
    pub fn parse(text: &str) -> Result<ImageMap, ImageMapError> {
        let files: BTreeMap<String, serde_json::Value> = yaml_serde::from_str(text)?;
        let mut entries = BTreeMap::new();
        for (repository, value) in files {
            let entry = match value {
                serde_json::Value::String(path) => ImageEntry {
                    entrypoint: PathBuf::from(path),
                    commands: BTreeMap::new(),
                    args: Vec::new(),
                },
                other => {
                    let full: FullEntry =
                        serde_json::from_value(other).map_err(|e| ImageMapError::Entry {
                            repository: repository.clone(),
                            message: e.to_string(),
                        })?;
                    ImageEntry {
                        entrypoint: full.entrypoint,
                        commands: full.commands,
                        args: full.args,
                    }
                }
            };
            entries.insert(normalize(&repository), entry);
        }
        Ok(ImageMap { entries })
    }

    /// Every mapped repository and its entry.
    pub fn entries(&self) -> impl Iterator<Item = (&String, &ImageEntry)> {
        self.entries.iter()
    }

    /// The entry of `image` (any tag or digest of a mapped repository).
    pub fn entry(&self, image: &str) -> Result<&ImageEntry, ImageError> {
        if image.is_empty() {
            return Err(ImageError::NoImage);
        }
        self.entries
            .get(&normalize(&repository(image)))
            .ok_or_else(|| ImageError::UnknownImage(image.to_owned()))
    }

    /// What runs for a container of `image` with (already expanded) `command` and `args`, with
    /// Kubernetes' rules: `command` replaces the entrypoint, `args` replace the image's CMD.
    pub fn resolve(
        &self,
        image: &str,
        command: &[String],
        args: &[String],
    ) -> Result<Program, ImageError> {
        let entry = self.entry(image)?;
        let Some(first) = command.first() else {
            let mut argv = vec![entry.entrypoint.display().to_string()];
            if args.is_empty() {
                argv.extend(entry.args.iter().cloned());
            } else {
                argv.extend(args.iter().cloned());
            }
            return Ok(Program {
                path: entry.entrypoint.clone(),
                argv,
            });
        };
        let base = Path::new(first)
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_default();
        let path = if let Some(path) = entry.commands.get(&base) {
            path.clone()
        } else if Path::new(first).is_absolute() && is_executable(Path::new(first)) {
            PathBuf::from(first)
        } else {
            return Err(ImageError::UnknownCommand {
                image: image.to_owned(),
                command: first.clone(),
            });
        };
        let mut argv: Vec<String> = command.to_vec();
        argv.extend(args.iter().cloned());
        Ok(Program { path, argv })
    }
}

fn is_executable(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The repository of an image reference: without `@digest` and without `:tag` (a `:` in the
/// registry host, as in `localhost:5000/x`, is not a tag).
pub fn repository(image: &str) -> String {
    let without_digest = image.split('@').next().unwrap_or(image);
    match without_digest.rfind(':') {
        Some(colon) if !without_digest[colon..].contains('/') => without_digest[..colon].to_owned(),
        _ => without_digest.to_owned(),
    }
}

/// Docker Hub's implicit names: `busybox` and `docker.io/library/busybox` are one repository.
fn normalize(repository: &str) -> String {
    let repository = repository.trim();
    let first = repository.split('/').next().unwrap_or_default();
    let has_registry = repository.contains('/')
        && (first.contains('.') || first.contains(':') || first == "localhost");
    let qualified = if has_registry {
        repository.to_owned()
    } else if repository.contains('/') {
        format!("docker.io/{repository}")
    } else {
        format!("docker.io/library/{repository}")
    };
    qualified
        .strip_prefix("index.docker.io/")
        .map(|rest| format!("docker.io/{rest}"))
        .unwrap_or(qualified)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAP: &str = "
ghcr.io/kcp-rs/kcp:
  entrypoint: /opt/kcp
  commands: {kcp: /opt/kcp, kcp-front-proxy: /opt/kcp}
ghcr.io/kcp-rs/kcp-operator: /opt/kcp-operator
quay.io/coreos/etcd:
  entrypoint: /usr/bin/etcd
  commands: {etcd: /usr/bin/etcd, etcdctl: /usr/bin/etcdctl}
busybox:
  entrypoint: /bin/sh
  args: [-c, 'echo hi']
";

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn repositories_ignore_tags_and_digests() {
        assert_eq!(
            repository("ghcr.io/kcp-rs/kcp:v0.1.0"),
            "ghcr.io/kcp-rs/kcp"
        );
        assert_eq!(
            repository("ghcr.io/kcp-rs/kcp@sha256:abc"),
            "ghcr.io/kcp-rs/kcp"
        );
        assert_eq!(
            repository("ghcr.io/kcp-rs/kcp:v1@sha256:abc"),
            "ghcr.io/kcp-rs/kcp"
        );
        assert_eq!(repository("localhost:5000/x"), "localhost:5000/x");
        assert_eq!(repository("localhost:5000/x:1"), "localhost:5000/x");
        assert_eq!(normalize("busybox"), "docker.io/library/busybox");
        assert_eq!(
            normalize("index.docker.io/library/busybox"),
            "docker.io/library/busybox"
        );
        assert_eq!(normalize("me/tool"), "docker.io/me/tool");
    }

    #[test]
    fn commands_and_entrypoints() {
        let map = ImageMap::parse(MAP).expect("map");
        // No command: the entrypoint, with args.
        let p = map
            .resolve("ghcr.io/kcp-rs/kcp-operator:v1", &[], &strings(&["run"]))
            .expect("operator");
        assert_eq!(p.path, PathBuf::from("/opt/kcp-operator"));
        assert_eq!(p.argv, strings(&["/opt/kcp-operator", "run"]));
        // command[0] by basename; argv[0] stays as written (multi-call binaries dispatch on it).
        let p = map
            .resolve(
                "ghcr.io/kcp-rs/kcp:v1",
                &strings(&["/kcp-front-proxy"]),
                &strings(&["--x"]),
            )
            .expect("proxy");
        assert_eq!(p.path, PathBuf::from("/opt/kcp"));
        assert_eq!(p.argv, strings(&["/kcp-front-proxy", "--x"]));
        let p = map
            .resolve(
                "quay.io/coreos/etcd:v3.5",
                &strings(&["etcdctl", "endpoint"]),
                &[],
            )
            .expect("etcdctl");
        assert_eq!(p.path, PathBuf::from("/usr/bin/etcdctl"));
        // The image's CMD when neither is given, replaced by args.
        let p = map.resolve("busybox:1.36", &[], &[]).expect("busybox");
        assert_eq!(p.argv, strings(&["/bin/sh", "-c", "echo hi"]));
        let p = map
            .resolve("docker.io/library/busybox", &[], &strings(&["-c", "true"]))
            .expect("b");
        assert_eq!(p.argv, strings(&["/bin/sh", "-c", "true"]));
        // An absolute executable outside the image's commands runs as is.
        let p = map
            .resolve("busybox", &strings(&["/bin/sh"]), &[])
            .expect("abs");
        assert_eq!(p.path, PathBuf::from("/bin/sh"));
    }

    #[test]
    fn errors_are_clear() {
        let map = ImageMap::parse(MAP).expect("map");
        assert_eq!(
            map.resolve("nginx:1", &[], &[]),
            Err(ImageError::UnknownImage("nginx:1".into()))
        );
        assert_eq!(
            map.resolve("quay.io/coreos/etcd", &strings(&["etcdutl"]), &[]),
            Err(ImageError::UnknownCommand {
                image: "quay.io/coreos/etcd".into(),
                command: "etcdutl".into()
            })
        );
        assert!(
            map.resolve("busybox", &strings(&["/no/such/binary"]), &[])
                .is_err()
        );
        assert_eq!(map.resolve("", &[], &[]), Err(ImageError::NoImage));
        let error = ImageMap::parse("x: {commands: {}}").expect_err("no entrypoint");
        assert!(error.to_string().contains("entry \"x\""), "{error}");
        assert!(ImageMap::parse("x: 1").is_err());
        assert!(ImageMap::parse("x: {entrypoint: /a, command: {}}").is_err());
    }
}
