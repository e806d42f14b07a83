//! Table output (`as=Table;v=v1;g=meta.k8s.io`), which is what `kubectl get` prints.
//!
//! Every type has a name column first and an age column last, like kube-apiserver's default printers;
//! strategies add the columns in between.

use std::borrow::Cow;

use jiff::Timestamp;
use kcp_apimachinery::meta;

use super::ResourceType;
use serde_json::{Value, json};

/// One column of a table.
#[derive(Debug, Clone, PartialEq)]
pub struct Column {
    pub name: Cow<'static, str>,
    pub type_: Cow<'static, str>,
    pub description: Cow<'static, str>,
    /// 0 for `kubectl get`, >0 only with `-o wide`.
    pub priority: u32,
}

impl Column {
    pub const fn new(name: &'static str, type_: &'static str, description: &'static str) -> Self {
        Column {
            name: Cow::Borrowed(name),
            type_: Cow::Borrowed(type_),
            description: Cow::Borrowed(description),
            priority: 0,
        }
    }
    /// A column defined at run time (a CRD's `additionalPrinterColumns`).
    pub fn owned(name: String, type_: String, description: String, priority: u32) -> Self {
        Column {
            name: Cow::Owned(name),
            type_: Cow::Owned(type_),
            description: Cow::Owned(description),
            priority,
        }
    }

    fn definition(&self) -> Value {
        json!({"name": self.name, "type": self.type_, "format": if self.name == "Name" { "name" } else { "" },
            "description": self.description, "priority": self.priority})
    }
}

const NAME: Column = Column::new("Name", "string", "Name must be unique within a namespace.");
/// The standard age column, for types that place it elsewhere than last.
pub const AGE: Column = Column::new(
    "Age",
    "string",
    "CreationTimestamp is a timestamp representing the server time when this object was created.",
);

/// What each row carries besides its cells (`includeObject`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IncludeObject {
    None,
    Metadata,
    Object,
}

/// Builds the Table of some objects of a type, with the columns its strategy defines.
pub fn for_type(
    rt: &ResourceType,
    objects: &[Value],
    list_metadata: Value,
    include: IncludeObject,
) -> Value {
    let strategy = &rt.strategy;
    let with_age = strategy.age_column();
    let mut definitions = vec![NAME.definition()];
    definitions.extend(strategy.columns().iter().map(Column::definition));
    if with_age {
        definitions.push(AGE.definition());
    }
    let rows: Vec<Value> = objects
        .iter()
        .map(|object| {
            let mut cells = vec![json!(meta::name(object).unwrap_or_default())];
            cells.extend(strategy.cells(object));
            if with_age {
                cells.push(json!(age(meta::creation_timestamp(object))));
            }
            let mut row = json!({"cells": cells});
            match include {
                IncludeObject::None => {}
                IncludeObject::Metadata => row["object"] = partial_object_metadata(object),
                IncludeObject::Object => row["object"] = object.clone(),
            }
            row
        })
        .collect();
    json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": list_metadata,
        "columnDefinitions": definitions, "rows": rows})
}

/// An object reduced to its metadata (`PartialObjectMetadata`), as tables and metadata-only clients get.
pub fn partial_object_metadata(object: &Value) -> Value {
    json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
        "metadata": object.get("metadata").cloned().unwrap_or_else(|| json!({}))})
}

/// `kubectl`'s age format: the time since a timestamp, in its largest two units, e.g. `5m`, `3h12m`, `4d`.
pub fn age(timestamp: Option<&str>) -> String {
    let Some(since) = timestamp.and_then(|t| t.parse::<Timestamp>().ok()) else {
        return "<unknown>".to_string();
    };
    human_duration(Timestamp::now().as_second() - since.as_second())
}

/// Kubernetes' `duration.HumanDuration`.
pub(crate) fn human_duration(seconds: i64) -> String {
    let s = seconds.max(0);
    match s {
        s if s < 120 => format!("{s}s"),
        s if s < 600 => match s % 60 {
            0 => format!("{}m", s / 60),
            r => format!("{}m{r}s", s / 60),
        },
        s if s < 3 * 3600 => format!("{}m", s / 60),
        s if s < 8 * 3600 => match (s / 60) % 60 {
            0 => format!("{}h", s / 3600),
            m => format!("{}h{m}m", s / 3600),
        },
        s if s < 48 * 3600 => format!("{}h", s / 3600),
        s if s < 8 * 86400 => match (s / 3600) % 24 {
            0 => format!("{}d", s / 86400),
            h => format!("{}d{h}h", s / 86400),
        },
        s if s < 2 * 365 * 86400 => format!("{}d", s / 86400),
        s if s < 8 * 365 * 86400 => match (s / 86400) % 365 {
            0 => format!("{}y", s / (365 * 86400)),
            d => format!("{}y{d}d", s / (365 * 86400)),
        },
        s => format!("{}y", s / (365 * 86400)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_durations_match_kubectl() {
        assert_eq!(human_duration(5), "5s");
        assert_eq!(human_duration(150), "2m30s");
        assert_eq!(human_duration(600), "10m");
        assert_eq!(human_duration(4 * 3600 + 60 * 5), "4h5m");
        assert_eq!(human_duration(30 * 3600), "30h");
        assert_eq!(human_duration(3 * 86400 + 3600), "3d1h");
        assert_eq!(human_duration(100 * 86400), "100d");
    }

    #[test]
    fn table_has_name_first_and_age_last() {
        let registry = crate::Registry::new();
        let configmaps = registry.builtin_type("", "v1", "configmaps").unwrap();
        let objects = vec![
            json!({"metadata": {"name": "a", "creationTimestamp": "2020-01-01T00:00:00Z"},
            "data": {"x": "1", "y": "2"}}),
        ];
        let table = for_type(&configmaps, &objects, json!({}), IncludeObject::Metadata);
        let names: Vec<&str> = table["columnDefinitions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["Name", "Data", "Age"]);
        assert_eq!(table["rows"][0]["cells"][0], "a");
        assert_eq!(table["rows"][0]["cells"][1], 2);
        assert_eq!(table["rows"][0]["object"]["kind"], "PartialObjectMetadata");
    }
}
