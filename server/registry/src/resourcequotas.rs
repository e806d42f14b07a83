//! core/v1 ResourceQuota: limits per namespace, whose `status.used` the quota controller keeps
//! and quota admission raises before each create it admits.

use serde_json::{Value, json};

use super::{ResourceType, Strategy};

pub fn resource() -> ResourceType {
    let mut t = super::resource(
        "",
        "ResourceQuota",
        "resourcequotas",
        true,
        &["quota"],
        Box::new(Quotas),
    );
    t.subresources = vec!["status".into()];
    t
}

struct Quotas;

impl Strategy for Quotas {
    fn prepare_for_update(&self, new: &mut Value, old: &Value, subresource: Option<&str>) {
        if subresource.is_none() {
            new["status"] = old.get("status").cloned().unwrap_or_else(|| json!({}));
        }
    }
}
