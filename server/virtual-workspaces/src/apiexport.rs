//! The apiexport virtual workspace (upstream's `pkg/virtual/apiexport`):
//! `/services/apiexport/<export-cluster>/<export-name>/clusters/<cluster|*>/...` serves the
//! resources an APIExport exports, in every logical cluster bound to it (`*`: list and watch
//! across all of them, through the wildcard `<resource>:<identityHash>` storage of the export's
//! identity) or in one (every verb), with discovery and OpenAPI of the exported resources.
//!
//! Claimed resources (the export's `permissionClaims` on built-in types, e.g. ConfigMaps, or on
//! types bound from another export, by identity) are served from the clusters that accepted the
//! claim: only objects carrying the claim's label (kcp-apis' `claims`, kept by the claim labeler
//! to the accepted selector) are listed, watched, read or changed, and only with the verbs the
//! claim allows.
//!
//! The consumers' APIBindings of the export (`apis.kcp.io` `apibindings`, both versions) are
//! served read-only, as upstream: get, list and watch of the bindings carrying the export's
//! `internal.apis.kcp.io/export` label, in one cluster or across all of them (unless the export
//! claims `apibindings` itself; then the claim decides).
//!
//! The export and its consumers are kept between requests ([`crate::export_cache`]), dropped
//! whenever an APIExport or APIBinding changes anywhere.
//!
//! Every request is authorized first as upstream's content authorizer does it: the user needs the
//! request's verb on `apiexports/content` named `<export-name>` in the export's cluster (a deep
//! SubjectAccessReview there: its RBAC, without workspace access). Served requests then run in
//! the API server as the user with full access, as upstream's warrant grants.

use http::Response;
use kcp_apimachinery::{ApiError, meta};
use kcp_apis::claims::{self, EXPORT_LABEL, ExportedClaim};
use kcp_apiserver::response::Body;
use kcp_apiserver::services::ServiceRequest;
use kcp_apiserver::{RequestInfo, no_such_resource};
use kcp_rbac::{Attributes, ResourceAttributes};

use tokio_util::sync::CancellationToken;

use crate::backend::{Backend, Documents};
use crate::export_cache::{Export, ExportCache};
use crate::export_view::{Consumers, ExportView};
use crate::mounted::{self, VirtualWorkspace};
use crate::request;
use crate::url::{self, Target, VwPath};

/// The service's name: its URLs start with `/services/apiexport/`.
pub const NAME: &str = kcp_apis::endpoints::APIEXPORT_VIRTUAL_WORKSPACE;

/// The apiexport virtual workspace.
pub struct ApiExportService {
    backend: Backend,
    cache: ExportCache,
}

impl ApiExportService {
    pub fn new(backend: Backend) -> ApiExportService {
        ApiExportService {
            backend,
            cache: ExportCache::default(),
        }
    }
}

/// One request, taken apart.
struct Asked<'a> {
    export_cluster: &'a str,
    export_name: &'a str,
    vw: VwPath<'a>,
    info: RequestInfo,
}

/// A request for a claimed resource: the export's claim and who accepted it.
struct Claimed<'a> {
    claim: &'a ExportedClaim,
    consumers: &'a Consumers,
}

impl VirtualWorkspace for ApiExportService {
    async fn answer(&self, request: ServiceRequest) -> Result<Response<Body>, ApiError> {
        let path = request.path.clone();
        let vw = url::split(&path, NAME, 2).ok_or_else(no_such_resource)?;
        let asked = Asked {
            export_cluster: vw.key[0],
            export_name: vw.key[1],
            info: request::info(&request.method, vw.rest, request.query.as_deref()),
            vw,
        };
        self.authorize(&asked, &request).await?;
        let export = self
            .cache
            .get(
                &self.backend,
                (asked.export_cluster, asked.export_name),
                &request.shutdown,
                || self.read_export(&asked, &request.shutdown),
            )
            .await?;
        let view = export.view.as_ref().ok_or_else(no_such_resource)?;
        let consumers = &export.consumers;
        let info = &asked.info;
        if !info.is_resource_request {
            return self.document(&asked, view, consumers, request).await;
        }
        if view.exports(&info.group, &info.resource) {
            return self.exported(&asked, view, consumers, request).await;
        }
        match view.claim(&info.group, &info.resource) {
            Some(claim) => {
                let claimed = Claimed { claim, consumers };
                self.claimed(&asked, claimed, request).await
            }
            None if (info.group.as_str(), info.resource.as_str())
                == (kcp_apis::GROUP, kcp_apis::API_BINDINGS) =>
            {
                self.bindings(&asked, request).await
            }
            None => Err(no_such_resource()),
        }
    }
}

