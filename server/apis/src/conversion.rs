//! Conversion between `apis.kcp.io/v1alpha1` and `v1alpha2` APIExports and APIBindings (stored as
//! v1alpha2), losslessly in both directions as upstream's conversion functions do.
//!
//! What one version cannot express travels in annotations of the other and is restored on the
//! way back: v1alpha2 resources with storage other than `crd` (`apis.v1alpha2.kcp.io/resource-schemas`),
//! v1alpha2 claims with verbs other than `["*"]` or a selector other than `matchAll`
//! (`apis.v1alpha2.kcp.io/permission-claims`, `.../acceptable-permission-claims`,
//! `.../status-export-permission-claims`, `.../status-applied-permission-claims`), and v1alpha1's
//! `resourceSelector` (`apis.v1alpha2.kcp.io/v1alpha1-*permission-claims`; upstream keeps every v1alpha1
//! claim there, this keeps those with a selector: `all: true` is what the way down restores anyway). v1alpha1's
//! `latestResourceSchemas` (`<prefix>.<resource>.<group>`, `core` for the legacy group) become
//! v1alpha2 `resources` with `crd` storage. One deviation: a v1alpha2 claim that reaches v1alpha1
//! with neither `all` nor `resourceSelector` to restore gets `all: true`, so a v1alpha1 client can
//! write back what it read (upstream's v1alpha1 rule requires one of them).

use serde_json::{Map, Value, json};

pub const RESOURCE_SCHEMAS_ANNOTATION: &str = "apis.v1alpha2.kcp.io/resource-schemas";
pub const PERMISSION_CLAIMS_ANNOTATION: &str = "apis.v1alpha2.kcp.io/permission-claims";
pub const V1ALPHA1_PERMISSION_CLAIMS_ANNOTATION: &str =
    "apis.v1alpha2.kcp.io/v1alpha1-permission-claims";
pub const ACCEPTABLE_PERMISSION_CLAIMS_ANNOTATION: &str =
    "apis.v1alpha2.kcp.io/acceptable-permission-claims";
pub const STATUS_PERMISSION_CLAIMS_ANNOTATION: &str =
    "apis.v1alpha2.kcp.io/status-export-permission-claims";
pub const STATUS_APPLIED_CLAIMS_ANNOTATION: &str =
    "apis.v1alpha2.kcp.io/status-applied-permission-claims";
pub const STATUS_V1ALPHA1_PERMISSION_CLAIMS_ANNOTATION: &str =
    "apis.v1alpha2.kcp.io/v1alpha1-status-export-permission-claims";
pub const STATUS_V1ALPHA1_APPLIED_CLAIMS_ANNOTATION: &str =
    "apis.v1alpha2.kcp.io/v1alpha1-status-applied-permission-claims";

