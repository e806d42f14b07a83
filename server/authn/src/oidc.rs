//! OIDC ID tokens (kube-apiserver's `--oidc-*` flags).
//!
//! The issuer's keys are found through discovery (`<issuer>/.well-known/openid-configuration`,
//! whose `issuer` must equal the configured URL, then its `jwks_uri`) and cached. Nothing is
//! fetched at construction: an identity provider that is down must not stop the server from
//! starting, so keys are fetched on the first token and fetched again, at most once per refresh
//! interval, when a token names a key the cache does not know (the provider rotated its keys).
//!
//! Claim rules follow kube: `aud` must contain the client id; `exp` is required and has no grace;
//! `nbf` gets go-oidc's five minutes of skew; the username claim `email` requires
//! `email_verified` to be true when present; without a configured prefix, usernames from any claim
//! but `email` are prefixed with `<issuer>#` so they cannot collide with other authenticators'
//! users; the prefix `-` means none.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::sync::Mutex;

use crate::error::AuthnError;
use crate::jwt;
use crate::keys::VerifyingKey;
use crate::service_account::audiences;
use crate::user::UserInfo;

/// Shortest time between two key fetches after a successful one.
const REFRESH_INTERVAL: Duration = Duration::from_secs(10);

/// Shortest time between two fetches while the issuer is unreachable.
const RETRY_INTERVAL: Duration = Duration::from_secs(1);

/// How long one discovery or JWKS request may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);

/// Skew allowed on `nbf` (go-oidc's).
const NOT_BEFORE_LEEWAY_SECONDS: i64 = 300;

#[derive(Debug, thiserror::Error)]
pub enum OidcError {
    #[error("invalid OIDC configuration: {0}")]
    Config(&'static str),
    #[error("OIDC CA bundle: {0}")]
    Ca(String),
    #[error("OIDC HTTP client: {0}")]
    Client(String),
}

/// The `--oidc-*` flags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OidcConfig {
    pub issuer_url: String,
    pub client_id: String,
    /// CAs for the issuer's TLS certificate; `None` uses the public web roots.
    pub ca_pem: Option<String>,
    pub username_claim: String,
    pub username_prefix: Option<String>,
    pub groups_claim: Option<String>,
    pub groups_prefix: Option<String>,
    pub required_claims: Vec<(String, String)>,
    pub signing_algs: Vec<String>,
}

impl Default for OidcConfig {
    /// kube's defaults: username from `sub`, tokens signed with RS256.
    fn default() -> OidcConfig {
        OidcConfig {
            issuer_url: String::new(),
            client_id: String::new(),
            ca_pem: None,
            username_claim: "sub".to_owned(),
            username_prefix: None,
            groups_claim: None,
            groups_prefix: None,
            required_claims: Vec::new(),
            signing_algs: vec!["RS256".to_owned()],
        }
    }
}

#[derive(Debug, Default)]
struct KeyCache {
    keys: Arc<Vec<VerifyingKey>>,
    last_attempt: Option<Instant>,
    last_ok: bool,
}

#[derive(Debug)]
pub struct OidcAuthenticator {
    config: OidcConfig,
    username_prefix: String,
    client: reqwest::Client,
    cache: Mutex<KeyCache>,
    refresh_interval: Duration,
}

