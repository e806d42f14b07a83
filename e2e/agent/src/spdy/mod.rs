//! SPDY/3.1, the stream multiplexing kubectl speaks to kubelet for `exec`, `attach` and
//! `port-forward` (kubectl 1.27-1.29 always; newer ones when a WebSocket upgrade is refused, and
//! inside a WebSocket for `port-forward`). No maintained SPDY crate exists on crates.io (kube-rs
//! itself speaks only WebSockets), and the part kubelet needs is small: [`frame`] (the framing),
//! [`headers`] (zlib-compressed header blocks with the draft's dictionary) and [`session`] (the
//! server side of a connection whose streams the client opens).

pub mod frame;
pub mod headers;
pub mod session;
