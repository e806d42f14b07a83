//! Rendering objects and lists in the negotiated encoding (JSON, YAML, Table, PartialObjectMetadata).

use http::Response;
use kcp_apimachinery::{ApiError, meta, protobuf};
use serde_json::{Value, json};

use super::Resolved;
use crate::handlers::negotiation::{self, Encoding, Output};
use crate::handlers::response::{self, Body};
use kcp_registry::table;

impl Resolved<'_> {
    pub fn output(&self) -> Result<Output, ApiError> {
        if self.can_be_table() {
            return negotiation::negotiate(
                self.request.accept.as_deref(),
                self.request.query.get("includeObject"),
            );
        }
        // kube-apiserver offers `as=Table` only where the endpoint has a TableConvertor
        // (`RequestScope.AllowsMediaTypeTransform`): a client that asks for a Table first falls back
        // to its next media range, one that asks for nothing else gets 406.
        self.output_without(
            |range| range.param("as") == Some("Table"),
            &[
                "application/json",
                "application/yaml",
                protobuf::CONTENT_TYPE,
            ],
        )
    }

    /// The output negotiated as if the client had not listed the media ranges `unusable` picks;
    /// 406 naming `accepted` when it listed nothing else.
    pub fn output_without(
        &self,
        unusable: impl Fn(&negotiation::MediaRange) -> bool,
        accepted: &[&str],
    ) -> Result<Output, ApiError> {
        let accept = self.request.accept.as_deref();
        let usable = accept.map(|accept| {
            accept
                .split(',')
                .filter(|range| {
                    negotiation::accept_ranges(Some(range))
                        .first()
                        .is_none_or(|r| !unusable(r))
                })
                .collect::<Vec<_>>()
                .join(",")
        });
        if let Some(rest) = &usable
            && rest.trim().is_empty()
            && accept.is_some_and(|a| !a.trim().is_empty())
        {
            return Err(ApiError::not_acceptable_media_types(accepted));
        }
        negotiation::negotiate(usable.as_deref(), self.request.query.get("includeObject"))
    }

    /// Whether responses of this endpoint can be rendered as a Table: not for the review APIs and
    /// TokenRequest, which kube-apiserver serves without a TableConvertor.
    fn can_be_table(&self) -> bool {
        self.rt.strategy.review().is_none()
            && self.request.info.subresource.as_deref() != Some("token")
    }

    /// Renders one object with a status code.
    pub fn render_object(&self, code: u16, object: Value) -> Result<Response<Body>, ApiError> {
        Ok(match self.output()? {
            Output::Json => response::json(code, &object),
            Output::Protobuf => protobuf_or_json(code, &object),
            Output::Yaml => response::yaml(code, &object),
            Output::PartialMetadata(encoding) => {
                encoded(encoding, code, &table::partial_object_metadata(&object))
            }
            Output::Table(include) => {
                let metadata =
                    json!({"resourceVersion": meta::resource_version(&object).unwrap_or_default()});
                response::json(code, &self.table(&[object], metadata, include))
            }
        })
    }

    /// Renders a list (items plus list metadata).
    pub fn render_list(
        &self,
        items: Vec<Value>,
        metadata: Value,
    ) -> Result<Response<Body>, ApiError> {
        Ok(match self.output()? {
            Output::Table(include) => response::json(200, &self.table(&items, metadata, include)),
            Output::PartialMetadata(encoding) => {
                let items: Vec<Value> = items.iter().map(table::partial_object_metadata).collect();
                encoded(
                    encoding,
                    200,
                    &json!({"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1",
                        "metadata": metadata, "items": items}),
                )
            }
            Output::Json => response::json(200, &self.list_object(items, metadata)),
            Output::Protobuf => protobuf_or_json(200, &self.list_object(items, metadata)),
            Output::Yaml => response::yaml(200, &self.list_object(items, metadata)),
        })
    }

    fn list_object(&self, items: Vec<Value>, metadata: Value) -> Value {
        json!({"kind": self.rt.list_kind(), "apiVersion": self.rt.api_version(), "metadata": metadata, "items": items})
    }

    pub fn table(
        &self,
        objects: &[Value],
        metadata: Value,
        include: table::IncludeObject,
    ) -> Value {
        table::for_type(&self.rt, objects, metadata, include)
    }
}

/// JSON, or protobuf as [`protobuf_or_json`].
fn encoded(encoding: Encoding, code: u16, object: &Value) -> Response<Body> {
    match encoding {
        Encoding::Json => response::json(code, object),
        Encoding::Protobuf => protobuf_or_json(code, object),
    }
}

/// Protobuf when the kind has an encoding, JSON otherwise (clients asking for protobuf accept JSON).
fn protobuf_or_json(code: u16, object: &Value) -> Response<Body> {
    match protobuf::encode(object) {
        Ok(bytes) => response::bytes(code, protobuf::CONTENT_TYPE, bytes),
        Err(_) => response::json(code, object),
    }
}
