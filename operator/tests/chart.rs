//! The Helm chart `charts/kcp-operator` must not drift from the code it installs:
//!
//! - its `crds/` are byte-identical copies of the repository's `crds/` (which `tests/crds.rs`
//!   keeps equal to the API types),
//! - its `files/*-rules.yaml` are the rules of `kcp_operator::rbac` (derived from the
//!   controllers' source, see that module),
//! - `helm lint` passes and `helm template` renders, with default and overridden values,
//!   objects that parse as Kubernetes types and say what they should: the image, the `run`
//!   arguments (parsed with the operator's own flag definitions), probes, ports, security
//!   context, and the ServiceAccount the bindings grant the rules to.
//!
//! `UPDATE_CHART=1 cargo test -p kcp-operator --test chart` rewrites the copied CRDs and the
//! rules files. Helm comes from `$HELM` or `PATH`; without it the tests fail (run
//! `bash e2e/tools/install-helm.sh`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "support/helm.rs"]
mod helm;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Once;
use std::sync::atomic::{AtomicUsize, Ordering};

use clap::Parser;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Container, Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kcp_operator::manager::Options;
use kcp_operator::{naming, rbac};
use serde_json::Value;

const RELEASE: &str = "kcp-operator";
const NAMESPACE: &str = "kcp-system";
const RULES_HEADER: &str = "# Generated from operator/src/rbac.rs (`kcp-operator rbac`); do not edit.\n\
# Refresh with: UPDATE_CHART=1 cargo test -p kcp-operator --test chart\n";
const REFRESH: &str = "refresh with UPDATE_CHART=1 cargo test -p kcp-operator --test chart";

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn chart() -> PathBuf {
    repo().join("charts/kcp-operator")
}

fn update() -> bool {
    std::env::var_os("UPDATE_CHART").is_some()
}

