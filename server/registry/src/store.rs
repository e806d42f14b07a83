//! The generic REST store: the object lifecycle every resource type shares.
//!
//! Like kube-apiserver's generic registry store, this is where metadata semantics live (uid,
//! generateName, creationTimestamp, resourceVersion preconditions, finalizers and graceful deletion,
//! no-op updates, namespace existence), independent of HTTP. Handlers call it after decoding a request;
//! in-process controllers (namespace deletion) and bootstrap call it directly, so they obey exactly the
//! same rules as clients.

use std::sync::Arc;

use kcp_apimachinery::validation::{self, MAX_STORED_OBJECT_BYTES};
use kcp_apimachinery::{ApiError, FieldError, meta, names, time};
use kcp_storage::Revision;
use serde_json::{Value, json};

use super::namespaces;
use super::{Registry, ResourceType};
use crate::LogicalClusterName;
use crate::admission::{Admit, NoAdmission, Operation, Write};
use crate::hooks::{AfterWrite, Hooks, WriteKind, Written};
use crate::storage::objects::{ListPage, ListRequest, ObjectRef};
use crate::storage::{ObjectStore, ResourceKeys, StoredObject};

/// How many times a write that lost a compare-and-swap race is retried when the client did not ask
/// for a specific resourceVersion.
const CONFLICT_RETRIES: usize = 8;

/// Where an object lives.
#[derive(Debug, Clone, Copy)]
pub struct Location<'a> {
    pub cluster: &'a LogicalClusterName,
    pub namespace: Option<&'a str>,
}

/// Options of a delete (metav1.DeleteOptions, after parsing).
#[derive(Debug, Clone, Default)]
pub struct DeleteOptions {
    pub dry_run: bool,
    pub precondition_uid: Option<String>,
    pub precondition_resource_version: Option<String>,
    pub propagation: Propagation,
}

/// What happens to an object's dependents (`DeleteOptions.propagationPolicy`). The garbage
/// collector carries out the two that hold the owner back, through the finalizers named here.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Propagation {
    /// The owner goes now; the garbage collector deletes its dependents afterwards.
    #[default]
    Background,
    /// The owner stays (finalizer `foregroundDeletion`) until its blocking dependents are gone.
    Foreground,
    /// The owner stays (finalizer `orphan`) until its dependents no longer point at it.
    Orphan,
}

impl Propagation {
    /// The finalizer that holds the owner while the garbage collector works.
    fn finalizer(self) -> Option<&'static str> {
        match self {
            Propagation::Background => None,
            Propagation::Foreground => Some("foregroundDeletion"),
            Propagation::Orphan => Some("orphan"),
        }
    }
}

/// What a delete did.
#[derive(Debug, Clone)]
pub enum Deleted {
    /// The object is gone; this was its last state.
    Gone(Value),
    /// The object waits for finalizers (or, for namespaces, for its content to go); this is its state.
    Pending(Value),
}

/// An update computed from the current object: a full replacement (PUT) or a patch applied to it.
pub type UpdateFn<'a> = dyn Fn(&Value) -> Result<Value, ApiError> + Send + Sync + 'a;

/// Object lifecycle over the [`ObjectStore`].
#[derive(Clone)]
pub struct RestStore {
    objects: ObjectStore,
    registry: Arc<Registry>,
    hooks: Hooks,
}

impl RestStore {
    pub fn new(objects: ObjectStore, registry: Arc<Registry>) -> Self {
        RestStore {
            objects,
            registry,
            hooks: Hooks::default(),
        }
    }

    /// This store with one more reaction to every write it makes (see [`crate::hooks`]).
    pub fn with_hook(self, hook: Arc<dyn AfterWrite>) -> Self {
        RestStore {
            hooks: self.hooks.with(hook),
            ..self
        }
    }

    fn written(&self, rt: &ResourceType, at: Location<'_>, name: &str, kind: WriteKind) {
        self.hooks.run(&Written {
            rt,
            cluster: at.cluster,
            namespace: at.namespace,
            name,
            kind,
        });
    }

    pub fn objects(&self) -> &ObjectStore {
        &self.objects
    }

    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    /// Where objects of a type are stored.
    pub fn keys(&self, rt: &ResourceType) -> ResourceKeys {
        self.objects
            .keys(&rt.storage_group, &rt.plural, rt.layout.clone())
    }

    fn key(&self, rt: &ResourceType, at: Location<'_>, name: &str) -> String {
        self.keys(rt).object(at.cluster, at.namespace, name)
    }

