//! A storage whose reads cross a slow link: for measuring how well reading overlaps
//! decoding (a cold disk, NFS, an object store) on a machine whose files sit in memory.

use super::Storage;
use crate::error::Result;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Wraps a storage: every range read waits `latency`, and all reads share one link of
/// `bytes_per_s` (a read's bytes go through after the bytes of earlier reads). Writes,
/// listings and whole-object reads of metadata pass straight through.
#[derive(Debug)]
pub struct Throttled {
    inner: Arc<dyn Storage>,
    bytes_per_s: f64,
    latency: Duration,
    link_free_at: Mutex<Instant>,
}

impl Throttled {
    pub fn new(inner: Arc<dyn Storage>, bytes_per_s: f64, latency: Duration) -> Self {
        Self { inner, bytes_per_s: bytes_per_s.max(1.0), latency, link_free_at: Mutex::new(Instant::now()) }
    }
}

impl Storage for Throttled {
    fn read(&self, path: &str) -> Result<Vec<u8>> {
        self.inner.read(path)
    }

    fn read_range(&self, path: &str, offset: u64, len: u64) -> Result<Vec<u8>> {
        let start = Instant::now();
        let done = {
            let mut free = self.link_free_at.lock().unwrap_or_else(|p| p.into_inner());
            let begin = (*free).max(start);
            *free = begin + Duration::from_secs_f64(len as f64 / self.bytes_per_s);
            *free
        } + self.latency;
        let bytes = self.inner.read_range(path, offset, len)?;
        std::thread::sleep(done.saturating_duration_since(Instant::now()));
        Ok(bytes)
    }

    fn size(&self, path: &str) -> Result<u64> {
        self.inner.size(path)
    }

    fn write_atomic(&self, path: &str, data: &[u8]) -> Result<()> {
        self.inner.write_atomic(path, data)
    }

    fn write_atomic_parts(&self, path: &str, parts: &[&[u8]]) -> Result<()> {
        self.inner.write_atomic_parts(path, parts)
    }

    fn create_new(&self, path: &str, data: &[u8]) -> Result<()> {
        self.inner.create_new(path, data)
    }

    fn write_at(&self, path: &str, offset: u64, data: &[u8]) -> Result<()> {
        self.inner.write_at(path, offset, data)
    }

    fn sync(&self, path: &str, len: u64) -> Result<()> {
        self.inner.sync(path, len)
    }

    fn sync_names(&self) -> Result<()> {
        self.inner.sync_names()
    }

    fn list(&self, prefix: &str) -> Result<Vec<String>> {
        self.inner.list(prefix)
    }

    fn delete(&self, path: &str) -> Result<()> {
        self.inner.delete(path)
    }

    fn exists(&self, path: &str) -> Result<bool> {
        self.inner.exists(path)
    }
}
