//! The field manager: server-side apply, and ownership tracking for every other write.
//!
//! This is Kubernetes' field manager chain collapsed into two functions. [`apply`] merges an
//! applied configuration into the live object, removes what the manager applied before but
//! no longer applies (unless someone else owns it), refuses to change fields other managers
//! own unless forced, and records exactly the applied fields as the manager's Apply entry.
//! [`update`] runs after any other write (create, update, patch) and gives the fields it
//! changed to the writer's Update entry, taking them from everybody else.
//!
//! The API server validates before calling [`apply`]: the body's `apiVersion` and `kind` must
//! be the resource's (else 400 `invalid object type: <gvk>`), its `metadata.name` the request's
//! name, and a `fieldManager` is required. Defaulting and admission run after, on the returned
//! object; fields they set are owned by nobody, as in Kubernetes.
//!
//! Not modelled: conversion between API versions (every entry's fields are read against the
//! request's version, which is exact while versions share a schema), the `scale` subresource's
//! replica mapping, and the client-side-apply upgrade path for the `kubectl` manager
//! (`last-applied-configuration` conflicts).

use kcp_apimachinery::ApiError;
use serde_json::{Map, Value};
use thiserror::Error;

use crate::conflict::{Conflict, Conflicts};
use crate::fieldpath::{FieldSet, PathElement, values_equal};
use crate::managed::{
    self, ManagedEntry, ManagedFields, ManagedFieldsError, Operation, without_managed_fields,
};
use crate::schema::TypeSchema;
use crate::typed::{self, Comparison, TypeError};

/// The manager Kubernetes records writes under when the request names none.
const UNKNOWN_MANAGER: &str = "unknown";
/// The Update manager that owns an untracked object's fields when it is first applied to.
const BEFORE_FIRST_APPLY: &str = "before-first-apply";
/// The Update manager the oldest updaters are folded into.
const ANCIENT_CHANGES: &str = "ancient-changes";
/// At most this many Update entries are kept.
const MAX_UPDATE_MANAGERS: usize = 10;

/// Who writes, through which version and subresource, and when.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// The field manager (`fieldManager`, else derived from the user agent, e.g.
    /// `kubectl-edit`; empty means `unknown`).
    pub manager: &'a str,
    /// The request's group/version, e.g. `apps/v1`.
    pub api_version: &'a str,
    /// `Some("status")` for the status subresource.
    pub subresource: Option<&'a str>,
    /// The time to record, as `metav1.Time`.
    pub now: &'a str,
}

impl Request<'_> {
    fn entry(&self, operation: Operation) -> ManagedEntry {
        let manager = if self.manager.is_empty() {
            UNKNOWN_MANAGER
        } else {
            self.manager
        };
        ManagedEntry::new(
            manager,
            operation,
            self.api_version,
            self.subresource.unwrap_or_default(),
        )
    }
}

/// Why an apply was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ApplyError {
    /// Fields other managers own would change; retry with `force` to take them.
    #[error(transparent)]
    Conflicts(#[from] Conflicts),
    #[error("metadata.managedFields must be nil")]
    ManagedFieldsInConfig,
    #[error("failed to create typed patch object: {0}")]
    InvalidConfig(TypeError),
    #[error("failed to create typed live object: {0}")]
    InvalidLive(TypeError),
    #[error("failed to decode managed fields: {0}")]
    LiveManagedFields(ManagedFieldsError),
}

impl ApplyError {
    /// The Status Kubernetes answers with: 409 for conflicts, 400 for managedFields in the
    /// body, 500 for objects that do not fit their schema or unreadable stored managedFields.
    pub fn to_api_error(&self) -> ApiError {
        match self {
            ApplyError::Conflicts(conflicts) => conflicts.to_api_error(),
            ApplyError::ManagedFieldsInConfig => ApiError::bad_request(&self.to_string()),
            _ => ApiError::internal_error(&self.to_string()),
        }
    }
}

