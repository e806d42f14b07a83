//! What an APIBinding binds: given the binding, its export (or that there is none), the export's
//! schemas and the names the consumer's cluster already serves, the resources it binds, its
//! conditions and phase, as upstream's APIBinding controller decides them.
//!
//! Upstream's conditions and messages: `APIExportValid` (`APIExportNotFound`,
//! `MissingIdentityHash`, `InternalError` for a missing schema), `InitialBindingCompleted` and
//! `BindingUpToDate` (`NamingConflicts` when a CRD or another binding of the cluster serves the
//! same group and resource), `Ready` summing them up; phase `Binding` until everything is bound,
//! then `Bound`. A binding to one of kcp's own exports in `root` (`tenancy.kcp.io`,
//! `topology.kcp.io`, `shards.core.kcp.io`) binds nothing and is Bound at once: those APIs are built
//! in everywhere (issue 21 item 6), so upstream's manifests apply unchanged.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::claims;
use crate::conditions::{self, Condition, Severity};
use crate::schema::group_resource;

/// kcp's own exports, whose APIs are served in every logical cluster without a binding.
pub const BUILT_IN_EXPORTS: [&str; 3] = ["tenancy.kcp.io", "topology.kcp.io", "shards.core.kcp.io"];

/// kcp's own exports every authenticated user may bind (upstream's root grants `bind` on them to
/// `system:authenticated`).
pub const OPEN_EXPORTS: [&str; 2] = ["tenancy.kcp.io", "topology.kcp.io"];

pub const PHASE_BINDING: &str = "Binding";
pub const PHASE_BOUND: &str = "Bound";

/// What the user's name and groups are prefixed with when a request on a bound resource is
/// authorized again in the export's logical cluster (`maximalPermissionPolicy.local`).
pub const MAXIMAL_PERMISSION_POLICY_PREFIX: &str = "apis.kcp.io:binding:";

/// Whether an export caps what its consumers may do (`spec.maximalPermissionPolicy.local`).
pub fn has_local_maximal_permission_policy(export: &Value) -> bool {
    export
        .pointer("/spec/maximalPermissionPolicy/local")
        .is_some()
}

/// The finalizer that keeps a binding until its objects are gone.
pub const FINALIZER: &str = "apis.kcp.io/apibinding-finalizer";

/// `spec.reference.export` of a binding.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ExportReference {
    /// Empty: the binding's own logical cluster.
    pub path: String,
    pub name: String,
}

impl ExportReference {
    pub fn of(binding: &Value) -> Option<ExportReference> {
        let export = binding.pointer("/spec/reference/export")?;
        Some(ExportReference {
            path: export["path"].as_str().unwrap_or_default().to_string(),
            name: export["name"].as_str()?.to_string(),
        })
    }

    /// `<path>:<name>`, or the name alone for the binding's own cluster.
    pub fn display(&self) -> String {
        if self.path.is_empty() {
            self.name.clone()
        } else {
            format!("{}:{}", self.path, self.name)
        }
    }

    /// Whether this names one of kcp's own exports in `root`.
    pub fn is_built_in(&self) -> bool {
        self.path == "root" && BUILT_IN_EXPORTS.contains(&self.name.as_str())
    }

    /// Whether every authenticated user may bind this export (kcp's tenancy and topology APIs).
    pub fn is_open(&self) -> bool {
        self.path == "root" && OPEN_EXPORTS.contains(&self.name.as_str())
    }
}

/// One resource a binding serves in its cluster (upstream's `status.boundResources[]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoundResource {
    pub group: String,
    pub resource: String,
    pub schema_name: String,
    pub schema_uid: String,
    pub identity_hash: String,
    pub storage_versions: Vec<String>,
}

impl BoundResource {
    pub fn to_json(&self) -> Value {
        json!({
            "group": self.group,
            "resource": self.resource,
            "schema": {"name": self.schema_name, "UID": self.schema_uid, "identityHash": self.identity_hash},
            "storageVersions": self.storage_versions,
        })
    }

