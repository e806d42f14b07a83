//! The identity headers a backend trusts from the proxy's client certificate: `X-Remote-User`,
//! one `X-Remote-Group` per group and `X-Remote-Extra-<key>` per extra value (or a mapping's own
//! names for them).
//!
//! A shard believes these headers on the proxy's mutually authenticated connection, so a client
//! must never be able to send its own: every inbound copy, under the default names and under any
//! mapping's names, is removed from every request before the proxy stamps the identity it
//! authenticated (upstream's `authheaders` package; advisory GHSA-c8w2-fgvx-vhv4). Extra keys are
//! percent-escaped as upstream does with `url.PathEscape` (`authentication.kubernetes.io/...`
//! has a `/`), and the shard's request-header authenticator unescapes them.

use http::{HeaderMap, HeaderName, HeaderValue};
use kcp_authn::UserInfo;

use crate::mapping::PathMapping;

pub const DEFAULT_USER_HEADER: &str = "X-Remote-User";
pub const DEFAULT_GROUP_HEADER: &str = "X-Remote-Group";
pub const DEFAULT_EXTRA_HEADER_PREFIX: &str = "X-Remote-Extra-";

/// A header name in a mapping that HTTP does not allow.
#[derive(Debug, thiserror::Error)]
#[error("mapping {path:?}: {value:?} is not a valid header name")]
pub struct InvalidHeaderName {
    pub path: String,
    pub value: String,
}

/// The names one backend reads the identity from.
#[derive(Debug, Clone)]
pub struct IdentityHeaders {
    user: HeaderName,
    group: HeaderName,
    /// Lower case, as `http` keeps header names.
    extra_prefix: String,
}

impl Default for IdentityHeaders {
    fn default() -> Self {
        IdentityHeaders {
            user: HeaderName::from_static("x-remote-user"),
            group: HeaderName::from_static("x-remote-group"),
            extra_prefix: DEFAULT_EXTRA_HEADER_PREFIX.to_ascii_lowercase(),
        }
    }
}

impl IdentityHeaders {
    /// The mapping's names, defaulting to `X-Remote-*`.
    pub fn of(mapping: &PathMapping) -> Result<IdentityHeaders, InvalidHeaderName> {
        let name = |value: &Option<String>, default: &str| {
            let value = value
                .as_deref()
                .filter(|v| !v.is_empty())
                .unwrap_or(default);
            HeaderName::from_bytes(value.as_bytes()).map_err(|_| InvalidHeaderName {
                path: mapping.path.clone(),
                value: value.to_owned(),
            })
        };
        let extra_prefix = name(&mapping.extra_header_prefix, DEFAULT_EXTRA_HEADER_PREFIX)?;
        Ok(IdentityHeaders {
            user: name(&mapping.user_header, DEFAULT_USER_HEADER)?,
            group: name(&mapping.group_header, DEFAULT_GROUP_HEADER)?,
            extra_prefix: extra_prefix.as_str().to_owned(),
        })
    }

    /// Removes every header carrying identity under these names.
    pub fn strip(&self, headers: &mut HeaderMap) {
        // One pass over the names a client sent (a handful) finds what to remove; removing
        // names that are absent would hash each of them per request.
        let is_identity = |name: &HeaderName| {
            *name == self.user
                || *name == self.group
                || name.as_str().starts_with(&self.extra_prefix)
        };
        if !headers.keys().any(is_identity) {
            return;
        }
        let forged: Vec<HeaderName> = headers
            .keys()
            .filter(|name| is_identity(name))
            .cloned()
            .collect();
        for name in forged {
            headers.remove(name);
        }
    }

    /// Sets the user's identity (after [`strip`](Self::strip)). Values HTTP cannot carry are
    /// left out and logged.
    pub fn stamp(&self, headers: &mut HeaderMap, user: &UserInfo) {
        if let Some(value) = header_value(&user.name) {
            headers.insert(self.user.clone(), value);
        }
        for group in &user.groups {
            if let Some(value) = header_value(group) {
                headers.append(self.group.clone(), value);
            }
        }
        for (key, values) in &user.extra {
            let name = format!("{}{}", self.extra_prefix, escape_key(key));
            let Ok(name) = HeaderName::from_bytes(name.as_bytes()) else {
                tracing::debug!(key, "extra key cannot be a header name; not forwarded");
                continue;
            };
            for value in values {
                if let Some(value) = header_value(value) {
                    headers.append(name.clone(), value);
                }
            }
        }
    }
}