/// Converts an APIExport or APIBinding to `to_api_version` (`apis.kcp.io/v1alpha1` or
/// `apis.kcp.io/v1alpha2`); other kinds and same-version conversions only set `apiVersion`.
pub fn convert(mut object: Value, to_api_version: &str) -> Value {
    let from = object["apiVersion"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let up = from.ends_with("/v1alpha1") && to_api_version.ends_with("/v1alpha2");
    let down = from.ends_with("/v1alpha2") && to_api_version.ends_with("/v1alpha1");
    match (object["kind"].as_str(), up, down) {
        (Some("APIExport"), true, _) => export_up(&mut object),
        (Some("APIExport"), _, true) => export_down(&mut object),
        (Some("APIBinding"), true, _) => binding_claim_lists(&mut object, ClaimList::up),
        (Some("APIBinding"), _, true) => binding_claim_lists(&mut object, ClaimList::down),
        _ => {}
    }
    object["apiVersion"] = json!(to_api_version);
    drop_empty_annotations(&mut object);
    object
}

/// One list of permission claims and the annotations its lost fields travel in.
struct ClaimList {
    pointer: &'static str,
    /// Claims with a `selector` (APIBinding's accepted and applied claims), not an export's.
    scoped: bool,
    /// Where v1alpha2 fields v1alpha1 cannot hold go on the way down.
    v1alpha2_annotation: &'static str,
    /// Where v1alpha1 claims go on the way up.
    v1alpha1_annotation: &'static str,
}

const EXPORT_CLAIMS: ClaimList = ClaimList {
    pointer: "/spec/permissionClaims",
    scoped: false,
    v1alpha2_annotation: PERMISSION_CLAIMS_ANNOTATION,
    v1alpha1_annotation: V1ALPHA1_PERMISSION_CLAIMS_ANNOTATION,
};

const BINDING_CLAIMS: [ClaimList; 3] = [
    ClaimList {
        pointer: "/spec/permissionClaims",
        scoped: true,
        v1alpha2_annotation: ACCEPTABLE_PERMISSION_CLAIMS_ANNOTATION,
        v1alpha1_annotation: V1ALPHA1_PERMISSION_CLAIMS_ANNOTATION,
    },
    ClaimList {
        pointer: "/status/exportPermissionClaims",
        scoped: false,
        v1alpha2_annotation: STATUS_PERMISSION_CLAIMS_ANNOTATION,
        v1alpha1_annotation: STATUS_V1ALPHA1_PERMISSION_CLAIMS_ANNOTATION,
    },
    ClaimList {
        pointer: "/status/appliedPermissionClaims",
        scoped: true,
        v1alpha2_annotation: STATUS_APPLIED_CLAIMS_ANNOTATION,
        v1alpha1_annotation: STATUS_V1ALPHA1_APPLIED_CLAIMS_ANNOTATION,
    },
];

fn binding_claim_lists(object: &mut Value, convert: fn(&ClaimList, &mut Value)) {
    for list in &BINDING_CLAIMS {
        convert(list, object);
    }
}

/// A claim's identity: group, resource and identity hash.
fn claim_key(claim: &Value) -> (String, String, String) {
    let field = |name: &str| claim[name].as_str().unwrap_or_default().to_string();
    (field("group"), field("resource"), field("identityHash"))
}

fn is_wildcard(claim: &Value) -> bool {
    claim["verbs"] == json!(["*"])
}

fn selects_all(claim: &Value) -> bool {
    claim.pointer("/selector/matchAll") == Some(&json!(true))
}

fn selector_is_empty(selector: &Value) -> bool {
    let empty = |field: &str| {
        selector.get(field).is_none_or(|v| {
            v.as_object().is_some_and(Map::is_empty) || v.as_array().is_some_and(Vec::is_empty)
        })
    };
    selector.get("matchAll") != Some(&json!(true))
        && empty("matchLabels")
        && empty("matchExpressions")
}

impl ClaimList {
    fn claims<'a>(&self, object: &'a mut Value) -> Option<&'a mut Vec<Value>> {
        object
            .pointer_mut(self.pointer)
            .and_then(Value::as_array_mut)
    }

    /// v1alpha1 -> v1alpha2.
    fn up(&self, object: &mut Value) {
        let restore = take_annotation(object, self.v1alpha2_annotation);
        let Some(claims) = self.claims(object) else {
            return;
        };
        let kept: Vec<Value> = claims
            .iter()
            .filter(|c| {
                c["resourceSelector"]
                    .as_array()
                    .is_some_and(|s| !s.is_empty())
            })
            .cloned()
            .collect();
        for claim in claims.iter_mut() {
            let Some(map) = claim.as_object_mut() else {
                continue;
            };
            let all = map.remove("all") == Some(json!(true));
            map.remove("resourceSelector");
            if self.scoped {
                map.insert("selector".into(), json!({"matchAll": all}));
            }
        }
        for original in restore.iter().flatten() {
            for claim in claims
                .iter_mut()
                .filter(|c| claim_key(c) == claim_key(original))
            {
                for field in ["verbs", "selector", "defaultSelector"] {
                    if let Some(value) = original.get(field) {
                        claim[field] = value.clone();
                    }
                }
            }
        }
        for claim in claims.iter_mut() {
            if claim
                .get("verbs")
                .and_then(Value::as_array)
                .is_none_or(Vec::is_empty)
            {
                claim["verbs"] = json!(["*"]);
            }
            if self.scoped && selector_is_empty(&claim["selector"]) {
                claim["selector"] = json!({"matchAll": true});
            }
        }
        if !kept.is_empty() {
            set_annotation(object, self.v1alpha1_annotation, &kept);
        }
    }

    /// v1alpha2 -> v1alpha1.
    fn down(&self, object: &mut Value) {
        let restore = take_annotation(object, self.v1alpha1_annotation);
        let Some(claims) = self.claims(object) else {
            return;
        };
        let overhanging: Vec<Value> = claims
            .iter()
            .filter(|c| !is_wildcard(c) || (self.scoped && !selects_all(c)))
            .cloned()
            .collect();
        for claim in claims.iter_mut() {
            let all = selects_all(claim);
            let Some(map) = claim.as_object_mut() else {
                continue;
            };
            for field in ["verbs", "selector", "defaultSelector"] {
                map.remove(field);
            }
            if all {
                map.insert("all".into(), json!(true));
            }
        }
        for original in restore.iter().flatten() {
            for claim in claims
                .iter_mut()
                .filter(|c| claim_key(c) == claim_key(original))
            {
                let Some(map) = claim.as_object_mut() else {
                    continue;
                };
                for field in ["all", "resourceSelector"] {
                    match original.get(field) {
                        Some(value) => map.insert(field.to_string(), value.clone()),
                        None => map.remove(field),
                    };
                }
            }
        }
        for claim in claims.iter_mut() {
            if claim.get("all").is_none() && claim.get("resourceSelector").is_none() {
                claim["all"] = json!(true);
            }
        }
        if !overhanging.is_empty() {
            set_annotation(object, self.v1alpha2_annotation, &overhanging);
        }
    }
}

