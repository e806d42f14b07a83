//! Merging an applied configuration into the live object.
//!
//! The configuration wins at every leaf; granular maps merge key by key (live keys keep their
//! order, new keys follow in configuration order), set and map lists merge element by element,
//! atomic nodes are replaced. List order follows structured-merge-diff: elements only the live
//! object has stay where they were, elements the configuration names appear in the
//! configuration's order. Merging the same configuration again changes nothing, key order
//! included, which is what makes a repeated apply a no-op.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use serde_json::{Map, Value};

use super::{Node, is_empty, item_key, node_pair};
use crate::fieldpath::PathElement;
use crate::schema::{ListType, MapType, TypeId, TypeSchema};

/// `rhs` merged into `lhs` at type `ty`; `None` only when both are absent.
pub(crate) fn merge(
    schema: &TypeSchema,
    ty: TypeId,
    lhs: Option<&Value>,
    rhs: Option<&Value>,
) -> Option<Value> {
    match (lhs, rhs) {
        (_, None) => lhs.cloned(),
        (None, Some(r)) => Some(r.clone()),
        (Some(l), Some(r)) => Some(merge_present(schema, ty, l, r)),
    }
}

fn merge_present(schema: &TypeSchema, ty: TypeId, l: &Value, r: &Value) -> Value {
    if is_empty(Some(l)) && is_empty(Some(r)) {
        return r.clone();
    }
    match node_pair(schema, ty, Some(l), Some(r)) {
        Ok(Node::Map(map)) => merge_maps(schema, map, l, r),
        Ok(Node::List(list)) => merge_lists(schema, list, l, r),
        Ok(Node::Leaf) | Err(_) => r.clone(),
    }
}

fn merge_maps(schema: &TypeSchema, map: &MapType, l: &Value, r: &Value) -> Value {
    let empty = Map::new();
    let l = l.as_object().unwrap_or(&empty);
    let r = r.as_object().unwrap_or(&empty);
    let mut out = Map::new();
    for (name, lv) in l {
        let merged = match r.get(name) {
            Some(rv) => merge_present(schema, TypeSchema::field_type(map, name), lv, rv),
            None => lv.clone(),
        };
        out.insert(name.clone(), merged);
    }
    for (name, rv) in r {
        if !l.contains_key(name) {
            out.insert(name.clone(), rv.clone());
        }
    }
    Value::Object(out)
}

