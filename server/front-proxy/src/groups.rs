//! Which of an authenticated user's groups the proxy passes on to the shards
//! (`--authentication-drop-groups`, `--authentication-pass-on-groups`; upstream's `GroupFilter`).
//!
//! Privileged groups are for traffic inside the installation: a client certificate in
//! `system:masters` must not become an administrator of every shard by going through the
//! proxy, and the synthetic groups kcp's own proxies inject (`system:kcp:initializer:*`,
//! `system:kcp:terminator:*`) must not be self-asserted. So upstream drops these by default.
//! A name ending in `*` matches every group with that prefix; an empty pass-on list passes
//! everything; dropping wins over passing on.

/// Upstream's default `--authentication-drop-groups`.
pub const DEFAULT_DROP_GROUPS: [&str; 4] = [
    "system:masters",
    "system:kcp:logical-cluster-admin",
    "system:kcp:initializer:*",
    "system:kcp:terminator:*",
];

/// Exact names and `prefix*` patterns.
#[derive(Debug, Clone, Default)]
struct Patterns {
    exact: Vec<String>,
    prefixes: Vec<String>,
}

impl Patterns {
    fn new(patterns: &[String]) -> Patterns {
        let mut parsed = Patterns::default();
        for pattern in patterns.iter().filter(|p| !p.is_empty()) {
            match pattern.strip_suffix('*') {
                Some(prefix) => parsed.prefixes.push(prefix.to_owned()),
                None => parsed.exact.push(pattern.clone()),
            }
        }
        parsed
    }

    fn is_empty(&self) -> bool {
        self.exact.is_empty() && self.prefixes.is_empty()
    }

    fn matches(&self, group: &str) -> bool {
        self.exact.iter().any(|exact| exact == group)
            || self.prefixes.iter().any(|prefix| group.starts_with(prefix))
    }
}

/// The drop and pass-on lists.
#[derive(Debug, Clone, Default)]
pub struct GroupFilter {
    drop: Patterns,
    pass_on: Patterns,
}

impl GroupFilter {
    pub fn new(drop: &[String], pass_on: &[String]) -> GroupFilter {
        GroupFilter {
            drop: Patterns::new(drop),
            pass_on: Patterns::new(pass_on),
        }
    }

    /// Whether `group` reaches the shard.
    pub fn passes(&self, group: &str) -> bool {
        !self.drop.matches(group) && (self.pass_on.is_empty() || self.pass_on.matches(group))
    }

    /// Keeps the groups that pass.
    pub fn apply(&self, groups: &mut Vec<String>) {
        groups.retain(|group| self.passes(group));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    fn filtered(filter: &GroupFilter, groups: &[&str]) -> Vec<String> {
        let mut groups = strings(groups);
        filter.apply(&mut groups);
        groups
    }

    #[test]
    fn the_defaults_drop_privileged_and_synthetic_groups() {
        let filter = GroupFilter::new(&strings(&DEFAULT_DROP_GROUPS), &[]);
        assert_eq!(
            filtered(
                &filter,
                &[
                    "system:masters",
                    "system:kcp:logical-cluster-admin",
                    "system:kcp:initializer:root:universal",
                    "system:kcp:terminator:x",
                    "system:authenticated",
                    "devs",
                    "system:kcp:external-logical-cluster-admin",
                ]
            ),
            [
                "system:authenticated",
                "devs",
                "system:kcp:external-logical-cluster-admin"
            ]
        );
    }

    #[test]
    fn pass_on_restricts_and_drop_wins() {
        let filter = GroupFilter::new(
            &strings(&["team:secret", "system:masters"]),
            &strings(&["team:*", "system:authenticated", "system:masters"]),
        );
        assert_eq!(
            filtered(
                &filter,
                &[
                    "team:a",
                    "team:secret",
                    "system:authenticated",
                    "system:masters",
                    "other"
                ]
            ),
            ["team:a", "system:authenticated"]
        );
    }

    #[test]
    fn empty_lists_pass_everything() {
        let filter = GroupFilter::new(&strings(&[""]), &[]);
        assert_eq!(
            filtered(&filter, &["system:masters", "a"]),
            ["system:masters", "a"]
        );
    }
}
