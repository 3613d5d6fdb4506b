//! The stores under the served directory, by name, and their open readers.
//!
//! A dataset's name is its path relative to the root, with `/` between components. A name
//! from a request is checked component by component (no `..`, no empty or hidden parts) and
//! the directory it names must resolve, links followed, inside the root: a request can reach
//! no file outside it.

use crate::ApiError;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use strata_core::cache::DEFAULT_CACHE_BYTES;
use strata_core::{ReaderCaches, Session, Store, StoreReader};
use strata_sql::{SqlOptions, SqlSession};

/// Directories deeper than this under the root are not searched for stores.
const MAX_DEPTH: usize = 4;
/// Open readers kept (each holds its manifest and its decoded segments; the indexes and
/// positions they load are in the shared caches).
const MAX_OPEN: usize = 32;
/// Names whose directory and newest version are remembered (see [`Known`]).
const MAX_KNOWN: usize = 1024;

#[derive(Debug)]
pub(crate) struct Catalog {
    root: PathBuf,
    open: Mutex<Recent<Arc<StoreReader>>>,
    sql: Mutex<Recent<Arc<SqlSession>>>,
    known: Mutex<HashMap<String, Known>>,
    /// Where every reader the server opens keeps the slab indexes and positions it loaded:
    /// one budget for all the datasets, whatever their number. Decoded segments are each
    /// reader's own (see `ReaderCaches::with_own_segments`).
    caches: ReaderCaches,
}

/// A name already resolved: its directory inside the root and its newest version. Versions
/// only grow, each with a manifest file of its own: while that file is the one seen and the
/// next version's manifest does not exist, the version stands. Two metadata calls, where
/// resolving again took about fifteen (the path walked link by link, `HEAD` opened, read
/// and parsed) on each of the several small requests a DAP2 client sends per file it opens.
#[derive(Debug, Clone)]
struct Known {
    dir: PathBuf,
    stamp: Stamp,
}

/// A dataset's version as served: its number, and which manifest file it is. A store
/// deleted and made again under the same name starts again at version 1 with another
/// manifest file; readers opened on the old one must not answer for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stamp {
    version: u64,
    manifest: Option<FileId>,
}

/// Which file a path names, and its state: the same for a file left as it was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileId {
    dev: u64,
    ino: u64,
    size: u64,
    mtime_ns: i128,
}

fn file_id(path: &Path) -> Option<FileId> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some(FileId {
        dev: m.dev(),
        ino: m.ino(),
        size: m.size(),
        mtime_ns: i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
    })
}

fn manifest_file(dir: &Path, version: u64) -> PathBuf {
    dir.join(strata_core::store::manifest_path(version))
}

/// Objects opened per dataset version, at most `capacity`, the least recently used dropped
/// first (a dropped object stays alive while a request still holds it).
#[derive(Debug)]
struct Recent<T> {
    capacity: usize,
    tick: u64,
    entries: HashMap<String, (Stamp, T, u64)>,
}

impl<T: Clone> Recent<T> {
    fn new(capacity: usize) -> Self {
        Recent { capacity: capacity.max(1), tick: 0, entries: HashMap::new() }
    }

    /// The object of `name` at version `stamp`, if open.
    fn get(&mut self, name: &str, stamp: Stamp) -> Option<T> {
        self.tick += 1;
        let tick = self.tick;
        let e = self.entries.get_mut(name).filter(|e| e.0 == stamp)?;
        e.2 = tick;
        Some(e.1.clone())
    }

    fn insert(&mut self, name: &str, stamp: Stamp, value: T) {
        self.tick += 1;
        if self.entries.len() >= self.capacity && !self.entries.contains_key(name) {
            if let Some(oldest) = self.entries.iter().min_by_key(|(_, e)| e.2).map(|(k, _)| k.clone()) {
                self.entries.remove(&oldest);
            }
        }
        self.entries.insert(name.to_string(), (stamp, value, self.tick));
    }
}

