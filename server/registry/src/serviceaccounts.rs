//! core/v1 ServiceAccount, with the `token` subresource (TokenRequest, answered by
//! the API server's resource handlers with the server's token issuer).

use serde_json::{Value, json};

use super::{Column, ResourceType, Strategy};

pub fn resource() -> ResourceType {
    let mut t = super::resource(
        "",
        "ServiceAccount",
        "serviceaccounts",
        true,
        &["sa"],
        Box::new(ServiceAccounts),
    );
    t.subresources = vec!["token".into()];
    t
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