impl OidcAuthenticator {
    /// Checks the configuration and builds the HTTP client; contacts nobody.
    pub fn new(config: OidcConfig) -> Result<OidcAuthenticator, OidcError> {
        if !config.issuer_url.starts_with("https://") {
            return Err(OidcError::Config("issuer URL must use https"));
        }
        if config.client_id.is_empty() {
            return Err(OidcError::Config("client id is required"));
        }
        if config.username_claim.is_empty() {
            return Err(OidcError::Config("username claim is required"));
        }
        if config
            .signing_algs
            .iter()
            .any(|alg| alg.eq_ignore_ascii_case("none"))
        {
            return Err(OidcError::Config("signing algorithm none is not allowed"));
        }
        let mut builder = reqwest::Client::builder()
            .use_rustls_tls()
            .timeout(FETCH_TIMEOUT);
        if let Some(pem) = &config.ca_pem {
            let certificates = reqwest::Certificate::from_pem_bundle(pem.as_bytes())
                .map_err(|error| OidcError::Ca(error.to_string()))?;
            if certificates.is_empty() {
                return Err(OidcError::Ca("no certificate in bundle".to_owned()));
            }
            builder = builder.tls_built_in_root_certs(false);
            for certificate in certificates {
                builder = builder.add_root_certificate(certificate);
            }
        }
        let client = builder
            .build()
            .map_err(|error| OidcError::Client(error.to_string()))?;
        let username_prefix = match config.username_prefix.as_deref() {
            Some("-") => String::new(),
            Some(prefix) => prefix.to_owned(),
            None if config.username_claim == "email" => String::new(),
            None => format!("{}#", config.issuer_url),
        };
        Ok(OidcAuthenticator {
            config,
            username_prefix,
            client,
            cache: Mutex::new(KeyCache::default()),
            refresh_interval: REFRESH_INTERVAL,
        })
    }

    /// Overrides how often an unknown key id may trigger a key fetch (default 10 s).
    pub fn with_refresh_interval(mut self, interval: Duration) -> OidcAuthenticator {
        self.refresh_interval = interval;
        self
    }

    /// `Ok(None)` when `token` is not a JWT from this issuer.
    pub async fn authenticate(
        &self,
        token: &str,
        now: i64,
    ) -> Result<Option<UserInfo>, AuthnError> {
        let Ok(unverified) = jwt::unverified_claims(token) else {
            return Ok(None);
        };
        if unverified.get("iss").and_then(Value::as_str) != Some(self.config.issuer_url.as_str()) {
            return Ok(None);
        }
        let keys = self.keys(jwt::unverified_key_id(token).as_deref()).await?;
        let algs: Vec<&str> = self
            .config
            .signing_algs
            .iter()
            .map(String::as_str)
            .collect();
        let claims =
            jwt::verify(token, &keys, &algs).map_err(|error| reject(&error.to_string()))?;
        self.user(&claims, now).map(Some)
    }

    /// The cached keys, fetched first when the cache is empty or lacks `kid`, and the last fetch
    /// is old enough.
    async fn keys(&self, kid: Option<&str>) -> Result<Arc<Vec<VerifyingKey>>, AuthnError> {
        let mut cache = self.cache.lock().await;
        let known = match kid {
            Some(kid) => cache.keys.iter().any(|key| key.key_id() == kid),
            None => !cache.keys.is_empty(),
        };
        let wait = if cache.last_ok {
            self.refresh_interval
        } else {
            RETRY_INTERVAL.min(self.refresh_interval)
        };
        let due = cache.last_attempt.is_none_or(|at| at.elapsed() >= wait);
        if !known && due {
            cache.last_attempt = Some(Instant::now());
            match self.fetch_keys().await {
                Ok(keys) => {
                    cache.keys = Arc::new(keys);
                    cache.last_ok = true;
                }
                Err(reason) => {
                    cache.last_ok = false;
                    tracing::warn!(issuer = %self.config.issuer_url, %reason, "fetching OIDC keys failed");
                    if cache.keys.is_empty() {
                        return Err(AuthnError::OidcUnavailable(reason));
                    }
                }
            }
        }
        if cache.keys.is_empty() {
            return Err(AuthnError::OidcUnavailable(
                "no keys fetched yet".to_owned(),
            ));
        }
        Ok(Arc::clone(&cache.keys))
    }

    async fn get_json(&self, url: &str) -> Result<Value, String> {
        let response = self
            .client
            .get(url)
            .send()
            .await
            .and_then(reqwest::Response::error_for_status)
            .map_err(|error| format!("GET {url}: {error}"))?;
        response
            .json()
            .await
            .map_err(|error| format!("GET {url}: {error}"))
    }