/// The v1alpha2 resource a v1alpha1 `latestResourceSchemas` entry names.
fn resource_of_schema_name(schema: &str) -> Option<Value> {
    let mut parts = schema.splitn(3, '.');
    let (_prefix, resource, group) = (parts.next()?, parts.next()?, parts.next()?);
    let group = if group == "core" { "" } else { group };
    Some(json!({"group": group, "name": resource, "schema": schema, "storage": {"crd": {}}}))
}

fn export_up(object: &mut Value) {
    let overhanging = take_annotation(object, RESOURCE_SCHEMAS_ANNOTATION);
    let latest = object
        .get_mut("spec")
        .and_then(Value::as_object_mut)
        .and_then(|spec| spec.remove("latestResourceSchemas"));
    let mut resources: Vec<Value> = latest
        .as_ref()
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter_map(resource_of_schema_name)
        .collect();
    resources.extend(overhanging.into_iter().flatten());
    if !resources.is_empty() {
        object["spec"]["resources"] = Value::Array(resources);
    }
    EXPORT_CLAIMS.up(object);
}

fn export_down(object: &mut Value) {
    let resources = object
        .get_mut("spec")
        .and_then(Value::as_object_mut)
        .and_then(|spec| spec.remove("resources"));
    let (crd, other): (Vec<Value>, Vec<Value>) = resources
        .as_ref()
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .cloned()
        .partition(|r| r.get("storage").is_none_or(|s| s.get("crd").is_some()));
    if !crd.is_empty() {
        object["spec"]["latestResourceSchemas"] = crd.iter().map(|r| r["schema"].clone()).collect();
    }
    if !other.is_empty() {
        set_annotation(object, RESOURCE_SCHEMAS_ANNOTATION, &other);
    }
    EXPORT_CLAIMS.down(object);
}

/// Removes a JSON-list annotation and returns its items (none when absent or not a list).
fn take_annotation(object: &mut Value, name: &str) -> Option<Vec<Value>> {
    let text = object
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
        .and_then(|annotations| annotations.remove(name))?;
    serde_json::from_str(text.as_str()?).ok()
}

fn set_annotation(object: &mut Value, name: &str, items: &[Value]) {
    if !object["metadata"].is_object() {
        object["metadata"] = json!({});
    }
    if !object["metadata"]["annotations"].is_object() {
        object["metadata"]["annotations"] = json!({});
    }
    object["metadata"]["annotations"][name] = json!(Value::Array(items.to_vec()).to_string());
}

