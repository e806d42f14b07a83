//! `--authorization-webhook-config-file`: asks a remote service with a SubjectAccessReview, as
//! kube-apiserver's webhook authorizer does. The file is a kubeconfig naming the service (server
//! URL, CA, client credentials). Answers are cached for the configured TTLs (allowed and denied
//! separately); a failing webhook has no opinion, so the request is refused unless an earlier
//! authorizer allowed it.
//!
//! Like upstream kcp, the review carries the logical cluster of the request in
//! `spec.extra["authorization.kcp.io/cluster-name"]`, so one webhook can decide per workspace.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use kcp_kubeconfig::{Kubeconfig, KubeconfigError};
use kcp_rbac::{Attributes, Decision, Target};
use serde_json::{Value, json};

use kcp_registry::ClusterTarget;

/// The extra key carrying the logical cluster of the request.
pub const CLUSTER_NAME_EXTRA: &str = "authorization.kcp.io/cluster-name";

/// Why the webhook configuration cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    #[error("the webhook kubeconfig: {0}")]
    Kubeconfig(#[from] KubeconfigError),
    #[error("the webhook kubeconfig names no cluster")]
    NoCluster,
    #[error("building the webhook client: {0}")]
    Client(String),
    #[error("unsupported webhook version {0:?} (v1 or v1beta1)")]
    Version(String),
}

/// What `--authorization-webhook-*` flags say.
#[derive(Debug, Clone)]
pub struct WebhookConfig {
    pub kubeconfig: PathBuf,
    /// `v1` or `v1beta1`.
    pub version: String,
    pub authorized_ttl: Duration,
    pub unauthorized_ttl: Duration,
}

/// A SubjectAccessReview client with a decision cache.
pub struct Webhook {
    client: reqwest::Client,
    url: String,
    token: Option<String>,
    version: String,
    authorized_ttl: Duration,
    unauthorized_ttl: Duration,
    cache: Mutex<HashMap<String, (Decision, Instant)>>,
}

impl Webhook {
    pub fn new(config: &WebhookConfig) -> Result<Webhook, WebhookError> {
        if config.version != "v1" && config.version != "v1beta1" {
            return Err(WebhookError::Version(config.version.clone()));
        }
        // Like kube-apiserver's webhook authorizer, the service is the file's (first) cluster and
        // the credentials its (first) user.
        let kubeconfig = Kubeconfig::read(&config.kubeconfig)?;
        let dir = kcp_kubeconfig::dir_of(&config.kubeconfig);
        let cluster = kubeconfig
            .clusters
            .into_iter()
            .next()
            .ok_or(WebhookError::NoCluster)?
            .cluster;
        let user = kubeconfig
            .users
            .into_iter()
            .next()
            .map(|u| u.user)
            .unwrap_or_default();
        let mut builder = reqwest::Client::builder()
            .use_rustls_tls()
            .timeout(Duration::from_secs(30));
        if let Some(ca) = cluster.ca_pem(dir)? {
            for certificate in reqwest::Certificate::from_pem_bundle(&ca)
                .map_err(|e| WebhookError::Client(e.to_string()))?
            {
                builder = builder.add_root_certificate(certificate);
            }
        }
        if cluster.insecure_skip_tls_verify {
            builder = builder.danger_accept_invalid_certs(true);
        }
        let cert = user.client_certificate_pem(dir)?;
        let key = user.client_key_pem(dir)?;
        if let (Some(mut cert), Some(key)) = (cert, key) {
            cert.push(b'\n');
            cert.extend(key);
            let identity = reqwest::Identity::from_pem(&cert)
                .map_err(|e| WebhookError::Client(e.to_string()))?;
            builder = builder.identity(identity);
        }
        let client = builder
            .build()
            .map_err(|e| WebhookError::Client(e.to_string()))?;
        Ok(Webhook {
            client,
            url: cluster.server,
            token: user.token,
            version: config.version.clone(),
            authorized_ttl: config.authorized_ttl,
            unauthorized_ttl: config.unauthorized_ttl,
            cache: Mutex::new(HashMap::new()),
        })
    }

