//! Server-side apply without I/O: structured-merge-diff and `metadata.managedFields`.
//!
//! Kubernetes records, for every object, which manager owns which fields, and merges applied
//! configurations by schema-driven rules (structured-merge-diff). No Rust crate does this, and
//! controllers, GitOps tools and `kubectl apply --server-side` depend on the exact behaviour:
//! which fields merge, which conflict, which disappear, and the FieldsV1 text they compare. This
//! crate is that logic as pure functions of JSON values, for the API server to call on apply
//! patches ([`apply`]) and on every other write ([`update`]).
//!
//! Layers, each usable alone: [`fieldpath`] (paths, sets, FieldsV1), [`TypeSchema`] (merge
//! rules from OpenAPI or deduced), `typed` (walkers: field sets, merge, compare, remove),
//! [`managed`] (managedFields entries), [`conflict`] (409 errors) and [`apply`](mod@apply)
//! (the field manager itself).

pub mod apply;
pub mod conflict;
pub mod fieldpath;
pub mod managed;
mod schema;
mod typed;

pub use apply::{ApplyError, Request, apply, update};
pub use conflict::{Conflict, Conflicts};
pub use fieldpath::{FieldPath, FieldSet, FieldsV1Error, PathElement};
pub use managed::{ManagedEntry, ManagedFields, ManagedFieldsError, Operation};
pub use schema::TypeSchema;
pub use typed::TypeError;