fn drop_empty_annotations(object: &mut Value) {
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut)
        && metadata
            .get("annotations")
            .and_then(Value::as_object)
            .is_some_and(Map::is_empty)
    {
        metadata.remove("annotations");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const V1: &str = "apis.kcp.io/v1alpha1";
    const V2: &str = "apis.kcp.io/v1alpha2";

    #[test]
    fn latest_resource_schemas_become_resources_and_back() {
        let v1 = json!({"apiVersion": V1, "kind": "APIExport", "metadata": {"name": "e"},
            "spec": {"latestResourceSchemas": ["today.widgets.example.com", "v1.pods.core"]}});
        let v2 = convert(v1.clone(), V2);
        assert_eq!(
            v2["spec"]["resources"],
            json!([
                {"group": "example.com", "name": "widgets", "schema": "today.widgets.example.com", "storage": {"crd": {}}},
                {"group": "", "name": "pods", "schema": "v1.pods.core", "storage": {"crd": {}}},
            ])
        );
        assert!(v2["spec"].get("latestResourceSchemas").is_none());
        assert_eq!(convert(v2, V1), v1);
    }

    #[test]
    fn what_v1alpha1_cannot_hold_survives_a_round_trip() {
        let v2 = json!({"apiVersion": V2, "kind": "APIExport", "metadata": {"name": "e"},
        "spec": {
            "resources": [
                {"group": "g", "name": "things", "schema": "a.things.g", "storage": {"crd": {}}},
                {"group": "g", "name": "virtuals", "schema": "a.virtuals.g",
                 "storage": {"virtual": {"reference": {"kind": "K", "name": "n"}, "identityHash": "h"}}},
            ],
            "permissionClaims": [
                {"group": "", "resource": "configmaps", "identityHash": "", "verbs": ["get", "list"]},
                {"group": "", "resource": "secrets", "identityHash": "", "verbs": ["*"]},
            ],
        }});
        let v1 = convert(v2.clone(), V1);
        assert_eq!(v1["spec"]["latestResourceSchemas"], json!(["a.things.g"]));
        assert_eq!(v1["spec"]["permissionClaims"][0]["all"], json!(true));
        assert!(v1["spec"]["permissionClaims"][0].get("verbs").is_none());
        assert!(v1["metadata"]["annotations"][RESOURCE_SCHEMAS_ANNOTATION].is_string());
        assert_eq!(convert(v1, V2), v2);
    }

    #[test]
    fn v1alpha1_claims_keep_their_selectors_through_v1alpha2() {
        let v1 = json!({"apiVersion": V1, "kind": "APIBinding", "metadata": {"name": "b"},
        "spec": {
            "reference": {"export": {"path": "root:org", "name": "e"}},
            "permissionClaims": [
                {"group": "", "resource": "configmaps", "all": true, "state": "Accepted"},
                {"group": "", "resource": "secrets", "resourceSelector": [{"name": "s"}], "state": "Rejected"},
            ],
        }});
        let v2 = convert(v1.clone(), V2);
        let claims = &v2["spec"]["permissionClaims"];
        assert_eq!(claims[0]["verbs"], json!(["*"]));
        assert_eq!(claims[0]["selector"], json!({"matchAll": true}));
        assert_eq!(claims[1]["state"], "Rejected");
        assert!(claims[1].get("resourceSelector").is_none());
        assert_eq!(convert(v2, V1), v1);
    }

    #[test]
    fn v1alpha2_binding_selectors_survive_v1alpha1() {
        let v2 = json!({"apiVersion": V2, "kind": "APIBinding", "metadata": {"name": "b"},
            "spec": {
                "reference": {"export": {"name": "e"}},
                "permissionClaims": [{"group": "", "resource": "configmaps", "identityHash": "",
                    "verbs": ["get"], "selector": {"matchLabels": {"a": "b"}}, "state": "Accepted"}],
            },
            "status": {"phase": "Bound"}});
        let v1 = convert(v2.clone(), V1);
        assert_eq!(v1["status"]["phase"], "Bound");
        assert_eq!(convert(v1, V2), v2);
    }

    #[test]
    fn other_kinds_change_only_their_api_version() {
        let schema = json!({"apiVersion": V1, "kind": "APIResourceSchema", "spec": {"group": "g"}});
        let converted = convert(schema.clone(), V1);
        assert_eq!(converted, schema);
    }
}
