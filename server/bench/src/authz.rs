//! Authorization figures (issue 6): what RBAC costs a request in a logical cluster holding 1,000
//! roles and 1,000 bindings, measured through the real server.
//!
//! `cargo run -p kcp-rbac --example authorize_bench` times the policy index alone; a request also
//! looks up the cluster's cached index and builds the attributes, and a refusal renders a 403, so
//! this command measures the difference end to end instead. The same GET of one ConfigMap is sent
//! as the admin (`system:masters`, which is allowed before RBAC is consulted) and as `bench-user`
//! (evaluated against the whole policy); everything else about the two requests is equal, so the
//! difference in latency (and in server CPU per request, the steadier figure on a busy machine) is
//! the authorization overhead. A third phase sends a GET that `bench-user` is refused.
//!
//! - **Policy.** In logical cluster `root` (the admin kubeconfig's current context): `--roles`
//!   roles and as many bindings, half ClusterRoles bound cluster-wide and half Roles bound in one of
//!   `--namespaces` namespaces, five rules each over varying resources and verbs, bound to varied
//!   users and groups. `bench-user` (group `bench-group`) is named by exactly one of them, a
//!   RoleBinding granting get and list of ConfigMaps in `ns-0`, and `bench-group` by a few
//!   bindings whose roles grant nothing on ConfigMaps, so the refused GET (a ConfigMap in `ns-1`)
//!   has to look at every binding that could apply before it is refused.
//! - **Identity.** `bench-user` is a client certificate signed with the client CA the server
//!   generated in its root directory, so it authenticates exactly like the admin does.
//! - **Index rebuild.** The server drops a cluster's index when one of its RBAC objects changes
//!   and builds it again on the next request (reading every RBAC object of the cluster); the first
//!   `bench-user` GET after each of `--rebuilds` new RoleBindings is timed alone.
//!
//! Nothing is deleted afterwards: the server, its directory (or etcd prefix) are its own and are
//! thrown away.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use http::{Method, StatusCode};
use kcp_apimachinery::duration::parse_or_seconds;
use rcgen::{
    CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, Issuer, KeyPair,
    KeyUsagePurpose, SerialNumber,
};
use serde_json::{Value, json};
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::client::{Client, ClientError, Protocol, Reply};
use crate::kubeconfig::{KubeconfigError, Target};
use crate::load::{self, LoadError, check, to_bytes};
use crate::report::{AuthzReport, LoadReport, Overhead, PolicySetup, Rebuilds, ServerReport};
use crate::schedule::{self, Failure, Plan};
use crate::server::{Server, ServerArgs, ServerError};
use crate::stats::PhaseReport;

/// The user whose requests RBAC evaluates, and its group.
pub const USER: &str = "bench-user";
pub const GROUP: &str = "bench-group";
/// The ConfigMap every phase GETs (in `ns-0`, and in `ns-1` for the refused GET).
const CONFIGMAP: &str = "authz-target";
const RBAC: &str = "/apis/rbac.authorization.k8s.io/v1";
/// The index of the role whose RoleBinding names `bench-user` (a Role in `ns-0`).
const USER_ROLE: u64 = 1;
/// Roles whose index modulo this is in [`GROUP_ROLES`] are bound to `bench-group`.
const GROUP_EVERY: u64 = 200;
const GROUP_ROLES: [u64; 2] = [3, 4];
/// Resources the generated rules name (besides one made-up resource per rule).
const RESOURCES: [&str; 6] = [
    "configmaps",
    "secrets",
    "serviceaccounts",
    "events",
    "leases",
    "pods",
];
/// Sequential GETs per identity before the phases (opens connections, builds the index).
const WARM_UP: usize = 20;
/// Pause around each rebuild sample, so the watch-driven invalidation of the last change is over.
const SETTLE: Duration = Duration::from_millis(500);

