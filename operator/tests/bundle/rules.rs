//! The checks `operator-sdk bundle validate` would make (it cannot be installed here), as pure
//! functions of a bundle's parsed files, each returning the problems it finds. The tests in
//! `main.rs` run them over every bundle kept in the repository; the unit tests below prove each
//! one catches what it is for.

use std::collections::BTreeMap;

use k8s_openapi::api::rbac::v1::PolicyRule;
use kcp_apiextensions::StructuralSchema;
use semver::Version;
use serde_json::Value;

/// One bundle as read from `bundles/<package>/<version>/`.
pub struct Kept {
    /// The directory's name.
    pub dir: String,
    pub csv: Value,
    /// The CRDs under `manifests/`, by file name.
    pub crds: BTreeMap<String, Value>,
    /// `metadata/annotations.yaml`'s `annotations`.
    pub annotations: Value,
    /// `LABEL key=value` lines of `bundle.Dockerfile`.
    pub labels: BTreeMap<String, String>,
}

/// `<package>.v<semver>`.
pub fn csv_name(package: &str, version: &str) -> String {
    format!("{package}.v{version}")
}

fn version_of(csv: &Value) -> Result<Version, String> {
    let text = csv["spec"]["version"].as_str().ok_or("no spec.version")?;
    Version::parse(text).map_err(|error| format!("spec.version {text:?}: {error}"))
}

/// The CSV is named `<package>.v<spec.version>`, `spec.version` is semver, and the bundle's
/// directory is that version.
pub fn csv_name_matches_version(package: &str, kept: &Kept) -> Vec<String> {
    let version = match version_of(&kept.csv) {
        Ok(version) => version,
        Err(error) => return vec![format!("{}: {error}", kept.dir)],
    };
    let mut problems = Vec::new();
    let wanted = csv_name(package, &version.to_string());
    if kept.csv["metadata"]["name"] != wanted.as_str() {
        problems.push(format!(
            "{}: CSV name {} is not {wanted}",
            kept.dir, kept.csv["metadata"]["name"]
        ));
    }
    if kept.dir != version.to_string() {
        problems.push(format!(
            "{}: directory is not spec.version {version}",
            kept.dir
        ));
    }
    problems
}

/// Sorted by version, the first bundle replaces nothing and each later one replaces the one
/// before it; `skips` names only older versions of the package, never the replaced one.
pub fn upgrade_graph(package: &str, kept: &[Kept]) -> Vec<String> {
    let mut versions: Vec<(Version, &Kept)> = Vec::new();
    let mut problems = Vec::new();
    for bundle in kept {
        match version_of(&bundle.csv) {
            Ok(version) => versions.push((version, bundle)),
            Err(error) => problems.push(format!("{}: {error}", bundle.dir)),
        }
    }
    versions.sort_by(|a, b| a.0.cmp(&b.0));
    let prefix = format!("{package}.v");
    for (index, (version, bundle)) in versions.iter().enumerate() {
        let replaces = bundle.csv["spec"]["replaces"].as_str();
        let previous = index
            .checked_sub(1)
            .map(|before| csv_name(package, &versions[before].0.to_string()));
        if replaces != previous.as_deref() {
            problems.push(format!(
                "{version}: replaces {replaces:?}, the previous kept version is {previous:?}"
            ));
        }
        for skipped in bundle.csv["spec"]["skips"].as_array().into_iter().flatten() {
            let skipped = skipped.as_str().unwrap_or_default();
            let older = skipped
                .strip_prefix(&prefix)
                .and_then(|v| Version::parse(v).ok())
                .is_some_and(|v| v < *version);
            if !older || Some(skipped) == replaces {
                problems.push(format!(
                    "{version}: skips {skipped:?} (must be an older {prefix}<semver>, not the replaced one)"
                ));
            }
        }
    }
    problems
}

/// The CRD of `manifests/` named `name`.
fn crd_named<'a>(kept: &'a Kept, name: &str) -> Option<&'a Value> {
    kept.crds
        .values()
        .find(|crd| crd["metadata"]["name"] == name)
}

