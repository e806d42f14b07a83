//! kcp's front-proxy (upstream `kcp-front-proxy`, `pkg/proxy` and `pkg/index`): the one endpoint
//! users of a sharded kcp talk to. It authenticates the client, replaces any `X-Remote-*` headers
//! with the identity it vouches for, finds the shard that holds the workspace a `/clusters/<path>`
//! request names and forwards the request there, streaming, with the logical cluster's name in
//! place of the path.
//!
//! Two halves meet in [`route`]: the index (which shard holds which logical cluster, learnt from
//! watches of every shard) answers [`route::Resolve`], and the proxy asks it once per request.

pub mod index;
pub mod route;
