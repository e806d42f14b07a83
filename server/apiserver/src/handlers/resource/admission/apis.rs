//! Admission of the apis.kcp.io types and of CRDs next to them (upstream's
//! `apis.kcp.io/APIResourceSchema`, `APIExport`, `APIBinding`, `kcp.io/ReservedCRDGroups` and
//! `apis.kcp.io/CRDNoOverlappingGVR` plugins): the rules and messages are kcp-apis'; this module
//! feeds them the objects they need and asks the export's logical cluster, as a deep
//! SubjectAccessReview (its RBAC, without the workspace content gate), whether the creator of a
//! binding may `bind` the export. An export of a workspace on another shard is found among the
//! copies read back from the cache, and its cluster's RBAC is what that shard replicated.
//! Admitted bindings are labeled with their export (`internal.apis.kcp.io/export`) and carry
//! the controller's deletion finalizer (which only `system:masters` may remove during a deletion), an
//! export's claims on resources this server does not build in must name an identity, and an
//! APIConversion must compile against the APIResourceSchema of its name in its workspace
//! (upstream's `apis.kcp.io/APIConversion` plugin).

use kcp_apimachinery::{ApiError, meta};
use kcp_apis::binding::{BoundResource, ExportReference};
use kcp_apis::{
    API_BINDINGS, API_CONVERSIONS, API_EXPORTS, API_RESOURCE_SCHEMAS, GROUP, admission,
    api_conversion,
};
use kcp_controllers::tenancy_index::CopiedKind;
use kcp_rbac::{Attributes, ResourceAttributes};
use kcp_registry::storage::objects::ListRequest;
use kcp_registry::store::Location;
use kcp_registry::{ApiSet, ClusterTarget, LogicalClusterName};
use serde_json::Value;
use std::sync::Arc;

use super::Admission;
use crate::filters::authentication::rbac_user;
use crate::handlers::resource::Resolved;

const CRD_GROUP: &str = "apiextensions.k8s.io";
const CRDS: &str = "customresourcedefinitions";

/// A write of an apis.kcp.io type or a CRD, in `cluster`.
pub(crate) enum ApisWrite {
    Schema,
    /// With the built-in types, which claims need no identity for.
    Export(Arc<ApiSet>),
    /// Into `cluster`; `privileged`: by `system:masters`, who may remove the deletion finalizer.
    Binding {
        cluster: LogicalClusterName,
        privileged: bool,
    },
    Crd(LogicalClusterName),
    /// With the APIResourceSchema named like the updated APIConversion (read before the update;
    /// a create reads the one its body names).
    Conversion(LogicalClusterName, Option<Value>),
}

fn forbidden(resource: &str, name: &str, errors: &[String]) -> Result<(), ApiError> {
    if errors.is_empty() {
        return Ok(());
    }
    let group = if resource == CRDS { CRD_GROUP } else { GROUP };
    let reason = if errors.len() == 1 {
        errors[0].clone()
    } else {
        format!("[{}]", errors.join(", "))
    };
    Err(ApiError::forbidden(group, resource, name, &reason))
}

