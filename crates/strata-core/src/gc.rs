//! `strata gc`: removes the files no committed version names — leftovers of failed or
//! interrupted writes — safely beside readers and writers.
//!
//! Safety rules. Versions are never removed, so a reader pinned to any version keeps every
//! file under it. A file no version names is removed only when it is older than the grace
//! period: a writer's files are unnamed until its commit, so the grace period must exceed
//! the longest a writer takes from its first file to its commit (default one hour). The
//! versions are listed again just before removing, and files a new version names are kept.

use crate::error::{Error, Result};
use crate::store::{Store, HEAD};
use std::collections::HashSet;
use std::time::Duration;

/// The default grace period.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(3600);

/// What a collection removed (or, dry, would remove) and what it left for being young.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GcReport {
    pub versions: usize,
    pub removed: Vec<(String, u64)>,
    pub young: Vec<String>,
}

/// Whether `path` is one of the files a store's writers make, by its name: a data file
/// `data/sNNNNNN-*.sdat`, an index `index/sNNNNNN-*.sidx`, a manifest
/// `manifests/vNNNNNNNN.json`, or a temporary file of a write (`.NAME.tmp-*`). The only
/// files gc ever removes: anything else under a store's directories was put there by
/// someone else (a `data/` folder of a project gc was pointed at by mistake).
pub fn is_store_file(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    if name.starts_with('.') && name.contains(".tmp-") {
        return true;
    }
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    // sNNNNNN-REST.EXT, REST naming the write (and the writer, under subfiles).
    let slab_file = |n: &str, ext: &str| {
        n.strip_suffix(ext)
            .and_then(|s| s.strip_prefix('s'))
            .and_then(|s| s.split_once('-'))
            .is_some_and(|(id, rest)| digits(id) && !rest.is_empty() && !rest.contains('/'))
    };
    match path.split_once('/') {
        Some(("data", n)) => slab_file(n, ".sdat"),
        Some(("index", n)) => slab_file(n, ".sidx"),
        Some(("manifests", n)) => n.strip_prefix('v').and_then(|s| s.strip_suffix(".json")).is_some_and(digits),
        _ => false,
    }
}

/// Whether an entry at a directory's top level can belong to a store: one of its
/// directories or one of its files. A directory with anything else is not a store's.
pub fn is_store_part(name: &str) -> bool {
    STORE_DIRS.contains(&name) || is_store_file(name)
}

/// The directories a store's writers make files in.
const STORE_DIRS: [&str; 3] = ["data", "index", "manifests"];

/// Every file some committed version needs. A directory with no version (an import killed
/// before its first commit) has none: all its store files are leftovers.
fn needed(store: &Store) -> Result<(usize, HashSet<String>)> {
    let versions = if store.exists()? { store.versions()? } else { vec![] };
    let mut keep: HashSet<String> = [HEAD.to_string()].into();
    for &v in &versions {
        keep.insert(crate::store::manifest_path(v));
        let m = store.manifest(Some(v))?;
        keep.extend(m.files.iter().map(|f| f.path.clone()));
        for s in &m.slabs {
            keep.insert(s.data.clone());
            keep.insert(s.index.clone());
        }
    }
    Ok((versions.len(), keep))
}

/// Collects the garbage of `store`: files under `data/`, `index/` and `manifests/`, and
/// temporary files anywhere, that no version names and that are older than `grace`.
pub fn collect(store: &Store, grace: Duration, dry_run: bool) -> Result<GcReport> {
    let (versions, keep) = needed(store)?;
    // No version: the leftovers of an import killed before its first commit, or not a
    // store at all. Only the former is collected: a directory holding anything but a
    // store's parts at its top is refused, as a new store's writer refuses it.
    if versions == 0 {
        let top = store.storage().top_level()?;
        if let Some(other) = top.iter().find(|n| !is_store_part(n)) {
            return Err(Error::InvalidArgument(format!(
                "'{}' is not a strata store (no version) and holds '{other}', which no store write makes: \
                 gc removes only a store's own files",
                store.name()
            )));
        }
    }
    let mut report = GcReport { versions, ..Default::default() };
    let mut candidates = Vec::new();
    for obj in store.storage().list_for_gc("")? {
        if keep.contains(&obj.path) || !is_store_file(&obj.path) {
            continue;
        }
        if obj.age.is_none_or(|a| a < grace) {
            report.young.push(obj.path);
        } else {
            candidates.push((obj.path, obj.size.unwrap_or(0)));
        }
    }
    // A version committed meanwhile may name some of them (its writer took longer than
    // the grace period): look again.
    let (_, keep_now) = needed(store)?;
    for (path, size) in candidates {
        if keep_now.contains(&path) {
            continue;
        }
        if !dry_run {
            store.storage().delete(&path)?;
        }
        report.removed.push((path, size));
    }
    Ok(report)
}
