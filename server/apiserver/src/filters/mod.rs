//! The filters every request passes before a handler: authentication and authorization.
//!
//! (The panic guard and the access log wrap the whole chain in [`crate::server`].)

pub mod authentication;
pub mod authorization;

pub use authentication::UserInfo;
