//! Service-account tokens: Kubernetes' bound tokens plus kcp's logical-cluster claim.
//!
//! The claims are kube's (`iss`, `sub`, `aud`, `exp`, `iat`, `nbf`, `jti` and the private
//! `kubernetes.io` object) with kcp's `kubernetes.io.clusterName` inside that object, exactly as
//! kcp's fork of `pkg/serviceaccount/claims.go` writes it. Keeping the shape means tokens minted
//! by upstream kcp and by this server verify on either side given the same key, and kcp's
//! in-cluster request rewrite (which reads `kubernetes.io.clusterName`) works on ours.
//!
//! Verification here is what the token alone can prove: signature, issuer, audience, lifetime and
//! well-formed claims. Whether the service account (and the bound secret or pod) still exists with
//! the same uid, and whether its cluster is the request's, needs storage: the server checks that
//! against [`AuthenticatedServiceAccount::token`].

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use crate::error::AuthnError;
use crate::jwt;
use crate::keys::{KeyError, SigningKey, VerifyingKey};
use crate::user::{CLUSTER_NAME_EXTRA, UserInfo};

/// Algorithms service-account tokens may be signed with (kube accepts RSA and ECDSA keys).
const ALGORITHMS: &[&str] = &[
    "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384",
];

/// Clock skew tolerated on `exp`, `nbf` and `iat`, as kube (go-jose's default leeway).
const LEEWAY_SECONDS: i64 = 60;

/// The private claims object.
const KUBERNETES_CLAIM: &str = "kubernetes.io";

pub const CREDENTIAL_ID_EXTRA: &str = "authentication.kubernetes.io/credential-id";
pub const POD_NAME_EXTRA: &str = "authentication.kubernetes.io/pod-name";
pub const POD_UID_EXTRA: &str = "authentication.kubernetes.io/pod-uid";

/// Group of every service account.
pub const SERVICE_ACCOUNTS_GROUP: &str = "system:serviceaccounts";

/// The logical cluster a service-account token names, read without verifying it (it only picks
/// where the token is taken: the front-proxy's in-cluster rewrite, a delegated TokenReview):
/// `kubernetes.io.clusterName`, else the legacy `kubernetes.io/serviceaccount/clusterName`.
pub fn unverified_cluster(token: &str) -> Option<String> {
    let claims = jwt::unverified_claims(token).ok()?;
    string_at(&claims, &[KUBERNETES_CLAIM, "clusterName"])
        .or_else(|| string_at(&claims, &["kubernetes.io/serviceaccount/clusterName"]))
        .filter(|name| !name.contains('/'))
        .map(str::to_owned)
}

/// `system:serviceaccount:<namespace>:<name>`.
pub fn service_account_username(namespace: &str, name: &str) -> String {
    format!("system:serviceaccount:{namespace}:{name}")
}

/// What a token is bound to, besides its service account; it dies with that object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BoundObjectKind {
    Secret,
    Pod,
}

impl BoundObjectKind {
    fn claim(self) -> &'static str {
        match self {
            BoundObjectKind::Secret => "secret",
            BoundObjectKind::Pod => "pod",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoundObject {
    pub kind: BoundObjectKind,
    pub name: String,
    pub uid: String,
}

/// The contents of a service-account token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceAccountToken {
    /// Logical cluster of the service account.
    pub cluster: String,
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub audiences: Vec<String>,
    /// Lifetime; for a verified token, `exp - iat`.
    pub expiration_seconds: i64,
    pub bound_object: Option<BoundObject>,
}

/// Mints service-account tokens (TokenRequest, the legacy token controller).
#[derive(Debug)]
pub struct TokenIssuer {
    key: SigningKey,
    issuer: String,
}

impl TokenIssuer {
    pub fn new(key: SigningKey, issuer: String) -> TokenIssuer {
        TokenIssuer { key, issuer }
    }

    /// The `iss` of issued tokens.
    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// The key that verifies issued tokens (for the issuer's JWKS and the authenticator).
    pub fn verifying_key(&self) -> VerifyingKey {
        self.key.verifying_key()
    }

