//! create, update (including the `status` and `finalize` subresources) and patch.

use http::Response;
use kcp_apimachinery::patch::{self, PatchSchema};
use kcp_apimachinery::{ApiError, FieldError, meta, time};
use kcp_fieldmanager::{self as fieldmanager, ApplyError, Request as FieldRequest};
use serde_json::{Value, json};

use super::Resolved;
use kcp_apiextensions::strict::{self, FieldValidation, find_duplicate_fields};

use crate::handlers::negotiation::{self, BodyFormat, PatchType};
use crate::handlers::response::{self, Body};
use crate::request::query::WriteOptions;
use kcp_registry::Strategy;
use kcp_registry::store::UpdateFn;

impl Resolved<'_> {
    fn write_options(&self) -> Result<WriteOptions, ApiError> {
        WriteOptions::parse(&self.request.query)
    }

    /// Runs an update computed from the current object and renders the result.
    async fn update_with(
        &self,
        build: &UpdateFn<'_>,
        subresource: Option<&str>,
        dry_run: bool,
    ) -> Result<Response<Body>, ApiError> {
        let store = &self.scope.store;
        let admission = self.admission().await?;
        let checked = |current: &Value| {
            let mut new = build(current)?;
            admission.admit_update(&mut new, current)?;
            Ok(new)
        };
        let options_kind = match self.request.info.verb {
            crate::request::Verb::Patch => "PatchOptions",
            _ => "UpdateOptions",
        };
        let chain = self.chain(options_kind, dry_run);
        let updated = store
            .update_admitted(
                &self.rt,
                self.location()?,
                self.name(),
                &checked,
                subresource,
                dry_run,
                &chain,
            )
            .await?;
        let response = if subresource == Some("scale") {
            self.render_object(200, self.scale_of(&updated)?)?
        } else {
            self.render_object(200, updated)?
        };
        Ok(response::with_warnings(response, &chain.outcome().warnings))
    }

    /// `fieldValidation`: unknown fields (those the type's schema prunes) and duplicate fields of the
    /// body are an error (`Strict`), warnings (`Warn`, the default) or nothing (`Ignore`).
    /// `raw_json` is the request body when it is JSON (duplicates can only be seen there).
    fn field_warnings(
        &self,
        object: &Value,
        raw_json: Option<&[u8]>,
    ) -> Result<Vec<String>, ApiError> {
        let mode = match self.request.query.get("fieldValidation") {
            Some("Strict") => FieldValidation::Strict,
            Some("Ignore") => FieldValidation::Ignore,
            _ => FieldValidation::Warn,
        };
        if mode == FieldValidation::Ignore {
            return Ok(Vec::new());
        }
        let unknown = self.rt.prune_unknown(&mut object.clone());
        let duplicates = raw_json.map(find_duplicate_fields).unwrap_or_default();
        strict::check(mode, &unknown, &duplicates)
    }

    /// The field manager of this write: `fieldManager`, else the client's user agent up to its first
    /// `/` (as kube-apiserver derives it), else `unknown`.
    fn manager(&self, options: &WriteOptions) -> String {
        options
            .field_manager
            .clone()
            .or_else(|| {
                let agent = self.request.user_agent.as_deref()?;
                let prefix = agent.split('/').next().unwrap_or(agent).trim();
                (!prefix.is_empty()).then(|| prefix.chars().take(128).collect())
            })
            .unwrap_or_else(|| "unknown".to_string())
    }

    /// Records in `managedFields` which fields this (non-apply) write set, for `manager`.
    fn track(&self, live: Option<&Value>, new: &Value, manager: &str) -> Value {
        let now = time::now_rfc3339();
        let api_version = self.rt.api_version();
        let request = FieldRequest {
            manager,
            api_version: &api_version,
            subresource: self.request.info.subresource.as_deref(),
            now: &now,
        };
        fieldmanager::update(live, new, &self.rt.field_schema, &request)
    }

    /// The request body, when it is JSON.
    fn json_body(&self) -> Option<&[u8]> {
        let format = negotiation::body_format(self.request.content_type.as_deref()).ok()?;
        (format == BodyFormat::Json).then_some(&self.request.body[..])
    }

    /// The scale of an object, for the `scale` subresource.
    fn scale_of(&self, object: &Value) -> Result<Value, ApiError> {
        self.rt
            .strategy
            .to_scale(object)
            .ok_or_else(super::no_such_resource)
    }

    pub(crate) fn body_object(&self) -> Result<Value, ApiError> {
        let format = negotiation::body_format(self.request.content_type.as_deref())?;
        let object = negotiation::decode_body(format, &self.request.body)?;
        if !object.is_object() {
            return Err(ApiError::bad_request(
                "the body of the request must be a single object",
            ));
        }
        Ok(object)
    }
}

