//! Answers the review APIs ([`kcp_registry::reviews`]): decode the question, ask the
//! authenticators or the authorizer of the request's logical cluster, return the question with its
//! `status`, store nothing. Validation and messages are kube-apiserver's.

use std::collections::BTreeMap;

use http::Response;
use kcp_apimachinery::{ApiError, FieldError};
use kcp_rbac::{Attributes, Decision, Policy, ResourceAttributes, User};
use serde_json::{Value, json};

use crate::filters::authentication::{authenticate, rbac_user};
use crate::handlers::resource::Resolved;
use crate::handlers::response::Body;
use kcp_registry::ClusterTarget;
use kcp_registry::reviews::Review;

pub async fn create(r: &Resolved<'_>, review: Review) -> Result<Response<Body>, ApiError> {
    let mut object = r.body_object()?;
    let spec = object.get("spec").cloned().unwrap_or_else(|| json!({}));
    let status = match review {
        Review::SelfSubject => json!({"userInfo": user_info_json(&r.request.user)}),
        Review::Token => token_review(r, &spec).await?,
        Review::SubjectAccess => {
            let user = spec_user(&spec);
            if user.name.is_empty() && user.groups.is_empty() {
                return Err(invalid(
                    r,
                    vec![FieldError::invalid(
                        "spec.user",
                        json!(""),
                        "at least one of user or group must be specified",
                    )],
                ));
            }
            access(r, user, &spec, None).await?
        }
        Review::LocalSubjectAccess => {
            let namespace = r.request.info.namespace.clone().unwrap_or_default();
            access(r, spec_user(&spec), &spec, Some(&namespace)).await?
        }
        Review::SelfSubjectAccess => access(r, rbac_user(&r.request.user), &spec, None).await?,
        Review::SelfSubjectRules => rules(r, &spec).await?,
    };
    object["status"] = status;
    if object.get("metadata").is_none_or(|m| !m.is_object()) {
        object["metadata"] = json!({});
    }
    object["metadata"]["creationTimestamp"] = Value::Null;
    r.render_object(201, object)
}

fn invalid(r: &Resolved<'_>, errors: Vec<FieldError>) -> ApiError {
    ApiError::invalid(&r.rt.group, &r.rt.kind, "", errors)
}

