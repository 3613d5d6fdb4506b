use super::{check_key, Storage};
use crate::error::{Error, Result};
use std::collections::{BTreeSet, HashMap, VecDeque};
use std::fs::{self, File};
use std::io::{ErrorKind as IoKind, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// A store directory on the local file system.
///
/// Data files are immutable once written, so open handles are cached and read with
/// positional reads (`pread`) from any number of threads.
///
/// Durability: a file is flushed before it gets its final name, but for a slab's new files
/// ([`Storage::write_new_parts`]), which are named at once and flushed on threads of their
/// own while the writer goes on; no manifest can name one before its flush is over. A
/// directory whose entries changed (a file renamed into it, a directory made in it) is
/// flushed before the next manifest is linked, all such directories and the pending files
/// at once, and the manifests directory just after: a version whose commit returned
/// survives a crash with every file it names, also on file systems that do not order
/// metadata for you (btrfs logs each file's own changes). `HEAD` is a hint (readers look
/// past it for newer manifests), so its rename is not waited for.
#[derive(Debug)]
pub struct LocalStorage {
    root: PathBuf,
    handles: Mutex<HashMap<String, Arc<File>>>,
    /// Directories whose entries changed since they were last flushed.
    unsynced: Mutex<BTreeSet<PathBuf>>,
    /// New files still being flushed, each on its thread, oldest first.
    flushing: Mutex<VecDeque<Flushing>>,
}

/// A new file's key and the thread flushing it.
type Flushing = (String, JoinHandle<std::io::Result<()>>);

/// New files flushing at once (at most): past it, a write waits for the oldest, so a long
/// import keeps a bounded number of threads and of bytes not yet on disk.
const FLUSHING_AT_MOST: usize = 64;

impl LocalStorage {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self {
            root: root.into(),
            handles: Mutex::new(HashMap::new()),
            unsynced: Mutex::new(BTreeSet::new()),
            flushing: Mutex::new(VecDeque::new()),
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    fn full(&self, path: &str) -> Result<PathBuf> {
        check_key(path)?;
        Ok(self.root.join(path))
    }

    fn map_err(&self, path: &str, e: std::io::Error) -> Error {
        if e.kind() == IoKind::NotFound {
            Error::NotFound(format!("'{path}' in store '{}'", self.root.display()))
        } else {
            Error::io(self.root.join(path).display().to_string(), e)
        }
    }

    fn handle(&self, path: &str) -> Result<Arc<File>> {
        let mut handles = self.handles.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(f) = handles.get(path) {
            return Ok(f.clone());
        }
        let f = Arc::new(File::open(self.full(path)?).map_err(|e| self.map_err(path, e))?);
        if handles.len() > 256 {
            handles.clear();
        }
        handles.insert(path.to_string(), f.clone());
        Ok(f)
    }

    /// Calls `f` with the key and directory entry of every file under the root whose key
    /// starts with `prefix`, temporary files included, in no particular order.
    fn walk(&self, prefix: &str, mut f: impl FnMut(String, &fs::DirEntry) -> Result<()>) -> Result<()> {
        let mut stack = vec![self.root.clone()];
        while let Some(dir) = stack.pop() {
            let entries = match fs::read_dir(&dir) {
                Ok(e) => e,
                Err(e) if e.kind() == IoKind::NotFound => continue,
                Err(e) => return Err(Error::io(dir.display().to_string(), e)),
            };
            for entry in entries {
                let entry = entry.map_err(|e| Error::io(dir.display().to_string(), e))?;
                let p = entry.path();
                let file_type = entry.file_type().map_err(|e| Error::io(p.display().to_string(), e))?;
                if file_type.is_dir() {
                    stack.push(p);
                    continue;
                }
                let Ok(rel) = p.strip_prefix(&self.root) else { continue };
                let key = rel.to_string_lossy().replace(std::path::MAIN_SEPARATOR, "/");
                if key.starts_with(prefix) {
                    f(key, &entry)?;
                }
            }
        }
        Ok(())
    }

    fn temp_path(&self, target: &Path) -> PathBuf {
        let name = target.file_name().and_then(|n| n.to_str()).unwrap_or("tmp");
        target.with_file_name(format!(".{name}.tmp-{}", crate::store::random_suffix()))
    }

    /// Creates `dir` and any missing parents; the directories that gained an entry (the
    /// first existing ancestor and every one created under it but `dir`) are to be flushed.
    fn ensure_dir(&self, path: &str, dir: &Path) -> Result<()> {
        if dir.is_dir() {
            return Ok(());
        }
        let mut existing = dir;
        while let Some(up) = existing.parent().filter(|_| !existing.is_dir()) {
            existing = up;
        }
        fs::create_dir_all(dir).map_err(|e| self.map_err(path, e))?;
        let mut d = dir.parent();
        while let Some(p) = d {
            self.changed(p);
            if p == existing {
                break;
            }
            d = p.parent();
        }
        Ok(())
    }

    /// Notes that `dir`'s entries changed.
    fn changed(&self, dir: &Path) {
        self.unsynced.lock().unwrap_or_else(|p| p.into_inner()).insert(dir.to_path_buf());
    }

    /// Flushes every directory whose entries changed, side by side (each waits on the disk).
    fn flush_dirs(&self, path: &str) -> Result<()> {
        let dirs = std::mem::take(&mut *self.unsynced.lock().unwrap_or_else(|p| p.into_inner()));
        let failed = std::thread::scope(|s| {
            let jobs: Vec<_> = dirs.iter().map(|d| s.spawn(move || sync_dir(d))).collect();
            jobs.into_iter().find_map(|j| j.join().unwrap_or_else(|_| Err(std::io::Error::other("panicked"))).err())
        });
        match failed {
            None => Ok(()),
            Some(e) => {
                // Still unflushed: the next commit tries them again.
                self.unsynced.lock().unwrap_or_else(|p| p.into_inner()).extend(dirs);
                Err(self.map_err(path, e))
            }
        }
    }

    /// Waits for one new file's flush.
    fn flushed(&self, (path, job): Flushing) -> Result<()> {
        let done = job.join().unwrap_or_else(|_| Err(std::io::Error::other("flushing panicked")));
        done.map_err(|e| self.map_err(&path, e))
    }

    /// Waits for the flushes of new files started so far; the first that failed is the error.
    fn finish_flushes(&self) -> Result<()> {
        let pending = std::mem::take(&mut *self.flushing.lock().unwrap_or_else(|p| p.into_inner()));
        // Every one is waited for, failed or not, so none is left running.
        pending.into_iter().map(|f| self.flushed(f)).fold(Ok(()), Result::and)
    }

    /// Waits for the oldest flushes until fewer than [`FLUSHING_AT_MOST`] are running.
    fn bound_flushes(&self) -> Result<()> {
        loop {
            let oldest = {
                let mut pending = self.flushing.lock().unwrap_or_else(|p| p.into_inner());
                if pending.len() < FLUSHING_AT_MOST {
                    return Ok(());
                }
                pending.pop_front()
            };
            if let Some(f) = oldest {
                self.flushed(f)?;
            }
        }
    }

    /// Writes `parts` to a temporary file beside `path`'s target, flushed to disk: its
    /// temporary path and the target.
    fn write_temp(&self, path: &str, parts: &[&[u8]]) -> Result<(PathBuf, PathBuf)> {
        let (f, tmp, target) = self.write_temp_unflushed(path, parts)?;
        f.sync_all().map_err(|e| {
            let _ = fs::remove_file(&tmp);
            self.map_err(path, e)
        })?;
        Ok((tmp, target))
    }

    /// [`write_temp`](Self::write_temp) without the flush: the open file too, to flush later.
    fn write_temp_unflushed(&self, path: &str, parts: &[&[u8]]) -> Result<(File, PathBuf, PathBuf)> {
        let target = self.full(path)?;
        if let Some(parent) = target.parent() {
            self.ensure_dir(path, parent)?;
        }
        let tmp = self.temp_path(&target);
        let mut f = File::create(&tmp).map_err(|e| self.map_err(path, e))?;
        parts.iter().try_for_each(|p| f.write_all(p)).map_err(|e| {
            let _ = fs::remove_file(&tmp);
            self.map_err(path, e)
        })?;
        Ok((f, tmp, target))
    }

    /// Gives a file written by `write_temp` its name, replacing what had it.
    fn publish(&self, path: &str, tmp: &Path, target: &Path) -> Result<()> {
        fs::rename(tmp, target).map_err(|e| {
            let _ = fs::remove_file(tmp);
            self.map_err(path, e)
        })?;
        // The new name is durable once its directory is, before any manifest names it.
        if let Some(dir) = target.parent() {
            self.changed(dir);
        }
        self.handles.lock().unwrap_or_else(|p| p.into_inner()).remove(path);
        Ok(())
    }
}

/// Flushes a directory's entries (names created, renamed or removed in it) to disk.
fn sync_dir(dir: &Path) -> std::io::Result<()> {
    // A relative path's last parent is empty: the working directory.
    let dir = if dir.as_os_str().is_empty() { Path::new(".") } else { dir };
    File::open(dir)?.sync_all()
}

impl Storage for LocalStorage {
    fn read(&self, path: &str) -> Result<Vec<u8>> {
        fs::read(self.full(path)?).map_err(|e| self.map_err(path, e))
    }

    fn read_range(&self, path: &str, offset: u64, len: u64) -> Result<Vec<u8>> {
        let f = self.handle(path)?;
        let mut buf = vec![0u8; len as usize];
        f.read_exact_at(&mut buf, offset).map_err(|e| {
            if e.kind() == IoKind::UnexpectedEof {
                Error::Corruption(format!(
                    "'{path}' is shorter than expected: bytes {offset}..{} are missing",
                    offset + len
                ))
            } else {
                self.map_err(path, e)
            }
        })?;
        Ok(buf)
    }

    fn modified_ns(&self, path: &str) -> Result<Option<u64>> {
        let meta = fs::metadata(self.full(path)?).map_err(|e| self.map_err(path, e))?;
        let since = meta.modified().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok());
        Ok(since.map(|d| d.as_nanos() as u64))
    }

    fn size(&self, path: &str) -> Result<u64> {
        Ok(fs::metadata(self.full(path)?).map_err(|e| self.map_err(path, e))?.len())
    }

    fn write_atomic(&self, path: &str, data: &[u8]) -> Result<()> {
        self.write_atomic_parts(path, &[data])
    }

    fn write_atomic_parts(&self, path: &str, parts: &[&[u8]]) -> Result<()> {
        let (tmp, target) = self.write_temp(path, parts)?;
        self.publish(path, &tmp, &target)
    }

    fn write_new_parts(&self, path: &str, parts: &[&[u8]]) -> Result<()> {
        self.bound_flushes()?;
        let (f, tmp, target) = self.write_temp_unflushed(path, parts)?;
        self.publish(path, &tmp, &target)?;
        // Named before it is on disk: nothing names it until the next manifest, whose
        // creation waits for this flush first.
        let job = std::thread::Builder::new().name("strata-flush".into()).spawn(move || f.sync_all());
        match job {
            Ok(job) => self.flushing.lock().unwrap_or_else(|p| p.into_inner()).push_back((path.to_string(), job)),
            // No thread to spare: the flush is waited for here.
            Err(_) => File::open(&target).and_then(|f| f.sync_all()).map_err(|e| self.map_err(path, e))?,
        }
        Ok(())
    }

    fn create_new(&self, path: &str, data: &[u8]) -> Result<()> {
        // What the new file names must be on disk before it is (a manifest is the commit):
        // the directories that gained names and the new files still flushing are waited for
        // while the file itself is written and flushed, each waiting on the disk, as none
        // needs another. Its directory is made first (`manifests/`, on a first commit), so
        // that the new name in its parent is flushed in that same round, not in one more.
        if let Some(parent) = self.full(path)?.parent() {
            self.ensure_dir(path, parent)?;
        }
        let (written, flushed) = std::thread::scope(|s| {
            let dirs = s.spawn(|| self.flush_dirs(path));
            let files = s.spawn(|| self.finish_flushes());
            let written = self.write_temp(path, &[data]);
            let panicked = || Err(self.map_err(path, std::io::Error::other("flushing panicked")));
            let files = files.join().unwrap_or_else(|_| panicked());
            (written, dirs.join().unwrap_or_else(|_| panicked()).and(files))
        });
        let (tmp, target) = written?;
        // Then any name noted while that round ran (none from this write: its directory
        // was made before).
        if let Err(e) = flushed.and_then(|_| self.flush_dirs(path)) {
            let _ = fs::remove_file(&tmp);
            return Err(e);
        }
        // link(2) fails if the target exists: an atomic "create if absent" with full contents.
        let linked = fs::hard_link(&tmp, &target);
        let _ = fs::remove_file(&tmp);
        match linked {
            Ok(()) => target.parent().map_or(Ok(()), sync_dir).map_err(|e| self.map_err(path, e)),
            Err(e) if e.kind() == IoKind::AlreadyExists => Err(Error::Conflict(format!("'{path}' already exists"))),
            Err(e) => Err(self.map_err(path, e)),
        }
    }

    fn create_new_then_replace(&self, path: &str, data: &[u8], then: &str, then_data: &[u8]) -> Result<()> {
        // `then` is written and flushed under its temporary name while `path` is made, so
        // its wait on the disk is not one more after the commit's.
        let (made, staged) = std::thread::scope(|s| {
            let staged = s.spawn(|| self.write_temp(then, &[then_data]));
            let made = self.create_new(path, data);
            let panicked = || Err(self.map_err(then, std::io::Error::other("writing panicked")));
            (made, staged.join().unwrap_or_else(|_| panicked()))
        });
        match (made, staged) {
            (Ok(()), Ok((tmp, target))) => self.publish(then, &tmp, &target),
            (Ok(()), Err(e)) => Err(e),
            (Err(e), staged) => {
                if let Ok((tmp, _)) = staged {
                    let _ = fs::remove_file(&tmp);
                }
                Err(e)
            }
        }
    }

    fn sync_names(&self) -> Result<()> {
        let files = self.finish_flushes();
        self.flush_dirs("").and(files)
    }

    fn write_at(&self, path: &str, offset: u64, data: &[u8]) -> Result<()> {
        let target = self.full(path)?;
        if let Some(parent) = target.parent() {
            self.ensure_dir(path, parent)?;
        }
        let f = fs::OpenOptions::new().write(true).create(true).truncate(false).open(&target);
        f.and_then(|f| f.write_all_at(data, offset)).map_err(|e| self.map_err(path, e))
    }

    fn sync(&self, path: &str, len: u64) -> Result<()> {
        let target = self.full(path)?;
        let f = fs::OpenOptions::new().write(true).create(true).truncate(false).open(&target);
        f.and_then(|f| {
            if f.metadata()?.len() < len {
                f.set_len(len)?;
            }
            f.sync_all()?;
            // write_at may have created it: its name too, now, as another process commits it.
            target.parent().map_or(Ok(()), sync_dir)
        })
        .map_err(|e| self.map_err(path, e))?;
        self.flush_dirs(path)?;
        self.handles.lock().unwrap_or_else(|p| p.into_inner()).remove(path);
        Ok(())
    }

    fn is_empty(&self) -> Result<bool> {
        // One directory entry answers it: listing would walk the whole tree under the root.
        match fs::read_dir(&self.root) {
            Ok(mut entries) => Ok(entries.next().is_none()),
            Err(e) if e.kind() == IoKind::NotFound => Ok(true),
            Err(e) => Err(Error::io(self.root.display().to_string(), e)),
        }
    }

    fn top_level(&self) -> Result<Vec<String>> {
        // Every entry, empty directories and hidden files included; nothing below is read.
        let entries = match fs::read_dir(&self.root) {
            Ok(e) => e,
            Err(e) if e.kind() == IoKind::NotFound => return Ok(vec![]),
            Err(e) => return Err(Error::io(self.root.display().to_string(), e)),
        };
        let mut names = entries
            .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
            .collect::<std::io::Result<Vec<_>>>()
            .map_err(|e| Error::io(self.root.display().to_string(), e))?;
        names.sort();
        Ok(names)
    }

    fn list_for_gc(&self, prefix: &str) -> Result<Vec<super::ObjectInfo>> {
        let mut out = Vec::new();
        self.walk(prefix, |key, entry| {
            let meta = entry.metadata().map_err(|e| Error::io(entry.path().display().to_string(), e))?;
            let age = meta.modified().ok().and_then(|m| m.elapsed().ok());
            out.push(super::ObjectInfo { path: key, size: Some(meta.len()), age });
            Ok(())
        })?;
        out.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(out)
    }

    fn list(&self, prefix: &str) -> Result<Vec<String>> {
        let mut out = Vec::new();
        self.walk(prefix, |key, entry| {
            // Temporary files of writes in progress are not objects yet.
            if !entry.file_name().to_str().is_some_and(|n| n.starts_with('.')) {
                out.push(key);
            }
            Ok(())
        })?;
        out.sort();
        Ok(out)
    }

    fn delete(&self, path: &str) -> Result<()> {
        self.handles.lock().unwrap_or_else(|p| p.into_inner()).remove(path);
        match fs::remove_file(self.full(path)?) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == IoKind::NotFound => Ok(()),
            Err(e) => Err(self.map_err(path, e)),
        }
    }

    fn exists(&self, path: &str) -> Result<bool> {
        Ok(self.full(path)?.exists())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_top_level_shows_empty_directories_and_a_missing_root_is_empty() {
        let dir = tempfile::tempdir().unwrap();
        let local = LocalStorage::new(dir.path().join("s"));
        assert_eq!(local.top_level().unwrap(), Vec::<String>::new());
        local.write_atomic("data/a.sdat", b"x").unwrap();
        fs::create_dir(dir.path().join("s/empty")).unwrap();
        // A listing of files cannot see the empty directory; the top level does.
        assert_eq!(local.list("").unwrap(), ["data/a.sdat"]);
        assert_eq!(local.top_level().unwrap(), ["data", "empty"]);
    }

    #[test]
    fn a_commit_flushes_what_it_names_and_a_conflict_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("s");
        let local = LocalStorage::new(&root);
        // The directories made for the manifest itself are flushed too.
        local.create_new("manifests/v1.json", b"1").unwrap();
        assert!(local.unsynced.lock().unwrap().is_empty());
        local.write_atomic("data/a.sdat", b"x").unwrap();
        local.create_new_then_replace("manifests/v2.json", b"2", "HEAD", b"2").unwrap();
        // What is left is HEAD's rename: a hint, not waited for.
        assert_eq!(*local.unsynced.lock().unwrap(), BTreeSet::from([root.clone()]));
        let again = local.create_new_then_replace("manifests/v2.json", b"3", "HEAD", b"3");
        assert!(matches!(again, Err(Error::Conflict(_))), "{again:?}");
        assert_eq!(local.read("HEAD").unwrap(), b"2");
        for d in [root.clone(), root.join("manifests")] {
            let names: Vec<String> =
                fs::read_dir(&d).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
            assert!(!names.iter().any(|n| n.contains(".tmp")), "{d:?}: {names:?}");
        }
    }

    #[test]
    fn new_files_are_named_at_once_and_their_flushes_are_over_when_a_manifest_or_a_sync_returns() {
        let dir = tempfile::tempdir().unwrap();
        let local = LocalStorage::new(dir.path().join("s"));
        local.write_new_parts("data/a.sdat", &[b"ab", b"c"]).unwrap();
        local.write_new_parts("index/a.sidx", &[b"i"]).unwrap();
        // Readable under its name straight away, no temporary file left.
        assert_eq!(local.read("data/a.sdat").unwrap(), b"abc");
        assert_eq!(local.list("").unwrap(), ["data/a.sdat", "index/a.sidx"]);
        assert_eq!(local.flushing.lock().unwrap().len(), 2);
        local.create_new("manifests/v1.json", b"1").unwrap();
        assert!(local.flushing.lock().unwrap().is_empty());
        assert!(local.unsynced.lock().unwrap().is_empty());
        local.write_new_parts("data/b.sdat", &[b"b"]).unwrap();
        local.sync_names().unwrap();
        assert!(local.flushing.lock().unwrap().is_empty());
        // However many files a long import writes, only so many flush at once.
        for i in 0..FLUSHING_AT_MOST + 5 {
            local.write_new_parts(&format!("data/c{i}.sdat"), &[b"c"]).unwrap();
            assert!(local.flushing.lock().unwrap().len() <= FLUSHING_AT_MOST);
        }
        // A bad key is refused before anything is written.
        assert!(local.write_new_parts("../x", &[b"x"]).is_err());
    }

    #[test]
    fn writes_create_missing_directories_at_any_depth() {
        let dir = tempfile::tempdir().unwrap();
        // Two missing levels above the store, then the store's own directories.
        let local = LocalStorage::new(dir.path().join("a/b/s"));
        local.create_new("manifests/v1.json", b"{}").unwrap();
        assert!(matches!(local.create_new("manifests/v1.json", b"{}"), Err(Error::Conflict(_))));
        local.write_atomic("HEAD", b"1").unwrap();
        local.write_at("data/p.sdat", 4, b"yz").unwrap();
        local.sync("data/p.sdat", 6).unwrap();
        assert_eq!(local.read("data/p.sdat").unwrap(), b"\0\0\0\0yz");
        assert_eq!(local.list("").unwrap().len(), 3);
        // Every changed directory was flushed by the commit point or the part's sync.
        local.write_atomic("index/i.sidx", b"i").unwrap();
        assert!(!local.unsynced.lock().unwrap().is_empty());
        local.create_new("manifests/v2.json", b"{}").unwrap();
        assert!(local.unsynced.lock().unwrap().is_empty());
        // A root that is a file is an error, not a panic.
        fs::write(dir.path().join("f"), b"").unwrap();
        assert!(LocalStorage::new(dir.path().join("f/s")).write_atomic("HEAD", b"1").is_err());
    }
}
