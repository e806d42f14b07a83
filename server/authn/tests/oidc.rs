//! OIDC authentication against a real HTTPS issuer (kcp-testing's `OidcIssuer`): discovery, key
//! caching and rotation, an issuer that is down, and the chain's use of it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::HeaderMap;
use http::header::{AUTHORIZATION, HeaderValue};
use kcp_authn::{
    AUTHENTICATED_GROUP, Authenticated, Authenticators, AuthnError, OidcAuthenticator, OidcConfig,
    UserInfo, Via,
};
use kcp_testing::oidc::OidcIssuer;
use serde_json::{Value, json};

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| elapsed.as_secs() as i64)
        .unwrap_or_default()
}

fn config(issuer: &OidcIssuer) -> OidcConfig {
    OidcConfig {
        issuer_url: issuer.url.clone(),
        client_id: "kcp".to_owned(),
        ca_pem: Some(issuer.ca_pem.clone()),
        groups_claim: Some("groups".to_owned()),
        groups_prefix: Some("oidc:".to_owned()),
        signing_algs: vec!["ES256".to_owned()],
        ..OidcConfig::default()
    }
}

fn claims(issuer: &OidcIssuer, extra: Value) -> Value {
    let mut claims = json!({
        "iss": issuer.url,
        "aud": ["kcp"],
        "sub": "alice-id",
        "email": "alice@example.com",
        "email_verified": true,
        "groups": ["devs", "ops"],
        "iat": now(),
        "exp": now() + 600,
    });
    if let (Some(claims), Value::Object(extra)) = (claims.as_object_mut(), extra) {
        claims.extend(extra);
    }
    claims
}

#[tokio::test]
async fn good_tokens_authenticate_with_kube_username_rules() {
    let issuer = OidcIssuer::start();
    let authenticator = OidcAuthenticator::new(config(&issuer)).unwrap();
    let token = issuer.token(claims(&issuer, json!({})));
    assert_eq!(
        authenticator.authenticate(&token, now()).await,
        Ok(Some(UserInfo {
            name: format!("{}#alice-id", issuer.url),
            groups: vec!["oidc:devs".to_owned(), "oidc:ops".to_owned()],
            ..UserInfo::default()
        }))
    );

    let by_email = OidcAuthenticator::new(OidcConfig {
        username_claim: "email".to_owned(),
        ..config(&issuer)
    })
    .unwrap();
    let user = by_email.authenticate(&token, now()).await.unwrap().unwrap();
    assert_eq!(user.name, "alice@example.com");
    let unverified = issuer.token(claims(&issuer, json!({"email_verified": false})));
    assert!(matches!(
        by_email.authenticate(&unverified, now()).await,
        Err(AuthnError::Oidc(_))
    ));

    let single_group = issuer.token(claims(&issuer, json!({"groups": "admins"})));
    let user = authenticator
        .authenticate(&single_group, now())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(user.groups, vec!["oidc:admins"]);
}

#[tokio::test]
async fn foreign_or_invalid_tokens_are_refused() {
    let issuer = OidcIssuer::start();
    let authenticator = OidcAuthenticator::new(config(&issuer)).unwrap();
    let wrong_aud = issuer.token(claims(&issuer, json!({"aud": "someone-else"})));
    assert!(matches!(
        authenticator.authenticate(&wrong_aud, now()).await,
        Err(AuthnError::Oidc(_))
    ));
    let expired = issuer.token(claims(&issuer, json!({"exp": now() - 1})));
    assert!(matches!(
        authenticator.authenticate(&expired, now()).await,
        Err(AuthnError::Oidc(_))
    ));
    // Another issuer's token, or no JWT at all, is simply not this authenticator's.
    let other = issuer.token(claims(&issuer, json!({"iss": "https://elsewhere"})));
    assert_eq!(authenticator.authenticate(&other, now()).await, Ok(None));
    assert_eq!(authenticator.authenticate("opaque", now()).await, Ok(None));
    // RS256 only (kube's default) refuses the issuer's ES256 tokens.
    let rs256_only = OidcAuthenticator::new(OidcConfig {
        signing_algs: vec!["RS256".to_owned()],
        ..config(&issuer)
    })
    .unwrap();
    let token = issuer.token(claims(&issuer, json!({})));
    assert!(matches!(
        rs256_only.authenticate(&token, now()).await,
        Err(AuthnError::Oidc(_))
    ));
}