    /// The signed token and its expiry (unix seconds), issued at `now` (unix seconds).
    pub fn issue(&self, token: &ServiceAccountToken, now: i64) -> Result<(String, i64), KeyError> {
        let expires = now.saturating_add(token.expiration_seconds);
        let mut private = Map::new();
        if !token.cluster.is_empty() {
            private.insert("clusterName".to_owned(), json!(token.cluster));
        }
        private.insert("namespace".to_owned(), json!(token.namespace));
        if let Some(bound) = &token.bound_object {
            private.insert(
                bound.kind.claim().to_owned(),
                json!({"name": bound.name, "uid": bound.uid}),
            );
        }
        private.insert(
            "serviceaccount".to_owned(),
            json!({"name": token.name, "uid": token.uid}),
        );
        // Keys in the order go-jose writes them (sorted), for byte-comparable tokens.
        let claims = json!({
            "aud": token.audiences,
            "exp": expires,
            "iat": now,
            "iss": self.issuer,
            "jti": uuid::Uuid::new_v4().to_string(),
            KUBERNETES_CLAIM: private,
            "nbf": now,
            "sub": service_account_username(&token.namespace, &token.name),
        });
        Ok((self.key.sign(&claims)?, expires))
    }
}

/// A verified service-account token: the user it stands for, and the claims the server must
/// still check against storage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthenticatedServiceAccount {
    pub user: UserInfo,
    pub token: ServiceAccountToken,
}

/// Verifies service-account tokens (`--service-account-key-file`, `--service-account-issuer`,
/// `--api-audiences`).
#[derive(Debug, Clone)]
pub struct ServiceAccountAuthenticator {
    keys: Vec<VerifyingKey>,
    issuers: Vec<String>,
    audiences: Vec<String>,
}

fn invalid(reason: &str) -> AuthnError {
    AuthnError::ServiceAccount(reason.to_owned())
}

/// A non-empty string at `path` under `value`.
fn string_at<'a>(value: &'a Value, path: &[&str]) -> Option<&'a str> {
    path.iter()
        .try_fold(value, |value, key| value.get(key))
        .and_then(Value::as_str)
        .filter(|text| !text.is_empty())
}

/// `aud` as kube reads it: one string or an array of strings.
pub(crate) fn audiences(claims: &Value) -> Vec<String> {
    match claims.get("aud") {
        Some(Value::String(audience)) => vec![audience.clone()],
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(|item| item.as_str().map(str::to_owned))
            .collect(),
        _ => Vec::new(),
    }
}

impl ServiceAccountAuthenticator {
    /// `api_audiences` empty means tokens must be for the first issuer, kube's default
    /// `--api-audiences`.
    pub fn new(
        keys: Vec<VerifyingKey>,
        issuers: Vec<String>,
        api_audiences: Vec<String>,
    ) -> ServiceAccountAuthenticator {
        let audiences = if api_audiences.is_empty() {
            issuers.iter().take(1).cloned().collect()
        } else {
            api_audiences
        };
        ServiceAccountAuthenticator {
            keys,
            issuers,
            audiences,
        }
    }