/// Objects labeled `key=value`: what a request may see of a resource the workspace serves only
/// in part.
struct Labeled<'a> {
    cluster: &'a str,
    /// The API path in that cluster (the request's, or its wildcard storage path).
    rest: &'a str,
    key: &'a str,
    value: &'a str,
}

impl ApiExportService {
    /// The export and its consumers, read afresh: the export, and the bindings of every cluster.
    async fn read_export(
        &self,
        asked: &Asked<'_>,
        shutdown: &CancellationToken,
    ) -> Result<Export, ApiError> {
        let export = self
            .backend
            .read(
                &format!(
                    "/clusters/{}/apis/{}/{}/{}/{}",
                    asked.export_cluster,
                    kcp_apis::GROUP,
                    kcp_apis::STORAGE_VERSION,
                    kcp_apis::API_EXPORTS,
                    asked.export_name
                ),
                shutdown,
            )
            .await?;
        let bindings = self
            .backend
            .read(
                &format!(
                    "/clusters/*/apis/{}/{}/{}",
                    kcp_apis::GROUP,
                    kcp_apis::STORAGE_VERSION,
                    kcp_apis::API_BINDINGS
                ),
                shutdown,
            )
            .await?;
        let items = bindings["items"].as_array().map_or(&[][..], Vec::as_slice);
        Ok(Export {
            view: ExportView::of(&export),
            consumers: Consumers::of(items, asked.export_cluster, asked.export_name),
        })
    }

    /// Upstream's content authorizer: the request's verb on `apiexports/content` of the export.
    async fn authorize(&self, asked: &Asked<'_>, request: &ServiceRequest) -> Result<(), ApiError> {
        let verb = if asked.info.is_resource_request {
            asked.info.verb.as_str()
        } else {
            "get"
        };
        let content = Attributes::resource(
            mounted::user(request),
            verb,
            ResourceAttributes {
                api_group: kcp_apis::GROUP.to_string(),
                resource: kcp_apis::API_EXPORTS.to_string(),
                subresource: "content".to_string(),
                namespace: String::new(),
                name: asked.export_name.to_string(),
            },
        );
        if self
            .backend
            .allowed_deep(asked.export_cluster, content)
            .await?
        {
            return Ok(());
        }
        Err(mounted::forbidden(
            request,
            &asked.info,
            asked.vw.rest,
            &format!(
                "API export: {:?}, workspace: {:?} RBAC decision: no permission for {verb:?} on apiexports/content",
                asked.export_name, asked.export_cluster
            ),
        ))
    }

    /// A request for an exported resource, across clusters or in a bound one.
    async fn exported(
        &self,
        asked: &Asked<'_>,
        view: &ExportView,
        consumers: &Consumers,
        mut request: ServiceRequest,
    ) -> Result<Response<Body>, ApiError> {
        let info = &asked.info;
        request.path = match &asked.vw.target {
            Target::Wildcard => {
                mounted::list_or_watch_only(info)?;
                let stored = format!("{}:{}", info.resource, view.identity);
                format!("/clusters/*{}", request::with_resource(info, &stored))
            }
            Target::One(cluster) if consumers.is_bound(cluster) => {
                format!("/clusters/{cluster}{}", asked.vw.rest)
            }
            Target::One(_) => return Err(no_such_resource()),
        };
        self.backend.on_behalf(request).await
    }

