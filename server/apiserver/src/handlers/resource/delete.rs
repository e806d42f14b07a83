//! delete and deletecollection, with DeleteOptions from the body or the query.

use http::Response;
use kcp_apimachinery::{ApiError, FieldError, meta};
use serde_json::{Value, json};

use super::Resolved;
use crate::handlers::negotiation;
use crate::handlers::response::Body;
use crate::request::query::ListOptions;
use kcp_registry::storage::objects::ListRequest;
use kcp_registry::store::{DeleteOptions, Deleted, Propagation};

/// Parses metav1.DeleteOptions (body first, query parameters as fallback, like kube-apiserver).
fn delete_options(r: &Resolved<'_>) -> Result<DeleteOptions, ApiError> {
    let body: Value = if r.request.body.iter().all(u8::is_ascii_whitespace) {
        json!({})
    } else {
        let format = negotiation::body_format(r.request.content_type.as_deref())?;
        negotiation::decode_body(format, &r.request.body)?
    };
    let query = &r.request.query;
    let dry_run = match body.get("dryRun").and_then(Value::as_array) {
        Some(values) => values.iter().any(|v| v == "All"),
        None => crate::request::query::WriteOptions::parse(query)?.dry_run,
    };
    let mut errors = Vec::new();
    let policy = body
        .get("propagationPolicy")
        .and_then(Value::as_str)
        .map(str::to_string)
        .or_else(|| query.get("propagationPolicy").map(str::to_string));
    if let Some(policy) = policy
        .as_ref()
        .filter(|p| !matches!(p.as_str(), "Orphan" | "Background" | "Foreground"))
    {
        errors.push(FieldError::not_supported(
            "propagationPolicy",
            json!(policy),
            &["Foreground", "Background", "Orphan"],
        ));
    }
    let orphan_dependents = body
        .get("orphanDependents")
        .and_then(Value::as_bool)
        .or_else(|| query.get("orphanDependents").map(|v| v == "true"));
    let propagation = match policy.as_deref() {
        Some("Orphan") => Propagation::Orphan,
        Some("Foreground") => Propagation::Foreground,
        Some(_) => Propagation::Background,
        None if orphan_dependents == Some(true) => Propagation::Orphan,
        None => Propagation::Background,
    };
    let grace = body
        .get("gracePeriodSeconds")
        .and_then(Value::as_i64)
        .or_else(|| query.get("gracePeriodSeconds").and_then(|g| g.parse().ok()));
    if query
        .get("gracePeriodSeconds")
        .is_some_and(|g| g.parse::<i64>().is_err())
    {
        return Err(ApiError::bad_request(
            "gracePeriodSeconds must be an integer",
        ));
    }
    if grace.is_some_and(|g| g < 0) {
        errors.push(FieldError::invalid(
            "gracePeriodSeconds",
            json!(grace),
            "must be greater than or equal to 0",
        ));
    }
    if !errors.is_empty() {
        return Err(ApiError::invalid("", "DeleteOptions", "", errors));
    }
    let precondition = |field: &str| {
        body.pointer(&format!("/preconditions/{field}"))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    Ok(DeleteOptions {
        dry_run,
        precondition_uid: precondition("uid"),
        precondition_resource_version: precondition("resourceVersion"),
        propagation,
    })
}

pub async fn delete(r: &Resolved<'_>) -> Result<Response<Body>, ApiError> {
    let options = delete_options(r)?;
    r.admit_delete(r.name()).await?;
    let chain = r.chain("DeleteOptions", options.dry_run);
    let deleted = r
        .scope
        .store
        .delete_admitted(&r.rt, r.location()?, r.name(), &options, &chain)
        .await?;
    let warnings = chain.outcome().warnings;
    let response = match deleted {
        Deleted::Pending(object) => r.render_object(202, object),
        Deleted::Gone(object) => {
            let status = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                "details": {"name": r.name(), "group": r.rt.group, "kind": r.rt.plural,
                    "uid": meta::uid(&object).unwrap_or_default()}});
            match r.output()? {
                crate::handlers::negotiation::Output::Json => {
                    Ok(crate::handlers::response::json(200, &status))
                }
                _ => r.render_object(200, object),
            }
        }
    }?;
    Ok(crate::handlers::response::with_warnings(
        response, &warnings,
    ))
}

pub async fn delete_collection(r: &Resolved<'_>) -> Result<Response<Body>, ApiError> {
    let options = delete_options(r)?;
    let list_options = ListOptions::parse(&r.request.query)?;
    let keep = r.selector(&list_options)?;
    let prefix = r.list_prefix();
    let page = r
        .scope
        .store
        .list(&r.rt, ListRequest::everything(&prefix), &keep)
        .await?;
    let at = r.location()?;
    let mut deleted = Vec::new();
    let admission = r.admission().await?;
    let chain = r.chain("DeleteOptions", options.dry_run);
    for object in page.items {
        admission.admit_delete(&object)?;
        let name = meta::name(&object).unwrap_or_default().to_string();
        let at = kcp_registry::store::Location {
            namespace: meta::namespace(&object).or(at.namespace),
            ..at
        };
        match r
            .scope
            .store
            .delete_admitted(&r.rt, at, &name, &options, &chain)
            .await
        {
            Ok(Deleted::Gone(object) | Deleted::Pending(object)) => deleted.push(object),
            Err(e) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    let list = r.render_list(
        deleted,
        json!({"resourceVersion": page.revision.to_string()}),
    )?;
    Ok(crate::handlers::response::with_warnings(
        list,
        &chain.outcome().warnings,
    ))
}
