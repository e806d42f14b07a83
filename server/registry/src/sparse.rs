//! Maps keyed by logical cluster grow with the number of workspaces and, being hash maps, keep
//! their largest capacity after workspaces are deleted: 10,000 workspaces created and deleted left
//! megabytes of empty buckets behind. Removing through [`remove_and_shrink`] gives that memory back
//! once a map is mostly empty, at the amortised cost of one rehash per halving.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::Hash;

/// Below this capacity a map is never shrunk (not worth a rehash).
const MIN_CAPACITY: usize = 64;

/// Removes `key` and, when the map is at most a quarter full, shrinks it to twice its length.
pub fn remove_and_shrink<K, V, Q>(map: &mut HashMap<K, V>, key: &Q) -> Option<V>
where
    K: Eq + Hash + Borrow<Q>,
    Q: Eq + Hash + ?Sized,
{
    let removed = map.remove(key);
    if map.capacity() > MIN_CAPACITY && map.len() * 4 <= map.capacity() {
        map.shrink_to(map.len() * 2);
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_map_emptied_gives_its_capacity_back() {
        let mut map: HashMap<u32, u32> = (0..10_000).map(|i| (i, i)).collect();
        let full = map.capacity();
        for i in 0..10_000 {
            assert_eq!(remove_and_shrink(&mut map, &i), Some(i));
        }
        assert!(
            map.capacity() <= MIN_CAPACITY * 2,
            "{} of {full}",
            map.capacity()
        );
    }

    #[test]
    fn a_busy_map_is_left_alone() {
        let mut map: HashMap<u32, u32> = (0..1_000).map(|i| (i, i)).collect();
        let capacity = map.capacity();
        remove_and_shrink(&mut map, &0);
        // Not shrunk. A removal may leave a tombstone, which the map counts as used until its
        // next rehash, so the capacity it reports can drop by the one removed entry.
        assert!(
            map.capacity() + 1 >= capacity,
            "{} of {capacity}",
            map.capacity()
        );
    }
}
