//! Content negotiation: which encoding a client accepts, and what a request body is.
//!
//! `kubectl get` asks for `application/json;as=Table;v=v1;g=meta.k8s.io` first; metadata-only clients
//! ask for `as=PartialObjectMetadata(List)`; humans with curl may ask for YAML. Anything we cannot
//! produce is `406`, anything we cannot read is `415`, as kube-apiserver answers.

use http::{HeaderValue, Response, header};
use kcp_apimachinery::{ApiError, protobuf};

use crate::handlers::response::{self, Body};

use kcp_registry::table::IncludeObject;

/// How a response is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    Json,
    Yaml,
    Table(IncludeObject),
    /// `PartialObjectMetadata` for objects, `PartialObjectMetadataList` for lists, in JSON or (as
    /// client-go's metadata client asks first) Kubernetes protobuf.
    PartialMetadata(Encoding),
    /// Kubernetes protobuf, which typed clients ask for first (JSON when a kind has no encoding).
    Protobuf,
}

/// JSON or Kubernetes protobuf, for outputs offered in both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Json,
    Protobuf,
}

/// One media range of an Accept header, with its parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MediaRange {
    pub essence: String,
    params: Vec<(String, String)>,
}

impl MediaRange {
    pub fn param(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    fn parse(raw: &str) -> MediaRange {
        let mut parts = raw.split(';');
        let essence = parts.next().unwrap_or("").trim().to_ascii_lowercase();
        let params = parts
            .filter_map(|p| p.split_once('='))
            .map(|(k, v)| {
                (
                    k.trim().to_ascii_lowercase(),
                    v.trim().trim_matches('"').to_string(),
                )
            })
            .collect();
        MediaRange { essence, params }
    }
}

/// The media ranges of an Accept header in the client's order (q-values are not used by Kubernetes
/// clients; order is their preference).
pub fn accept_ranges(accept: Option<&str>) -> Vec<MediaRange> {
    let accept = accept.unwrap_or("").trim();
    if accept.is_empty() {
        return vec![MediaRange::parse("*/*")];
    }
    accept
        .split(',')
        .map(MediaRange::parse)
        .filter(|r| !r.essence.is_empty())
        .collect()
}

fn is_json(essence: &str) -> bool {
    matches!(essence, "application/json" | "*/*" | "application/*")
}

/// Picks the output for a resource response. `include_object` is the `includeObject` query parameter.
pub fn negotiate(accept: Option<&str>, include_object: Option<&str>) -> Result<Output, ApiError> {
    let include = match include_object {
        None | Some("") | Some("Metadata") => IncludeObject::Metadata,
        Some("None") => IncludeObject::None,
        Some("Object") => IncludeObject::Object,
        Some(other) => {
            return Err(ApiError::bad_request(&format!(
                "includeObject: Unsupported value: {other:?}: supported values: \"None\", \"Metadata\", \"Object\""
            )));
        }
    };
    let ranges = accept_ranges(accept);
    for range in &ranges {
        let meta_group = range.param("g") == Some("meta.k8s.io")
            && matches!(range.param("v"), Some("v1" | "v1beta1"));
        match (range.essence.as_str(), range.param("as")) {
            (e, Some("Table")) if is_json(e) && meta_group => return Ok(Output::Table(include)),
            (e, Some("PartialObjectMetadata" | "PartialObjectMetadataList"))
                if is_json(e) && meta_group =>
            {
                return Ok(Output::PartialMetadata(Encoding::Json));
            }
            (
                protobuf::CONTENT_TYPE,
                Some("PartialObjectMetadata" | "PartialObjectMetadataList"),
            ) if meta_group => {
                return Ok(Output::PartialMetadata(Encoding::Protobuf));
            }
            (e, None) if is_json(e) => return Ok(Output::Json),
            ("application/yaml", None) => return Ok(Output::Yaml),
            (protobuf::CONTENT_TYPE, None) => return Ok(Output::Protobuf),
            _ => continue,
        }
    }
    Err(ApiError::not_acceptable(&format!(
        "only the following media types are accepted: application/json, application/yaml, \
         application/json;as=Table;v=v1;g=meta.k8s.io (asked for {:?})",
        accept.unwrap_or("")
    )))
}

/// A failed request's `Status` in protobuf, when the client asked for protobuf and the
/// resource's kind (`api_version`, `kind`) has a protobuf encoding: kube-apiserver encodes an
/// error with the serializer it negotiated for the response, so client-go's protobuf clients
/// read a protobuf Status for built-in kinds and JSON for custom resources. `None`: answer in
/// JSON, as [`response::error`] does.
pub fn protobuf_error(
    accept: Option<&str>,
    api_version: &str,
    kind: &str,
    error: &ApiError,
) -> Option<Response<Body>> {
    if negotiate(accept, None).ok()? != Output::Protobuf || !protobuf::supports(api_version, kind) {
        return None;
    }
    let bytes = protobuf::encode(&error.to_status()).ok()?;
    let mut response = response::error(error);
    *response.body_mut() = response::full(bytes);
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(protobuf::CONTENT_TYPE),
    );
    Some(response)
}