fn merge_lists(schema: &TypeSchema, list: &ListType, l: &Value, r: &Value) -> Value {
    let l: &[Value] = l.as_array().map_or(&[], Vec::as_slice);
    let r: &[Value] = r.as_array().map_or(&[], Vec::as_slice);
    let keys = |items: &[Value]| -> Vec<Option<PathElement>> {
        items
            .iter()
            .map(|item| item_key(schema, list, item).ok())
            .collect()
    };
    let (lk, rk) = (keys(l), keys(r));
    // The first element with each key, on both sides.
    let first = |keys: &[Option<PathElement>]| -> BTreeMap<PathElement, usize> {
        let mut out = BTreeMap::new();
        for (i, key) in keys.iter().enumerate() {
            if let Some(key) = key {
                out.entry(key.clone()).or_insert(i);
            }
        }
        out
    };
    let (l_first, r_first) = (first(&lk), first(&rk));
    let in_rhs = |key: &Option<PathElement>| key.as_ref().is_some_and(|k| r_first.contains_key(k));
    // Elements both sides have, in the configuration's order: each is placed when reached.
    let mut shared: VecDeque<&PathElement> = rk
        .iter()
        .enumerate()
        .filter_map(|(i, key)| key.as_ref().filter(|k| r_first.get(*k) == Some(&i)))
        .filter(|k| l_first.contains_key(*k))
        .collect();
    let mut next_shared = shared.pop_front();
    let mut taken: BTreeSet<&PathElement> = BTreeSet::new();
    let merged_item = |key: &Option<PathElement>, rv: &Value| {
        let lv = key.as_ref().and_then(|k| l_first.get(k)).map(|i| &l[*i]);
        merge(schema, list.items, lv, Some(rv)).unwrap_or(Value::Null)
    };

    let mut out = Vec::with_capacity(l.len().max(r.len()));
    let (mut li, mut ri) = (0, 0);
    while li < l.len() || ri < r.len() {
        if li < l.len() && ri < r.len() {
            if lk[li].is_some() && lk[li] == rk[ri] {
                out.push(
                    merge(schema, list.items, Some(&l[li]), Some(&r[ri])).unwrap_or(Value::Null),
                );
                if let Some(key) = &rk[ri] {
                    taken.insert(key);
                }
                li += 1;
                ri += 1;
                next_shared = shared.pop_front();
                continue;
            }
            if in_rhs(&lk[li]) && next_shared.is_some_and(|s| lk[li].as_ref() != Some(s)) {
                li += 1;
                continue;
            }
        }
        if li < l.len() {
            if !in_rhs(&lk[li]) {
                out.push(l[li].clone());
                li += 1;
                continue;
            }
            if lk[li].as_ref().is_some_and(|k| taken.contains(k)) {
                li += 1;
            }
        }
        if ri < r.len() {
            if rk[ri].as_ref().is_some_and(|k| taken.contains(k)) {
                ri += 1;
                continue;
            }
            out.push(merged_item(&rk[ri], &r[ri]));
            if let Some(key) = &rk[ri] {
                taken.insert(key);
                if next_shared == Some(key) {
                    next_shared = shared.pop_front();
                }
            }
            ri += 1;
        }
    }
    Value::Array(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> TypeSchema {
        TypeSchema::from_openapi(
            &json!({"type": "object", "properties": {
                "spec": {"type": "object", "properties": {
                    "items": {"type": "array", "x-kubernetes-list-type": "map",
                        "x-kubernetes-list-map-keys": ["name"],
                        "items": {"type": "object", "properties": {"name": {"type": "string"}}}},
                    "tags": {"type": "array", "x-kubernetes-list-type": "set",
                        "items": {"type": "string"}},
                    "args": {"type": "array", "items": {"type": "string"}},
                    "selector": {"type": "object", "x-kubernetes-map-type": "atomic"}
                }}
            }}),
            |_| None,
        )
    }

    fn merged(live: Value, config: Value) -> Value {
        let schema = schema();
        merge(&schema, schema.root(), Some(&live), Some(&config)).unwrap_or_default()
    }

    fn names(v: &Value) -> Vec<String> {
        v["spec"]["items"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|i| i["name"].as_str().unwrap_or_default().to_string())
            .collect()
    }

    #[test]
    fn maps_merge_and_atomics_replace() {
        let out = merged(
            json!({"spec": {"a": 1, "selector": {"x": "1", "y": "2"}, "args": ["a", "b"],
                "tags": ["t1", "t2"]}}),
            json!({"spec": {"b": 2, "selector": {"x": "3"}, "args": ["c"], "tags": ["t3", "t1"]}}),
        );
        assert_eq!(
            out,
            json!({"spec": {"a": 1, "selector": {"x": "3"}, "args": ["c"],
                "tags": ["t3", "t1", "t2"], "b": 2}})
        );
        assert_eq!(
            serde_json::to_string(&out).unwrap(),
            r#"{"spec":{"a":1,"selector":{"x":"3"},"args":["c"],"tags":["t3","t1","t2"],"b":2}}"#
        );
    }

    #[test]
    fn list_maps_merge_by_key_in_structured_merge_diff_order() {
        let items = |names: &[&str]| json!({"spec": {"items": names.iter().map(|n| json!({"name": n})).collect::<Vec<_>>()}});
        assert_eq!(
            names(&merged(items(&["a", "b"]), items(&["b", "a"]))),
            ["b", "a"]
        );
        assert_eq!(
            names(&merged(items(&["a", "x", "b"]), items(&["b", "a"]))),
            ["x", "b", "a"]
        );
        assert_eq!(
            names(&merged(items(&["a", "b", "c"]), items(&["d", "b"]))),
            ["a", "d", "b", "c"]
        );
        let out = merged(
            json!({"spec": {"items": [{"name": "a", "image": "old", "keep": true}]}}),
            json!({"spec": {"items": [{"name": "a", "image": "new"}]}}),
        );
        assert_eq!(
            out,
            json!({"spec": {"items": [{"name": "a", "image": "new", "keep": true}]}})
        );
    }

    #[test]
    fn nulls_and_empties() {
        // A null granular map in the configuration keeps the live map.
        assert_eq!(
            merged(
                json!({"spec": {"m": {"a": 1}}}),
                json!({"spec": {"m": null}})
            ),
            json!({"spec": {"m": {"a": 1}}})
        );
        // Empty on both sides is a leaf: the configuration's form wins.
        assert_eq!(
            merged(json!({"spec": {"m": null}}), json!({"spec": {"m": {}}})),
            json!({"spec": {"m": {}}})
        );
        // Shapes that differ: the configuration replaces.
        assert_eq!(
            merged(
                json!({"spec": {"m": "text"}}),
                json!({"spec": {"m": {"a": 1}}})
            ),
            json!({"spec": {"m": {"a": 1}}})
        );
    }

    #[test]
    fn merging_twice_is_stable() {
        let live =
            json!({"spec": {"z": 1, "items": [{"name": "q"}, {"name": "p"}], "tags": ["b"]}});
        let config = json!({"spec": {"items": [{"name": "p", "v": 1}, {"name": "n"}], "tags": ["a"], "k": 2}});
        let once = merged(live, config.clone());
        let twice = merged(once.clone(), config);
        assert_eq!(
            serde_json::to_string(&once).unwrap(),
            serde_json::to_string(&twice).unwrap()
        );
    }
}
