//! A fast hash for the slab index's maps, keyed by small integers (segment keys, sub-chunk
//! ids). std's SipHash resists keys chosen to collide, which these are not (they come from
//! the store's own index files), and was a tenth of opening a store and reading a box
//! (hashing 80 segment keys). The multiply-rotate scheme of rustc's FxHasher.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A HashMap hashed by [`FxHasher`].
pub type FxHashMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;

#[derive(Debug, Default, Clone, Copy)]
pub struct FxHasher {
    hash: u64,
}

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl FxHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.add(u64::from_le_bytes(c.try_into().unwrap_or_default()));
        }
        for &b in chunks.remainder() {
            self.add(u64::from(b));
        }
    }
    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }
    #[inline]
    fn write_u16(&mut self, i: u16) {
        self.add(u64::from(i));
    }
    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }
    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }
    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }
    #[inline]
    fn finish(&self) -> u64 {
        self.hash
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_keyed_by_tuples_work_and_spread() {
        let mut m: FxHashMap<(u32, u64, u32), usize> = FxHashMap::default();
        for i in 0..10_000u32 {
            m.insert((i % 3, u64::from(i) * 7, i), i as usize);
        }
        assert_eq!(m.len(), 10_000);
        assert!((0..10_000u32).all(|i| m[&(i % 3, u64::from(i) * 7, i)] == i as usize));
        // The top bits (what the table's control bytes use) differ between close keys.
        let top = |k: u64| {
            let mut h = FxHasher::default();
            h.write_u64(k);
            h.finish() >> 57
        };
        let distinct: std::collections::HashSet<u64> = (0..256).map(top).collect();
        assert!(distinct.len() > 64, "{}", distinct.len());
    }
}
