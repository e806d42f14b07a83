//! Who a request is: the identity every authenticator produces and authorization consumes.
//!
//! The shape is Kubernetes' `UserInfo` (as found in TokenReview and SubjectAccessReview), so it
//! can be serialized into those APIs and into impersonation or front-proxy headers unchanged.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The groups of authenticated and anonymous users: defined once in kcp-rbac, which names them in
/// its default bindings, and re-exported here because every authenticator hands them out.
pub use kcp_rbac::{AUTHENTICATED_GROUP, UNAUTHENTICATED_GROUP};

/// User name of requests without credentials, when anonymous requests are allowed.
pub const ANONYMOUS_USER: &str = "system:anonymous";

/// Extra key naming the logical cluster a service account lives in: defined in kcp-rbac, whose
/// evaluator reads it to tell a foreign service account (same namespace and name, other
/// workspace) from a local one.
pub use kcp_rbac::CLUSTER_NAME_EXTRA;

/// An authenticated identity, in the Kubernetes `UserInfo` JSON shape.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct UserInfo {
    #[serde(rename = "username", default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, Vec<String>>,
}

impl UserInfo {
    /// The anonymous user: `system:anonymous` in `system:unauthenticated`.
    pub fn anonymous() -> UserInfo {
        UserInfo {
            name: ANONYMOUS_USER.to_owned(),
            groups: vec![UNAUTHENTICATED_GROUP.to_owned()],
            ..UserInfo::default()
        }
    }

    /// Adds `system:authenticated` unless the user already has it (kube never duplicates it).
    pub fn add_authenticated_group(&mut self) {
        if !self.groups.iter().any(|group| group == AUTHENTICATED_GROUP) {
            self.groups.push(AUTHENTICATED_GROUP.to_owned());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serializes_in_the_kubernetes_shape() {
        let user = UserInfo {
            name: "alice".to_owned(),
            uid: "42".to_owned(),
            groups: vec!["devs".to_owned()],
            extra: BTreeMap::from([("scopes".to_owned(), vec!["a".to_owned()])]),
        };
        let json = serde_json::to_value(&user).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"username": "alice", "uid": "42", "groups": ["devs"], "extra": {"scopes": ["a"]}})
        );
        assert_eq!(serde_json::from_value::<UserInfo>(json).unwrap(), user);
        assert_eq!(
            serde_json::from_str::<UserInfo>(r#"{"username":"bob"}"#).unwrap(),
            UserInfo {
                name: "bob".to_owned(),
                ..UserInfo::default()
            }
        );
    }

    #[test]
    fn authenticated_group_is_added_once() {
        let mut user = UserInfo::default();
        user.add_authenticated_group();
        user.add_authenticated_group();
        assert_eq!(user.groups, vec![AUTHENTICATED_GROUP]);
        assert_eq!(UserInfo::anonymous().groups, vec![UNAUTHENTICATED_GROUP]);
    }
}
