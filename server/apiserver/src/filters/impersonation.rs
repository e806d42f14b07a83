//! `Impersonate-User`, `Impersonate-Group`, `Impersonate-Uid` and `Impersonate-Extra-<key>`:
//! acting as somebody else, as kube-apiserver allows it, with the `impersonate` verb on `users`,
//! `groups`, `serviceaccounts`, `uids` and `userextras/<key>` checked in the logical cluster of the
//! request (so a grant in one workspace impersonates nobody in another). As in kcp, nobody may
//! impersonate `system:masters` through the API, and the impersonated user is scoped to the
//! request's logical cluster.

use http::HeaderMap;
use kcp_apimachinery::ApiError;
use kcp_rbac::{
    Attributes, MASTERS_GROUP, ResourceAttributes, SCOPES_EXTRA, service_account_groups,
};

use super::UserInfo;
use super::authentication::{
    ANONYMOUS_USER, AUTHENTICATED_GROUP, UNAUTHENTICATED_GROUP, rbac_user,
};
use super::authorization::Authorizer;
use kcp_registry::ClusterTarget;

const USER_HEADER: &str = "impersonate-user";
const GROUP_HEADER: &str = "impersonate-group";
const UID_HEADER: &str = "impersonate-uid";
const EXTRA_PREFIX: &str = "impersonate-extra-";

/// What the impersonation headers ask for.
#[derive(Debug, Default, PartialEq, Eq)]
struct Requested {
    user: Option<String>,
    groups: Vec<String>,
    uid: Option<String>,
    extra: Vec<(String, String)>,
}

fn requested(headers: &HeaderMap) -> Result<Requested, ApiError> {
    let text = |value: &http::HeaderValue| {
        value
            .to_str()
            .map(str::to_string)
            .map_err(|_| ApiError::bad_request("impersonation headers must be valid ASCII"))
    };
    let mut requested = Requested::default();
    for (name, value) in headers {
        let name = name.as_str();
        if name == USER_HEADER {
            requested.user = Some(text(value)?);
        } else if name == GROUP_HEADER {
            requested.groups.push(text(value)?);
        } else if name == UID_HEADER {
            requested.uid = Some(text(value)?);
        } else if let Some(key) = name.strip_prefix(EXTRA_PREFIX) {
            let key = crate::request::path::percent_decode(key).unwrap_or_else(|| key.to_string());
            requested.extra.push((key.to_lowercase(), text(value)?));
        }
    }
    Ok(requested)
}

/// Removes the impersonation headers (they must not reach anything after this filter).
fn strip(headers: &mut HeaderMap) {
    let names: Vec<http::HeaderName> = headers
        .keys()
        .filter(|name| {
            let name = name.as_str();
            name == USER_HEADER
                || name == GROUP_HEADER
                || name == UID_HEADER
                || name.starts_with(EXTRA_PREFIX)
        })
        .cloned()
        .collect();
    for name in names {
        headers.remove(name);
    }
}

/// The user a request acts as: `user` itself, or whom it impersonates if it may.
pub async fn impersonate(
    authorizer: &Authorizer,
    cluster: &ClusterTarget,
    user: UserInfo,
    headers: &mut HeaderMap,
) -> Result<UserInfo, ApiError> {
    let requested = requested(headers)?;
    strip(headers);
    let Some(name) = requested.user else {
        if !requested.groups.is_empty() || requested.uid.is_some() || !requested.extra.is_empty() {
            return Err(ApiError::bad_request(
                "requested impersonation of groups, uid or extra without impersonating a user",
            ));
        }
        return Ok(user);
    };
    if requested.groups.iter().any(|g| g == MASTERS_GROUP) {
        return Err(ApiError::forbidden(
            "",
            "groups",
            MASTERS_GROUP,
            &format!("impersonating the group {MASTERS_GROUP:?} is not allowed"),
        ));
    }
    let requester = rbac_user(&user);
    let check = |resource: &str, group: &str, namespace: &str, name: &str| {
        let (resource, subresource) = match resource.split_once('/') {
            Some((resource, sub)) => (resource.to_string(), sub.to_string()),
            None => (resource.to_string(), String::new()),
        };
        Attributes::resource(
            requester.clone(),
            "impersonate",
            ResourceAttributes {
                api_group: group.to_string(),
                resource,
                subresource,
                namespace: namespace.to_string(),
                name: name.to_string(),
            },
        )
    };
    let service_account = name
        .strip_prefix("system:serviceaccount:")
        .and_then(|rest| rest.split_once(':'));
    let mut checks = vec![match service_account {
        Some((namespace, sa)) => check("serviceaccounts", "", namespace, sa),
        None => check("users", "", "", &name),
    }];
    checks.extend(requested.groups.iter().map(|g| check("groups", "", "", g)));
    if let Some(uid) = &requested.uid {
        checks.push(check("uids", "authentication.k8s.io", "", uid));
    }
    for (key, value) in &requested.extra {
        checks.push(check(
            &format!("userextras/{key}"),
            "authentication.k8s.io",
            "",
            value,
        ));
    }
    for attributes in &checks {
        authorizer.authorize(cluster, attributes).await?;
    }
    let mut groups = requested.groups;
    if groups.is_empty()
        && let Some((namespace, _)) = service_account
    {
        groups.extend(service_account_groups(namespace));
    }
    let implied = if name == ANONYMOUS_USER {
        UNAUTHENTICATED_GROUP
    } else {
        AUTHENTICATED_GROUP
    };
    if !groups.iter().any(|g| g == implied) {
        groups.push(implied.to_string());
    }
    let mut extra = std::collections::BTreeMap::<String, Vec<String>>::new();
    for (key, value) in requested.extra {
        extra.entry(key).or_default().push(value);
    }
    if let ClusterTarget::One(cluster) = cluster {
        extra.insert(SCOPES_EXTRA.to_string(), vec![format!("cluster:{cluster}")]);
    }
    Ok(UserInfo {
        name,
        uid: requested.uid.unwrap_or_default(),
        groups,
        extra,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_are_read_and_stripped() {
        let mut headers = HeaderMap::new();
        headers.insert(USER_HEADER, "alice".parse().unwrap());
        headers.append(GROUP_HEADER, "a".parse().unwrap());
        headers.append(GROUP_HEADER, "b".parse().unwrap());
        headers.insert("impersonate-extra-scopes%2Fx", "v".parse().unwrap());
        headers.insert("accept", "x".parse().unwrap());
        let requested = requested(&headers).unwrap();
        assert_eq!(requested.user.as_deref(), Some("alice"));
        assert_eq!(requested.groups, ["a", "b"]);
        assert_eq!(requested.extra, [("scopes/x".to_string(), "v".to_string())]);
        strip(&mut headers);
        assert_eq!(headers.len(), 1);
    }
}