    async fn fetch_keys(&self) -> Result<Vec<VerifyingKey>, String> {
        let discovery_url = format!(
            "{}/.well-known/openid-configuration",
            self.config.issuer_url.trim_end_matches('/')
        );
        let discovery = self.get_json(&discovery_url).await?;
        if discovery.get("issuer").and_then(Value::as_str) != Some(self.config.issuer_url.as_str())
        {
            return Err("discovery document names another issuer".to_owned());
        }
        let jwks_uri = discovery
            .get("jwks_uri")
            .and_then(Value::as_str)
            .ok_or("discovery document has no jwks_uri")?;
        let jwks = self.get_json(jwks_uri).await?;
        let keys: Vec<VerifyingKey> = jwks
            .get("keys")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|jwk| match VerifyingKey::from_jwk(jwk) {
                Ok(key) => Some(key),
                Err(error) => {
                    tracing::debug!(%error, "skipping unusable JWK");
                    None
                }
            })
            .collect();
        if keys.is_empty() {
            return Err("JWKS holds no usable signing key".to_owned());
        }
        Ok(keys)
    }

    /// The user the verified `claims` describe, after kube's claim checks.
    fn user(&self, claims: &Value, now: i64) -> Result<UserInfo, AuthnError> {
        if !audiences(claims).contains(&self.config.client_id) {
            return Err(reject("token is not for this client"));
        }
        let expires = claims
            .get("exp")
            .and_then(Value::as_i64)
            .ok_or_else(|| reject("token has no expiry"))?;
        if now >= expires {
            return Err(reject("token has expired"));
        }
        if claims
            .get("nbf")
            .and_then(Value::as_i64)
            .is_some_and(|nbf| now + NOT_BEFORE_LEEWAY_SECONDS < nbf)
        {
            return Err(reject("token is not valid yet"));
        }
        for (claim, value) in &self.config.required_claims {
            if claims.get(claim).and_then(Value::as_str) != Some(value.as_str()) {
                return Err(reject("token lacks a required claim"));
            }
        }

        let username_claim = &self.config.username_claim;
        let username = claims
            .get(username_claim)
            .and_then(Value::as_str)
            .filter(|name| !name.is_empty())
            .ok_or_else(|| reject("token has no username claim"))?;
        if username_claim == "email" {
            match claims.get("email_verified") {
                None | Some(Value::Bool(true)) => {}
                Some(_) => return Err(reject("email is not verified")),
            }
        }

        let groups = match self
            .config
            .groups_claim
            .as_ref()
            .and_then(|claim| claims.get(claim))
        {
            None => Vec::new(),
            Some(Value::String(group)) => vec![group.clone()],
            Some(Value::Array(items)) => items
                .iter()
                .map(|item| item.as_str().map(str::to_owned))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| reject("groups claim is not a list of strings"))?,
            Some(_) => return Err(reject("groups claim is not a string or list of strings")),
        };
        let groups_prefix = self.config.groups_prefix.as_deref().unwrap_or_default();
        Ok(UserInfo {
            name: format!("{}{username}", self.username_prefix),
            groups: groups
                .into_iter()
                .map(|group| format!("{groups_prefix}{group}"))
                .collect(),
            ..UserInfo::default()
        })
    }
}

