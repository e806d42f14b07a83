//! Permission claims as labels (upstream's `permissionclaims` labels and the
//! `permissionclaimlabel` controller): an object a consumer granted through an accepted claim
//! carries the label `claimed.internal.apis.kcp.io/<export hash>` = `<claim hash>`, which the
//! apiexport virtual workspace lists and watches by. The export hash is of the export's
//! `<cluster>:<name>`; the claim hash is of the claim's identity only (group, resource, identity
//! hash): never its verbs, nor its `defaultSelector` or the binding's `selector` (kcp PR #4200),
//! so the export's claim and the binding's accepted claim name the same label. Which objects
//! carry it follows the accepted claim's selector (`matchAll`, or `matchLabels` and
//! `matchExpressions`), re-evaluated whenever the object or the binding changes.
//!
//! Both hashes are SHA-224 in lowercase-first base62, as upstream's `Base62Sha224`.

use std::collections::{BTreeMap, BTreeSet};

use kcp_apimachinery::labels::LabelSelector;
use kcp_apimachinery::meta;
use serde_json::{Value, json};
use sha2::{Digest, Sha224};

/// The prefix of every claim label's key.
pub const LABEL_PREFIX: &str = "claimed.internal.apis.kcp.io/";
/// The label APIBinding admission puts on every binding: the [`export_hash`] of the export it
/// binds, so an export's bindings are found by label selector (upstream's
/// `internal.apis.kcp.io/export`).
pub const EXPORT_LABEL: &str = "internal.apis.kcp.io/export";
/// `spec.permissionClaims[].state` of a claim the consumer accepted.
pub const ACCEPTED: &str = "Accepted";

/// What names a claim: group, resource and (for a resource bound from an export) its identity.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ClaimedResource {
    pub group: String,
    pub resource: String,
    pub identity_hash: String,
}

impl ClaimedResource {
    fn of(claim: &Value) -> Option<ClaimedResource> {
        Some(ClaimedResource {
            group: claim["group"].as_str().unwrap_or_default().to_string(),
            resource: claim["resource"].as_str()?.to_string(),
            identity_hash: claim["identityHash"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
        })
    }
}

/// A claim a consumer accepted, with what it grants.
#[derive(Debug, Clone)]
pub struct AcceptedClaim {
    pub resource: ClaimedResource,
    pub verbs: Vec<String>,
    /// The accepted selector (an invalid one selects nothing).
    pub selector: LabelSelector,
    /// The selector as written, for the binding's status.
    pub scoped: Value,
}

impl AcceptedClaim {
    /// Whether the claim lets the provider use `verb`.
    pub fn allows(&self, verb: &str) -> bool {
        allows(&self.verbs, verb)
    }
}

/// The claims of an object (v1alpha2 `spec.permissionClaims`: an export's, or a binding's).
fn spec_claims(object: &Value) -> impl Iterator<Item = &Value> {
    object
        .pointer("/spec/permissionClaims")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

/// A binding's claims in state `Accepted`, as written.
fn accepted(binding: &Value) -> impl Iterator<Item = &Value> {
    spec_claims(binding).filter(|claim| claim["state"] == ACCEPTED)
}

/// The claims of a binding (v1alpha2 `spec.permissionClaims`) in state `Accepted`.
pub fn accepted_claims(binding: &Value) -> Vec<AcceptedClaim> {
    accepted(binding)
        .filter_map(|claim| {
            Some(AcceptedClaim {
                resource: ClaimedResource::of(claim)?,
                verbs: verbs_of(claim),
                selector: selector_of(&claim["selector"]),
                scoped: claim.clone(),
            })
        })
        .collect()
}

/// The resources a binding's `status.appliedPermissionClaims` name (labels to take back when the
/// claims are no longer accepted).
pub fn applied_claims(binding: &Value) -> Vec<ClaimedResource> {
    binding
        .pointer("/status/appliedPermissionClaims")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(ClaimedResource::of)
        .collect()
}

/// The accepted claims that ask for something else than the export's claim of the same resource
/// (upstream's `detectClaimMismatches`): other verbs (unless either side has `*`), or a
/// selector other than the export's `defaultSelector` (when it has one). One line per claim:
/// `<resource>.<group> (verbs: accepted [..], exported [..]; selector differs from
/// defaultSelector)`.
pub fn mismatches(binding: &Value, export: &Value) -> Vec<String> {
    let exported: Vec<&Value> = spec_claims(export).collect();
    accepted(binding)
        .filter_map(|accepted| {
            let resource = ClaimedResource::of(accepted)?;
            let claim = exported
                .iter()
                .find(|c| ClaimedResource::of(c).as_ref() == Some(&resource))?;
            let mut parts = Vec::new();
            let (mine, theirs) = (verbs_of(accepted), verbs_of(claim));
            let wildcard = mine.iter().chain(&theirs).any(|v| v == "*");
            let as_set = |verbs: &[String]| verbs.iter().cloned().collect::<BTreeSet<String>>();
            if !wildcard && as_set(&mine) != as_set(&theirs) {
                parts.push(format!(
                    "verbs: accepted [{}], exported [{}]",
                    mine.join(" "),
                    theirs.join(" ")
                ));
            }
            if let Some(default) = claim.get("defaultSelector")
                && normalized_selector(&accepted["selector"]) != normalized_selector(default)
            {
                parts.push("selector differs from defaultSelector".to_string());
            }
            (!parts.is_empty()).then(|| {
                format!(
                    "{}.{} ({})",
                    resource.resource,
                    resource.group,
                    parts.join("; ")
                )
            })
        })
        .collect()
}

/// A claim selector with absent and empty fields alike (`matchAll`, `matchLabels`,
/// `matchExpressions`), for comparing what two selectors say.
fn normalized_selector(selector: &Value) -> (bool, Value, Value) {
    let non_empty = |field: &str| match selector.get(field) {
        Some(Value::Object(map)) if !map.is_empty() => Value::Object(map.clone()),
        Some(Value::Array(items)) if !items.is_empty() => Value::Array(items.clone()),
        _ => Value::Null,
    };
    (
        selector["matchAll"] == true,
        non_empty("matchLabels"),
        non_empty("matchExpressions"),
    )
}

/// A claim an export makes (v1alpha2 `spec.permissionClaims[]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportedClaim {
    pub resource: ClaimedResource,
    pub verbs: Vec<String>,
}

/// The claims an export makes.
pub fn exported_claims(export: &Value) -> Vec<ExportedClaim> {
    export
        .pointer("/spec/permissionClaims")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|claim| {
            Some(ExportedClaim {
                resource: ClaimedResource::of(claim)?,
                verbs: verbs_of(claim),
            })
        })
        .collect()
}

