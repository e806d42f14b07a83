//! The workspace content authorizer: may this user enter this logical cluster at all?
//!
//! Kubernetes grants `system:authenticated` a few things everywhere (discovery, self reviews), so
//! without a gate every workspace would be visible to every user. Upstream kcp puts this
//! authorizer before RBAC: a request into a logical cluster only reaches RBAC when the cluster
//! exists and is in a phase that serves content, and the user holds non-resource verb `access`
//! on `/` there (through the cluster's own RBAC or the bootstrap policy; for another shard's
//! cluster, the RBAC that shard replicated into the cache). Whatever its reason, a
//! refusal reaches the client anonymized as [`WORKSPACE_ACCESS_NOT_PERMITTED`], the reason the
//! front-proxy gives for a path it does not know (upstream's shards say `access denied` there,
//! which tells a client that the workspace exists); the reasons here are for audit and logs.

use kcp_apimachinery::gofmt::quote;

use crate::paths::SYSTEM_PREFIX;
use crate::workspace::Phase;

/// The reason the content authorizer, the front proxy and the home-workspace handler give when a
/// workspace cannot be entered (or does not exist: the answers are the same).
pub const WORKSPACE_ACCESS_NOT_PERMITTED: &str = "workspace access not permitted";
/// Members pass the gate and are decided by RBAC alone (the workspace scheduler).
pub const LOGICAL_CLUSTER_ADMIN_GROUP: &str = "system:kcp:logical-cluster-admin";
/// Synthetic group prefixes the lifecycle virtual workspaces add after authorizing a request.
pub const INITIALIZER_GROUP_PREFIX: &str = "system:kcp:initializer:";
pub const TERMINATOR_GROUP_PREFIX: &str = "system:kcp:terminator:";

/// What the authorizer decides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Allowed without asking RBAC.
    Allow(String),
    /// Refused.
    Deny(String),
    /// No opinion: the request is refused unless a later authorizer (the webhook) allows it.
    NoOpinion(String),
    /// The gate is passed: RBAC (and what follows it) decides, as `delegating due to <reason>`.
    Delegate(String),
}

/// One request as the authorizer sees it.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// The target logical cluster's name; empty for requests without one (and for `*`).
    pub cluster: &'a str,
    /// Its LogicalCluster's `status.phase` as written (empty when unset), `None` when the
    /// LogicalCluster does not exist (the only field of it the decision reads). For a cluster of
    /// another shard, the phase of the copy that shard replicated into the cache (upstream reads
    /// the local LogicalCluster, then the cache's), `None` when nobody replicated it.
    pub phase: Option<&'a str>,
    pub groups: &'a [String],
    /// A service account whose token was issued in `cluster`.
    pub local_service_account: bool,
    /// A deep SubjectAccessReview (the server asking on a user's behalf).
    pub deep_subject_access_review: bool,
}

/// `initializer group` of an initializer name, as the initializing virtual workspace adds it.
pub fn initializer_group(initializer: &str) -> String {
    format!("{INITIALIZER_GROUP_PREFIX}{initializer}")
}

/// `terminator group` of a terminator name.
pub fn terminator_group(terminator: &str) -> String {
    format!("{TERMINATOR_GROUP_PREFIX}{terminator}")
}

fn has_lifecycle_group(groups: &[String]) -> bool {
    groups.iter().any(|group| {
        group.starts_with(INITIALIZER_GROUP_PREFIX) || group.starts_with(TERMINATOR_GROUP_PREFIX)
    })
}

