//! Admission of writes, per logical cluster: what a write must pass after authorization and
//! before storage, configured by objects of the write's own cluster (so nothing in one workspace
//! affects another), as upstream kcp runs kube's admission plugins per logical cluster.
//!
//! The store calls admission through [`kcp_registry::admission::Admit`]; this crate implements it.

pub mod attributes;
pub mod cel;
pub mod certificates;
pub mod chain;
pub mod configs;
pub mod matching;
pub mod object_count;
pub mod object_limit;
pub mod objects;
pub mod outcome;
pub mod policy;
pub mod quota;
pub mod sources;
pub mod webhook;

pub use attributes::Attributes;
pub use outcome::Outcome;
