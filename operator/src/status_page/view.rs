//! The page data: custom resources, certificate expiries and events in, rows of text and CSS
//! classes out. Pure (the time is a parameter), so unit tests check it and the HTML from fixtures.
//!
//! Components are shown in upgrade order (CacheServer, RootShard, Shard, FrontProxy), then the
//! VirtualWorkspaces (outside the upgrade order), each kind by namespace and name.

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::Resource;

use super::certificate::{CertificateExpiry, Validity};
use super::events::EventRecord;
use crate::api::common::{ComponentStatus, Phase, ShardReference};
use crate::api::{CacheServer, FrontProxy, RootShard, Shard, VirtualWorkspace};
use crate::manager::health::Phase as ReplicaPhase;
use crate::validate;

/// How often the page reloads itself (`<meta http-equiv="refresh">`).
pub const REFRESH_SECONDS: u32 = 10;
/// How many events the page lists, newest first.
pub const MAX_EVENTS: usize = 30;

/// Everything the page is made of, as the caches hold it.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    pub root_shards: Vec<RootShard>,
    pub shards: Vec<Shard>,
    pub front_proxies: Vec<FrontProxy>,
    pub cache_servers: Vec<CacheServer>,
    pub virtual_workspaces: Vec<VirtualWorkspace>,
    pub certificates: Vec<CertificateExpiry>,
    pub events: Vec<EventRecord>,
    /// Whether every watch of the page holds its first list.
    pub synced: bool,
    pub replica: ReplicaPhase,
}

/// The kinds the page shows, in upgrade order (VirtualWorkspaces, outside it, last).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum ComponentKind {
    CacheServer,
    RootShard,
    Shard,
    FrontProxy,
    VirtualWorkspace,
}

impl ComponentKind {
    pub fn name(self) -> &'static str {
        match self {
            ComponentKind::CacheServer => "CacheServer",
            ComponentKind::RootShard => "RootShard",
            ComponentKind::Shard => "Shard",
            ComponentKind::FrontProxy => "FrontProxy",
            ComponentKind::VirtualWorkspace => "VirtualWorkspace",
        }
    }
}

/// The whole page.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Page {
    pub generated: String,
    pub refresh_seconds: u32,
    /// What this replica is (leader, standby, starting).
    pub replica: String,
    pub standby: bool,
    pub synced: bool,
    pub components: Vec<Component>,
    pub events: Vec<EventRow>,
}

/// One custom resource.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Component {
    pub kind: &'static str,
    pub namespace: String,
    pub name: String,
    pub phase: String,
    /// CSS class of the phase: `ok`, `progress`, `warn`, `bad` or `unknown`.
    pub phase_class: &'static str,
    pub current_version: String,
    pub target_version: String,
    pub upgrading: bool,
    pub replicas: String,
    pub endpoints: Vec<String>,
    /// The shards it lists (a RootShard its Shards, a FrontProxy those it routes to).
    pub shards: Vec<String>,
    pub conditions: Vec<ConditionRow>,
    pub certificates: Vec<CertificateRow>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConditionRow {
    pub type_: String,
    pub status: String,
    pub class: &'static str,
    pub reason: String,
    pub message: String,
    pub since: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertificateRow {
    pub secret: String,
    pub not_after: String,
    pub renews_at: String,
    /// `valid`, `renewal due` or `expired`.
    pub state: &'static str,
    pub class: &'static str,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventRow {
    pub last_seen: String,
    pub type_: String,
    pub class: &'static str,
    pub object: String,
    pub reason: String,
    pub note: String,
    pub count: i32,
}

/// What one custom resource contributes, whatever its kind.
struct Facts<'a> {
    kind: ComponentKind,
    namespace: String,
    name: String,
    status: Option<&'a ComponentStatus>,
    replicas: String,
    shards: &'a [ShardReference],
}

impl<'a> Facts<'a> {
    fn new<K: Resource<DynamicType = ()>>(
        kind: ComponentKind,
        object: &K,
        status: Option<&'a ComponentStatus>,
        replicas: String,
        shards: &'a [ShardReference],
    ) -> Self {
        Self {
            kind,
            namespace: object.meta().namespace.clone().unwrap_or_default(),
            name: object.meta().name.clone().unwrap_or_default(),
            status,
            replicas,
            shards,
        }
    }
}

/// The replicas the spec asks for, with the operator's default when unset.
fn replicas(set: Option<i32>, default: i32) -> String {
    match set {
        Some(replicas) => replicas.to_string(),
        None => format!("{default} (default)"),
    }
}

