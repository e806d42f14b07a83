//! What a user may do. For now: `system:masters` may do everything, health paths are open to all,
//! everybody else is refused with 403 (RBAC per logical cluster comes in its own issue). Messages are
//! kube-apiserver's, so clients and humans read the same thing they would there.

use kcp_apimachinery::{ApiError, StatusReason};

use super::UserInfo;
use crate::request::RequestInfo;

/// The group that may do everything everywhere.
pub const MASTERS_GROUP: &str = "system:masters";

/// Why a request is refused.
pub fn authorize(user: &UserInfo, info: &RequestInfo, path: &str) -> Result<(), ApiError> {
    if user.in_group(MASTERS_GROUP) {
        return Ok(());
    }
    let verb = info.verb.as_str();
    if !info.is_resource_request {
        return Err(ApiError {
            code: 403,
            reason: StatusReason::Forbidden,
            message: format!(
                "forbidden: User {:?} cannot {verb} path {path:?}",
                user.name
            ),
            details: None,
        });
    }
    let scope = match &info.namespace {
        Some(ns) => format!("in the namespace {ns:?}"),
        None => "at the cluster scope".to_string(),
    };
    let resource = match &info.subresource {
        Some(sub) => format!("{}/{sub}", info.resource),
        None => info.resource.clone(),
    };
    let reason = format!(
        "User {:?} cannot {verb} resource {resource:?} in API group {:?} {scope}",
        user.name, info.group
    );
    Err(ApiError::forbidden(
        &info.group,
        &info.resource,
        info.name.as_deref().unwrap_or(""),
        &reason,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::Method;

    fn user(groups: &[&str]) -> UserInfo {
        UserInfo {
            name: "bob".into(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
        }
    }

    #[test]
    fn masters_may_everything_others_nothing() {
        let info = RequestInfo::parse(&Method::GET, "/api/v1/namespaces/default/configmaps", false);
        assert!(
            authorize(
                &user(&["system:masters"]),
                &info,
                "/api/v1/namespaces/default/configmaps"
            )
            .is_ok()
        );
        let err = authorize(
            &user(&["system:authenticated"]),
            &info,
            "/api/v1/namespaces/default/configmaps",
        )
        .unwrap_err();
        assert_eq!(err.code, 403);
        assert!(
            err.message.contains(
                "cannot list resource \"configmaps\" in API group \"\" in the namespace \"default\""
            ),
            "{}",
            err.message
        );
    }
}
