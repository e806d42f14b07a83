//! One client identity against one server (the admin, a client certificate of the server's
//! client CA, a bearer token, nobody at all, or any client a test builds) sending the requests
//! of a test and reading the whole answers.

use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};

use crate::http::Response;
use crate::identities::CertificateAuthority;
use crate::kcp::{AdminCredentials, KcpProcess};

const WHOAMI: &str = "/apis/authentication.k8s.io/v1/selfsubjectreviews";

/// One client identity against one server: a certificate, a bearer token or nothing.
pub struct Caller {
    base: String,
    client: reqwest::Client,
    /// Who this is, for failure messages.
    name: String,
    token: Option<String>,
    /// Extra headers sent with every request (e.g. a front proxy's identity, impersonation).
    headers: Vec<(String, String)>,
}

impl Caller {
    /// The server's admin (its kubeconfig's client certificate).
    pub fn admin(server: &KcpProcess) -> Caller {
        Caller::named(server, "admin", server.admin().client())
    }

    /// A client certificate of the server's client CA with CN `user` and O `groups`.
    pub fn cert(
        server: &KcpProcess,
        ca: &CertificateAuthority,
        user: &str,
        groups: &[&str],
    ) -> Caller {
        let client = ca.client(user, groups).credentials(server.admin()).client();
        Caller::named(server, user, client)
    }

    /// A client certificate of the server's client CA with CN `user` and no further groups.
    pub fn user(server: &KcpProcess, ca: &CertificateAuthority, user: &str) -> Caller {
        Caller::cert(server, ca, user, &[])
    }

    /// Bearer token `token`, no client certificate.
    pub fn token(server: &KcpProcess, token: &str) -> Caller {
        let mut caller = Caller::anonymous(server).bearer(token);
        caller.name = "token".to_owned();
        caller
    }

    /// No credentials at all.
    pub fn anonymous(server: &KcpProcess) -> Caller {
        Caller::named(server, "anonymous", server.admin().anonymous_client())
    }

    /// Whoever `client` (trusting the server's CA) presents itself as.
    pub fn with_client(server: &KcpProcess, client: reqwest::Client) -> Caller {
        Caller::named(server, "client", client)
    }

    /// The admin of a server known only by its admin credentials (a shard of `kcp sharded`).
    pub fn admin_of(credentials: &AdminCredentials) -> Caller {
        Caller {
            base: credentials.server.clone(),
            client: credentials.client(),
            name: "admin".to_owned(),
            token: None,
            headers: Vec::new(),
        }
    }

    fn named(server: &KcpProcess, name: &str, client: reqwest::Client) -> Caller {
        Caller::at(server.base_url(), client, name)
    }

    /// Whoever `client` presents itself as, against `base` (`https://<host>:<port>`): a server
    /// that is not a [`KcpProcess`], such as a front-proxy.
    pub fn at(base: &str, client: reqwest::Client, name: &str) -> Caller {
        Caller {
            base: base.to_owned(),
            client,
            name: name.to_owned(),
            token: None,
            headers: Vec::new(),
        }
    }

    /// This caller sending `Authorization: Bearer <token>` too.
    pub fn bearer(mut self, token: &str) -> Caller {
        self.token = Some(token.to_owned());
        self
    }

