//! The authenticator chain: every configured authenticator, asked in a fixed order, first success
//! wins.
//!
//! Order: client certificate, static token file, service-account token, front-proxy request
//! headers, OIDC, a TokenReview of another server (delegated authentication). Like kube's union authenticator, an authenticator's error does not stop the
//! others (a stale client certificate next to a good token still authenticates), but when nobody
//! succeeds the first error is the answer. A bearer token nobody accepts is an error too: a bad
//! token must never be downgraded to the anonymous user, which is only for requests that carry no
//! credentials at all.

use http::HeaderMap;
use http::header::AUTHORIZATION;
use rustls_pki_types::CertificateDer;

use crate::error::AuthnError;
use crate::oidc::OidcAuthenticator;
use crate::request_header::RequestHeaderAuthenticator;
use crate::service_account::{AuthenticatedServiceAccount, ServiceAccountAuthenticator};
use crate::token_file::TokenFile;
use crate::token_review::TokenReviewAuthenticator;
use crate::user::UserInfo;
use crate::x509::CertificateAuthenticator;

/// Which authenticator vouched for a user, for logs and metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    ClientCertificate,
    TokenFile,
    RequestHeader,
    Oidc,
    TokenReview,
}

impl Via {
    pub fn as_str(self) -> &'static str {
        match self {
            Via::ClientCertificate => "x509",
            Via::TokenFile => "token-file",
            Via::RequestHeader => "request-header",
            Via::Oidc => "oidc",
            Via::TokenReview => "webhook",
        }
    }
}

/// The outcome of a successful authentication.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Authenticated {
    User(UserInfo, Via),
    /// Service accounts keep their token claims: the server still has to check them against
    /// storage and the request's logical cluster.
    ServiceAccount(AuthenticatedServiceAccount),
    Anonymous,
}

impl Authenticated {
    /// The user, whichever way it authenticated.
    pub fn into_user(self) -> UserInfo {
        match self {
            Authenticated::User(user, _) => user,
            Authenticated::ServiceAccount(account) => account.user,
            Authenticated::Anonymous => UserInfo::anonymous(),
        }
    }
}

/// Every configured authenticator; `None` means the corresponding flags were not given.
#[derive(Debug, Default)]
pub struct Authenticators {
    pub x509: Option<CertificateAuthenticator>,
    pub token_file: Option<TokenFile>,
    pub service_accounts: Option<ServiceAccountAuthenticator>,
    pub request_header: Option<RequestHeaderAuthenticator>,
    pub oidc: Option<OidcAuthenticator>,
    /// Delegated: bearer tokens reviewed by another server.
    pub token_review: Option<TokenReviewAuthenticator>,
    pub anonymous: bool,
}

/// The bearer token of `Authorization: Bearer <token>` (scheme case-insensitive, value trimmed,
/// token up to the next space as kube reads it): `None` without such a header or with another
/// scheme, an error for a missing or empty token.
fn bearer_token(headers: &HeaderMap) -> Option<Result<String, AuthnError>> {
    let value = headers.get(AUTHORIZATION)?.to_str().ok()?.trim();
    let mut parts = value.splitn(3, ' ');
    let scheme = parts.next()?;
    let token = parts.next().unwrap_or_default();
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    Some(if token.is_empty() {
        Err(AuthnError::EmptyBearerToken)
    } else {
        Ok(token.to_owned())
    })
}

/// Remembers the first error while the chain goes on.
#[derive(Default)]
struct FirstError(Option<AuthnError>);

impl FirstError {
    fn check<T>(&mut self, result: Result<Option<T>, AuthnError>) -> Option<T> {
        match result {
            Ok(found) => found,
            Err(error) => {
                tracing::debug!(%error, "authenticator rejected the request");
                self.0.get_or_insert(error);
                None
            }
        }
    }
}

