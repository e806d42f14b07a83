//! `metadata.managedFields`: who owns which fields, read from and written to objects.
//!
//! Kubernetes keys entries by manager identity: an Apply entry by (manager, subresource), so a
//! manager keeps one Apply entry across API versions; an Update entry by (manager, apiVersion,
//! subresource), so updates through another version start a new entry. Reading keeps the last
//! entry of an identity, as Kubernetes' decoder does. Writing sorts entries as Kubernetes does
//! (Apply before Update, then by time, manager, apiVersion, subresource) and writes each in
//! `ManagedFieldsEntry` field order, so a stored object reads back byte-identical.

use serde_json::{Map, Value, json};
use thiserror::Error;

use crate::fieldpath::{FieldSet, FieldsV1Error, gojson};

/// The operation that produced an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Operation {
    Apply,
    Update,
}

impl Operation {
    /// The wire form.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Apply => "Apply",
            Operation::Update => "Update",
        }
    }
}

/// `metadata.managedFields` that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ManagedFieldsError {
    #[error("managedFields must be a list of objects")]
    NotAList,
    #[error("operation must be `Apply` or `Update`")]
    Operation,
    #[error("apiVersion must not be empty")]
    ApiVersion,
    #[error("missing fieldsType in managed fields entry {0}")]
    MissingFieldsType(usize),
    #[error("invalid fieldsType {0} in managed fields entry {1}")]
    FieldsType(String, usize),
    #[error("error decoding set from entry {index}: {source}")]
    Fields {
        index: usize,
        #[source]
        source: FieldsV1Error,
    },
}

/// One `managedFields` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManagedEntry {
    pub manager: String,
    pub operation: Operation,
    pub api_version: String,
    /// `metav1.Time`; absent when the entry never changed the object.
    pub time: Option<String>,
    /// Empty for the main resource.
    pub subresource: String,
    pub fields: FieldSet,
}

impl ManagedEntry {
    /// An entry owning nothing yet.
    pub fn new(manager: &str, operation: Operation, api_version: &str, subresource: &str) -> Self {
        ManagedEntry {
            manager: manager.to_string(),
            operation,
            api_version: api_version.to_string(),
            time: None,
            subresource: subresource.to_string(),
            fields: FieldSet::new(),
        }
    }

    /// Kubernetes' manager identifier: the entry without fields and time (and without
    /// apiVersion for Apply), as JSON. Entries are unique by it and conflicts sort by it.
    pub fn identifier(&self) -> String {
        let mut id = Map::new();
        id.insert("manager".into(), json!(self.manager));
        id.insert("operation".into(), json!(self.operation.as_str()));
        if self.operation == Operation::Update && !self.api_version.is_empty() {
            id.insert("apiVersion".into(), json!(self.api_version));
        }
        if !self.subresource.is_empty() {
            id.insert("subresource".into(), json!(self.subresource));
        }
        Value::Object(id).to_string()
    }

    /// How Kubernetes names the manager in conflict messages: `"m"`, `"m" with subresource
    /// "status"`, and ` using <apiVersion>` for updaters.
    pub fn describe(&self) -> String {
        let mut out = gojson::quote(&self.manager);
        if !self.subresource.is_empty() {
            out.push_str(&format!(
                " with subresource {}",
                gojson::quote(&self.subresource)
            ));
        }
        if self.operation == Operation::Update {
            out.push_str(&format!(" using {}", self.api_version));
        }
        out
    }

    fn same_identity(&self, other: &ManagedEntry) -> bool {
        self.identifier() == other.identifier()
    }

