//! A bounded LRU cache of decoded segments, so repeated and overlapping reads skip I/O and
//! decompression (the role HDF5's chunk cache plays; same 64 MiB default as netCDF-C).

use crate::kept::Kept;
use std::sync::Arc;

pub const DEFAULT_CACHE_BYTES: u64 = 64 << 20;

/// (reader, slab id, sub-chunk (variable, chunk, sub-chunk), precision level read, 0 for
/// all): the slab's part unique within one store version, the reader's (a number of its
/// own, see `StoreReader`) among the readers sharing the cache. (Not the segment's offset:
/// in a store that indexes a file in place, every chunk never written is an empty segment
/// at offset 0.)
pub type SegmentId = (u64, u64, (u32, u64, u32), u8);

/// Decoded segments, the last used kept up to `capacity` bytes (see `Kept`); none with
/// a capacity of 0.
#[derive(Debug)]
pub struct SegmentCache {
    kept: Kept<SegmentId, Arc<Vec<u8>>>,
}

impl SegmentCache {
    pub fn new(capacity: u64) -> Self {
        Self { kept: Kept::new(capacity) }
    }

    pub fn capacity(&self) -> u64 {
        self.kept.budget()
    }

    pub fn get(&self, id: SegmentId) -> Option<Arc<Vec<u8>>> {
        if self.capacity() == 0 {
            return None;
        }
        self.kept.get(&id)
    }

    /// Keeps `data` unless it is larger than an eighth of the cache (a scan must not flush it).
    pub fn insert(&self, id: SegmentId, data: Arc<Vec<u8>>) {
        let size = data.len() as u64;
        if size == 0 || size > self.capacity() / 8 {
            return;
        }
        self.kept.put(id, data, size);
    }

    pub fn bytes(&self) -> u64 {
        self.kept.kept().1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evicts_least_recently_used_and_stays_bounded() {
        let c = SegmentCache::new(800);
        for i in 0..10u64 {
            c.insert((0, 0, (0, i, 0), 0), Arc::new(vec![i as u8; 100]));
            assert!(c.bytes() <= 800);
        }
        assert!(c.get((0, 0, (0, 0, 0), 0)).is_none() && c.get((0, 0, (0, 1, 0), 0)).is_none());
        assert!(c.get((0, 0, (0, 2, 0), 0)).is_some()); // now most recent
        c.insert((0, 0, (0, 10, 0), 0), Arc::new(vec![0; 100]));
        assert!(c.get((0, 0, (0, 2, 0), 0)).is_some(), "recently used entries survive");
        assert!(c.get((0, 0, (0, 3, 0), 0)).is_none(), "the least recently used one went");
        c.insert((0, 0, (0, 11, 0), 0), Arc::new(vec![0; 200])); // larger than capacity / 8: not kept
        assert!(c.get((0, 0, (0, 11, 0), 0)).is_none());
        let off = SegmentCache::new(0);
        off.insert((0, 0, (0, 0, 0), 0), Arc::new(vec![1]));
        assert!(off.get((0, 0, (0, 0, 0), 0)).is_none());
    }
}
