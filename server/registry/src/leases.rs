//! coordination.k8s.io/v1 Lease, the object controllers use for leader election.
//!
//! Validation is kube's `ValidateLeaseSpec`: `leaseDurationSeconds` > 0, `leaseTransitions` >= 0.
//! `spec.strategy` and `spec.preferredHolder` belong to the CoordinatedLeaderElection feature,
//! off by default in Kubernetes 1.35, so they are dropped as kube's `dropDisabledFields` does
//! (kept on update only when the stored lease already uses them).

use kcp_apimachinery::FieldError;
use serde_json::{Value, json};

use super::{Column, ResourceType, Strategy};

pub fn resource() -> ResourceType {
    super::resource(
        "coordination.k8s.io",
        "Lease",
        "leases",
        true,
        &[],
        Box::new(Leases),
    )
}

struct Leases;

/// Fields of the CoordinatedLeaderElection feature gate (off by default).
const GATED_FIELDS: [&str; 2] = ["strategy", "preferredHolder"];

fn uses_gated_fields(lease: &Value) -> bool {
    GATED_FIELDS.iter().any(|f| {
        lease
            .pointer(&format!("/spec/{f}"))
            .is_some_and(|v| !v.is_null())
    })
}

fn drop_gated_fields(lease: &mut Value) {
    if let Some(spec) = lease.get_mut("spec").and_then(Value::as_object_mut) {
        for field in GATED_FIELDS {
            spec.remove(field);
        }
    }
}

impl Strategy for Leases {
    fn prepare_for_create(&self, object: &mut Value) {
        drop_gated_fields(object);
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value, _subresource: Option<&str>) {
        if !uses_gated_fields(old) {
            drop_gated_fields(new);
        }
    }

    fn validate(&self, object: &Value) -> Vec<FieldError> {
        let mut errors = Vec::new();
        let positive = [("leaseDurationSeconds", 1), ("leaseTransitions", 0)];
        for (field, min) in positive {
            if let Some(value) = object.pointer(&format!("/spec/{field}"))
                && value.as_i64().is_none_or(|v| v < min)
            {
                let detail = if min == 1 {
                    "must be greater than 0"
                } else {
                    "must be greater than or equal to 0"
                };
                errors.push(FieldError::invalid(
                    &format!("spec.{field}"),
                    value.clone(),
                    detail,
                ));
            }
        }
        errors
    }

    fn columns(&self) -> Vec<Column> {
        vec![Column::new("Holder", "string", "The holder of the lease.")]
    }

    fn cells(&self, object: &Value) -> Vec<Value> {
        vec![
            object
                .pointer("/spec/holderIdentity")
                .cloned()
                .unwrap_or(json!("")),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errors(lease: &Value) -> Vec<String> {
        Leases
            .validate(lease)
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn lease_duration_is_positive() {
        assert!(errors(&json!({"spec": {"leaseDurationSeconds": 1}})).is_empty());
        assert_eq!(
            errors(&json!({"spec": {"leaseDurationSeconds": 0}})),
            ["spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0"]
        );
    }

    #[test]
    fn lease_transitions_are_not_negative() {
        assert!(errors(&json!({"spec": {"leaseTransitions": 0}})).is_empty());
        assert_eq!(
            errors(&json!({"spec": {"leaseTransitions": -1}})),
            ["spec.leaseTransitions: Invalid value: -1: must be greater than or equal to 0"]
        );
    }

    #[test]
    fn coordinated_leader_election_fields_are_dropped() {
        let mut lease = json!({"spec": {"holderIdentity": "a", "strategy": "OldestEmulationVersion", "preferredHolder": "b"}});
        Leases.prepare_for_create(&mut lease);
        assert_eq!(lease, json!({"spec": {"holderIdentity": "a"}}));
        let old = json!({"spec": {"strategy": "OldestEmulationVersion"}});
        let mut new =
            json!({"spec": {"strategy": "OldestEmulationVersion", "preferredHolder": "b"}});
        Leases.prepare_for_update(&mut new, &old, None);
        assert_eq!(new["spec"]["preferredHolder"], "b");
    }
}
