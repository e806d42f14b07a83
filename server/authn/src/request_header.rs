//! Front-proxy request headers (`--requestheader-*`): a proxy that authenticated the user passes
//! the identity on in headers such as `X-Remote-User`.
//!
//! Those headers are only believed from a connection whose client certificate verifies against the
//! request-header CA and, when names are configured, whose CN is one of them. Any other request
//! must not be able to smuggle them further in: the chain calls [`RequestHeaderAuthenticator::strip`]
//! for every request that did not authenticate through this authenticator.

use std::collections::BTreeMap;

use http::{HeaderMap, HeaderName};
use rustls_pki_types::CertificateDer;

use crate::error::AuthnError;
use crate::user::UserInfo;
use crate::x509::{ChainVerifier, X509Error};

#[derive(Debug, thiserror::Error)]
pub enum RequestHeaderError {
    #[error("request-header CA: {0}")]
    Ca(#[from] X509Error),
    #[error("invalid request header name {0:?}")]
    InvalidHeader(String),
}

/// The `--requestheader-*` flags.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestHeaderConfig {
    pub ca_pem: String,
    pub allowed_names: Vec<String>,
    pub username_headers: Vec<String>,
    pub group_headers: Vec<String>,
    pub extra_headers_prefixes: Vec<String>,
    pub uid_headers: Vec<String>,
}

#[derive(Debug)]
pub struct RequestHeaderAuthenticator {
    verifier: ChainVerifier,
    allowed_names: Vec<String>,
    username_headers: Vec<HeaderName>,
    group_headers: Vec<HeaderName>,
    uid_headers: Vec<HeaderName>,
    /// Lower-cased, as `http` keeps header names.
    extra_prefixes: Vec<String>,
}

fn header_names(names: &[String]) -> Result<Vec<HeaderName>, RequestHeaderError> {
    names
        .iter()
        .map(|name| {
            HeaderName::from_bytes(name.trim().as_bytes())
                .map_err(|_| RequestHeaderError::InvalidHeader(name.clone()))
        })
        .collect()
}

/// Every non-empty value of `names`, in order.
fn values<'a>(
    headers: &'a HeaderMap,
    names: &'a [HeaderName],
) -> impl Iterator<Item = String> + 'a {
    names
        .iter()
        .flat_map(|name| headers.get_all(name))
        .map(|value| String::from_utf8_lossy(value.as_bytes()).into_owned())
        .filter(|value| !value.is_empty())
}

/// kube's rule for extra keys: `url.PathUnescape`, keeping the key as sent when it is not valid
/// percent-encoding.
fn unescape_extra_key(key: &str) -> String {
    let bytes = key.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut pos = 0;
    while pos < bytes.len() {
        if bytes[pos] == b'%' {
            let hex = bytes
                .get(pos + 1..pos + 3)
                .and_then(|hex| std::str::from_utf8(hex).ok())
                .and_then(|hex| u8::from_str_radix(hex, 16).ok());
            let Some(byte) = hex else {
                return key.to_owned();
            };
            out.push(byte);
            pos += 3;
        } else {
            out.push(bytes[pos]);
            pos += 1;
        }
    }
    String::from_utf8(out).unwrap_or_else(|_| key.to_owned())
}

impl RequestHeaderAuthenticator {
    pub fn new(
        config: RequestHeaderConfig,
    ) -> Result<RequestHeaderAuthenticator, RequestHeaderError> {
        Ok(RequestHeaderAuthenticator {
            verifier: ChainVerifier::from_pem(&config.ca_pem)?,
            allowed_names: config.allowed_names,
            username_headers: header_names(&config.username_headers)?,
            group_headers: header_names(&config.group_headers)?,
            uid_headers: header_names(&config.uid_headers)?,
            extra_prefixes: config
                .extra_headers_prefixes
                .iter()
                .map(|prefix| prefix.trim().to_ascii_lowercase())
                .filter(|prefix| !prefix.is_empty())
                .collect(),
        })
    }

