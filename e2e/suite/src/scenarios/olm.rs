//! Scenario 13: the operator installed from its OLM bundle (`bundles/kcp-operator/<version>/`)
//! the way OLM installs a ClusterServiceVersion, then the RootShard scenario on it.
//!
//! OLM is not on the host, so the suite does what OLM's install strategy does with the bundle's
//! own files (as OLM's `deployment` strategy and its RBAC resolution describe): apply the CRDs of
//! `manifests/`; create, in the operator namespace, the ServiceAccount each `permissions` /
//! `clusterPermissions` entry names, a Role + RoleBinding per `permissions` entry and a
//! ClusterRole + ClusterRoleBinding per `clusterPermissions` entry (OLM's `olm.owner` labels on
//! them), and each Deployment of `install.spec.deployments` with its `label`s. Nothing comes from
//! the Helm chart: when the chart scenario ran first, its release is uninstalled (Helm keeps the
//! CRDs, which the bundle's then update), so a permission the CSV lacks shows up as a failing
//! operator.
//!
//! After scenario 6 (everything deleted) it brings the RootShard scenario up again on the
//! bundle-installed operator, deletes it like scenario 6, and removes what it installed.
//! `E2E_SCENARIOS=13` runs it alone on a fresh host.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::chart::{OPERATOR_NAMESPACE, RELEASE, deployment_available};
use super::{NAMESPACE, POLL, Suite, deletion, rootshard};
use crate::Outcome;
use crate::cluster::{eventually, is_true};
use crate::host::local::repo_root;

/// The namespace OLM installs `AllNamespaces` operators into by default.
pub const OLM_NAMESPACE: &str = "operators";
/// The bundle of this build's version.
const VERSION: &str = env!("CARGO_PKG_VERSION");
const CSV_FILE: &str = "kcp-operator.clusterserviceversion.yaml";

/// `bundles/kcp-operator/<version>/manifests`.
pub fn manifests() -> PathBuf {
    repo_root()
        .join("bundles/kcp-operator")
        .join(VERSION)
        .join("manifests")
}

/// The bundle's ClusterServiceVersion.
pub fn read_csv() -> Result<Value, String> {
    let path = manifests().join(CSV_FILE);
    let text =
        std::fs::read_to_string(&path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    yaml_serde::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// The labels OLM puts on what it creates for a CSV.
fn owner_labels(csv: &str, namespace: &str) -> Value {
    json!({
        "olm.owner": csv,
        "olm.owner.kind": "ClusterServiceVersion",
        "olm.owner.namespace": namespace,
    })
}

/// What OLM creates in `namespace` (and cluster-wide) for `csv`'s install strategy, in the order
/// it creates them: ServiceAccounts, Roles and bindings, ClusterRoles and bindings, Deployments.
pub fn install_objects(csv: &Value, namespace: &str) -> Result<Vec<Value>, String> {
    let name = csv["metadata"]["name"]
        .as_str()
        .ok_or("CSV without a name")?;
    let install = &csv["spec"]["install"];
    if install["strategy"] != "deployment" {
        return Err(format!("install strategy {}", install["strategy"]));
    }
    let spec = &install["spec"];
    let labels = owner_labels(name, namespace);
    let mut accounts = Vec::new();
    let mut rbac = Vec::new();
    for (field, role_kind, binding_kind) in [
        ("permissions", "Role", "RoleBinding"),
        ("clusterPermissions", "ClusterRole", "ClusterRoleBinding"),
    ] {
        for (index, entry) in spec[field].as_array().into_iter().flatten().enumerate() {
            let account = entry["serviceAccountName"]
                .as_str()
                .ok_or_else(|| format!("{field}[{index}] without serviceAccountName"))?;
            if !accounts.contains(&account) {
                accounts.push(account);
            }
            let role = format!("{name}-{account}-{}", index);
            let role = if role_kind == "Role" {
                role
            } else {
                format!("{role}-cluster")
            };
            let mut metadata = json!({ "name": role, "labels": labels });
            if role_kind == "Role" {
                metadata["namespace"] = json!(namespace);
            }
            rbac.push(json!({
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": role_kind,
                "metadata": metadata,
                "rules": entry["rules"],
            }));
            rbac.push(json!({
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": binding_kind,
                "metadata": metadata,
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": role_kind,
                    "name": role,
                },
                "subjects": [{ "kind": "ServiceAccount", "name": account, "namespace": namespace }],
            }));
        }
    }
    let mut objects: Vec<Value> = accounts
        .into_iter()
        .map(|account| {
            json!({
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": { "name": account, "namespace": namespace, "labels": labels },
            })
        })
        .collect();
    objects.extend(rbac);
    for (index, deployment) in spec["deployments"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let mut all_labels = labels.clone();
        for (key, value) in deployment["label"].as_object().into_iter().flatten() {
            all_labels[key] = value.clone();
        }
        objects.push(json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {
                "name": deployment["name"].as_str().ok_or_else(|| format!("deployments[{index}] without a name"))?,
                "namespace": namespace,
                "labels": all_labels,
            },
            "spec": deployment["spec"],
        }));
    }
    if !objects.iter().any(|object| object["kind"] == "Deployment") {
        return Err("the CSV installs no Deployment".into());
    }
    Ok(objects)
}