/// Decides `request`; `rbac_allows_access` answers whether the merged RBAC of the cluster and the
/// bootstrap policy allows the user non-resource verb `access` on path `/` (asked only when needed).
pub fn authorize(request: &Request<'_>, rbac_allows_access: impl FnOnce() -> bool) -> Decision {
    if request.cluster.is_empty() || request.cluster.starts_with(SYSTEM_PREFIX) {
        return Decision::NoOpinion("empty or system workspace".into());
    }
    if request.deep_subject_access_review {
        return Decision::Delegate("deep SAR request".into());
    }
    if request
        .groups
        .iter()
        .any(|group| group == LOGICAL_CLUSTER_ADMIN_GROUP)
    {
        return Decision::Delegate("logical cluster admin access".into());
    }
    let Some(raw) = request.phase else {
        return Decision::Deny("LogicalCluster not found".into());
    };
    let phase = Phase::parse(raw);
    match phase {
        Some(
            Phase::Initializing
            | Phase::Ready
            | Phase::Inactive
            | Phase::Terminating
            | Phase::Deleting,
        ) => {}
        _ => {
            return Decision::NoOpinion(format!("not permitted due to phase {}", quote(raw)));
        }
    }
    if has_lifecycle_group(request.groups)
        && matches!(
            phase,
            Some(Phase::Initializing | Phase::Terminating | Phase::Deleting)
        )
    {
        return Decision::Allow("lifecycle VW pre-authorized access".into());
    }
    if request.local_service_account {
        return Decision::Delegate("local service account access".into());
    }
    if rbac_allows_access() {
        Decision::Delegate("user logical cluster access".into())
    } else {
        Decision::NoOpinion("no verb=access permission on /".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn lc(phase: &str) -> Value {
        json!({"metadata": {"name": "cluster"}, "status": {"phase": phase}})
    }

    fn groups(names: &[&str]) -> Vec<String> {
        names.iter().map(|g| g.to_string()).collect()
    }

    fn request<'a>(
        cluster: &'a str,
        logical_cluster: Option<&'a Value>,
        groups: &'a [String],
    ) -> Request<'a> {
        Request {
            cluster,
            phase: logical_cluster.map(|lc| {
                lc.pointer("/status/phase")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
            }),
            groups,
            local_service_account: false,
            deep_subject_access_review: false,
        }
    }

    #[test]
    fn system_and_empty_clusters_have_no_opinion() {
        let g = groups(&["system:authenticated"]);
        for cluster in ["", "system:admin"] {
            assert_eq!(
                authorize(&request(cluster, None, &g), || true),
                Decision::NoOpinion("empty or system workspace".into())
            );
        }
    }

    #[test]
    fn missing_clusters_are_denied() {
        let g = groups(&["system:authenticated"]);
        assert_eq!(
            authorize(&request("abc", None, &g), || panic!(
                "RBAC must not be asked"
            )),
            Decision::Deny("LogicalCluster not found".into())
        );
    }

    #[test]
    fn clusters_not_serving_content_have_no_opinion() {
        let g = groups(&["system:authenticated"]);
        for phase in ["Scheduling", "Unavailable", ""] {
            let object = lc(phase);
            assert_eq!(
                authorize(&request("abc", Some(&object), &g), || true),
                Decision::NoOpinion(format!("not permitted due to phase {phase:?}"))
            );
        }
    }

    #[test]
    fn access_verb_gates_rbac() {
        let g = groups(&["system:authenticated"]);
        for phase in [
            "Initializing",
            "Ready",
            "Inactive",
            "Terminating",
            "Deleting",
        ] {
            let object = lc(phase);
            assert_eq!(
                authorize(&request("abc", Some(&object), &g), || true),
                Decision::Delegate("user logical cluster access".into()),
                "{phase}"
            );
            assert_eq!(
                authorize(&request("abc", Some(&object), &g), || false),
                Decision::NoOpinion("no verb=access permission on /".into())
            );
        }
    }

    #[test]
    fn lifecycle_groups_pass_only_in_lifecycle_phases() {
        let g = groups(&[&initializer_group("root:universal")]);
        let initializing = lc("Initializing");
        assert_eq!(
            authorize(&request("abc", Some(&initializing), &g), || false),
            Decision::Allow("lifecycle VW pre-authorized access".into())
        );
        let ready = lc("Ready");
        assert!(matches!(
            authorize(&request("abc", Some(&ready), &g), || false),
            Decision::NoOpinion(_)
        ));
        let t = groups(&[&terminator_group("root:custom")]);
        let terminating = lc("Terminating");
        assert!(matches!(
            authorize(&request("abc", Some(&terminating), &t), || false),
            Decision::Allow(_)
        ));
    }

    #[test]
    fn admins_deep_sars_and_local_service_accounts_delegate() {
        let admin = groups(&[LOGICAL_CLUSTER_ADMIN_GROUP]);
        assert_eq!(
            authorize(&request("abc", None, &admin), || false),
            Decision::Delegate("logical cluster admin access".into())
        );
        let none: Vec<String> = Vec::new();
        let mut deep = request("abc", None, &none);
        deep.deep_subject_access_review = true;
        assert_eq!(
            authorize(&deep, || false),
            Decision::Delegate("deep SAR request".into())
        );
        let ready = lc("Ready");
        let mut sa = request("abc", Some(&ready), &none);
        sa.local_service_account = true;
        assert_eq!(
            authorize(&sa, || false),
            Decision::Delegate("local service account access".into())
        );
    }
}
