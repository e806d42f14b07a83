//! One page of a list read from the cache's ordered objects, with storage's paging rules.
//!
//! The objects of a type sit in one map ordered by key relative to the type's root, so the keys of
//! one logical cluster, or of one namespace in it, are a contiguous range: a list of one namespace
//! reads that range and nothing else (kube-apiserver's watch cache reaches the same with its
//! namespace index). Paging copies `ObjectStore::list`: at most `limit` matching items, and a
//! `continue` token (revision and last key relative to the list's prefix) only when the page is full
//! and more keys follow in the range, matching or not, so tokens of either side continue on the other.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use serde_json::Value;

use crate::object::CachedObject;

/// The objects of a type by key relative to its root.
pub(crate) type Objects = BTreeMap<String, Arc<CachedObject>>;

/// Which objects a page reads.
pub(crate) struct Range<'a> {
    /// Keys start with this (relative to the type's root; empty for every logical cluster).
    pub prefix: &'a str,
    /// Continue after this key, relative to `prefix`.
    pub after: Option<&'a str>,
    /// At most this many items; `0` for all.
    pub limit: usize,
}

/// The items of a page and, when more follow, the key to continue after (relative to the prefix).
pub(crate) struct Page {
    pub items: Vec<Arc<CachedObject>>,
    pub continue_after: Option<String>,
}

pub(crate) fn read(
    objects: &Objects,
    range: Range<'_>,
    keep: Option<&(dyn Fn(&Value) -> bool + Sync)>,
) -> Page {
    let start = match range.after {
        Some(after) => Bound::Excluded(format!("{}{after}", range.prefix)),
        None => Bound::Included(range.prefix.to_string()),
    };
    let mut in_range = objects
        .range::<String, _>((start, Bound::Unbounded))
        .take_while(|(key, _)| key.starts_with(range.prefix));
    let mut items = Vec::new();
    for (key, object) in in_range.by_ref() {
        // The bytes were encoded from a value, so they decode; if they did not, the object could
        // not be judged and is left out.
        if keep.is_none_or(|keep| object.decode().is_ok_and(|o| keep(&o))) {
            items.push(object.clone());
            if range.limit != 0 && items.len() == range.limit {
                let continue_after = in_range
                    .next()
                    .map(|_| key[range.prefix.len()..].to_string());
                return Page {
                    items,
                    continue_after,
                };
            }
        }
    }
    Page {
        items,
        continue_after: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn objects(keys: &[&str]) -> Objects {
        keys.iter()
            .map(|k| {
                let object = CachedObject::new(&json!({"key": k})).unwrap();
                (k.to_string(), Arc::new(object))
            })
            .collect()
    }

    fn keys(page: &Page) -> Vec<String> {
        page.items
            .iter()
            .map(|o| o.decode().unwrap()["key"].as_str().unwrap().to_string())
            .collect()
    }

    #[test]
    fn a_namespace_is_a_range_and_pages_continue_after_the_last_item() {
        let all = objects(&["a/ns/x", "a/ns/y", "a/ns/z", "a/ns2/x", "a/nt", "b/ns/x"]);
        let range = |after, limit| Range {
            prefix: "a/ns/",
            after,
            limit,
        };
        let page = read(&all, range(None, 0), None);
        assert_eq!(keys(&page), ["a/ns/x", "a/ns/y", "a/ns/z"]);
        assert_eq!(page.continue_after, None);
        let page = read(&all, range(None, 2), None);
        assert_eq!(keys(&page), ["a/ns/x", "a/ns/y"]);
        assert_eq!(page.continue_after.as_deref(), Some("y"));
        let page = read(&all, range(Some("y"), 2), None);
        assert_eq!(keys(&page), ["a/ns/z"]);
        assert_eq!(page.continue_after, None);
        // Full at the last key of the range: nothing follows, no token (as storage).
        let page = read(&all, range(Some("x"), 2), None);
        assert_eq!(page.continue_after, None);
    }

    #[test]
    fn a_full_page_has_a_token_when_any_key_follows_even_one_not_matching() {
        let all = objects(&["c/1", "c/2", "c/3"]);
        let not_three = |o: &Value| o["key"] != "c/3";
        let page = read(
            &all,
            Range {
                prefix: "",
                after: None,
                limit: 2,
            },
            Some(&not_three),
        );
        assert_eq!(keys(&page), ["c/1", "c/2"]);
        assert_eq!(page.continue_after.as_deref(), Some("c/2"));
    }
}