    /// The user the proxy vouches for. `Ok(None)` when the client is not a trusted proxy or sent
    /// no user name; `Err` when its certificate is from the request-header CA but unusable.
    pub fn authenticate(
        &self,
        chain: &[CertificateDer<'_>],
        headers: &HeaderMap,
    ) -> Result<Option<UserInfo>, AuthnError> {
        let Some(subject) = self.verifier.verify(chain)? else {
            return Ok(None);
        };
        if !self.allowed_names.is_empty() && !self.allowed_names.contains(&subject.common_name) {
            return Ok(None);
        }
        let Some(name) = values(headers, &self.username_headers).next() else {
            return Ok(None);
        };
        let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (header, value) in headers {
            let Some(rest) = self
                .extra_prefixes
                .iter()
                .find_map(|prefix| header.as_str().strip_prefix(prefix.as_str()))
            else {
                continue;
            };
            extra
                .entry(unescape_extra_key(&rest.to_ascii_lowercase()))
                .or_default()
                .push(String::from_utf8_lossy(value.as_bytes()).into_owned());
        }
        Ok(Some(UserInfo {
            name,
            uid: values(headers, &self.uid_headers)
                .next()
                .unwrap_or_default(),
            groups: values(headers, &self.group_headers).collect(),
            extra,
        }))
    }

    /// Removes every header this authenticator would read.
    pub fn strip(&self, headers: &mut HeaderMap) {
        let prefixed: Vec<HeaderName> = headers
            .keys()
            .filter(|name| {
                self.extra_prefixes
                    .iter()
                    .any(|prefix| name.as_str().starts_with(prefix.as_str()))
            })
            .cloned()
            .collect();
        for name in self
            .username_headers
            .iter()
            .chain(&self.group_headers)
            .chain(&self.uid_headers)
            .chain(&prefixed)
        {
            headers.remove(name);
        }
    }
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;
    use crate::test_pki::Ca;

    fn config(ca: &Ca, allowed: &[&str]) -> RequestHeaderConfig {
        RequestHeaderConfig {
            ca_pem: ca.pem(),
            allowed_names: allowed.iter().map(|name| (*name).to_owned()).collect(),
            username_headers: vec!["X-Remote-User".to_owned(), "X-Other-User".to_owned()],
            group_headers: vec!["X-Remote-Group".to_owned(), "X-Other-Group".to_owned()],
            extra_headers_prefixes: vec!["X-Remote-Extra-".to_owned()],
            uid_headers: vec!["X-Remote-Uid".to_owned()],
        }
    }

    fn headers() -> HeaderMap {
        let mut headers = HeaderMap::new();
        let mut add = |name: &'static str, value: &'static str| {
            headers.append(name, HeaderValue::from_static(value));
        };
        add("x-remote-user", "");
        add("x-other-user", "alice");
        add("x-remote-group", "devs");
        add("x-remote-group", "ops");
        add("x-other-group", "admins");
        add("x-remote-uid", "u-1");
        add("x-remote-extra-authentication.kcp.io%2fscopes", "cluster:a");
        add("x-remote-extra-authentication.kcp.io%2fscopes", "cluster:b");
        add("x-remote-extra-bad%zzkey", "v");
        add("authorization", "Bearer keep-me");
        headers
    }

    #[test]
    fn trusted_proxies_pass_user_groups_uid_and_extra() {
        let ca = Ca::new("front-proxy-ca");
        let authenticator = RequestHeaderAuthenticator::new(config(&ca, &["front-proxy"])).unwrap();
        let user = authenticator
            .authenticate(&[ca.client("front-proxy", &[])], &headers())
            .unwrap()
            .unwrap();
        assert_eq!(user.name, "alice");
        assert_eq!(user.uid, "u-1");
        assert_eq!(user.groups, vec!["devs", "ops", "admins"]);
        assert_eq!(
            user.extra,
            BTreeMap::from([
                (
                    "authentication.kcp.io/scopes".to_owned(),
                    vec!["cluster:a".to_owned(), "cluster:b".to_owned()]
                ),
                ("bad%zzkey".to_owned(), vec!["v".to_owned()]),
            ])
        );
        let open = RequestHeaderAuthenticator::new(config(&ca, &[])).unwrap();
        assert!(
            open.authenticate(&[ca.client("anyone", &[])], &headers())
                .unwrap()
                .is_some()
        );
    }

    #[test]
    fn untrusted_clients_are_ignored() {
        let proxy_ca = Ca::new("front-proxy-ca");
        let client_ca = Ca::new("client-ca");
        let authenticator =
            RequestHeaderAuthenticator::new(config(&proxy_ca, &["front-proxy"])).unwrap();
        for chain in [
            vec![client_ca.client("front-proxy", &[])],
            vec![proxy_ca.client("someone-else", &[])],
            vec![],
        ] {
            assert_eq!(
                authenticator.authenticate(&chain, &headers()).unwrap(),
                None
            );
        }
        assert!(matches!(
            authenticator.authenticate(&[proxy_ca.expired_client("front-proxy")], &headers()),
            Err(AuthnError::Certificate(_))
        ));
    }

    #[test]
    fn a_proxy_without_user_header_authenticates_nobody() {
        let ca = Ca::new("front-proxy-ca");
        let authenticator = RequestHeaderAuthenticator::new(config(&ca, &[])).unwrap();
        let mut headers = headers();
        headers.remove("x-other-user");
        assert_eq!(
            authenticator
                .authenticate(&[ca.client("front-proxy", &[])], &headers)
                .unwrap(),
            None
        );
    }

    #[test]
    fn strip_removes_every_configured_header() {
        let ca = Ca::new("front-proxy-ca");
        let authenticator = RequestHeaderAuthenticator::new(config(&ca, &[])).unwrap();
        let mut headers = headers();
        authenticator.strip(&mut headers);
        assert_eq!(
            headers.keys().map(HeaderName::as_str).collect::<Vec<_>>(),
            vec!["authorization"]
        );
    }

    #[test]
    fn extra_keys_unescape_like_kube() {
        assert_eq!(unescape_extra_key("a%2fb%2Fc"), "a/b/c");
        assert_eq!(unescape_extra_key("100%"), "100%");
        assert_eq!(unescape_extra_key("%ff"), "%ff");
        assert!(matches!(
            RequestHeaderAuthenticator::new(RequestHeaderConfig {
                ca_pem: Ca::new("x").pem(),
                username_headers: vec!["bad header".to_owned()],
                ..RequestHeaderConfig::default()
            }),
            Err(RequestHeaderError::InvalidHeader(_))
        ));
    }
}