    /// The bound resources a binding's status records.
    pub fn of_status(binding: &Value) -> Vec<BoundResource> {
        binding
            .pointer("/status/boundResources")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|r| BoundResource {
                group: r["group"].as_str().unwrap_or_default().to_string(),
                resource: r["resource"].as_str().unwrap_or_default().to_string(),
                schema_name: r
                    .pointer("/schema/name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
                schema_uid: r
                    .pointer("/schema/UID")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
                identity_hash: r
                    .pointer("/schema/identityHash")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
                storage_versions: r["storageVersions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect(),
            })
            .collect()
    }
}

/// Who already serves a group and resource in the consumer's cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Holder {
    /// A CRD (by name) or a built-in type (by `<plural>.<group>`).
    Crd(String),
    /// Another APIBinding, with its export.
    Binding(String, ExportReference),
}

/// Everything a binding's outcome depends on.
pub struct Inputs<'a> {
    pub binding: &'a Value,
    /// The export, `None` when it does not exist.
    pub export: Option<&'a Value>,
    /// The logical cluster the export lives in.
    pub export_cluster: &'a str,
    /// The export's schemas by name (absent names are missing).
    pub schemas: &'a BTreeMap<String, Value>,
    /// Group and resource -> who serves it in the cluster besides this binding.
    pub taken: &'a BTreeMap<(String, String), Holder>,
}

/// What a binding's status should say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// The resources to serve; `None` keeps what the binding served before (the export or a schema
    /// went missing: upstream keeps serving what was bound).
    pub bound: Option<Vec<BoundResource>>,
    pub conditions: Vec<Condition>,
    pub phase: &'static str,
    pub export_cluster: Option<String>,
}

/// The schemas an export (v1alpha2, as stored) exports with CRD storage.
pub fn exported_schemas(export: &Value) -> Vec<String> {
    export
        .pointer("/spec/resources")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|r| r.get("storage").is_none_or(|s| s.get("crd").is_some()))
        .filter_map(|r| r["schema"].as_str())
        .map(str::to_string)
        .collect()
}

fn failed(inputs: &Inputs<'_>, failure: Condition, binding_failed: Option<Condition>) -> Outcome {
    let initially_completed =
        conditions::is_true(inputs.binding, conditions::INITIAL_BINDING_COMPLETED);
    let mut all = vec![failure];
    if let Some(binding_failed) = binding_failed {
        if !initially_completed {
            all.push(Condition {
                kind: conditions::INITIAL_BINDING_COMPLETED,
                ..binding_failed.clone()
            });
        }
        all.push(binding_failed);
    }
    let phase = if initially_completed {
        PHASE_BOUND
    } else {
        PHASE_BINDING
    };
    Outcome {
        bound: None,
        conditions: with_ready(all),
        phase,
        export_cluster: None,
    }
}

/// `Ready`: True when every other condition is (warnings aside: a claim mismatch leaves the
/// binding usable), else the first failure's reason and message.
fn with_ready(mut all: Vec<Condition>) -> Vec<Condition> {
    let ready = match all
        .iter()
        .filter_map(|c| c.failure.clone())
        .find(|(_, severity, _)| *severity != Severity::Warning)
    {
        None => Condition::holds(conditions::READY),
        Some(failure) => Condition {
            kind: conditions::READY,
            failure: Some(failure),
        },
    };
    all.push(ready);
    all
}