/// Options of the `authz` command (besides the server options).
#[derive(Debug, Clone, clap::Args)]
pub struct AuthzArgs {
    /// Roles to create, and as many bindings (half cluster-wide, half namespaced).
    #[arg(long, default_value_t = 1000)]
    pub roles: u64,
    /// Namespaces the Roles and RoleBindings are spread over (ns-0 ...).
    #[arg(long, default_value_t = 50)]
    pub namespaces: u64,
    /// Creates in flight at once while setting up the policy.
    #[arg(long, default_value_t = 16)]
    pub setup_concurrency: usize,
    /// Requests per second of each phase, scheduled on a clock (open loop).
    #[arg(long, default_value_t = 200.0)]
    pub rate: f64,
    /// Length of each phase (e.g. 10s, 500ms, 1m).
    #[arg(long, default_value = "10s", value_parser = parse_or_seconds)]
    pub duration: Duration,
    /// Connections per identity (HTTP/2).
    #[arg(long, default_value_t = 4)]
    pub concurrency: usize,
    /// Policy changes after which the first request is timed (the index rebuild).
    #[arg(long, default_value_t = 5)]
    pub rebuilds: u64,
    /// How long a phase waits for outstanding requests after the last is due.
    #[arg(long, default_value = "10s", value_parser = parse_or_seconds)]
    pub drain: Duration,
}

