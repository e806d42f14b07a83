//! A pod's volumes as host directories, and the bind mounts that put them at container paths.
//!
//! Secret, ConfigMap, downwardAPI and projected volumes (and the automounted service account) are
//! written with kubelet's atomic-writer layout: the files live in a timestamped directory
//! `..<time>`, `..data` points at it, and each visible name is a symlink through `..data`. An
//! update writes a new directory and swaps `..data` with one rename, so a container never sees a
//! half-written certificate, and updates reach running containers (except through `subPath`,
//! exactly as in Kubernetes). `emptyDir` lives in the pod directory and goes with the pod;
//! `persistentVolumeClaim` is a directory keyed by namespace, claim and UID under the state directory
//! and outlives pods; `hostPath` is the host path itself.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};

use k8s_openapi::api::core::v1::{
    ConfigMapProjection, Container, DownwardAPIVolumeFile, KeyToPath, Pod, SecretProjection, Volume,
};

use crate::env::Objects;
use crate::error::{Error, Result, io};
use crate::exec::BindMount;
use crate::expand::expand;
use crate::fieldref::{self, PodFacts};
use crate::token::{DEFAULT_EXPIRATION_SECONDS, Tokens};

/// Where the service account's token, CA and namespace appear in every container.
pub const SERVICE_ACCOUNT_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// Files of a written volume: relative path -> (content, mode).
pub type Payload = BTreeMap<String, (Vec<u8>, u32)>;

const DATA_LINK: &str = "..data";

/// Reads the payload a volume directory currently shows.
fn current_payload(dir: &Path) -> Option<Payload> {
    let target = std::fs::read_link(dir.join(DATA_LINK)).ok()?;
    let root = dir.join(target);
    let mut payload = Payload::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(relative) = stack.pop() {
        for entry in std::fs::read_dir(root.join(&relative)).ok()? {
            let entry = entry.ok()?;
            let path = relative.join(entry.file_name());
            let meta = entry.metadata().ok()?;
            if meta.is_dir() {
                stack.push(path);
            } else {
                let content = std::fs::read(entry.path()).ok()?;
                payload.insert(
                    path.to_string_lossy().into_owned(),
                    (content, meta.permissions().mode() & 0o7777),
                );
            }
        }
    }
    Some(payload)
}

/// Checks a payload path: relative, no `..`, not starting with `..`.
fn valid_path(path: &str) -> bool {
    !path.is_empty()
        && !path.starts_with("..")
        && Path::new(path)
            .components()
            .all(|c| matches!(c, Component::Normal(_)))
}

/// Makes `dir` show exactly `payload`, atomically; returns whether anything changed.
pub fn write_atomic(dir: &Path, payload: &Payload) -> Result<bool> {
    if let Some(bad) = payload.keys().find(|p| !valid_path(p)) {
        return Err(Error::Pod(format!("invalid volume file path {bad:?}")));
    }
    if current_payload(dir).as_ref() == Some(payload) {
        return Ok(false);
    }
    std::fs::create_dir_all(dir).map_err(io(format!("creating {}", dir.display())))?;
    let stamp = format!(
        "..{}.{}",
        jiff::Timestamp::now().strftime("%Y_%m_%d_%H_%M_%S"),
        crate::names::random_suffix()
    );
    let staging = dir.join(&stamp);
    std::fs::create_dir(&staging).map_err(io(format!("creating {}", staging.display())))?;
    for (path, (content, mode)) in payload {
        let file = staging.join(path);
        if let Some(parent) = file.parent() {
            std::fs::create_dir_all(parent)
                .map_err(io(format!("creating {}", parent.display())))?;
        }
        std::fs::write(&file, content).map_err(io(format!("writing {}", file.display())))?;
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(*mode))
            .map_err(io(format!("chmod {}", file.display())))?;
    }
    let old = std::fs::read_link(dir.join(DATA_LINK)).ok();
    let tmp_link = dir.join("..data_tmp");
    let _ = std::fs::remove_file(&tmp_link);
    std::os::unix::fs::symlink(&stamp, &tmp_link)
        .map_err(io(format!("linking {}", tmp_link.display())))?;
    std::fs::rename(&tmp_link, dir.join(DATA_LINK))
        .map_err(io(format!("swapping {}/..data", dir.display())))?;
    let visible: std::collections::BTreeSet<String> = payload
        .keys()
        .filter_map(|p| p.split('/').next().map(str::to_owned))
        .collect();
    for name in &visible {
        let link = dir.join(name);
        if std::fs::symlink_metadata(&link).is_err() {
            std::os::unix::fs::symlink(Path::new(DATA_LINK).join(name), &link)
                .map_err(io(format!("linking {}", link.display())))?;
        }
    }
    for entry in std::fs::read_dir(dir).map_err(io(format!("listing {}", dir.display())))? {
        let Ok(entry) = entry else { continue };
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with("..") {
            if Some(Path::new(&name)) == old.as_deref() && name != stamp {
                let _ = std::fs::remove_dir_all(entry.path());
            }
            continue;
        }
        if !visible.contains(&name) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
    Ok(true)
}

