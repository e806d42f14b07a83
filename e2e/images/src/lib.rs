//! OCI image archives of kcp and kcp-operator, written without Docker.
//!
//! Why: the end-to-end scenarios load this repository's own server and operator into a host
//! cluster (kind, a containerd node, a Docker engine), and neither CI nor a developer machine is
//! guaranteed to have a container engine that can *build* images. Loading only needs an archive,
//! and an image of a dynamically linked Rust binary is just that binary, the shared libraries the
//! dynamic loader resolves for it, and a few files every container expects. So this crate writes
//! the archive directly from the locally built binaries:
//!
//! * [`elf`] reads the binary's architecture (the image platform) and its ELF interpreter,
//! * [`ldd`] asks the host's dynamic loader which shared libraries the binary needs,
//! * [`rootfs`] lays out the file system (binary, libraries, `/etc/passwd`, `/tmp`, CA bundle) and
//!   writes it as one deterministic gzip layer,
//! * [`oci`] writes config, manifest, `index.json` and a Docker `manifest.json` into one tar that
//!   `docker load`, `ctr images import`, `kind load image-archive` and `skopeo` all accept.
//!
//! Everything is deterministic: the same binaries, libraries, CA bundle, reference and
//! `SOURCE_DATE_EPOCH` give byte-identical archives and so the same image digest.

pub mod digest;
pub mod elf;
pub mod ldd;
pub mod oci;
pub mod rootfs;

mod error;

pub use error::Error;
pub use oci::{Archive, ImageSpec};

/// Repository of the server image; equal to the operator's default (`naming::DEFAULT_IMAGE_REPOSITORY`).
pub const KCP_REPOSITORY: &str = "ghcr.io/kcp-rs/kcp";
/// Repository of the operator image, the one the Helm chart deploys.
pub const OPERATOR_REPOSITORY: &str = "ghcr.io/kcp-rs/kcp-operator";
/// Default tag of both images: `v` + workspace version, derived exactly as the operator derives
/// `naming::DEFAULT_IMAGE_TAG`, so the images written here are the ones the operator deploys.
pub const DEFAULT_TAG: &str = concat!("v", env!("CARGO_PKG_VERSION"));
/// Value of the `org.opencontainers.image.source` label unless told otherwise.
pub const DEFAULT_SOURCE: &str = "https://github.com/kcp-rs/kcp-rs";
/// Where binaries live inside the images.
pub const BIN_DIR: &str = "/usr/local/bin";
/// The commands of the server image besides `/usr/local/bin/kcp`: upstream's image layout, which
/// the operator's Deployments run (`/kcp start`, `/kcp-front-proxy`, `/cache-server`,
/// `/virtual-workspaces`). Each is a symbolic link to the one multi-call binary, which picks the
/// program by the name it was started as.
pub const KCP_COMMANDS: [&str; 4] = [
    "/kcp",
    "/kcp-front-proxy",
    "/cache-server",
    "/virtual-workspaces",
];
/// The CA bundle's path on Debian-family build machines and inside the images.
pub const CA_BUNDLE_PATH: &str = "/etc/ssl/certs/ca-certificates.crt";

/// Result of this crate's fallible functions.
pub type Result<T, E = Error> = std::result::Result<T, E>;