    /// `Ok(None)` when `token` is not a JWT from one of our issuers (another authenticator may
    /// know it); `Err` when it claims our issuer but does not hold up.
    pub fn authenticate(
        &self,
        token: &str,
        now: i64,
    ) -> Result<Option<AuthenticatedServiceAccount>, AuthnError> {
        let Ok(unverified) = jwt::unverified_claims(token) else {
            return Ok(None);
        };
        if !unverified
            .get("iss")
            .and_then(Value::as_str)
            .is_some_and(|iss| self.issuers.iter().any(|issuer| issuer == iss))
        {
            return Ok(None);
        }
        let claims = jwt::verify(token, &self.keys, ALGORITHMS)
            .map_err(|error| AuthnError::ServiceAccount(error.to_string()))?;

        let time = |name: &str| claims.get(name).and_then(Value::as_i64);
        let expires = time("exp").ok_or_else(|| invalid("token has no expiry"))?;
        if now > expires.saturating_add(LEEWAY_SECONDS) {
            return Err(invalid("token has expired"));
        }
        if [time("nbf"), time("iat")]
            .into_iter()
            .flatten()
            .any(|start| now.saturating_add(LEEWAY_SECONDS) < start)
        {
            return Err(invalid("token is not valid yet"));
        }
        let token_audiences = audiences(&claims);
        if !token_audiences
            .iter()
            .any(|audience| self.audiences.contains(audience))
        {
            return Err(invalid("token audiences are not accepted by this server"));
        }

        let private = claims
            .get(KUBERNETES_CLAIM)
            .ok_or_else(|| invalid("token has no kubernetes.io claims"))?;
        let required = |path: &[&str]| {
            string_at(private, path)
                .map(str::to_owned)
                .ok_or_else(|| invalid("token lacks required claims"))
        };
        let bound_object = [BoundObjectKind::Pod, BoundObjectKind::Secret]
            .into_iter()
            .find(|kind| private.get(kind.claim()).is_some())
            .map(|kind| -> Result<BoundObject, AuthnError> {
                Ok(BoundObject {
                    kind,
                    name: required(&[kind.claim(), "name"])?,
                    uid: required(&[kind.claim(), "uid"])?,
                })
            })
            .transpose()?;
        let parsed = ServiceAccountToken {
            cluster: required(&["clusterName"])?,
            namespace: required(&["namespace"])?,
            name: required(&["serviceaccount", "name"])?,
            uid: required(&["serviceaccount", "uid"])?,
            audiences: token_audiences,
            expiration_seconds: expires - time("iat").unwrap_or(expires),
            bound_object,
        };

        let mut extra =
            BTreeMap::from([(CLUSTER_NAME_EXTRA.to_owned(), vec![parsed.cluster.clone()])]);
        if let Some(jti) = string_at(&claims, &["jti"]) {
            extra.insert(CREDENTIAL_ID_EXTRA.to_owned(), vec![format!("JTI={jti}")]);
        }
        if let Some(pod) = parsed
            .bound_object
            .as_ref()
            .filter(|bound| bound.kind == BoundObjectKind::Pod)
        {
            extra.insert(POD_NAME_EXTRA.to_owned(), vec![pod.name.clone()]);
            extra.insert(POD_UID_EXTRA.to_owned(), vec![pod.uid.clone()]);
        }
        let user = UserInfo {
            name: service_account_username(&parsed.namespace, &parsed.name),
            uid: parsed.uid.clone(),
            groups: vec![
                SERVICE_ACCOUNTS_GROUP.to_owned(),
                format!("{SERVICE_ACCOUNTS_GROUP}:{}", parsed.namespace),
            ],
            extra,
        };
        Ok(Some(AuthenticatedServiceAccount {
            user,
            token: parsed,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::tests::{EC256_SEC1, RSA_PKCS1};

    const ISSUER: &str = "https://kcp.example/";
    const NOW: i64 = 1_800_000_000;

    fn token() -> ServiceAccountToken {
        ServiceAccountToken {
            cluster: "root:org:ws".to_owned(),
            namespace: "default".to_owned(),
            name: "builder".to_owned(),
            uid: "sa-uid".to_owned(),
            audiences: vec![ISSUER.to_owned()],
            expiration_seconds: 3600,
            bound_object: None,
        }
    }

    fn issuer() -> TokenIssuer {
        TokenIssuer::new(SigningKey::from_pem(RSA_PKCS1).unwrap(), ISSUER.to_owned())
    }

    fn authenticator() -> ServiceAccountAuthenticator {
        let issuer = issuer();
        ServiceAccountAuthenticator::new(
            vec![issuer.verifying_key()],
            vec![issuer.issuer().to_owned()],
            Vec::new(),
        )
    }

    #[test]
    fn issued_tokens_authenticate_and_round_trip() {
        let (jwt, expires) = issuer().issue(&token(), NOW).unwrap();
        assert_eq!(expires, NOW + 3600);
        let claims = jwt::unverified_claims(&jwt).unwrap();
        assert_eq!(claims["kubernetes.io"]["clusterName"], "root:org:ws");
        assert_eq!(claims["sub"], "system:serviceaccount:default:builder");
        assert_eq!(claims["aud"], json!([ISSUER]));

        let authenticated = authenticator()
            .authenticate(&jwt, NOW + 10)
            .unwrap()
            .unwrap();
        assert_eq!(authenticated.token, token());
        let user = authenticated.user;
        assert_eq!(user.name, "system:serviceaccount:default:builder");
        assert_eq!(user.uid, "sa-uid");
        assert_eq!(
            user.groups,
            vec!["system:serviceaccounts", "system:serviceaccounts:default"]
        );
        assert_eq!(user.extra[CLUSTER_NAME_EXTRA], vec!["root:org:ws"]);
        let jti = claims["jti"].as_str().unwrap();
        assert_eq!(user.extra[CREDENTIAL_ID_EXTRA], vec![format!("JTI={jti}")]);
    }

    #[test]
    fn bound_pods_and_secrets_are_reported() {
        let mut pod_bound = token();
        pod_bound.bound_object = Some(BoundObject {
            kind: BoundObjectKind::Pod,
            name: "web-0".to_owned(),
            uid: "pod-uid".to_owned(),
        });
        let (jwt, _) = issuer().issue(&pod_bound, NOW).unwrap();
        let authenticated = authenticator().authenticate(&jwt, NOW).unwrap().unwrap();
        assert_eq!(authenticated.token, pod_bound);
        assert_eq!(authenticated.user.extra[POD_NAME_EXTRA], vec!["web-0"]);
        assert_eq!(authenticated.user.extra[POD_UID_EXTRA], vec!["pod-uid"]);

        let mut secret_bound = token();
        secret_bound.bound_object = Some(BoundObject {
            kind: BoundObjectKind::Secret,
            name: "builder-token".to_owned(),
            uid: "secret-uid".to_owned(),
        });
        let (jwt, _) = issuer().issue(&secret_bound, NOW).unwrap();
        let authenticated = authenticator().authenticate(&jwt, NOW).unwrap().unwrap();
        assert_eq!(authenticated.token, secret_bound);
        assert!(!authenticated.user.extra.contains_key(POD_NAME_EXTRA));
    }

    #[test]
    fn lifetime_is_enforced_with_kube_leeway() {
        let (jwt, expires) = issuer().issue(&token(), NOW).unwrap();
        let authenticator = authenticator();
        assert!(
            authenticator
                .authenticate(&jwt, expires + LEEWAY_SECONDS)
                .is_ok()
        );
        assert_eq!(
            authenticator.authenticate(&jwt, expires + LEEWAY_SECONDS + 1),
            Err(invalid("token has expired"))
        );
        assert!(
            authenticator
                .authenticate(&jwt, NOW - LEEWAY_SECONDS)
                .is_ok()
        );
        assert_eq!(
            authenticator.authenticate(&jwt, NOW - LEEWAY_SECONDS - 1),
            Err(invalid("token is not valid yet"))
        );
    }

    #[test]
    fn other_issuers_and_non_jwts_are_not_ours() {
        let foreign = TokenIssuer::new(
            SigningKey::from_pem(RSA_PKCS1).unwrap(),
            "https://elsewhere".to_owned(),
        );
        let (jwt, _) = foreign.issue(&token(), NOW).unwrap();
        assert_eq!(authenticator().authenticate(&jwt, NOW), Ok(None));
        assert_eq!(authenticator().authenticate("static-token", NOW), Ok(None));
    }

    #[test]
    fn audiences_must_match() {
        let mut other = token();
        other.audiences = vec!["vault".to_owned()];
        let (jwt, _) = issuer().issue(&other, NOW).unwrap();
        assert_eq!(
            authenticator().authenticate(&jwt, NOW),
            Err(invalid("token audiences are not accepted by this server"))
        );
        let vault = ServiceAccountAuthenticator::new(
            authenticator().keys,
            vec![ISSUER.to_owned()],
            vec!["api".to_owned(), "vault".to_owned()],
        );
        assert!(vault.authenticate(&jwt, NOW).unwrap().is_some());
    }

    #[test]
    fn wrong_keys_and_missing_claims_fail() {
        let other_key =
            TokenIssuer::new(SigningKey::from_pem(EC256_SEC1).unwrap(), ISSUER.to_owned());
        let (jwt, _) = other_key.issue(&token(), NOW).unwrap();
        assert!(matches!(
            authenticator().authenticate(&jwt, NOW),
            Err(AuthnError::ServiceAccount(_))
        ));

        let key = SigningKey::from_pem(RSA_PKCS1).unwrap();
        let base = json!({"iss": ISSUER, "aud": ISSUER, "exp": NOW + 60, "iat": NOW});
        let mut no_cluster = base.clone();
        no_cluster["kubernetes.io"] =
            json!({"namespace": "ns", "serviceaccount": {"name": "a", "uid": "u"}});
        let mut no_private = base.clone();
        no_private["sub"] = json!("system:serviceaccount:ns:a");
        let mut no_exp = no_cluster.clone();
        no_exp["kubernetes.io"]["clusterName"] = json!("c");
        no_exp.as_object_mut().unwrap().remove("exp");
        for (claims, reason) in [
            (no_cluster, "token lacks required claims"),
            (no_private, "token has no kubernetes.io claims"),
            (no_exp, "token has no expiry"),
        ] {
            let jwt = key.sign(&claims).unwrap();
            assert_eq!(
                authenticator().authenticate(&jwt, NOW),
                Err(invalid(reason))
            );
        }
    }
}