    fn parse(index: usize, entry: &Value) -> Result<ManagedEntry, ManagedFieldsError> {
        let text = |name: &str| entry.get(name).and_then(Value::as_str).unwrap_or_default();
        let operation = match text("operation") {
            "Apply" => Operation::Apply,
            "Update" => Operation::Update,
            _ => return Err(ManagedFieldsError::Operation),
        };
        if text("apiVersion").is_empty() {
            return Err(ManagedFieldsError::ApiVersion);
        }
        match text("fieldsType") {
            "FieldsV1" => {}
            "" => return Err(ManagedFieldsError::MissingFieldsType(index)),
            other => return Err(ManagedFieldsError::FieldsType(gojson::quote(other), index)),
        }
        let fields = match entry.get("fieldsV1") {
            None | Some(Value::Null) => FieldSet::new(),
            Some(doc) => FieldSet::from_fields_v1(doc)
                .map_err(|source| ManagedFieldsError::Fields { index, source })?,
        };
        Ok(ManagedEntry {
            manager: text("manager").to_string(),
            operation,
            api_version: text("apiVersion").to_string(),
            time: entry
                .get("time")
                .and_then(Value::as_str)
                .map(str::to_string),
            subresource: text("subresource").to_string(),
            fields,
        })
    }

    fn to_value(&self) -> Value {
        let mut out = Map::new();
        if !self.manager.is_empty() {
            out.insert("manager".into(), json!(self.manager));
        }
        out.insert("operation".into(), json!(self.operation.as_str()));
        out.insert("apiVersion".into(), json!(self.api_version));
        if let Some(time) = &self.time {
            out.insert("time".into(), json!(time));
        }
        out.insert("fieldsType".into(), json!("FieldsV1"));
        out.insert("fieldsV1".into(), self.fields.to_fields_v1());
        if !self.subresource.is_empty() {
            out.insert("subresource".into(), json!(self.subresource));
        }
        Value::Object(out)
    }

    /// Seconds since the epoch, for ordering; 0 without (or with an unreadable) time.
    pub(crate) fn seconds(&self) -> i64 {
        self.time
            .as_deref()
            .and_then(|t| kcp_apimachinery::time::parse_rfc3339(t).ok())
            .map_or(0, |t| t.as_second())
    }
}

/// All entries of one object, unique by identity.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ManagedFields {
    entries: Vec<ManagedEntry>,
}

impl ManagedFields {
    /// The entries of `object`'s `metadata.managedFields` (none when absent or `null`).
    pub fn from_object(object: &Value) -> Result<Self, ManagedFieldsError> {
        match object.pointer("/metadata/managedFields") {
            None | Some(Value::Null) => Ok(ManagedFields::default()),
            Some(list) => ManagedFields::from_value(list),
        }
    }

    /// Reads a `managedFields` list.
    pub fn from_value(list: &Value) -> Result<Self, ManagedFieldsError> {
        let items = list.as_array().ok_or(ManagedFieldsError::NotAList)?;
        let mut out = ManagedFields::default();
        for (index, item) in items.iter().enumerate() {
            out.put(ManagedEntry::parse(index, item)?);
        }
        Ok(out)
    }

    /// Whether a `managedFields` value asks to clear all entries: `[]` or `[{}]`.
    pub fn is_reset(list: &Value) -> bool {
        match list.as_array().map(Vec::as_slice) {
            Some([]) => true,
            Some([only]) => only.as_object().is_some_and(Map::is_empty),
            _ => false,
        }
    }

    /// The entries, in no particular order.
    pub fn entries(&self) -> &[ManagedEntry] {
        &self.entries
    }

    /// The entry with `entry`'s identity.
    pub fn get(&self, like: &ManagedEntry) -> Option<&ManagedEntry> {
        self.entries.iter().find(|e| e.same_identity(like))
    }

    /// The entry with `like`'s identity, to change.
    pub(crate) fn get_mut(&mut self, like: &ManagedEntry) -> Option<&mut ManagedEntry> {
        self.entries.iter_mut().find(|e| e.same_identity(like))
    }

    /// The entry with `like`'s identity, created from `like` when missing.
    pub(crate) fn get_or_insert(&mut self, like: ManagedEntry) -> &mut ManagedEntry {
        let index = match self.entries.iter().position(|e| e.same_identity(&like)) {
            Some(index) => index,
            None => {
                self.entries.push(like);
                self.entries.len() - 1
            }
        };
        &mut self.entries[index]
    }