/// Server-side apply of `config` (the applied configuration, already decoded from YAML or
/// JSON) onto `live` (`None` on create), returning the object to store, `managedFields`
/// included. When nothing changes the result equals `live`, so the caller can skip the write.
pub fn apply(
    live: Option<&Value>,
    config: &Value,
    force: bool,
    schema: &TypeSchema,
    request: &Request<'_>,
) -> Result<Value, ApplyError> {
    if config
        .pointer("/metadata/managedFields")
        .is_some_and(|v| !v.is_null())
    {
        return Err(ApplyError::ManagedFieldsInConfig);
    }
    let mut managed = match live {
        Some(live) => ManagedFields::from_object(live).map_err(ApplyError::LiveManagedFields)?,
        None => ManagedFields::default(),
    };
    let position = live.and_then(managed::position);
    let live_object = live.map_or_else(empty_object, without_managed_fields);
    let writes = |name: &str| schema.writes(request.subresource, name);
    let config = restrict(config, writes);
    typed::field_set_checked(schema, &live_object, true).map_err(ApplyError::InvalidLive)?;
    let applied =
        typed::field_set_checked(schema, &config, false).map_err(ApplyError::InvalidConfig)?;

    if managed.is_empty() && live.is_some() {
        let before = Request {
            manager: BEFORE_FIRST_APPLY,
            ..*request
        };
        record_update(schema, &empty_object(), &live_object, &mut managed, &before);
    }

    let me = request.entry(Operation::Apply);
    let entry = managed.get_or_insert(me.clone());
    entry.api_version = request.api_version.to_string();
    let last = std::mem::replace(&mut entry.fields, applied);

    let merged = typed::merge(schema, schema.root(), Some(&live_object), Some(&config))
        .unwrap_or_else(empty_object);
    let merged = prune(schema, merged, &managed, &last);
    let mut comparison = typed::compare(schema, &live_object, &merged);
    comparison.retain_top_fields(writes);
    let conflicts = conflicts(&managed, &me, &comparison);
    if !force && !conflicts.0.is_empty() {
        return Err(conflicts.into());
    }
    release(&mut managed, Some(&me), &comparison);

    let changed = !values_equal(&live_object, &merged);
    if let Some(entry) = managed.get_mut(&me) {
        entry.fields = strip_meta(&entry.fields);
        if changed {
            entry.time = Some(request.now.to_string());
        }
    }
    managed.drop_empty();
    let mut out = if changed { merged } else { live_object };
    managed.write_into(&mut out, position);
    Ok(out)
}

/// Records a non-apply write: `new` replaces `live` (`None` on create). Returns `new` with
/// `metadata.managedFields` updated: the fields the write added or changed belong to the
/// writer's Update entry and to nobody else, removed fields to nobody.
///
/// Like Kubernetes, a request may rewrite `managedFields` itself (ignored on subresources);
/// `[]` or `[{}]` clears them, and objects without any stay untracked until first applied. An
/// object that does not fit the schema keeps its previous `managedFields`.
pub fn update(
    live: Option<&Value>,
    new: &Value,
    schema: &TypeSchema,
    request: &Request<'_>,
) -> Value {
    let position = managed::position(new).or_else(|| live.and_then(managed::position));
    let live_managed = || {
        live.and_then(|l| ManagedFields::from_object(l).ok())
            .unwrap_or_default()
    };
    let mut managed = match new.pointer("/metadata/managedFields") {
        _ if request.subresource.is_some() => live_managed(),
        Some(list) if ManagedFields::is_reset(list) => ManagedFields::default(),
        _ => match ManagedFields::from_object(new) {
            Ok(sent) if !sent.is_empty() => sent,
            _ => live_managed(),
        },
    };
    let mut out = without_managed_fields(new);
    if managed.is_empty() && live.is_some() {
        return out;
    }
    let old = live.map_or_else(empty_object, without_managed_fields);
    let fits = |object: &Value| typed::field_set_checked(schema, object, true).is_ok();
    if !fits(&old) || !fits(&out) {
        live_managed().write_into(&mut out, position);
        return out;
    }
    record_update(schema, &old, &out, &mut managed, request);
    managed.write_into(&mut out, position);
    out
}

/// Gives the fields `old` → `new` added or modified to the request's Update entry.
fn record_update(
    schema: &TypeSchema,
    old: &Value,
    new: &Value,
    managed: &mut ManagedFields,
    request: &Request<'_>,
) {
    let mut comparison = typed::compare(schema, old, new);
    comparison.retain_top_fields(|name| schema.writes(request.subresource, name));
    release(managed, None, &comparison);
    let gained = strip_meta(&comparison.modified.union(&comparison.added));
    if !gained.is_empty() {
        let entry = managed.get_or_insert(request.entry(Operation::Update));
        entry.fields = entry.fields.union(&gained);
        entry.time = Some(request.now.to_string());
    }
    cap_update_managers(managed);
}

