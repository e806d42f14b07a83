//! Tables for apiextensions.k8s.io/v1: CustomResourceDefinition, which client-go's typed
//! apiextensions client (every CRD-installing controller, `controller-runtime`'s envtest) sends
//! and reads only as protobuf.
//!
//! Field numbers, JSON keys and Go shapes (value, pointer, slice, map) are those of the
//! Kubernetes 1.35 API types (`k8s.io/apiextensions-apiserver` v0.35; `status.observedGeneration`
//! and the condition's `observedGeneration` included); see `messages` for how to read a table.
//! `JSONSchemaProps` is recursive, and its unions (`items`, `additionalProperties`,
//! `dependencies`) have JSON shapes of their own (a schema or a list, a schema or a boolean), so
//! they are field types of the codec rather than plain messages.

use crate::protobuf::schema::{Field, FieldType as T, Message};

static EXTERNAL_DOCUMENTATION: Message = Message {
    name: "ExternalDocumentation",
    fields: &[
        Field::value(1, "description", T::String),
        Field::value(2, "url", T::String),
    ],
};

static VALIDATION_RULE: Message = Message {
    name: "ValidationRule",
    fields: &[
        Field::value(1, "rule", T::String),
        Field::value(2, "message", T::String),
        Field::value(3, "messageExpression", T::String),
        Field::optional(4, "reason", T::String),
        Field::value(5, "fieldPath", T::String),
        Field::optional(6, "optionalOldSelf", T::Bool),
    ],
};

static JSON_SCHEMA_PROPS: Message = Message {
    name: "JSONSchemaProps",
    fields: &[
        Field::value(1, "id", T::String),
        Field::value(2, "$schema", T::String),
        Field::optional(3, "$ref", T::String),
        Field::value(4, "description", T::String),
        Field::value(5, "type", T::String),
        Field::value(6, "format", T::String),
        Field::value(7, "title", T::String),
        Field::optional(8, "default", T::Json),
        Field::optional(9, "maximum", T::Double),
        Field::value(10, "exclusiveMaximum", T::Bool),
        Field::optional(11, "minimum", T::Double),
        Field::value(12, "exclusiveMinimum", T::Bool),
        Field::optional(13, "maxLength", T::Int64),
        Field::optional(14, "minLength", T::Int64),
        Field::value(15, "pattern", T::String),
        Field::optional(16, "maxItems", T::Int64),
        Field::optional(17, "minItems", T::Int64),
        Field::value(18, "uniqueItems", T::Bool),
        Field::optional(19, "multipleOf", T::Double),
        Field::repeated(20, "enum", T::Json),
        Field::optional(21, "maxProperties", T::Int64),
        Field::optional(22, "minProperties", T::Int64),
        Field::repeated(23, "required", T::String),
        Field::optional(24, "items", T::SchemaOrArray(&JSON_SCHEMA_PROPS)),
        Field::repeated(25, "allOf", T::Message(&JSON_SCHEMA_PROPS)),
        Field::repeated(26, "oneOf", T::Message(&JSON_SCHEMA_PROPS)),
        Field::repeated(27, "anyOf", T::Message(&JSON_SCHEMA_PROPS)),
        Field::optional(28, "not", T::Message(&JSON_SCHEMA_PROPS)),
        Field::map(29, "properties", T::Message(&JSON_SCHEMA_PROPS)),
        Field::optional(
            30,
            "additionalProperties",
            T::SchemaOrBool(&JSON_SCHEMA_PROPS),
        ),
        Field::map(31, "patternProperties", T::Message(&JSON_SCHEMA_PROPS)),
        Field::map(
            32,
            "dependencies",
            T::SchemaOrStringArray(&JSON_SCHEMA_PROPS),
        ),
        Field::optional(33, "additionalItems", T::SchemaOrBool(&JSON_SCHEMA_PROPS)),
        Field::map(34, "definitions", T::Message(&JSON_SCHEMA_PROPS)),
        Field::optional(35, "externalDocs", T::Message(&EXTERNAL_DOCUMENTATION)),
        Field::optional(36, "example", T::Json),
        Field::value(37, "nullable", T::Bool),
        Field::optional(38, "x-kubernetes-preserve-unknown-fields", T::Bool),
        Field::value(39, "x-kubernetes-embedded-resource", T::Bool),
        Field::value(40, "x-kubernetes-int-or-string", T::Bool),
        Field::repeated(41, "x-kubernetes-list-map-keys", T::String),
        Field::optional(42, "x-kubernetes-list-type", T::String),
        Field::optional(43, "x-kubernetes-map-type", T::String),
        Field::repeated(44, "x-kubernetes-validations", T::Message(&VALIDATION_RULE)),
    ],
};

static CUSTOM_RESOURCE_VALIDATION: Message = Message {
    name: "CustomResourceValidation",
    fields: &[Field::optional(
        1,
        "openAPIV3Schema",
        T::Message(&JSON_SCHEMA_PROPS),
    )],
};

static SUBRESOURCE_STATUS: Message = Message {
    name: "CustomResourceSubresourceStatus",
    fields: &[],
};

