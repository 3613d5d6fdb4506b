//! What a reader keeps loaded within a budget of bytes (slab indexes, frames of positions):
//! the most recently used first. The newest entry is always kept, alone if it is larger
//! than the budget, so that what was just loaded can be used.

use crate::fxhash::FxHashMap;
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
        Kept { budget, entries: Mutex::new(Entries { map: FxHashMap::default(), bytes: 0, clock: 0 }) }
    }

    fn lock(&self) -> MutexGuard<'_, Entries<K, V>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The value of `key`, now the most recently used, if kept.
    pub fn get(&self, key: &K) -> Option<V> {
        let mut e = self.lock();
        e.clock += 1;
        let now = e.clock;
        let entry = e.map.get_mut(key)?;
        entry.used = now;
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
        }
        e.bytes += bytes;
        while e.bytes > self.budget && e.map.len() > 1 {
            let Some(oldest) = e.map.iter().min_by_key(|(_, v)| v.used).map(|(k, _)| *k) else { break };
            if let Some(v) = e.map.remove(&oldest) {
                e.bytes -= v.bytes;
            }
        }
    }

    /// Entries and bytes kept.
    #[cfg(test)]
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
}
