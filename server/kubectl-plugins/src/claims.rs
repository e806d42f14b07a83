//! Permission claims as `kubectl kcp` handles them, following upstream's `bind.go`,
//! `claims.go` and `helpers/apis/apis`: the `resource.group` flag syntax (`core` is the empty
//! group), the claim objects of an APIBinding's `spec.permissionClaims` in both API versions
//! (v1alpha2: `verbs: ["*"]` and `selector: {matchAll: true}`; v1alpha1: `all: true`), the
//! `claims get` table and the state change of `claims accept/reject`.

use serde_json::{Map, Value, json};

use crate::apibinding::BindingVersion;
use crate::error::Error;
use crate::output::align_tabs_padded;

/// A consumer's answer to a claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimState {
    Accepted,
    Rejected,
}

impl ClaimState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Accepted => "Accepted",
            Self::Rejected => "Rejected",
        }
    }

    /// The verb upstream prints: `claim ... is accepted`.
    pub fn past_tense(self) -> &'static str {
        match self {
            Self::Accepted => "accepted",
            Self::Rejected => "rejected",
        }
    }
}

/// A claim the consumer answers when binding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    pub group: String,
    pub resource: String,
    pub identity_hash: String,
    pub state: ClaimState,
}

impl Claim {
    /// `resource.group` as written on the command line (`secrets.core` for the core group).
    pub fn display(&self) -> String {
        let group = if self.group.is_empty() {
            "core"
        } else {
            &self.group
        };
        format!("{}.{group}", self.resource)
    }

    /// The `spec.permissionClaims` entry in the binding's API version.
    pub fn to_object(&self, version: BindingVersion) -> Value {
        let mut claim = Map::new();
        if !self.group.is_empty() {
            claim.insert("group".into(), json!(self.group));
        }
        claim.insert("resource".into(), json!(self.resource));
        match version {
            BindingVersion::V1alpha2 => {
                claim.insert("verbs".into(), json!(["*"]));
                self.insert_identity_hash(&mut claim);
                claim.insert("selector".into(), json!({"matchAll": true}));
            }
            BindingVersion::V1alpha1 => {
                claim.insert("all".into(), json!(true));
                self.insert_identity_hash(&mut claim);
            }
        }
        claim.insert("state".into(), json!(self.state.as_str()));
        Value::Object(claim)
    }

    fn insert_identity_hash(&self, claim: &mut Map<String, Value>) {
        if !self.identity_hash.is_empty() {
            claim.insert("identityHash".into(), json!(self.identity_hash));
        }
    }
}

/// `--accept-permission-claim`/`--reject-permission-claim` values: `resource.group`, split at
/// the first dot; `core` means the empty group. Every bad value is reported, as upstream does.
pub fn parse_claim_flags(values: &[String], state: ClaimState) -> Result<Vec<Claim>, Error> {
    let mut claims = Vec::new();
    let mut invalid = Vec::new();
    for value in values {
        match value.split_once('.') {
            Some((resource, group)) if !resource.is_empty() && !group.is_empty() => {
                claims.push(Claim {
                    group: if group == "core" { "" } else { group }.to_owned(),
                    resource: resource.to_owned(),
                    identity_hash: String::new(),
                    state,
                });
            }
            _ => invalid.push(format!("invalid permission claim {value:?}")),
        }
    }
    if invalid.is_empty() {
        return Ok(claims);
    }
    let which = match state {
        ClaimState::Accepted => "accepted",
        ClaimState::Rejected => "rejected",
    };
    Err(Error::msg(format!(
        "invalid {which} permission claims: [{}]",
        invalid.join(" ")
    )))
}

/// The claims an APIExport asks for (`spec.permissionClaims`), all answered with `state`:
/// `--accept-all-permission-claims` and `--reject-all-permission-claims`.
pub fn export_claims(export: &Value, state: ClaimState) -> Vec<Claim> {
    export
        .pointer("/spec/permissionClaims")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|claim| Claim {
            group: text(claim, "group").to_owned(),
            resource: text(claim, "resource").to_owned(),
            identity_hash: text(claim, "identityHash").to_owned(),
            state,
        })
        .collect()
}

