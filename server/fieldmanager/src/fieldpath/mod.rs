//! Field paths and field sets: the vocabulary of field ownership.
//!
//! Server-side apply records, per manager, the set of fields it owns. This module names
//! fields ([`PathElement`], [`FieldPath`]), combines sets of them ([`FieldSet`]) and reads and
//! writes the FieldsV1 JSON Kubernetes stores them in. Nothing here knows about schemas except
//! [`FieldSet::from_object`], which asks the typed walkers.

mod element;
mod fieldsv1;
pub(crate) mod gojson;
mod set;

pub(crate) use element::values_equal;
pub use element::{FieldPath, PathElement};
pub use fieldsv1::FieldsV1Error;
pub use set::FieldSet;