impl Resolved<'_> {
    /// The apis.kcp.io admission of a write, if it needs one.
    pub(super) async fn apis_admission(&self) -> Result<Option<Admission>, ApiError> {
        let ClusterTarget::One(cluster) = &self.request.cluster else {
            return Ok(None);
        };
        let write = match (self.rt.group.as_str(), self.rt.plural.as_str()) {
            (GROUP, API_RESOURCE_SCHEMAS) => ApisWrite::Schema,
            (GROUP, API_EXPORTS) => {
                ApisWrite::Export(self.scope.store.registry().builtin().clone())
            }
            (GROUP, API_BINDINGS) => ApisWrite::Binding {
                cluster: cluster.clone(),
                privileged: super::privileged(&self.request.user),
            },
            (CRD_GROUP, CRDS) => ApisWrite::Crd(cluster.clone()),
            (GROUP, API_CONVERSIONS) => {
                let schema = match &self.request.info.name {
                    Some(name) => self.schema_named(cluster, name).await?,
                    None => None,
                };
                ApisWrite::Conversion(cluster.clone(), schema)
            }
            _ => return Ok(None),
        };
        Ok(Some(Admission::Apis(write)))
    }

    /// The APIResourceSchema `name` of `cluster`, if there is one.
    async fn schema_named(
        &self,
        cluster: &LogicalClusterName,
        name: &str,
    ) -> Result<Option<Value>, ApiError> {
        let Some(schemas) =
            self.scope
                .store
                .registry()
                .builtin_type(GROUP, "v1alpha1", API_RESOURCE_SCHEMAS)
        else {
            return Ok(None);
        };
        let at = Location {
            cluster,
            namespace: None,
        };
        match self.scope.store.get(&schemas, at, name).await {
            Ok(stored) => Ok(Some(stored.object)),
            Err(e) if e.code == 404 => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// Refuses an APIConversion whose APIResourceSchema is missing (Forbidden, as upstream) or whose
/// rules do not compile against it (Invalid, at the rule's field).
fn admit_conversion(
    name: &str,
    conversion: &Value,
    schema: Option<&Value>,
) -> Result<(), ApiError> {
    let Some(schema) = schema else {
        return Err(ApiError::forbidden(
            GROUP,
            API_CONVERSIONS,
            name,
            &format!(
                "error getting APIResourceSchema {name}: apiresourceschemas.apis.kcp.io \"{name}\" not found"
            ),
        ));
    };
    let errors = api_conversion::validate(conversion, schema);
    if errors.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(GROUP, "APIConversion", name, errors))
    }
}

impl ApisWrite {
    pub(super) async fn admit_create(
        &self,
        r: &Resolved<'_>,
        object: &mut Value,
    ) -> Result<(), ApiError> {
        let name = meta::name(object).unwrap_or_default().to_string();
        match self {
            ApisWrite::Schema => forbidden(
                API_RESOURCE_SCHEMAS,
                &name,
                &admission::schema_errors(&name, object),
            ),
            ApisWrite::Export(built_in) => forbidden(
                API_EXPORTS,
                &name,
                &admission::export_claim_errors(object, |group, resource| {
                    is_built_in(built_in, group, resource)
                }),
            ),
            ApisWrite::Binding { cluster, .. } => {
                let export_cluster = admit_bind(r, cluster, object).await?;
                admission::label_new_binding(object, export_cluster.as_str());
                admission::add_binding_finalizer(object);
                Ok(())
            }
            ApisWrite::Crd(cluster) => admit_crd(r, cluster, object).await,
            ApisWrite::Conversion(cluster, _) => {
                let schema = r.schema_named(cluster, &name).await?;
                admit_conversion(&name, object, schema.as_ref())
            }
        }
    }

    pub(super) fn admit_update(&self, new: &mut Value, old: &Value) -> Result<(), ApiError> {
        let name = meta::name(old).unwrap_or_default();
        match self {
            ApisWrite::Schema => forbidden(
                API_RESOURCE_SCHEMAS,
                name,
                &admission::schema_update_errors(name, new, old),
            ),
            ApisWrite::Export(built_in) => {
                let mut errors = admission::export_update_errors(new, old);
                errors.extend(admission::export_claim_errors(new, |group, resource| {
                    is_built_in(built_in, group, resource)
                }));
                forbidden(API_EXPORTS, name, &errors)
            }
            ApisWrite::Binding { privileged, .. } => {
                forbidden(
                    API_BINDINGS,
                    name,
                    &admission::binding_finalizer_errors(new, old, *privileged),
                )?;
                admission::keep_binding_label(new, old);
                admission::add_binding_finalizer(new);
                Ok(())
            }
            ApisWrite::Crd(_) => Ok(()),
            ApisWrite::Conversion(_, schema) => admit_conversion(name, new, schema.as_ref()),
        }
    }
}

/// Whether `group`/`resource` is one of the types every logical cluster serves without a binding.
fn is_built_in(built_in: &ApiSet, group: &str, resource: &str) -> bool {
    built_in
        .types()
        .iter()
        .any(|t| t.group == group && t.plural == resource)
}