/// The fields other managers own that the change modifies or adds.
fn conflicts(managed: &ManagedFields, me: &ManagedEntry, comparison: &Comparison) -> Conflicts {
    let changed = comparison.modified.union(&comparison.added);
    let mut owners: Vec<&ManagedEntry> = managed
        .entries()
        .iter()
        .filter(|e| e.identifier() != me.identifier())
        .collect();
    owners.sort_by_key(|e| e.identifier());
    let mut out = Vec::new();
    for owner in owners {
        for path in owner.fields.intersection(&changed).paths() {
            out.push(Conflict {
                owner: ManagedEntry {
                    fields: FieldSet::new(),
                    ..owner.clone()
                },
                path,
            });
        }
    }
    Conflicts(out)
}

/// Takes every changed or removed field from every entry but `keep`; drops emptied entries.
fn release(managed: &mut ManagedFields, keep: Option<&ManagedEntry>, comparison: &Comparison) {
    let lost = comparison
        .modified
        .union(&comparison.added)
        .union(&comparison.removed);
    let keep = keep.map(ManagedEntry::identifier);
    for entry in managed.entries_mut() {
        if keep.as_ref() != Some(&entry.identifier()) {
            entry.fields = entry.fields.difference(&lost);
        }
    }
    managed.drop_empty();
}

/// Removes from `merged` what the applier owned before (`last`) and no longer applies, unless
/// another entry (or the new configuration) owns it; named struct fields count as owned when
/// something below them is, so a struct nobody applies any more goes as a whole.
fn prune(schema: &TypeSchema, merged: Value, managed: &ManagedFields, last: &FieldSet) -> Value {
    if last.is_empty() {
        return merged;
    }
    let ensure = |set: &FieldSet| typed::ensure_named_fields_are_members(schema, set);
    let fields_of = |object: &Value| ensure(&typed::field_set(schema, object));
    let last = ensure(last);
    let without_last = typed::remove_items(schema, &merged, &last);
    let merged_fields = fields_of(&merged);
    let owned = fields_of(&without_last).union(&ensure(&managed.all_fields()));
    let kept = typed::remove_items(schema, &merged, &merged_fields.difference(&owned));
    let dangling = merged_fields
        .difference(&fields_of(&kept))
        .intersection(&last);
    typed::remove_items(schema, &merged, &dangling)
}

/// Folds the oldest Update entries into `ancient-changes` (one per apiVersion) so that at most
/// [`MAX_UPDATE_MANAGERS`] remain.
fn cap_update_managers(managed: &mut ManagedFields) {
    let mut updaters: Vec<ManagedEntry> = managed
        .entries()
        .iter()
        .filter(|e| e.operation == Operation::Update)
        .cloned()
        .collect();
    if updaters.len() <= MAX_UPDATE_MANAGERS {
        return;
    }
    updaters.sort_by_cached_key(|e| (e.seconds(), e.identifier()));
    let mut first_of_version: Vec<ManagedEntry> = Vec::new();
    let mut count = updaters.len();
    for updater in updaters {
        if count <= MAX_UPDATE_MANAGERS {
            break;
        }
        let bucket =
            ManagedEntry::new(ANCIENT_CHANGES, Operation::Update, &updater.api_version, "");
        let Some(first) = first_of_version
            .iter()
            .find(|f| f.api_version == updater.api_version)
        else {
            first_of_version.push(updater);
            continue;
        };
        if managed.get(&bucket).is_none()
            && let Some(moved) = managed.remove(first)
        {
            managed.put(ManagedEntry {
                fields: moved.fields,
                ..bucket.clone()
            });
        }
        if let Some(folded) = managed.remove(&updater) {
            let target = managed.get_or_insert(bucket);
            target.fields = folded.fields.union(&target.fields);
            target.time = folded.time;
            count -= 1;
        }
    }
}

/// Fields no manager ever owns: identity and bookkeeping the server sets.
fn strip_meta(set: &FieldSet) -> FieldSet {
    let mut meta = FieldSet::new();
    for top in ["apiVersion", "kind", "metadata"] {
        meta.insert(&[PathElement::field(top)]);
    }
    for field in [
        "name",
        "namespace",
        "creationTimestamp",
        "selfLink",
        "uid",
        "clusterName",
        "generation",
        "managedFields",
        "resourceVersion",
    ] {
        meta.insert(&[PathElement::field("metadata"), PathElement::field(field)]);
    }
    set.difference(&meta)
}

/// `config` with only the top-level fields the request writes.
fn restrict(config: &Value, writes: impl Fn(&str) -> bool) -> Value {
    match config {
        Value::Object(fields) => Value::Object(
            fields
                .iter()
                .filter(|(name, _)| writes(name))
                .map(|(name, value)| (name.clone(), value.clone()))
                .collect(),
        ),
        other => other.clone(),
    }
}

fn empty_object() -> Value {
    Value::Object(Map::new())
}