/// Why the authorization figures could not be produced.
#[derive(Debug, thiserror::Error)]
pub enum AuthzError {
    #[error(transparent)]
    Load(#[from] LoadError),
    #[error(transparent)]
    Server(#[from] ServerError),
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error(transparent)]
    Kubeconfig(#[from] KubeconfigError),
    #[error("reading {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("minting the {USER} client certificate: {0}")]
    Certificate(#[from] rcgen::Error),
    #[error("a setup request did not finish: {0}")]
    Task(#[from] tokio::task::JoinError),
    #[error("{what}: expected {expected}, the server answered {status}: {body}")]
    Status {
        what: String,
        expected: StatusCode,
        status: StatusCode,
        body: String,
    },
}

/// An object to create: the collection to POST to and the object.
#[derive(Debug, Clone, PartialEq)]
pub struct Object {
    pub path: String,
    pub body: Value,
}

/// Starts a server, creates the policy, runs the three phases and the rebuild samples.
pub async fn run(server: &ServerArgs, args: &AuthzArgs) -> Result<AuthzReport, AuthzError> {
    // Fail on a bad rate before starting anything.
    let plan = Plan::new(args.rate, args.duration, None).map_err(LoadError::from)?;
    let started = Server::start(server).await?;
    tracing::info!(
        startup_ms = started.startup.as_secs_f64() * 1e3,
        "server ready"
    );
    tokio::time::sleep(Duration::from_secs(server.idle_seconds)).await;
    let idle = started.memory()?;
    let settle = Duration::from_secs(server.idle_seconds);
    let result = measure(&started, args, &plan, settle).await;
    let after_load = started.memory();
    let startup_ms = started.startup.as_secs_f64() * 1e3;
    let stopped = started.stop().await?;
    let (mut report, policy, rebuilds) = result?;
    report.server = Some(ServerReport {
        backend: server.backend,
        startup_ms,
        idle,
        after_load: Some(after_load?),
        after_cleanup: None,
        stopped: Some(stopped),
    });
    let overhead = match report.phases.as_slice() {
        [admin, user, ..] => Overhead::of(admin, user),
        _ => Overhead::default(),
    };
    Ok(AuthzReport {
        load: report,
        policy,
        overhead,
        rebuilds,
    })
}

/// Everything between start and stop: setup, a pause of `settle`, phases (admin, user, refused),
/// rebuilds.
async fn measure(
    started: &Server,
    args: &AuthzArgs,
    plan: &Plan,
    settle: Duration,
) -> Result<(LoadReport, PolicySetup, Rebuilds), AuthzError> {
    let admin_target = Target::from_file(&started.kubeconfig, None)?;
    let root = started.kubeconfig.parent().unwrap_or(Path::new("."));
    let identity = mint(root, USER, GROUP)?;
    let user_target = Target {
        client_pem: Some(identity),
        ..admin_target.clone()
    };
    let connections = args.concurrency.max(1);
    let admin = Arc::new(Client::new(admin_target, Protocol::Http2, connections)?);
    let user = Arc::new(Client::new(user_target, Protocol::Http2, connections)?);
    admin.warm_up().await?;
    user.warm_up().await?;

    let began = Instant::now();
    let (roles, bindings) = policy(args.roles, args.namespaces);
    let mut setup: Vec<Object> = (0..args.namespaces.max(2))
        .map(|n| Object {
            path: "/api/v1/namespaces".into(),
            body: json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace(n)}}),
        })
        .collect();
    create_all(&admin, std::mem::take(&mut setup), args.setup_concurrency).await?;
    let configmaps = (0..2).map(|n| Object {
        path: format!("/api/v1/namespaces/{}/configmaps", namespace(n)),
        body: json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": CONFIGMAP},
            "data": {"payload": "x".repeat(256)},
        }),
    });
    create_all(&admin, configmaps.collect(), args.setup_concurrency).await?;
    let (role_count, binding_count) = (roles.len() as u64, bindings.len() as u64);
    create_all(&admin, roles, args.setup_concurrency).await?;
    create_all(&admin, bindings, args.setup_concurrency).await?;
    let setup_s = began.elapsed().as_secs_f64();
    tracing::info!(
        roles = role_count,
        bindings = binding_count,
        setup_s,
        "policy created"
    );

    // The creates leave work behind (watch events, invalidations); let it finish first.
    tokio::time::sleep(settle).await;
    let allowed = configmap_path(0);
    let refused = configmap_path(1);
    for _ in 0..WARM_UP {
        expect(&admin, &allowed, StatusCode::OK).await?;
        expect(&user, &allowed, StatusCode::OK).await?;
        expect(&user, &refused, StatusCode::FORBIDDEN).await?;
    }
    let pid = Some(started.pid());
    let mut phases = Vec::new();
    for (label, client, path, status) in [
        (
            "get as admin (system:masters)",
            &admin,
            &allowed,
            StatusCode::OK,
        ),
        (
            "get as bench-user (RBAC allows)",
            &user,
            &allowed,
            StatusCode::OK,
        ),
        (
            "get as bench-user (RBAC refuses, 403)",
            &user,
            &refused,
            StatusCode::FORBIDDEN,
        ),
    ] {
        tracing::info!(phase = label, "phase starting");
        let report = load::with_server_cpu(pid, async {
            let run = schedule::drive(plan, args.drain, |_| {
                let (client, path) = (client.clone(), path.clone());
                async move { outcome(client.request(Method::GET, &path, None).await, status) }
            })
            .await;
            Ok(PhaseReport::of(label, plan.rate(), &run))
        })
        .await?;
        tracing::info!(
            phase = label,
            ok = report.ok,
            requests = report.requests,
            "phase done"
        );
        phases.push(report);
    }
    let rebuilds = rebuilds(&admin, &user, args.rebuilds).await?;
    Ok((
        LoadReport {
            protocol: "HTTP/2",
            concurrency: connections,
            loadavg: crate::server::loadavg(),
            server: None,
            phases,
        },
        PolicySetup {
            roles: role_count,
            bindings: binding_count,
            namespaces: args.namespaces.max(2),
            group_bindings: group_bindings(args.roles),
            setup_s,
        },
        rebuilds,
    ))
}