    /// Adds `entry`, replacing the entry of the same identity.
    pub fn put(&mut self, entry: ManagedEntry) {
        self.entries.retain(|e| !e.same_identity(&entry));
        self.entries.push(entry);
    }

    /// Removes the entry with `like`'s identity.
    pub(crate) fn remove(&mut self, like: &ManagedEntry) -> Option<ManagedEntry> {
        let index = self.entries.iter().position(|e| e.same_identity(like))?;
        Some(self.entries.remove(index))
    }

    pub(crate) fn entries_mut(&mut self) -> impl Iterator<Item = &mut ManagedEntry> {
        self.entries.iter_mut()
    }

    /// Drops entries that own nothing.
    pub(crate) fn drop_empty(&mut self) {
        self.entries.retain(|e| !e.fields.is_empty());
    }

    /// Whether there are no entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Every field some entry owns.
    pub(crate) fn all_fields(&self) -> FieldSet {
        self.entries
            .iter()
            .fold(FieldSet::new(), |all, e| all.union(&e.fields))
    }

    /// The `managedFields` list, sorted as Kubernetes writes it.
    pub fn to_value(&self) -> Value {
        let mut sorted: Vec<&ManagedEntry> = self.entries.iter().collect();
        sorted.sort_by(|p, q| {
            p.operation
                .cmp(&q.operation)
                .then_with(|| p.seconds().cmp(&q.seconds()))
                .then_with(|| p.manager.cmp(&q.manager))
                .then_with(|| p.api_version.cmp(&q.api_version))
                .then_with(|| p.subresource.cmp(&q.subresource))
        });
        Value::Array(sorted.into_iter().map(ManagedEntry::to_value).collect())
    }

    /// Stores the entries as `object`'s `metadata.managedFields` at key position `index` of
    /// `metadata` (the end when `None` or past it), or removes the field when there are none.
    pub fn write_into(&self, object: &mut Value, index: Option<usize>) {
        let Some(root) = object.as_object_mut() else {
            return;
        };
        if self.entries.is_empty() {
            if let Some(Value::Object(meta)) = root.get_mut("metadata") {
                meta.shift_remove("managedFields");
            }
            return;
        }
        let meta = root
            .entry("metadata")
            .or_insert_with(|| Value::Object(Map::new()));
        if !meta.is_object() {
            *meta = Value::Object(Map::new());
        }
        if let Value::Object(meta) = meta {
            meta.shift_remove("managedFields");
            let index = index.unwrap_or(meta.len()).min(meta.len());
            meta.shift_insert(index, "managedFields".into(), self.to_value());
        }
    }
}

/// Where `metadata.managedFields` sits among `object`'s metadata keys.
pub(crate) fn position(object: &Value) -> Option<usize> {
    object
        .get("metadata")
        .and_then(Value::as_object)
        .and_then(|meta| meta.keys().position(|k| k == "managedFields"))
}

