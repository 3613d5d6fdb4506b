use super::{check_key, Storage};
use crate::error::{Error, Result};
use std::collections::BTreeMap;
use std::sync::RwLock;

/// An in-memory store, for tests and for staging.
#[derive(Debug, Default)]
pub struct MemoryStorage {
    objects: RwLock<BTreeMap<String, Vec<u8>>>,
}

impl MemoryStorage {
    pub fn new() -> Self {
        Self::default()
    }

    fn objects(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, Vec<u8>>> {
        self.objects.read().unwrap_or_else(|p| p.into_inner())
    }

    fn objects_mut(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<String, Vec<u8>>> {
        self.objects.write().unwrap_or_else(|p| p.into_inner())
    }
}

impl Storage for MemoryStorage {
    fn read(&self, path: &str) -> Result<Vec<u8>> {
        check_key(path)?;
        self.objects().get(path).cloned().ok_or_else(|| Error::NotFound(format!("'{path}'")))
    }

    fn read_range(&self, path: &str, offset: u64, len: u64) -> Result<Vec<u8>> {
        check_key(path)?;
        let objects = self.objects();
        let data = objects.get(path).ok_or_else(|| Error::NotFound(format!("'{path}'")))?;
        let end = offset.checked_add(len).filter(|&e| e <= data.len() as u64).ok_or_else(|| {
            Error::Corruption(format!(
                "'{path}' is shorter than expected: bytes {offset}..{} are missing",
                offset.saturating_add(len)
            ))
        })?;
        Ok(data[offset as usize..end as usize].to_vec())
    }

    fn size(&self, path: &str) -> Result<u64> {
        check_key(path)?;
        self.objects().get(path).map(|d| d.len() as u64).ok_or_else(|| Error::NotFound(format!("'{path}'")))
    }

    fn write_atomic(&self, path: &str, data: &[u8]) -> Result<()> {
        check_key(path)?;
        self.objects_mut().insert(path.to_string(), data.to_vec());
        Ok(())
    }

    fn create_new(&self, path: &str, data: &[u8]) -> Result<()> {
        check_key(path)?;
        let mut objects = self.objects_mut();
        if objects.contains_key(path) {
            return Err(Error::Conflict(format!("'{path}' already exists")));
        }
        objects.insert(path.to_string(), data.to_vec());
        Ok(())
    }

    fn write_at(&self, path: &str, offset: u64, data: &[u8]) -> Result<()> {
        check_key(path)?;
        let mut objects = self.objects_mut();
        let object = objects.entry(path.to_string()).or_default();
        let end = offset as usize + data.len();
        if object.len() < end {
            object.resize(end, 0);
        }
        object[offset as usize..end].copy_from_slice(data);
        Ok(())
    }

    fn sync(&self, path: &str, len: u64) -> Result<()> {
        check_key(path)?;
        let mut objects = self.objects_mut();
        let object = objects.entry(path.to_string()).or_default();
        if (object.len() as u64) < len {
            object.resize(len as usize, 0);
        }
        Ok(())
    }

    fn list(&self, prefix: &str) -> Result<Vec<String>> {
        Ok(self.objects().keys().filter(|k| k.starts_with(prefix)).cloned().collect())
    }

    fn delete(&self, path: &str) -> Result<()> {
        check_key(path)?;
        self.objects_mut().remove(path);
        Ok(())
    }

    fn exists(&self, path: &str) -> Result<bool> {
        check_key(path)?;
        Ok(self.objects().contains_key(path))
    }
}
