//! Archives written from small host binaries, checked three ways: by recomputing every digest
//! and reading every document here, by running the image's entrypoint from its extracted layer
//! (chroot, as the non-root user), and by an independent implementation, skopeo, reading the
//! same file as `oci-archive:` and as `docker-archive:`.
//!
//! skopeo is required, not optional: install it with
//! `apt-get update && apt-get install -y skopeo`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

use kcp_images::digest::sha256;
use kcp_images::oci::{self, ImageSpec};
use kcp_images::{Archive, elf};
use serde_json::Value;

const TEST_BINARY: &str = "/bin/echo";
const CA: &[u8] = b"-----BEGIN CERTIFICATE-----\ntest\n-----END CERTIFICATE-----\n";

/// One entry of a tar read back.
#[derive(Debug)]
struct TarEntry {
    kind: tar::EntryType,
    mode: u32,
    uid: u64,
    gid: u64,
    mtime: u64,
    data: Vec<u8>,
    /// A symbolic link's target.
    link: Option<String>,
}

/// Entries by path (directory paths without the trailing slash), plus the order they came in.
fn read_tar(bytes: &[u8]) -> (BTreeMap<String, TarEntry>, Vec<String>) {
    let mut archive = tar::Archive::new(bytes);
    let mut entries = BTreeMap::new();
    let mut order = Vec::new();
    for entry in archive.entries().unwrap() {
        let mut entry = entry.unwrap();
        let path = entry.path().unwrap().to_string_lossy().to_string();
        let path = path.trim_end_matches('/').to_owned();
        let header = entry.header();
        let (kind, mode, uid, gid, mtime) = (
            header.entry_type(),
            header.mode().unwrap(),
            header.uid().unwrap(),
            header.gid().unwrap(),
            header.mtime().unwrap(),
        );
        let link = header
            .link_name()
            .unwrap()
            .map(|target| target.to_string_lossy().to_string());
        let mut data = Vec::new();
        entry.read_to_end(&mut data).unwrap();
        order.push(path.clone());
        let previous = entries.insert(
            path.clone(),
            TarEntry {
                kind,
                mode,
                uid,
                gid,
                mtime,
                data,
                link,
            },
        );
        assert!(previous.is_none(), "{path} twice");
    }
    (entries, order)
}

fn gunzip(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(bytes)
        .read_to_end(&mut out)
        .unwrap();
    out
}

fn json(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes).unwrap()
}

fn spec(dir: &Path, epoch: u64) -> ImageSpec {
    let ca = dir.join("ca.crt");
    std::fs::write(&ca, CA).unwrap();
    ImageSpec {
        repository: "ghcr.io/kcp-rs/kcp".into(),
        tag: "v0.1.0".into(),
        binary: PathBuf::from(TEST_BINARY),
        name: "kcp".into(),
        commands: kcp_images::KCP_COMMANDS.map(str::to_owned).to_vec(),
        ca_bundle: Some(ca),
        source_date_epoch: epoch,
        source_url: kcp_images::DEFAULT_SOURCE.into(),
    }
}

fn build(dir: &Path, epoch: u64) -> Archive {
    std::fs::create_dir_all(dir).unwrap();
    oci::write_archive(&spec(dir, epoch), &dir.join("out/kcp.tar")).unwrap()
}

/// Shared libraries by an independent reading of `ldd`.
fn ldd_paths(binary: &str) -> Vec<String> {
    let out = Command::new("ldd").arg(binary).output().unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| {
            l.split_whitespace()
                .find(|w| w.starts_with('/'))
                .map(str::to_owned)
        })
        .collect()
}