/// `object` without `metadata.managedFields`.
pub(crate) fn without_managed_fields(object: &Value) -> Value {
    let mut out = object.clone();
    if let Some(Value::Object(meta)) = out.get_mut("metadata") {
        meta.shift_remove("managedFields");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries() -> Value {
        json!([
            {"manager": "kubectl-edit", "operation": "Update", "apiVersion": "v1",
             "time": "2024-01-02T00:00:00Z", "fieldsType": "FieldsV1",
             "fieldsV1": {"f:data": {"f:b": {}}}},
            {"manager": "kubectl", "operation": "Apply", "apiVersion": "v1",
             "time": "2024-01-03T00:00:00Z", "fieldsType": "FieldsV1",
             "fieldsV1": {"f:data": {"f:a": {}}}},
            {"manager": "kubectl-client-side-apply", "operation": "Update", "apiVersion": "v1",
             "time": "2024-01-01T00:00:00Z", "fieldsType": "FieldsV1",
             "fieldsV1": {"f:data": {".": {}, "f:a": {}}}},
            {"manager": "ctrl", "operation": "Update", "apiVersion": "v1",
             "time": "2024-01-01T00:00:00Z", "fieldsType": "FieldsV1",
             "fieldsV1": {"f:status": {"f:phase": {}}}, "subresource": "status"}
        ])
    }

    #[test]
    fn round_trip_sorted_like_kubernetes() {
        let managed = ManagedFields::from_value(&entries()).unwrap();
        let written = managed.to_value();
        let order: Vec<&str> = written
            .as_array()
            .into_iter()
            .flatten()
            .map(|e| e["manager"].as_str().unwrap_or_default())
            .collect();
        assert_eq!(
            order,
            [
                "kubectl",
                "ctrl",
                "kubectl-client-side-apply",
                "kubectl-edit"
            ]
        );
        assert_eq!(
            serde_json::to_string(&written[1]).unwrap(),
            r#"{"manager":"ctrl","operation":"Update","apiVersion":"v1","time":"2024-01-01T00:00:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:status":{"f:phase":{}}},"subresource":"status"}"#
        );
        assert_eq!(
            ManagedFields::from_value(&written).unwrap().to_value(),
            written
        );
    }

    #[test]
    fn identity_and_descriptions() {
        let apply = ManagedEntry::new("kubectl", Operation::Apply, "v1", "");
        assert_eq!(
            apply.identifier(),
            r#"{"manager":"kubectl","operation":"Apply"}"#
        );
        assert_eq!(apply.describe(), "\"kubectl\"");
        let update = ManagedEntry::new("ctrl", Operation::Update, "apps/v1", "status");
        assert_eq!(
            update.identifier(),
            r#"{"manager":"ctrl","operation":"Update","apiVersion":"apps/v1","subresource":"status"}"#
        );
        assert_eq!(
            update.describe(),
            "\"ctrl\" with subresource \"status\" using apps/v1"
        );
        // The same applier through another version is the same entry; an updater is not.
        let mut managed = ManagedFields::default();
        managed.put(apply.clone());
        managed.put(ManagedEntry::new("kubectl", Operation::Apply, "v2", ""));
        managed.put(ManagedEntry::new("ctrl", Operation::Update, "v1", ""));
        managed.put(ManagedEntry::new("ctrl", Operation::Update, "v2", ""));
        assert_eq!(managed.entries().len(), 3);
        assert_eq!(
            managed.get(&apply).map(|e| e.api_version.as_str()),
            Some("v2")
        );
    }

    #[test]
    fn rejects_bad_entries_and_detects_resets() {
        let bad = |entry: Value| ManagedFields::from_value(&json!([entry])).unwrap_err();
        assert_eq!(
            bad(json!({"operation": "Patch", "apiVersion": "v1"})),
            ManagedFieldsError::Operation
        );
        assert_eq!(
            bad(json!({"operation": "Apply"})),
            ManagedFieldsError::ApiVersion
        );
        assert_eq!(
            bad(json!({"operation": "Apply", "apiVersion": "v1"})),
            ManagedFieldsError::MissingFieldsType(0)
        );
        assert_eq!(
            bad(json!({"operation": "Apply", "apiVersion": "v1", "fieldsType": "FieldsV2"}))
                .to_string(),
            "invalid fieldsType \"FieldsV2\" in managed fields entry 0"
        );
        assert!(ManagedFields::is_reset(&json!([])));
        assert!(ManagedFields::is_reset(&json!([{}])));
        assert!(!ManagedFields::is_reset(&entries()));
        assert!(!ManagedFields::is_reset(&Value::Null));
    }

    #[test]
    fn written_in_place() {
        let managed = ManagedFields::from_value(&entries()).unwrap();
        let mut object = json!({"metadata": {"name": "x", "managedFields": [], "uid": "u"}});
        let at = position(&object);
        let mut stripped = without_managed_fields(&object);
        managed.write_into(&mut stripped, at);
        let keys: Vec<&String> = stripped["metadata"].as_object().unwrap().keys().collect();
        assert_eq!(keys, ["name", "managedFields", "uid"]);
        ManagedFields::default().write_into(&mut object, at);
        assert_eq!(object, json!({"metadata": {"name": "x", "uid": "u"}}));
    }
}