/// Every owned CRD is in `manifests/` with the same group, kind and (served) version, and every
/// CRD there is owned.
pub fn owned_crds_present(kept: &Kept) -> Vec<String> {
    let mut problems = Vec::new();
    let owned = kept.csv["spec"]["customresourcedefinitions"]["owned"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for entry in &owned {
        let name = entry["name"].as_str().unwrap_or_default();
        let Some(crd) = crd_named(kept, name) else {
            problems.push(format!("{}: owned {name} is not in manifests/", kept.dir));
            continue;
        };
        let group = name.split_once('.').map(|(_, group)| group);
        if crd["spec"]["group"].as_str() != group {
            problems.push(format!(
                "{}: {name} has group {}",
                kept.dir, crd["spec"]["group"]
            ));
        }
        if crd["spec"]["names"]["kind"] != entry["kind"] {
            problems.push(format!(
                "{}: {name} is kind {} in manifests/, {} in the CSV",
                kept.dir, crd["spec"]["names"]["kind"], entry["kind"]
            ));
        }
        let served = crd["spec"]["versions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|version| version["name"] == entry["version"] && version["served"] == true);
        if !served {
            problems.push(format!(
                "{}: {name} does not serve version {}",
                kept.dir, entry["version"]
            ));
        }
    }
    for crd in kept.crds.values() {
        let name = &crd["metadata"]["name"];
        if !owned.iter().any(|entry| entry["name"] == *name) {
            problems.push(format!("{}: {name} in manifests/ is not owned", kept.dir));
        }
    }
    problems
}

/// The `openAPIV3Schema` of `kind` in `group`/`version` among the bundle's CRDs.
fn schema_of<'a>(kept: &'a Kept, group: &str, version: &str, kind: &str) -> Option<&'a Value> {
    kept.crds
        .values()
        .filter(|crd| crd["spec"]["group"] == group && crd["spec"]["names"]["kind"] == kind)
        .flat_map(|crd| crd["spec"]["versions"].as_array().into_iter().flatten())
        .find(|v| v["name"] == version)
        .map(|v| &v["schema"]["openAPIV3Schema"])
}

/// `alm-examples` parses as a list with an object of every owned kind, and each object is valid
/// against its CRD's structural schema as this project's API server applies it: nothing pruned
/// (no unknown fields), then defaulted, then validated (types, formats, required) and the CEL rules.
pub fn alm_examples_valid(kept: &Kept) -> Vec<String> {
    let dir = &kept.dir;
    let text = kept.csv["metadata"]["annotations"]["alm-examples"]
        .as_str()
        .unwrap_or_default();
    let examples: Vec<Value> = match serde_json::from_str(text) {
        Ok(examples) => examples,
        Err(error) => return vec![format!("{dir}: alm-examples is not a JSON list: {error}")],
    };
    let mut problems = Vec::new();
    for entry in kept.csv["spec"]["customresourcedefinitions"]["owned"]
        .as_array()
        .into_iter()
        .flatten()
    {
        if !examples
            .iter()
            .any(|example| example["kind"] == entry["kind"])
        {
            problems.push(format!("{dir}: no example of {}", entry["kind"]));
        }
    }
    for example in &examples {
        let kind = example["kind"].as_str().unwrap_or_default();
        let api_version = example["apiVersion"].as_str().unwrap_or_default();
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let Some(schema) = schema_of(kept, group, version, kind) else {
            problems.push(format!("{dir}: example {kind} ({api_version}) has no CRD"));
            continue;
        };
        let schema = match StructuralSchema::new(schema) {
            Ok(schema) => schema,
            Err(error) => {
                problems.push(format!("{dir}: {kind} schema is not structural: {error:?}"));
                continue;
            }
        };
        let mut object = example.clone();
        schema.prune(&mut object);
        if object != *example {
            problems.push(format!(
                "{dir}: example {kind} has unknown fields (pruned to {object})"
            ));
        }
        schema.apply_defaults(&mut object);
        for error in schema.validate(&object) {
            problems.push(format!("{dir}: example {kind}: {error:?}"));
        }
        for error in schema.validate_cel(&object, None) {
            problems.push(format!("{dir}: example {kind}: {error:?}"));
        }
    }
    problems
}

