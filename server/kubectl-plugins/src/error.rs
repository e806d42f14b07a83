//! One error type for both plugins, so `main` can print every failure the way kubectl does:
//! Kubernetes `Status` responses as `Error from server (Reason): message`, the rest as `error: ...`.

use std::path::PathBuf;

/// A failed API request, carrying the fields of the Kubernetes `Status` kubectl prints.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ApiError {
    pub code: u16,
    pub reason: String,
    pub message: String,
}

impl ApiError {
    pub fn is_not_found(&self) -> bool {
        self.reason == "NotFound" || (self.reason.is_empty() && self.code == 404)
    }

    pub fn is_forbidden(&self) -> bool {
        self.reason == "Forbidden" || (self.reason.is_empty() && self.code == 403)
    }

    pub fn is_already_exists(&self) -> bool {
        self.reason == "AlreadyExists"
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    Message(String),
    #[error(transparent)]
    Api(#[from] ApiError),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("error loading config file \"{path}\": {source}")]
    KubeconfigSyntax {
        path: PathBuf,
        source: yaml_serde::Error,
    },
    #[error("{}", chain(.0))]
    Http(#[from] reqwest::Error),
    /// What the command was doing when `source` failed, printed as upstream's `%w` wrapping.
    #[error("{context}: {source}")]
    Context { context: String, source: Box<Error> },
}

impl Error {
    pub fn msg(message: impl Into<String>) -> Self {
        Self::Message(message.into())
    }

    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            path: path.into(),
            source,
        }
    }

    /// Prefixes the error with what the command was doing, as upstream's `fmt.Errorf("...: %w")`.
    pub fn context(self, context: impl Into<String>) -> Self {
        Self::Context {
            context: context.into(),
            source: Box::new(self),
        }
    }

    /// The API error behind this error, if the server answered with one.
    pub fn api(&self) -> Option<&ApiError> {
        match self {
            Self::Api(api) => Some(api),
            _ => None,
        }
    }
}

/// reqwest's own message hides the cause ("error sending request"); kubectl users expect the
/// reason (connection refused, certificate unknown...), so the source chain is appended.
fn chain(err: &reqwest::Error) -> String {
    let mut out = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        out.push_str(": ");
        out.push_str(&cause.to_string());
        source = cause.source();
    }
    out
}
