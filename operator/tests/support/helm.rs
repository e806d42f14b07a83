//! Helm as the chart and bundle tests run it: the binary from `$HELM` or `PATH` (never skipped:
//! without it the tests fail and say how to install it), and `helm template` output split into
//! objects by `Kind/name`. Shared by `tests/chart.rs` and `tests/bundle/` (included with
//! `#[path]`, so the reconcile tests' `support` module does not carry it).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Output};

use serde::Deserialize;
use serde_json::Value;

/// `$HELM`, else `helm` on `PATH`.
pub fn binary() -> PathBuf {
    if let Some(path) = std::env::var_os("HELM") {
        return PathBuf::from(path);
    }
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join("helm"))
        .find(|path| path.is_file())
        .unwrap_or_else(|| {
            panic!(
                "helm not found (neither $HELM nor helm on PATH): run `bash e2e/tools/install-helm.sh` \
                 to install Helm 4 to /usr/local/bin, or set HELM=/path/to/helm"
            )
        })
}

/// Runs Helm with `args`.
pub fn run(args: &[&str]) -> Output {
    let helm = binary();
    Command::new(&helm)
        .args(args)
        .output()
        .unwrap_or_else(|error| panic!("failed to run {}: {error}", helm.display()))
}

/// The rendered objects of a `helm template` stream, by `Kind/name`.
pub fn objects(rendered: &str) -> BTreeMap<String, Value> {
    let mut objects = BTreeMap::new();
    for document in yaml_serde::Deserializer::from_str(rendered) {
        let value = Value::deserialize(document).expect("rendered YAML parses");
        if value.is_null() {
            continue;
        }
        let key = format!(
            "{}/{}",
            value["kind"].as_str().expect("kind"),
            value["metadata"]["name"].as_str().expect("name")
        );
        assert!(objects.insert(key.clone(), value).is_none(), "{key} twice");
    }
    objects
}
