//! kcp's APIs as a service as pure decisions: the `apis.kcp.io` types (APIResourceSchema,
//! APIExport, APIBinding, APIExportEndpointSlice, APIConversion) and the rules behind them, with
//! no I/O.
//!
//! A provider writes APIResourceSchemas (immutable snapshots of a CRD's spec) and an APIExport
//! naming them; the export gets an identity (a random key in a Secret, `status.identityHash` its
//! SHA-256). A consumer writes an APIBinding referencing the export; the export's resources are
//! then served in the consumer's logical cluster like CRDs, stored under the export's identity, so
//! two exports of the same group and resource never share objects. The registry serves these
//! types ([`crds`], [`conversion`]), the API server admits them ([`admission`]) and the
//! controllers reconcile them ([`identity`], [`binding`], [`schema`]); this crate is the one
//! rendition of upstream kcp's rules, names and messages they share (`kcp-dev/kcp`:
//! `sdk/apis/apis/{v1alpha1,v1alpha2}`, `pkg/reconciler/apis`, `pkg/admission/api*`).

pub mod admission;
pub mod api_conversion;
pub mod binding;
pub mod claims;
pub mod conditions;
pub mod conversion;
pub mod crds;
pub mod default_bindings;
pub mod endpoints;
pub mod identity;
pub mod schema;

/// The API group of every type of this crate.
pub const GROUP: &str = "apis.kcp.io";
/// The version APIExports and APIBindings are stored in.
pub const STORAGE_VERSION: &str = "v1alpha2";

pub const API_RESOURCE_SCHEMAS: &str = "apiresourceschemas";
pub const API_EXPORTS: &str = "apiexports";
pub const API_BINDINGS: &str = "apibindings";
pub const API_EXPORT_ENDPOINT_SLICES: &str = "apiexportendpointslices";
pub const API_CONVERSIONS: &str = "apiconversions";