/// How a create/update body is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyFormat {
    Json,
    Yaml,
    Protobuf,
}

pub fn body_format(content_type: Option<&str>) -> Result<BodyFormat, ApiError> {
    let essence = MediaRange::parse(content_type.unwrap_or("application/json")).essence;
    match essence.as_str() {
        "application/json" | "" => Ok(BodyFormat::Json),
        "application/yaml" => Ok(BodyFormat::Yaml),
        protobuf::CONTENT_TYPE => Ok(BodyFormat::Protobuf),
        other => Err(ApiError::unsupported_media_type(other)),
    }
}

/// The four patch types Kubernetes defines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    Json,
    Merge,
    Strategic,
    Apply,
}

pub fn patch_type(content_type: Option<&str>) -> Result<PatchType, ApiError> {
    let essence = MediaRange::parse(content_type.unwrap_or("")).essence;
    match essence.as_str() {
        "application/json-patch+json" => Ok(PatchType::Json),
        "application/merge-patch+json" => Ok(PatchType::Merge),
        "application/strategic-merge-patch+json" => Ok(PatchType::Strategic),
        "application/apply-patch+yaml" | "application/apply-patch+json" => Ok(PatchType::Apply),
        other => Err(ApiError::unsupported_media_type(other)),
    }
}

/// The request body types kube-apiserver accepts for custom resources (CBOR is behind a feature
/// gate that is off by default), listed in its 415 answer to a protobuf body.
const CUSTOM_RESOURCE_BODY_TYPES: &[&str] = &["application/json", "application/yaml"];