/// Creates one RoleBinding at a time and times the next `bench-user` GET (which rebuilds the
/// cluster's index), then, once the change has settled, a GET against the rebuilt index.
async fn rebuilds(admin: &Client, user: &Client, samples: u64) -> Result<Rebuilds, AuthzError> {
    let allowed = configmap_path(0);
    let mut rebuilds = Rebuilds::default();
    for k in 0..samples {
        tokio::time::sleep(SETTLE).await;
        let binding = json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": format!("rebuild-{k}"), "namespace": namespace(2)},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role_name(0)},
            "subjects": [user_subject(&format!("rebuild-{k}"))],
        });
        let path = format!("{RBAC}/namespaces/{}/rolebindings", namespace(2));
        let reply = admin
            .request(Method::POST, &path, Some(to_bytes(&binding)))
            .await?;
        check(&format!("creating rolebinding rebuild-{k}"), reply)?;
        rebuilds
            .first_ms
            .push(expect(user, &allowed, StatusCode::OK).await?);
        tokio::time::sleep(SETTLE).await;
        expect(user, &allowed, StatusCode::OK).await?;
        rebuilds
            .cached_ms
            .push(expect(user, &allowed, StatusCode::OK).await?);
    }
    Ok(rebuilds)
}

/// GETs `path` once; fails unless the answer is `status`. Returns the latency in milliseconds.
async fn expect(client: &Client, path: &str, status: StatusCode) -> Result<f64, AuthzError> {
    let sent = Instant::now();
    let reply = client.request(Method::GET, path, None).await?;
    let ms = sent.elapsed().as_secs_f64() * 1e3;
    if reply.status == status {
        Ok(ms)
    } else {
        Err(AuthzError::Status {
            what: format!("GET {path}"),
            expected: status,
            status: reply.status,
            body: String::from_utf8_lossy(&reply.body).into_owned(),
        })
    }
}

/// Success is the expected status (a 403 is what the refusal phase measures).
pub(crate) fn outcome(
    reply: Result<Reply, ClientError>,
    expected: StatusCode,
) -> Result<(), Failure> {
    match reply {
        Ok(reply) if reply.status == expected => Ok(()),
        Ok(reply) => Err(Failure::Status(reply.status.as_u16())),
        Err(error) => Err(Failure::Transport(error.kind())),
    }
}

/// POSTs every object, at most `concurrency` at a time; the first failure ends the setup.
pub(crate) async fn create_all(
    client: &Arc<Client>,
    objects: Vec<Object>,
    concurrency: usize,
) -> Result<(), AuthzError> {
    let mut tasks = JoinSet::new();
    for object in objects {
        if tasks.len() >= concurrency.max(1)
            && let Some(done) = tasks.join_next().await
        {
            done??;
        }
        let client = client.clone();
        tasks.spawn(async move {
            let reply = client
                .request(Method::POST, &object.path, Some(to_bytes(&object.body)))
                .await?;
            check(&format!("creating in {}", object.path), reply).map(drop)
        });
    }
    while let Some(done) = tasks.join_next().await {
        done??;
    }
    Ok(())
}

/// A client certificate (PEM certificate and key) for `user` in `group`, signed by the client CA
/// in the server's root directory.
fn mint(root: &Path, user: &str, group: &str) -> Result<(Vec<u8>, Vec<u8>), AuthzError> {
    let read = |name: &str| {
        let path = root.join(name);
        std::fs::read_to_string(&path).map_err(|source| AuthzError::Read { path, source })
    };
    let issuer = Issuer::from_ca_cert_pem(
        &read("client-ca.crt")?,
        KeyPair::from_pem(&read("client-ca.key")?)?,
    )?;
    let mut params = CertificateParams::default();
    let mut subject = DistinguishedName::new();
    subject.push(DnType::CommonName, user);
    subject.push(DnType::OrganizationName, group);
    params.distinguished_name = subject;
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.use_authority_key_identifier_extension = true;
    // Positive and non-zero whatever the random bits (DER integers are signed).
    params.serial_number = Some(SerialNumber::from((rand::random::<u64>() >> 1).max(1)));
    let now = time::OffsetDateTime::now_utc();
    params.not_before = now - time::Duration::minutes(5);
    params.not_after = now + time::Duration::days(1);
    let key = KeyPair::generate()?;
    let cert = params.signed_by(&key, &issuer)?;
    Ok((cert.pem().into_bytes(), key.serialize_pem().into_bytes()))
}

