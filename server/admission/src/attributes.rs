//! What admission knows of one write: the request (who, which resource, which operation) and the
//! store's view of it (cluster, namespace, name, dry run). From these come the AdmissionReview
//! `request` that webhooks receive and that CEL expressions see as `request`, with the fields
//! and names of `admission.k8s.io/v1` AdmissionRequest.

use kcp_authn::UserInfo;
use kcp_registry::LogicalClusterName;
use kcp_registry::admission::{Operation, Write};
use serde_json::{Map, Value, json};

/// One write under admission.
#[derive(Debug, Clone)]
pub struct Attributes {
    pub cluster: LogicalClusterName,
    pub group: String,
    pub version: String,
    pub kind: String,
    /// The resource's plural name.
    pub resource: String,
    pub subresource: Option<String>,
    pub namespace: Option<String>,
    /// Empty on a create with `generateName`.
    pub name: String,
    pub operation: Operation,
    pub user: UserInfo,
    pub dry_run: bool,
    /// The write's options (`CreateOptions`, `UpdateOptions`, `DeleteOptions`) as sent.
    pub options: Option<Value>,
}

impl Attributes {
    /// The attributes of a store write made for `user`.
    pub fn new(write: Write<'_>, user: &UserInfo, options: Option<Value>) -> Attributes {
        Attributes {
            cluster: write.cluster.clone(),
            group: write.rt.group.clone(),
            version: write.rt.version.clone(),
            kind: write.rt.kind.clone(),
            resource: write.rt.plural.clone(),
            subresource: write.subresource.map(str::to_string),
            namespace: write
                .namespace
                .filter(|_| write.rt.namespaced)
                .map(str::to_string),
            name: write.name.to_string(),
            operation: write.operation,
            user: user.clone(),
            dry_run: write.dry_run,
            options,
        }
    }

    /// An `admission.k8s.io/v1` AdmissionRequest for these attributes, with `uid` and the
    /// objects (`object` absent for deletes, `oldObject` for creates).
    pub fn admission_request(
        &self,
        uid: &str,
        object: Option<&Value>,
        old: Option<&Value>,
    ) -> Value {
        let mut request = Map::new();
        request.insert("uid".into(), json!(uid));
        let kind = json!({"group": self.group, "version": self.version, "kind": self.kind});
        let resource =
            json!({"group": self.group, "version": self.version, "resource": self.resource});
        request.insert("kind".into(), kind.clone());
        request.insert("resource".into(), resource.clone());
        request.insert("requestKind".into(), kind);
        request.insert("requestResource".into(), resource);
        if let Some(subresource) = &self.subresource {
            request.insert("subResource".into(), json!(subresource));
            request.insert("requestSubResource".into(), json!(subresource));
        }
        if !self.name.is_empty() {
            request.insert("name".into(), json!(self.name));
        }
        if let Some(namespace) = &self.namespace {
            request.insert("namespace".into(), json!(namespace));
        }
        request.insert("operation".into(), json!(self.operation.as_str()));
        request.insert(
            "userInfo".into(),
            serde_json::to_value(&self.user).unwrap_or_else(|_| json!({})),
        );
        request.insert("object".into(), object.cloned().unwrap_or(Value::Null));
        request.insert("oldObject".into(), old.cloned().unwrap_or(Value::Null));
        request.insert("dryRun".into(), json!(self.dry_run));
        request.insert(
            "options".into(),
            self.options.clone().unwrap_or(Value::Null),
        );
        Value::Object(request)
    }
}