fn header_value(text: &str) -> Option<HeaderValue> {
    let value = HeaderValue::from_str(text).ok();
    if value.is_none() {
        tracing::debug!(
            text,
            "identity value cannot be a header value; not forwarded"
        );
    }
    value
}

/// Percent-escapes an extra key for a header name: unreserved characters stay, the rest (`/`,
/// `:` and anything a header name cannot hold) become `%XX`.
fn escape_key(key: &str) -> String {
    let mut escaped = String::with_capacity(key.len());
    for byte in key.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~') {
            escaped.push(char::from(byte));
        } else {
            escaped.push_str(&format!("%{byte:02X}"));
        }
    }
    escaped
}

/// Every set of names the proxy's mappings use, the defaults first, without repeats: what is
/// stripped from every request whatever its backend.
pub fn all_names<'a>(
    mappings: impl IntoIterator<Item = &'a PathMapping>,
) -> Result<Vec<IdentityHeaders>, InvalidHeaderName> {
    let mut all = vec![IdentityHeaders::default()];
    for mapping in mappings {
        let names = IdentityHeaders::of(mapping)?;
        let known = all.iter().any(|seen| {
            seen.user == names.user
                && seen.group == names.group
                && seen.extra_prefix == names.extra_prefix
        });
        if !known {
            all.push(names);
        }
    }
    Ok(all)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn mapping(user: Option<&str>, group: Option<&str>, extra: Option<&str>) -> PathMapping {
        PathMapping {
            path: "/services/".into(),
            backend: "https://b".into(),
            backend_server_ca: "/ca".into(),
            proxy_client_cert: "/c".into(),
            proxy_client_key: "/k".into(),
            user_header: user.map(Into::into),
            group_header: group.map(Into::into),
            extra_header_prefix: extra.map(Into::into),
        }
    }

    fn forged() -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in [
            ("X-Remote-User", "admin"),
            ("x-remote-group", "system:masters"),
            ("X-REMOTE-GROUP", "other"),
            ("X-Remote-Extra-Scopes", "all"),
            ("X-Other-User", "admin"),
            ("X-Other-Extra-a", "b"),
            ("Accept", "application/json"),
        ] {
            headers.append(
                HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_static(value),
            );
        }
        headers
    }

    #[test]
    fn strips_default_and_custom_names_whatever_their_case() {
        let mut headers = forged();
        let names =
            all_names([&mapping(Some("X-Other-User"), None, Some("X-Other-Extra-"))]).unwrap();
        assert_eq!(names.len(), 2);
        for set in &names {
            set.strip(&mut headers);
        }
        let left: Vec<&str> = headers.keys().map(HeaderName::as_str).collect();
        assert_eq!(left, ["accept"]);
    }

    #[test]
    fn stamps_user_groups_and_escaped_extras() {
        let mut headers = forged();
        let names = IdentityHeaders::default();
        names.strip(&mut headers);
        names.stamp(
            &mut headers,
            &UserInfo {
                name: "alice".into(),
                uid: String::new(),
                groups: vec!["devs".into(), "system:authenticated".into()],
                extra: BTreeMap::from([(
                    "authentication.kubernetes.io/cluster-name".into(),
                    vec!["abc".into()],
                )]),
            },
        );
        assert_eq!(headers["x-remote-user"], "alice");
        let groups: Vec<_> = headers.get_all("x-remote-group").iter().collect();
        assert_eq!(groups, ["devs", "system:authenticated"]);
        assert_eq!(
            headers["x-remote-extra-authentication.kubernetes.io%2Fcluster-name"],
            "abc"
        );
        assert!(headers.get("x-remote-extra-scopes").is_none());
    }

    #[test]
    fn custom_names_are_used_for_stamping() {
        let names = IdentityHeaders::of(&mapping(Some("X-U"), Some("X-G"), Some("X-E-"))).unwrap();
        let mut headers = HeaderMap::new();
        names.stamp(
            &mut headers,
            &UserInfo {
                name: "bob".into(),
                groups: vec!["g".into()],
                extra: BTreeMap::from([("k".into(), vec!["v".into()])]),
                ..UserInfo::default()
            },
        );
        assert_eq!(headers["x-u"], "bob");
        assert_eq!(headers["x-g"], "g");
        assert_eq!(headers["x-e-k"], "v");
        assert!(IdentityHeaders::of(&mapping(Some("bad header"), None, None)).is_err());
    }
}
