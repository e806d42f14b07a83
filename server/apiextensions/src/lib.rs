//! CustomResourceDefinitions without I/O: CRD admission, structural schemas (validation, pruning,
//! defaulting, CEL rules) and server-side field validation.
//!
//! The API server owns storage and HTTP; everything here is a pure function of JSON values so
//! that the registry, controllers and tests share one rendition of kube-apiextensions' rules and
//! messages, and so that a schema is compiled once per CRD version and shared by every logical
//! cluster that installs the same CRD.

mod cel;
mod path;
mod quote;

pub mod crd;
pub mod schema;
pub mod strict;

pub use cel::transform::{Transformation, TransformationError, cel_to_json};
pub use cel::value::RESERVED_WORDS as CEL_RESERVED_WORDS;
pub use crd::{
    CrdError, CrdInfo, CrdVersion, PrinterColumn, ScaleSpec, validate_crd, validate_crd_update,
};
pub use schema::StructuralSchema;