/// A UserInfo as the review APIs print it.
fn user_info_json(user: &crate::filters::UserInfo) -> Value {
    let mut info = json!({"username": user.name, "groups": user.groups});
    if !user.uid.is_empty() {
        info["uid"] = json!(user.uid);
    }
    if !user.extra.is_empty() {
        info["extra"] = json!(user.extra);
    }
    info
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|i| i.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// The user a SubjectAccessReview asks about.
fn spec_user(spec: &Value) -> User {
    let extra: BTreeMap<String, Vec<String>> = spec
        .get("extra")
        .and_then(Value::as_object)
        .map(|extra| extra.iter().map(|(k, v)| (k.clone(), strings(v))).collect())
        .unwrap_or_default();
    User {
        name: spec["user"].as_str().unwrap_or_default().to_string(),
        groups: strings(&spec["groups"]),
        extra,
    }
}

fn text(value: &Value, field: &str) -> String {
    value[field].as_str().unwrap_or_default().to_string()
}

/// SubjectAccessReview, LocalSubjectAccessReview (`namespace` set) and SelfSubjectAccessReview.
async fn access(
    r: &Resolved<'_>,
    user: User,
    spec: &Value,
    namespace: Option<&str>,
) -> Result<Value, ApiError> {
    let resource = spec.get("resourceAttributes").filter(|v| v.is_object());
    let non_resource = spec.get("nonResourceAttributes").filter(|v| v.is_object());
    let attributes = match (resource, non_resource, namespace) {
        (Some(_), Some(_), _) => {
            return Err(invalid(
                r,
                vec![FieldError::invalid(
                    "spec.nonResourceAttributes",
                    json!(non_resource),
                    "cannot be specified in combination with resourceAttributes",
                )],
            ));
        }
        (None, Some(_), Some(_)) => {
            return Err(invalid(
                r,
                vec![FieldError::invalid(
                    "spec.nonResourceAttributes",
                    json!(non_resource),
                    "disallowed on this kind of request",
                )],
            ));
        }
        (None, None, _) => {
            return Err(invalid(
                r,
                vec![FieldError::invalid(
                    "spec.resourceAttributes",
                    Value::Null,
                    "exactly one of nonResourceAttributes or resourceAttributes must be specified",
                )],
            ));
        }
        (None, Some(attrs), None) => {
            Attributes::non_resource(user, &text(attrs, "verb"), &text(attrs, "path"))
        }
        (Some(attrs), None, namespace) => {
            let mut asked = text(attrs, "namespace");
            if let Some(namespace) = namespace {
                if asked.is_empty() {
                    asked = namespace.to_string();
                } else if asked != namespace {
                    return Err(ApiError::bad_request(&format!(
                        "spec.resourceAttributes.namespace must match namespace: {namespace}"
                    )));
                }
            }
            Attributes::resource(
                user,
                &text(attrs, "verb"),
                ResourceAttributes {
                    api_group: text(attrs, "group"),
                    resource: text(attrs, "resource"),
                    subresource: text(attrs, "subresource"),
                    namespace: asked,
                    name: text(attrs, "name"),
                },
            )
        }
    };
    // A deep review (upstream's header, from a privileged client such as a virtual-workspace
    // server) asks the cluster's RBAC without the workspace access gate.
    let decision = match &r.request.cluster {
        ClusterTarget::One(cluster)
            if r.request.deep_review
                && r.request
                    .user
                    .groups
                    .iter()
                    .any(|g| g == kcp_rbac::MASTERS_GROUP) =>
        {
            r.scope.authorizer.decide_deep(cluster, &attributes).await?
        }
        _ => {
            r.scope
                .authorizer
                .decide(&r.request.cluster, &attributes)
                .await?
        }
    };
    let mut status = json!({"allowed": decision.is_allowed()});
    if matches!(decision, Decision::Deny(_)) {
        status["denied"] = json!(true);
    }
    if !decision.reason().is_empty() {
        status["reason"] = json!(decision.reason());
    }
    Ok(status)
}

/// SelfSubjectRulesReview: what the requester may do in a namespace, from RBAC.
async fn rules(r: &Resolved<'_>, spec: &Value) -> Result<Value, ApiError> {
    let namespace = text(spec, "namespace");
    if namespace.is_empty() {
        return Err(invalid(r, vec![FieldError::required("spec.namespace", "")]));
    }
    let ClusterTarget::One(cluster) = &r.request.cluster else {
        return Err(crate::handlers::resource::no_such_resource());
    };
    let policy = r.scope.authorizer.policies.policy(cluster).await?;
    let held = policy
        .layers()
        .as_slice()
        .rules_for(&rbac_user(&r.request.user), &namespace);
    let mut resource_rules = Vec::new();
    let mut non_resource_rules = Vec::new();
    for rule in &held.rules {
        if rule.non_resource_urls.is_empty() {
            let mut entry = json!({"verbs": rule.verbs, "apiGroups": rule.api_groups, "resources": rule.resources});
            if !rule.resource_names.is_empty() {
                entry["resourceNames"] = json!(rule.resource_names);
            }
            resource_rules.push(entry);
        } else {
            non_resource_rules
                .push(json!({"verbs": rule.verbs, "nonResourceURLs": rule.non_resource_urls}));
        }
    }
    let mut status = json!({
        "resourceRules": resource_rules,
        "nonResourceRules": non_resource_rules,
        "incomplete": !held.errors.is_empty(),
    });
    if !held.errors.is_empty() {
        status["evaluationError"] = json!(held.errors.join(", "));
    }
    Ok(status)
}

/// TokenReview: whether a bearer token authenticates in this logical cluster, and as whom.
async fn token_review(r: &Resolved<'_>, spec: &Value) -> Result<Value, ApiError> {
    let token = text(spec, "token");
    if token.is_empty() {
        return Err(invalid(r, vec![FieldError::required("spec.token", "")]));
    }
    let Ok(bearer) = http::HeaderValue::from_str(&format!("Bearer {token}")) else {
        return Ok(json!({"authenticated": false, "error": "invalid bearer token"}));
    };
    let mut headers = http::HeaderMap::new();
    headers.insert(http::header::AUTHORIZATION, bearer);
    let authentication = &r.scope.authentication;
    Ok(
        match authenticate(authentication, r.scope.store, &[], &mut headers).await {
            Ok(user) => json!({
                "authenticated": true,
                "user": user_info_json(&user),
                "audiences": authentication.api_audiences,
            }),
            Err(_) => json!({"authenticated": false, "error": "invalid bearer token"}),
        },
    )
}
