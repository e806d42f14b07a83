//! `kcp-images images`: writes `kcp.tar` and `kcp-operator.tar`, OCI image archives of the locally
//! built server and operator, without Docker (see the library docs and docs/images.md).
//!
//! Why a subcommand: `.cargo/config.toml` aliases `cargo xtask` to this binary, so
//! `cargo xtask images ...` (and the shorter alias `cargo images ...`) reach it; further build
//! steps can become further subcommands.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use clap::{Parser, Subcommand, ValueEnum};
use kcp_images::oci::{self, ImageSpec};
use kcp_images::{Error, Result};

#[derive(Parser, Debug)]
#[command(
    name = "kcp-images",
    version,
    about = "Build steps of kcp-rs that need no Docker"
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Write OCI image archives (`<out>/kcp.tar`, `<out>/kcp-operator.tar`) that load with
    /// `docker load`, `ctr images import` and `kind load image-archive`.
    Images(ImagesArgs),
}

#[derive(Parser, Debug)]
struct ImagesArgs {
    /// Cargo profile whose binaries go into the images (`<target dir>/<profile>`).
    #[arg(long, value_enum, default_value_t = Profile::Release, conflicts_with = "binaries_dir")]
    profile: Profile,
    /// Take `kcp` and `kcp-operator` from this directory instead (implies --no-build).
    #[arg(long, value_name = "DIR")]
    binaries_dir: Option<PathBuf>,
    /// Do not run `cargo build` first.
    #[arg(long)]
    no_build: bool,
    /// Where the archives go [default: <target dir>/images, honouring CARGO_TARGET_DIR].
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Tag of both images; the default is the one the operator deploys by default.
    #[arg(long, default_value = kcp_images::DEFAULT_TAG)]
    tag: String,
    /// Repository of the server image.
    #[arg(long, default_value = kcp_images::KCP_REPOSITORY)]
    kcp_repository: String,
    /// Repository of the operator image.
    #[arg(long, default_value = kcp_images::OPERATOR_REPOSITORY)]
    operator_repository: String,
    /// Only these images (repeatable) [default: both].
    #[arg(long, value_enum, value_name = "IMAGE")]
    only: Vec<Image>,
    /// CA bundle to copy to /etc/ssl/certs/ca-certificates.crt; skipped with a warning when the
    /// default is missing.
    #[arg(long, value_name = "FILE", default_value = kcp_images::CA_BUNDLE_PATH)]
    ca_bundle: PathBuf,
    /// Value of the org.opencontainers.image.source label.
    #[arg(long, value_name = "URL", default_value = kcp_images::DEFAULT_SOURCE)]
    source_url: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Profile {
    Release,
    Debug,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, ValueEnum)]
enum Image {
    Kcp,
    KcpOperator,
}

impl Image {
    /// Cargo package, binary and archive name.
    fn name(self) -> &'static str {
        match self {
            Image::Kcp => "kcp",
            Image::KcpOperator => "kcp-operator",
        }
    }

    /// Symbolic links to the binary: the server's upstream command paths.
    fn commands(self) -> Vec<String> {
        match self {
            Image::Kcp => kcp_images::KCP_COMMANDS.map(str::to_owned).to_vec(),
            Image::KcpOperator => Vec::new(),
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Cmd::Images(args) => images(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("kcp-images: {err}");
            ExitCode::FAILURE
        }
    }
}

