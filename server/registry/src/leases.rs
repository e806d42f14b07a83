//! coordination.k8s.io/v1 Lease, the object controllers use for leader election.

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

impl Strategy for Leases {
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