    /// A request for a claimed resource: objects carrying the claim's label, in the clusters
    /// that accepted the claim, with the verbs it allows.
    async fn claimed(
        &self,
        asked: &Asked<'_>,
        claimed: Claimed<'_>,
        request: ServiceRequest,
    ) -> Result<Response<Body>, ApiError> {
        let Claimed { claim, consumers } = claimed;
        let info = &asked.info;
        let verb = info.verb.as_str();
        let key = claims::label_key(asked.export_cluster, asked.export_name);
        let value = claims::label_value(&claim.resource);
        let refused = || {
            mounted::forbidden(
                &request,
                info,
                asked.vw.rest,
                &format!("the permission claim does not allow {verb:?}"),
            )
        };
        let cluster = match &asked.vw.target {
            Target::Wildcard => {
                mounted::list_or_watch_only(info)?;
                if !claims::allows(&claim.verbs, verb) {
                    return Err(refused());
                }
                "*".to_string()
            }
            Target::One(cluster) => {
                let accepted = consumers
                    .accepted(cluster, claim)
                    .ok_or_else(no_such_resource)?;
                if !accepted.allows(verb) || !claims::allows(&claim.verbs, verb) {
                    return Err(refused());
                }
                cluster.clone()
            }
        };
        // Across clusters, a resource bound from another export is listed by its identity.
        let identity = &claim.resource.identity_hash;
        let rest = if cluster == "*" && !identity.is_empty() {
            request::with_resource(info, &format!("{}:{identity}", info.resource))
        } else {
            asked.vw.rest.to_string()
        };
        let labeled = Labeled {
            cluster: &cluster,
            rest: &rest,
            key: &key,
            value: &value,
        };
        self.labeled(asked, &labeled, request).await
    }

    /// The consumers' bindings of the export (upstream's read-only `apibindings`): get, list and
    /// watch, no subresources, only bindings labeled with the export.
    async fn bindings(
        &self,
        asked: &Asked<'_>,
        request: ServiceRequest,
    ) -> Result<Response<Body>, ApiError> {
        let info = &asked.info;
        if info.subresource.is_some() {
            return Err(no_such_resource());
        }
        let cluster = match &asked.vw.target {
            Target::Wildcard => {
                mounted::list_or_watch_only(info)?;
                "*"
            }
            Target::One(cluster) => {
                mounted::only_verbs(info, &["get", "list", "watch"])?;
                cluster.as_str()
            }
        };
        let hash = claims::export_hash(asked.export_cluster, asked.export_name);
        let labeled = Labeled {
            cluster,
            rest: asked.vw.rest,
            key: EXPORT_LABEL,
            value: &hash,
        };
        self.labeled(asked, &labeled, request).await
    }

    /// Serves `request` in `labeled.cluster` restricted to objects carrying `labeled`'s label: a
    /// named object without it is 404, lists and watches select by it, creations pass (the claim
    /// labeler labels them when the accepted selector selects them).
    async fn labeled(
        &self,
        asked: &Asked<'_>,
        labeled: &Labeled<'_>,
        mut request: ServiceRequest,
    ) -> Result<Response<Body>, ApiError> {
        let Labeled {
            cluster,
            rest,
            key,
            value,
        } = labeled;
        let info = &asked.info;
        request.path = format!("/clusters/{cluster}{rest}");
        match (request::object_path(info), info.verb.as_str()) {
            (Some(object_path), _) => {
                let object = self
                    .backend
                    .read(
                        &format!("/clusters/{cluster}{object_path}"),
                        &request.shutdown,
                    )
                    .await?;
                if meta::labels(&object).get(*key).map(String::as_str) != Some(*value) {
                    let name = info.name.as_deref().unwrap_or_default();
                    return Err(ApiError::not_found(&info.group, &info.resource, name));
                }
            }
            (None, "create") => {}
            (None, _) => {
                let requirement = format!("{key}={value}");
                request.query = Some(request::with_label_requirement(
                    request.query.as_deref(),
                    &requirement,
                ));
            }
        }
        self.backend.on_behalf(request).await
    }

    /// Discovery, OpenAPI and `/version`: a bound cluster's documents (the addressed one, else
    /// any), cut down to the exported and claimed resources.
    async fn document(
        &self,
        asked: &Asked<'_>,
        view: &ExportView,
        consumers: &Consumers,
        request: ServiceRequest,
    ) -> Result<Response<Body>, ApiError> {
        let cluster = match &asked.vw.target {
            Target::One(cluster) if consumers.is_bound(cluster) => cluster.clone(),
            Target::One(_) => return Err(no_such_resource()),
            // Before the first binding nothing serves the export's types: the wildcard's
            // documents (built-ins only), cut down, show only claimed built-ins.
            Target::Wildcard => consumers
                .first()
                .cloned()
                .unwrap_or_else(|| "*".to_string()),
        };
        let documents = Documents {
            served_prefix: &format!("/clusters/{cluster}"),
            prefix: asked.vw.prefix,
            path: asked.vw.rest,
        };
        self.backend
            .document(request, &documents, &view.shown())
            .await
    }
}
