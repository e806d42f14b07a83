//! create, update (including the `status` and `finalize` subresources) and patch.

use http::Response;
use kcp_apimachinery::patch::{self, PatchSchema};
use kcp_apimachinery::{ApiError, meta};
use serde_json::{Value, json};

use super::Resolved;
use kcp_apiextensions::strict::{self, FieldValidation, find_duplicate_fields};

use crate::handlers::negotiation::{self, BodyFormat, PatchType};
use crate::handlers::response::{self, Body};
use crate::registry::store::UpdateFn;
use crate::request::query::WriteOptions;

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
        let store = &self.app.store;
        let updated = store
            .update(
                &self.rt,
                self.location()?,
                self.name(),
                build,
                subresource,
                dry_run,
            )
            .await?;
        if subresource == Some("scale") {
            return self.render_object(200, self.scale_of(&updated)?);
        }
        self.render_object(200, updated)
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
        let unknown = match &self.rt.structural {
            Some(schema) => schema.prune(&mut object.clone()),
            None => Vec::new(),
        };
        let duplicates = raw_json.map(find_duplicate_fields).unwrap_or_default();
        strict::check(mode, &unknown, &duplicates)
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

    fn body_object(&self) -> Result<Value, ApiError> {
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
    let created = r
        .app
        .store
        .create(&r.rt, r.location()?, object, options.dry_run)
        .await?;
    Ok(response::with_warnings(
        r.render_object(201, created)?,
        &warnings,
    ))
}

/// The object a subresource update produces: the current object with only the subresource's part
/// taken from the request (and the request's resourceVersion, for optimistic concurrency).
fn merge_subresource(subresource: Option<&str>, current: &Value, body: &Value) -> Value {
    let mut new = match subresource {
        None => return body.clone(),
        Some(_) => current.clone(),
    };
    match subresource {
        Some("status") => new["status"] = body.get("status").cloned().unwrap_or_else(|| json!({})),
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
    let warnings = match subresource {
        None => r.field_warnings(&body, r.json_body())?,
        Some(_) => Vec::new(),
    };
    let rt = &r.rt;
    let build = |current: &Value| match subresource {
        Some("scale") => rt.strategy.apply_scale(current, &body),
        _ => Ok(merge_subresource(subresource, current, &body)),
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
        return Err(ApiError::unsupported_media_type(
            "application/apply-patch+yaml",
        ));
    }
    let body = &r.request.body;
    if serde_json::from_slice::<Value>(body).is_err() {
        return Err(ApiError::bad_request(
            "the body of the request was in an unknown format: invalid JSON patch document",
        ));
    }
    // Custom resources merge by their own schema's patch extensions, built-ins by their known rules.
    let schema = match &r.rt.schema {
        Some(schema) => PatchSchema::from_openapi(schema, |_| None),
        None => PatchSchema::for_builtin(&r.rt.group, &r.rt.kind),
    };
    let rt = &r.rt;
    let warnings = std::sync::Mutex::new(Vec::new());
    let build = |current: &Value| {
        // The patch applies to the object without its resourceVersion: a patch that names one asks for
        // optimistic concurrency, a patch that does not is retried on conflicts.
        let mut base = match subresource {
            Some("scale") => rt
                .strategy
                .to_scale(current)
                .ok_or_else(super::no_such_resource)?,
            _ => current.clone(),
        };
        meta::metadata_mut(&mut base).remove("resourceVersion");
        let patched = match patch_type {
            PatchType::Json => patch::apply_json_patch(&base, body),
            PatchType::Merge => patch::apply_merge_patch(&base, body),
            PatchType::Strategic | PatchType::Apply => {
                patch::apply_strategic_merge_patch(&base, body, &schema)
            }
        }
        .map_err(|e| e.to_api_error())?;
        match subresource {
            Some("scale") => rt.strategy.apply_scale(current, &patched),
            Some(_) => Ok(merge_subresource(subresource, current, &patched)),
            None => {
                // The stored object has no unknown fields, so any in the result came with the patch.
                let found = r.field_warnings(&patched, Some(body))?;
                *warnings
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner()) = found;
                Ok(patched)
            }
        }
    };
    let response = r.update_with(&build, subresource, options.dry_run).await?;
    let warnings = warnings
        .into_inner()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    Ok(response::with_warnings(response, &warnings))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_update_takes_only_status() {
        let current = json!({"metadata": {"name": "a", "resourceVersion": "5"}, "spec": {"x": 1}, "status": {"phase": "A"}});
        let body = json!({"metadata": {"name": "a", "resourceVersion": "5"}, "spec": {"x": 2}, "status": {"phase": "B"}});
        let new = merge_subresource(Some("status"), &current, &body);
        assert_eq!(new["spec"]["x"], 1);
        assert_eq!(new["status"]["phase"], "B");
        let finalize = merge_subresource(
            Some("finalize"),
            &current,
            &json!({"spec": {"finalizers": []}}),
        );
        assert_eq!(finalize["spec"]["finalizers"], json!([]));
        assert!(meta::resource_version(&finalize).is_none());
    }
}