    /// Who this is (the admin, the certificate's user, ...), for failure messages.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// This caller sending header `name: value` with every request too.
    pub fn header(mut self, name: &str, value: &str) -> Caller {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    /// A request to `path` with this caller's token and headers, for a test to add to.
    pub fn request(&self, method: Method, path: &str) -> reqwest::RequestBuilder {
        let mut request = self.client.request(method, format!("{}{path}", self.base));
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        for (name, value) in &self.headers {
            request = request.header(name, value);
        }
        request
    }

    /// [`Self::request`] with `body` as JSON (a merge patch for PATCH).
    fn with_body(
        &self,
        method: &Method,
        path: &str,
        body: Option<&Value>,
    ) -> reqwest::RequestBuilder {
        let request = self.request(method.clone(), path);
        let Some(body) = body else {
            return request;
        };
        let content_type = if method == Method::PATCH {
            "application/merge-patch+json"
        } else {
            "application/json"
        };
        request
            .header(reqwest::header::CONTENT_TYPE, content_type)
            .body(body.to_string())
    }

    pub async fn send(&self, method: Method, path: &str, body: Option<&Value>) -> Response {
        Response::send(self.with_body(&method, path, body)).await
    }

    pub async fn get(&self, path: &str) -> Response {
        self.send(Method::GET, path, None).await
    }

    pub async fn post(&self, path: &str, body: &Value) -> Response {
        self.send(Method::POST, path, Some(body)).await
    }

    pub async fn put(&self, path: &str, body: &Value) -> Response {
        self.send(Method::PUT, path, Some(body)).await
    }

    pub async fn delete(&self, path: &str) -> Response {
        self.send(Method::DELETE, path, None).await
    }

    /// Only the status (and the body of a failure): for watches, whose bodies do not end soon.
    pub async fn status_of(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> (u16, String) {
        let response = self
            .with_body(&method, path, body)
            .timeout(Duration::from_secs(60))
            .send()
            .await
            .unwrap_or_else(|error| panic!("{method} {path} failed: {error:?}"));
        let status = response.status().as_u16();
        if status < 300 {
            return (status, String::new());
        }
        (status, response.text().await.unwrap_or_default())
    }

    /// POSTs `body` to `path`, which must create it (201); returns the created object.
    pub async fn create(&self, path: &str, body: &Value) -> Value {
        let response = self.post(path, body).await;
        assert_eq!(
            response.status,
            201,
            "{} creating {} at {path}: {}",
            self.name,
            body["metadata"]["name"],
            response.text()
        );
        response.json()
    }

    /// POSTs `body` to `path`; an object that exists already (409) is fine.
    pub async fn ensure(&self, path: &str, body: &Value) {
        let response = self.post(path, body).await;
        assert!(
            response.status == 201 || response.status == 409,
            "{} creating {} at {path}: {} {}",
            self.name,
            body["metadata"]["name"],
            response.status,
            response.text()
        );
    }

    /// Creates ServiceAccount `name` in namespace `default` of logical cluster `cluster` and
    /// returns a token a TokenRequest issues for it (no audience, the default lifetime).
    pub async fn service_account_token(&self, cluster: &str, name: &str) -> String {
        let accounts = format!(
            "{}/api/v1/namespaces/default/serviceaccounts",
            cluster_prefix(cluster)
        );
        let account =
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}});
        self.create(&accounts, &account).await;
        let request =
            json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}});
        let issued = self
            .create(&format!("{accounts}/{name}/token"), &request)
            .await;
        issued["status"]["token"]
            .as_str()
            .unwrap_or_else(|| panic!("a TokenRequest answer without a token: {issued}"))
            .to_owned()
    }

    /// POSTs a SelfSubjectReview in logical cluster `cluster` (`""` for the default one).
    pub async fn whoami_in(&self, cluster: &str) -> Response {
        let prefix = cluster_prefix(cluster);
        let review = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"});
        self.post(&format!("{prefix}{WHOAMI}"), &review).await
    }

    /// `status.userInfo` of a SelfSubjectReview in the default logical cluster, which must
    /// succeed.
    pub async fn user_info(&self) -> Value {
        let response = self.whoami_in("").await;
        assert_eq!(response.status, 201, "whoami: {}", response.text());
        response.json()["status"]["userInfo"].clone()
    }
}

/// `/clusters/<cluster>`, or nothing for `""` (the default logical cluster).
pub fn cluster_prefix(cluster: &str) -> String {
    if cluster.is_empty() {
        String::new()
    } else {
        format!("/clusters/{cluster}")
    }
}