    /// The webhook's decision (cached).
    pub async fn authorize(&self, cluster: &ClusterTarget, attributes: &Attributes) -> Decision {
        let review = review(&self.version, cluster, attributes);
        let key = review["spec"].to_string();
        let now = Instant::now();
        {
            let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
            match cache.get(&key) {
                Some((decision, expires)) if *expires > now => return decision.clone(),
                Some(_) => {
                    cache.remove(&key);
                }
                None => {}
            }
        }
        let decision = match self.ask(&review).await {
            Ok(decision) => decision,
            Err(error) => {
                tracing::warn!(%error, "authorization webhook failed");
                return Decision::NoOpinion(format!("webhook authorizer failed: {error}"));
            }
        };
        let ttl = if decision.is_allowed() {
            self.authorized_ttl
        } else {
            self.unauthorized_ttl
        };
        if !ttl.is_zero() {
            let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
            cache.insert(key, (decision.clone(), now + ttl));
        }
        decision
    }

    async fn ask(&self, review: &Value) -> Result<Decision, String> {
        let mut request = self.client.post(&self.url).json(review);
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.map_err(|e| e.to_string())?;
        let status = response.status();
        if !status.is_success() {
            return Err(format!("the webhook answered {status}"));
        }
        let answer: Value = response.json().await.map_err(|e| e.to_string())?;
        let answer = &answer["status"];
        let reason = answer["reason"].as_str().unwrap_or_default().to_string();
        Ok(if answer["allowed"] == json!(true) {
            Decision::Allow(reason)
        } else if answer["denied"] == json!(true) {
            Decision::Deny(reason)
        } else {
            Decision::NoOpinion(reason)
        })
    }
}

/// The SubjectAccessReview sent for a request.
pub fn review(version: &str, cluster: &ClusterTarget, attributes: &Attributes) -> Value {
    let user = &attributes.user;
    let mut extra: serde_json::Map<String, Value> = user
        .extra
        .iter()
        .map(|(k, v)| (k.clone(), json!(v)))
        .collect();
    if let ClusterTarget::One(name) = cluster {
        extra.insert(CLUSTER_NAME_EXTRA.to_string(), json!([name.as_str()]));
    }
    // v1beta1 spells the groups field `group`.
    let groups_field = if version == "v1beta1" {
        "group"
    } else {
        "groups"
    };
    let mut spec = json!({"user": user.name, groups_field: user.groups, "extra": extra});
    match &attributes.target {
        Target::Resource(r) => {
            spec["resourceAttributes"] = json!({
                "namespace": r.namespace, "verb": attributes.verb, "group": r.api_group,
                "resource": r.resource, "subresource": r.subresource, "name": r.name,
            });
        }
        Target::NonResource { path } => {
            spec["nonResourceAttributes"] = json!({"path": path, "verb": attributes.verb});
        }
    }
    json!({
        "apiVersion": format!("authorization.k8s.io/{version}"),
        "kind": "SubjectAccessReview",
        "spec": spec,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kcp_rbac::{ResourceAttributes, User};

    #[test]
    fn reviews_carry_the_logical_cluster_and_the_version_spelling() {
        let attributes = Attributes::resource(
            User::new("bob", &["dev"]),
            "list",
            ResourceAttributes {
                resource: "configmaps".into(),
                namespace: "a".into(),
                ..Default::default()
            },
        );
        let cluster = ClusterTarget::One(kcp_registry::LogicalClusterName::root());
        let v1 = review("v1", &cluster, &attributes);
        assert_eq!(v1["spec"]["groups"], json!(["dev"]));
        assert_eq!(v1["spec"]["extra"][CLUSTER_NAME_EXTRA], json!(["root"]));
        assert_eq!(v1["spec"]["resourceAttributes"]["verb"], "list");
        let beta = review("v1beta1", &cluster, &attributes);
        assert_eq!(beta["spec"]["group"], json!(["dev"]));
        assert_eq!(beta["apiVersion"], "authorization.k8s.io/v1beta1");
    }
}
