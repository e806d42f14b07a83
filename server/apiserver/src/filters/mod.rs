//! The filters every request passes before a handler: authentication, impersonation and
//! authorization.
//!
//! (The panic guard and the access log wrap the whole chain in [`crate::server`].)

pub mod authentication;
pub mod authorization;
pub mod impersonation;

pub use authentication::UserInfo;
