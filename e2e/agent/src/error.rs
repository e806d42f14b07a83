//! The agent's errors: one enum, so every failure reaches the log (or a pod's status) with the
//! context that says which object, file or command it was about.

use crate::images::ImageError;
use crate::ipam::IpamError;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    #[error("`{command}` failed: {message}")]
    Command { command: String, message: String },
    #[error("host API: {0}")]
    Kube(#[from] kube::Error),
    #[error("kubeconfig: {0}")]
    Kubeconfig(#[from] kube::config::KubeconfigError),
    #[error("{0}")]
    Image(#[from] ImageError),
    #[error("{0}")]
    Ipam(#[from] IpamError),
    #[error("{0}")]
    Json(#[from] serde_json::Error),
    #[error("image map {path}: {source}")]
    ImageMap {
        path: String,
        #[source]
        source: crate::images::ImageMapError,
    },
    #[error("{0}")]
    Config(String),
    /// A pod cannot start yet or at all (missing Secret, unknown volume type, ...); the message
    /// goes to the pod's status.
    #[error("{0}")]
    Pod(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Wraps an I/O error with what was being done.
pub fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
    let context = context.into();
    move |source| Error::Io { context, source }
}
