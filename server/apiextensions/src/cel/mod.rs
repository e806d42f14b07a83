//! `x-kubernetes-validations`: CEL rules compiled once per schema and evaluated per object.
//!
//! Parsing and evaluation come from the `cel` crate with Kubernetes' function libraries from
//! `kube-cel`; what Kubernetes adds around them lives here: which identifiers and fields a rule
//! may use, how JSON becomes typed CEL values (escaped property names), when transition rules run
//! (`oldSelf` correlated by map key and list-map key), the message/reason/fieldPath of a failure,
//! and a cost bound so a pathological rule is refused before it can hang a request. The same
//! machinery runs [`transform`]ations, expressions that compute a value instead of checking one.

mod cost;
pub(crate) mod eval;
pub(crate) mod rule;
pub(crate) mod transform;
pub(crate) mod value;