fn reject(reason: &str) -> AuthnError {
    AuthnError::Oidc(reason.to_owned())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const ISSUER: &str = "https://idp.example";
    const NOW: i64 = 1_800_000_000;

    fn authenticator(edit: impl FnOnce(&mut OidcConfig)) -> OidcAuthenticator {
        let mut config = OidcConfig {
            issuer_url: ISSUER.to_owned(),
            client_id: "kcp".to_owned(),
            ..OidcConfig::default()
        };
        edit(&mut config);
        OidcAuthenticator::new(config).unwrap()
    }

    fn claims(extra: Value) -> Value {
        let mut claims = json!({"iss": ISSUER, "aud": "kcp", "sub": "1234", "exp": NOW + 60});
        if let (Some(claims), Value::Object(extra)) = (claims.as_object_mut(), extra) {
            claims.extend(extra);
        }
        claims
    }

    #[test]
    fn username_prefix_rules() {
        let user = |edit: fn(&mut OidcConfig), extra: Value| {
            authenticator(edit)
                .user(&claims(extra), NOW)
                .map(|user| user.name)
        };
        assert_eq!(user(|_| {}, json!({})).unwrap(), "https://idp.example#1234");
        assert_eq!(
            user(|c| c.username_prefix = Some("-".to_owned()), json!({})).unwrap(),
            "1234"
        );
        assert_eq!(
            user(|c| c.username_prefix = Some("oidc:".to_owned()), json!({})).unwrap(),
            "oidc:1234"
        );
        let email = |c: &mut OidcConfig| c.username_claim = "email".to_owned();
        assert_eq!(user(email, json!({"email": "a@b.c"})).unwrap(), "a@b.c");
        assert_eq!(
            user(email, json!({"email": "a@b.c", "email_verified": true})).unwrap(),
            "a@b.c"
        );
        assert_eq!(
            user(email, json!({"email": "a@b.c", "email_verified": false})),
            Err(reject("email is not verified"))
        );
        assert_eq!(
            user(email, json!({})),
            Err(reject("token has no username claim"))
        );
    }

    #[test]
    fn groups_may_be_a_string_or_a_list() {
        let groups = |value: Value| {
            authenticator(|c| {
                c.groups_claim = Some("groups".to_owned());
                c.groups_prefix = Some("oidc:".to_owned());
            })
            .user(&claims(json!({"groups": value})), NOW)
            .map(|user| user.groups)
        };
        assert_eq!(groups(json!("devs")).unwrap(), vec!["oidc:devs"]);
        assert_eq!(groups(json!(["a", "b"])).unwrap(), vec!["oidc:a", "oidc:b"]);
        assert!(groups(json!([1])).is_err());
        assert!(groups(json!({"a": 1})).is_err());
        assert_eq!(
            authenticator(|_| {})
                .user(&claims(json!({})), NOW)
                .unwrap()
                .groups,
            Vec::<String>::new()
        );
    }

    #[test]
    fn audience_lifetime_and_required_claims() {
        let check = |extra: Value, now: i64| {
            authenticator(|c| {
                c.required_claims = vec![("hd".to_owned(), "example.com".to_owned())];
            })
            .user(&claims(extra), now)
        };
        let ok = json!({"hd": "example.com"});
        assert!(check(ok.clone(), NOW).is_ok());
        assert!(check(json!({"hd": "example.com", "aud": ["x", "kcp"]}), NOW).is_ok());
        assert_eq!(
            check(json!({"hd": "example.com", "aud": "other"}), NOW),
            Err(reject("token is not for this client"))
        );
        assert_eq!(
            check(ok.clone(), NOW + 60),
            Err(reject("token has expired"))
        );
        assert_eq!(
            check(json!({"hd": "example.com", "nbf": NOW + 301}), NOW),
            Err(reject("token is not valid yet"))
        );
        assert!(check(json!({"hd": "example.com", "nbf": NOW + 300}), NOW).is_ok());
        assert_eq!(
            check(json!({"hd": "other.com"}), NOW),
            Err(reject("token lacks a required claim"))
        );
    }

    #[test]
    fn configuration_is_checked() {
        let new = |edit: fn(&mut OidcConfig)| {
            let mut config = OidcConfig {
                issuer_url: ISSUER.to_owned(),
                client_id: "kcp".to_owned(),
                ..OidcConfig::default()
            };
            edit(&mut config);
            OidcAuthenticator::new(config).map(|_| ())
        };
        assert!(new(|_| {}).is_ok());
        assert!(new(|c| c.issuer_url = "http://idp".to_owned()).is_err());
        assert!(new(|c| c.client_id.clear()).is_err());
        assert!(new(|c| c.signing_algs = vec!["none".to_owned()]).is_err());
        assert!(new(|c| c.ca_pem = Some("junk".to_owned())).is_err());
    }
}