/// One permission: (group, resource, name or `None` for any, verb).
type Grant = (String, String, Option<String>, String);

fn grants(rules: &[PolicyRule]) -> Vec<Grant> {
    let mut grants = Vec::new();
    for rule in rules {
        let names: Vec<Option<String>> = match &rule.resource_names {
            Some(names) if !names.is_empty() => names.iter().cloned().map(Some).collect(),
            _ => vec![None],
        };
        for group in rule.api_groups.iter().flatten() {
            for resource in rule.resources.iter().flatten() {
                for name in &names {
                    for verb in &rule.verbs {
                        grants.push((group.clone(), resource.clone(), name.clone(), verb.clone()));
                    }
                }
            }
        }
    }
    grants
}

fn allows(rule: &PolicyRule, (group, resource, name, verb): &Grant) -> bool {
    let any = |list: Option<&Vec<String>>, wanted: &str| {
        list.is_some_and(|list| list.iter().any(|item| item == "*" || item == wanted))
    };
    let named = match (&rule.resource_names, name) {
        (None, _) => true,
        (Some(names), _) if names.is_empty() => true,
        (Some(names), Some(name)) => names.contains(name),
        (Some(_), None) => false,
    };
    any(rule.api_groups.as_ref(), group)
        && any(rule.resources.as_ref(), resource)
        && (rule.verbs.iter().any(|v| v == "*" || v == verb))
        && named
}

/// The rules `field` (`clusterPermissions` or `permissions`) of the CSV grants the ServiceAccount
/// the Deployment runs as cover every permission in `derived`.
pub fn permissions_cover(kept: &Kept, field: &str, derived: &[PolicyRule]) -> Vec<String> {
    let install = &kept.csv["spec"]["install"]["spec"];
    let account = &install["deployments"][0]["spec"]["template"]["spec"]["serviceAccountName"];
    let rules: Vec<PolicyRule> = install[field]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|entry| entry["serviceAccountName"] == *account)
        .flat_map(|entry| {
            serde_json::from_value::<Vec<PolicyRule>>(entry["rules"].clone()).unwrap_or_default()
        })
        .collect();
    grants(derived)
        .into_iter()
        .filter(|grant| !rules.iter().any(|rule| allows(rule, grant)))
        .map(|grant| format!("{}: {field} of {account} lack {grant:?}", kept.dir))
        .collect()
}

