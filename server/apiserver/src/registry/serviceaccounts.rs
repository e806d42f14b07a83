//! core/v1 ServiceAccount. Token issuing comes with authentication; here it is a plain object.

use serde_json::{Value, json};

use super::{Column, ResourceType, Strategy};

pub fn resource() -> ResourceType {
    super::resource(
        "",
        "ServiceAccount",
        "serviceaccounts",
        true,
        &["sa"],
        Box::new(ServiceAccounts),
    )
}

struct ServiceAccounts;

impl Strategy for ServiceAccounts {
    fn columns(&self) -> Vec<Column> {
        vec![Column::new(
            "Secrets",
            "string",
            "Secrets is a list of the secrets in the same namespace.",
        )]
    }

    fn cells(&self, object: &Value) -> Vec<Value> {
        vec![json!(
            object
                .get("secrets")
                .and_then(Value::as_array)
                .map_or(0, Vec::len)
        )]
    }
}