/// The creator of a binding needs `bind` on the export in the export's cluster; a path that
/// resolves to nothing, or an export that does not exist there, is refused with the same message
/// (upstream's: it does not tell whether the workspace exists). `root` and the binding's own
/// cluster are checked without reading the export, as upstream does for bootstrapping; kcp's
/// tenancy and topology exports may be bound by everybody (upstream's root grants it).
/// Admitted, the answer is the export's logical cluster.
async fn admit_bind(
    r: &Resolved<'_>,
    cluster: &LogicalClusterName,
    binding: &Value,
) -> Result<LogicalClusterName, ApiError> {
    let name = meta::name(binding).unwrap_or_default();
    let Some(reference) = ExportReference::of(binding) else {
        return Ok(cluster.clone()); // the schema requires a reference
    };
    if reference.is_open() {
        return Ok(LogicalClusterName::root());
    }
    let refused = || {
        Err(ApiError::forbidden(
            GROUP,
            API_BINDINGS,
            name,
            &admission::no_permission_to_bind(false, &reference),
        ))
    };
    let export_cluster = match reference.path.as_str() {
        "" => cluster.clone(),
        "root" => LogicalClusterName::root(),
        path => {
            let Some(export_cluster) = r.scope.tenancy.resolve_with_copies(path) else {
                return refused();
            };
            if !export_exists(r, &export_cluster, &reference.name).await {
                return refused();
            }
            export_cluster
        }
    };
    let attributes = Attributes::resource(
        rbac_user(&r.request.user),
        "bind",
        ResourceAttributes {
            api_group: GROUP.to_string(),
            resource: API_EXPORTS.to_string(),
            name: reference.name.clone(),
            ..ResourceAttributes::default()
        },
    );
    if r.scope
        .authorizer
        .decide_deep(&export_cluster, &attributes)
        .await?
        .is_allowed()
    {
        Ok(export_cluster)
    } else {
        refused()
    }
}

/// Whether export `name` exists in `cluster`: this shard's own, or another shard's copy read back
/// from the cache (the export of a workspace on another shard).
async fn export_exists(r: &Resolved<'_>, cluster: &LogicalClusterName, name: &str) -> bool {
    if r.scope
        .tenancy
        .copy_of(CopiedKind::ApiExports, cluster, name)
        .is_some()
    {
        return true;
    }
    let Some(exports) =
        r.scope
            .store
            .registry()
            .builtin_type(GROUP, kcp_apis::STORAGE_VERSION, API_EXPORTS)
    else {
        return false;
    };
    let at = Location {
        cluster,
        namespace: None,
    };
    r.scope.store.get(&exports, at, name).await.is_ok()
}

/// A CRD may not use a reserved group, nor a group and resource a binding of its cluster serves.
async fn admit_crd(
    r: &Resolved<'_>,
    cluster: &LogicalClusterName,
    crd: &Value,
) -> Result<(), ApiError> {
    let name = meta::name(crd).unwrap_or_default();
    let group = crd
        .pointer("/spec/group")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let plural = crd
        .pointer("/spec/names/plural")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if let Some(reserved) = admission::reserved_crd_group(group) {
        return forbidden(CRDS, name, &[reserved]);
    }
    let Some(bindings) =
        r.scope
            .store
            .registry()
            .builtin_type(GROUP, kcp_apis::STORAGE_VERSION, API_BINDINGS)
    else {
        return Ok(());
    };
    let prefix = r.scope.store.keys(&bindings).scope(cluster, None);
    let page = r
        .scope
        .store
        .list(&bindings, ListRequest::everything(&prefix), &|_| true)
        .await?;
    let holder = page.items.iter().find(|binding| {
        BoundResource::of_status(binding)
            .iter()
            .any(|bound| bound.group == group && bound.resource == plural)
    });
    match holder {
        Some(binding) => forbidden(
            CRDS,
            name,
            &[admission::crd_overlaps_binding(
                meta::name(binding).unwrap_or_default(),
            )],
        ),
        None => Ok(()),
    }
}
