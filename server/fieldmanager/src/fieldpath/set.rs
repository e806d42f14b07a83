//! Sets of field paths: what a manager owns, what an applied configuration specifies, what a
//! write changed.
//!
//! A set is a trie. At each level, `members` are the paths that end here (the node itself is
//! owned) and `children` lead deeper; a path can be both (a list-map element is owned as a
//! whole and its fields one by one). Operations are path-wise, as in structured-merge-diff:
//! removing the member `spec` from a set leaves `spec.replicas` in it.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::element::{FieldPath, PathElement};
use crate::schema::TypeSchema;
use crate::typed::{self, TypeError};

/// A set of field paths.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSet {
    pub(super) members: BTreeSet<PathElement>,
    /// Never holds an empty set.
    pub(super) children: BTreeMap<PathElement, FieldSet>,
}

impl FieldSet {
    /// The empty set.
    pub fn new() -> Self {
        FieldSet::default()
    }

    /// The set of fields `value` specifies: its leaf values, atomic lists and maps, and every
    /// element of set and map lists. Empty granular maps and `null` maps specify nothing.
    /// Fails like Kubernetes does on an applied object: list-map elements without keys, set
    /// elements that are not scalars, duplicate elements.
    pub fn from_object(value: &Value, schema: &TypeSchema) -> Result<FieldSet, TypeError> {
        typed::field_set_checked(schema, value, false)
    }

    /// Whether the set holds no path.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty() && self.children.is_empty()
    }

    /// Adds `path` (ignored when empty).
    pub fn insert(&mut self, path: &[PathElement]) {
        match path {
            [] => {}
            [last] => {
                self.members.insert(last.clone());
            }
            [first, rest @ ..] => self.children.entry(first.clone()).or_default().insert(rest),
        }
    }

    /// Whether `path` itself is in the set (not merely a prefix of a path in it).
    pub fn contains(&self, path: &[PathElement]) -> bool {
        match path {
            [] => false,
            [last] => self.members.contains(last),
            [first, rest @ ..] => self.children.get(first).is_some_and(|c| c.contains(rest)),
        }
    }

    /// Whether `pe` is a member at this level.
    pub(crate) fn has_member(&self, pe: &PathElement) -> bool {
        self.members.contains(pe)
    }

    /// The paths below `pe`, relative to it.
    pub(crate) fn child(&self, pe: &PathElement) -> Option<&FieldSet> {
        self.children.get(pe)
    }

    /// The members at this level.
    pub(crate) fn members_iter(&self) -> impl Iterator<Item = &PathElement> {
        self.members.iter()
    }

    /// The non-empty subsets below this level.
    pub(crate) fn children_iter(&self) -> impl Iterator<Item = (&PathElement, &FieldSet)> {
        self.children.iter()
    }

    /// Adds `child`'s paths below `pe`.
    pub(crate) fn insert_child(&mut self, pe: &PathElement, child: FieldSet) {
        if child.is_empty() {
            return;
        }
        let merged = match self.children.get(pe) {
            Some(mine) => mine.union(&child),
            None => child,
        };
        self.children.insert(pe.clone(), merged);
    }

    /// Every path in either set.
    pub fn union(&self, other: &FieldSet) -> FieldSet {
        let mut out = self.clone();
        out.members.extend(other.members.iter().cloned());
        for (pe, child) in &other.children {
            out.insert_child(pe, child.clone());
        }
        out
    }

    /// The paths of `self` that are not in `other`.
    pub fn difference(&self, other: &FieldSet) -> FieldSet {
        let members = self.members.difference(&other.members).cloned().collect();
        let mut children = BTreeMap::new();
        for (pe, child) in &self.children {
            let rest = match other.children.get(pe) {
                Some(theirs) => child.difference(theirs),
                None => child.clone(),
            };
            if !rest.is_empty() {
                children.insert(pe.clone(), rest);
            }
        }
        FieldSet { members, children }
    }

    /// The paths in both sets.
    pub fn intersection(&self, other: &FieldSet) -> FieldSet {
        let members = self.members.intersection(&other.members).cloned().collect();
        let mut children = BTreeMap::new();
        for (pe, child) in &self.children {
            if let Some(theirs) = other.children.get(pe) {
                let both = child.intersection(theirs);
                if !both.is_empty() {
                    children.insert(pe.clone(), both);
                }
            }
        }
        FieldSet { members, children }
    }

    /// Drops the top-level fields (and everything under them) for which `keep` is false.
    pub(crate) fn retain_top_fields(&mut self, keep: impl Fn(&str) -> bool) {
        let kept = |pe: &PathElement| match pe {
            PathElement::Field(name) => keep(name),
            _ => true,
        };
        self.members.retain(kept);
        self.children.retain(|pe, _| kept(pe));
    }

    /// Every path, in structured-merge-diff's iteration order (a level's members, then its
    /// children depth first).
    pub fn paths(&self) -> Vec<FieldPath> {
        let mut out = Vec::new();
        self.collect_paths(&mut Vec::new(), &mut out);
        out
    }

    fn collect_paths(&self, prefix: &mut Vec<PathElement>, out: &mut Vec<FieldPath>) {
        for pe in &self.members {
            let mut path = prefix.clone();
            path.push(pe.clone());
            out.push(FieldPath(path));
        }
        for (pe, child) in &self.children {
            prefix.push(pe.clone());
            child.collect_paths(prefix, out);
            prefix.pop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn set(paths: &[&[&str]]) -> FieldSet {
        let mut s = FieldSet::new();
        for path in paths {
            let path: Vec<PathElement> = path.iter().map(|n| PathElement::field(n)).collect();
            s.insert(&path);
        }
        s
    }

    #[test]
    fn operations_are_path_wise() {
        let a = set(&[&["spec"], &["spec", "replicas"], &["spec", "paused"]]);
        let b = set(&[&["spec", "replicas"], &["data"]]);
        assert_eq!(
            a.union(&b),
            set(&[
                &["spec"],
                &["spec", "replicas"],
                &["spec", "paused"],
                &["data"]
            ])
        );
        assert_eq!(a.difference(&b), set(&[&["spec"], &["spec", "paused"]]));
        assert_eq!(a.intersection(&b), set(&[&["spec", "replicas"]]));
        assert!(a.difference(&a).is_empty());
        assert!(a.contains(&[PathElement::field("spec")]));
        assert!(!b.contains(&[PathElement::field("spec")]));
        assert!(
            a.difference(&set(&[&["spec"]]))
                .contains(&[PathElement::field("spec"), PathElement::field("paused")])
        );
    }

    #[test]
    fn iteration_order() {
        let mut s = set(&[&["b", "x"], &["a"], &["b"]]);
        s.insert(&[PathElement::field("b"), PathElement::Value(json!("v"))]);
        let shown: Vec<String> = s.paths().iter().map(ToString::to_string).collect();
        assert_eq!(shown, [".a", ".b", ".b.x", ".b[=\"v\"]"]);
        s.retain_top_fields(|name| name != "b");
        assert_eq!(s, set(&[&["a"]]));
    }
}