/// A directory with a committed version: a `HEAD`, or the first version's manifest (a first
/// commit stopped before its `HEAD`; the manifest is the commit).
fn is_store_dir(p: &Path) -> bool {
    let first = p.join(strata_core::store::manifest_path(1));
    (p.join("HEAD").is_file() && p.join("manifests").is_dir()) || first.is_file()
}

impl Catalog {
    pub fn new(root: &Path) -> Result<Catalog, ApiError> {
        let root =
            root.canonicalize().map_err(|e| ApiError::startup(format!("cannot serve '{}': {e}", root.display())))?;
        if !root.is_dir() {
            return Err(ApiError::startup(format!("cannot serve '{}': not a directory", root.display())));
        }
        Ok(Catalog {
            root,
            open: Mutex::new(Recent::new(MAX_OPEN)),
            sql: Mutex::new(Recent::new(MAX_OPEN / 4)),
            known: Mutex::new(HashMap::new()),
            caches: ReaderCaches::new(0),
        })
    }

    /// Every store's name, sorted. The root itself, when it is a store, is named by its
    /// directory's name.
    pub fn names(&self) -> Vec<String> {
        let mut out = Vec::new();
        if is_store_dir(&self.root) {
            out.push(self.root_name());
        } else {
            walk(&self.root, "", 0, &mut out);
        }
        out.sort();
        out
    }

    fn root_name(&self) -> String {
        self.root.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "store".into())
    }

    /// The directory a request's dataset name refers to.
    fn resolve(&self, name: &str) -> Result<PathBuf, ApiError> {
        let unknown = || ApiError::not_found(format!("no dataset '{name}' (GET /api/datasets lists them)"));
        if is_store_dir(&self.root) {
            return if name == self.root_name() { Ok(self.root.clone()) } else { Err(unknown()) };
        }
        let parts: Vec<&str> = name.split('/').collect();
        if name.is_empty()
            || parts.len() > MAX_DEPTH
            || parts.iter().any(|p| p.is_empty() || p.starts_with('.') || p.contains('\\') || p.contains('\0'))
        {
            return Err(unknown());
        }
        let path = parts.iter().fold(self.root.clone(), |p, c| p.join(c));
        let real = path.canonicalize().map_err(|_| unknown())?;
        if !real.starts_with(&self.root) || !is_store_dir(&real) {
            return Err(unknown());
        }
        Ok(real)
    }

    /// A reader on the newest version of dataset `name` (opened once per version).
    pub fn reader(&self, name: &str) -> Result<Arc<StoreReader>, ApiError> {
        let (dir, store, stamp) = self.newest(name)?;
        if let Some(r) = self.open.lock().unwrap_or_else(|p| p.into_inner()).get(name, stamp) {
            return Ok(r);
        }
        let caches = self.caches.with_own_segments(DEFAULT_CACHE_BYTES);
        let reader = Arc::new(StoreReader::open_sharing(store, Some(stamp.version), caches)?);
        self.check_in_place(&dir, reader.manifest())?;
        self.open.lock().unwrap_or_else(|p| p.into_inner()).insert(name, stamp, reader.clone());
        Ok(reader)
    }
}

impl Catalog {
    /// The directory, store and newest version of dataset `name` (see [`Known`]).
    fn newest(&self, name: &str) -> Result<(PathBuf, Store, Stamp), ApiError> {
        let known = self.known.lock().unwrap_or_else(|p| p.into_inner()).get(name).cloned();
        if let Some(k) = known {
            let v = k.stamp.version;
            if file_id(&manifest_file(&k.dir, v)) == k.stamp.manifest && !manifest_file(&k.dir, v + 1).exists() {
                return Ok((k.dir.clone(), Store::local(&k.dir.to_string_lossy()), k.stamp));
            }
        }
        let dir = self.resolve(name)?;
        let store = Store::local(&dir.to_string_lossy());
        let version = store.latest_version()?;
        let stamp = Stamp { version, manifest: file_id(&manifest_file(&dir, version)) };
        let mut known = self.known.lock().unwrap_or_else(|p| p.into_inner());
        if known.len() >= MAX_KNOWN {
            known.clear();
        }
        known.insert(name.to_string(), Known { dir: dir.clone(), stamp });
        Ok((dir, store, stamp))
    }