    fn what<'a>(rt: &'a ResourceType, name: &'a str) -> ObjectRef<'a> {
        ObjectRef {
            group: &rt.group,
            resource: &rt.plural,
            name,
        }
    }

    pub async fn get(
        &self,
        rt: &ResourceType,
        at: Location<'_>,
        name: &str,
    ) -> Result<StoredObject, ApiError> {
        let mut stored = self
            .objects
            .get_existing(&self.key(rt, at, name), Self::what(rt, name))
            .await?;
        stored.object = rt.strategy.storage_to_api(stored.object);
        Ok(stored)
    }

    /// A page of objects under a storage prefix, converted to the type's API version.
    pub async fn list(
        &self,
        rt: &ResourceType,
        request: ListRequest<'_>,
        keep: &(dyn Fn(&Value) -> bool + Sync),
    ) -> Result<ListPage, ApiError> {
        let keep_converted = |stored: &Value| keep(&rt.strategy.storage_to_api(stored.clone()));
        let mut page = self.objects.list(request, &keep_converted).await?;
        page.items = page
            .items
            .into_iter()
            .map(|o| rt.strategy.storage_to_api(o))
            .collect();
        Ok(page)
    }

    /// Creates an object without admission (controllers, bootstrap); see [`create_admitted`](Self::create_admitted).
    pub async fn create(
        &self,
        rt: &ResourceType,
        at: Location<'_>,
        object: Value,
        dry_run: bool,
    ) -> Result<Value, ApiError> {
        self.create_admitted(rt, at, object, dry_run, &NoAdmission)
            .await
    }

    /// Creates an object: mutating admission, system metadata, defaults, validation, validating
    /// admission, the namespace check, the write.
    pub async fn create_admitted(
        &self,
        rt: &ResourceType,
        at: Location<'_>,
        mut object: Value,
        dry_run: bool,
        admit: &dyn Admit,
    ) -> Result<Value, ApiError> {
        check_type_meta(rt, &mut object)?;
        if meta::resource_version(&object).is_some_and(|rv| !rv.is_empty()) {
            return Err(ApiError::bad_request(
                "resourceVersion should not be set on objects to be created",
            ));
        }
        self.align_namespace(rt, at, &mut object)?;
        let requested_name = meta::name(&object).unwrap_or_default().to_string();
        let write = Write {
            rt,
            cluster: at.cluster,
            namespace: at.namespace,
            name: &requested_name,
            subresource: None,
            operation: Operation::Create,
            dry_run,
        };
        admit.mutate(write, &mut object, None).await?;
        check_type_meta(rt, &mut object)?;
        self.align_namespace(rt, at, &mut object)?;
        if meta::name(&object).is_none_or(str::is_empty)
            && let Some(prefix) = meta::generate_name(&object).filter(|p| !p.is_empty())
        {
            let name = format!("{prefix}{}", names::generate_name_suffix());
            meta::set_name(&mut object, &name);
        }
        meta::set_uid(&mut object, &names::new_uid());
        meta::set_creation_timestamp(&mut object, &time::now_rfc3339());
        clear_deletion(&mut object);
        prune(rt, &mut object);
        rt.strategy.prepare_for_create(&mut object);
        let mut errors =
            validation::validate_object_meta(&object, rt.namespaced, rt.strategy.name_rule());
        errors.extend(rt.strategy.validate(&object));
        let name = meta::name(&object).unwrap_or_default().to_string();
        if !errors.is_empty() {
            return Err(ApiError::invalid(&rt.group, &rt.kind, &name, errors));
        }
        check_size(&object)?;
        let write = Write {
            name: &name,
            ..write
        };
        admit.validate(write, Some(&object), None).await?;
        if let Some(namespace) = at.namespace.filter(|_| rt.namespaced) {
            self.check_namespace_accepts_content(rt, at.cluster, namespace, &name)
                .await?;
        }
        let stored = rt.strategy.api_to_storage(object);
        if dry_run {
            return Ok(rt.strategy.storage_to_api(stored));
        }
        let created = self
            .objects
            .create(&self.key(rt, at, &name), &stored, Self::what(rt, &name))
            .await?;
        self.written(rt, at, &name, WriteKind::Created);
        Ok(rt.strategy.storage_to_api(created.object))
    }

