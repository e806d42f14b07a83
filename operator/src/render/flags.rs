//! Flag fragments shared by several components: etcd, authentication, audit, authorization and
//! verbosity. Each returns the arguments together with the mounts the arguments point into.

use crate::api::common::{AuditSpec, AuthSpec, AuthorizationSpec, LoggingSpec};
use crate::naming::{Certificate, Names};
use crate::paths::{self, file};
use crate::validate::Etcd;

use super::pod::{Fragment, Mount};

pub(super) fn flag(name: &str, value: impl std::fmt::Display) -> String {
    format!("--{name}={value}")
}

fn optional_flag(args: &mut Vec<String>, name: &str, value: Option<impl std::fmt::Display>) {
    if let Some(value) = value {
        args.push(flag(name, value));
    }
}

/// `-v=<level>` when a non-zero verbosity is asked for.
pub fn verbosity(logging: Option<&LoggingSpec>) -> Vec<String> {
    match logging.and_then(|l| l.level) {
        Some(level) if level != 0 => vec![format!("-v={level}")],
        _ => Vec::new(),
    }
}

/// `--etcd-*` flags for a kcp server. `owner` names the managed etcd when there is one.
pub fn etcd(etcd: &Etcd, owner: &Names) -> Fragment {
    let client_cert = |secret: String| {
        (
            vec![
                flag(
                    "etcd-certfile",
                    file(paths::ETCD_CLIENT_CERT_DIR, "tls.crt"),
                ),
                flag("etcd-keyfile", file(paths::ETCD_CLIENT_CERT_DIR, "tls.key")),
                flag("etcd-cafile", file(paths::ETCD_CLIENT_CERT_DIR, "ca.crt")),
            ],
            vec![Mount::secret(
                "etcd-client-cert",
                secret,
                paths::ETCD_CLIENT_CERT_DIR,
            )],
        )
    };
    let mut fragment = Fragment::default();
    match etcd {
        Etcd::External {
            endpoints,
            prefix,
            tls_secret,
        } => {
            fragment
                .args
                .push(flag("etcd-servers", endpoints.join(",")));
            optional_flag(&mut fragment.args, "etcd-prefix", prefix.as_ref());
            if let Some(secret) = tls_secret {
                let (args, mounts) = client_cert(secret.clone());
                fragment.args.extend(args);
                fragment.mounts.extend(mounts);
            }
        }
        Etcd::Managed(managed) => {
            let endpoints: Vec<String> = (0..managed.replicas)
                .map(|ordinal| owner.etcd_client_url(ordinal))
                .collect();
            fragment
                .args
                .push(flag("etcd-servers", endpoints.join(",")));
            optional_flag(&mut fragment.args, "etcd-prefix", managed.prefix.as_ref());
            let (args, mounts) = client_cert(owner.certificate_secret(Certificate::EtcdClient));
            fragment.args.extend(args);
            fragment.mounts.extend(mounts);
        }
        Etcd::Embedded => {}
    }
    fragment
}

/// OIDC, token webhook and token file authentication.
pub fn authentication(auth: Option<&AuthSpec>) -> Fragment {
    let mut fragment = Fragment::default();
    let Some(auth) = auth else {
        return fragment;
    };
    if let Some(oidc) = &auth.oidc {
        let args = &mut fragment.args;
        args.push(flag("oidc-issuer-url", &oidc.issuer_url));
        args.push(flag("oidc-client-id", &oidc.client_id));
        optional_flag(args, "oidc-groups-claim", oidc.groups_claim.as_ref());
        optional_flag(args, "oidc-username-claim", oidc.username_claim.as_ref());
        optional_flag(args, "oidc-username-prefix", oidc.username_prefix.as_ref());
        optional_flag(args, "oidc-groups-prefix", oidc.groups_prefix.as_ref());
        if let Some(ca) = &oidc.ca_file_ref {
            let key = ca.key.clone().unwrap_or_else(|| "ca.crt".into());
            args.push(flag("oidc-ca-file", file(paths::OIDC_CA_DIR, &key)));
            fragment.mounts.push(Mount::secret(
                "oidc-ca-file",
                ca.name.clone(),
                paths::OIDC_CA_DIR,
            ));
        }
    }
    if let Some(webhook) = &auth.webhook {
        optional_flag(
            &mut fragment.args,
            "authentication-token-webhook-cache-ttl",
            webhook.cache_authentication_ttl.as_ref(),
        );
        optional_flag(
            &mut fragment.args,
            "authentication-token-webhook-version",
            webhook.version.as_ref(),
        );
        fragment.args.push(flag(
            "authentication-token-webhook-config-file",
            file(paths::AUTHENTICATION_WEBHOOK_DIR, paths::KUBECONFIG_FILE),
        ));
        fragment.mounts.push(Mount::secret(
            "authentication-webhook-config",
            webhook.config_secret_name.clone(),
            paths::AUTHENTICATION_WEBHOOK_DIR,
        ));
    }
    if let Some(token_file) = &auth.token_auth_file {
        let key = token_file.key.clone().unwrap_or_else(|| "token.csv".into());
        fragment
            .args
            .push(flag("token-auth-file", file(paths::TOKEN_AUTH_DIR, &key)));
        fragment.mounts.push(Mount::secret(
            "token-auth-file",
            token_file.secret_name.clone(),
            paths::TOKEN_AUTH_DIR,
        ));
    }
    fragment
}

