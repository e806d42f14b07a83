//! Group/version/kind/resource identifiers.
//!
//! Requests name resources by group, version and resource; objects carry `apiVersion` and
//! `kind`; errors and discovery print them in Kubernetes' formats (`deployments.apps`,
//! `apps/v1, Kind=Deployment`). These small value types keep the parsing and printing in one place.

use std::fmt;

use thiserror::Error;

/// Errors from parsing identifiers.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum GroupVersionError {
    #[error("unexpected GroupVersion string: {0}")]
    Malformed(String),
}

/// An API group and version; the core group is the empty string.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupVersion {
    pub group: String,
    pub version: String,
}

impl GroupVersion {
    pub fn new(group: &str, version: &str) -> Self {
        GroupVersion {
            group: group.to_string(),
            version: version.to_string(),
        }
    }

    /// Parses an `apiVersion`: `v1` (core), `apps/v1`, or the empty string.
    pub fn parse(api_version: &str) -> Result<Self, GroupVersionError> {
        let mut parts = api_version.split('/');
        match (parts.next(), parts.next(), parts.next()) {
            (Some(version), None, _) => Ok(GroupVersion::new("", version)),
            (Some(group), Some(version), None) => Ok(GroupVersion::new(group, version)),
            _ => Err(GroupVersionError::Malformed(api_version.to_string())),
        }
    }

    /// The `apiVersion` string: `v1` for the core group, `group/version` otherwise.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    pub fn with_kind(&self, kind: &str) -> GroupVersionKind {
        GroupVersionKind {
            group: self.group.clone(),
            version: self.version.clone(),
            kind: kind.to_string(),
        }
    }

    pub fn with_resource(&self, resource: &str) -> GroupVersionResource {
        GroupVersionResource {
            group: self.group.clone(),
            version: self.version.clone(),
            resource: resource.to_string(),
        }
    }
}

impl fmt::Display for GroupVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.api_version())
    }
}

/// A kind in a group version; prints as `apps/v1, Kind=Deployment` (`/v1, Kind=Pod` for core).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupVersionKind {
    pub group: String,
    pub version: String,
    pub kind: String,
}

impl GroupVersionKind {
    pub fn new(group: &str, version: &str, kind: &str) -> Self {
        GroupVersion::new(group, version).with_kind(kind)
    }

    /// Splits an object's `apiVersion` and `kind`; a malformed `apiVersion` leaves group and
    /// version empty, as Kubernetes does.
    pub fn from_api_version_and_kind(api_version: &str, kind: &str) -> Self {
        GroupVersion::parse(api_version)
            .unwrap_or_default()
            .with_kind(kind)
    }

    pub fn group_version(&self) -> GroupVersion {
        GroupVersion::new(&self.group, &self.version)
    }
}

impl fmt::Display for GroupVersionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}, Kind={}", self.group, self.version, self.kind)
    }
}

/// A resource in a group version; prints as `apps/v1, Resource=deployments`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupVersionResource {
    pub group: String,
    pub version: String,
    pub resource: String,
}

impl GroupVersionResource {
    pub fn new(group: &str, version: &str, resource: &str) -> Self {
        GroupVersion::new(group, version).with_resource(resource)
    }

    pub fn group_resource(&self) -> GroupResource {
        GroupResource::new(&self.group, &self.resource)
    }

    pub fn group_version(&self) -> GroupVersion {
        GroupVersion::new(&self.group, &self.version)
    }
}

impl fmt::Display for GroupVersionResource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}/{}, Resource={}",
            self.group, self.version, self.resource
        )
    }
}

/// A resource in a group regardless of version; prints as `deployments.apps` (`configmaps`
/// for core), the form used in error messages.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupResource {
    pub group: String,
    pub resource: String,
}

impl GroupResource {
    pub fn new(group: &str, resource: &str) -> Self {
        GroupResource {
            group: group.to_string(),
            resource: resource.to_string(),
        }
    }
}

impl fmt::Display for GroupResource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.group.is_empty() {
            f.write_str(&self.resource)
        } else {
            write!(f, "{}.{}", self.resource, self.group)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_print_group_versions() {
        assert_eq!(
            GroupVersion::parse("apps/v1"),
            Ok(GroupVersion::new("apps", "v1"))
        );
        assert_eq!(GroupVersion::parse("v1"), Ok(GroupVersion::new("", "v1")));
        assert_eq!(GroupVersion::parse(""), Ok(GroupVersion::default()));
        assert_eq!(
            GroupVersion::parse("a/b/c").map_err(|e| e.to_string()),
            Err("unexpected GroupVersion string: a/b/c".to_string())
        );
        assert_eq!(GroupVersion::new("apps", "v1").api_version(), "apps/v1");
        assert_eq!(GroupVersion::new("", "v1").to_string(), "v1");
    }

    #[test]
    fn display_formats() {
        assert_eq!(
            GroupVersionKind::new("apps", "v1", "Deployment").to_string(),
            "apps/v1, Kind=Deployment"
        );
        assert_eq!(
            GroupVersionKind::from_api_version_and_kind("v1", "Event").to_string(),
            "/v1, Kind=Event"
        );
        assert_eq!(
            GroupVersionKind::from_api_version_and_kind("a/b/c", "X").version,
            ""
        );
        assert_eq!(
            GroupVersionResource::new("apps", "v1", "deployments").to_string(),
            "apps/v1, Resource=deployments"
        );
        assert_eq!(
            GroupVersionResource::new("apps", "v1", "deployments")
                .group_resource()
                .to_string(),
            "deployments.apps"
        );
        assert_eq!(
            GroupResource::new("", "configmaps").to_string(),
            "configmaps"
        );
    }
}