/// `annotations.yaml` names the registry+v1 mediatype, `manifests/` and `metadata/`, the package,
/// its channels and a default channel among them, and the image labels are the same pairs.
pub fn annotations_match_labels(
    package: &str,
    kept: &Kept,
    labels: &BTreeMap<String, String>,
    labels_from: &str,
) -> Vec<String> {
    let dir = &kept.dir;
    let key = |name: &str| format!("operators.operatorframework.io.bundle.{name}");
    let get = |name: &str| {
        kept.annotations[key(name)]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    let mut problems = Vec::new();
    for (name, wanted) in [
        ("mediatype.v1", "registry+v1"),
        ("manifests.v1", "manifests/"),
        ("metadata.v1", "metadata/"),
        ("package.v1", package),
    ] {
        if get(name) != wanted {
            problems.push(format!(
                "{dir}: {} is {:?}, not {wanted:?}",
                key(name),
                get(name)
            ));
        }
    }
    let channels = get("channels.v1");
    let default = get("channel.default.v1");
    if channels.is_empty() || !channels.split(',').any(|channel| channel == default) {
        problems.push(format!(
            "{dir}: default channel {default:?} not among {channels:?}"
        ));
    }
    let annotations: BTreeMap<String, String> = kept
        .annotations
        .as_object()
        .into_iter()
        .flatten()
        .map(|(key, value)| (key.clone(), value.as_str().unwrap_or_default().to_owned()))
        .collect();
    if annotations != *labels {
        problems.push(format!(
            "{dir}: labels of {labels_from} {labels:?} differ from annotations.yaml {annotations:?}"
        ));
    }
    problems
}

/// Does `path` (dotted, under `root`'s properties) name a field of `schema`?
fn has_path(schema: &Value, root: &str, path: &str) -> bool {
    let mut node = &schema["properties"][root];
    for part in path.split('.') {
        node = &node["properties"][part];
        if node.is_null() {
            return false;
        }
    }
    true
}

/// Every spec and status descriptor names a field of its CRD's schema.
pub fn descriptors_name_fields(kept: &Kept) -> Vec<String> {
    let mut problems = Vec::new();
    for entry in kept.csv["spec"]["customresourcedefinitions"]["owned"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let name = entry["name"].as_str().unwrap_or_default();
        let Some(crd) = crd_named(kept, name) else {
            continue;
        };
        let Some(schema) = crd["spec"]["versions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|version| version["name"] == entry["version"])
            .map(|version| &version["schema"]["openAPIV3Schema"])
        else {
            continue;
        };
        for (list, root) in [("specDescriptors", "spec"), ("statusDescriptors", "status")] {
            for descriptor in entry[list].as_array().into_iter().flatten() {
                let path = descriptor["path"].as_str().unwrap_or_default();
                if !has_path(schema, root, path) {
                    problems.push(format!("{}: {name} has no field {root}.{path}", kept.dir));
                }
            }
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    //! Each check against a kept bundle with one thing broken.

    use serde_json::json;

    use super::*;
    use crate::{PACKAGE, current};

    fn broken(edit: impl FnOnce(&mut Kept)) -> Kept {
        let mut kept = current();
        edit(&mut kept);
        kept
    }

    #[test]
    fn a_csv_named_off_its_version_is_caught() {
        let kept = broken(|kept| kept.csv["spec"]["version"] = json!("9.9.9"));
        assert_eq!(csv_name_matches_version(PACKAGE, &kept).len(), 2);
        let kept = broken(|kept| kept.csv["spec"]["version"] = json!("v1"));
        assert_eq!(csv_name_matches_version(PACKAGE, &kept).len(), 1);
    }

    #[test]
    fn a_broken_upgrade_graph_is_caught() {
        let newer = |replaces: Option<&str>, skips: &[&str]| {
            broken(|kept| {
                kept.dir = "9.0.0".into();
                kept.csv["spec"]["version"] = json!("9.0.0");
                kept.csv["metadata"]["name"] = json!(csv_name(PACKAGE, "9.0.0"));
                kept.csv["spec"]["replaces"] = json!(replaces);
                kept.csv["spec"]["skips"] = json!(skips);
            })
        };
        let previous = csv_name(PACKAGE, current().csv["spec"]["version"].as_str().unwrap());
        let fine = upgrade_graph(PACKAGE, &[current(), newer(Some(&previous), &[])]);
        assert_eq!(fine, Vec::<String>::new());
        assert_eq!(
            upgrade_graph(PACKAGE, &[current(), newer(None, &[])]).len(),
            1
        );
        let skipping_itself = [current(), newer(Some(&previous), &["kcp-operator.v9.0.0"])];
        assert_eq!(upgrade_graph(PACKAGE, &skipping_itself).len(), 1);
        let skipping_replaced = [current(), newer(Some(&previous), &[&previous])];
        assert_eq!(upgrade_graph(PACKAGE, &skipping_replaced).len(), 1);
        let first_replacing =
            broken(|kept| kept.csv["spec"]["replaces"] = json!("kcp-operator.v0.0.1"));
        assert_eq!(upgrade_graph(PACKAGE, &[first_replacing]).len(), 1);
    }

    #[test]
    fn a_missing_or_different_crd_is_caught() {
        let kept = broken(|kept| {
            let name = kept.crds.keys().next().unwrap().clone();
            kept.crds.remove(&name);
        });
        assert_eq!(owned_crds_present(&kept).len(), 1);
        let kept = broken(|kept| {
            let owned = &mut kept.csv["spec"]["customresourcedefinitions"]["owned"][0];
            owned["kind"] = json!("Other");
            owned["version"] = json!("v9");
        });
        assert_eq!(owned_crds_present(&kept).len(), 2);
        let kept = broken(|kept| {
            kept.csv["spec"]["customresourcedefinitions"]["owned"]
                .as_array_mut()
                .unwrap()
                .pop();
        });
        assert_eq!(owned_crds_present(&kept).len(), 1, "a CRD nobody owns");
    }

    fn with_examples(edit: impl FnOnce(&mut Vec<Value>)) -> Kept {
        broken(|kept| {
            let annotations = &mut kept.csv["metadata"]["annotations"];
            let mut examples: Vec<Value> =
                serde_json::from_str(annotations["alm-examples"].as_str().unwrap()).unwrap();
            edit(&mut examples);
            annotations["alm-examples"] = json!(serde_json::to_string(&examples).unwrap());
        })
    }

    #[test]
    fn invalid_examples_are_caught() {
        let wrong_type = with_examples(|examples| examples[0]["spec"]["replicas"] = json!("two"));
        assert_eq!(
            alm_examples_valid(&wrong_type).len(),
            1,
            "{:?}",
            alm_examples_valid(&wrong_type)
        );
        let unknown = with_examples(|examples| examples[0]["spec"]["colour"] = json!("blue"));
        assert_eq!(alm_examples_valid(&unknown).len(), 1);
        let missing = with_examples(|examples| {
            examples.retain(|example| example["kind"] != "Kubeconfig");
        });
        assert_eq!(alm_examples_valid(&missing).len(), 1);
        let required = with_examples(|examples| {
            let kubeconfig = examples
                .iter_mut()
                .find(|e| e["kind"] == "Kubeconfig")
                .unwrap();
            kubeconfig["spec"]
                .as_object_mut()
                .unwrap()
                .remove("username");
        });
        assert!(!alm_examples_valid(&required).is_empty());
    }

    #[test]
    fn missing_permissions_are_caught() {
        let derived = vec![PolicyRule {
            api_groups: Some(vec!["coordination.k8s.io".into()]),
            resources: Some(vec!["leases".into()]),
            resource_names: Some(vec!["kcp-operator".into()]),
            verbs: vec!["get".into(), "update".into()],
            non_resource_urls: None,
        }];
        assert_eq!(
            permissions_cover(&current(), "permissions", &derived),
            Vec::<String>::new()
        );
        let narrowed = broken(|kept| {
            kept.csv["spec"]["install"]["spec"]["permissions"][0]["rules"][1]["resourceNames"] =
                json!(["someone-else"]);
        });
        assert_eq!(
            permissions_cover(&narrowed, "permissions", &derived).len(),
            2
        );
        let other_account = broken(|kept| {
            kept.csv["spec"]["install"]["spec"]["permissions"][0]["serviceAccountName"] =
                json!("another");
        });
        assert_eq!(
            permissions_cover(&other_account, "permissions", &derived).len(),
            2
        );
        let wildcard = broken(|kept| {
            kept.csv["spec"]["install"]["spec"]["permissions"][0]["rules"] =
                json!([{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]);
        });
        assert_eq!(
            permissions_cover(&wildcard, "permissions", &derived),
            Vec::<String>::new()
        );
    }

    #[test]
    fn annotations_off_the_labels_are_caught() {
        let kept = current();
        let labels = kept.labels.clone();
        assert_eq!(
            annotations_match_labels(PACKAGE, &kept, &labels, "x"),
            Vec::<String>::new()
        );
        let mut other = labels.clone();
        other.insert("extra".into(), "1".into());
        assert_eq!(
            annotations_match_labels(PACKAGE, &kept, &other, "x").len(),
            1
        );
        let kept = broken(|kept| {
            kept.annotations["operators.operatorframework.io.bundle.channel.default.v1"] =
                json!("stable");
            kept.annotations["operators.operatorframework.io.bundle.manifests.v1"] =
                json!("manifests");
        });
        assert_eq!(
            annotations_match_labels(PACKAGE, &kept, &labels, "x").len(),
            3
        );
    }

    #[test]
    fn a_descriptor_of_a_missing_field_is_caught() {
        let kept = broken(|kept| {
            kept.csv["spec"]["customresourcedefinitions"]["owned"][0]["specDescriptors"][0]["path"] =
                json!("image.nope");
            kept.csv["spec"]["customresourcedefinitions"]["owned"][1]["statusDescriptors"][0]["path"] =
                json!("nope");
        });
        assert_eq!(descriptors_name_fields(&kept).len(), 2);
    }
}
