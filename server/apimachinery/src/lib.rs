//! Kubernetes API machinery without I/O: Status errors, object metadata, names and times,
//! validation rules, label and field selectors, the three patch formats, Go's duration syntax and
//! Go's renderings of values and errors. Everything here is a pure function of its input so the
//! API server, controllers, the operator and tests share one exact rendition of Kubernetes' rules.

pub mod duration;
pub mod fields;
pub mod gofmt;
pub mod jsonpath;
pub mod labels;
pub mod meta;
pub mod names;
pub mod openapi_ref;
pub mod patch;
pub mod protobuf;
pub mod status;
pub mod time;
pub mod validation;
pub mod version_priority;
pub mod watch;

pub use status::{ApiError, FieldError, FieldErrorKind, StatusReason};
