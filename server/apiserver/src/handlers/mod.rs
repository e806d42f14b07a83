//! HTTP handlers: resource verbs, discovery, OpenAPI, health and version.

pub mod discovery;
pub mod health;
pub mod negotiation;
pub mod openapi;
pub mod resource;
pub mod response;