fn cache_server_replicas(cache: &CacheServer) -> String {
    match validate::cache_server(cache) {
        Ok(config) if cache.spec.replicas.is_some() => config.replicas.to_string(),
        Ok(config) => format!("{} (default)", config.replicas),
        Err(_) => replicas(cache.spec.replicas, 1),
    }
}

/// The page for `snapshot` at `now`.
pub fn page(snapshot: &Snapshot, now: Timestamp) -> Page {
    let mut facts: Vec<Facts<'_>> = Vec::new();
    for cache in &snapshot.cache_servers {
        facts.push(Facts::new(
            ComponentKind::CacheServer,
            cache,
            cache.status.as_ref(),
            cache_server_replicas(cache),
            &[],
        ));
    }
    for root in &snapshot.root_shards {
        let status = root.status.as_ref();
        facts.push(Facts::new(
            ComponentKind::RootShard,
            root,
            status.map(|status| &status.component),
            replicas(root.spec.common.replicas, validate::DEFAULT_SERVER_REPLICAS),
            status.map_or(&[][..], |status| &status.shards),
        ));
    }
    for shard in &snapshot.shards {
        facts.push(Facts::new(
            ComponentKind::Shard,
            shard,
            shard.status.as_ref(),
            replicas(
                shard.spec.common.replicas,
                validate::DEFAULT_SERVER_REPLICAS,
            ),
            &[],
        ));
    }
    for proxy in &snapshot.front_proxies {
        let status = proxy.status.as_ref();
        facts.push(Facts::new(
            ComponentKind::FrontProxy,
            proxy,
            status.map(|status| &status.component),
            replicas(proxy.spec.replicas, validate::DEFAULT_SERVER_REPLICAS),
            status.map_or(&[][..], |status| &status.shards),
        ));
    }
    for vw in &snapshot.virtual_workspaces {
        facts.push(Facts::new(
            ComponentKind::VirtualWorkspace,
            vw,
            vw.status.as_ref(),
            replicas(vw.spec.replicas, validate::DEFAULT_SERVER_REPLICAS),
            &[],
        ));
    }
    facts.sort_by(|a, b| (a.kind, &a.namespace, &a.name).cmp(&(b.kind, &b.namespace, &b.name)));
    Page {
        generated: format_time(now),
        refresh_seconds: REFRESH_SECONDS,
        replica: snapshot.replica.describe().to_owned(),
        standby: snapshot.replica == ReplicaPhase::Standby,
        synced: snapshot.synced,
        components: facts
            .into_iter()
            .map(|facts| component(facts, &snapshot.certificates, now))
            .collect(),
        events: event_rows(&snapshot.events),
    }
}

fn component(facts: Facts<'_>, certificates: &[CertificateExpiry], now: Timestamp) -> Component {
    let status = facts.status.cloned().unwrap_or_default();
    let (phase, phase_class) = match status.phase {
        Some(Phase::Running) => ("Running", "ok"),
        Some(Phase::Provisioning) => ("Provisioning", "progress"),
        Some(Phase::Degraded) => ("Degraded", "bad"),
        Some(Phase::Deleting) => ("Deleting", "warn"),
        None => ("Unknown", "unknown"),
    };
    let current_version = status.current_version.clone().unwrap_or_default();
    let target_version = status.target_version.clone().unwrap_or_default();
    let endpoints = status
        .endpoints
        .iter()
        .flat_map(|endpoints| {
            std::iter::once(format!("internal {}", endpoints.internal)).chain(
                endpoints
                    .external
                    .iter()
                    .map(|external| format!("external {external}")),
            )
        })
        .collect();
    let kind = facts.kind.name();
    let mut owned: Vec<&CertificateExpiry> = certificates
        .iter()
        .filter(|certificate| certificate.owned_by(kind, &facts.namespace, &facts.name))
        .collect();
    owned.sort_by(|a, b| a.secret.cmp(&b.secret));
    Component {
        kind,
        upgrading: !target_version.is_empty() && current_version != target_version,
        current_version,
        target_version,
        replicas: facts.replicas,
        endpoints,
        shards: facts
            .shards
            .iter()
            .map(|shard| match &shard.url {
                Some(url) => format!("{} ({url})", shard.name),
                None => shard.name.clone(),
            })
            .collect(),
        conditions: status.conditions.iter().map(condition_row).collect(),
        certificates: owned
            .into_iter()
            .map(|certificate| certificate_row(certificate, now))
            .collect(),
        namespace: facts.namespace,
        name: facts.name,
        phase: phase.to_owned(),
        phase_class,
    }
}

