//! A store: storage plus the version chain (`HEAD` and `manifests/`).

use crate::error::{Error, Result};
use crate::manifest::{Manifest, FORMAT_NAME, FORMAT_VERSION};
use crate::storage::{LocalStorage, Storage};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

pub const HEAD: &str = "HEAD";

pub fn manifest_path(version: u64) -> String {
    format!("manifests/v{version:08}.json")
}

#[derive(Debug, Serialize, Deserialize)]
struct HeadPointer {
    format: String,
    format_version: u32,
    version: u64,
}

/// A short random hex string for file names, so concurrent writers never collide.
pub fn random_suffix() -> String {
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    h.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos()));
    h.write_u32(std::process::id());
    format!("{:016x}", h.finish())
}

pub fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

#[derive(Debug, Clone)]
pub struct Store {
    storage: Arc<dyn Storage>,
    name: String,
    /// Where files indexed in place are found: the directory holding the store.
    beside: Option<Arc<dyn Storage>>,
}

impl Store {
    pub fn new(storage: Arc<dyn Storage>, name: impl Into<String>) -> Self {
        Self { storage, name: name.into(), beside: None }
    }

    pub fn local(path: &str) -> Self {
        let parent = std::path::Path::new(path).parent().filter(|p| !p.as_os_str().is_empty());
        let beside = LocalStorage::new(parent.unwrap_or(std::path::Path::new(".")));
        Self::new(Arc::new(LocalStorage::new(path)), path).with_beside(Arc::new(beside))
    }

    /// Sets the storage of the files this store may index in place (the store's parent).
    pub fn with_beside(mut self, storage: Arc<dyn Storage>) -> Self {
        self.beside = Some(storage);
        self
    }

    pub fn storage(&self) -> &Arc<dyn Storage> {
        &self.storage
    }

    /// The storage holding the files this store indexes in place.
    pub fn beside(&self) -> Result<&Arc<dyn Storage>> {
        self.beside.as_ref().ok_or_else(|| {
            Error::Compatibility(format!(
                "'{}' indexes a file in place: open it from its directory beside that file",
                self.name
            ))
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether the store has a committed version: a `HEAD`, or (a first commit stopped
    /// between its two steps) the manifest of version 1, which is the commit itself.
    pub fn exists(&self) -> Result<bool> {
        Ok(self.storage.exists(HEAD)? || self.storage.exists(&manifest_path(1))?)
    }

    /// The newest committed version. `HEAD` is a hint: a manifest committed after it (a
    /// writer that stopped between the two steps of a commit) is still found.
    pub fn latest_version(&self) -> Result<u64> {
        let head = match self.storage.read(HEAD) {
            Ok(b) => b,
            // A first commit that stopped after its manifest: the version is committed.
            Err(Error::NotFound(_)) if self.storage.exists(&manifest_path(1))? => {
                let mut v = 1;
                while self.storage.exists(&manifest_path(v + 1))? {
                    v += 1;
                }
                return Ok(v);
            }
            Err(Error::NotFound(_)) => {
                return Err(Error::NotFound(format!("'{}' is not a strata store (no HEAD)", self.name)))
            }
            Err(e) => return Err(e),
        };
        let head: HeadPointer = serde_json::from_slice(&head)
            .map_err(|e| Error::Corruption(format!("HEAD of '{}' is unreadable: {e}", self.name)))?;
        if head.format != FORMAT_NAME {
            return Err(Error::Corruption(format!("HEAD of '{}' is not a strata HEAD", self.name)));
        }
        if head.format_version != FORMAT_VERSION {
            return Err(Error::Compatibility(format!(
                "'{}' uses format version {}; this build reads version {FORMAT_VERSION}",
                self.name, head.format_version
            )));
        }
        let mut v = head.version;
        while self.storage.exists(&manifest_path(v + 1))? {
            v += 1;
        }
        Ok(v)
    }

    pub fn manifest(&self, version: Option<u64>) -> Result<Manifest> {
        let v = match version {
            Some(v) => v,
            None => self.latest_version()?,
        };
        let path = manifest_path(v);
        let bytes = self.storage.read(&path).map_err(|e| match e {
            Error::NotFound(_) => Error::NotFound(format!("version {v} of '{}'", self.name)),
            other => other,
        })?;
        let m = Manifest::from_json(&bytes, &format!("manifest {path}"))?;
        if m.version != v {
            return Err(Error::Corruption(format!("{path} claims to be version {}", m.version)));
        }
        Ok(m)
    }

    /// All versions, oldest first.
    pub fn versions(&self) -> Result<Vec<u64>> {
        let latest = self.latest_version()?;
        let mut out = Vec::new();
        for p in self.storage.list("manifests/")? {
            if let Some(v) =
                p.strip_prefix("manifests/v").and_then(|s| s.strip_suffix(".json")).and_then(|s| s.parse().ok())
            {
                if v <= latest {
                    out.push(v);
                }
            }
        }
        // No version is ever removed (there is no garbage collection of versions), so every
        // version up to the newest has its manifest.
        out.sort_unstable();
        let missing: Vec<u64> = (1..=latest).filter(|v| out.binary_search(v).is_err()).collect();
        if !missing.is_empty() {
            let files: Vec<String> = missing.iter().map(|&v| manifest_path(v)).collect();
            return Err(Error::Corruption(format!(
                "'{}': a committed version's manifest is missing ({})",
                self.name,
                files.join(", ")
            )));
        }
        Ok(out)
    }

    /// Publishes `manifest` as the next version. Fails with `Conflict` if another writer
    /// published that version first; the store is then unchanged.
    pub fn commit(&self, manifest: &Manifest) -> Result<()> {
        let head =
            HeadPointer { format: FORMAT_NAME.into(), format_version: FORMAT_VERSION, version: manifest.version };
        let head = serde_json::to_vec(&head).unwrap_or_default();
        self.storage.create_new_then_replace(&manifest_path(manifest.version), &manifest.to_json(), HEAD, &head)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::MemoryStorage;
    use crate::writer::{DatasetSchema, StoreWriter, WriterOptions};

    #[test]
    fn a_first_commit_stopped_before_head_is_committed() {
        let store = Store::new(Arc::new(MemoryStorage::new()), "s");
        let schema = DatasetSchema { dims: vec![], record_dim: None, attrs: vec![], variables: vec![] };
        StoreWriter::create(store.clone(), schema, &WriterOptions::default()).unwrap().commit("v1").unwrap();
        // The writer stopped between its manifest (the commit) and HEAD (a hint).
        store.storage().delete(HEAD).unwrap();
        assert!(store.exists().unwrap());
        assert_eq!(store.latest_version().unwrap(), 1);
        assert_eq!(store.versions().unwrap(), vec![1]);
        let report = crate::gc::collect(&store, std::time::Duration::ZERO, false).unwrap();
        assert_eq!(report.versions, 1);
        assert!(report.removed.is_empty(), "{:?}", report.removed);
    }
}
