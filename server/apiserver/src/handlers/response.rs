//! Building HTTP responses: objects in the negotiated encoding (whole, or streamed as made), and
//! errors as `metav1.Status`.

use std::convert::Infallible;

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use kcp_apimachinery::ApiError;
use serde_json::Value;

/// The body type of every response (whole documents and watch streams alike).
pub type Body = BoxBody<Bytes, Infallible>;

pub fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into()).boxed()
}

/// A response with a body and content type.
pub fn bytes(code: u16, content_type: &str, body: impl Into<Bytes>) -> Response<Body> {
    streamed(code, content_type, full(body))
}

/// A response with a content type and a body of any kind (a stream sent as it is made).
pub fn streamed(code: u16, content_type: &str, body: Body) -> Response<Body> {
    let mut response = Response::new(body);
    *response.status_mut() =
        StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    if let Ok(value) = HeaderValue::from_str(content_type) {
        response.headers_mut().insert(header::CONTENT_TYPE, value);
    }
    response
}

pub fn json(code: u16, value: &Value) -> Response<Body> {
    bytes(
        code,
        "application/json",
        serde_json::to_vec(value).unwrap_or_default(),
    )
}

pub fn yaml(code: u16, value: &Value) -> Response<Body> {
    match yaml_serde::to_string(value) {
        Ok(text) => bytes(code, "application/yaml", text),
        Err(e) => error(&ApiError::internal_error(&format!("encoding YAML: {e}"))),
    }
}

/// An error as the `Status` object clients decode.
pub fn error(error: &ApiError) -> Response<Body> {
    let mut response = json(error.code, &error.to_status());
    if let Some(seconds) = error.details.as_ref().and_then(|d| d.retry_after_seconds)
        && let Ok(value) = HeaderValue::from_str(&seconds.to_string())
    {
        response.headers_mut().insert(header::RETRY_AFTER, value);
    }
    response
}

pub fn text(code: u16, body: impl Into<Bytes>) -> Response<Body> {
    bytes(code, "text/plain; charset=utf-8", body)
}

/// Adds `Warning: 299 - "..."` headers, which kubectl prints as `Warning: ...`.
pub fn with_warnings(mut response: Response<Body>, warnings: &[String]) -> Response<Body> {
    for warning in warnings {
        let escaped = warning.replace('\\', "\\\\").replace('"', "\\\"");
        if let Ok(value) = HeaderValue::from_str(&format!("299 - \"{escaped}\"")) {
            response.headers_mut().append(header::WARNING, value);
        }
    }
    response
}