fn images(args: ImagesArgs) -> Result<()> {
    let mut selected = args.only.clone();
    if selected.is_empty() {
        selected = vec![Image::Kcp, Image::KcpOperator];
    }
    selected.sort();
    selected.dedup();

    let workspace = workspace_manifest();
    let need_target_dir = args.binaries_dir.is_none() || args.out.is_none();
    let target_dir = if need_target_dir {
        Some(target_directory(&workspace)?)
    } else {
        None
    };
    let binaries_dir = match (&args.binaries_dir, &target_dir) {
        (Some(dir), _) => dir.clone(),
        (None, Some(target)) => target.join(match args.profile {
            Profile::Release => "release",
            Profile::Debug => "debug",
        }),
        (None, None) => return Err(Error::Usage("no binaries directory".into())),
    };
    let out = match (&args.out, &target_dir) {
        (Some(dir), _) => dir.clone(),
        (None, Some(target)) => target.join("images"),
        (None, None) => return Err(Error::Usage("no output directory".into())),
    };

    if args.binaries_dir.is_none() && !args.no_build {
        build(&workspace, args.profile, &selected)?;
    }

    let ca_bundle = if args.ca_bundle.is_file() {
        Some(args.ca_bundle.clone())
    } else if args.ca_bundle == Path::new(kcp_images::CA_BUNDLE_PATH) {
        eprintln!(
            "kcp-images: warning: {} not found, images get no CA bundle",
            args.ca_bundle.display()
        );
        None
    } else {
        return Err(Error::Usage(format!(
            "--ca-bundle {}: no such file",
            args.ca_bundle.display()
        )));
    };
    let source_date_epoch = oci::source_date_epoch()?;

    for image in selected {
        let spec = ImageSpec {
            repository: match image {
                Image::Kcp => args.kcp_repository.clone(),
                Image::KcpOperator => args.operator_repository.clone(),
            },
            tag: args.tag.clone(),
            binary: binaries_dir.join(image.name()),
            name: image.name().to_owned(),
            commands: image.commands(),
            ca_bundle: ca_bundle.clone(),
            source_date_epoch,
            source_url: args.source_url.clone(),
        };
        let archive = oci::write_archive(&spec, &out.join(format!("{}.tar", image.name())))?;
        println!(
            "{}\t{}\t{}\t{}",
            archive.reference,
            archive.path.display(),
            archive.manifest_digest,
            archive.architecture
        );
    }
    Ok(())
}

/// The workspace's Cargo.toml, found from this crate's compile-time location (e2e/images), so
/// the command works from any directory.
fn workspace_manifest() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../Cargo.toml")
}

/// The cargo binary that runs us (`cargo run` sets CARGO), else `cargo` from PATH.
fn cargo() -> Command {
    Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
}

/// The workspace's target directory as cargo sees it (CARGO_TARGET_DIR, config, default).
fn target_directory(manifest: &Path) -> Result<PathBuf> {
    let mut command = cargo();
    command
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--manifest-path",
        ])
        .arg(manifest);
    let description = format!("cargo metadata --manifest-path {}", manifest.display());
    let output = command.output().map_err(|source| Error::Spawn {
        command: description.clone(),
        source,
    })?;
    if !output.status.success() {
        return Err(Error::CommandFailed {
            command: description,
            status: output.status,
            stderr: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        });
    }
    let metadata: serde_json::Value =
        serde_json::from_slice(&output.stdout).map_err(|source| Error::Json {
            what: "cargo metadata output",
            source,
        })?;
    metadata
        .get("target_directory")
        .and_then(|v| v.as_str())
        .map(PathBuf::from)
        .ok_or_else(|| Error::Usage("cargo metadata reported no target_directory".into()))
}

/// `cargo build [--release] -p kcp -p kcp-operator` (only the selected packages).
fn build(manifest: &Path, profile: Profile, images: &[Image]) -> Result<()> {
    let mut command = cargo();
    command.arg("build").arg("--manifest-path").arg(manifest);
    if profile == Profile::Release {
        command.arg("--release");
    }
    for image in images {
        command.args(["-p", image.name()]);
    }
    let description = format!("{command:?}");
    eprintln!("kcp-images: {description}");
    let status = command.status().map_err(|source| Error::Spawn {
        command: description.clone(),
        source,
    })?;
    if !status.success() {
        return Err(Error::CommandFailed {
            command: description,
            status,
            stderr: "see the build output above".into(),
        });
    }
    Ok(())
}
