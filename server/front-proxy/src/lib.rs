//! kcp's front-proxy (upstream `kcp-front-proxy`, `pkg/proxy` and `pkg/index`): the one endpoint
//! users of a sharded kcp talk to. It authenticates the client, replaces any `X-Remote-*` headers
//! with the identity it vouches for, finds the shard that holds the workspace a `/clusters/<path>`
//! request names and forwards the request there, streaming, with the logical cluster's name in
//! place of the path.
//!
//! Two halves meet in [`route`]: the index (which shard holds which logical cluster, learnt from
//! watches of every shard) answers [`route::Resolve`], and the proxy asks it once per request.
//! The proxy's half: [`mapping`] (the mapping file), [`identity`] and [`groups`] (what it
//! vouches for; whether a service-account token's objects still exist is
//! [`kcp_authn::ServiceAccountLookup`]'s question, asked at the shard the index names),
//! [`request_path`] (what a path names), [`backend`] and [`forward`] (the
//! connections and the relaying), [`metrics`] and [`metrics_access`] (who may read them), [`services`] (where virtual-workspace requests
//! go with several shards), and [`proxy`], the handler that puts them in order.

pub mod backend;
pub mod forward;
pub mod groups;
pub mod identity;
pub mod index;
pub mod mapping;
pub mod metrics;
pub mod metrics_access;
pub mod proxy;
pub mod request_path;
pub mod route;
pub mod services;

pub use proxy::{FrontProxy, ProxyConfig, ProxyError};