fn mode_of(item_mode: Option<i32>, default_mode: Option<i32>) -> u32 {
    u32::try_from(item_mode.or(default_mode).unwrap_or(0o644)).unwrap_or(0o644) & 0o7777
}

/// Adds `data` to `payload`: all keys, or the listed items (a missing listed key is an error
/// unless optional).
fn add_keys(
    payload: &mut Payload,
    what: &str,
    data: &BTreeMap<String, Vec<u8>>,
    items: Option<&Vec<KeyToPath>>,
    default_mode: Option<i32>,
    optional: bool,
) -> Result<()> {
    match items {
        Some(items) if !items.is_empty() => {
            for item in items {
                match data.get(&item.key) {
                    Some(value) => {
                        payload.insert(
                            item.path.clone(),
                            (value.clone(), mode_of(item.mode, default_mode)),
                        );
                    }
                    None if optional => {}
                    None => {
                        return Err(Error::Pod(format!("{what} has no key {:?}", item.key)));
                    }
                }
            }
        }
        _ => {
            for (key, value) in data {
                payload.insert(key.clone(), (value.clone(), mode_of(None, default_mode)));
            }
        }
    }
    Ok(())
}

/// The kind of object a keyed volume source (or projection) names.
#[derive(Debug, Clone, Copy)]
enum Keyed {
    Secret,
    ConfigMap,
}

/// A Secret or ConfigMap whose keys become files: all keys, or the listed items.
struct KeyedSource<'a> {
    kind: Keyed,
    name: &'a str,
    items: Option<&'a Vec<KeyToPath>>,
    optional: bool,
}

impl<'a> KeyedSource<'a> {
    fn new(
        kind: Keyed,
        name: &'a str,
        items: &'a Option<Vec<KeyToPath>>,
        optional: Option<bool>,
    ) -> KeyedSource<'a> {
        KeyedSource {
            kind,
            name,
            items: items.as_ref(),
            optional: optional.unwrap_or(false),
        }
    }

    /// Adds the files to `payload`; a missing object is an error unless optional.
    fn add_to(
        &self,
        payload: &mut Payload,
        objects: &dyn Objects,
        namespace: &str,
        default_mode: Option<i32>,
    ) -> Result<()> {
        let name = self.name;
        let (what, data) = match self.kind {
            Keyed::Secret => (format!("secret {name:?}"), objects.secret(namespace, name)),
            Keyed::ConfigMap => (
                format!("configmap {name:?}"),
                objects.config_map(namespace, name).map(|data| {
                    let mut all: BTreeMap<String, Vec<u8>> =
                        data.into_iter().map(|(k, v)| (k, v.into_bytes())).collect();
                    all.extend(objects.config_map_binary(namespace, name));
                    all
                }),
            ),
        };
        match data {
            Some(data) => add_keys(
                payload,
                &what,
                &data,
                self.items,
                default_mode,
                self.optional,
            ),
            None if self.optional => Ok(()),
            None => Err(Error::Pod(format!("{what} not found"))),
        }
    }
}