/// The CSS class of a condition: whether its status is good news for its type.
fn condition_class(condition: &Condition) -> &'static str {
    use crate::api::conditions::{DEGRADED, DELETING, IGNORED_FIELDS, PROGRESSING, ROLLOUT_FAILED};
    let status = match condition.status.as_str() {
        "True" => true,
        "False" => false,
        _ => return "unknown",
    };
    match (condition.type_.as_str(), status) {
        (DEGRADED | DELETING, true) => "bad",
        (IGNORED_FIELDS, true) => "warn",
        (DEGRADED | DELETING | IGNORED_FIELDS, false) => "ok",
        (PROGRESSING, true) => "progress",
        (PROGRESSING, false) if condition.reason == ROLLOUT_FAILED => "bad",
        (PROGRESSING, false) => "ok",
        (_, true) => "ok",
        (_, false) => "bad",
    }
}

fn condition_row(condition: &Condition) -> ConditionRow {
    let class = condition_class(condition);
    ConditionRow {
        type_: condition.type_.clone(),
        status: condition.status.clone(),
        class,
        reason: condition.reason.clone(),
        message: condition.message.clone(),
        since: format_time(condition.last_transition_time.0),
    }
}

fn certificate_row(certificate: &CertificateExpiry, now: Timestamp) -> CertificateRow {
    let (state, class) = match certificate.validity(now) {
        Validity::Valid => ("valid", "ok"),
        Validity::RenewalDue => ("renewal due", "warn"),
        Validity::Expired => ("expired", "bad"),
    };
    CertificateRow {
        secret: certificate.secret.clone(),
        not_after: format_time(certificate.not_after),
        renews_at: format_time(certificate.renews_at()),
        state,
        class,
    }
}

/// The newest [`MAX_EVENTS`] events, newest first.
fn event_rows(events: &[EventRecord]) -> Vec<EventRow> {
    let mut sorted: Vec<&EventRecord> = events.iter().collect();
    sorted.sort_by(|a, b| b.last_seen.cmp(&a.last_seen).then(a.name.cmp(&b.name)));
    sorted
        .into_iter()
        .take(MAX_EVENTS)
        .map(|event| EventRow {
            last_seen: event.last_seen.map(format_time).unwrap_or_default(),
            class: if event.type_ == "Warning" {
                "warn"
            } else {
                "ok"
            },
            type_: event.type_.clone(),
            object: format!("{} {}/{}", event.kind, event.namespace, event.object),
            reason: event.reason.clone(),
            note: event.note.clone(),
            count: event.count,
        })
        .collect()
}