/// Which claims of a binding `claims accept/reject` changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimTarget {
    /// `--resource resource[.group]`: every claim on that group and resource.
    Resource { group: String, resource: String },
    /// `--identity-hash`: the first claim with that identity hash.
    IdentityHash(String),
}

impl ClaimTarget {
    /// `--resource` wins over `--identity-hash`, as upstream's switch does.
    pub fn from_flags(resource: &str, identity_hash: &str) -> Option<Self> {
        if !resource.is_empty() {
            let (resource, group) = resource.split_once('.').unwrap_or((resource, ""));
            let group = if group == "core" { "" } else { group };
            return Some(Self::Resource {
                group: group.to_owned(),
                resource: resource.to_owned(),
            });
        }
        (!identity_hash.is_empty()).then(|| Self::IdentityHash(identity_hash.to_owned()))
    }
}

/// The binding's `spec.permissionClaims` with the targeted claims set to `state`, or `None`
/// when no claim matches.
pub fn with_claim_state(binding: &Value, target: &ClaimTarget, state: ClaimState) -> Option<Value> {
    let mut claims = binding
        .pointer("/spec/permissionClaims")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut changed = false;
    for claim in &mut claims {
        let matches = match target {
            ClaimTarget::Resource { group, resource } => {
                text(claim, "group") == group && text(claim, "resource") == resource
            }
            ClaimTarget::IdentityHash(hash) => text(claim, "identityHash") == hash,
        };
        if matches {
            claim["state"] = json!(state.as_str());
            changed = true;
            if matches!(target, ClaimTarget::IdentityHash(_)) {
                break;
            }
        }
    }
    changed.then_some(Value::Array(claims))
}

/// A string field of a claim or binding, empty when absent.
fn text<'a>(value: &'a Value, key: &str) -> &'a str {
    value.get(key).and_then(Value::as_str).unwrap_or_default()
}

