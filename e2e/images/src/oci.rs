//! Image config, manifest, OCI `index.json` and Docker `manifest.json`, written as one tar.
//!
//! Why both layouts in one file: containerd (`ctr images import`, and so `kind load
//! image-archive`) and skopeo's `oci-archive:` read an OCI image layout (`oci-layout`,
//! `index.json`, `blobs/sha256/...`), while `docker load` and skopeo's `docker-archive:` read
//! `manifest.json`. Both point at the same blobs, as in what `docker save` writes since Docker 25,
//! so one archive loads everywhere. The image name travels in `index.json` as
//! `io.containerd.image.name` and `org.opencontainers.image.ref.name` (both the full reference, so
//! tools that name images from either annotation get the same name) and in `RepoTags`.

use std::collections::BTreeMap;
use std::fs;
use std::io::{BufWriter, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::digest::{self, hex};
use crate::rootfs::{self, Entry, Rootfs, Source};
use crate::{BIN_DIR, Error, Result, elf, ldd};

pub const MEDIA_TYPE_INDEX: &str = "application/vnd.oci.image.index.v1+json";
pub const MEDIA_TYPE_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
pub const MEDIA_TYPE_CONFIG: &str = "application/vnd.oci.image.config.v1+json";
pub const MEDIA_TYPE_LAYER: &str = "application/vnd.oci.image.layer.v1.tar+gzip";
pub const ANNOTATION_REF_NAME: &str = "org.opencontainers.image.ref.name";
pub const ANNOTATION_CONTAINERD_NAME: &str = "io.containerd.image.name";
/// Working directory: the user's own home, so programs that write relative paths (`kcp start`
/// keeps its state in `.kcp/`) work as the non-root user without a volume.
pub const HOME: &str = "/home/nonroot";
/// PATH of the images (Docker's default).
pub const PATH_ENV: &str = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// What one image is made of.
#[derive(Clone, Debug)]
pub struct ImageSpec {
    /// Repository, e.g. `ghcr.io/kcp-rs/kcp`.
    pub repository: String,
    /// Tag, e.g. `v0.1.0`.
    pub tag: String,
    /// The binary on the build machine; it lands in `/usr/local/bin/<name>`.
    pub binary: PathBuf,
    /// File name inside `/usr/local/bin` and `org.opencontainers.image.title`.
    pub name: String,
    /// Further absolute paths that are symbolic links to the entrypoint: the commands a
    /// multi-call binary answers to by its program name (see [`crate::KCP_COMMANDS`]).
    pub commands: Vec<String>,
    /// CA bundle copied to `/etc/ssl/certs/ca-certificates.crt`, if any.
    pub ca_bundle: Option<PathBuf>,
    /// Seconds since the epoch for every mtime and the `created` fields.
    pub source_date_epoch: u64,
    /// `org.opencontainers.image.source`.
    pub source_url: String,
}

impl ImageSpec {
    /// `repository:tag`.
    pub fn reference(&self) -> String {
        format!("{}:{}", self.repository, self.tag)
    }

    /// Absolute path of the entrypoint inside the image.
    pub fn entrypoint(&self) -> String {
        format!("{BIN_DIR}/{}", self.name)
    }
}

/// A written archive.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Archive {
    pub path: PathBuf,
    pub reference: String,
    pub architecture: String,
    /// The image digest (of the manifest), what a registry would report.
    pub manifest_digest: String,
    /// The image id Docker shows (digest of the config).
    pub config_digest: String,
    pub layer_digest: String,
    pub diff_id: String,
}