/// The outcome of a binding.
pub fn decide(inputs: &Inputs<'_>) -> Outcome {
    let Some(reference) = ExportReference::of(inputs.binding) else {
        return failed(
            inputs,
            Condition::fails(
                conditions::API_EXPORT_VALID,
                conditions::API_EXPORT_INVALID_REFERENCE,
                Severity::Error,
                "Missing APIExport reference".into(),
            ),
            None,
        );
    };
    if reference.is_built_in() {
        return Outcome {
            bound: Some(Vec::new()),
            conditions: with_ready(all_bound()),
            phase: PHASE_BOUND,
            export_cluster: Some(inputs.export_cluster.to_string()),
        };
    }
    let Some(export) = inputs.export else {
        let message = format!("APIExport {}|{} not found", reference.path, reference.name);
        return failed(
            inputs,
            Condition::fails(
                conditions::API_EXPORT_VALID,
                conditions::API_EXPORT_NOT_FOUND,
                Severity::Error,
                message,
            ),
            None,
        );
    };
    let identity = export
        .pointer("/status/identityHash")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if identity.is_empty() {
        let message = format!(
            "APIExport {}|{} is missing status.identityHash",
            reference.path, reference.name
        );
        return failed(
            inputs,
            Condition::fails(
                conditions::API_EXPORT_VALID,
                conditions::MISSING_IDENTITY_HASH,
                Severity::Warning,
                message,
            ),
            None,
        );
    }
    let previous = BoundResource::of_status(inputs.binding);
    let mut bound = Vec::new();
    for name in exported_schemas(export) {
        let Some(schema) = inputs.schemas.get(&name) else {
            let message = format!(
                "Invalid APIExport. Please contact the APIExport owner to resolve: APIResourceSchema {name:?} not found"
            );
            return failed(
                inputs,
                Condition::fails(
                    conditions::API_EXPORT_VALID,
                    conditions::INTERNAL_ERROR,
                    Severity::Error,
                    message,
                ),
                None,
            );
        };
        let (group, resource) = group_resource(schema);
        if let Some(holder) = inputs.taken.get(&(group.clone(), resource.clone())) {
            let message = format!(
                "Unable to bind APIs: {}",
                conflict_message(holder, &resource)
            );
            return failed(
                inputs,
                Condition::holds(conditions::API_EXPORT_VALID),
                Some(Condition::fails(
                    conditions::BINDING_UP_TO_DATE,
                    conditions::NAMING_CONFLICTS,
                    Severity::Error,
                    message,
                )),
            );
        }
        let storage_version = schema
            .pointer("/spec/versions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .find(|v| v["storage"] == json!(true))
            .and_then(|v| v["name"].as_str())
            .unwrap_or_default()
            .to_string();
        let mut storage_versions: Vec<String> = previous
            .iter()
            .find(|p| p.group == group && p.resource == resource && p.identity_hash == identity)
            .map(|p| p.storage_versions.clone())
            .unwrap_or_default();
        if !storage_versions.contains(&storage_version) {
            storage_versions.push(storage_version);
        }
        bound.push(BoundResource {
            group,
            resource,
            schema_name: name.clone(),
            schema_uid: schema
                .pointer("/metadata/uid")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            identity_hash: identity.to_string(),
            storage_versions,
        });
    }
    let mut all = all_bound();
    all.push(claims_validity(inputs.binding, export));
    Outcome {
        bound: Some(bound),
        conditions: with_ready(all),
        phase: PHASE_BOUND,
        export_cluster: Some(inputs.export_cluster.to_string()),
    }
}

/// The permission claims of an object's `pointer` list: resource, group and identity hash.
fn claim_keys(object: &Value, pointer: &str) -> Vec<(String, String, String)> {
    let field = |claim: &Value, name: &str| claim[name].as_str().unwrap_or_default().to_string();
    object
        .pointer(pointer)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|c| {
            (
                field(c, "resource"),
                field(c, "group"),
                field(c, "identityHash"),
            )
        })
        .collect()
}

/// `PermissionClaimsValid`: every claim the binding accepts or rejects is one its export makes
/// (upstream's message for the others, `InvalidPermissionClaims`), so a consumer learns at once
/// that a claim it answered does not exist (e.g. a wrong identity hash, or a claim the export
/// dropped); else every accepted claim asks for the verbs and selector the export's claim does
/// (upstream's `PermissionClaimsMismatch`, a warning: the binding works with what was accepted).
/// Upstream writes the mismatch over an invalid claim; here the error stays, as it is the worse.
fn claims_validity(binding: &Value, export: &Value) -> Condition {
    if let Some(invalid) = invalid_claims(binding, export) {
        return invalid;
    }
    let mismatched = claims::mismatches(binding, export);
    if mismatched.is_empty() {
        return Condition::holds(conditions::PERMISSION_CLAIMS_VALID);
    }
    let shown = &mismatched[..mismatched.len().min(5)];
    Condition::fails(
        conditions::PERMISSION_CLAIMS_VALID,
        conditions::PERMISSION_CLAIMS_MISMATCH,
        Severity::Warning,
        format!(
            "{} permission claim(s) have mismatched verbs or selectors (showing first {}): {}",
            mismatched.len(),
            shown.len(),
            shown.join(", ")
        ),
    )
}