pub async fn create(r: &Resolved<'_>) -> Result<Response<Body>, ApiError> {
    let options = r.write_options()?;
    let object = r.body_object()?;
    let warnings = r.field_warnings(&object, r.json_body())?;
    let mut object = r.track(None, &object, &r.manager(&options));
    r.admit_create(&r.admission().await?, &mut object).await?;
    let chain = r.chain("CreateOptions", options.dry_run);
    let created = r
        .scope
        .store
        .create_admitted(&r.rt, r.location()?, object, options.dry_run, &chain)
        .await?;
    let response = response::with_warnings(r.render_object(201, created)?, &warnings);
    Ok(response::with_warnings(response, &chain.outcome().warnings))
}

/// The object a subresource update produces: the current object with only the subresource's part
/// taken from the request (and the request's resourceVersion, for optimistic concurrency). Where
/// the type's strategy says so (Namespace `status` and `finalize`, as kube), the request's metadata
/// is taken too.
fn merge_subresource(
    strategy: &dyn Strategy,
    subresource: Option<&str>,
    current: &Value,
    body: &Value,
) -> Value {
    let mut new = match subresource {
        None => return body.clone(),
        Some(_) => current.clone(),
    };
    if let Some(sub) = subresource
        && strategy.subresource_writes_metadata(sub)
        && let Some(metadata) = body.get("metadata").filter(|m| m.is_object())
    {
        new["metadata"] = metadata.clone();
    }
    match subresource {
        // CertificateSigningRequest approval writes status conditions; its strategy keeps only
        // the approval part of them.
        Some("status" | "approval") => {
            new["status"] = body.get("status").cloned().unwrap_or_else(|| json!({}))
        }
        Some("finalize") => {
            new["spec"]["finalizers"] = body
                .pointer("/spec/finalizers")
                .cloned()
                .unwrap_or_else(|| json!([]))
        }
        _ => {}
    }
    match meta::resource_version(body) {
        Some(rv) => meta::set_resource_version(&mut new, rv),
        None => {
            meta::metadata_mut(&mut new).remove("resourceVersion");
        }
    }
    new
}

pub async fn update(r: &Resolved<'_>) -> Result<Response<Body>, ApiError> {
    let options = r.write_options()?;
    let body = r.body_object()?;
    let subresource = r.request.info.subresource.as_deref();
    // A `status` or `finalize` body is the whole object, checked like one (as kube-apiserver
    // decodes it strictly too); a `scale` body is an autoscaling/v1 Scale.
    let warnings = match subresource {
        Some("scale") => Vec::new(),
        _ => r.field_warnings(&body, r.json_body())?,
    };
    let rt = &r.rt;
    let manager = r.manager(&options);
    let build = |current: &Value| {
        let new = match subresource {
            Some("scale") => rt.strategy.apply_scale(current, &body)?,
            _ => merge_subresource(rt.strategy.as_ref(), subresource, current, &body),
        };
        Ok(r.track(Some(current), &new, &manager))
    };
    Ok(response::with_warnings(
        r.update_with(&build, subresource, options.dry_run).await?,
        &warnings,
    ))
}