    /// Creates an object unless one of that name exists (what bootstrap and controllers do to
    /// make something be there); whether it was created.
    pub async fn create_if_absent(
        &self,
        rt: &ResourceType,
        at: Location<'_>,
        object: Value,
    ) -> Result<bool, ApiError> {
        match self.create(rt, at, object, false).await {
            Ok(_) => Ok(true),
            Err(e) if e.code == 409 => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Updates an object without admission (controllers, bootstrap); see
    /// [`update_admitted`](Self::update_admitted).
    pub async fn update(
        &self,
        rt: &ResourceType,
        at: Location<'_>,
        name: &str,
        update: &UpdateFn<'_>,
        subresource: Option<&str>,
        dry_run: bool,
    ) -> Result<Value, ApiError> {
        self.update_admitted(rt, at, name, update, subresource, dry_run, &NoAdmission)
            .await
    }

    /// Updates an object with a function of its current state (a PUT body or a patch). When the result
    /// carries a resourceVersion, it must be the current one (409 otherwise); when it does not, lost
    /// races are retried against the new state, admission included.
    #[allow(clippy::too_many_arguments)]
    pub async fn update_admitted(
        &self,
        rt: &ResourceType,
        at: Location<'_>,
        name: &str,
        update: &UpdateFn<'_>,
        subresource: Option<&str>,
        dry_run: bool,
        admit: &dyn Admit,
    ) -> Result<Value, ApiError> {
        let key = self.key(rt, at, name);
        let write = Write {
            rt,
            cluster: at.cluster,
            namespace: at.namespace,
            name,
            subresource,
            operation: Operation::Update,
            dry_run,
        };
        let mut attempts = 0;
        loop {
            attempts += 1;
            let current = self.get(rt, at, name).await?;
            let mut new = update(&current.object)?;
            check_type_meta(rt, &mut new)?;
            if meta::name(&new) != Some(name) {
                return Err(ApiError::bad_request(&format!(
                    "the name of the object ({}) does not match the name on the URL ({name})",
                    meta::name(&new).unwrap_or_default()
                )));
            }
            self.align_namespace(rt, at, &mut new)?;
            let requested_rv = meta::resource_version(&new)
                .filter(|rv| !rv.is_empty())
                .map(str::to_string);
            if let Some(rv) = &requested_rv
                && rv.parse::<Revision>().ok() != Some(current.revision)
            {
                return Err(ApiError::conflict(
                    &rt.group,
                    &rt.plural,
                    name,
                    kcp_apimachinery::status::OPTIMISTIC_LOCK_ERROR_MSG,
                ));
            }
            if requested_rv.is_none() {
                // An unconditional update is an update of what is stored now (kube does the same).
                meta::set_resource_version(&mut new, &current.revision.to_string());
            }
            admit.mutate(write, &mut new, Some(&current.object)).await?;
            check_type_meta(rt, &mut new)?;
            self.align_namespace(rt, at, &mut new)?;
            let new = self.prepare_update(rt, new, &current.object, subresource)?;
            if equal_but_resource_version(&new, &current.object) {
                return Ok(current.object);
            }
            admit
                .validate(write, Some(&new), Some(&current.object))
                .await?;
            let finished = meta::deletion_timestamp(&new).is_some()
                && meta::finalizers(&new).is_empty()
                && !blocks_deletion(rt, &new);
            if dry_run {
                return Ok(new);
            }
            let stored = rt.strategy.api_to_storage(new);
            let result = if finished {
                self.objects
                    .delete(&key, Some(current.revision), Self::what(rt, name))
                    .await
            } else {
                self.objects
                    .update(&key, &stored, current.revision, Self::what(rt, name))
                    .await
            };
            match result {
                Ok(written) => {
                    let kind = if finished {
                        WriteKind::Deleted
                    } else {
                        WriteKind::Updated
                    };
                    self.written(rt, at, name, kind);
                    return Ok(rt.strategy.storage_to_api(written.object));
                }
                Err(e)
                    if e.code == 409 && requested_rv.is_none() && attempts < CONFLICT_RETRIES =>
                {
                    continue;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// System metadata, defaulting and validation of an update (of the object or of a subresource).
    fn prepare_update(
        &self,
        rt: &ResourceType,
        mut new: Value,
        old: &Value,
        subresource: Option<&str>,
    ) -> Result<Value, ApiError> {
        let name = meta::name(old).unwrap_or_default().to_string();
        // System fields the client cannot change (kube's BeforeUpdate): copied from the stored object
        // when absent, rejected when different.
        let mut errors: Vec<FieldError> = Vec::new();
        if let Some(uid) = meta::uid(&new).filter(|u| !u.is_empty())
            && Some(uid) != meta::uid(old)
        {
            errors.push(FieldError::invalid(
                "metadata.uid",
                json!(uid),
                "field is immutable",
            ));
        }
        for (field, value) in [
            ("uid", old.pointer("/metadata/uid")),
            (
                "creationTimestamp",
                old.pointer("/metadata/creationTimestamp"),
            ),
            (
                "deletionTimestamp",
                old.pointer("/metadata/deletionTimestamp"),
            ),
            (
                "deletionGracePeriodSeconds",
                old.pointer("/metadata/deletionGracePeriodSeconds"),
            ),
        ] {
            let metadata = meta::metadata_mut(&mut new);
            match value {
                Some(v) => metadata.insert(field.to_string(), v.clone()),
                None => metadata.remove(field),
            };
        }
        prune(rt, &mut new);
        rt.strategy.prepare_for_update(&mut new, old, subresource);
        errors.extend(validation::validate_object_meta(
            &new,
            rt.namespaced,
            rt.strategy.name_rule(),
        ));
        errors.extend(validation::validate_object_meta_update(&new, old));
        errors.extend(rt.strategy.validate_update(&new, old));
        if meta::deletion_timestamp(old).is_some() {
            let added: Vec<String> = meta::finalizers(&new)
                .into_iter()
                .filter(|f| !meta::finalizers(old).contains(f))
                .collect();
            if !added.is_empty() {
                errors.push(FieldError::forbidden(
                    "metadata.finalizers",
                    &format!("no new finalizers can be added if the object is being deleted, found new finalizers {added:?}"),
                ));
            }
        }
        if !errors.is_empty() {
            return Err(ApiError::invalid(&rt.group, &rt.kind, &name, errors));
        }
        check_size(&new)?;
        Ok(new)
    }

    /// Deletes an object without admission (controllers, bootstrap); see
    /// [`delete_admitted`](Self::delete_admitted).
    pub async fn delete(
        &self,
        rt: &ResourceType,
        at: Location<'_>,
        name: &str,
        options: &DeleteOptions,
    ) -> Result<Deleted, ApiError> {
        self.delete_admitted(rt, at, name, options, &NoAdmission)
            .await
    }

    /// Deletes an object after validating admission of the deletion (which sees the object as it
    /// is), or marks it for deletion when finalizers hold it.
    pub async fn delete_admitted(
        &self,
        rt: &ResourceType,
        at: Location<'_>,
        name: &str,
        options: &DeleteOptions,
        admit: &dyn Admit,
    ) -> Result<Deleted, ApiError> {
        let key = self.key(rt, at, name);
        let write = Write {
            rt,
            cluster: at.cluster,
            namespace: at.namespace,
            name,
            subresource: None,
            operation: Operation::Delete,
            dry_run: options.dry_run,
        };
        for _ in 0..CONFLICT_RETRIES {
            let current = self.get(rt, at, name).await?;
            check_preconditions(rt, name, &current, options)?;
            admit.validate(write, None, Some(&current.object)).await?;
            if meta::deletion_timestamp(&current.object).is_some() {
                return Ok(Deleted::Pending(current.object));
            }
            let held_by = options.propagation.finalizer();
            if !meta::finalizers(&current.object).is_empty()
                || blocks_deletion(rt, &current.object)
                || held_by.is_some()
            {
                let mut marked = current.object.clone();
                if let Some(finalizer) = held_by {
                    let mut finalizers = meta::finalizers(&marked);
                    if !finalizers.iter().any(|f| f == finalizer) {
                        finalizers.push(finalizer.to_string());
                        meta::metadata_mut(&mut marked)
                            .insert("finalizers".to_string(), json!(finalizers));
                    }
                }
                meta::set_deletion_timestamp(&mut marked, &time::now_rfc3339());
                meta::set_deletion_grace_period_seconds(&mut marked, 0);
                if rt.group.is_empty() && rt.plural == "namespaces" {
                    marked["status"]["phase"] = json!("Terminating");
                }
                if options.dry_run {
                    return Ok(Deleted::Pending(marked));
                }
                let stored = rt.strategy.api_to_storage(marked);
                match self
                    .objects
                    .update(&key, &stored, current.revision, Self::what(rt, name))
                    .await
                {
                    Ok(written) => {
                        self.written(rt, at, name, WriteKind::Deleted);
                        return Ok(Deleted::Pending(rt.strategy.storage_to_api(written.object)));
                    }
                    Err(e) if e.code == 409 => continue,
                    Err(e) => return Err(e),
                }
            }
            if options.dry_run {
                return Ok(Deleted::Gone(current.object));
            }
            match self
                .objects
                .delete(&key, Some(current.revision), Self::what(rt, name))
                .await
            {
                Ok(gone) => {
                    self.written(rt, at, name, WriteKind::Deleted);
                    return Ok(Deleted::Gone(rt.strategy.storage_to_api(gone.object)));
                }
                Err(e) if e.code == 409 => continue,
                Err(e) => return Err(e),
            }
        }
        Err(ApiError::conflict(
            &rt.group,
            &rt.plural,
            name,
            "too many concurrent changes while deleting",
        ))
    }

    /// The object's namespace must be the request's (filled in when absent); cluster-scoped objects
    /// have none.
    fn align_namespace(
        &self,
        rt: &ResourceType,
        at: Location<'_>,
        object: &mut Value,
    ) -> Result<(), ApiError> {
        if !rt.namespaced {
            if meta::namespace(object).is_some_and(|ns| !ns.is_empty()) {
                meta::metadata_mut(object).remove("namespace");
            }
            return Ok(());
        }
        let Some(namespace) = at.namespace else {
            return Err(ApiError::bad_request(
                "the namespace of the request is required for namespaced resources",
            ));
        };
        match meta::namespace(object) {
            None | Some("") => meta::set_namespace(object, namespace),
            Some(ns) if ns == namespace => {}
            Some(_) => {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
        }
        Ok(())
    }

    async fn check_namespace_accepts_content(
        &self,
        rt: &ResourceType,
        cluster: &LogicalClusterName,
        namespace: &str,
        name: &str,
    ) -> Result<(), ApiError> {
        let Some(namespaces) = self.registry.builtin_type("", "v1", "namespaces") else {
            return Ok(());
        };
        let at = Location {
            cluster,
            namespace: None,
        };
        let ns = match self.get(&namespaces, at, namespace).await {
            Ok(ns) => ns,
            Err(e) if e.code == 404 => {
                return Err(ApiError::not_found("", "namespaces", namespace));
            }
            Err(e) => return Err(e),
        };
        if namespaces::is_terminating(&ns.object) {
            let mut error = ApiError::forbidden(
                &rt.group,
                &rt.plural,
                name,
                &format!(
                    "unable to create new content in namespace {namespace} because it is being terminated"
                ),
            );
            if let Some(details) = error.details.as_mut() {
                details.causes.push(kcp_apimachinery::status::StatusCause {
                    reason: "NamespaceTerminating".into(),
                    message: format!("namespace {namespace} is being terminated"),
                    field: "metadata.namespace".into(),
                });
            }
            return Err(error);
        }
        Ok(())
    }
}

/// Namespaces are held by `spec.finalizers` too, not only `metadata.finalizers`.
fn blocks_deletion(rt: &ResourceType, object: &Value) -> bool {
    rt.group.is_empty()
        && rt.plural == "namespaces"
        && object
            .pointer("/spec/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|f| !f.is_empty())
}

/// `apiVersion`/`kind` of a body must name the endpoint's type (filled in when absent).
fn check_type_meta(rt: &ResourceType, object: &mut Value) -> Result<(), ApiError> {
    if !object.is_object() {
        return Err(ApiError::bad_request(
            "the body of the request must be a JSON object",
        ));
    }
    let api_version = rt.api_version();
    match meta::api_version(object) {
        None | Some("") => object["apiVersion"] = json!(api_version),
        Some(v) if v == api_version => {}
        Some(v) => {
            return Err(ApiError::bad_request(&format!(
                "the API version in the data ({v}) does not match the expected API version ({api_version})"
            )));
        }
    }
    match meta::kind(object) {
        None | Some("") => object["kind"] = json!(rt.kind),
        Some(k) if k == rt.kind => {}
        Some(k) => {
            return Err(ApiError::bad_request(&format!(
                "the kind in the data ({k}) does not match the expected kind ({})",
                rt.kind
            )));
        }
    }
    Ok(())
}

/// Drops the fields the type's schema does not know (the handler already reported them).
fn prune(rt: &ResourceType, object: &mut Value) {
    rt.prune_unknown(object);
}

fn clear_deletion(object: &mut Value) {
    let metadata = meta::metadata_mut(object);
    metadata.remove("deletionTimestamp");
    metadata.remove("deletionGracePeriodSeconds");
}

/// Whether two objects differ in nothing but `metadata.resourceVersion` (compared in place: this
/// runs on every update, to find no-op writes).
fn equal_but_resource_version(a: &Value, b: &Value) -> bool {
    let (Some(a), Some(b)) = (a.as_object(), b.as_object()) else {
        return a == b;
    };
    let equal_but = |a: &serde_json::Map<String, Value>,
                     b: &serde_json::Map<String, Value>,
                     skip: &str,
                     nested: &dyn Fn(&str, &Value, &Value) -> bool| {
        let keys = |m: &serde_json::Map<String, Value>| m.keys().filter(|k| *k != skip).count();
        keys(a) == keys(b)
            && a.iter()
                .filter(|(k, _)| *k != skip)
                .all(|(k, v)| b.get(k).is_some_and(|w| nested(k, v, w)))
    };
    equal_but(a, b, "", &|key, v, w| match (key, v, w) {
        ("metadata", Value::Object(v), Value::Object(w)) => {
            equal_but(v, w, "resourceVersion", &|_, v, w| v == w)
        }
        _ => v == w,
    })
}

fn check_size(object: &Value) -> Result<(), ApiError> {
    // Counted as it is encoded, without keeping the bytes.
    let mut size = ByteCount(0);
    let size = match serde_json::to_writer(&mut size, object) {
        Ok(()) => size.0,
        Err(_) => 0,
    };
    if size > MAX_STORED_OBJECT_BYTES {
        return Err(ApiError::request_entity_too_large(&format!(
            "object is too large: {size} bytes, limit is {MAX_STORED_OBJECT_BYTES}"
        )));
    }
    Ok(())
}

/// An `io::Write` that only counts what is written to it.
struct ByteCount(usize);

impl std::io::Write for ByteCount {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0 += bytes.len();
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn check_preconditions(
    rt: &ResourceType,
    name: &str,
    current: &StoredObject,
    options: &DeleteOptions,
) -> Result<(), ApiError> {
    let failed = |message: String| Err(ApiError::conflict(&rt.group, &rt.plural, name, &message));
    if let Some(uid) = &options.precondition_uid
        && Some(uid.as_str()) != meta::uid(&current.object)
    {
        return failed(format!(
            "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
            meta::uid(&current.object).unwrap_or_default()
        ));
    }
    if let Some(rv) = &options.precondition_resource_version
        && rv.parse::<Revision>().ok() != Some(current.revision)
    {
        return failed(format!(
            "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
            current.revision
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_op_updates_differ_in_the_resource_version_only() {
        let stored = json!({"kind": "ConfigMap", "metadata": {"name": "a", "resourceVersion": "5",
            "labels": {"l": "v"}}, "data": {"k": "v"}});
        let mut same = stored.clone();
        same["metadata"]["resourceVersion"] = json!("6");
        assert!(equal_but_resource_version(&same, &stored));
        let mut unversioned = stored.clone();
        meta::metadata_mut(&mut unversioned).remove("resourceVersion");
        assert!(equal_but_resource_version(&unversioned, &stored));
        assert!(equal_but_resource_version(&stored, &unversioned));
        type Change = (&'static str, fn(&mut Value));
        let changes: [Change; 4] = [
            ("data", |o| o["data"]["k"] = json!("w")),
            ("labels", |o| o["metadata"]["labels"] = json!({})),
            ("uid", |o| o["metadata"]["uid"] = json!("u")),
            ("a new field", |o| o["binaryData"] = json!({})),
        ];
        for (what, change) in changes {
            let mut changed = stored.clone();
            change(&mut changed);
            assert!(!equal_but_resource_version(&changed, &stored), "{what}");
        }
        let mut removed = stored.clone();
        meta::metadata_mut(&mut removed).remove("labels");
        assert!(!equal_but_resource_version(&removed, &stored));
    }

    #[test]
    fn the_size_limit_counts_the_encoded_object() {
        let fits = json!({"data": "x".repeat(MAX_STORED_OBJECT_BYTES - 20)});
        assert_eq!(
            serde_json::to_vec(&fits).map(|b| b.len()).unwrap(),
            MAX_STORED_OBJECT_BYTES - 9
        );
        assert!(check_size(&fits).is_ok());
        let too_large = json!({"data": "x".repeat(MAX_STORED_OBJECT_BYTES)});
        assert_eq!(check_size(&too_large).unwrap_err().code, 413);
    }
}
