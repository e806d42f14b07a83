//! `POST .../serviceaccounts/<name>/token`: a TokenRequest, answered with a signed, bound
//! service-account token (what `kubectl create token` and every in-cluster client use).
//!
//! The token names the logical cluster of the request, so it authenticates only there. Defaults
//! and limits are kube-apiserver's: one hour unless asked otherwise, at least ten minutes, and the
//! server's issuer as the audience when the request names none.

use http::Response;
use kcp_apimachinery::{ApiError, FieldError, meta, time};
use kcp_authn::{BoundObject, BoundObjectKind, ServiceAccountToken};
use serde_json::{Value, json};

use crate::handlers::resource::Resolved;
use crate::handlers::response::Body;
use kcp_registry::ClusterTarget;

/// kube-apiserver's default and minimum token lifetimes.
const DEFAULT_EXPIRATION_SECONDS: i64 = 3600;
const MIN_EXPIRATION_SECONDS: i64 = 600;
const MAX_EXPIRATION_SECONDS: i64 = 1 << 32;

/// Whether a request addresses the `token` subresource (of a ServiceAccount: only that type
/// declares it).
pub fn addressed(r: &Resolved<'_>) -> bool {
    r.request.info.subresource.as_deref() == Some("token")
}

pub async fn create(r: &Resolved<'_>) -> Result<Response<Body>, ApiError> {
    let Some(issuer) = &r.scope.authentication.token_issuer else {
        return Err(ApiError::service_unavailable(
            "this server issues no service-account tokens (no signing key)",
        ));
    };
    let ClusterTarget::One(cluster) = &r.request.cluster else {
        return Err(crate::handlers::resource::no_such_resource());
    };
    let mut request = r.body_object()?;
    let spec = request.get("spec").cloned().unwrap_or_else(|| json!({}));
    let expiration = spec
        .get("expirationSeconds")
        .and_then(Value::as_i64)
        .unwrap_or(DEFAULT_EXPIRATION_SECONDS);
    let mut errors = Vec::new();
    if expiration < MIN_EXPIRATION_SECONDS {
        errors.push(FieldError::invalid(
            "spec.expirationSeconds",
            json!(expiration),
            "may not specify a duration less than 10 minutes",
        ));
    }
    if expiration > MAX_EXPIRATION_SECONDS {
        errors.push(FieldError::too_long("spec.expirationSeconds", 1 << 32));
    }
    let bound = spec.get("boundObjectRef").filter(|b| b.is_object());
    if let Some(bound) = bound {
        let kind = bound["kind"].as_str().unwrap_or_default();
        if kind != "Secret" && kind != "Pod" {
            errors.push(FieldError::not_supported(
                "spec.boundObjectRef.kind",
                json!(kind),
                &["Pod", "Secret"],
            ));
        }
    }
    if !errors.is_empty() {
        return Err(ApiError::invalid(
            "authentication.k8s.io",
            "TokenRequest",
            r.name(),
            errors,
        ));
    }
    let account = r
        .scope
        .store
        .get(&r.rt, r.location()?, r.name())
        .await?
        .object;
    let namespace = r.namespace().unwrap_or_default().to_string();
    let audiences: Vec<String> = spec
        .get("audiences")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .filter(|a: &Vec<String>| !a.is_empty())
        .unwrap_or_else(|| r.scope.authentication.api_audiences.clone());
    let bound_object = match bound {
        Some(bound) => Some(bound_object(r, bound).await?),
        None => None,
    };
    let token = ServiceAccountToken {
        cluster: cluster.to_string(),
        namespace: namespace.clone(),
        name: r.name().to_string(),
        uid: meta::uid(&account).unwrap_or_default().to_string(),
        audiences: audiences.clone(),
        expiration_seconds: expiration,
        bound_object,
    };
    let now = jiff::Timestamp::now().as_second();
    let (jwt, expires) = issuer
        .issue(&token, now)
        .map_err(|e| ApiError::internal_error(&format!("signing the token: {e}")))?;
    let expires_at = jiff::Timestamp::from_second(expires)
        .map(time::format_rfc3339)
        .unwrap_or_default();
    let mut spec = spec;
    spec["audiences"] = json!(audiences);
    spec["expirationSeconds"] = json!(expiration);
    request["apiVersion"] = json!("authentication.k8s.io/v1");
    request["kind"] = json!("TokenRequest");
    request["metadata"] =
        json!({"name": r.name(), "namespace": namespace, "creationTimestamp": null});
    request["spec"] = spec;
    request["status"] = json!({"token": jwt, "expirationTimestamp": expires_at});
    r.render_object(201, request)
}

/// The Secret a token is bound to must exist (with the given UID, if one is given).
async fn bound_object(r: &Resolved<'_>, bound: &Value) -> Result<BoundObject, ApiError> {
    let kind = match bound["kind"].as_str() {
        Some("Pod") => BoundObjectKind::Pod,
        _ => BoundObjectKind::Secret,
    };
    let name = bound["name"].as_str().unwrap_or_default().to_string();
    let registry = r.scope.store.registry();
    let Some(rt) = registry
        .for_target(&r.request.cluster)
        .lookup(
            "",
            "v1",
            match kind {
                BoundObjectKind::Pod => "pods",
                BoundObjectKind::Secret => "secrets",
            },
        )
        .cloned()
    else {
        return Err(ApiError::bad_request(&format!(
            "cannot bind a token to a {kind:?}: this server does not serve them"
        )));
    };
    let object = r.scope.store.get(&rt, r.location()?, &name).await?.object;
    let uid = meta::uid(&object).unwrap_or_default().to_string();
    if let Some(wanted) = bound["uid"].as_str().filter(|u| !u.is_empty())
        && wanted != uid
    {
        return Err(ApiError::conflict(
            "",
            &rt.plural,
            &name,
            &format!(
                "the UID in the bound object reference ({wanted}) does not match the UID in record ({uid}). The object might have been deleted and then recreated"
            ),
        ));
    }
    Ok(BoundObject { kind, name, uid })
}