pub async fn patch(r: &Resolved<'_>) -> Result<Response<Body>, ApiError> {
    let options = r.write_options()?;
    let patch_type = negotiation::patch_type(r.request.content_type.as_deref())?;
    let subresource = r.request.info.subresource.as_deref();
    if subresource == Some("finalize") {
        return Err(ApiError::method_not_supported(
            &r.rt.group,
            "namespaces/finalize",
            "patch",
        ));
    }
    if patch_type == PatchType::Apply {
        return apply(r, &options).await;
    }
    if patch_type == PatchType::Strategic && !r.rt.strategic_merge_patch {
        return Err(ApiError::unsupported_media_type_accepting(&[
            "application/json-patch+json",
            "application/merge-patch+json",
            "application/apply-patch+yaml",
        ]));
    }
    let manager = r.manager(&options);
    let body = &r.request.body;
    if serde_json::from_slice::<Value>(body).is_err() {
        return Err(ApiError::bad_request(
            "the body of the request was in an unknown format: invalid JSON patch document",
        ));
    }
    // Custom resources merge by their own schema's patch extensions, built-ins by their known rules.
    let schema = match &r.rt.schema {
        Some(schema) => PatchSchema::from_openapi(schema, |_| None),
        None => builtin_patch_schema(&r.rt.group, &r.rt.kind),
    };
    let rt = &r.rt;
    let warnings = std::sync::Mutex::new(Vec::new());
    let build = |current: &Value| {
        // The patch applies to the object as stored, resourceVersion included (a JSON patch may
        // `test` or `replace` it). A patch that leaves it unchanged is retried on conflicts; one that
        // sets it asks for optimistic concurrency on that version.
        let mut base = match subresource {
            Some("scale") => rt
                .strategy
                .to_scale(current)
                .ok_or_else(super::no_such_resource)?,
            _ => current.clone(),
        };
        let stored_version = meta::resource_version(current).map(str::to_string);
        if let Some(version) = &stored_version {
            meta::set_resource_version(&mut base, version);
        }
        let patched = match patch_type {
            PatchType::Json => patch::apply_json_patch(&base, body),
            PatchType::Merge => patch::apply_merge_patch(&base, body),
            PatchType::Strategic | PatchType::Apply => {
                patch::apply_strategic_merge_patch(&base, body, &schema)
            }
        }
        .map_err(|e| e.to_api_error())?;
        let mut patched = patched;
        if meta::resource_version(&patched).map(str::to_string) == stored_version {
            meta::metadata_mut(&mut patched).remove("resourceVersion");
        }
        if subresource != Some("scale") {
            // The stored object has no unknown fields, so any in the result came with the patch.
            let found = r.field_warnings(&patched, Some(body))?;
            *warnings
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner()) = found;
        }
        let new = match subresource {
            Some("scale") => rt.strategy.apply_scale(current, &patched)?,
            Some(_) => merge_subresource(rt.strategy.as_ref(), subresource, current, &patched),
            None => patched,
        };
        Ok(r.track(Some(current), &new, &manager))
    };
    let response = r.update_with(&build, subresource, options.dry_run).await?;
    let warnings = warnings
        .into_inner()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    Ok(response::with_warnings(response, &warnings))
}

/// The strategic-merge rules of a built-in kind. A PodTemplate holds a whole pod spec (containers
/// merge by `name`, their ports by `containerPort`, env by `name`, volumes by `name`, ...), so its
/// rules are read from k8s-openapi's definition (`x-kubernetes-patch-*`), as kube-apiserver reads
/// them from the Go struct tags; the other kinds have the few rules of [`PatchSchema::for_builtin`].
fn builtin_patch_schema(group: &str, kind: &str) -> PatchSchema {
    static POD_TEMPLATE: std::sync::OnceLock<PatchSchema> = std::sync::OnceLock::new();
    if (group, kind) != ("", "PodTemplate") {
        return PatchSchema::for_builtin(group, kind);
    }
    POD_TEMPLATE
        .get_or_init(|| {
            let (definitions, _) = kcp_openapi::builtin();
            let resolve = |reference: &str| {
                let name = reference.rsplit('/').next().unwrap_or(reference);
                definitions.get(name).cloned()
            };
            match definitions.get("io.k8s.api.core.v1.PodTemplate") {
                Some(definition) => PatchSchema::from_openapi(definition, resolve),
                None => PatchSchema::for_builtin(group, kind),
            }
        })
        .clone()
}