/// `2026-11-26 07:30:00 UTC`.
pub fn format_time(time: Timestamp) -> String {
    time.strftime("%Y-%m-%d %H:%M:%S UTC").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status_page::fixtures::{now, snapshot};

    fn find<'a>(page: &'a Page, kind: &str, name: &str) -> &'a Component {
        page.components
            .iter()
            .find(|c| c.kind == kind && c.name == name)
            .unwrap_or_else(|| panic!("{kind} {name} missing: {page:#?}"))
    }

    #[test]
    fn components_come_in_upgrade_order() {
        let page = page(&snapshot(), now());
        let order: Vec<(&str, &str)> = page
            .components
            .iter()
            .map(|c| (c.kind, c.name.as_str()))
            .collect();
        assert_eq!(
            order,
            [
                ("CacheServer", "cache"),
                ("RootShard", "root"),
                ("Shard", "shard-1"),
                ("FrontProxy", "public"),
                ("VirtualWorkspace", "shard-1-vw")
            ]
        );
    }

    #[test]
    fn phases_versions_replicas_endpoints_and_shards() {
        let page = page(&snapshot(), now());
        let root = find(&page, "RootShard", "root");
        assert_eq!((root.phase.as_str(), root.phase_class), ("Running", "ok"));
        assert_eq!(root.replicas, "1");
        assert!(!root.upgrading);
        assert_eq!(
            root.endpoints,
            [
                "internal https://root-rootshard.kcp.svc.cluster.local:6443",
                "external https://kcp.example.com:6443"
            ]
        );
        assert_eq!(
            root.shards,
            ["shard-1 (https://shard-1-shard.kcp.svc.cluster.local:6443)"]
        );
        let shard = find(&page, "Shard", "shard-1");
        assert!(shard.upgrading, "v1 -> v2");
        assert_eq!(shard.replicas, "2 (default)");
        assert_eq!(shard.phase_class, "progress");
        let cache = find(&page, "CacheServer", "cache");
        assert_eq!(cache.replicas, "1 (default)", "embedded store: one replica");
        let proxy = find(&page, "FrontProxy", "public");
        assert_eq!(
            (proxy.phase.as_str(), proxy.phase_class),
            ("Degraded", "bad")
        );
        assert_eq!(proxy.replicas, "3");
        let vw = find(&page, "VirtualWorkspace", "shard-1-vw");
        assert_eq!((vw.phase.as_str(), vw.phase_class), ("Running", "ok"));
        assert_eq!(vw.replicas, "2 (default)");
        assert_eq!(
            vw.endpoints,
            [
                "internal https://shard-1-vw-virtualworkspace.kcp.svc.cluster.local:6443",
                "external https://vw-shard-1.kcp.example.com:443"
            ]
        );
        assert_eq!(proxy.current_version, "");
        assert_eq!(proxy.conditions[0].class, "bad");
        assert_eq!(proxy.conditions[0].reason, "ReferenceNotFound");
    }

    #[test]
    fn certificates_belong_to_their_owner_and_warn_before_renewal() {
        let page = page(&snapshot(), now());
        let root = find(&page, "RootShard", "root");
        let states: Vec<(&str, &str, &str)> = root
            .certificates
            .iter()
            .map(|c| (c.secret.as_str(), c.state, c.class))
            .collect();
        assert_eq!(
            states,
            [
                ("root-rootshard-client", "renewal due", "warn"),
                ("root-rootshard-server", "valid", "ok"),
            ]
        );
        assert_eq!(root.certificates[1].not_after, "2027-01-15 09:23:20 UTC");
        let cache = find(&page, "CacheServer", "cache");
        assert_eq!(cache.certificates[0].state, "expired");
        assert!(find(&page, "Shard", "shard-1").certificates.is_empty());
    }

    #[test]
    fn events_newest_first_with_their_object() {
        let page = page(&snapshot(), now());
        let objects: Vec<&str> = page.events.iter().map(|e| e.object.as_str()).collect();
        assert_eq!(objects, ["FrontProxy kcp/public", "RootShard kcp/root"]);
        assert_eq!(page.events[0].class, "warn");
        assert_eq!(page.events[0].count, 4);
    }

    #[test]
    fn events_are_capped() {
        let mut many = snapshot();
        let template = many.events[0].clone();
        many.events = (0..100)
            .map(|i| EventRecord {
                name: format!("e{i}"),
                last_seen: Timestamp::from_second(i).ok(),
                ..template.clone()
            })
            .collect();
        let page = page(&many, now());
        assert_eq!(page.events.len(), MAX_EVENTS);
        assert_eq!(
            page.events[0].last_seen,
            format_time(Timestamp::from_second(99).expect("t"))
        );
    }

    #[test]
    fn conditions_are_coloured_by_what_they_mean() {
        let condition = |type_: &str, status: &str, reason: &str| Condition {
            type_: type_.into(),
            status: status.into(),
            reason: reason.into(),
            message: String::new(),
            observed_generation: None,
            last_transition_time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now()),
        };
        for (type_, status, reason, class) in [
            ("Available", "True", "ReplicasUp", "ok"),
            ("Available", "False", "ReplicasDown", "bad"),
            ("ReferencesValid", "False", "ReferenceNotFound", "bad"),
            ("Degraded", "False", "AsExpected", "ok"),
            ("Degraded", "True", "ApiError", "bad"),
            ("Progressing", "False", "RolledOut", "ok"),
            ("Progressing", "True", "Upgrading", "progress"),
            ("Progressing", "False", "RolloutFailed", "bad"),
            ("IgnoredFields", "True", "CertManagerFields", "warn"),
            ("Available", "Unknown", "", "unknown"),
        ] {
            assert_eq!(
                condition_class(&condition(type_, status, reason)),
                class,
                "{type_}={status} ({reason})"
            );
        }
    }

    #[test]
    fn a_standby_says_so() {
        let mut standby = snapshot();
        standby.replica = ReplicaPhase::Standby;
        let page = page(&standby, now());
        assert!(page.standby);
        assert!(page.replica.contains("standby"), "{}", page.replica);
        assert!(!super::page(&snapshot(), now()).standby);
    }
}
