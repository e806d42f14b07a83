//! get and list.

use http::Response;
use kcp_apimachinery::{ApiError, meta};
use kcp_storage::Revision;
use serde_json::{Value, json};

use super::Resolved;
use crate::handlers::response::Body;
use crate::request::query::{ListOptions, ResourceVersionMatch};
use kcp_registry::ClusterTarget;
use kcp_registry::storage::continuation::Continuation;
use kcp_registry::storage::objects::ListRequest;

pub async fn get(r: &Resolved<'_>) -> Result<Response<Body>, ApiError> {
    let stored = r.scope.store.get(&r.rt, r.location()?, r.name()).await?;
    if r.request.info.subresource.as_deref() == Some("scale") {
        let scale =
            r.rt.strategy
                .to_scale(&stored.object)
                .ok_or_else(super::no_such_resource)?;
        return r.render_object(200, scale);
    }
    r.render_object(200, stored.object)
}

impl Resolved<'_> {
    /// The storage prefix a list or watch covers: one namespace, one logical cluster, or all of them.
    pub fn list_prefix(&self) -> String {
        let keys = self.scope.store.keys(&self.rt);
        match &self.request.cluster {
            ClusterTarget::Wildcard => keys.all_clusters().to_string(),
            ClusterTarget::One(cluster) => keys.scope(cluster, self.namespace()),
        }
    }

    /// Checks the selectors of a list or watch against the type and returns the matcher.
    pub fn selector(
        &self,
        options: &ListOptions,
    ) -> Result<impl Fn(&Value) -> bool + Send + Sync + 'static + use<>, ApiError> {
        for requirement in options.field_selector.requirements() {
            if !self.rt.supports_field(&requirement.field) {
                return Err(ApiError::bad_request(&format!(
                    "field label not supported: {}",
                    requirement.field
                )));
            }
        }
        let labels = options.label_selector.clone();
        let fields = options.field_selector.clone();
        let rt = self.rt.clone();
        Ok(move |object: &Value| {
            labels.matches(&meta::labels(object))
                && fields.matches(|field| rt.field_value(object, field))
        })
    }
}

/// The revision a list reads at, from `resourceVersion` and `resourceVersionMatch`
/// (kube's semantics: unset = latest, `0` = any (we serve latest), `N` = not older than N, or exactly
/// N with `Exact`).
async fn list_revision(r: &Resolved<'_>, options: &ListOptions) -> Result<Revision, ApiError> {
    let Some(rv) = options.resource_version.as_deref() else {
        return Ok(0);
    };
    let requested: Revision = rv
        .parse()
        .map_err(|_| ApiError::bad_request(&format!("invalid resource version: {rv:?}")))?;
    match options.resource_version_match {
        Some(ResourceVersionMatch::Exact) if requested == 0 => Err(ApiError::bad_request(
            "resourceVersionMatch \"Exact\" is forbidden for resourceVersion \"0\"",
        )),
        Some(ResourceVersionMatch::Exact) => Ok(requested),
        _ => {
            let current = r.scope.store.objects().current_revision().await?;
            if requested > current {
                return Err(ApiError::timeout(
                    &format!("Too large resource version: {requested}, current: {current}"),
                    1,
                ));
            }
            Ok(0)
        }
    }
}

pub async fn list(r: &Resolved<'_>) -> Result<Response<Body>, ApiError> {
    let options = ListOptions::parse(&r.request.query)?;
    let keep = r.selector(&options)?;
    let continuation = options
        .continue_token
        .as_deref()
        .map(Continuation::decode)
        .transpose()?;
    let revision = list_revision(r, &options).await?;
    let prefix = r.list_prefix();
    let page = r
        .scope
        .store
        .list(
            &r.rt,
            ListRequest {
                prefix: &prefix,
                revision,
                limit: options.limit,
                continuation,
            },
            &keep,
        )
        .await?;
    let mut metadata = json!({"resourceVersion": page.revision.to_string()});
    if let Some(token) = page.continue_token {
        metadata["continue"] = json!(token);
    }
    r.render_list(page.items, metadata)
}
