//! get and list.
//!
//! A list is served from the type's shared watch cache (kcp-watchcache) where kube-apiserver's
//! cacher serves it: `resourceVersion` unset (consistent: the store's current revision is read and
//! the cache waited for, as kube does with etcd's progress notifications), `"0"`, `NotOlderThan`,
//! and the next pages of a list the cache still holds. `Exact`, older pages, and whatever the cache
//! cannot answer in time go to storage; both give the same items, order and `continue` tokens.
//! Lists from the cache in JSON and protobuf stream out in chunks as they are encoded
//! ([`super::list_body`]); storage's pages are rendered in one buffer.

use http::Response;
use kcp_apimachinery::{ApiError, meta, protobuf};
use kcp_storage::Revision;
use kcp_watchcache::{CachedPage, Freshness, ListQuery};
use serde_json::Value;

use super::{Resolved, list_body};
use crate::handlers::negotiation::Output;
use crate::handlers::response::Body;
use crate::request::query::{ListOptions, ResourceVersionMatch};
use kcp_registry::ClusterTarget;
use kcp_registry::storage::continuation::Continuation;
use kcp_registry::storage::objects::{ListRequest, list_metadata};

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

/// What `resourceVersion` and `resourceVersionMatch` ask of a list (kube's semantics: unset = the
/// latest state, consistent; `0` = any state; `N` = not older than N, or exactly N with `Exact`).
#[derive(Debug, Clone, Copy)]
enum Wanted {
    Latest,
    Any,
    NotOlderThan(Revision),
    Exact(Revision),
}

impl Wanted {
    fn parse(options: &ListOptions) -> Result<Wanted, ApiError> {
        let Some(rv) = options.resource_version.as_deref() else {
            return Ok(Wanted::Latest);
        };
        let requested: Revision = rv
            .parse()
            .map_err(|_| ApiError::bad_request(&format!("invalid resource version: {rv:?}")))?;
        match options.resource_version_match {
            Some(ResourceVersionMatch::Exact) if requested == 0 => Err(ApiError::bad_request(
                "resourceVersionMatch \"Exact\" is forbidden for resourceVersion \"0\"",
            )),
            Some(ResourceVersionMatch::Exact) => Ok(Wanted::Exact(requested)),
            _ if requested == 0 => Ok(Wanted::Any),
            _ => Ok(Wanted::NotOlderThan(requested)),
        }
    }
}

/// A revision newer than the store's is kube's 504 "Too large resource version".
async fn check_not_future(r: &Resolved<'_>, requested: Revision) -> Result<(), ApiError> {
    let current = r.scope.store.objects().current_revision().await?;
    if requested > current {
        return Err(ApiError::timeout(
            &format!("Too large resource version: {requested}, current: {current}"),
            1,
        ));
    }
    Ok(())
}

pub async fn list(r: &Resolved<'_>) -> Result<Response<Body>, ApiError> {
    let options = ListOptions::parse(&r.request.query)?;
    let keep = r.selector(&options)?;
    let continuation = options
        .continue_token
        .as_deref()
        .map(Continuation::decode)
        .transpose()?;
    let wanted = Wanted::parse(&options)?;
    if let Wanted::NotOlderThan(requested) = wanted {
        check_not_future(r, requested).await?;
    }
    let prefix = r.list_prefix();
    let freshness = match (&continuation, wanted) {
        (_, Wanted::Exact(_)) => None,
        (Some(token), _) => Some(Freshness::Exactly(token.revision())),
        (None, Wanted::Any) => Some(Freshness::Any),
        (None, Wanted::NotOlderThan(requested)) => Some(Freshness::AtLeast(requested)),
        (None, Wanted::Latest) => Some(Freshness::AtLeast(
            r.scope.store.objects().current_revision().await?,
        )),
    };
    if let Some(freshness) = freshness
        && let Some(page) = from_cache(
            r,
            &options,
            continuation.as_ref(),
            &prefix,
            freshness,
            &keep,
        )
        .await
    {
        return render_cached(r, page);
    }
    let revision = match wanted {
        Wanted::Exact(requested) => requested,
        _ => 0,
    };
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
    r.render_list(
        page.items,
        list_metadata(page.revision, page.continue_token),
    )
}

/// The page from the type's watch cache, or `None` when storage must answer (the cache is being
/// read once only, did not fill or catch up in time, or moved past a continuation's revision).
async fn from_cache(
    r: &Resolved<'_>,
    options: &ListOptions,
    continuation: Option<&Continuation>,
    prefix: &str,
    freshness: Freshness,
    keep: &(dyn Fn(&Value) -> bool + Sync),
) -> Option<CachedPage> {
    let keys = r.scope.store.keys(&r.rt);
    let selective = options.selects();
    let converted = |stored: &Value| keep(&r.rt.strategy.storage_to_api(stored.clone()));
    let keep: Option<&(dyn Fn(&Value) -> bool + Sync)> = match (selective, r.rt.served_as_stored())
    {
        (false, _) => None,
        (true, true) => Some(keep),
        (true, false) => Some(&converted),
    };
    let query = ListQuery {
        root: keys.all_clusters(),
        namespaced: r.rt.namespaced,
        prefix,
        after: continuation.map(Continuation::after),
        limit: options.limit,
        freshness,
    };
    match r.scope.watch_caches.list(query, keep).await {
        Ok(page) => Some(page),
        Err(reason) => {
            tracing::debug!(%reason, resource = %r.rt.plural, "list served from storage");
            None
        }
    }
}

/// A page from the cache: in JSON and protobuf, the encoding each object keeps (made once per
/// version, shared by every list and watch that sends it) streamed out in chunks ([`list_body`]);
/// in other forms (Table, metadata only, YAML), the objects decoded and rendered as storage's are.
fn render_cached(r: &Resolved<'_>, page: CachedPage) -> Result<Response<Body>, ApiError> {
    let metadata = list_metadata(page.revision, page.continue_token);
    match r.output()? {
        Output::Json => list_body::json(&r.rt, &metadata, page.items),
        Output::Protobuf if protobuf::supports(&r.rt.api_version(), &r.rt.list_kind()) => {
            list_body::protobuf(&r.rt, &metadata, &page.items)
        }
        _ => {
            let items = page
                .items
                .iter()
                .map(|o| o.served_value(&r.rt))
                .collect::<Result<Vec<Value>, _>>()
                .map_err(|e| ApiError::internal_error(&format!("a cached object: {e}")))?;
            r.render_list(items, metadata)
        }
    }
}