/// Server-side apply (`application/apply-patch+yaml`): the body is the manager's whole intent for
/// the object; the field manager merges it into the live object (or creates the object), detects
/// conflicts with other managers and removes what this manager no longer applies. Applying the
/// same configuration twice writes nothing.
async fn apply(r: &Resolved<'_>, options: &WriteOptions) -> Result<Response<Body>, ApiError> {
    let manager = options.field_manager.clone().ok_or_else(|| {
        ApiError::invalid(
            "meta.k8s.io",
            "PatchOptions",
            "",
            vec![FieldError::required(
                "fieldManager",
                "is required for apply patch",
            )],
        )
    })?;
    let config: Value = yaml_serde::from_slice(&r.request.body)
        .map_err(|e| ApiError::bad_request(&format!("error decoding YAML: {e}")))?;
    if !config.is_object() {
        return Err(ApiError::bad_request(
            "the apply configuration must be an object",
        ));
    }
    let api_version = r.rt.api_version();
    if meta::api_version(&config) != Some(api_version.as_str())
        || meta::kind(&config) != Some(r.rt.kind.as_str())
    {
        // Kubernetes prints a GroupVersionKind with a `/` after the (possibly empty) group.
        let version = meta::api_version(&config).unwrap_or_default();
        let version = if version.contains('/') {
            version.to_string()
        } else {
            format!("/{version}")
        };
        return Err(ApiError::bad_request(&format!(
            "invalid object type: {version}, Kind={}",
            meta::kind(&config).unwrap_or_default()
        )));
    }
    if meta::name(&config).is_some_and(|name| name != r.name()) {
        return Err(ApiError::bad_request(&format!(
            "the name of the object ({}) does not match the name on the URL ({})",
            meta::name(&config).unwrap_or_default(),
            r.name()
        )));
    }
    let warnings = r.field_warnings(&config, None)?;
    let subresource = r.request.info.subresource.as_deref();
    let now = time::now_rfc3339();
    let request = FieldRequest {
        manager: &manager,
        api_version: &api_version,
        subresource,
        now: &now,
    };
    let schema = &r.rt.field_schema;
    let merge = |live: Option<&Value>| -> Result<Value, ApiError> {
        let merged = match fieldmanager::apply(live, &config, options.force, schema, &request) {
            Err(ApplyError::Conflicts(conflicts))
                if takes_over_client_side_apply(live, &conflicts) =>
            {
                fieldmanager::apply(live, &config, true, schema, &request)
            }
            other => other,
        };
        let mut merged = merged.map_err(|e| e.to_api_error())?;
        sync_last_applied(live, &config, &mut merged);
        Ok(merged)
    };
    let at = r.location()?;
    let exists = match r.scope.store.get(&r.rt, at, r.name()).await {
        Ok(_) => true,
        Err(e) if e.code == 404 && subresource.is_none() => false,
        Err(e) => return Err(e),
    };
    if !exists {
        let mut object = merge(None)?;
        meta::set_name(&mut object, r.name());
        r.admit_create(&r.admission().await?, &mut object).await?;
        let chain = r.chain("PatchOptions", options.dry_run);
        let created = r
            .scope
            .store
            .create_admitted(&r.rt, at, object, options.dry_run, &chain)
            .await?;
        let response = response::with_warnings(r.render_object(201, created)?, &warnings);
        return Ok(response::with_warnings(response, &chain.outcome().warnings));
    }
    let build = |current: &Value| {
        // Merged into the object without its resourceVersion: a configuration that names one asks
        // for optimistic concurrency, one that does not is retried on conflicts.
        let mut live = current.clone();
        meta::metadata_mut(&mut live).remove("resourceVersion");
        let merged = merge(Some(&live))?;
        Ok(match subresource {
            Some(_) => {
                // Only the subresource's part changes, but the applier's ownership is recorded.
                let mut new =
                    merge_subresource(r.rt.strategy.as_ref(), subresource, current, &merged);
                match merged.pointer("/metadata/managedFields") {
                    Some(fields) => {
                        meta::metadata_mut(&mut new).insert("managedFields".into(), fields.clone())
                    }
                    None => meta::metadata_mut(&mut new).remove("managedFields"),
                };
                new
            }
            None => merged,
        })
    };
    Ok(response::with_warnings(
        r.update_with(&build, subresource, options.dry_run).await?,
        &warnings,
    ))
}

/// kubectl's client-side apply records its fields as manager `kubectl-client-side-apply` and keeps
/// the configuration in the last-applied annotation. When such an object is next applied
/// server-side, the fields the annotation lists change hands without `--force-conflicts`, as in
/// kube-apiserver: conflicts only with the client-side-apply manager, on an object that has the
/// annotation, do not stop the apply.
fn takes_over_client_side_apply(
    live: Option<&Value>,
    conflicts: &kcp_fieldmanager::Conflicts,
) -> bool {
    let Some(live) = live else { return false };
    meta::annotations(live).contains_key(LAST_APPLIED)
        && !conflicts.0.is_empty()
        && conflicts
            .0
            .iter()
            .all(|c| c.owner.manager == CLIENT_SIDE_APPLY_MANAGER)
}

