//! What a write changed: the fields it added, modified and removed.
//!
//! Ownership moves along these sets. Fields a write added or modified are what an updater
//! gains and what an applier conflicts on; fields it removed are dropped from every manager.
//! Leaves are compared by value (`1 == 1.0`); a granular node that appears or disappears is
//! itself added or removed along with everything below it, which is why Update entries carry
//! `"."` on maps they created.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::{Node, is_empty, item_key, node_pair};
use crate::fieldpath::{FieldSet, PathElement, values_equal};
use crate::schema::{ListType, MapType, TypeId, TypeSchema};

/// The fields a change added, modified and removed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Comparison {
    pub added: FieldSet,
    pub modified: FieldSet,
    pub removed: FieldSet,
}

impl Comparison {
    /// Keeps only the top-level fields `keep` accepts, in all three sets.
    pub(crate) fn retain_top_fields(&mut self, keep: impl Fn(&str) -> bool) {
        self.added.retain_top_fields(&keep);
        self.modified.retain_top_fields(&keep);
        self.removed.retain_top_fields(&keep);
    }
}

/// How `new` differs from `old`, both whole objects.
pub(crate) fn compare(schema: &TypeSchema, old: &Value, new: &Value) -> Comparison {
    let mut walker = Walker {
        schema,
        out: Comparison::default(),
    };
    walker.walk(schema.root(), Some(old), Some(new), &mut Vec::new());
    walker.out
}

struct Walker<'s> {
    schema: &'s TypeSchema,
    out: Comparison,
}

impl Walker<'_> {
    fn walk(
        &mut self,
        ty: TypeId,
        l: Option<&Value>,
        r: Option<&Value>,
        path: &mut Vec<PathElement>,
    ) {
        if is_empty(l) && is_empty(r) {
            self.leaf(l, r, path);
            return;
        }
        match node_pair(self.schema, ty, l, r) {
            Ok(Node::Leaf) => self.leaf(l, r, path),
            Ok(granular) => {
                self.descend(granular, l, r, path);
                match (l, r) {
                    (None, _) => self.out.added.insert(path),
                    (_, None) => self.out.removed.insert(path),
                    _ => {}
                }
            }
            // Both sides present with different shapes: each granular side's content goes
            // (or comes) and the node itself is modified.
            Err((lnode, rnode)) => {
                self.out.modified.insert(path);
                if !is_empty(l) {
                    self.descend(lnode, l, None, path);
                }
                if !is_empty(r) {
                    self.descend(rnode, None, r, path);
                }
            }
        }
    }

    fn leaf(&mut self, l: Option<&Value>, r: Option<&Value>, path: &[PathElement]) {
        match (l, r) {
            (None, None) => {}
            (None, Some(_)) => self.out.added.insert(path),
            (Some(_), None) => self.out.removed.insert(path),
            (Some(l), Some(r)) => {
                if !values_equal(l, r) {
                    self.out.modified.insert(path);
                }
            }
        }
    }

    fn descend(
        &mut self,
        node: Node<'_>,
        l: Option<&Value>,
        r: Option<&Value>,
        path: &mut Vec<PathElement>,
    ) {
        match node {
            Node::Leaf => {}
            Node::Map(map) => self.maps(map, l, r, path),
            Node::List(list) => self.lists(list, l, r, path),
        }
    }

    fn maps(
        &mut self,
        map: &MapType,
        l: Option<&Value>,
        r: Option<&Value>,
        path: &mut Vec<PathElement>,
    ) {
        let empty = Map::new();
        let l = l.and_then(Value::as_object).unwrap_or(&empty);
        let r = r.and_then(Value::as_object).unwrap_or(&empty);
        let names = l.keys().chain(r.keys().filter(|k| !l.contains_key(*k)));
        for name in names {
            path.push(PathElement::Field(name.clone()));
            self.walk(
                TypeSchema::field_type(map, name),
                l.get(name),
                r.get(name),
                path,
            );
            path.pop();
        }
    }

    fn lists(
        &mut self,
        list: &ListType,
        l: Option<&Value>,
        r: Option<&Value>,
        path: &mut Vec<PathElement>,
    ) {
        // Elements by key on each side, in first-seen order; duplicates are kept together.
        let mut order: Vec<PathElement> = Vec::new();
        let mut sides: BTreeMap<PathElement, (Vec<&Value>, Vec<&Value>)> = BTreeMap::new();
        for (side, items) in [l, r].into_iter().enumerate() {
            for item in items.and_then(Value::as_array).into_iter().flatten() {
                let Ok(key) = item_key(self.schema, list, item) else {
                    continue;
                };
                let entry = sides.entry(key.clone()).or_insert_with(|| {
                    order.push(key);
                    (Vec::new(), Vec::new())
                });
                if side == 0 {
                    entry.0.push(item);
                } else {
                    entry.1.push(item);
                }
            }
        }
        for key in order {
            let Some((lv, rv)) = sides.get(&key) else {
                continue;
            };
            path.push(key.clone());
            match (lv.len(), rv.len()) {
                (0..=1, 0..=1) => {
                    self.walk(list.items, lv.first().copied(), rv.first().copied(), path)
                }
                (2.., 2..) => {
                    let same =
                        lv.len() == rv.len() && lv.iter().zip(rv).all(|(a, b)| values_equal(a, b));
                    if !same {
                        self.out.modified.insert(path);
                    }
                }
                (2.., _) => {
                    if let Some(first) = rv.first() {
                        self.walk(list.items, None, Some(first), path);
                    }
                    self.out.removed.insert(path);
                }
                (_, _) => {
                    if let Some(first) = lv.first() {
                        self.walk(list.items, Some(first), None, path);
                    }
                    self.out.added.insert(path);
                }
            }
            path.pop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn shown(set: &FieldSet) -> Vec<String> {
        set.paths().iter().map(ToString::to_string).collect()
    }

    #[test]
    fn added_modified_removed() {
        let schema = TypeSchema::deduced();
        let c = compare(
            &schema,
            &json!({"data": {"a": "1", "b": "2"}, "metadata": {"finalizers": ["x"]}, "n": 1}),
            &json!({"data": {"a": "9", "c": "3"}, "metadata": {"finalizers": ["x", "y"],
                "labels": {"l": "v"}}, "n": 1.0, "spec": {}}),
        );
        assert_eq!(
            shown(&c.added),
            [
                ".spec",
                ".data.c",
                ".metadata.labels",
                ".metadata.finalizers[=\"y\"]",
                ".metadata.labels.l"
            ]
        );
        assert_eq!(shown(&c.modified), [".data.a"]);
        assert_eq!(shown(&c.removed), [".data.b"]);
    }

    #[test]
    fn shape_changes_are_modifications() {
        let schema = TypeSchema::deduced();
        let c = compare(&schema, &json!({"x": "text"}), &json!({"x": {"a": 1}}));
        assert_eq!(shown(&c.modified), [".x"]);
        assert_eq!(shown(&c.added), [".x.a"]);
        assert!(c.removed.is_empty());
        let same = compare(
            &schema,
            &json!({"x": {"a": [1]}}),
            &json!({"x": {"a": [1]}}),
        );
        assert_eq!(same, Comparison::default());
    }
}