/// `kubectl kcp claims get apibinding`: one row per claim in the bindings' specs, aligned like
/// kubectl's printers (tabwriter with padding 3); v1alpha1 has no verbs column.
pub fn claims_table(bindings: &[Value], version: BindingVersion) -> String {
    let mut table = match version {
        BindingVersion::V1alpha2 => "APIBINDING\tGROUP-RESOURCE\tVERBS\tSTATUS\n",
        BindingVersion::V1alpha1 => "APIBINDING\tGROUP-RESOURCE\tSTATUS\n",
    }
    .to_owned();
    for binding in bindings {
        let name = binding
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let claims = binding
            .pointer("/spec/permissionClaims")
            .and_then(Value::as_array)
            .into_iter()
            .flatten();
        for claim in claims {
            let get = |key: &str| text(claim, key);
            let group_resource = match get("group") {
                "" => get("resource").to_owned(),
                group => format!("{}.{group}", get("resource")),
            };
            let state = get("state");
            match version {
                BindingVersion::V1alpha2 => {
                    let verbs: Vec<&str> = claim
                        .get("verbs")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .filter_map(Value::as_str)
                        .collect();
                    let verbs = verbs.join(",");
                    table.push_str(&format!("{name}\t{group_resource}\t{verbs}\t{state}\n"));
                }
                BindingVersion::V1alpha1 => {
                    table.push_str(&format!("{name}\t{group_resource}\t{state}\n"));
                }
            }
        }
    }
    align_tabs_padded(&table, 3)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(values: &[&str]) -> Vec<String> {
        values.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn claim_flags() {
        let claims = parse_claim_flags(
            &strings(&["secrets.core", "gateways.networking.istio.io"]),
            ClaimState::Accepted,
        )
        .unwrap_or_default();
        assert_eq!(claims.len(), 2);
        assert_eq!(
            (claims[0].group.as_str(), claims[0].resource.as_str()),
            ("", "secrets")
        );
        assert_eq!(claims[1].group, "networking.istio.io");
        assert_eq!(claims[1].display(), "gateways.networking.istio.io");
        assert_eq!(claims[0].display(), "secrets.core");
        let err = parse_claim_flags(
            &strings(&["secrets", ".core", "ok.core"]),
            ClaimState::Rejected,
        )
        .err()
        .map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some(
                "invalid rejected permission claims: [invalid permission claim \"secrets\" invalid permission claim \".core\"]"
            )
        );
    }

    #[test]
    fn claim_objects_per_version() {
        let claim = Claim {
            group: String::new(),
            resource: "configmaps".into(),
            identity_hash: String::new(),
            state: ClaimState::Accepted,
        };
        assert_eq!(
            serde_json::to_string(&claim.to_object(BindingVersion::V1alpha2)).ok(),
            Some(
                r#"{"resource":"configmaps","verbs":["*"],"selector":{"matchAll":true},"state":"Accepted"}"#
                    .to_owned()
            )
        );
        let hashed = Claim {
            group: "g.io".into(),
            identity_hash: "abc".into(),
            state: ClaimState::Rejected,
            ..claim
        };
        assert_eq!(
            hashed.to_object(BindingVersion::V1alpha1),
            json!({"group": "g.io", "resource": "configmaps", "all": true, "identityHash": "abc", "state": "Rejected"})
        );
    }

    fn binding() -> Value {
        json!({"metadata": {"name": "cert-manager"}, "spec": {"permissionClaims": [
            {"resource": "secrets", "verbs": ["get", "list"], "state": "Rejected"},
            {"group": "g.io", "resource": "things", "identityHash": "h1", "verbs": ["*"], "state": "Accepted"},
            {"group": "g.io", "resource": "things", "identityHash": "h2", "verbs": ["*"]},
        ]}})
    }

    #[test]
    fn claim_state_changes() {
        let target = ClaimTarget::from_flags("secrets.core", "h1");
        assert_eq!(
            target,
            Some(ClaimTarget::Resource {
                group: String::new(),
                resource: "secrets".into()
            })
        );
        let claims = target
            .and_then(|t| with_claim_state(&binding(), &t, ClaimState::Accepted))
            .unwrap_or_default();
        assert_eq!(claims[0]["state"], "Accepted");
        assert_eq!(claims[1]["state"], "Accepted");

        let by_resource = ClaimTarget::from_flags("things.g.io", "");
        let claims = by_resource
            .and_then(|t| with_claim_state(&binding(), &t, ClaimState::Rejected))
            .unwrap_or_default();
        assert_eq!(
            (claims[1]["state"].as_str(), claims[2]["state"].as_str()),
            (Some("Rejected"), Some("Rejected"))
        );

        let by_hash = ClaimTarget::IdentityHash("h2".into());
        let claims =
            with_claim_state(&binding(), &by_hash, ClaimState::Rejected).unwrap_or_default();
        assert_eq!(claims[1]["state"], "Accepted");
        assert_eq!(claims[2]["state"], "Rejected");

        let none = ClaimTarget::from_flags("pods", "");
        assert_eq!(
            none.and_then(|t| with_claim_state(&binding(), &t, ClaimState::Accepted)),
            None
        );
        assert_eq!(ClaimTarget::from_flags("", ""), None);
    }

    #[test]
    fn tables() {
        let bindings = [
            binding(),
            json!({"metadata": {"name": "empty"}, "spec": {}}),
        ];
        assert_eq!(
            claims_table(&bindings, BindingVersion::V1alpha2),
            "APIBINDING     GROUP-RESOURCE   VERBS      STATUS\n\
             cert-manager   secrets          get,list   Rejected\n\
             cert-manager   things.g.io      *          Accepted\n\
             cert-manager   things.g.io      *          \n"
        );
        assert_eq!(
            claims_table(&bindings[..1], BindingVersion::V1alpha1),
            "APIBINDING     GROUP-RESOURCE   STATUS\n\
             cert-manager   secrets          Rejected\n\
             cert-manager   things.g.io      Accepted\n\
             cert-manager   things.g.io      \n"
        );
        assert_eq!(
            claims_table(&[], BindingVersion::V1alpha2),
            "APIBINDING   GROUP-RESOURCE   VERBS   STATUS\n"
        );
    }
}
