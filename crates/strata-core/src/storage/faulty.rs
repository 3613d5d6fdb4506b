//! A storage that fails on purpose: how the tests reach every failure path of a write (a
//! full disk, an fsync that fails) without filling a disk.

use super::{ObjectInfo, Storage};
use crate::error::{Error, Result};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// When a failing call fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultTiming {
    /// Nothing of the call reaches the storage.
    Before,
    /// The call's bytes land, then it reports the error (an fsync failing on written data).
    After,
}

/// Wraps a storage: the calls that change it (writes, creates, syncs, deletes) of paths under
/// `prefix` are counted, and the `fail_at`-th fails with an I/O error ("No space left on
/// device") — that one only, or (`stays_full`) every one from it on. Reads and listings
/// pass straight through.
#[derive(Debug)]
pub struct Faulty {
    inner: Arc<dyn Storage>,
    fail_at: usize,
    timing: FaultTiming,
    stays_full: bool,
    prefix: String,
    calls: AtomicUsize,
}

impl Faulty {
    /// Fails the `fail_at`-th changing call (counted from 1), once.
    pub fn new(inner: Arc<dyn Storage>, fail_at: usize, timing: FaultTiming) -> Self {
        Self { inner, fail_at, timing, stays_full: false, prefix: String::new(), calls: AtomicUsize::new(0) }
    }

    /// Counts only the calls on paths starting with `prefix` (`"data/"`).
    pub fn only_under(mut self, prefix: &str) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// Fails every counted call from the `fail_at`-th on, as a disk that filled up.
    pub fn staying_full(mut self) -> Self {
        self.stays_full = true;
        self
    }

    /// How many changing calls were counted (failed ones included).
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    fn change(&self, path: &str, call: impl FnOnce() -> Result<()>) -> Result<()> {
        if !path.starts_with(&self.prefix) {
            return call();
        }
        let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        let fails = if self.stays_full { n >= self.fail_at } else { n == self.fail_at };
        if !fails {
            return call();
        }
        if self.timing == FaultTiming::After {
            call()?;
        }
        Err(Error::io(path, std::io::Error::other("injected fault: No space left on device")))
    }
}

impl Storage for Faulty {
    fn read(&self, path: &str) -> Result<Vec<u8>> {
        self.inner.read(path)
    }
    fn read_range(&self, path: &str, offset: u64, len: u64) -> Result<Vec<u8>> {
        self.inner.read_range(path, offset, len)
    }
    fn size(&self, path: &str) -> Result<u64> {
        self.inner.size(path)
    }
    fn write_atomic(&self, path: &str, data: &[u8]) -> Result<()> {
        self.change(path, || self.inner.write_atomic(path, data))
    }
    fn write_atomic_parts(&self, path: &str, parts: &[&[u8]]) -> Result<()> {
        self.change(path, || self.inner.write_atomic_parts(path, parts))
    }
    fn create_new(&self, path: &str, data: &[u8]) -> Result<()> {
        self.change(path, || self.inner.create_new(path, data))
    }
    fn write_at(&self, path: &str, offset: u64, data: &[u8]) -> Result<()> {
        self.change(path, || self.inner.write_at(path, offset, data))
    }
    fn sync(&self, path: &str, len: u64) -> Result<()> {
        self.change(path, || self.inner.sync(path, len))
    }
    fn sync_names(&self) -> Result<()> {
        self.inner.sync_names()
    }
    fn list(&self, prefix: &str) -> Result<Vec<String>> {
        self.inner.list(prefix)
    }
    fn delete(&self, path: &str) -> Result<()> {
        self.change(path, || self.inner.delete(path))
    }
    fn exists(&self, path: &str) -> Result<bool> {
        self.inner.exists(path)
    }
    fn list_for_gc(&self, prefix: &str) -> Result<Vec<ObjectInfo>> {
        self.inner.list_for_gc(prefix)
    }
    fn modified_ns(&self, path: &str) -> Result<Option<u64>> {
        self.inner.modified_ns(path)
    }
    fn is_empty(&self) -> Result<bool> {
        self.inner.is_empty()
    }
    fn top_level(&self) -> Result<Vec<String>> {
        self.inner.top_level()
    }
}