/// Checks an archive against its own documents and returns (outer entries, layer entries).
fn verify(
    archive: &Archive,
) -> (
    BTreeMap<String, TarEntry>,
    BTreeMap<String, TarEntry>,
    Value,
) {
    let bytes = std::fs::read(&archive.path).unwrap();
    let (outer, order) = read_tar(&bytes);
    let mut sorted = order.clone();
    sorted.sort();
    assert_eq!(order, sorted, "archive entries sorted");
    for (path, e) in &outer {
        assert_eq!((e.uid, e.gid, e.mtime), (0, 0, 0), "{path}");
    }

    assert_eq!(
        json(&outer["oci-layout"].data),
        serde_json::json!({"imageLayoutVersion": "1.0.0"})
    );
    // Every blob is named by the digest of its content.
    for (path, e) in &outer {
        if let Some(hex) = path.strip_prefix("blobs/sha256/") {
            assert_eq!(sha256(&e.data), format!("sha256:{hex}"), "{path}");
        }
    }
    let blob = |digest: &str| -> &[u8] {
        let hex = digest.strip_prefix("sha256:").unwrap();
        &outer[&format!("blobs/sha256/{hex}")].data
    };

    let index = json(&outer["index.json"].data);
    assert_eq!(index["schemaVersion"], 2);
    assert_eq!(
        index["mediaType"],
        "application/vnd.oci.image.index.v1+json"
    );
    let manifests = index["manifests"].as_array().unwrap();
    assert_eq!(manifests.len(), 1);
    let desc = &manifests[0];
    assert_eq!(
        desc["mediaType"],
        "application/vnd.oci.image.manifest.v1+json"
    );
    assert_eq!(desc["digest"], archive.manifest_digest.as_str());
    let reference = "ghcr.io/kcp-rs/kcp:v0.1.0";
    assert_eq!(archive.reference, reference);
    assert_eq!(
        desc["annotations"]["org.opencontainers.image.ref.name"],
        reference
    );
    assert_eq!(desc["annotations"]["io.containerd.image.name"], reference);
    assert_eq!(desc["platform"]["os"], "linux");
    assert_eq!(desc["platform"]["architecture"], elf::host_architecture());

    let manifest_bytes = blob(desc["digest"].as_str().unwrap());
    assert_eq!(desc["size"], manifest_bytes.len());
    let manifest = json(manifest_bytes);
    assert_eq!(manifest["schemaVersion"], 2);
    assert_eq!(
        manifest["mediaType"],
        "application/vnd.oci.image.manifest.v1+json"
    );
    assert_eq!(
        manifest["config"]["mediaType"],
        "application/vnd.oci.image.config.v1+json"
    );
    assert_eq!(manifest["config"]["digest"], archive.config_digest.as_str());
    let config_bytes = blob(&archive.config_digest);
    assert_eq!(manifest["config"]["size"], config_bytes.len());
    let layers = manifest["layers"].as_array().unwrap();
    assert_eq!(layers.len(), 1);
    assert_eq!(
        layers[0]["mediaType"],
        "application/vnd.oci.image.layer.v1.tar+gzip"
    );
    assert_eq!(layers[0]["digest"], archive.layer_digest.as_str());
    let layer_gz = blob(&archive.layer_digest);
    assert_eq!(layers[0]["size"], layer_gz.len());
    let layer_tar = gunzip(layer_gz);

    let config = json(config_bytes);
    assert_eq!(config["architecture"], elf::host_architecture());
    assert_eq!(config["os"], "linux");
    assert_eq!(config["rootfs"]["type"], "layers");
    assert_eq!(
        config["rootfs"]["diff_ids"],
        serde_json::json!([sha256(&layer_tar)])
    );
    assert_eq!(archive.diff_id, sha256(&layer_tar));
    assert_eq!(config["config"]["User"], "65532:65532");
    assert_eq!(config["config"]["WorkingDir"], "/home/nonroot");
    assert_eq!(
        config["config"]["Entrypoint"],
        serde_json::json!(["/usr/local/bin/kcp"])
    );
    assert!(
        config["config"]["Env"][0]
            .as_str()
            .unwrap()
            .starts_with("PATH=")
    );
    let labels = &config["config"]["Labels"];
    assert_eq!(labels["org.opencontainers.image.title"], "kcp");
    assert_eq!(labels["org.opencontainers.image.version"], "v0.1.0");
    assert_eq!(
        labels["org.opencontainers.image.source"],
        kcp_images::DEFAULT_SOURCE
    );

    // Docker's manifest.json names the same blobs.
    let docker = json(&outer["manifest.json"].data);
    assert_eq!(
        docker,
        serde_json::json!([{
            "Config": format!("blobs/sha256/{}", archive.config_digest.trim_start_matches("sha256:")),
            "RepoTags": [reference],
            "Layers": [format!("blobs/sha256/{}", archive.layer_digest.trim_start_matches("sha256:"))],
        }])
    );

    let (layer, layer_order) = read_tar(&layer_tar);
    let mut sorted = layer_order.clone();
    sorted.sort();
    assert_eq!(layer_order, sorted, "layer entries sorted");
    (outer, layer, config)
}