/// `InvalidPermissionClaims`, when the binding answers claims its export does not make.
fn invalid_claims(binding: &Value, export: &Value) -> Option<Condition> {
    let exported = claim_keys(export, "/spec/permissionClaims");
    let unexpected: Vec<String> = claim_keys(binding, "/spec/permissionClaims")
        .into_iter()
        .filter(|claim| !exported.contains(claim))
        .map(|(resource, group, identity)| {
            format!("unexpected/invalid claim for {resource}.{group} (identity {identity:?})")
        })
        .collect();
    if unexpected.is_empty() {
        return None;
    }
    let shown = &unexpected[..unexpected.len().min(10)];
    let errors = if shown.len() == 1 {
        shown[0].clone()
    } else {
        format!("[{}]", shown.join(", "))
    };
    let message = format!(
        "{} unexpected and/or invalid permission claims (showing first {}): {errors}",
        unexpected.len(),
        shown.len()
    );
    Some(Condition::fails(
        conditions::PERMISSION_CLAIMS_VALID,
        conditions::INVALID_PERMISSION_CLAIMS,
        Severity::Error,
        message,
    ))
}

fn all_bound() -> Vec<Condition> {
    vec![
        Condition::holds(conditions::API_EXPORT_VALID),
        Condition::holds(conditions::INITIAL_BINDING_COMPLETED),
        Condition::holds(conditions::BINDING_UP_TO_DATE),
    ]
}

fn conflict_message(holder: &Holder, resource: &str) -> String {
    match holder {
        Holder::Crd(name) => format!(
            "naming conflict with CustomResourceDefinition {name:?}: spec.names.plural={resource} is forbidden"
        ),
        Holder::Binding(name, export) => {
            let bound_to = if export.path.is_empty() {
                format!("local APIExport {:?}", export.name)
            } else {
                format!("APIExport {}", export.display())
            };
            format!(
                "naming conflict with APIBinding {name:?} bound to {bound_to}: spec.names.plural={resource} is forbidden"
            )
        }
    }
}

