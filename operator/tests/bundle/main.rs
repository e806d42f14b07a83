//! The OLM bundle `bundles/kcp-operator/<version>/` must not drift from the code, and must pass
//! the checks `operator-sdk bundle validate` would make (operator-sdk cannot be installed here):
//!
//! - the files of this workspace version are exactly what `generate` makes from the code (the
//!   CRDs, the RBAC the controllers' source derives, the Helm chart's Deployment);
//! - every kept version (older ones are frozen as released) passes each rule of `rules`, one
//!   test per rule, named after it.
//!
//! `UPDATE_BUNDLE=1 cargo test -p kcp-operator --test bundle` rewrites this version's bundle
//! (run it after `UPDATE_CHART=1 ... --test chart` when the controllers' RBAC changed). Helm
//! comes from `$HELM` or `PATH` (the Deployment is the chart's); without it the tests fail.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../support/helm.rs"]
mod helm;

mod examples;
mod generate;
mod owned;
mod rules;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Once;

use clap::Parser;
use kcp_operator::manager::Options;
use kcp_operator::{crds, rbac};
use serde_json::Value;

use rules::Kept;

/// The OLM package.
pub const PACKAGE: &str = "kcp-operator";
/// The one channel (the API is v1alpha1).
pub const CHANNEL: &str = "alpha";
/// This workspace's version, the bundle `generate` writes.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
/// The CSV's file under `manifests/`.
pub const CSV_FILE: &str = "kcp-operator.clusterserviceversion.yaml";
const REFRESH: &str = "refresh with UPDATE_BUNDLE=1 cargo test -p kcp-operator --test bundle";

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// `bundles/kcp-operator`: one directory per kept version.
pub fn bundles() -> PathBuf {
    repo().join("bundles").join(PACKAGE)
}

pub fn csv_name(version: &str) -> String {
    rules::csv_name(PACKAGE, version)
}

/// The versions kept under `bundles/kcp-operator/` (directories named by a semver).
pub fn kept_versions() -> Vec<semver::Version> {
    let mut versions: Vec<semver::Version> = std::fs::read_dir(bundles())
        .expect("bundles/kcp-operator")
        .map(|entry| entry.expect("directory entry"))
        .filter(|entry| entry.path().is_dir())
        .filter_map(|entry| semver::Version::parse(&entry.file_name().to_string_lossy()).ok())
        .collect();
    versions.sort();
    versions
}

/// The chart's Deployment rendered with its default values.
pub fn chart_deployment() -> Value {
    let chart = repo().join("charts/kcp-operator");
    let output = helm::run(&[
        "template",
        PACKAGE,
        chart.to_str().expect("UTF-8 path"),
        "--namespace",
        "kcp-operator",
    ]);
    assert!(
        output.status.success(),
        "helm template: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let objects = helm::objects(&String::from_utf8(output.stdout).expect("UTF-8"));
    objects
        .get(&format!("Deployment/{PACKAGE}"))
        .cloned()
        .unwrap_or_else(|| panic!("no Deployment/{PACKAGE} in {:?}", objects.keys()))
}

fn files_under(dir: &Path) -> BTreeMap<String, String> {
    let mut files = BTreeMap::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(next) = pending.pop() {
        for entry in std::fs::read_dir(&next).into_iter().flatten() {
            let path = entry.expect("directory entry").path();
            if path.is_dir() {
                pending.push(path);
            } else {
                let name = path
                    .strip_prefix(dir)
                    .expect("under dir")
                    .to_string_lossy()
                    .into_owned();
                files.insert(name, std::fs::read_to_string(&path).expect("UTF-8 file"));
            }
        }
    }
    files
}

/// With `UPDATE_BUNDLE` set, rewrites this version's bundle once, before any test of this
/// binary reads it (tests run in parallel).
fn refresh() {
    static ONCE: Once = Once::new();
    if std::env::var_os("UPDATE_BUNDLE").is_none() {
        return;
    }
    ONCE.call_once(|| {
        let dir = bundles().join(VERSION);
        let wanted = generate::files();
        for name in files_under(&dir).keys() {
            if !wanted.contains_key(name) {
                std::fs::remove_file(dir.join(name)).expect("remove stale file");
            }
        }
        for (name, text) in &wanted {
            let path = dir.join(name);
            std::fs::create_dir_all(path.parent().expect("parent")).expect("create directory");
            std::fs::write(&path, text).expect("write bundle file");
        }
    });
}

fn yaml(text: &str) -> Value {
    yaml_serde::from_str(text).expect("YAML parses")
}

/// `LABEL key=value` lines of a Dockerfile (or of a documented one).
fn labels(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|line| line.trim().strip_prefix("LABEL "))
        .filter_map(|label| label.split_once('='))
        .map(|(key, value)| (key.trim().to_owned(), value.trim().to_owned()))
        .collect()
}