static SUBRESOURCE_SCALE: Message = Message {
    name: "CustomResourceSubresourceScale",
    fields: &[
        Field::value(1, "specReplicasPath", T::String),
        Field::value(2, "statusReplicasPath", T::String),
        Field::optional(3, "labelSelectorPath", T::String),
    ],
};

static SUBRESOURCES: Message = Message {
    name: "CustomResourceSubresources",
    fields: &[
        Field::optional(1, "status", T::Message(&SUBRESOURCE_STATUS)),
        Field::optional(2, "scale", T::Message(&SUBRESOURCE_SCALE)),
    ],
};

static COLUMN_DEFINITION: Message = Message {
    name: "CustomResourceColumnDefinition",
    fields: &[
        Field::value(1, "name", T::String),
        Field::value(2, "type", T::String),
        Field::value(3, "format", T::String),
        Field::value(4, "description", T::String),
        Field::value(5, "priority", T::Int32),
        Field::value(6, "jsonPath", T::String),
    ],
};

static SELECTABLE_FIELD: Message = Message {
    name: "SelectableField",
    fields: &[Field::value(1, "jsonPath", T::String)],
};

static VERSION: Message = Message {
    name: "CustomResourceDefinitionVersion",
    fields: &[
        Field::value(1, "name", T::String),
        Field::value(2, "served", T::Bool),
        Field::value(3, "storage", T::Bool),
        Field::optional(4, "schema", T::Message(&CUSTOM_RESOURCE_VALIDATION)),
        Field::optional(5, "subresources", T::Message(&SUBRESOURCES)),
        Field::repeated(
            6,
            "additionalPrinterColumns",
            T::Message(&COLUMN_DEFINITION),
        ),
        Field::value(7, "deprecated", T::Bool),
        Field::optional(8, "deprecationWarning", T::String),
        Field::repeated(9, "selectableFields", T::Message(&SELECTABLE_FIELD)),
    ],
};

static SERVICE_REFERENCE: Message = Message {
    name: "ServiceReference",
    fields: &[
        Field::value(1, "namespace", T::String),
        Field::value(2, "name", T::String),
        Field::optional(3, "path", T::String),
        Field::optional(4, "port", T::Int32),
    ],
};

static WEBHOOK_CLIENT_CONFIG: Message = Message {
    name: "WebhookClientConfig",
    fields: &[
        Field::optional(1, "service", T::Message(&SERVICE_REFERENCE)),
        // A Go `[]byte`: written only when non-nil.
        Field::optional(2, "caBundle", T::Bytes),
        Field::optional(3, "url", T::String),
    ],
};

static WEBHOOK_CONVERSION: Message = Message {
    name: "WebhookConversion",
    fields: &[
        Field::optional(2, "clientConfig", T::Message(&WEBHOOK_CLIENT_CONFIG)),
        Field::repeated(3, "conversionReviewVersions", T::String),
    ],
};

static CONVERSION: Message = Message {
    name: "CustomResourceConversion",
    fields: &[
        Field::value(1, "strategy", T::String),
        Field::optional(2, "webhook", T::Message(&WEBHOOK_CONVERSION)),
    ],
};

static NAMES: Message = Message {
    name: "CustomResourceDefinitionNames",
    fields: &[
        Field::value(1, "plural", T::String),
        Field::value(2, "singular", T::String),
        Field::repeated(3, "shortNames", T::String),
        Field::value(4, "kind", T::String),
        Field::value(5, "listKind", T::String),
        Field::repeated(6, "categories", T::String),
    ],
};

static SPEC: Message = Message {
    name: "CustomResourceDefinitionSpec",
    fields: &[
        Field::value(1, "group", T::String),
        Field::value(3, "names", T::Message(&NAMES)),
        Field::value(4, "scope", T::String),
        Field::repeated(7, "versions", T::Message(&VERSION)),
        Field::optional(9, "conversion", T::Message(&CONVERSION)),
        Field::value(10, "preserveUnknownFields", T::Bool),
    ],
};

static CONDITION: Message = Message {
    name: "CustomResourceDefinitionCondition",
    fields: &[
        Field::value(1, "type", T::String),
        Field::value(2, "status", T::String),
        Field::value(3, "lastTransitionTime", T::Time),
        Field::value(4, "reason", T::String),
        Field::value(5, "message", T::String),
        Field::value(6, "observedGeneration", T::Int64),
    ],
};

static STATUS: Message = Message {
    name: "CustomResourceDefinitionStatus",
    fields: &[
        Field::repeated(1, "conditions", T::Message(&CONDITION)),
        Field::value(2, "acceptedNames", T::Message(&NAMES)),
        Field::repeated(3, "storedVersions", T::String),
        Field::value(4, "observedGeneration", T::Int64),
    ],
};

pub(super) static CUSTOM_RESOURCE_DEFINITION: Message = Message {
    name: "CustomResourceDefinition",
    fields: &[
        Field::value(1, "metadata", T::Message(&super::meta::OBJECT_META)),
        Field::value(2, "spec", T::Message(&SPEC)),
        Field::value(3, "status", T::Message(&STATUS)),
    ],
};