fn downward_payload(
    payload: &mut Payload,
    items: &[DownwardAPIVolumeFile],
    facts: &PodFacts<'_>,
    default_mode: Option<i32>,
) -> Result<()> {
    for item in items {
        let value = if let Some(field) = &item.field_ref {
            fieldref::field(&field.field_path, facts).map_err(Error::Pod)?
        } else if let Some(resource) = &item.resource_field_ref {
            let spec = facts.pod.spec.as_ref();
            let container = spec
                .and_then(|s| {
                    s.containers
                        .iter()
                        .find(|c| Some(&c.name) == resource.container_name.as_ref())
                })
                .ok_or_else(|| {
                    Error::Pod(format!(
                        "downwardAPI {}: no container {:?}",
                        item.path, resource.container_name
                    ))
                })?;
            fieldref::resource(
                container,
                &resource.resource,
                resource.divisor.as_ref().map(|d| d.0.as_str()),
            )
            .map_err(Error::Pod)?
        } else {
            String::new()
        };
        payload.insert(
            item.path.clone(),
            (value.into_bytes(), mode_of(item.mode, default_mode)),
        );
    }
    Ok(())
}

/// A volume the agent writes (and rewrites when its sources change).
#[derive(Debug, Clone)]
enum Managed {
    Volume(Box<Volume>),
    ServiceAccount,
}

/// The volumes of one pod.
pub struct PodVolumes {
    paths: BTreeMap<String, PathBuf>,
    managed: Vec<(PathBuf, Managed)>,
    service_account_dir: Option<PathBuf>,
}

/// What writing managed volumes needs.
pub struct Sources<'a> {
    pub objects: &'a dyn Objects,
    pub tokens: &'a Tokens,
    pub facts: PodFacts<'a>,
    pub ca_pem: &'a [u8],
}

