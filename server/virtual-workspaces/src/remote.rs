//! The shard behind a standalone virtual-workspace server (`kcp virtual-workspaces`), as a
//! [`Loopback`]: requests go to the shard named by `--kubeconfig` over HTTPS with that
//! kubeconfig's credentials (a `system:masters` identity, like upstream's shard kubeconfig), so the
//! shard authorizes, admits and answers them as it does in-process. Requests a virtual workspace
//! makes with full access on a user's behalf go as that identity (the shard cannot impersonate
//! `system:masters` and knows no warrants: the user's name is not what admission and
//! `managedFields` see, unlike in-process); any other request impersonates its user; deep SubjectAccessReviews carry upstream's
//! `X-Kcp-Internal-Deep-SubjectAccessReview` header. Answers, watches included, stream back as
//! they come.

use std::path::Path;

use bytes::Bytes;
use futures::StreamExt;
use futures::future::BoxFuture;
use http::{Response, header};
use http_body::Frame;
use http_body_util::{BodyExt, StreamBody};
use kcp_apimachinery::ApiError;
use kcp_apiserver::response::{self, Body};
use kcp_apiserver::services::{Loopback, ServiceRequest};
use kcp_rbac::{Attributes, MASTERS_GROUP, Target};
use serde_json::{Value, json};

/// Why the shard's kubeconfig cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("--kubeconfig {path}: {source}")]
pub struct RemoteError {
    path: String,
    source: kcp_kubeconfig::https::HttpsError,
}

/// A shard reached over HTTPS.
pub struct RemoteShard {
    http: reqwest::Client,
    /// `https://host:port`, without `/clusters/...`.
    base: String,
}

impl RemoteShard {
    /// The shard `kubeconfig` names (its `context`, else the current one).
    pub fn from_kubeconfig(
        kubeconfig: &Path,
        context: Option<&str>,
    ) -> Result<RemoteShard, RemoteError> {
        let target =
            kcp_kubeconfig::https::client(kubeconfig, context).map_err(|source| RemoteError {
                path: kubeconfig.display().to_string(),
                source,
            })?;
        Ok(RemoteShard {
            base: target.base_url().to_string(),
            http: target.client,
        })
    }

    async fn send(&self, request: ServiceRequest) -> Result<Response<Body>, ApiError> {
        let mut url = format!("{}{}", self.base, encode_path(&request.path));
        if let Some(query) = &request.query {
            url.push('?');
            url.push_str(query);
        }
        let mut outgoing = self.http.request(request.method.clone(), url);
        // Full access (`system:masters`) cannot be impersonated, and the shard knows no
        // warrants: such requests go as the kubeconfig's own identity; others as the user.
        if !request.user.groups.iter().any(|g| g == MASTERS_GROUP) {
            outgoing = impersonating(outgoing, &request.user);
        }
        for name in [header::ACCEPT, header::CONTENT_TYPE, header::USER_AGENT] {
            if let Some(value) = request.headers.get(&name) {
                outgoing = outgoing.header(name, value);
            }
        }
        let answer = outgoing
            .body(request.body)
            .send()
            .await
            .map_err(|error| ApiError::service_unavailable(&format!("the shard: {error}")))?;
        Ok(streamed(answer))
    }
}

impl Loopback for RemoteShard {
    fn dispatch(&self, request: ServiceRequest) -> BoxFuture<'static, Response<Body>> {
        let shard = RemoteShard {
            http: self.http.clone(),
            base: self.base.clone(),
        };
        Box::pin(async move {
            shard
                .send(request)
                .await
                .unwrap_or_else(|error| response::error(&error))
        })
    }

    fn allowed_deep(
        &self,
        cluster: &str,
        attributes: Attributes,
    ) -> BoxFuture<'static, Result<bool, ApiError>> {
        let url = format!(
            "{}/clusters/{cluster}/apis/authorization.k8s.io/v1/subjectaccessreviews",
            self.base
        );
        let http = self.http.clone();
        Box::pin(async move {
            let review = subject_access_review(&attributes);
            let answer = http
                .post(url)
                .header(kcp_apiserver::DEEP_SUBJECT_ACCESS_REVIEW, "true")
                .json(&review)
                .send()
                .await
                .map_err(|error| ApiError::service_unavailable(&format!("the shard: {error}")))?;
            let code = answer.status().as_u16();
            let body: Value = answer.json().await.unwrap_or(Value::Null);
            match code {
                201 | 200 => Ok(body.pointer("/status/allowed") == Some(&Value::Bool(true))),
                // A cluster the shard does not know allows nothing, as in-process.
                403 | 404 => Ok(false),
                _ => Err(ApiError::from_answer(code, &body)),
            }
        })
    }
}