/// Decodes a JSON, YAML or Kubernetes protobuf body into a JSON value.
pub fn decode_body(format: BodyFormat, body: &[u8]) -> Result<serde_json::Value, ApiError> {
    let unknown = |e: &dyn std::fmt::Display| {
        ApiError::bad_request(&format!(
            "the body of the request was in an unknown format: {e}"
        ))
    };
    match format {
        BodyFormat::Json => serde_json::from_slice(body).map_err(|e| unknown(&e)),
        BodyFormat::Yaml => yaml_serde::from_slice(body).map_err(|e| unknown(&e)),
        BodyFormat::Protobuf => protobuf::decode(body).map_err(|e| {
            if e.is_unsupported() {
                // A kind without a protobuf encoding is a custom resource: kube-apiserver's
                // serializer for those offers JSON and YAML only, and says so.
                ApiError::unsupported_media_type_accepting(CUSTOM_RESOURCE_BODY_TYPES)
            } else {
                unknown(&e)
            }
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubectl_get_gets_a_table() {
        let accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
        assert_eq!(
            negotiate(Some(accept), None).unwrap(),
            Output::Table(IncludeObject::Metadata)
        );
    }

    #[test]
    fn plain_and_fallbacks() {
        assert_eq!(negotiate(None, None).unwrap(), Output::Json);
        assert_eq!(
            negotiate(Some("application/yaml"), None).unwrap(),
            Output::Yaml
        );
        assert_eq!(
            negotiate(
                Some("application/vnd.kubernetes.protobuf, application/json"),
                None
            )
            .unwrap(),
            Output::Protobuf
        );
        assert_eq!(
            negotiate(
                Some("application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"),
                None
            )
            .unwrap(),
            Output::PartialMetadata(Encoding::Json)
        );
        // client-go's metadata client: protobuf first, then JSON.
        assert_eq!(
            negotiate(
                Some(
                    "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
                ),
                None
            )
            .unwrap(),
            Output::PartialMetadata(Encoding::Protobuf)
        );
        assert_eq!(
            negotiate(Some("application/vnd.kubernetes.protobuf"), None).unwrap(),
            Output::Protobuf
        );
        assert_eq!(
            negotiate(Some("application/cbor"), None).unwrap_err().code,
            406
        );
        assert_eq!(negotiate(Some("text/html"), None).unwrap_err().code, 406);
        assert_eq!(negotiate(None, Some("Everything")).unwrap_err().code, 400);
    }

    #[test]
    fn bodies_and_patches() {
        assert_eq!(
            body_format(Some("application/json; charset=utf-8")).unwrap(),
            BodyFormat::Json
        );
        assert_eq!(body_format(Some("text/plain")).unwrap_err().code, 415);
        assert_eq!(
            patch_type(Some("application/merge-patch+json")).unwrap(),
            PatchType::Merge
        );
        assert_eq!(patch_type(Some("application/json")).unwrap_err().code, 415);
        assert_eq!(
            decode_body(BodyFormat::Json, b"{not json")
                .unwrap_err()
                .code,
            400
        );
        assert_eq!(decode_body(BodyFormat::Yaml, b"a: 1\n").unwrap()["a"], 1);
        assert_eq!(
            decode_body(BodyFormat::Protobuf, b"k8s\0garbage")
                .unwrap_err()
                .code,
            400
        );
    }

    #[test]
    fn errors_are_protobuf_for_built_in_kinds_only() {
        let accept = Some("application/vnd.kubernetes.protobuf, application/json");
        let error = ApiError::not_found("", "configmaps", "missing");
        let response = protobuf_error(accept, "v1", "ConfigMap", &error).unwrap();
        assert_eq!(response.status(), 404);
        assert_eq!(
            response.headers()[header::CONTENT_TYPE],
            protobuf::CONTENT_TYPE
        );
        // A custom resource, or a client preferring JSON: JSON, from response::error.
        assert!(protobuf_error(accept, "example.com/v1", "Widget", &error).is_none());
        assert!(protobuf_error(Some("application/json"), "v1", "ConfigMap", &error).is_none());
    }

    #[test]
    fn protobuf_custom_resources_are_refused_as_kube_does() {
        // runtime.Unknown{typeMeta: {apiVersion: "example.com/v1", kind: "Widget"}, raw: ""}.
        let mut body = b"k8s\0\x0a\x18\x0a\x0eexample.com/v1\x12\x06Widget\x12\x00".to_vec();
        body.extend(b"\x1a\x00\x22\x00");
        let err = decode_body(BodyFormat::Protobuf, &body).unwrap_err();
        assert_eq!(err.code, 415);
        assert_eq!(
            err.message,
            "the body of the request was in an unknown format - accepted media types include: \
             application/json, application/yaml"
        );
        // A built-in kind with a table decodes: apiextensions.k8s.io included.
        let crd = kcp_apimachinery::protobuf::encode(&serde_json::json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"plural": "widgets", "kind": "Widget"}}
        }))
        .unwrap();
        let decoded = decode_body(BodyFormat::Protobuf, &crd).unwrap();
        assert_eq!(decoded["spec"]["names"]["plural"], "widgets");
    }
}