impl PodVolumes {
    /// Lays out the volumes of `pod` under `pod_dir` (a claim's directory is what `claim_dir`
    /// says for its name; a claim it does not know is an error the pod waits on); unsupported
    /// volume types are an error naming them. `automount` adds the service-account volume.
    pub fn prepare(
        pod: &Pod,
        pod_dir: &Path,
        claim_dir: &dyn Fn(&str) -> Option<PathBuf>,
        automount: bool,
    ) -> Result<PodVolumes> {
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        let volumes_dir = pod_dir.join("volumes");
        let mut paths = BTreeMap::new();
        let mut managed = Vec::new();
        for volume in pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
            let dir = volumes_dir.join(&volume.name);
            let path = if volume.empty_dir.is_some() {
                std::fs::create_dir_all(&dir).map_err(io(format!("creating {}", dir.display())))?;
                dir
            } else if let Some(claim) = &volume.persistent_volume_claim {
                let dir = claim_dir(&claim.claim_name).ok_or_else(|| {
                    Error::Pod(format!(
                        "persistentvolumeclaim {namespace}/{} not found",
                        claim.claim_name
                    ))
                })?;
                std::fs::create_dir_all(&dir).map_err(io(format!("creating {}", dir.display())))?;
                dir
            } else if let Some(host) = &volume.host_path {
                let path = PathBuf::from(&host.path);
                if matches!(host.type_.as_deref(), Some("DirectoryOrCreate")) {
                    std::fs::create_dir_all(&path)
                        .map_err(io(format!("creating {}", path.display())))?;
                }
                path
            } else if volume.secret.is_some()
                || volume.config_map.is_some()
                || volume.downward_api.is_some()
                || volume.projected.is_some()
            {
                managed.push((dir.clone(), Managed::Volume(Box::new(volume.clone()))));
                dir
            } else {
                return Err(Error::Pod(format!(
                    "volume {:?}: this volume type is not supported by kcp-node-agent",
                    volume.name
                )));
            };
            paths.insert(volume.name.clone(), path);
        }
        let service_account_dir = automount.then(|| pod_dir.join("serviceaccount"));
        if let Some(dir) = &service_account_dir {
            managed.push((dir.clone(), Managed::ServiceAccount));
        }
        Ok(PodVolumes {
            paths,
            managed,
            service_account_dir,
        })
    }

    /// (Re)writes every managed volume from its sources; tokens are re-requested when due.
    pub async fn refresh(&self, sources: &Sources<'_>) -> Result<bool> {
        let namespace = sources.facts.namespace();
        let mut changed = false;
        for (dir, kind) in &self.managed {
            let mut payload = Payload::new();
            match kind {
                Managed::ServiceAccount => {
                    let token = sources.tokens.get(None, DEFAULT_EXPIRATION_SECONDS).await?;
                    payload.insert("token".into(), (token.into_bytes(), 0o644));
                    payload.insert("ca.crt".into(), (sources.ca_pem.to_vec(), 0o644));
                    payload.insert("namespace".into(), (namespace.clone().into_bytes(), 0o644));
                }
                Managed::Volume(volume) => {
                    self.volume_payload(&mut payload, volume, &namespace, sources)
                        .await?;
                }
            }
            changed |= write_atomic(dir, &payload)?;
        }
        Ok(changed)
    }

    async fn volume_payload(
        &self,
        payload: &mut Payload,
        volume: &Volume,
        namespace: &str,
        sources: &Sources<'_>,
    ) -> Result<()> {
        let objects = sources.objects;
        if let Some(secret) = &volume.secret {
            let name = secret.secret_name.as_deref().unwrap_or_default();
            return KeyedSource::new(Keyed::Secret, name, &secret.items, secret.optional).add_to(
                payload,
                objects,
                namespace,
                secret.default_mode,
            );
        }
        if let Some(cm) = &volume.config_map {
            return KeyedSource::new(Keyed::ConfigMap, &cm.name, &cm.items, cm.optional).add_to(
                payload,
                objects,
                namespace,
                cm.default_mode,
            );
        }
        if let Some(downward) = &volume.downward_api {
            return downward_payload(
                payload,
                downward.items.as_deref().unwrap_or_default(),
                &sources.facts,
                downward.default_mode,
            );
        }
        let Some(projected) = &volume.projected else {
            return Ok(());
        };
        let mode = projected.default_mode;
        for source in projected.sources.iter().flatten() {
            if let Some(SecretProjection {
                name,
                items,
                optional,
            }) = &source.secret
            {
                KeyedSource::new(Keyed::Secret, name, items, *optional)
                    .add_to(payload, objects, namespace, mode)?;
            }
            if let Some(ConfigMapProjection {
                name,
                items,
                optional,
            }) = &source.config_map
            {
                KeyedSource::new(Keyed::ConfigMap, name, items, *optional)
                    .add_to(payload, objects, namespace, mode)?;
            }
            if let Some(downward) = &source.downward_api {
                downward_payload(
                    payload,
                    downward.items.as_deref().unwrap_or_default(),
                    &sources.facts,
                    mode,
                )?;
            }
            if let Some(token) = &source.service_account_token {
                let value = sources
                    .tokens
                    .get(
                        token.audience.as_deref().filter(|a| !a.is_empty()),
                        token.expiration_seconds.unwrap_or(3600),
                    )
                    .await?;
                payload.insert(
                    token.path.clone(),
                    (value.into_bytes(), mode_of(None, mode)),
                );
            }
            if source.cluster_trust_bundle.is_some() || source.pod_certificate.is_some() {
                return Err(Error::Pod(format!(
                    "volume {:?}: clusterTrustBundle and podCertificate projections are not supported",
                    volume.name
                )));
            }
        }
        Ok(())
    }

    /// The bind mounts of `container` (with `env` for `subPathExpr`).
    pub fn mounts(
        &self,
        container: &Container,
        env: &[(String, String)],
    ) -> Result<Vec<BindMount>> {
        let lookup = |name: &str| {
            env.iter()
                .rev()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        };
        let mut mounts = Vec::new();
        for mount in container.volume_mounts.iter().flatten() {
            let base = self.paths.get(&mount.name).ok_or_else(|| {
                Error::Pod(format!(
                    "container {:?} mounts volume {:?}, which the pod does not define",
                    container.name, mount.name
                ))
            })?;
            let sub = match (&mount.sub_path, &mount.sub_path_expr) {
                (Some(sub), _) if !sub.is_empty() => Some(sub.clone()),
                (_, Some(expr)) if !expr.is_empty() => Some(expand(expr, lookup)),
                _ => None,
            };
            let source = match sub {
                Some(sub) => {
                    if !valid_path(&sub) {
                        return Err(Error::Pod(format!("invalid subPath {sub:?}")));
                    }
                    let source = base.join(&sub);
                    if std::fs::symlink_metadata(&source).is_err() {
                        std::fs::create_dir_all(&source)
                            .map_err(io(format!("creating subPath {}", source.display())))?;
                    }
                    source
                }
                None => base.clone(),
            };
            let managed = self.managed.iter().any(|(dir, _)| dir == base);
            mounts.push(BindMount {
                source,
                target: PathBuf::from(&mount.mount_path),
                read_only: mount.read_only.unwrap_or(false) || managed,
            });
        }
        if let Some(dir) = &self.service_account_dir
            && !mounts
                .iter()
                .any(|m| m.target == Path::new(SERVICE_ACCOUNT_PATH))
        {
            mounts.push(BindMount {
                source: dir.clone(),
                target: PathBuf::from(SERVICE_ACCOUNT_PATH),
                read_only: true,
            });
        }
        Ok(mounts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn payload(entries: &[(&str, &str, u32)]) -> Payload {
        entries
            .iter()
            .map(|(p, c, m)| ((*p).to_owned(), (c.as_bytes().to_vec(), *m)))
            .collect()
    }

    #[test]
    fn atomic_writer_layout_and_updates() {
        let dir = tempfile::tempdir().expect("dir");
        let volume = dir.path().join("v");
        let first = payload(&[("tls.crt", "A", 0o644), ("sub/key", "K", 0o600)]);
        assert!(write_atomic(&volume, &first).expect("write"));
        assert_eq!(
            std::fs::read_to_string(volume.join("tls.crt")).expect("read"),
            "A"
        );
        assert_eq!(
            std::fs::read_to_string(volume.join("sub/key")).expect("read"),
            "K"
        );
        assert!(
            std::fs::symlink_metadata(volume.join("tls.crt"))
                .expect("meta")
                .file_type()
                .is_symlink()
        );
        let mode = std::fs::metadata(volume.join("sub/key"))
            .expect("meta")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        // The same payload writes nothing.
        assert!(!write_atomic(&volume, &first).expect("same"));
        // An update swaps content and drops removed names and the old directory.
        let second = payload(&[("tls.crt", "B", 0o644)]);
        assert!(write_atomic(&volume, &second).expect("update"));
        assert_eq!(
            std::fs::read_to_string(volume.join("tls.crt")).expect("read"),
            "B"
        );
        assert!(std::fs::symlink_metadata(volume.join("sub")).is_err());
        let hidden: Vec<String> = std::fs::read_dir(&volume)
            .expect("list")
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(".."))
            .collect();
        assert_eq!(hidden.len(), 2, "{hidden:?}");
        assert!(write_atomic(&volume, &payload(&[("../x", "", 0o644)])).is_err());
    }

    #[test]
    fn item_selection_and_modes() {
        let data = BTreeMap::from([
            ("a".to_owned(), b"1".to_vec()),
            ("b".to_owned(), b"2".to_vec()),
        ]);
        let mut all = Payload::new();
        add_keys(&mut all, "s", &data, None, Some(0o400), false).expect("all");
        assert_eq!(all.len(), 2);
        assert_eq!(all["a"].1, 0o400);
        let items = vec![KeyToPath {
            key: "b".into(),
            path: "dir/b.txt".into(),
            mode: Some(0o755),
        }];
        let mut some = Payload::new();
        add_keys(&mut some, "s", &data, Some(&items), None, false).expect("items");
        assert_eq!(some.keys().collect::<Vec<_>>(), vec!["dir/b.txt"]);
        assert_eq!(some["dir/b.txt"].1, 0o755);
        let missing = vec![KeyToPath {
            key: "z".into(),
            path: "z".into(),
            mode: None,
        }];
        assert!(add_keys(&mut Payload::new(), "s", &data, Some(&missing), None, false).is_err());
        assert!(add_keys(&mut Payload::new(), "s", &data, Some(&missing), None, true).is_ok());
    }
}