#[tokio::test]
async fn rotated_keys_are_fetched() {
    let issuer = OidcIssuer::start();
    let authenticator = OidcAuthenticator::new(config(&issuer))
        .unwrap()
        .with_refresh_interval(Duration::from_millis(200));
    let before = issuer.token(claims(&issuer, json!({})));
    assert!(
        authenticator
            .authenticate(&before, now())
            .await
            .unwrap()
            .is_some()
    );

    let first_kid = issuer.current_key_id();
    issuer.rotate_key();
    assert_ne!(issuer.current_key_id(), first_kid);
    let after = issuer.token(claims(&issuer, json!({})));
    tokio::time::sleep(Duration::from_millis(250)).await;
    assert!(
        authenticator
            .authenticate(&after, now())
            .await
            .unwrap()
            .is_some()
    );
    // The old key is still published and still cached.
    assert!(
        authenticator
            .authenticate(&before, now())
            .await
            .unwrap()
            .is_some()
    );
}

#[tokio::test]
async fn unknown_keys_are_not_refetched_within_the_interval() {
    let issuer = OidcIssuer::start();
    let authenticator = OidcAuthenticator::new(config(&issuer)).unwrap();
    let before = issuer.token(claims(&issuer, json!({})));
    assert!(
        authenticator
            .authenticate(&before, now())
            .await
            .unwrap()
            .is_some()
    );
    issuer.rotate_key();
    let after = issuer.token(claims(&issuer, json!({})));
    assert!(matches!(
        authenticator.authenticate(&after, now()).await,
        Err(AuthnError::Oidc(_))
    ));
}

#[tokio::test]
async fn an_issuer_down_at_start_is_used_once_it_is_up() {
    let mut issuer = OidcIssuer::start();
    issuer.stop();
    let authenticator = OidcAuthenticator::new(config(&issuer)).unwrap();
    let token = issuer.token(claims(&issuer, json!({})));
    assert!(matches!(
        authenticator.authenticate(&token, now()).await,
        Err(AuthnError::OidcUnavailable(_))
    ));
    issuer.resume();
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert!(
        authenticator
            .authenticate(&token, now())
            .await
            .unwrap()
            .is_some()
    );
}

#[tokio::test]
async fn discovery_must_name_the_configured_issuer() {
    let issuer = OidcIssuer::start();
    let authenticator = OidcAuthenticator::new(OidcConfig {
        issuer_url: format!("{}/", issuer.url),
        ..config(&issuer)
    })
    .unwrap();
    let token = issuer.token(claims(&issuer, json!({"iss": format!("{}/", issuer.url)})));
    assert!(matches!(
        authenticator.authenticate(&token, now()).await,
        Err(AuthnError::OidcUnavailable(_))
    ));
}

#[tokio::test]
async fn the_chain_falls_through_to_oidc() {
    let issuer = OidcIssuer::start();
    let authenticators = Authenticators {
        oidc: Some(OidcAuthenticator::new(config(&issuer)).unwrap()),
        anonymous: true,
        ..Authenticators::default()
    };
    let mut headers = HeaderMap::new();
    let token = issuer.token(claims(&issuer, json!({"groups": AUTHENTICATED_GROUP})));
    headers.insert(
        AUTHORIZATION,
        HeaderValue::from_str(&format!("Bearer {token}")).unwrap(),
    );
    let outcome = authenticators.authenticate(&[], &mut headers, now()).await;
    let Ok(Authenticated::User(user, Via::Oidc)) = outcome else {
        panic!("OIDC should authenticate: {outcome:?}");
    };
    assert_eq!(
        user.groups,
        vec!["oidc:system:authenticated", AUTHENTICATED_GROUP]
    );

    let foreign = issuer.token(claims(&issuer, json!({"iss": "https://elsewhere"})));
    headers.insert(
        AUTHORIZATION,
        HeaderValue::from_str(&format!("Bearer {foreign}")).unwrap(),
    );
    assert_eq!(
        authenticators.authenticate(&[], &mut headers, now()).await,
        Err(AuthnError::TokenNotAccepted)
    );
}
