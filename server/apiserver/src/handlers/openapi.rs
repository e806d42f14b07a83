//! `/openapi/v2` and `/openapi/v3[/<group-version>]`, which kubectl uses for `explain` and for
//! client-side validation in `apply`.
//!
//! The documents are computed once per set of served types and shared by every logical cluster; only
//! the v3 index differs per cluster, because its URLs must point back into the cluster it was asked in.

use http::{HeaderValue, Response, header};
use kcp_openapi::OpenApiDocuments;

use super::negotiation::accept_ranges;
use super::response::{self, Body};

/// What client-go asks for, and the spelling kube-apiserver answers with.
const V2_PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";
const V2_PROTOBUF_RESPONSE: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

/// Serves an OpenAPI path (without the cluster prefix; `cluster_base` is that prefix, e.g.
/// `/clusters/root`, or empty); `None` if the path is not an OpenAPI path.
pub fn serve(
    docs: &OpenApiDocuments,
    path: &str,
    accept: Option<&str>,
    cluster_base: &str,
) -> Option<Response<Body>> {
    let path = path.trim_end_matches('/');
    if path == "/openapi/v2" {
        // client-go asks for v2 only as gnostic protobuf (kubectl 1.27/1.28 need it before apply).
        let wants_protobuf = accept_ranges(accept)
            .iter()
            .any(|r| r.essence == V2_PROTOBUF || r.essence == V2_PROTOBUF_RESPONSE);
        let mut response = if wants_protobuf {
            response::bytes(200, V2_PROTOBUF_RESPONSE, docs.v2_protobuf().to_vec())
        } else {
            response::bytes(200, "application/json", docs.v2_json().to_vec())
        };
        if let Ok(etag) = HeaderValue::from_str(&format!("\"{}\"", docs.v2_hash())) {
            response.headers_mut().insert(header::ETAG, etag);
        }
        return Some(response);
    }
    if path == "/openapi/v3" {
        return Some(response::bytes(
            200,
            "application/json",
            docs.v3_index_json(cluster_base),
        ));
    }
    let group_version = path.strip_prefix("/openapi/v3/")?;
    Some(match docs.v3_group_version_json(group_version) {
        Some((bytes, hash)) => {
            let mut response = response::bytes(200, "application/json", bytes.to_vec());
            let headers = response.headers_mut();
            if let Ok(etag) = HeaderValue::from_str(&format!("\"{hash}\"")) {
                headers.insert(header::ETAG, etag);
            }
            headers.insert(
                header::CACHE_CONTROL,
                HeaderValue::from_static("public, immutable"),
            );
            response
        }
        None => response::text(404, "404 page not found"),
    })
}
