//! Who is asking: the [`kcp_authn`] chain (client certificate, static token, service-account
//! token, front-proxy headers, OIDC, else anonymous) plus the checks only the server can make on a
//! service-account token: that it names a valid logical cluster and (with
//! `--service-account-lookup`) that its ServiceAccount, and the Secret it is bound to, still exist
//! there with the UIDs it names. Every failure is the same 401: the reason goes to the log, not to
//! the client.
//!
//! A token used in another logical cluster than its own is authenticated, as upstream kcp's: the
//! authorizers of that cluster see a foreign identity ([`kcp_rbac::as_seen_in`]). The lookup
//! reads this shard's store when the shard holds the token's logical cluster; for one it does
//! not hold it asks through `--external-logical-cluster-admin-kubeconfig` (the front-proxy, which
//! routes to the shard that holds it), as upstream's shard does, with kept answers
//! ([`kcp_authn::ServiceAccountLookup`]); without that kubeconfig such a token is refused.

use jiff::Timestamp;
use kcp_apimachinery::ApiError;
use kcp_authn::{
    Authenticated, AuthenticatedServiceAccount, Authenticators, BoundObjectKind,
    ServiceAccountLookup, TokenIssuer, cluster_url,
};
use rustls_pki_types::CertificateDer;

pub use kcp_authn::{ANONYMOUS_USER, AUTHENTICATED_GROUP, UNAUTHENTICATED_GROUP, UserInfo};

use kcp_registry::LogicalClusterName;
use kcp_registry::store::{Location, RestStore};

/// How the server authenticates requests and issues service-account tokens.
pub struct Authentication {
    pub authenticators: Authenticators,
    /// Signs `serviceaccounts/<name>/token` answers; `None` when there is no signing key.
    pub token_issuer: Option<TokenIssuer>,
    /// The audiences tokens are issued for when a TokenRequest names none (`--api-audiences`,
    /// else the issuer).
    pub api_audiences: Vec<String>,
    /// `--service-account-lookup`.
    pub service_account_lookup: bool,
    /// Where the lookup asks for logical clusters this shard does not hold.
    pub foreign_service_accounts: Option<ForeignServiceAccounts>,
}

/// The lookup of service accounts of logical clusters held elsewhere
/// (`--external-logical-cluster-admin-kubeconfig`).
pub struct ForeignServiceAccounts {
    pub lookup: ServiceAccountLookup,
    /// The base URL that kubeconfig names (the front-proxy's).
    pub base_url: String,
}

/// The user of a request, or 401.
pub async fn authenticate(
    authentication: &Authentication,
    store: &RestStore,
    chain: &[CertificateDer<'_>],
    headers: &mut http::HeaderMap,
) -> Result<UserInfo, ApiError> {
    let now = Timestamp::now().as_second();
    let refused = |reason: &dyn std::fmt::Display| {
        tracing::debug!(%reason, "authentication failed");
        ApiError::unauthorized("Unauthorized")
    };
    match authentication
        .authenticators
        .authenticate(chain, headers, now)
        .await
    {
        Ok(Authenticated::User(user, _)) => Ok(user),
        Ok(Authenticated::Anonymous) => Ok(UserInfo::anonymous()),
        Ok(Authenticated::ServiceAccount(account)) => {
            check_service_account(authentication, store, &account)
                .await
                .map_err(|reason| refused(&reason))?;
            Ok(account.user)
        }
        Err(error) => Err(refused(&error)),
    }
}

/// A service-account token is good (with lookup) only while what it names exists.
async fn check_service_account(
    authentication: &Authentication,
    store: &RestStore,
    account: &AuthenticatedServiceAccount,
) -> Result<(), String> {
    let token = &account.token;
    let Some(cluster) = LogicalClusterName::parse(&token.cluster) else {
        return Err(format!(
            "token names an invalid logical cluster {:?}",
            token.cluster
        ));
    };
    if !authentication.service_account_lookup {
        return Ok(());
    }
    let at = Location {
        cluster: &cluster,
        namespace: Some(&token.namespace),
    };
    let exists = |plural: &'static str, name: String, uid: String| async move {
        let registry = store.registry();
        let Some(rt) = registry.builtin_type("", "v1", plural) else {
            return Err(format!("{plural} are not served"));
        };
        match store.get(&rt, at, &name).await {
            Ok(stored) if kcp_apimachinery::meta::uid(&stored.object) == Some(uid.as_str()) => {
                Ok(())
            }
            Ok(_) => Err(format!(
                "{plural}/{name} was recreated since the token was issued"
            )),
            Err(e) if e.code == 404 => Err(format!("{plural}/{name} no longer exists")),
            Err(e) => Err(format!("looking up {plural}/{name}: {}", e.message)),
        }
    };
    let local = exists("serviceaccounts", token.name.clone(), token.uid.clone()).await;
    if local.is_err()
        && let Some(foreign) = &authentication.foreign_service_accounts
        && !holds(store, &cluster).await
    {
        let at_its_shard = || Some(cluster_url(&foreign.base_url, &token.cluster));
        return foreign
            .lookup
            .check(token, at_its_shard)
            .await
            .map_err(|error| error.to_string());
    }
    local?;
    if let Some(bound) = &token.bound_object
        && bound.kind == BoundObjectKind::Secret
    {
        exists("secrets", bound.name.clone(), bound.uid.clone()).await?;
    }
    Ok(())
}

/// Whether this shard holds `cluster` (its LogicalCluster object is here).
async fn holds(store: &RestStore, cluster: &LogicalClusterName) -> bool {
    let registry = store.registry();
    let Some(rt) = registry.builtin_type(
        kcp_tenancy::logical_cluster::GROUP,
        "v1alpha1",
        kcp_tenancy::logical_cluster::RESOURCE,
    ) else {
        return false;
    };
    let at = Location {
        cluster,
        namespace: None,
    };
    store
        .get(&rt, at, kcp_tenancy::logical_cluster::NAME)
        .await
        .is_ok()
}

/// The user as the authorizers see it.
pub fn rbac_user(user: &UserInfo) -> kcp_rbac::User {
    kcp_rbac::User {
        name: user.name.clone(),
        groups: user.groups.clone(),
        extra: user.extra.clone(),
    }
}