/// Writes an outcome into a binding's status; returns whether anything but times changed.
pub fn apply(binding: &mut Value, outcome: &Outcome, now: &str) -> bool {
    let before = binding.get("status").cloned();
    if !binding["status"].is_object() {
        binding["status"] = json!({});
    }
    binding["status"]["phase"] = json!(outcome.phase);
    if let Some(cluster) = &outcome.export_cluster {
        binding["status"]["apiExportClusterName"] = json!(cluster);
    }
    if let Some(bound) = &outcome.bound {
        binding["status"]["boundResources"] = bound.iter().map(BoundResource::to_json).collect();
    }
    let mut changed = before.as_ref() != binding.get("status");
    for condition in &outcome.conditions {
        changed |= condition.set_on(binding, now);
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::tests::widgets;

    fn binding(path: &str, name: &str) -> Value {
        json!({"apiVersion": "apis.kcp.io/v1alpha2", "kind": "APIBinding", "metadata": {"name": "b"},
            "spec": {"reference": {"export": {"path": path, "name": name}}}})
    }

    fn export(identity: &str) -> Value {
        json!({"metadata": {"name": "widgets"},
            "spec": {"resources": [{"group": "example.com", "name": "widgets", "schema": "today.widgets.example.com", "storage": {"crd": {}}}]},
            "status": {"identityHash": identity}})
    }

    fn schemas() -> BTreeMap<String, Value> {
        BTreeMap::from([(
            "today.widgets.example.com".to_string(),
            widgets("today.widgets.example.com"),
        )])
    }

    fn outcome_of(
        binding: &Value,
        export: Option<&Value>,
        export_cluster: &str,
        schemas: &BTreeMap<String, Value>,
        taken: &BTreeMap<(String, String), Holder>,
    ) -> Outcome {
        decide(&Inputs {
            binding,
            export,
            export_cluster,
            schemas,
            taken,
        })
    }

    fn reason(outcome: &Outcome, kind: &str) -> Option<String> {
        outcome
            .conditions
            .iter()
            .find(|c| c.kind == kind)
            .and_then(|c| c.failure.as_ref())
            .map(|f| f.0.clone())
    }

    #[test]
    fn a_valid_export_binds_its_schemas_under_its_identity() {
        let binding = binding("root:provider", "widgets");
        let export = export("abc");
        let outcome = outcome_of(&binding, Some(&export), "p1", &schemas(), &BTreeMap::new());
        assert_eq!(outcome.phase, PHASE_BOUND);
        let bound = outcome.bound.clone().unwrap();
        assert_eq!(bound.len(), 1);
        assert_eq!(
            (bound[0].resource.as_str(), bound[0].identity_hash.as_str()),
            ("widgets", "abc")
        );
        assert_eq!(bound[0].storage_versions, vec!["v1".to_string()]);
        assert!(outcome.conditions.iter().all(Condition::is_true));
        let mut written = binding.clone();
        assert!(apply(&mut written, &outcome, "t"));
        assert_eq!(written["status"]["apiExportClusterName"], "p1");
        assert_eq!(BoundResource::of_status(&written), bound);
        assert!(
            !apply(&mut written, &outcome, "t2"),
            "an unchanged outcome writes nothing"
        );
    }

    #[test]
    fn a_missing_export_is_a_condition() {
        let binding = binding("root:nowhere", "widgets");
        let outcome = outcome_of(&binding, None, "", &BTreeMap::new(), &BTreeMap::new());
        assert_eq!(outcome.phase, PHASE_BINDING);
        assert_eq!(
            reason(&outcome, conditions::API_EXPORT_VALID).as_deref(),
            Some(conditions::API_EXPORT_NOT_FOUND)
        );
        assert_eq!(
            reason(&outcome, conditions::READY).as_deref(),
            Some(conditions::API_EXPORT_NOT_FOUND)
        );
        assert_eq!(outcome.bound, None);
    }

    #[test]
    fn a_crd_or_another_binding_of_the_same_resource_is_a_naming_conflict() {
        let binding = binding("", "widgets");
        let export = export("abc");
        for holder in [
            Holder::Crd("widgets.example.com".into()),
            Holder::Binding(
                "other".into(),
                ExportReference {
                    path: "root:x".into(),
                    name: "w".into(),
                },
            ),
        ] {
            let taken =
                BTreeMap::from([(("example.com".to_string(), "widgets".to_string()), holder)]);
            let outcome = outcome_of(&binding, Some(&export), "c", &schemas(), &taken);
            assert_eq!(outcome.phase, PHASE_BINDING);
            assert_eq!(
                reason(&outcome, conditions::BINDING_UP_TO_DATE).as_deref(),
                Some(conditions::NAMING_CONFLICTS)
            );
            assert_eq!(
                reason(&outcome, conditions::INITIAL_BINDING_COMPLETED).as_deref(),
                Some(conditions::NAMING_CONFLICTS)
            );
        }
    }

    #[test]
    fn missing_identity_and_schema_are_conditions() {
        let binding = binding("", "widgets");
        let no_identity = export("");
        let outcome = outcome_of(
            &binding,
            Some(&no_identity),
            "c",
            &schemas(),
            &BTreeMap::new(),
        );
        assert_eq!(
            reason(&outcome, conditions::API_EXPORT_VALID).as_deref(),
            Some(conditions::MISSING_IDENTITY_HASH)
        );
        let export = export("abc");
        let outcome = outcome_of(
            &binding,
            Some(&export),
            "c",
            &BTreeMap::new(),
            &BTreeMap::new(),
        );
        assert_eq!(
            reason(&outcome, conditions::API_EXPORT_VALID).as_deref(),
            Some(conditions::INTERNAL_ERROR)
        );
    }

    #[test]
    fn a_local_maximal_permission_policy_is_recognised() {
        let mut export = export("abc");
        assert!(!has_local_maximal_permission_policy(&export));
        export["spec"]["maximalPermissionPolicy"] = json!({"local": {}});
        assert!(has_local_maximal_permission_policy(&export));
    }

    #[test]
    fn a_claim_the_export_does_not_make_is_a_condition() {
        let mut binding = binding("", "widgets");
        let mut export = export("abc");
        export["spec"]["permissionClaims"] =
            json!([{"group": "", "resource": "configmaps", "identityHash": "", "verbs": ["*"]}]);
        binding["spec"]["permissionClaims"] = json!([{"group": "", "resource": "configmaps", "identityHash": "", "verbs": ["*"], "selector": {"matchAll": true}, "state": "Accepted"}]);
        let outcome = outcome_of(&binding, Some(&export), "c", &schemas(), &BTreeMap::new());
        assert!(outcome.conditions.iter().all(Condition::is_true));
        binding["spec"]["permissionClaims"][0]["identityHash"] = json!("wrong");
        let outcome = outcome_of(&binding, Some(&export), "c", &schemas(), &BTreeMap::new());
        let (reason, _, message) = claims_failure(&outcome);
        assert_eq!(reason, conditions::INVALID_PERMISSION_CLAIMS);
        assert_eq!(
            message,
            "1 unexpected and/or invalid permission claims (showing first 1): unexpected/invalid claim for configmaps. (identity \"wrong\")"
        );
        assert_eq!(outcome.phase, PHASE_BOUND, "the binding itself is bound");
    }

    #[test]
    fn accepted_claims_with_other_verbs_or_selectors_are_a_warning() {
        let mut binding = binding("", "widgets");
        let mut export = export("abc");
        export["spec"]["permissionClaims"] = json!([
            {"group": "", "resource": "configmaps", "identityHash": "", "verbs": ["get", "list"]},
            {"group": "", "resource": "secrets", "identityHash": "", "verbs": ["*"],
             "defaultSelector": {"matchLabels": {"app": "x"}}}]);
        binding["spec"]["permissionClaims"] = json!([
            {"group": "", "resource": "configmaps", "identityHash": "", "verbs": ["list", "get"], "selector": {"matchAll": true}, "state": "Accepted"},
            {"group": "", "resource": "secrets", "identityHash": "", "verbs": ["get"], "selector": {"matchLabels": {"app": "x"}}, "state": "Accepted"}]);
        let outcome = outcome_of(&binding, Some(&export), "c", &schemas(), &BTreeMap::new());
        assert!(outcome.conditions.iter().all(Condition::is_true));

        binding["spec"]["permissionClaims"][0]["verbs"] = json!(["get"]);
        binding["spec"]["permissionClaims"][1]["selector"] = json!({"matchAll": true});
        let outcome = outcome_of(&binding, Some(&export), "c", &schemas(), &BTreeMap::new());
        let (reason, severity, message) = claims_failure(&outcome);
        assert_eq!(reason, conditions::PERMISSION_CLAIMS_MISMATCH);
        assert_eq!(severity, Severity::Warning);
        assert_eq!(
            message,
            "2 permission claim(s) have mismatched verbs or selectors (showing first 2): configmaps. (verbs: accepted [get], exported [get list]), secrets. (selector differs from defaultSelector)"
        );
        assert!(
            outcome
                .conditions
                .iter()
                .any(|c| c.kind == conditions::READY && c.is_true()),
            "a warning leaves the binding ready"
        );

        // A claim the export does not make is the error that shows.
        binding["spec"]["permissionClaims"][1]["identityHash"] = json!("wrong");
        let outcome = outcome_of(&binding, Some(&export), "c", &schemas(), &BTreeMap::new());
        assert_eq!(
            claims_failure(&outcome).0,
            conditions::INVALID_PERMISSION_CLAIMS
        );
    }

    /// The reason, severity and message of a False `PermissionClaimsValid`.
    fn claims_failure(outcome: &Outcome) -> (String, Severity, String) {
        outcome
            .conditions
            .iter()
            .find(|c| c.kind == conditions::PERMISSION_CLAIMS_VALID)
            .and_then(|c| c.failure.clone())
            .unwrap()
    }

    #[test]
    fn kcps_own_exports_bind_nothing_and_are_bound() {
        let open = |path: &str, name: &str| {
            ExportReference {
                path: path.into(),
                name: name.into(),
            }
            .is_open()
        };
        assert!(open("root", "tenancy.kcp.io") && open("root", "topology.kcp.io"));
        assert!(!open("root", "shards.core.kcp.io") && !open("root:org", "tenancy.kcp.io"));
        let binding = binding("root", "tenancy.kcp.io");
        let outcome = outcome_of(&binding, None, "root", &BTreeMap::new(), &BTreeMap::new());
        assert_eq!(outcome.phase, PHASE_BOUND);
        assert_eq!(outcome.bound, Some(Vec::new()));
    }

    #[test]
    fn a_new_schema_version_keeps_the_old_storage_version() {
        let mut binding = binding("", "widgets");
        let export = export("abc");
        let outcome = outcome_of(&binding, Some(&export), "c", &schemas(), &BTreeMap::new());
        apply(&mut binding, &outcome, "t");
        let mut newer = schemas();
        let schema = newer.get_mut("today.widgets.example.com").unwrap();
        schema["spec"]["versions"][0]["name"] = json!("v2");
        let outcome = outcome_of(&binding, Some(&export), "c", &newer, &BTreeMap::new());
        assert_eq!(
            outcome.bound.unwrap()[0].storage_versions,
            vec!["v1".to_string(), "v2".to_string()]
        );
    }
}
