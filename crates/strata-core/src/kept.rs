//! What a reader keeps loaded within a budget of bytes (decoded segments, slab indexes,
//! frames of positions): the most recently used first. The newest entry is always kept,
//! alone if it is larger than the budget, so that what was just loaded can be used.

use crate::fxhash::FxHashMap;
use std::collections::BTreeMap;
use std::hash::Hash;
use std::sync::{Mutex, MutexGuard};

#[derive(Debug)]
struct Entry<V> {
    value: V,
    bytes: u64,
    used: u64,
}

#[derive(Debug)]
struct Entries<K, V> {
    map: FxHashMap<K, Entry<V>>,
    /// Keys by last use, the least recent first: dropping one is not a walk over all (a
    /// store of thousands of small slab indexes keeps thousands).
    order: BTreeMap<u64, K>,
    bytes: u64,
    clock: u64,
}

/// Values by key, the least recently used dropped once their sizes pass `budget` bytes. A
/// value dropped here stays alive while someone still holds it (values are `Arc`s).
#[derive(Debug)]
pub(crate) struct Kept<K, V> {
    budget: u64,
    entries: Mutex<Entries<K, V>>,
}

impl<K: Hash + Eq + Copy, V: Clone> Kept<K, V> {
    pub fn new(budget: u64) -> Self {
        let entries = Entries { map: FxHashMap::default(), order: BTreeMap::new(), bytes: 0, clock: 0 };
        Kept { budget, entries: Mutex::new(entries) }
    }

    fn lock(&self) -> MutexGuard<'_, Entries<K, V>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The value of `key`, now the most recently used, if kept.
    pub fn get(&self, key: &K) -> Option<V> {
        let mut e = self.lock();
        let e = &mut *e;
        let entry = e.map.get_mut(key)?;
        e.clock += 1;
        e.order.remove(&entry.used);
        e.order.insert(e.clock, *key);
        entry.used = e.clock;
        Some(entry.value.clone())
    }

    /// Whether `key` is kept (its place in the order unchanged).
    pub fn contains(&self, key: &K) -> bool {
        self.lock().map.contains_key(key)
    }

    /// Keeps `value` of `bytes` under `key`, dropping the least recently used past the budget.
    pub fn put(&self, key: K, value: V, bytes: u64) {
        let mut e = self.lock();
        e.clock += 1;
        let used = e.clock;
        if let Some(old) = e.map.insert(key, Entry { value, bytes, used }) {
            e.bytes -= old.bytes;
            e.order.remove(&old.used);
        }
        e.order.insert(used, key);
        e.bytes += bytes;
        while e.bytes > self.budget && e.map.len() > 1 {
            let Some((_, oldest)) = e.order.pop_first() else { break };
            if let Some(v) = e.map.remove(&oldest) {
                e.bytes -= v.bytes;
            }
        }
    }

    /// Entries and bytes kept.
    pub fn kept(&self) -> (usize, u64) {
        let e = self.lock();
        (e.map.len(), e.bytes)
    }

    pub fn budget(&self) -> u64 {
        self.budget
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_least_recently_used_go_first_and_the_newest_stays() {
        let k: Kept<u32, char> = Kept::new(10);
        k.put(1, 'a', 4);
        k.put(2, 'b', 4);
        assert_eq!(k.get(&1), Some('a')); // 2 is now the least recently used
        k.put(3, 'c', 4);
        assert_eq!((k.get(&1), k.get(&2), k.get(&3)), (Some('a'), None, Some('c')));
        assert_eq!(k.kept(), (2, 8));
        k.put(3, 'C', 2); // replaced: its old size no longer counts
        assert_eq!(k.kept(), (2, 6));
        k.put(4, 'd', 50); // larger than the budget: kept alone
        assert_eq!((k.kept(), k.get(&4), k.contains(&1)), ((1, 50), Some('d'), false));
    }

    proptest::proptest! {
        /// Against a list in order of use: the same entries kept, the same bytes.
        #[test]
        fn keeps_what_a_list_in_order_of_use_keeps(ops in proptest::collection::vec((0u8..8, 0u64..7, proptest::bool::ANY), 1..200)) {
            let k: Kept<u8, u64> = Kept::new(12);
            let mut list: Vec<(u8, u64)> = Vec::new(); // least recently used first
            for (key, bytes, put) in ops {
                if put {
                    list.retain(|e| e.0 != key);
                    list.push((key, bytes));
                    while list.iter().map(|e| e.1).sum::<u64>() > 12 && list.len() > 1 {
                        list.remove(0);
                    }
                    k.put(key, bytes, bytes);
                } else {
                    let at = list.iter().position(|e| e.0 == key);
                    if let Some(i) = at {
                        let e = list.remove(i);
                        list.push(e);
                    }
                    proptest::prop_assert_eq!(k.get(&key), at.map(|_| list.last().unwrap().1));
                }
                let bytes: u64 = list.iter().map(|e| e.1).sum();
                proptest::prop_assert_eq!(k.kept(), (list.len(), bytes));
                let e = k.lock();
                proptest::prop_assert_eq!(e.order.len(), e.map.len());
            }
        }
    }
}