impl Authenticators {
    /// Authenticates one request: its verified-or-not client `chain` (the TLS layer requests but
    /// does not check certificates) and its `headers`. Front-proxy headers are removed from
    /// `headers` unless they are what authenticated the request.
    pub async fn authenticate(
        &self,
        chain: &[CertificateDer<'_>],
        headers: &mut HeaderMap,
        now: i64,
    ) -> Result<Authenticated, AuthnError> {
        let outcome = self.first_success(chain, headers, now).await;
        if let Some(request_header) = &self.request_header
            && !matches!(outcome, Ok(Authenticated::User(_, Via::RequestHeader)))
        {
            request_header.strip(headers);
        }
        outcome.map(|authenticated| match authenticated {
            Authenticated::User(mut user, via) => {
                user.add_authenticated_group();
                Authenticated::User(user, via)
            }
            Authenticated::ServiceAccount(mut account) => {
                account.user.add_authenticated_group();
                Authenticated::ServiceAccount(account)
            }
            Authenticated::Anonymous => Authenticated::Anonymous,
        })
    }

    async fn first_success(
        &self,
        chain: &[CertificateDer<'_>],
        headers: &HeaderMap,
        now: i64,
    ) -> Result<Authenticated, AuthnError> {
        let mut errors = FirstError::default();
        if let Some(x509) = &self.x509
            && let Some(user) = errors.check(x509.authenticate(chain))
        {
            return Ok(Authenticated::User(user, Via::ClientCertificate));
        }

        let bearer = bearer_token(headers);
        let token = bearer
            .clone()
            .and_then(|token| errors.check(token.map(Some)));
        if let Some(token) = &token {
            if let Some(user) = self
                .token_file
                .as_ref()
                .and_then(|file| file.authenticate(token))
            {
                return Ok(Authenticated::User(user, Via::TokenFile));
            }
            if let Some(accounts) = &self.service_accounts
                && let Some(account) = errors.check(accounts.authenticate(token, now))
            {
                return Ok(Authenticated::ServiceAccount(account));
            }
        }

        if let Some(request_header) = &self.request_header
            && let Some(user) = errors.check(request_header.authenticate(chain, headers))
        {
            return Ok(Authenticated::User(user, Via::RequestHeader));
        }

        if let (Some(oidc), Some(token)) = (&self.oidc, &token)
            && let Some(user) = errors.check(oidc.authenticate(token, now).await)
        {
            return Ok(Authenticated::User(user, Via::Oidc));
        }

        if let (Some(review), Some(token)) = (&self.token_review, &token)
            && let Some(user) = errors.check(review.authenticate(token).await)
        {
            return Ok(Authenticated::User(user, Via::TokenReview));
        }

        match (errors.0, bearer) {
            (Some(error), _) => Err(error),
            (None, Some(_)) => Err(AuthnError::TokenNotAccepted),
            (None, None) if self.anonymous => Ok(Authenticated::Anonymous),
            (None, None) => Err(AuthnError::Unauthorized),
        }
    }
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;
    use crate::keys::SigningKey;
    use crate::keys::tests::EC256_SEC1;
    use crate::request_header::RequestHeaderConfig;
    use crate::service_account::{ServiceAccountToken, TokenIssuer};
    use crate::test_pki::Ca;
    use crate::user::AUTHENTICATED_GROUP;

    const ISSUER: &str = "https://kcp.example";
    const NOW: i64 = 1_800_000_000;

    struct Fixture {
        client_ca: Ca,
        proxy_ca: Ca,
        sa_token: String,
    }

    fn fixture() -> (Fixture, Authenticators) {
        let client_ca = Ca::new("client-ca");
        let proxy_ca = Ca::new("front-proxy-ca");
        let key = SigningKey::from_pem(EC256_SEC1).unwrap();
        let verifying = key.verifying_key();
        let (sa_token, _) = TokenIssuer::new(key, ISSUER.to_owned())
            .issue(
                &ServiceAccountToken {
                    cluster: "root".to_owned(),
                    namespace: "default".to_owned(),
                    name: "default".to_owned(),
                    uid: "sa-uid".to_owned(),
                    audiences: vec![ISSUER.to_owned()],
                    expiration_seconds: 600,
                    bound_object: None,
                },
                NOW,
            )
            .unwrap();
        let authenticators = Authenticators {
            x509: Some(CertificateAuthenticator::from_pem(&client_ca.pem()).unwrap()),
            token_file: Some(
                TokenFile::parse("static,alice,1,\"devs,system:authenticated\"\n").unwrap(),
            ),
            service_accounts: Some(ServiceAccountAuthenticator::new(
                vec![verifying],
                vec![ISSUER.to_owned()],
                Vec::new(),
            )),
            request_header: Some(
                RequestHeaderAuthenticator::new(RequestHeaderConfig {
                    ca_pem: proxy_ca.pem(),
                    allowed_names: vec!["front-proxy".to_owned()],
                    username_headers: vec!["X-Remote-User".to_owned()],
                    group_headers: vec!["X-Remote-Group".to_owned()],
                    extra_headers_prefixes: vec!["X-Remote-Extra-".to_owned()],
                    uid_headers: Vec::new(),
                })
                .unwrap(),
            ),
            oidc: None,
            token_review: None,
            anonymous: true,
        };
        (
            Fixture {
                client_ca,
                proxy_ca,
                sa_token,
            },
            authenticators,
        )
    }

    fn bearer(token: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(AUTHORIZATION, HeaderValue::from_str(token).unwrap());
        headers
    }

    fn run(
        authenticators: &Authenticators,
        chain: &[CertificateDer<'_>],
        headers: &mut HeaderMap,
    ) -> Result<Authenticated, AuthnError> {
        run_at(authenticators, chain, headers, NOW)
    }

    fn run_at(
        authenticators: &Authenticators,
        chain: &[CertificateDer<'_>],
        headers: &mut HeaderMap,
        now: i64,
    ) -> Result<Authenticated, AuthnError> {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(authenticators.authenticate(chain, headers, now))
    }

    #[test]
    fn client_certificates_come_first() {
        let (fixture, authenticators) = fixture();
        let mut headers = bearer("Bearer static");
        let outcome = run(
            &authenticators,
            &[fixture.client_ca.client("carol", &["ops"])],
            &mut headers,
        );
        assert_eq!(
            outcome,
            Ok(Authenticated::User(
                UserInfo {
                    name: "carol".to_owned(),
                    groups: vec!["ops".to_owned(), AUTHENTICATED_GROUP.to_owned()],
                    ..UserInfo::default()
                },
                Via::ClientCertificate
            ))
        );
    }

    #[test]
    fn static_tokens_come_before_service_accounts() {
        let (fixture, mut authenticators) = fixture();
        let mut headers = bearer(&format!("bearer {}", fixture.sa_token));
        let Ok(Authenticated::ServiceAccount(account)) = run(&authenticators, &[], &mut headers)
        else {
            panic!("service account token should authenticate");
        };
        assert_eq!(account.user.name, "system:serviceaccount:default:default");
        assert_eq!(
            account.user.groups.last().map(String::as_str),
            Some(AUTHENTICATED_GROUP)
        );

        let shadowing = format!("{},shadow,2\n", fixture.sa_token);
        authenticators.token_file = Some(TokenFile::parse(&shadowing).unwrap());
        let Ok(Authenticated::User(user, Via::TokenFile)) = run(&authenticators, &[], &mut headers)
        else {
            panic!("token file should win");
        };
        assert_eq!(user.name, "shadow");
    }

    #[test]
    fn authenticated_group_is_added_once() {
        let (_, authenticators) = fixture();
        let user = run(&authenticators, &[], &mut bearer("Bearer static"))
            .unwrap()
            .into_user();
        assert_eq!(user.groups, vec!["devs", AUTHENTICATED_GROUP]);
    }

    #[test]
    fn anonymous_only_without_credentials() {
        let (_, mut authenticators) = fixture();
        assert_eq!(
            run(&authenticators, &[], &mut HeaderMap::new()),
            Ok(Authenticated::Anonymous)
        );
        assert_eq!(
            run(&authenticators, &[], &mut bearer("Basic abc")),
            Ok(Authenticated::Anonymous)
        );
        assert_eq!(
            run(&authenticators, &[], &mut bearer("Bearer unknown")),
            Err(AuthnError::TokenNotAccepted)
        );
        assert_eq!(
            run(&authenticators, &[], &mut bearer("Bearer ")),
            Err(AuthnError::EmptyBearerToken)
        );
        authenticators.anonymous = false;
        assert_eq!(
            run(&authenticators, &[], &mut HeaderMap::new()),
            Err(AuthnError::Unauthorized)
        );
        assert_eq!(Authenticated::Anonymous.into_user(), UserInfo::anonymous());
    }

    #[test]
    fn rejected_tokens_are_errors_even_with_a_later_chance() {
        let (fixture, authenticators) = fixture();
        let mut headers = bearer(&format!("Bearer {}", fixture.sa_token));
        let expired = run_at(&authenticators, &[], &mut headers, NOW + 10_000);
        assert!(matches!(expired, Err(AuthnError::ServiceAccount(_))));
        // An expired client certificate does not hide a good token...
        let outcome = run(
            &authenticators,
            &[fixture.client_ca.expired_client("carol")],
            &mut bearer("Bearer static"),
        );
        assert!(matches!(
            outcome,
            Ok(Authenticated::User(_, Via::TokenFile))
        ));
        // ...but alone it fails, rather than falling back to anonymous.
        let outcome = run(
            &authenticators,
            &[fixture.client_ca.expired_client("carol")],
            &mut HeaderMap::new(),
        );
        assert!(matches!(outcome, Err(AuthnError::Certificate(_))));
    }

    #[test]
    fn request_headers_are_kept_only_when_they_authenticated() {
        let (fixture, authenticators) = fixture();
        let proxied = || {
            let mut headers = HeaderMap::new();
            headers.insert("x-remote-user", HeaderValue::from_static("dave"));
            headers.insert("x-remote-group", HeaderValue::from_static("eng"));
            headers.insert("x-remote-extra-a%2fb", HeaderValue::from_static("c"));
            headers
        };
        let mut headers = proxied();
        let outcome = run(
            &authenticators,
            &[fixture.proxy_ca.client("front-proxy", &[])],
            &mut headers,
        );
        let Ok(Authenticated::User(user, Via::RequestHeader)) = outcome else {
            panic!("front proxy should authenticate: {outcome:?}");
        };
        assert_eq!(user.groups, vec!["eng", AUTHENTICATED_GROUP]);
        assert_eq!(user.extra["a/b"], vec!["c"]);
        assert_eq!(headers.len(), 3);

        for chain in [
            vec![fixture.client_ca.client("front-proxy", &[])],
            vec![fixture.proxy_ca.client("intruder", &[])],
        ] {
            let mut headers = proxied();
            let outcome = run(&authenticators, &chain, &mut headers);
            assert!(!matches!(
                outcome,
                Ok(Authenticated::User(_, Via::RequestHeader))
            ));
            assert!(headers.is_empty(), "headers must be stripped: {headers:?}");
        }
    }
}