/// Keeps the last-applied annotation of an object that has one in step with server-side applies,
/// so a later client-side `kubectl apply` computes its patch from what was really applied last.
fn sync_last_applied(live: Option<&Value>, config: &Value, merged: &mut Value) {
    if !live.is_some_and(|l| meta::annotations(l).contains_key(LAST_APPLIED)) {
        return;
    }
    let mut applied = config.clone();
    if let Some(annotations) = applied
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    {
        annotations.remove(LAST_APPLIED);
        if annotations.is_empty()
            && let Some(metadata) = applied.get_mut("metadata").and_then(Value::as_object_mut)
        {
            metadata.remove("annotations");
        }
    }
    if let Ok(text) = serde_json::to_string(&applied) {
        meta::set_annotation(merged, LAST_APPLIED, &format!("{text}\n"));
    }
}

/// Where `kubectl apply` keeps the configuration it applied.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";
/// The field manager of `kubectl apply` without `--server-side`.
const CLIENT_SIDE_APPLY_MANAGER: &str = "kubectl-client-side-apply";

#[cfg(test)]
mod tests {
    use super::*;

    struct KeepsMetadata(bool);
    impl Strategy for KeepsMetadata {
        fn subresource_writes_metadata(&self, _subresource: &str) -> bool {
            self.0
        }
    }

    #[test]
    fn status_update_takes_only_status() {
        let current = json!({"metadata": {"name": "a", "resourceVersion": "5"}, "spec": {"x": 1}, "status": {"phase": "A"}});
        let body = json!({"metadata": {"name": "a", "resourceVersion": "5", "annotations": {"k": "v"}}, "spec": {"x": 2}, "status": {"phase": "B"}});
        let strategy = KeepsMetadata(false);
        let new = merge_subresource(&strategy, Some("status"), &current, &body);
        assert_eq!(new["spec"]["x"], 1);
        assert_eq!(new["status"]["phase"], "B");
        assert!(new["metadata"].get("annotations").is_none());
        let finalize = merge_subresource(
            &strategy,
            Some("finalize"),
            &current,
            &json!({"spec": {"finalizers": []}}),
        );
        assert_eq!(finalize["spec"]["finalizers"], json!([]));
        assert!(meta::resource_version(&finalize).is_none());
    }

    #[test]
    fn pod_template_patches_merge_containers_by_name() {
        let schema = builtin_patch_schema("", "PodTemplate");
        let base = json!({"template": {"spec": {"containers": [
            {"name": "a", "image": "x", "env": [{"name": "E", "value": "1"}]},
            {"name": "b", "image": "y"}]}}});
        let patch = br#"{"template": {"spec": {"containers": [{"name": "a", "image": "z", "env": [{"name": "F", "value": "2"}]}]}}}"#;
        let patched = patch::apply_strategic_merge_patch(&base, patch, &schema).unwrap();
        let containers = &patched["template"]["spec"]["containers"];
        assert_eq!(containers.as_array().map(Vec::len), Some(2), "{patched}");
        assert_eq!(containers[0]["image"], "z");
        assert_eq!(
            containers[0]["env"].as_array().map(Vec::len),
            Some(2),
            "{patched}"
        );
        assert_eq!(containers[1]["name"], "b");
    }

    #[test]
    fn namespace_like_status_update_keeps_request_metadata() {
        let current = json!({"metadata": {"name": "a", "resourceVersion": "5"}, "spec": {"x": 1}, "status": {"phase": "A"}});
        let body = json!({"metadata": {"name": "a", "resourceVersion": "5", "annotations": {"k": "v"}}, "spec": {"x": 2}, "status": {"phase": "B"}});
        let new = merge_subresource(&KeepsMetadata(true), Some("status"), &current, &body);
        assert_eq!(new["spec"]["x"], 1);
        assert_eq!(new["status"]["phase"], "B");
        assert_eq!(new["metadata"]["annotations"]["k"], "v");
        assert_eq!(meta::resource_version(&new), Some("5"));
    }
}