/// The CRD files of the bundle's `manifests/`.
fn crd_files() -> Result<Vec<PathBuf>, String> {
    let dir = manifests();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map_err(|e| format!("reading {}: {e}", dir.display()))?
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| path.file_name().is_some_and(|name| name != CSV_FILE))
        .collect();
    files.sort();
    Ok(files)
}

pub fn install_and_run(suite: &mut Suite) -> Outcome {
    let admin = suite.host.admin();
    let csv = read_csv()?;
    let name = csv["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();

    // The suite's figure is the memory of the operator that ran every earlier scenario.
    suite.figures.operator_memory_mib = suite.host.operator_memory_mib();
    suite
        .narrator
        .step("helm uninstall kcp-operator (if the chart scenario installed it; CRDs stay)");
    suite.host.helm(&[
        "uninstall",
        RELEASE,
        "--namespace",
        OPERATOR_NAMESPACE,
        "--ignore-not-found",
    ])?;
    eventually(
        "Helm-installed operator gone",
        Duration::from_secs(120),
        POLL,
        || {
            let pods = admin
                .get(&["pods", "-n", OPERATOR_NAMESPACE])?
                .unwrap_or_default();
            match pods["items"].as_array().map(Vec::len).unwrap_or_default() {
                0 => Ok(()),
                left => Err(format!("{left} pods left")),
            }
        },
    )?;
    eventually(
        &format!("namespace {NAMESPACE} gone or active"),
        Duration::from_secs(120),
        POLL,
        || match admin.get(&["namespace", NAMESPACE])? {
            Some(namespace) if namespace["status"]["phase"] == "Terminating" => {
                Err("terminating".to_owned())
            }
            _ => Ok(()),
        },
    )?;

    suite.narrator.step(&format!(
        "CRDs from bundles/kcp-operator/{VERSION}/manifests"
    ));
    for file in crd_files()? {
        admin.run(&[
            "apply",
            "--server-side",
            "--force-conflicts",
            "-f",
            &file.display().to_string(),
        ])?;
    }
    for file in crd_files()? {
        let text = std::fs::read_to_string(&file).map_err(|e| e.to_string())?;
        let crd: Value = yaml_serde::from_str(&text).map_err(|e| e.to_string())?;
        let crd_name = crd["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        eventually(
            &format!("CRD {crd_name} established"),
            Duration::from_secs(60),
            POLL,
            || match admin.get(&["crd", &crd_name])? {
                Some(object) if is_true(&object, "Established") => Ok(()),
                other => Err(format!("{other:?}")),
            },
        )?;
    }

    suite.narrator.step(&format!(
        "{name}: ServiceAccount, Role(s), ClusterRole(s), bindings and Deployment in {OLM_NAMESPACE}, as OLM creates them"
    ));
    let began = Instant::now();
    admin.apply(&format!(
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {OLM_NAMESPACE}\n"
    ))?;
    let objects = install_objects(&csv, OLM_NAMESPACE)?;
    for object in &objects {
        admin.apply(&object.to_string())?;
    }
    let deployments: Vec<String> = objects
        .iter()
        .filter(|object| object["kind"] == "Deployment")
        .filter_map(|object| object["metadata"]["name"].as_str().map(str::to_owned))
        .collect();
    for deployment in &deployments {
        deployment_available(&admin, OLM_NAMESPACE, deployment)?;
    }
    suite.narrator.step(&format!(
        "operator Available {:.1}s after the install",
        began.elapsed().as_secs_f64()
    ));

    let earlier = suite.figures.root_shard_available;
    rootshard::apply_and_use(suite)?;
    if earlier.is_some() {
        // The figure is scenario 2's; this run only proves the bundle.
        suite.figures.root_shard_available = earlier;
    }
    deletion::delete_everything(suite)?;

    suite
        .narrator
        .step("remove what the install made (OLM keeps the CRDs when a CSV goes)");
    let selector = format!("olm.owner={name}");
    admin.run(&[
        "delete",
        "clusterrolebindings,clusterroles",
        "-l",
        &selector,
        "--ignore-not-found",
    ])?;
    admin.run(&["delete", "namespace", OLM_NAMESPACE, "--wait=false"])?;
    Ok(())
}

#[cfg(test)]
mod tests {
    //! The translation of the committed bundle's install strategy.
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn kinds(objects: &[Value]) -> Vec<String> {
        objects
            .iter()
            .map(|o| {
                format!(
                    "{}/{}",
                    o["kind"].as_str().unwrap(),
                    o["metadata"]["name"].as_str().unwrap()
                )
            })
            .collect()
    }

    #[test]
    fn the_bundle_installs_an_account_its_rbac_and_the_deployment() {
        let csv = read_csv().unwrap();
        let name = csv["metadata"]["name"].as_str().unwrap();
        let objects = install_objects(&csv, "ops").unwrap();
        assert_eq!(
            kinds(&objects),
            vec![
                "ServiceAccount/kcp-operator".to_owned(),
                format!("Role/{name}-kcp-operator-0"),
                format!("RoleBinding/{name}-kcp-operator-0"),
                format!("ClusterRole/{name}-kcp-operator-0-cluster"),
                format!("ClusterRoleBinding/{name}-kcp-operator-0-cluster"),
                "Deployment/kcp-operator".to_owned(),
            ]
        );
        let install = &csv["spec"]["install"]["spec"];
        assert_eq!(objects[1]["rules"], install["permissions"][0]["rules"]);
        assert_eq!(
            objects[3]["rules"],
            install["clusterPermissions"][0]["rules"]
        );
        for binding in [&objects[2], &objects[4]] {
            assert_eq!(binding["subjects"][0]["name"], "kcp-operator");
            assert_eq!(binding["subjects"][0]["namespace"], "ops");
        }
        assert_eq!(objects[1]["metadata"]["namespace"], "ops");
        assert!(objects[3]["metadata"]["namespace"].is_null());
        let deployment = &objects[5];
        assert_eq!(deployment["metadata"]["namespace"], "ops");
        assert_eq!(deployment["metadata"]["labels"]["olm.owner"], name);
        assert_eq!(
            deployment["spec"]["template"]["spec"]["serviceAccountName"],
            "kcp-operator"
        );
        let owned = csv["spec"]["customresourcedefinitions"]["owned"]
            .as_array()
            .unwrap();
        assert_eq!(crd_files().unwrap().len(), owned.len());
    }

    #[test]
    fn a_csv_without_the_deployment_strategy_is_refused() {
        let mut csv = read_csv().unwrap();
        csv["spec"]["install"]["strategy"] = json!("helm");
        assert!(install_objects(&csv, "ops").is_err());
        let mut csv = read_csv().unwrap();
        csv["spec"]["install"]["spec"]["deployments"] = json!([]);
        assert!(install_objects(&csv, "ops").is_err());
    }
}
