//! How a virtual workspace reaches the API server it shows: a [`Loopback`] connected once the
//! server is bound (the in-process server; a standalone virtual-workspace server connects a
//! client of its shard instead). Requests are made either on a user's behalf (as the user, with
//! the full access upstream's warrant grants inside the shown clusters) or as the virtual
//! workspace itself, which reads exports and bindings everywhere.

use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use http::{HeaderMap, Method, Response};
use http_body_util::BodyExt;
use kcp_apimachinery::ApiError;
use kcp_apiserver::response::Body;
use kcp_apiserver::services::{Loopback, ServiceRequest};
use kcp_authn::UserInfo;
use kcp_rbac::MASTERS_GROUP;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::documents::{DocumentPath, Shown, filter};

/// The user the virtual workspaces read exports, bindings and logical clusters as.
pub const VIRTUAL_WORKSPACES_USER: &str = "system:kcp:virtual-workspaces";

/// The server behind the virtual workspaces, connected after it is bound.
#[derive(Clone, Default)]
pub struct Backend(Arc<OnceLock<Arc<dyn Loopback>>>);

impl Backend {
    /// Connects the server; later calls are ignored (one server per process).
    pub fn connect(&self, loopback: Arc<dyn Loopback>) {
        let _ = self.0.set(loopback);
    }

    fn loopback(&self) -> Result<&Arc<dyn Loopback>, ApiError> {
        self.0
            .get()
            .ok_or_else(|| ApiError::service_unavailable("the virtual workspaces are not started"))
    }

    /// Serves `request` (a `/clusters/...` path) on behalf of its user, who may do anything in
    /// the addressed clusters: the virtual workspace authorized the request already.
    pub async fn on_behalf(&self, mut request: ServiceRequest) -> Result<Response<Body>, ApiError> {
        if !request.user.groups.iter().any(|g| g == MASTERS_GROUP) {
            request.user.groups.push(MASTERS_GROUP.to_string());
        }
        Ok(self.loopback()?.dispatch(request).await)
    }

    /// Serves `request` (a `/clusters/<name>/...` path) as its user with `group` added: the
    /// synthetic group of an initializer (terminator) whose request the virtual workspace allowed
    /// by its WorkspaceType's permissions (upstream's `system:kcp:initializer:<name>`), which the
    /// shard's workspace content authorizer trusts in a cluster of a lifecycle phase.
    pub async fn with_group(
        &self,
        mut request: ServiceRequest,
        group: String,
    ) -> Result<Response<Body>, ApiError> {
        request.user.groups.insert(0, group);
        Ok(self.loopback()?.dispatch(request).await)
    }

    /// A JSON document read as the virtual workspaces themselves; a non-2xx answer is its Status
    /// as an error.
    /// `path` may carry a query after `?`.
    pub async fn read(&self, path: &str, shutdown: &CancellationToken) -> Result<Value, ApiError> {
        let (path, query) = match path.split_once('?') {
            Some((path, query)) => (path, Some(query)),
            None => (path, None),
        };
        let response = self.get_as_itself(path, query, shutdown).await?;
        let (code, document) = json_of(response).await?;
        if (200..300).contains(&code) {
            Ok(document)
        } else {
            Err(ApiError::from_answer(code, &document))
        }
    }

    /// A watch (`query` asks for it) of `path` as the virtual workspaces themselves: the
    /// answer, streaming.
    pub async fn watch(
        &self,
        path: &str,
        query: &str,
        shutdown: &CancellationToken,
    ) -> Result<Response<Body>, ApiError> {
        self.get_as_itself(path, Some(query), shutdown).await
    }

    /// A GET as the virtual workspaces' own user, asking for JSON.
    async fn get_as_itself(
        &self,
        path: &str,
        query: Option<&str>,
        shutdown: &CancellationToken,
    ) -> Result<Response<Body>, ApiError> {
        let request = ServiceRequest {
            user: UserInfo {
                name: VIRTUAL_WORKSPACES_USER.to_string(),
                groups: vec![MASTERS_GROUP.to_string()],
                ..UserInfo::default()
            },
            method: Method::GET,
            path: path.to_string(),
            query: query.map(str::to_owned),
            headers: json_accepted(),
            body: Bytes::new(),
            shutdown: shutdown.clone(),
        };
        Ok(self.loopback()?.dispatch(request).await)
    }

    /// A deep SubjectAccessReview in `cluster`.
    pub async fn allowed_deep(
        &self,
        cluster: &str,
        attributes: kcp_rbac::Attributes,
    ) -> Result<bool, ApiError> {
        self.loopback()?.allowed_deep(cluster, attributes).await
    }
}

/// Where a virtual workspace's documents come from and go to.
pub struct Documents<'a> {
    /// The path prefix of the cluster (or `*`) that serves them: `/clusters/<name>`.
    pub served_prefix: &'a str,
    /// The virtual workspace's prefix, up to `/clusters/<target>`.
    pub prefix: &'a str,
    /// The document's path after the prefix.
    pub path: &'a str,
}

impl Backend {
    /// Discovery, OpenAPI and `/version` of a virtual workspace: the serving cluster's
    /// documents, cut down to what `shown` shows (a group it does not show is not found).
    pub async fn document(
        &self,
        mut request: ServiceRequest,
        documents: &Documents<'_>,
        shown: &dyn Shown,
    ) -> Result<Response<Body>, ApiError> {
        let document_path = DocumentPath::parse(documents.path);
        if let DocumentPath::Group { group, .. } = &document_path
            && !shown.shows_group(group)
        {
            return Err(kcp_apiserver::no_such_resource());
        }
        if document_path.is_discovery() {
            request.headers = json_accepted();
        }
        request.path = format!("{}{}", documents.served_prefix, documents.path);
        let answer = self.on_behalf(request).await?;
        if matches!(document_path, DocumentPath::AsItIs) || !answer.status().is_success() {
            return Ok(answer);
        }
        let (code, mut document) = json_of(answer).await?;
        filter(
            &document_path,
            &mut document,
            shown,
            documents.served_prefix,
            documents.prefix,
        );
        Ok(kcp_apiserver::response::json(code, &document))
    }
}

/// Headers asking for JSON.
pub fn json_accepted() -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(
        http::header::ACCEPT,
        http::HeaderValue::from_static("application/json"),
    );
    headers
}

/// The status code and JSON body of a whole response (`null` when the body is not JSON).
pub async fn json_of(response: Response<Body>) -> Result<(u16, Value), ApiError> {
    let code = response.status().as_u16();
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(|_| ApiError::internal_error("reading the server's answer"))?
        .to_bytes();
    Ok((code, serde_json::from_slice(&body).unwrap_or(Value::Null)))
}