#[test]
fn archive_is_consistent_and_complete() {
    let dir = tempfile::tempdir().unwrap();
    let archive = build(dir.path(), 0);
    let (_, layer, _) = verify(&archive);

    let binary = &layer["usr/local/bin/kcp"];
    assert_eq!(binary.kind, tar::EntryType::Regular);
    assert_eq!(binary.mode, 0o755);
    assert_eq!(binary.data, std::fs::read(TEST_BINARY).unwrap());
    // Upstream's command paths, which the operator's Deployments run, lead to the binary.
    for command in [
        "kcp",
        "kcp-front-proxy",
        "cache-server",
        "virtual-workspaces",
    ] {
        let link = &layer[command];
        assert_eq!(link.kind, tar::EntryType::Symlink, "{command}");
        assert_eq!(
            link.link.as_deref(),
            Some("/usr/local/bin/kcp"),
            "{command}"
        );
    }

    let libraries = ldd_paths(TEST_BINARY);
    assert!(libraries.iter().any(|l| l.contains("libc.so")));
    let interpreter = elf::inspect(Path::new(TEST_BINARY))
        .unwrap()
        .interpreter
        .unwrap();
    assert!(libraries.contains(&interpreter), "{libraries:?}");
    for library in &libraries {
        let entry = &layer[library.trim_start_matches('/')];
        assert_eq!(entry.kind, tar::EntryType::Regular, "{library}");
        assert_eq!(entry.data, std::fs::read(library).unwrap(), "{library}");
    }

    let passwd = String::from_utf8(layer["etc/passwd"].data.clone()).unwrap();
    assert!(
        passwd
            .lines()
            .any(|l| l.starts_with("nonroot:x:65532:65532:")),
        "{passwd}"
    );
    let group = String::from_utf8(layer["etc/group"].data.clone()).unwrap();
    assert!(group.lines().any(|l| l == "nonroot:x:65532:"), "{group}");
    assert_eq!(layer["tmp"].kind, tar::EntryType::Directory);
    assert_eq!(layer["tmp"].mode, 0o1777);
    assert_eq!(layer["etc/ssl/certs/ca-certificates.crt"].data, CA);
    for (path, e) in &layer {
        assert_eq!(e.mtime, 0, "{path}");
        if path != "home/nonroot" {
            assert_eq!((e.uid, e.gid), (0, 0), "{path}");
        }
        // Every parent directory is in the layer.
        if let Some((parent, _)) = path.rsplit_once('/') {
            assert_eq!(layer[parent].kind, tar::EntryType::Directory, "{path}");
        }
    }
}

#[test]
fn same_inputs_same_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let a = build(&dir.path().join("a"), 0);
    let b = build(&dir.path().join("b"), 0);
    assert_eq!(a.manifest_digest, b.manifest_digest);
    assert_eq!(
        std::fs::read(&a.path).unwrap(),
        std::fs::read(&b.path).unwrap()
    );

    // SOURCE_DATE_EPOCH is the only clock.
    let c = build(&dir.path().join("c"), 1_700_000_000);
    assert_ne!(a.manifest_digest, c.manifest_digest);
    let bytes = std::fs::read(&c.path).unwrap();
    let (outer, _) = read_tar(&bytes);
    assert!(outer.values().all(|e| e.mtime == 1_700_000_000));
    let config = json(
        &outer[&format!(
            "blobs/sha256/{}",
            c.config_digest.trim_start_matches("sha256:")
        )]
            .data,
    );
    assert_eq!(config["created"], "2023-11-14T22:13:20Z");
}

