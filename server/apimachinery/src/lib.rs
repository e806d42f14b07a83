//! Kubernetes API machinery without I/O: Status errors, object metadata, names and times,
//! validation rules, label and field selectors, and the three patch formats. Everything here is
//! a pure function of JSON values so the API server, controllers and tests share one exact
//! rendition of Kubernetes' rules.

pub mod fields;
pub mod gofmt;
pub mod jsonpath;
pub mod labels;
pub mod meta;
pub mod names;
pub mod patch;
pub mod protobuf;
pub mod status;
pub mod time;
pub mod validation;

pub use status::{ApiError, FieldError, FieldErrorKind, StatusReason};