/// One kept bundle, read from its directory.
fn read(version: &str) -> Kept {
    refresh();
    let files = files_under(&bundles().join(version));
    let file = |name: &str| {
        files
            .get(name)
            .unwrap_or_else(|| panic!("bundles/{PACKAGE}/{version}/{name} missing; {REFRESH}"))
    };
    Kept {
        dir: version.to_owned(),
        csv: yaml(file(&format!("manifests/{CSV_FILE}"))),
        crds: files
            .iter()
            .filter(|(name, _)| name.starts_with("manifests/") && !name.ends_with(CSV_FILE))
            .map(|(name, text)| (name.clone(), yaml(text)))
            .collect(),
        annotations: yaml(file("metadata/annotations.yaml"))["annotations"].clone(),
        labels: labels(file("bundle.Dockerfile")),
    }
}

/// Every kept bundle, oldest first.
fn kept() -> Vec<Kept> {
    refresh();
    let kept: Vec<Kept> = kept_versions()
        .iter()
        .map(|v| read(&v.to_string()))
        .collect();
    assert!(
        !kept.is_empty(),
        "no bundle under bundles/{PACKAGE}/; {REFRESH}"
    );
    kept
}

/// This version's bundle.
pub fn current() -> Kept {
    read(VERSION)
}

fn assert_none(problems: Vec<String>) {
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
fn bundle_files_are_generated_from_the_code() {
    refresh();
    let on_disk = files_under(&bundles().join(VERSION));
    let wanted = generate::files();
    let differing: Vec<&String> = on_disk
        .keys()
        .chain(wanted.keys())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .filter(|name| on_disk.get(*name) != wanted.get(*name))
        .collect();
    assert!(
        differing.is_empty(),
        "bundles/{PACKAGE}/{VERSION}: stale {differing:?}; {REFRESH}"
    );
}

#[test]
fn manifests_crds_are_copies_of_the_repository_crds() {
    let kept = current();
    let source: BTreeMap<String, Value> = crds::definitions()
        .iter()
        .map(|crd| {
            let text = std::fs::read_to_string(repo().join("crds").join(crds::file_name(crd)))
                .expect("crds/ file");
            (format!("manifests/{}", crds::file_name(crd)), yaml(&text))
        })
        .collect();
    assert_eq!(kept.crds, source);
}

#[test]
fn csv_name_is_package_v_semver_matching_spec_version() {
    for kept in kept() {
        assert_none(rules::csv_name_matches_version(PACKAGE, &kept));
    }
}

#[test]
fn replaces_and_skips_are_consistent_across_kept_versions() {
    assert_none(rules::upgrade_graph(PACKAGE, &kept()));
}

#[test]
fn every_owned_crd_is_in_manifests_with_the_same_group_kind_versions() {
    for kept in kept() {
        assert_none(rules::owned_crds_present(&kept));
    }
}

#[test]
fn every_kind_of_the_code_is_owned() {
    let kept = current();
    let owned: BTreeSet<String> = kept.csv["spec"]["customresourcedefinitions"]["owned"]
        .as_array()
        .expect("owned")
        .iter()
        .map(|entry| entry["name"].as_str().expect("name").to_owned())
        .collect();
    let defined: BTreeSet<String> = crds::definitions()
        .into_iter()
        .filter_map(|crd| crd.metadata.name)
        .collect();
    assert_eq!(owned, defined);
}

#[test]
fn every_alm_example_is_valid_against_its_crd_schema() {
    for kept in kept() {
        assert_none(rules::alm_examples_valid(&kept));
    }
}

/// The examples form one deployment the operator's own validation accepts (references resolved
/// among the examples), so they are working examples, not only well-typed ones.
#[test]
fn alm_examples_pass_the_operators_validation() {
    use kcp_operator::api::{CacheServer, FrontProxy, Kubeconfig, RootShard, Shard};
    use kcp_operator::validate;
    let kept = current();
    let examples: Vec<Value> = serde_json::from_str(
        kept.csv["metadata"]["annotations"]["alm-examples"]
            .as_str()
            .expect("alm-examples"),
    )
    .expect("JSON");
    let typed = |kind: &str| {
        let mut object = examples
            .iter()
            .find(|e| e["kind"] == kind)
            .expect(kind)
            .clone();
        object["metadata"]["namespace"] = Value::from("kcp");
        object["metadata"]["uid"] = Value::from(format!("uid-{kind}"));
        object
    };
    let root: RootShard = serde_json::from_value(typed("RootShard")).expect("RootShard");
    let shard: Shard = serde_json::from_value(typed("Shard")).expect("Shard");
    let proxy: FrontProxy = serde_json::from_value(typed("FrontProxy")).expect("FrontProxy");
    let cache: CacheServer = serde_json::from_value(typed("CacheServer")).expect("CacheServer");
    let kubeconfig: Kubeconfig = serde_json::from_value(typed("Kubeconfig")).expect("Kubeconfig");
    validate::root_shard(&root).expect("RootShard example");
    validate::shard(&shard, Some(&root)).expect("Shard example");
    validate::front_proxy(&proxy, Some(&root)).expect("FrontProxy example");
    validate::cache_server(&cache).expect("CacheServer example");
    validate::kubeconfig(
        &kubeconfig,
        Some(validate::KubeconfigTarget::FrontProxy(&proxy, &root)),
    )
    .expect("Kubeconfig example");
}

#[test]
fn csv_permissions_are_a_superset_of_what_the_code_derives() {
    let kept = current();
    assert_none(rules::permissions_cover(
        &kept,
        "clusterPermissions",
        &rbac::cluster_rules(),
    ));
    assert_none(rules::permissions_cover(
        &kept,
        "permissions",
        &rbac::namespace_rules(),
    ));
}

#[test]
fn annotations_match_the_bundle_image_labels() {
    let readme = std::fs::read_to_string(repo().join("bundles/README.md")).expect("README");
    let documented = labels(
        readme
            .split("```dockerfile")
            .nth(1)
            .and_then(|block| block.split("```").next())
            .expect("a ```dockerfile block in bundles/README.md"),
    );
    for kept in kept() {
        assert_none(rules::annotations_match_labels(
            PACKAGE,
            &kept,
            &kept.labels,
            "bundle.Dockerfile",
        ));
    }
    assert_none(rules::annotations_match_labels(
        PACKAGE,
        &current(),
        &documented,
        "bundles/README.md",
    ));
}

#[test]
fn descriptors_name_fields_of_the_crd_schema() {
    for kept in kept() {
        assert_none(rules::descriptors_name_fields(&kept));
    }
}

/// The container's arguments as the operator's own `run` flags see them.
#[derive(Parser)]
struct Run {
    #[command(flatten)]
    options: Options,
}

/// The Deployment runs `kcp-operator run` with flags the operator accepts, takes its lease
/// namespace from `POD_NAMESPACE` (OLM picks the namespace), and runs as the ServiceAccount the
/// permissions are for; the install modes say it watches all namespaces, as it does.
#[test]
fn the_deployment_runs_where_olm_puts_it() {
    let kept = current();
    let install = &kept.csv["spec"]["install"];
    assert_eq!(install["strategy"], "deployment");
    let deployment = &install["spec"]["deployments"][0];
    let pod = &deployment["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    let args: Vec<&str> = container["args"]
        .as_array()
        .expect("args")
        .iter()
        .map(|arg| arg.as_str().expect("string"))
        .collect();
    assert_eq!(args.first(), Some(&"run"));
    let argv = std::iter::once("kcp-operator").chain(args[1..].iter().copied());
    let options = Run::try_parse_from(argv)
        .expect("run accepts the arguments")
        .options;
    assert_eq!(options.leader_election_namespace, None, "{args:?}");
    assert!(options.leader_elect);
    let env = container["env"].as_array().expect("env");
    assert!(env.iter().any(|e| e["name"] == "POD_NAMESPACE"
        && e["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"));
    for field in ["permissions", "clusterPermissions"] {
        assert_eq!(
            install["spec"][field][0]["serviceAccountName"], pod["serviceAccountName"],
            "{field}"
        );
    }
    let labels = deployment["spec"]["template"]["metadata"]["labels"]
        .as_object()
        .expect("labels");
    assert!(
        !labels.keys().any(|key| key.starts_with("helm.sh/")),
        "{labels:?}"
    );
    let modes: BTreeMap<&str, bool> = kept.csv["spec"]["installModes"]
        .as_array()
        .expect("installModes")
        .iter()
        .map(|mode| {
            (
                mode["type"].as_str().expect("type"),
                mode["supported"] == true,
            )
        })
        .collect();
    assert_eq!(
        modes,
        BTreeMap::from([
            ("AllNamespaces", true),
            ("MultiNamespace", false),
            ("OwnNamespace", false),
            ("SingleNamespace", false),
        ])
    );
    assert_eq!(
        kept.csv["metadata"]["annotations"]["containerImage"], container["image"],
        "containerImage"
    );
}

/// What a catalog shows: icon, links, maintainers, maturity, provider, minKubeVersion.
#[test]
fn catalog_metadata_is_complete() {
    let spec = current().csv["spec"].clone();
    for field in ["displayName", "description", "maturity", "minKubeVersion"] {
        assert!(
            spec[field].as_str().is_some_and(|v| !v.is_empty()),
            "{field}"
        );
    }
    semver::Version::parse(spec["minKubeVersion"].as_str().unwrap()).expect("minKubeVersion");
    for list in ["icon", "links", "maintainers", "keywords"] {
        assert!(
            spec[list].as_array().is_some_and(|l| !l.is_empty()),
            "{list}"
        );
    }
    assert_eq!(spec["icon"][0]["mediatype"], "image/svg+xml");
    assert!(spec["provider"]["name"].is_string());
}
