//! The one error type of the crate, so the CLI can print every failure with the file it is about.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: not an ELF file", path.display())]
    NotElf { path: PathBuf },
    #[error("{}: malformed ELF file: {reason}", path.display())]
    MalformedElf { path: PathBuf, reason: &'static str },
    #[error("{}: ELF machine {machine} has no OCI architecture known here", path.display())]
    UnsupportedMachine { path: PathBuf, machine: u16 },
    #[error(
        "{}: a dynamically linked {binary} binary, but this {host} machine's ldd can only resolve \
         libraries of {host} binaries; build the image on a {binary} machine or with e2e/images/Containerfile",
        path.display()
    )]
    ForeignArchitecture {
        path: PathBuf,
        binary: String,
        host: String,
    },
    #[error("running {command}: {source}")]
    Spawn {
        command: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{command} failed ({status}): {stderr}")]
    CommandFailed {
        command: String,
        status: std::process::ExitStatus,
        stderr: String,
    },
    #[error("{}: needs {library}, which the dynamic loader does not find", path.display())]
    LibraryNotFound { path: PathBuf, library: String },
    #[error("{}: unexpected ldd output line {line:?}", path.display())]
    LddOutput { path: PathBuf, line: String },
    #[error("path {path:?} cannot be placed in an image: {reason}")]
    ImagePath { path: String, reason: &'static str },
    #[error("two different files for {path} in one image")]
    DuplicatePath { path: String },
    #[error("invalid image reference {reference:?}: {reason}")]
    Reference {
        reference: String,
        reason: &'static str,
    },
    #[error("SOURCE_DATE_EPOCH={value:?} is not a number of seconds")]
    SourceDateEpoch { value: String },
    #[error("encoding {what}: {source}")]
    Json {
        what: &'static str,
        #[source]
        source: serde_json::Error,
    },
    #[error("{0}")]
    Usage(String),
}

impl Error {
    /// An I/O error about `path`.
    pub fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Error {
        let path = path.into();
        move |source| Error::Io { path, source }
    }
}