/// `request` made as `user` (impersonation headers).
fn impersonating(
    mut request: reqwest::RequestBuilder,
    user: &kcp_authn::UserInfo,
) -> reqwest::RequestBuilder {
    request = request.header("Impersonate-User", &user.name);
    for group in &user.groups {
        request = request.header("Impersonate-Group", group);
    }
    if !user.uid.is_empty() {
        request = request.header("Impersonate-Uid", &user.uid);
    }
    for (key, values) in &user.extra {
        let name = format!("Impersonate-Extra-{}", encode_path(key));
        for value in values {
            request = request.header(&name, value);
        }
    }
    request
}

/// The SubjectAccessReview asking `attributes`.
fn subject_access_review(attributes: &Attributes) -> Value {
    let mut spec = json!({
        "user": attributes.user.name,
        "groups": attributes.user.groups,
        "extra": attributes.user.extra,
    });
    match &attributes.target {
        Target::Resource(r) => {
            spec["resourceAttributes"] = json!({
                "verb": attributes.verb, "group": r.api_group, "resource": r.resource,
                "subresource": r.subresource, "namespace": r.namespace, "name": r.name,
            });
        }
        Target::NonResource { path } => {
            spec["nonResourceAttributes"] = json!({"verb": attributes.verb, "path": path});
        }
    }
    json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec})
}

/// The shard's answer as this server's response: status, content type, and the body as it
/// streams (a broken stream ends it, as a dropped connection would).
fn streamed(answer: reqwest::Response) -> Response<Body> {
    let code = answer.status().as_u16();
    let content_type = answer
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json")
        .to_string();
    let frames = answer
        .bytes_stream()
        .take_while(|chunk| futures::future::ready(chunk.is_ok()))
        .filter_map(|chunk| futures::future::ready(chunk.ok().map(|b: Bytes| Ok(Frame::data(b)))));
    response::streamed(code, &content_type, BodyExt::boxed(StreamBody::new(frames)))
}

/// Percent-encodes what a URL path (or a header name) may not hold as it is; `/` stays.
fn encode_path(path: &str) -> String {
    path.bytes()
        .map(|b| match b {
            b'a'..=b'z'
            | b'A'..=b'Z'
            | b'0'..=b'9'
            | b'-'
            | b'_'
            | b'.'
            | b'~'
            | b'/'
            | b':'
            | b'*' => (b as char).to_string(),
            other => format!("%{other:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use kcp_rbac::{ResourceAttributes, User};

    #[test]
    fn a_review_asks_what_the_attributes_ask() {
        let user = User {
            name: "u".into(),
            groups: vec!["g".into()],
            extra: Default::default(),
        };
        let attributes = Attributes::resource(
            user,
            "list",
            ResourceAttributes {
                api_group: "apis.kcp.io".into(),
                resource: "apiexports".into(),
                subresource: "content".into(),
                namespace: String::new(),
                name: "widgets".into(),
            },
        );
        let review = subject_access_review(&attributes);
        assert_eq!(review["spec"]["user"], "u");
        assert_eq!(
            review["spec"]["resourceAttributes"]["subresource"],
            "content"
        );
        assert_eq!(review["spec"]["resourceAttributes"]["verb"], "list");
    }

    #[test]
    fn paths_are_encoded_but_keep_their_shape() {
        assert_eq!(
            encode_path("/clusters/*/api/v1/configmaps"),
            "/clusters/*/api/v1/configmaps"
        );
        assert_eq!(encode_path("/a b"), "/a%20b");
    }
}