fn namespace(n: u64) -> String {
    format!("ns-{n}")
}

fn role_name(i: u64) -> String {
    format!("role-{i}")
}

fn configmap_path(n: u64) -> String {
    format!("/api/v1/namespaces/{}/configmaps/{CONFIGMAP}", namespace(n))
}

fn user_subject(name: &str) -> Value {
    json!({"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": name})
}

fn is_group_role(i: u64) -> bool {
    GROUP_ROLES.contains(&(i % GROUP_EVERY))
}

/// How many of `roles` bindings name `bench-group`.
fn group_bindings(roles: u64) -> u64 {
    (0..roles).filter(|&i| is_group_role(i)).count() as u64
}

/// Who binding `i` names: `bench-user` for [`USER_ROLE`], `bench-group` for the group roles,
/// one of seven team groups for every tenth, otherwise a user of its own.
fn subject(i: u64) -> Value {
    let group = |name: &str| json!({"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": name});
    if i == USER_ROLE {
        user_subject(USER)
    } else if is_group_role(i) {
        group(GROUP)
    } else if i % 10 == 5 {
        group(&format!("team-{}", i % 7))
    } else {
        user_subject(&format!("user-{i}"))
    }
}

/// Five rules over varying resources and verbs, like hand-written roles. The `bench-user` role
/// starts with get and list of ConfigMaps; roles bound to `bench-group` name no ConfigMaps, so the
/// refused GET is refused.
fn rules(i: u64) -> Value {
    let resources: Vec<&str> = RESOURCES
        .iter()
        .copied()
        .filter(|r| *r != "configmaps" || !(is_group_role(i) || i == USER_ROLE))
        .collect();
    let len = resources.len() as u64;
    let mut rules: Vec<Value> = (0..5)
        .map(|r| {
            let verbs = if (i + r).is_multiple_of(2) {
                json!(["get", "list", "watch"])
            } else {
                json!(["create", "update", "delete"])
            };
            json!({
                "verbs": verbs,
                "apiGroups": [""],
                "resources": [resources[((i + r) % len) as usize], format!("custom{i}-{r}")],
            })
        })
        .collect();
    if i == USER_ROLE {
        rules[0] =
            json!({"verbs": ["get", "list"], "apiGroups": [""], "resources": ["configmaps"]});
    }
    Value::from(rules)
}

/// `roles` roles and as many bindings: even indexes ClusterRoles with ClusterRoleBindings, odd
/// ones Roles with RoleBindings in `ns-((i / 2) % namespaces)` (so [`USER_ROLE`] is in `ns-0`).
pub fn policy(roles: u64, namespaces: u64) -> (Vec<Object>, Vec<Object>) {
    let namespaces = namespaces.max(2);
    let group = "rbac.authorization.k8s.io";
    let mut role_objects = Vec::with_capacity(roles as usize);
    let mut bindings = Vec::with_capacity(roles as usize);
    for i in 0..roles {
        let name = role_name(i);
        if i.is_multiple_of(2) {
            role_objects.push(Object {
                path: format!("{RBAC}/clusterroles"),
                body: json!({
                    "apiVersion": format!("{group}/v1"),
                    "kind": "ClusterRole",
                    "metadata": {"name": name},
                    "rules": rules(i),
                }),
            });
            bindings.push(Object {
                path: format!("{RBAC}/clusterrolebindings"),
                body: json!({
                    "apiVersion": format!("{group}/v1"),
                    "kind": "ClusterRoleBinding",
                    "metadata": {"name": name},
                    "roleRef": {"apiGroup": group, "kind": "ClusterRole", "name": name},
                    "subjects": [subject(i)],
                }),
            });
        } else {
            let ns = namespace((i / 2) % namespaces);
            role_objects.push(Object {
                path: format!("{RBAC}/namespaces/{ns}/roles"),
                body: json!({
                    "apiVersion": format!("{group}/v1"),
                    "kind": "Role",
                    "metadata": {"name": name, "namespace": ns},
                    "rules": rules(i),
                }),
            });
            bindings.push(Object {
                path: format!("{RBAC}/namespaces/{ns}/rolebindings"),
                body: json!({
                    "apiVersion": format!("{group}/v1"),
                    "kind": "RoleBinding",
                    "metadata": {"name": name, "namespace": ns},
                    "roleRef": {"apiGroup": group, "kind": "Role", "name": name},
                    "subjects": [subject(i)],
                }),
            });
        }
    }
    (role_objects, bindings)
}

