//! One interface for every byte the store reads or writes.
//!
//! Paths are relative, `/`-separated keys (`data/s000001-9f3c.sdat`). Every backend —
//! the local file system now, object stores later — must pass [`conformance::run`].

pub mod conformance;
mod faulty;
mod local;
mod memory;
mod throttled;

pub use faulty::{FaultTiming, Faulty};
pub use local::LocalStorage;
pub use memory::MemoryStorage;
pub use throttled::Throttled;

use crate::error::Result;

pub trait Storage: Send + Sync + std::fmt::Debug {
    /// The whole object. `NotFound` if it does not exist.
    fn read(&self, path: &str) -> Result<Vec<u8>>;
    /// `len` bytes starting at `offset`. A range past the end is `Corruption` (the index
    /// promised bytes that are not there), never a short read.
    fn read_range(&self, path: &str, offset: u64, len: u64) -> Result<Vec<u8>>;
    /// Size in bytes. `NotFound` if it does not exist.
    fn size(&self, path: &str) -> Result<u64>;
    /// Creates or replaces the object atomically: readers see the old or the new bytes, never a mix.
    fn write_atomic(&self, path: &str, data: &[u8]) -> Result<()>;
    /// [`write_atomic`](Self::write_atomic) of the parts one after the other, without
    /// joining them in memory first (a slab's segments are written where they were encoded).
    fn write_atomic_parts(&self, path: &str, parts: &[&[u8]]) -> Result<()> {
        self.write_atomic(path, &parts.concat())
    }
    /// [`write_atomic_parts`](Self::write_atomic_parts) of a new file no manifest names yet
    /// (a slab's data or index file, under a fresh name): the storage may finish making it
    /// durable later, in the background, but before its next [`create_new`](Self::create_new)
    /// or [`sync_names`](Self::sync_names) returns, which report a flush that failed.
    fn write_new_parts(&self, path: &str, parts: &[&[u8]]) -> Result<()> {
        self.write_atomic_parts(path, parts)
    }
    /// Creates the object atomically only if it does not exist yet; `Conflict` otherwise.
    fn create_new(&self, path: &str, data: &[u8]) -> Result<()>;
    /// [`create_new`](Self::create_new) of `path`, then, only if that succeeded,
    /// [`write_atomic`](Self::write_atomic) of `then`: a commit's manifest and the `HEAD`
    /// that names it. A storage may prepare `then` beside the first step, as long as it
    /// takes its name only after `path` has.
    fn create_new_then_replace(&self, path: &str, data: &[u8], then: &str, then_data: &[u8]) -> Result<()> {
        self.create_new(path, data)?;
        self.write_atomic(then, then_data)
    }
    /// Writes `data` at `offset` of a file several writers fill at once (the parallel
    /// placements), creating it if needed; bytes never written read as zeros. Such a file
    /// is made durable by [`sync`](Self::sync) and becomes part of a store only when a
    /// manifest names it.
    fn write_at(&self, path: &str, offset: u64, data: &[u8]) -> Result<()>;
    /// Makes what [`write_at`](Self::write_at) wrote to `path` durable, the file's length
    /// included: at least `len` bytes (a file whose tail was never written is extended).
    fn sync(&self, path: &str, len: u64) -> Result<()>;
    /// Makes every name this storage gave so far durable: a writer whose files another
    /// process commits calls it before it reports them. (A manifest's own creation does it
    /// for the files of its process.)
    fn sync_names(&self) -> Result<()> {
        Ok(())
    }
    /// Every object whose path starts with `prefix`, sorted.
    fn list(&self, prefix: &str) -> Result<Vec<String>>;
    /// Removes the object; removing a missing object is not an error.
    fn delete(&self, path: &str) -> Result<()>;
    fn exists(&self, path: &str) -> Result<bool>;
    /// Every object under `prefix`, leftovers of interrupted writes (temporary objects)
    /// included, with its size and age where the storage knows them: what garbage
    /// collection walks. An object of unknown age is never collected.
    fn list_for_gc(&self, prefix: &str) -> Result<Vec<ObjectInfo>> {
        Ok(self.list(prefix)?.into_iter().map(|path| ObjectInfo { path, size: None, age: None }).collect())
    }
    /// When the object was last modified, in nanoseconds since the Unix epoch, where the
    /// storage knows it (None otherwise): how a file indexed in place is seen to change.
    fn modified_ns(&self, _path: &str) -> Result<Option<u64>> {
        Ok(None)
    }
    /// Whether the storage holds anything at all (hidden files included).
    fn is_empty(&self) -> Result<bool> {
        Ok(self.list("")?.is_empty())
    }
    /// The names directly under the root (a file's name, or the first part of the paths
    /// below a directory), sorted and each once: what tells a store's directory from any
    /// other without walking all of it.
    fn top_level(&self) -> Result<Vec<String>> {
        let mut names: Vec<String> =
            self.list("")?.iter().map(|p| p.split('/').next().unwrap_or_default().to_string()).collect();
        // `list` is sorted, so the paths under one name are adjacent.
        names.dedup();
        Ok(names)
    }
}

/// An object as garbage collection sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectInfo {
    pub path: String,
    pub size: Option<u64>,
    /// Time since the object was last written.
    pub age: Option<std::time::Duration>,
}

/// Rejects paths that could escape the store root or are not plain relative keys.
pub(crate) fn check_key(path: &str) -> Result<()> {
    let bad = path.is_empty()
        || path.starts_with('/')
        || path.contains('\\')
        || path.split('/').any(|p| p.is_empty() || p == "." || p == "..");
    if bad {
        return Err(crate::Error::InvalidArgument(format!("invalid storage path '{path}'")));
    }
    Ok(())
}
