//! Rendering objects and lists in the negotiated encoding (JSON, YAML, Table, PartialObjectMetadata).

use http::Response;
use kcp_apimachinery::{ApiError, meta, protobuf};
use serde_json::{Value, json};

use super::Resolved;
use crate::handlers::negotiation::{self, Output};
use crate::handlers::response::{self, Body};
use kcp_registry::table;

impl Resolved<'_> {
    pub fn output(&self) -> Result<Output, ApiError> {
        negotiation::negotiate(
            self.request.accept.as_deref(),
            self.request.query.get("includeObject"),
        )
    }

    /// Renders one object with a status code.
    pub fn render_object(&self, code: u16, object: Value) -> Result<Response<Body>, ApiError> {
        Ok(match self.output()? {
            Output::Json => response::json(code, &object),
            Output::Protobuf => protobuf_or_json(code, &object),
            Output::Yaml => response::yaml(code, &object),
            Output::PartialMetadata => {
                response::json(code, &table::partial_object_metadata(&object))
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
            Output::PartialMetadata => {
                let items: Vec<Value> = items.iter().map(table::partial_object_metadata).collect();
                response::json(
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

/// Protobuf when the kind has an encoding, JSON otherwise (clients asking for protobuf accept JSON).
fn protobuf_or_json(code: u16, object: &Value) -> Response<Body> {
    match protobuf::encode(object) {
        Ok(bytes) => response::bytes(code, protobuf::CONTENT_TYPE, bytes),
        Err(_) => response::json(code, object),
    }
}