#[test]
fn entrypoint_runs_from_the_layer_alone_as_nonroot() {
    let dir = tempfile::tempdir().unwrap();
    let archive = build(dir.path(), 0);
    let bytes = std::fs::read(&archive.path).unwrap();
    let (outer, _) = read_tar(&bytes);
    let layer = gunzip(
        &outer[&format!(
            "blobs/sha256/{}",
            archive.layer_digest.trim_start_matches("sha256:")
        )]
            .data,
    );
    let root = dir.path().join("rootfs");
    let mut unpack = tar::Archive::new(layer.as_slice());
    unpack.set_preserve_permissions(true);
    unpack.unpack(&root).unwrap();

    // No ld.so.cache in the image: the loader must find the libraries at their paths.
    assert!(!root.join("etc/ld.so.cache").exists());
    // The entrypoint, and a command path of upstream's layout that links to it.
    for (command, words) in [
        ("/usr/local/bin/kcp", "hello from the image"),
        ("/kcp-front-proxy", "hello through a link"),
    ] {
        let out = Command::new("chroot")
            .args(["--userspec=65532:65532"])
            .arg(&root)
            .args([command, words])
            .output()
            .expect("chroot (coreutils) must be installed; the test runs as root");
        assert!(
            out.status.success(),
            "chroot {command} failed (this test needs root): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(String::from_utf8_lossy(&out.stdout), format!("{words}\n"));
    }
}

/// skopeo, or a failure that says how to install it.
fn skopeo(args: &[&str]) -> Value {
    let out = match Command::new("skopeo").args(args).output() {
        Ok(out) => out,
        Err(err) => panic!(
            "skopeo is required for this test ({err}): apt-get update && apt-get install -y skopeo"
        ),
    };
    assert!(
        out.status.success(),
        "skopeo {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    if out.stdout.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&out.stdout).unwrap()
    }
}

#[test]
fn skopeo_reads_both_layouts_and_copies() {
    let dir = tempfile::tempdir().unwrap();
    let archive = build(dir.path(), 0);
    let path = archive.path.to_str().unwrap();

    let oci_archive = format!("oci-archive:{path}");
    let inspect = skopeo(&["inspect", &oci_archive]);
    assert_eq!(inspect["Digest"], archive.manifest_digest.as_str());
    assert_eq!(inspect["Architecture"], elf::host_architecture());
    assert_eq!(inspect["Os"], "linux");
    assert_eq!(
        inspect["Layers"],
        serde_json::json!([archive.layer_digest.as_str()])
    );
    assert_eq!(inspect["Labels"]["org.opencontainers.image.title"], "kcp");
    let config = skopeo(&["inspect", "--config", &oci_archive]);
    assert_eq!(config["config"]["User"], "65532:65532");

    // Selecting the image by name proves skopeo reads the name where we wrote it
    // (org.opencontainers.image.ref.name in index.json, RepoTags in manifest.json).
    let by_name = format!("{oci_archive}:ghcr.io/kcp-rs/kcp:v0.1.0");
    assert_eq!(
        skopeo(&["inspect", &by_name])["Digest"],
        archive.manifest_digest.as_str()
    );

    let docker_archive = format!("docker-archive:{path}");
    let inspect = skopeo(&["inspect", &docker_archive]);
    // Docker's view lists layers by their uncompressed digest.
    assert_eq!(
        inspect["Layers"],
        serde_json::json!([archive.diff_id.as_str()])
    );
    let by_name = format!("{docker_archive}:ghcr.io/kcp-rs/kcp:v0.1.0");
    assert_eq!(skopeo(&["inspect", &by_name])["Digest"], inspect["Digest"]);
    for wrong in [
        format!("{oci_archive}:ghcr.io/kcp-rs/other:v0.1.0"),
        format!("{docker_archive}:ghcr.io/kcp-rs/other:v0.1.0"),
    ] {
        let status = Command::new("skopeo")
            .args(["inspect", &wrong])
            .output()
            .unwrap()
            .status;
        assert!(!status.success(), "{wrong} should not resolve");
    }
    assert_eq!(inspect["Architecture"], elf::host_architecture());
    let config = skopeo(&["inspect", "--config", &docker_archive]);
    assert_eq!(
        config["rootfs"]["diff_ids"],
        serde_json::json!([archive.diff_id.as_str()])
    );
    assert_eq!(
        config["config"]["Entrypoint"],
        serde_json::json!(["/usr/local/bin/kcp"])
    );

    // A full copy verifies every blob against its digest.
    let copy = dir.path().join("copy");
    let dest = format!("dir:{}", copy.display());
    skopeo(&["--insecure-policy", "copy", "--quiet", &oci_archive, &dest]);
    let copied = std::fs::read(copy.join("manifest.json")).unwrap();
    assert_eq!(sha256(&copied), archive.manifest_digest);
    assert!(
        copy.join(archive.layer_digest.trim_start_matches("sha256:"))
            .exists()
    );
    let copy2 = dir.path().join("copy2");
    let dest = format!("dir:{}", copy2.display());
    skopeo(&[
        "--insecure-policy",
        "copy",
        "--quiet",
        &docker_archive,
        &dest,
    ]);
}

#[test]
fn cli_writes_both_images() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    for name in ["kcp", "kcp-operator"] {
        std::fs::copy(TEST_BINARY, bin.join(name)).unwrap();
    }
    let ca = dir.path().join("ca.crt");
    std::fs::write(&ca, CA).unwrap();
    let out_dir = dir.path().join("images");
    let out = Command::new(env!("CARGO_BIN_EXE_kcp-images"))
        .arg("images")
        .arg("--binaries-dir")
        .arg(&bin)
        .arg("--out")
        .arg(&out_dir)
        .arg("--ca-bundle")
        .arg(&ca)
        .env_remove("SOURCE_DATE_EPOCH")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<Vec<&str>> = stdout.lines().map(|l| l.split('\t').collect()).collect();
    assert_eq!(lines.len(), 2, "{stdout}");
    let tag = kcp_images::DEFAULT_TAG;
    assert_eq!(tag, "v0.1.0");
    for (line, name) in lines.iter().zip(["kcp", "kcp-operator"]) {
        assert_eq!(line[0], format!("ghcr.io/kcp-rs/{name}:{tag}"));
        let path = out_dir.join(format!("{name}.tar"));
        assert_eq!(line[1], path.display().to_string());
        let bytes = std::fs::read(&path).unwrap();
        let (outer, _) = read_tar(&bytes);
        let docker = json(&outer["manifest.json"].data);
        assert_eq!(
            docker[0]["RepoTags"],
            serde_json::json!([format!("ghcr.io/kcp-rs/{name}:{tag}")])
        );
        let index = json(&outer["index.json"].data);
        assert_eq!(index["manifests"][0]["digest"], line[2]);
        let config_path = docker[0]["Config"].as_str().unwrap();
        let config = json(&outer[config_path].data);
        assert_eq!(
            config["config"]["Entrypoint"],
            serde_json::json!([format!("/usr/local/bin/{name}")])
        );
    }

    // A wrong option fails with a message, not a panic.
    let out = Command::new(env!("CARGO_BIN_EXE_kcp-images"))
        .args([
            "images",
            "--no-build",
            "--tag",
            "not:a:tag",
            "--binaries-dir",
        ])
        .arg(&bin)
        .arg("--out")
        .arg(&out_dir)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("invalid image reference"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