    /// The reader of `name` if it is open at the newest version, else None ([`reader`]
    /// opens it). Only metadata calls and no store read: a handler may call it on its own
    /// thread, where handing the lookup to a blocking thread and back cost more than the
    /// lookup (DAP2 clients send several small requests per file they open).
    pub fn open_reader(&self, name: &str) -> Result<Option<Arc<StoreReader>>, ApiError> {
        let (_, _, stamp) = self.newest(name)?;
        Ok(self.open.lock().unwrap_or_else(|p| p.into_inner()).get(name, stamp))
    }

    /// A store that indexes a file in place reads that file beside it: the file, links
    /// followed, must be inside the root too (a store served as the root itself has its file
    /// outside, and is refused).
    fn check_in_place(&self, dir: &Path, manifest: &strata_core::Manifest) -> Result<(), ApiError> {
        let Some(source) = manifest.source() else { return Ok(()) };
        let parent = dir.parent().unwrap_or(dir);
        let inside = parent.join(&source.path).canonicalize().is_ok_and(|p| p.starts_with(&self.root));
        if !inside {
            return Err(ApiError::not_found(format!(
                "this dataset indexes '{}', which is not inside the served directory: serve the directory \
                 holding both",
                source.path
            )));
        }
        Ok(())
    }

    /// Bytes the readers' shared caches hold: slab indexes, frames of positions.
    pub fn cache_bytes(&self) -> (u64, u64) {
        let (_, indexes, positions) = self.caches.bytes();
        (indexes, positions)
    }

    /// A SQL session over dataset `name`, its table named by [`sql_table`].
    pub fn sql(&self, name: &str, session: Arc<Session>) -> Result<Arc<SqlSession>, ApiError> {
        let (dir, store, stamp) = self.newest(name)?;
        let path = dir.to_string_lossy().into_owned();
        if let Some(s) = self.sql.lock().unwrap_or_else(|p| p.into_inner()).get(name, stamp) {
            return Ok(s);
        }
        self.check_in_place(&dir, &store.manifest(Some(stamp.version))?)?;
        let options = SqlOptions {
            session,
            target_partitions: Some(2),
            caches: Some(self.caches.with_own_segments(DEFAULT_CACHE_BYTES)),
            ..SqlOptions::default()
        };
        let s = Arc::new(SqlSession::open(&[(path, Some(sql_table(name)))], options)?);
        self.sql.lock().unwrap_or_else(|p| p.into_inner()).insert(name, stamp, s.clone());
        Ok(s)
    }
}

/// The SQL table of a dataset: its last path component as SQL names it.
pub(crate) fn sql_table(name: &str) -> String {
    strata_sql::default_table_name(name.rsplit('/').next().unwrap_or(name))
}

fn walk(dir: &Path, prefix: &str, depth: usize, out: &mut Vec<String>) {
    if depth >= MAX_DEPTH {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let path = e.path();
        // Links are not followed: a link out of the root would list what cannot be opened.
        if name.starts_with('.') || !e.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let full = if prefix.is_empty() { name } else { format!("{prefix}/{name}") };
        if is_store_dir(&path) {
            out.push(full);
        } else {
            walk(&path, &full, depth + 1, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(version: u64) -> Stamp {
        Stamp { version, manifest: None }
    }

    #[test]
    fn the_least_recently_used_goes_first() {
        let mut r = Recent::new(2);
        r.insert("a", v(1), 'a');
        r.insert("b", v(1), 'b');
        assert_eq!(r.get("a", v(1)), Some('a'));
        r.insert("c", v(1), 'c'); // b is the least recently used
        assert_eq!((r.get("a", v(1)), r.get("b", v(1)), r.get("c", v(1))), (Some('a'), None, Some('c')));
        assert_eq!(r.get("a", v(2)), None); // another version is not the same object
        let other = Stamp { version: 1, manifest: Some(FileId { dev: 1, ino: 2, size: 3, mtime_ns: 4 }) };
        assert_eq!(r.get("a", other), None); // nor the same version of a store made again
    }
}