fn verbs_of(claim: &Value) -> Vec<String> {
    claim["verbs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_string)
        .collect()
}

/// Whether `verbs` allow `verb` (`*` allows every verb).
pub fn allows(verbs: &[String], verb: &str) -> bool {
    verbs.iter().any(|v| v == verb || v == "*")
}

/// `matchAll: true` selects everything; otherwise `matchLabels` and `matchExpressions` (an
/// empty selector, as in Kubernetes, selects everything; an invalid one nothing).
fn selector_of(selector: &Value) -> LabelSelector {
    if selector["matchAll"] == true {
        return LabelSelector::everything();
    }
    let mut labels_only = json!({});
    for field in ["matchLabels", "matchExpressions"] {
        if let Some(value) = selector.get(field) {
            labels_only[field] = value.clone();
        }
    }
    LabelSelector::from_json(&labels_only).unwrap_or_else(|_| LabelSelector::nothing())
}

/// The label key of export `export_name` in logical cluster `export_cluster`.
pub fn label_key(export_cluster: &str, export_name: &str) -> String {
    format!("{LABEL_PREFIX}{}", export_hash(export_cluster, export_name))
}

/// The hash naming export `export_name` of logical cluster `export_cluster` in labels: of
/// `<cluster>:<name>` (the claim labels' key, and the value of every binding's [`EXPORT_LABEL`]).
pub fn export_hash(export_cluster: &str, export_name: &str) -> String {
    base62_sha224(format!("{export_cluster}:{export_name}").as_bytes())
}

/// The label value of a claim: its identity only, never verbs or selectors.
pub fn label_value(claim: &ClaimedResource) -> String {
    let identity = json!({
        "group": claim.group,
        "resource": claim.resource,
        "identityHash": claim.identity_hash,
    });
    base62_sha224(identity.to_string().as_bytes())
}

/// SHA-224 of `data` as a base62 number (digits, then lowercase, then uppercase letters, like
/// Go's `big.Int.Text(62)`), leading zero bytes dropped.
fn base62_sha224(data: &[u8]) -> String {
    const DIGITS: &[u8; 62] = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    let mut number: Vec<u8> = Sha224::digest(data).to_vec();
    let mut out = Vec::new();
    while number.iter().any(|&b| b != 0) {
        let mut remainder = 0u32;
        for byte in number.iter_mut() {
            let value = (remainder << 8) | u32::from(*byte);
            *byte = (value / 62) as u8;
            remainder = value % 62;
        }
        out.push(DIGITS[remainder as usize]);
    }
    if out.is_empty() {
        out.push(b'0');
    }
    out.reverse();
    String::from_utf8_lossy(&out).into_owned()
}

/// One export's accepted claim on a resource in a logical cluster: the label it puts on the
/// objects its selector selects.
#[derive(Debug, Clone)]
pub struct ClaimLabel {
    pub key: String,
    pub value: String,
    pub selector: LabelSelector,
}

/// `object` with its claim labels as `claims` (every accepted claim on the object's resource in
/// its logical cluster) want them, or `None` when they already are. Selectors are evaluated on
/// the object's other labels, so a claim label never selects itself.
pub fn relabeled(object: &Value, claims: &[ClaimLabel]) -> Option<Value> {
    let current = meta::labels(object);
    let own: BTreeMap<String, String> = current
        .iter()
        .filter(|(k, _)| !k.starts_with(LABEL_PREFIX))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let mut wanted = own.clone();
    for claim in claims {
        if claim.selector.matches(&own) {
            wanted.insert(claim.key.clone(), claim.value.clone());
        }
    }
    if wanted == current {
        return None;
    }
    let mut object = object.clone();
    let metadata = meta::metadata_mut(&mut object);
    if wanted.is_empty() {
        metadata.remove("labels");
    } else {
        metadata.insert("labels".into(), json!(wanted));
    }
    Some(object)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn configmaps() -> ClaimedResource {
        ClaimedResource {
            group: String::new(),
            resource: "configmaps".into(),
            identity_hash: String::new(),
        }
    }

    #[test]
    fn the_label_ignores_verbs_and_selectors() {
        let binding = json!({"spec": {"permissionClaims": [
            {"group": "", "resource": "configmaps", "verbs": ["get"], "selector": {"matchAll": true}, "state": "Accepted"},
            {"group": "", "resource": "secrets", "verbs": ["*"], "selector": {"matchAll": true}, "state": "Rejected"},
        ]}});
        let export = json!({"spec": {"permissionClaims": [
            {"group": "", "resource": "configmaps", "verbs": ["get", "list"], "defaultSelector": {"matchLabels": {"a": "b"}}},
        ]}});
        let accepted = accepted_claims(&binding);
        assert_eq!(accepted.len(), 1, "the rejected claim is not accepted");
        assert!(accepted[0].allows("get") && !accepted[0].allows("list"));
        assert!(allows(&["*".to_string()], "watch"));
        assert_eq!(
            label_value(&accepted[0].resource),
            label_value(&exported_claims(&export)[0].resource)
        );
        assert_ne!(
            label_value(&configmaps()),
            label_value(&ClaimedResource {
                identity_hash: "x".into(),
                ..configmaps()
            })
        );
        let key = label_key("2abc", "widgets");
        assert!(key.starts_with(LABEL_PREFIX));
        assert!(key.len() - LABEL_PREFIX.len() <= 63);
        assert_ne!(key, label_key("2abc", "gadgets"));
    }

    #[test]
    fn base62_is_gos_big_int_text() {
        // Computed independently: Python's int.from_bytes(sha224(b"root:widgets")) in base 62.
        assert_eq!(
            base62_sha224(b"root:widgets"),
            "1oNwKzCPVdx8ged3ajqEGHgS4wYwVD4iICmHKO"
        );
        assert_eq!(
            label_key("root", "widgets"),
            format!("{LABEL_PREFIX}1oNwKzCPVdx8ged3ajqEGHgS4wYwVD4iICmHKO")
        );
    }

    #[test]
    fn selectors_decide_which_objects_carry_the_label() {
        let claim = |selector: Value| ClaimLabel {
            key: label_key("p", "e"),
            value: label_value(&configmaps()),
            selector: selector_of(&selector),
        };
        let object = json!({"metadata": {"name": "c", "labels": {"team": "a"}}});
        let all = relabeled(&object, &[claim(json!({"matchAll": true}))]).unwrap();
        assert_eq!(meta::labels(&all).len(), 2);
        assert_eq!(relabeled(&all, &[claim(json!({"matchAll": true}))]), None);

        let team_b = claim(json!({"matchLabels": {"team": "b"}}));
        let removed = relabeled(&all, std::slice::from_ref(&team_b)).unwrap();
        assert_eq!(meta::labels(&removed), meta::labels(&object));
        assert_eq!(relabeled(&object, &[team_b]), None);

        let expression = claim(
            json!({"matchExpressions": [{"key": "team", "operator": "In", "values": ["a", "c"]}]}),
        );
        assert!(relabeled(&object, &[expression]).is_some());
        let unlabeled = json!({"metadata": {"name": "c"}});
        let dropped = relabeled(&all, &[]).unwrap();
        assert_eq!(meta::labels(&dropped), meta::labels(&object));
        assert_eq!(relabeled(&unlabeled, &[]), None);
    }
}