/// The middle sample (the lower of the two middle ones), for a handful of rebuild samples.
pub fn median(samples: &[f64]) -> Option<f64> {
    let mut sorted = samples.to_vec();
    sorted.sort_unstable_by(f64::total_cmp);
    sorted.get(sorted.len().checked_sub(1)? / 2).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(object: &Object, subject: &str) -> bool {
        object.body["subjects"]
            .as_array()
            .is_some_and(|s| s.iter().any(|s| s["name"] == subject))
    }

    fn role_of<'a>(roles: &'a [Object], binding: &Object) -> &'a Object {
        let name = &binding.body["roleRef"]["name"];
        let namespace = &binding.body["metadata"]["namespace"];
        roles
            .iter()
            .find(|r| {
                r.body["metadata"]["name"] == *name && r.body["metadata"]["namespace"] == *namespace
            })
            .unwrap()
    }

    fn grants_configmaps(role: &Object) -> bool {
        role.body["rules"].as_array().unwrap().iter().any(|r| {
            r["resources"]
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r == "configmaps")
        })
    }

    #[test]
    fn a_thousand_of_each_half_namespaced() {
        let (roles, bindings) = policy(1000, 50);
        assert_eq!((roles.len(), bindings.len()), (1000, 1000));
        let namespaced = roles.iter().filter(|r| r.body["kind"] == "Role").count();
        assert_eq!(namespaced, 500);
        assert!(
            roles
                .iter()
                .all(|r| r.body["rules"].as_array().unwrap().len() == 5)
        );
        let namespaces: std::collections::BTreeSet<_> = roles
            .iter()
            .filter_map(|r| r.body["metadata"]["namespace"].as_str())
            .collect();
        assert_eq!(namespaces.len(), 50);
    }

    #[test]
    fn bench_user_has_one_binding_for_configmaps_in_ns_0() {
        let (roles, bindings) = policy(1000, 50);
        let own: Vec<_> = bindings.iter().filter(|b| names(b, USER)).collect();
        assert_eq!(own.len(), 1);
        assert_eq!(own[0].body["kind"], "RoleBinding");
        assert_eq!(own[0].body["metadata"]["namespace"], "ns-0");
        let role = role_of(&roles, own[0]);
        assert_eq!(
            role.body["rules"][0],
            json!({"verbs": ["get", "list"], "apiGroups": [""], "resources": ["configmaps"]})
        );
        let groups: Vec<_> = bindings.iter().filter(|b| names(b, GROUP)).collect();
        assert_eq!(groups.len() as u64, group_bindings(1000));
        assert_eq!(groups.len(), 10);
        assert!(
            groups
                .iter()
                .all(|b| !grants_configmaps(role_of(&roles, b)))
        );
        // Other users do get ConfigMaps, so the index holds rules for them.
        assert!(roles.iter().filter(|r| grants_configmaps(r)).count() > 100);
    }

    #[test]
    fn medians() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.0));
    }
}
