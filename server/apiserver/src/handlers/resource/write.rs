//! create, update (including the `status` and `finalize` subresources) and patch.

use http::Response;
use kcp_apimachinery::patch::{self, PatchSchema};
use kcp_apimachinery::{ApiError, meta};
use serde_json::{Value, json};

use super::Resolved;
use crate::handlers::negotiation::{self, PatchType};
use crate::handlers::response::Body;
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
        self.render_object(200, updated)
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
    let created = r
        .app
        .store
        .create(&r.rt, r.location()?, object, options.dry_run)
        .await?;
    r.render_object(201, created)
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
    let build = |current: &Value| Ok(merge_subresource(subresource, current, &body));
    r.update_with(&build, subresource, options.dry_run).await
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
    let schema = PatchSchema::for_builtin(&r.rt.group, &r.rt.kind);
    let build = |current: &Value| {
        // The patch applies to the object without its resourceVersion: a patch that names one asks for
        // optimistic concurrency, a patch that does not is retried on conflicts.
        let mut base = current.clone();
        meta::metadata_mut(&mut base).remove("resourceVersion");
        let patched = match patch_type {
            PatchType::Json => patch::apply_json_patch(&base, body),
            PatchType::Merge => patch::apply_merge_patch(&base, body),
            PatchType::Strategic | PatchType::Apply => {
                patch::apply_strategic_merge_patch(&base, body, &schema)
            }
        }
        .map_err(|e| e.to_api_error())?;
        Ok(match subresource {
            Some(_) => merge_subresource(subresource, current, &patched),
            None => patched,
        })
    };
    r.update_with(&build, subresource, options.dry_run).await
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