/// Audit policy and audit webhook. Unlike upstream, the truncation flag is spelled as kube
/// defines it (`--audit-webhook-truncate-max-event-size`).
pub fn audit(audit: Option<&AuditSpec>) -> Fragment {
    let mut fragment = Fragment::default();
    let Some(audit) = audit else {
        return fragment;
    };
    if let Some(policy) = &audit.policy {
        let key = policy
            .config_map
            .key
            .clone()
            .unwrap_or_else(|| "policy.yaml".into());
        fragment.args.push(flag(
            "audit-policy-file",
            file(paths::AUDIT_POLICY_DIR, &key),
        ));
        fragment.mounts.push(Mount::config_map(
            "audit-policy",
            policy.config_map.name.clone(),
            paths::AUDIT_POLICY_DIR,
        ));
    }
    if let Some(webhook) = &audit.webhook {
        let args = &mut fragment.args;
        optional_flag(
            args,
            "audit-webhook-batch-buffer-size",
            webhook.batch_buffer_size,
        );
        optional_flag(args, "audit-webhook-batch-max-size", webhook.batch_max_size);
        optional_flag(
            args,
            "audit-webhook-batch-max-wait",
            webhook.batch_max_wait.as_ref(),
        );
        optional_flag(
            args,
            "audit-webhook-batch-throttle-burst",
            webhook.batch_throttle_burst,
        );
        optional_flag(
            args,
            "audit-webhook-batch-throttle-enable",
            webhook.batch_throttle_enable,
        );
        optional_flag(
            args,
            "audit-webhook-batch-throttle-qps",
            webhook.batch_throttle_qps.as_ref(),
        );
        optional_flag(
            args,
            "audit-webhook-initial-backoff",
            webhook.initial_backoff.as_ref(),
        );
        optional_flag(
            args,
            "audit-webhook-mode",
            webhook.mode.as_ref().filter(|mode| !mode.is_empty()),
        );
        optional_flag(
            args,
            "audit-webhook-truncate-enabled",
            webhook.truncate_enabled,
        );
        optional_flag(
            args,
            "audit-webhook-truncate-max-batch-size",
            webhook.truncate_max_batch_size,
        );
        optional_flag(
            args,
            "audit-webhook-truncate-max-event-size",
            webhook.truncate_max_event_size,
        );
        optional_flag(args, "audit-webhook-version", webhook.version.as_ref());
        if let Some(secret) = &webhook.config_secret_name {
            args.push(flag(
                "audit-webhook-config-file",
                file(paths::AUDIT_WEBHOOK_DIR, paths::KUBECONFIG_FILE),
            ));
            fragment.mounts.push(Mount::secret(
                "audit-webhook-config",
                secret.clone(),
                paths::AUDIT_WEBHOOK_DIR,
            ));
        }
    }
    fragment
}

/// Authorization webhook.
pub fn authorization(authorization: Option<&AuthorizationSpec>) -> Fragment {
    let mut fragment = Fragment::default();
    let Some(webhook) = authorization.and_then(|a| a.webhook.as_ref()) else {
        return fragment;
    };
    let args = &mut fragment.args;
    if !webhook.allow_paths.is_empty() {
        args.push(flag(
            "authorization-always-allow-paths",
            webhook.allow_paths.join(","),
        ));
    }
    optional_flag(
        args,
        "authorization-webhook-cache-authorized-ttl",
        webhook.cache_authorized_ttl.as_ref(),
    );
    optional_flag(
        args,
        "authorization-webhook-cache-unauthorized-ttl",
        webhook.cache_unauthorized_ttl.as_ref(),
    );
    optional_flag(
        args,
        "authorization-webhook-version",
        webhook.version.as_ref(),
    );
    if let Some(secret) = &webhook.config_secret_name {
        args.push(flag(
            "authorization-webhook-config-file",
            file(paths::AUTHORIZATION_WEBHOOK_DIR, paths::KUBECONFIG_FILE),
        ));
        fragment.mounts.push(Mount::secret(
            "authorization-webhook-config",
            secret.clone(),
            paths::AUTHORIZATION_WEBHOOK_DIR,
        ));
    }
    fragment
}

/// Front-proxy group filtering. Each group is its own flag occurrence, so a group list is never
/// collapsed into one quoted CSV value (upstream bug).
pub fn group_filters(auth: Option<&AuthSpec>) -> Vec<String> {
    let Some(auth) = auth else {
        return Vec::new();
    };
    let drop = auth
        .drop_groups
        .iter()
        .map(|group| flag("authentication-drop-groups", group));
    let pass_on = auth
        .pass_on_groups
        .iter()
        .map(|group| flag("authentication-pass-on-groups", group));
    drop.chain(pass_on).collect()
}