fn yaml_files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return BTreeMap::new();
    };
    entries
        .map(|entry| entry.expect("directory entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "yaml"))
        .map(|path| {
            let name = path
                .file_name()
                .expect("file name")
                .to_string_lossy()
                .into_owned();
            (name, std::fs::read(&path).expect("read file"))
        })
        .collect()
}

/// The rules files the chart must hold, by name under `files/`.
fn wanted_rules_files() -> [(&'static str, String); 2] {
    [
        ("clusterrole-rules.yaml", rules_file(&rbac::cluster_rules())),
        ("role-rules.yaml", rules_file(&rbac::namespace_rules())),
    ]
}

/// With `UPDATE_CHART` set, rewrites the generated parts of the chart once, before any test
/// of this binary looks at them (tests run in parallel).
fn refresh() {
    static ONCE: Once = Once::new();
    if !update() {
        return;
    }
    ONCE.call_once(|| {
        let source = yaml_files(&repo().join("crds"));
        let crds = chart().join("crds");
        std::fs::create_dir_all(&crds).expect("create chart crds/");
        for name in yaml_files(&crds).keys() {
            if !source.contains_key(name) {
                std::fs::remove_file(crds.join(name)).expect("remove stale CRD");
            }
        }
        for (name, bytes) in &source {
            std::fs::write(crds.join(name), bytes).expect("write CRD");
        }
        let files = chart().join("files");
        std::fs::create_dir_all(&files).expect("create chart files/");
        for (name, wanted) in wanted_rules_files() {
            std::fs::write(files.join(name), wanted).expect("write rules");
        }
    });
}

#[test]
fn chart_crds_are_copies_of_the_repository_crds() {
    refresh();
    let source = yaml_files(&repo().join("crds"));
    assert!(!source.is_empty(), "no CRDs under crds/");
    let copied = yaml_files(&chart().join("crds"));
    let differing: Vec<&String> = source
        .keys()
        .chain(copied.keys())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .filter(|name| source.get(*name) != copied.get(*name))
        .collect();
    assert!(
        differing.is_empty(),
        "charts/kcp-operator/crds differs from crds/ in {differing:?}; {REFRESH}"
    );
}

fn rules_file(rules: &[k8s_openapi::api::rbac::v1::PolicyRule]) -> String {
    let yaml = rbac::rules_yaml(rules).expect("rules render");
    format!("{RULES_HEADER}{yaml}")
}

#[test]
fn chart_rules_are_the_rules_of_the_code() {
    refresh();
    let dir = chart().join("files");
    let stale: Vec<&str> = wanted_rules_files()
        .into_iter()
        .filter(|(name, wanted)| {
            std::fs::read_to_string(dir.join(name)).unwrap_or_default() != *wanted
        })
        .map(|(name, _)| name)
        .collect();
    assert!(stale.is_empty(), "stale chart rules {stale:?}; {REFRESH}");
}

#[test]
fn chart_version_is_the_workspace_version() {
    let text = std::fs::read_to_string(chart().join("Chart.yaml")).expect("Chart.yaml");
    let meta: Value = yaml_serde::from_str(&text).expect("Chart.yaml parses");
    assert_eq!(meta["apiVersion"], "v2");
    assert_eq!(meta["name"], "kcp-operator");
    assert_eq!(meta["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(meta["appVersion"], env!("CARGO_PKG_VERSION"));
}

/// Writes `values` (YAML) to a file of its own for `--values`.
fn values_file(values: &str) -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "chart-values-{}-{}.yaml",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::write(&path, values).expect("write values");
    path
}

/// `helm template` with `values` (YAML, may be empty) and `extra` flags; stdout, or the error.
fn template(values: &str, extra: &[&str]) -> Result<String, String> {
    refresh();
    let values = values_file(values);
    let chart = chart();
    let mut args = vec![
        "template",
        RELEASE,
        chart.to_str().expect("UTF-8 path"),
        "--namespace",
        NAMESPACE,
        "--values",
        values.to_str().expect("UTF-8 path"),
    ];
    args.extend_from_slice(extra);
    let output = helm::run(&args);
    let _ = std::fs::remove_file(&values);
    if output.status.success() {
        Ok(String::from_utf8(output.stdout).expect("UTF-8 output"))
    } else {
        Err(String::from_utf8_lossy(&output.stderr).into_owned())
    }
}

fn typed<T: serde::de::DeserializeOwned>(objects: &BTreeMap<String, Value>, key: &str) -> T {
    let value = objects
        .get(key)
        .unwrap_or_else(|| panic!("{key} not rendered; got {:?}", objects.keys()));
    serde_json::from_value(value.clone()).unwrap_or_else(|error| panic!("{key}: {error}"))
}

fn render(values: &str) -> BTreeMap<String, Value> {
    helm::objects(&template(values, &[]).unwrap_or_else(|error| panic!("helm template: {error}")))
}

fn container(deployment: &Deployment) -> Container {
    let pod = deployment
        .spec
        .as_ref()
        .and_then(|spec| spec.template.spec.as_ref())
        .expect("pod spec");
    assert_eq!(pod.containers.len(), 1);
    pod.containers[0].clone()
}

/// The container's arguments as the operator's own `run` flags see them.
#[derive(Parser)]
struct Run {
    #[command(flatten)]
    options: Options,
}

fn parse_run(args: &[String]) -> Options {
    assert_eq!(args.first().map(String::as_str), Some("run"), "{args:?}");
    let argv = std::iter::once("kcp-operator").chain(args[1..].iter().map(String::as_str));
    Run::try_parse_from(argv)
        .unwrap_or_else(|error| panic!("`run` refuses the chart's arguments {args:?}: {error}"))
        .options
}

fn env_value(container: &Container, name: &str) -> Option<String> {
    container
        .env
        .iter()
        .flatten()
        .find(|env| env.name == name)
        .and_then(|env| env.value.clone())
}

fn env_field(container: &Container, name: &str) -> Option<String> {
    container
        .env
        .iter()
        .flatten()
        .find(|env| env.name == name)
        .and_then(|env| env.value_from.as_ref())
        .and_then(|from| from.field_ref.as_ref())
        .map(|field| field.field_path.clone())
}

fn port(container: &Container, name: &str) -> Option<i32> {
    container
        .ports
        .iter()
        .flatten()
        .find(|port| port.name.as_deref() == Some(name))
        .map(|port| port.container_port)
}

/// Checks what every rendering must hold: labels, bindings to the one ServiceAccount, rules
/// from the code, probes, environment and security context. Returns the Deployment.
fn check_common(objects: &BTreeMap<String, Value>, name: &str) -> Deployment {
    for (key, object) in objects {
        let labels = &object["metadata"]["labels"];
        assert_eq!(labels["app.kubernetes.io/name"], "kcp-operator", "{key}");
        assert_eq!(labels["app.kubernetes.io/instance"], RELEASE, "{key}");
        assert_eq!(
            labels["app.kubernetes.io/version"],
            env!("CARGO_PKG_VERSION"),
            "{key}"
        );
        assert_eq!(labels["app.kubernetes.io/managed-by"], "Helm", "{key}");
        assert_eq!(
            labels["helm.sh/chart"],
            format!("kcp-operator-{}", env!("CARGO_PKG_VERSION")),
            "{key}"
        );
        if !key.starts_with("Cluster") {
            assert_eq!(object["metadata"]["namespace"], NAMESPACE, "{key}");
        }
    }

    let deployment: Deployment = typed(objects, &format!("Deployment/{name}"));
    let spec = deployment.spec.as_ref().expect("spec");
    let pod = spec.template.spec.as_ref().expect("pod spec");
    let selector = spec.selector.match_labels.clone().expect("selector");
    let pod_labels = spec
        .template
        .metadata
        .as_ref()
        .and_then(|meta| meta.labels.clone())
        .expect("pod labels");
    for (key, value) in &selector {
        assert_eq!(pod_labels.get(key), Some(value), "selector label {key}");
    }

    let account = pod
        .service_account_name
        .clone()
        .expect("serviceAccountName");
    if let Some(binding) = objects.get(&format!("ClusterRoleBinding/{name}")) {
        let binding: ClusterRoleBinding = serde_json::from_value(binding.clone()).expect("binding");
        let subjects = binding.subjects.expect("subjects");
        assert_eq!(subjects.len(), 1);
        assert_eq!(subjects[0].kind, "ServiceAccount");
        assert_eq!(subjects[0].name, account);
        assert_eq!(subjects[0].namespace.as_deref(), Some(NAMESPACE));
        assert_eq!(binding.role_ref.kind, "ClusterRole");
        let role: ClusterRole = typed(objects, &format!("ClusterRole/{}", binding.role_ref.name));
        assert_eq!(role.rules, Some(rbac::cluster_rules()), "ClusterRole rules");
    }
    if let Some(binding) = objects.get(&format!("RoleBinding/{name}-leader-election")) {
        let binding: RoleBinding = serde_json::from_value(binding.clone()).expect("binding");
        let subjects = binding.subjects.expect("subjects");
        assert_eq!(subjects.len(), 1);
        assert_eq!(subjects[0].name, account);
        assert_eq!(subjects[0].namespace.as_deref(), Some(NAMESPACE));
        assert_eq!(binding.role_ref.kind, "Role");
        let role: Role = typed(objects, &format!("Role/{}", binding.role_ref.name));
        assert_eq!(role.rules, Some(rbac::namespace_rules()), "Role rules");
    }

    let container = container(&deployment);
    assert_eq!(
        env_field(&container, "POD_NAMESPACE").as_deref(),
        Some("metadata.namespace")
    );
    assert_eq!(
        env_field(&container, "POD_NAME").as_deref(),
        Some("metadata.name")
    );
    let health = port(&container, "health").expect("health port");
    let metrics = port(&container, "metrics").expect("metrics port");
    let options = parse_run(container.args.as_ref().expect("args"));
    assert_eq!(
        options.health_probe_bind_address.socket().map(|s| s.port()),
        Some(u16::try_from(health).expect("port"))
    );
    assert_eq!(
        options.metrics_bind_address.socket().map(|s| s.port()),
        Some(u16::try_from(metrics).expect("port"))
    );
    assert_eq!(
        options.leader_election_namespace.as_deref(),
        Some(NAMESPACE)
    );
    options.timing().expect("lease timings nest");
    for (probe, path) in [
        (container.liveness_probe.as_ref(), "/healthz"),
        (container.readiness_probe.as_ref(), "/readyz"),
    ] {
        let get = probe.and_then(|p| p.http_get.as_ref()).expect("HTTP probe");
        assert_eq!(get.path.as_deref(), Some(path));
        assert_eq!(
            get.port,
            k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String("health".into())
        );
    }

    let security = container
        .security_context
        .as_ref()
        .expect("securityContext");
    assert_eq!(security.run_as_non_root, Some(true));
    assert_eq!(security.read_only_root_filesystem, Some(true));
    assert_eq!(security.allow_privilege_escalation, Some(false));
    assert_eq!(
        security
            .capabilities
            .as_ref()
            .and_then(|caps| caps.drop.clone()),
        Some(vec!["ALL".to_owned()])
    );
    let pod_security = pod.security_context.as_ref().expect("pod securityContext");
    assert_eq!(pod_security.run_as_non_root, Some(true));
    assert_eq!(
        pod_security
            .seccomp_profile
            .as_ref()
            .map(|profile| profile.type_.as_str()),
        Some("RuntimeDefault")
    );
    deployment
}

#[test]
fn helm_lint_passes() {
    refresh();
    for values in ["", OVERRIDES] {
        let file = values_file(values);
        let chart = chart();
        let output = helm::run(&[
            "lint",
            "--strict",
            chart.to_str().expect("UTF-8 path"),
            "--namespace",
            NAMESPACE,
            "--values",
            file.to_str().expect("UTF-8 path"),
        ]);
        let _ = std::fs::remove_file(&file);
        assert!(
            output.status.success(),
            "helm lint failed:\n{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

#[test]
fn default_values_render_the_operator() {
    let objects = render("");
    let keys: BTreeSet<&str> = objects.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        BTreeSet::from([
            "ClusterRole/kcp-operator",
            "ClusterRoleBinding/kcp-operator",
            "Deployment/kcp-operator",
            "Role/kcp-operator-leader-election",
            "RoleBinding/kcp-operator-leader-election",
            "Service/kcp-operator-metrics",
            "ServiceAccount/kcp-operator",
        ])
    );
    let deployment = check_common(&objects, "kcp-operator");
    let account: ServiceAccount = typed(&objects, "ServiceAccount/kcp-operator");
    let pod = deployment
        .spec
        .as_ref()
        .and_then(|spec| spec.template.spec.clone())
        .expect("pod spec");
    assert_eq!(pod.service_account_name, account.metadata.name);
    assert_eq!(deployment.spec.as_ref().and_then(|s| s.replicas), Some(1));
    assert_eq!(pod.image_pull_secrets, None);
    assert_eq!(pod.node_selector, None);

    let container = container(&deployment);
    // Images are tagged like the kcp image the operator deploys: "v" + the version.
    assert_eq!(
        container.image.as_deref(),
        Some(format!("ghcr.io/kcp-rs/kcp-operator:{}", naming::DEFAULT_IMAGE_TAG).as_str())
    );
    assert_eq!(container.image_pull_policy.as_deref(), Some("IfNotPresent"));
    assert_eq!(
        container.args.clone().expect("args"),
        [
            "run",
            "--leader-elect=true",
            "--leader-election-namespace=kcp-system",
            "--leader-elect-lease-duration=15s",
            "--leader-elect-renew-deadline=10s",
            "--leader-elect-retry-period=2s",
            "--metrics-bind-address=:8080",
            "--health-probe-bind-address=:8081",
        ]
    );
    let options = parse_run(container.args.as_ref().expect("args"));
    assert!(options.leader_elect);
    assert_eq!(env_value(&container, "RUST_LOG").as_deref(), Some("info"));
    assert_eq!(port(&container, "metrics"), Some(8080));
    assert_eq!(port(&container, "health"), Some(8081));
    let resources = container.resources.expect("resources");
    assert!(resources.requests.is_some_and(|r| r.contains_key("memory")));

    let service: Service = typed(&objects, "Service/kcp-operator-metrics");
    let spec = service.spec.expect("service spec");
    assert_eq!(
        spec.selector,
        deployment
            .spec
            .map(|s| s.selector.match_labels.expect("labels"))
    );
    let ports = spec.ports.expect("ports");
    assert_eq!(ports.len(), 1);
    assert_eq!(ports[0].name.as_deref(), Some("metrics"));
    assert_eq!(ports[0].port, 8080);
    assert_eq!(
        ports[0].target_port,
        Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String("metrics".into()))
    );
}

const OVERRIDES: &str = r#"
replicaCount: 2
image:
  repository: registry.example/kcp-operator
  tag: v9.9.9-test
  pullPolicy: Always
imagePullSecrets:
  - name: regcred
fullnameOverride: ops
logLevel: info,kcp_operator=debug
leaderElection:
  leaseDuration: 30s
  renewDeadline: 20s
  retryPeriod: 4s
metrics:
  port: 9090
  service:
    port: 9443
healthPort: 9091
podAnnotations:
  example.com/scrape: "true"
podLabels:
  team: platform
nodeSelector:
  kubernetes.io/os: linux
tolerations:
  - key: dedicated
    operator: Equal
    value: control-plane
    effect: NoSchedule
affinity:
  nodeAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      nodeSelectorTerms:
        - matchExpressions:
            - key: kubernetes.io/arch
              operator: In
              values: [amd64, arm64]
priorityClassName: system-cluster-critical
resources:
  requests:
    cpu: 200m
    memory: 128Mi
  limits:
    cpu: "1"
    memory: 1Gi
extraEnv:
  - name: EXTRA
    value: "yes"
"#;

#[test]
fn overridden_values_reach_the_deployment() {
    let objects = render(OVERRIDES);
    let keys: BTreeSet<&str> = objects.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        BTreeSet::from([
            "ClusterRole/ops",
            "ClusterRoleBinding/ops",
            "Deployment/ops",
            "Role/ops-leader-election",
            "RoleBinding/ops-leader-election",
            "Service/ops-metrics",
            "ServiceAccount/ops",
        ])
    );
    let deployment = check_common(&objects, "ops");
    let spec = deployment.spec.clone().expect("spec");
    assert_eq!(spec.replicas, Some(2));
    let meta = spec.template.metadata.expect("pod metadata");
    assert_eq!(
        meta.annotations
            .expect("annotations")
            .get("example.com/scrape")
            .map(String::as_str),
        Some("true")
    );
    assert_eq!(
        meta.labels.expect("labels").get("team").map(String::as_str),
        Some("platform")
    );
    let pod = spec.template.spec.expect("pod spec");
    assert_eq!(pod.service_account_name.as_deref(), Some("ops"));
    assert_eq!(
        pod.image_pull_secrets.expect("pull secrets")[0].name,
        "regcred"
    );
    assert_eq!(
        pod.node_selector
            .expect("nodeSelector")
            .get("kubernetes.io/os")
            .map(String::as_str),
        Some("linux")
    );
    assert_eq!(
        pod.tolerations.expect("tolerations")[0].key.as_deref(),
        Some("dedicated")
    );
    assert!(pod.affinity.and_then(|a| a.node_affinity).is_some());
    assert_eq!(
        pod.priority_class_name.as_deref(),
        Some("system-cluster-critical")
    );

    let container = container(&deployment);
    assert_eq!(
        container.image.as_deref(),
        Some("registry.example/kcp-operator:v9.9.9-test")
    );
    assert_eq!(container.image_pull_policy.as_deref(), Some("Always"));
    assert_eq!(
        env_value(&container, "RUST_LOG").as_deref(),
        Some("info,kcp_operator=debug")
    );
    assert_eq!(env_value(&container, "EXTRA").as_deref(), Some("yes"));
    assert_eq!(port(&container, "metrics"), Some(9090));
    assert_eq!(port(&container, "health"), Some(9091));
    let options = parse_run(container.args.as_ref().expect("args"));
    assert_eq!(options.leader_elect_lease_duration.as_secs(), 30);
    assert_eq!(options.leader_elect_renew_deadline.as_secs(), 20);
    assert_eq!(options.leader_elect_retry_period.as_secs(), 4);
    let resources = container.resources.expect("resources");
    let limits = resources.limits.expect("limits");
    assert_eq!(limits.get("memory").map(|q| q.0.as_str()), Some("1Gi"));
    assert_eq!(limits.get("cpu").map(|q| q.0.as_str()), Some("1"));

    let service: Service = typed(&objects, "Service/ops-metrics");
    let ports = service.spec.and_then(|s| s.ports).expect("ports");
    assert_eq!(ports[0].port, 9443);
}

#[test]
fn extra_args_come_last() {
    let objects = render("extraArgs: [--some-future-flag=1]\n");
    let deployment: Deployment = typed(&objects, "Deployment/kcp-operator");
    let args = container(&deployment).args.expect("args");
    assert_eq!(args.len(), 9, "{args:?}");
    assert_eq!(
        args.last().map(String::as_str),
        Some("--some-future-flag=1")
    );
}

#[test]
fn a_brought_service_account_without_chart_rbac() {
    let objects = render(
        "serviceAccount: {create: false, name: brought}\nrbac: {create: false}\n\
         metrics: {service: {enabled: false}}\nleaderElection: {enabled: false}\n",
    );
    let keys: BTreeSet<&str> = objects.keys().map(String::as_str).collect();
    assert_eq!(keys, BTreeSet::from(["Deployment/kcp-operator"]));
    let deployment = check_common(&objects, "kcp-operator");
    let pod = deployment
        .spec
        .as_ref()
        .and_then(|spec| spec.template.spec.clone())
        .expect("pod spec");
    assert_eq!(pod.service_account_name.as_deref(), Some("brought"));
    let options = parse_run(container(&deployment).args.as_ref().expect("args"));
    assert!(!options.leader_elect);

    let with_rbac = render("serviceAccount: {create: false, name: brought}\n");
    assert!(!with_rbac.contains_key("ServiceAccount/brought"));
    check_common(&with_rbac, "kcp-operator");
    let binding: ClusterRoleBinding = typed(&with_rbac, "ClusterRoleBinding/kcp-operator");
    assert_eq!(binding.subjects.expect("subjects")[0].name, "brought");
}

#[test]
fn invalid_values_are_refused() {
    let error = template("replicaCount: 3\nleaderElection: {enabled: false}\n", &[])
        .expect_err("replicas without election");
    assert!(error.contains("leaderElection.enabled"), "{error}");
    let error = template("serviceAccount: {create: false}\n", &[]).expect_err("no account");
    assert!(error.contains("serviceAccount.name"), "{error}");
}

#[test]
fn crds_are_installed_from_the_chart() {
    let rendered = template("", &["--include-crds"]).expect("helm template --include-crds");
    let crds: BTreeSet<String> = helm::objects(&rendered)
        .into_keys()
        .filter_map(|key| {
            key.strip_prefix("CustomResourceDefinition/")
                .map(str::to_owned)
        })
        .collect();
    let expected: BTreeSet<String> = kcp_operator::crds::definitions()
        .into_iter()
        .filter_map(|crd| crd.metadata.name)
        .collect();
    assert_eq!(crds, expected);
}