/// Builds the image of `spec` and writes it to `out` (a `.tar`), replacing it atomically.
pub fn write_archive(spec: &ImageSpec, out: &Path) -> Result<Archive> {
    validate_reference(&spec.repository, &spec.tag)?;
    let info = elf::inspect(&spec.binary)?;
    let libraries = ldd::shared_objects(&spec.binary)?;

    let mut fs = Rootfs::base()?;
    fs.add(&spec.entrypoint(), 0o755, Source::Host(spec.binary.clone()))?;
    for command in &spec.commands {
        fs.add(command, 0o777, Source::Symlink(spec.entrypoint()))?;
    }
    for library in &libraries {
        // 0755 as on the build machine: the kernel requires the interpreter to be executable.
        fs.add(library, 0o755, Source::Host(PathBuf::from(library)))?;
    }
    if let Some(bundle) = &spec.ca_bundle {
        fs.add(crate::CA_BUNDLE_PATH, 0o644, Source::Host(bundle.clone()))?;
    }

    let dir = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
        _ => PathBuf::from("."),
    };
    fs::create_dir_all(&dir).map_err(Error::io(&dir))?;
    let layer_file = tempfile::Builder::new()
        .prefix(".layer-")
        .tempfile_in(&dir)
        .map_err(Error::io(&dir))?;
    let layer = fs.write_layer(layer_file.path(), spec.source_date_epoch)?;

    let created = rfc3339(spec.source_date_epoch);
    let config = to_json(
        "image config",
        &config(spec, info.architecture, &layer.diff_id, &created),
    )?;
    let config_digest = digest::sha256(&config);
    let manifest = to_json(
        "image manifest",
        &json!({
            "schemaVersion": 2,
            "mediaType": MEDIA_TYPE_MANIFEST,
            "config": {
                "mediaType": MEDIA_TYPE_CONFIG,
                "digest": config_digest,
                "size": config.len(),
            },
            "layers": [{
                "mediaType": MEDIA_TYPE_LAYER,
                "digest": layer.digest,
                "size": layer.size,
            }],
        }),
    )?;
    let manifest_digest = digest::sha256(&manifest);
    let reference = spec.reference();
    let index = to_json(
        "index.json",
        &json!({
            "schemaVersion": 2,
            "mediaType": MEDIA_TYPE_INDEX,
            "manifests": [{
                "mediaType": MEDIA_TYPE_MANIFEST,
                "digest": manifest_digest,
                "size": manifest.len(),
                "annotations": {
                    ANNOTATION_CONTAINERD_NAME: reference,
                    ANNOTATION_REF_NAME: reference,
                },
                "platform": {"architecture": info.architecture, "os": "linux"},
            }],
        }),
    )?;
    let docker_manifest = to_json(
        "manifest.json",
        &json!([{
            "Config": blob_path(&config_digest),
            "RepoTags": [reference],
            "Layers": [blob_path(&layer.digest)],
        }]),
    )?;

    // Sorted by path, as in the layer.
    let mut files: BTreeMap<String, Entry> = BTreeMap::new();
    let dir_entry = Entry {
        mode: 0o755,
        uid: 0,
        gid: 0,
        source: Source::Directory,
    };
    files.insert("blobs".into(), dir_entry.clone());
    files.insert("blobs/sha256".into(), dir_entry);
    let file = |source| Entry {
        mode: 0o644,
        uid: 0,
        gid: 0,
        source,
    };
    files.insert(blob_path(&config_digest), file(Source::Bytes(config)));
    files.insert(blob_path(&manifest_digest), file(Source::Bytes(manifest)));
    files.insert(
        blob_path(&layer.digest),
        file(Source::Host(layer_file.path().to_owned())),
    );
    files.insert("index.json".into(), file(Source::Bytes(index)));
    files.insert("manifest.json".into(), file(Source::Bytes(docker_manifest)));
    files.insert(
        "oci-layout".into(),
        file(Source::Bytes(br#"{"imageLayoutVersion":"1.0.0"}"#.to_vec())),
    );

    let archive = tempfile::Builder::new()
        .prefix(".archive-")
        .tempfile_in(&dir)
        .map_err(Error::io(&dir))?;
    {
        let mut tar = tar::Builder::new(BufWriter::new(archive.as_file()));
        for (path, entry) in &files {
            rootfs::append(&mut tar, path, entry, spec.source_date_epoch)?;
        }
        let mut writer = tar.into_inner().map_err(Error::io(out))?;
        writer.flush().map_err(Error::io(out))?;
    }
    archive
        .as_file()
        .set_permissions(std::fs::Permissions::from_mode(0o644))
        .map_err(Error::io(out))?;
    archive.persist(out).map_err(|e| Error::io(out)(e.error))?;

    Ok(Archive {
        path: out.to_owned(),
        reference,
        architecture: info.architecture.to_owned(),
        manifest_digest,
        config_digest,
        layer_digest: layer.digest,
        diff_id: layer.diff_id,
    })
}

fn config(spec: &ImageSpec, architecture: &str, diff_id: &str, created: &str) -> Value {
    let labels: BTreeMap<&str, &str> = [
        ("org.opencontainers.image.source", spec.source_url.as_str()),
        ("org.opencontainers.image.version", spec.tag.as_str()),
        ("org.opencontainers.image.title", spec.name.as_str()),
        (
            "org.opencontainers.image.licenses",
            env!("CARGO_PKG_LICENSE"),
        ),
    ]
    .into_iter()
    .collect();
    let user = format!("{id}:{id}", id = rootfs::NONROOT_ID);
    json!({
        "created": created,
        "architecture": architecture,
        "os": "linux",
        "config": {
            "User": user,
            "Env": [PATH_ENV],
            "Entrypoint": [spec.entrypoint()],
            "WorkingDir": HOME,
            "Labels": labels,
        },
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        "history": [{
            "created": created,
            "created_by": format!("kcp-images {}", env!("CARGO_PKG_VERSION")),
            "comment": format!("{} with its shared libraries", spec.name),
        }],
    })
}

fn to_json(what: &'static str, value: &Value) -> Result<Vec<u8>> {
    serde_json::to_vec(value).map_err(|source| Error::Json { what, source })
}

/// `blobs/sha256/<hex>`.
pub fn blob_path(digest: &str) -> String {
    format!("blobs/sha256/{}", hex(digest))
}

/// `SOURCE_DATE_EPOCH` from the environment, 0 when unset (reproducible-builds.org convention).
pub fn source_date_epoch() -> Result<u64> {
    match std::env::var("SOURCE_DATE_EPOCH") {
        Ok(value) if !value.trim().is_empty() => value
            .trim()
            .parse()
            .map_err(|_| Error::SourceDateEpoch { value }),
        _ => Ok(0),
    }
}

/// RFC 3339 UTC time of `seconds` since the epoch (civil-from-days, proleptic Gregorian).
pub fn rfc3339(seconds: u64) -> String {
    let days = (seconds / 86_400) as i64;
    let rem = seconds % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// A conservative check of `repository:tag` (distribution's grammar, without digests).
pub fn validate_reference(repository: &str, tag: &str) -> Result<()> {
    let reference = format!("{repository}:{tag}");
    let err = |reason| Error::Reference {
        reference: reference.clone(),
        reason,
    };
    let tag_ok = !tag.is_empty()
        && tag.len() <= 128
        && !tag.starts_with(['.', '-'])
        && tag
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
    if !tag_ok {
        return Err(err(
            "a tag is 1-128 of [A-Za-z0-9_.-], not starting with . or -",
        ));
    }
    let mut parts = repository.split('/');
    let first = parts.next().unwrap_or_default();
    let rest: Vec<&str> = parts.collect();
    let is_host = !rest.is_empty() && (first.contains(['.', ':']) || first == "localhost");
    let path_components: Vec<&str> = if is_host {
        rest
    } else {
        std::iter::once(first).chain(rest).collect()
    };
    if is_host
        && !first
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':'))
    {
        return Err(err("invalid registry host"));
    }
    let component_ok = |c: &str| {
        !c.is_empty()
            && c.starts_with(|ch: char| ch.is_ascii_lowercase() || ch.is_ascii_digit())
            && c.ends_with(|ch: char| ch.is_ascii_lowercase() || ch.is_ascii_digit())
            && c.chars().all(|ch| {
                ch.is_ascii_lowercase() || ch.is_ascii_digit() || matches!(ch, '.' | '_' | '-')
            })
    };
    if path_components.is_empty() || !path_components.iter().all(|c| component_ok(c)) {
        return Err(err("repository path components are lowercase [a-z0-9._-]"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_dates() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_700_000_000), "2023-11-14T22:13:20Z");
        assert_eq!(rfc3339(4_102_444_799), "2099-12-31T23:59:59Z");
    }

    #[test]
    fn references() {
        validate_reference("ghcr.io/kcp-rs/kcp", "v0.1.0").unwrap();
        validate_reference("localhost:5000/kcp", "dev_1").unwrap();
        validate_reference("kcp", "latest").unwrap();
        assert!(validate_reference("ghcr.io/KCP/kcp", "v1").is_err());
        assert!(validate_reference("ghcr.io/kcp", "").is_err());
        assert!(validate_reference("ghcr.io/kcp", "-x").is_err());
        assert!(validate_reference("ghcr.io/kcp", "a:b").is_err());
        assert!(validate_reference("ghcr.io/", "v1").is_err());
    }
}
