//! Upstream kcp's etcd key layout: `/<prefix>/<group>/<resource>/<logical-cluster>/[<namespace>/]<name>`,
//! with `core` standing for the legacy group, and custom resources (types a CRD defines) one level
//! deeper, under `/<prefix>/<group>/<resource>/customresources/<logical-cluster>/...`, so a built-in type
//! and a CRD of the same group and resource never share keys. Resources bound from an APIExport are
//! stored under the export's identity hash instead, `/<prefix>/<group>/<resource>/<identityHash>/
//! <logical-cluster>/...`, so two exports of the same group and resource never share keys either.
//!
//! Every list is a prefix range over this layout: one namespace, one logical cluster, or (for the `*`
//! wildcard) every logical cluster of the resource.

use std::sync::Arc;

use crate::LogicalClusterName;

/// Whether a type is built in, defined by a CustomResourceDefinition or bound from an APIExport
/// (which decides its keys).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyLayout {
    BuiltIn,
    CustomResource,
    /// Bound from an APIExport with this identity hash.
    Bound(Arc<str>),
}

/// The path segment that puts custom resources beside built-in types of the same name.
pub(crate) const CUSTOM_RESOURCES_SEGMENT: &str = "customresources";

/// The keys of one resource type (group + plural) under a storage prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceKeys {
    /// `/<prefix>/<group>/<resource>/`
    root: String,
}

/// `/<prefix>/<group>/`: every resource of an API group (built-in and custom), in every logical
/// cluster. One watch over it replaces one per resource where a reader follows a whole group.
pub fn group_root(prefix: &str, group: &str) -> String {
    let group = if group.is_empty() { "core" } else { group };
    format!("{}/{group}/", prefix.trim_end_matches('/'))
}

/// Whether a key segment is an identity hash (64 lowercase hex digits; logical-cluster names are
/// 16 characters, resource names are never 64 hex digits).
pub(crate) fn is_identity_hash(segment: &str) -> bool {
    segment.len() == 64
        && segment
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

impl ResourceKeys {
    pub fn new(prefix: &str, group: &str, resource: &str, layout: KeyLayout) -> Self {
        let group_root = group_root(prefix, group);
        let root = match layout {
            KeyLayout::BuiltIn => format!("{group_root}{resource}/"),
            KeyLayout::CustomResource => {
                format!("{group_root}{resource}/{CUSTOM_RESOURCES_SEGMENT}/")
            }
            KeyLayout::Bound(identity) => format!("{group_root}{resource}/{identity}/"),
        };
        ResourceKeys { root }
    }

    /// Every object of this resource in every logical cluster.
    pub fn all_clusters(&self) -> &str {
        &self.root
    }

    /// The API group (`core` for the legacy group) and resource a root from
    /// [`Self::all_clusters`] names, for labels in metrics and logs.
    pub fn group_and_resource(root: &str) -> Option<(&str, &str)> {
        let mut segments = root.trim_end_matches('/').rsplit('/');
        let mut resource = segments.next()?;
        if resource == CUSTOM_RESOURCES_SEGMENT || is_identity_hash(resource) {
            resource = segments.next()?;
        }
        Some((segments.next()?, resource))
    }

    /// Every object in one logical cluster, or in one of its namespaces.
    pub fn scope(&self, cluster: &LogicalClusterName, namespace: Option<&str>) -> String {
        match namespace {
            Some(ns) => format!("{}{cluster}/{ns}/", self.root),
            None => format!("{}{cluster}/", self.root),
        }
    }

    /// The key of one object.
    pub fn object(
        &self,
        cluster: &LogicalClusterName,
        namespace: Option<&str>,
        name: &str,
    ) -> String {
        format!("{}{name}", self.scope(cluster, namespace))
    }

    /// The logical cluster a key of this resource belongs to.
    pub fn cluster_of(&self, key: &str) -> Option<LogicalClusterName> {
        let rest = key.strip_prefix(&self.root)?;
        LogicalClusterName::parse(rest.split('/').next()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roots_name_their_group_and_resource() {
        for (group, resource, layout, expected) in [
            ("", "configmaps", KeyLayout::BuiltIn, ("core", "configmaps")),
            (
                "apps",
                "deployments",
                KeyLayout::BuiltIn,
                ("apps", "deployments"),
            ),
            (
                "bench.kcp.io",
                "widgets",
                KeyLayout::CustomResource,
                ("bench.kcp.io", "widgets"),
            ),
            (
                "example.com",
                "widgets",
                KeyLayout::Bound("a".repeat(64).into()),
                ("example.com", "widgets"),
            ),
        ] {
            let keys = ResourceKeys::new("/registry", group, resource, layout);
            assert_eq!(
                ResourceKeys::group_and_resource(keys.all_clusters()),
                Some(expected)
            );
        }
    }

    #[test]
    fn layout_matches_upstream() {
        let keys = ResourceKeys::new("/registry", "", "configmaps", KeyLayout::BuiltIn);
        let root = LogicalClusterName::root();
        assert_eq!(
            keys.object(&root, Some("default"), "x"),
            "/registry/core/configmaps/root/default/x"
        );
        assert_eq!(keys.scope(&root, None), "/registry/core/configmaps/root/");
        let leases = ResourceKeys::new(
            "/registry/",
            "coordination.k8s.io",
            "leases",
            KeyLayout::BuiltIn,
        );
        assert_eq!(
            leases.all_clusters(),
            "/registry/coordination.k8s.io/leases/"
        );
        assert_eq!(
            leases
                .cluster_of("/registry/coordination.k8s.io/leases/abc/kube-system/l")
                .unwrap()
                .as_str(),
            "abc"
        );
        let widgets = ResourceKeys::new(
            "/registry",
            "example.com",
            "widgets",
            KeyLayout::CustomResource,
        );
        let cluster = LogicalClusterName::parse("abc").unwrap();
        assert_eq!(
            widgets.object(&cluster, Some("default"), "w"),
            "/registry/example.com/widgets/customresources/abc/default/w"
        );
        assert_eq!(
            widgets.cluster_of("/registry/example.com/widgets/customresources/abc/default/w"),
            Some(cluster.clone())
        );
        let bound = ResourceKeys::new(
            "/registry",
            "example.com",
            "widgets",
            KeyLayout::Bound("f00d".into()),
        );
        assert_eq!(
            bound.object(&cluster, Some("default"), "w"),
            "/registry/example.com/widgets/f00d/abc/default/w"
        );
        assert_eq!(
            bound.cluster_of("/registry/example.com/widgets/f00d/abc/default/w"),
            Some(cluster)
        );
    }
}
