//! The one list of `kcp start` flags that are accepted and validated but whose features are not
//! built yet.
//!
//! kcp-operator renders all of them for every shard, so refusing them would keep its Deployments
//! from starting; ignoring them silently would hide that, say, OIDC is not enforced. `kcp start`
//! names the given ones in a single log line instead. Each later feature deletes its flags here.

use std::collections::BTreeSet;

/// Long names (without `--`) of flags whose features are not active yet.
pub(super) const NOT_YET_ACTIVE: &[&str] = &[
    // audit
    "audit-log-path",
    "audit-policy-file",
    "audit-webhook-batch-buffer-size",
    "audit-webhook-batch-max-size",
    "audit-webhook-batch-max-wait",
    "audit-webhook-batch-throttle-burst",
    "audit-webhook-batch-throttle-enable",
    "audit-webhook-batch-throttle-qps",
    "audit-webhook-config-file",
    "audit-webhook-initial-backoff",
    "audit-webhook-mode",
    "audit-webhook-truncate-enabled",
    "audit-webhook-truncate-max-batch-size",
    "audit-webhook-truncate-max-event-size",
    "audit-webhook-version",
    // sharding, cache server, virtual workspaces, mounts
    "mount-proxy-client-cert-file",
    "mount-proxy-client-key-file",
    "shard-client-cert-file",
    "shard-client-key-file",
    "shard-kubeconfig-file",
    "shard-virtual-workspace-ca-file",
    // controllers and tenancy
    "enable-home-workspaces",
    "feature-gates",
    // serving details not wired into the TLS listener yet
    "cert-dir",
    "shutdown-delay-duration",
    "tls-cipher-suites",
    "tls-min-version",
];

/// The inactive flags among `given` (long names), in the order of [`NOT_YET_ACTIVE`].
pub(super) fn given_but_inactive(given: &BTreeSet<String>) -> Vec<&'static str> {
    NOT_YET_ACTIVE
        .iter()
        .copied()
        .filter(|flag| given.contains(*flag))
        .collect()
}
