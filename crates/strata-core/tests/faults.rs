#![allow(clippy::unwrap_used)] // tests may panic on failure

//! Fault injection: each call that changes storage during a write fails in turn, as a full
//! disk or a failed fsync does — before anything reaches the disk, or after the bytes landed
//! (the error reported all the same). After each fault the store must open at a committed
//! version, every version must verify and read back exactly, `gc` must leave only files some
//! version names, and the next append must succeed.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use strata_core::gc::collect;
use strata_core::manifest::Dim;
use strata_core::storage::{LocalStorage, ObjectInfo, Storage};
use strata_core::verify::verify;
use strata_core::writer::{DatasetSchema, VariableSchema};
use strata_core::{DType, DimSelection, Error, Result, Store, StoreReader, StoreWriter, WriterOptions};

#[derive(Debug, Clone, Copy, PartialEq)]
enum When {
    /// Nothing of the call reaches storage.
    Before,
    /// The call's bytes land, then it reports the error (a failed fsync of written data).
    After,
}

/// Local storage whose `fail_at`-th changing call fails.
#[derive(Debug)]
struct Faulty {
    inner: LocalStorage,
    fail_at: usize,
    when: When,
    calls: AtomicUsize,
}

impl Faulty {
    fn change(&self, path: &str, call: impl FnOnce() -> Result<()>) -> Result<()> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        if n != self.fail_at {
            return call();
        }
        if self.when == When::After {
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

const X: u64 = 40;

fn schema() -> DatasetSchema {
    DatasetSchema {
        dims: vec![
            Dim { name: "t".into(), size: 0, unlimited: true },
            Dim { name: "x".into(), size: X, unlimited: false },
        ],
        record_dim: Some("t".into()),
        attrs: vec![],
        variables: vec![VariableSchema {
            name: "v".into(),
            dtype: DType::F64,
            dims: vec!["t".into(), "x".into()],
            attrs: vec![],
            inline_strings: None,
        }],
    }
}

/// Record `t`'s values: its number and position, so any record read can be checked.
fn value(t: u64, i: u64) -> f64 {
    (t * 1000 + i) as f64
}

/// Appends records `t0..t0 + 8` as two slabs of four and commits.
fn append(store: Store, t0: u64) -> Result<u64> {
    let mut w = StoreWriter::open_append(store)?;
    for slab in 0..2 {
        w.begin_slab(4)?;
        let first = t0 + slab * 4;
        let bytes: Vec<u8> =
            (first..first + 4).flat_map(|t| (0..X).flat_map(move |i| value(t, i).to_le_bytes())).collect();
        w.put_records("v", &bytes)?;
        w.finish_slab()?;
    }
    w.commit("append")
}

fn base(dir: &std::path::Path) -> Store {
    let store = Store::new(Arc::new(LocalStorage::new(dir)), "s");
    let options = WriterOptions { slab_records: Some(4), ..Default::default() };
    let mut w = StoreWriter::create(store.clone(), schema(), &options).unwrap();
    w.begin_slab(4).unwrap();
    let bytes: Vec<u8> = (0..4).flat_map(|t| (0..X).flat_map(move |i| value(t, i).to_le_bytes())).collect();
    w.put_records("v", &bytes).unwrap();
    w.finish_slab().unwrap();
    w.commit("create").unwrap();
    store
}

/// Every version verifies and holds records `0..n` of [`value`], `n` growing by 8 a version.
fn check_versions(store: &Store, latest: u64) {
    for version in 1..=latest {
        let report = verify(store.clone(), Some(version), true).unwrap();
        assert!(report.is_clean(), "version {version}: {:?}", report.problems);
        let n = 4 + 8 * (version - 1);
        let reader = StoreReader::open(store.clone(), Some(version)).unwrap();
        let sel = [DimSelection { start: 0, stop: n, step: 1 }, DimSelection { start: 0, stop: X, step: 1 }];
        let mut got = vec![0u8; (n * X * 8) as usize];
        reader.read_into("v", &sel, &mut got).unwrap();
        let want: Vec<u8> = (0..n).flat_map(|t| (0..X).flat_map(move |i| value(t, i).to_le_bytes())).collect();
        assert!(got == want, "version {version} reads back other values");
    }
}

/// The data and index files on disk are exactly those some version names.
fn only_named_files(store: &Store, storage: &LocalStorage, latest: u64) {
    let named: BTreeSet<String> =
        (1..=latest).flat_map(|v| store.manifest(Some(v)).unwrap().files.into_iter().map(|f| f.path)).collect();
    let on_disk: BTreeSet<String> = ["data/", "index/"].iter().flat_map(|p| storage.list(p).unwrap()).collect();
    assert_eq!(on_disk, named);
}

#[test]
fn every_failing_call_of_an_append_leaves_a_committed_version_and_nothing_lost() {
    let mut faults = 0;
    for when in [When::Before, When::After] {
        for fail_at in 1.. {
            let dir = tempfile::tempdir().unwrap();
            base(dir.path());
            let faulty = Arc::new(Faulty { inner: LocalStorage::new(dir.path()), fail_at, when, calls: 0.into() });
            let result = append(Store::new(faulty.clone(), "s"), 4);
            if faulty.calls.load(Ordering::SeqCst) < fail_at {
                // Every changing call of a whole append has had its turn to fail.
                assert_eq!(result.unwrap(), 2);
                assert!(fail_at > 3, "an append changes storage a few times at least");
                break;
            }
            faults += 1;
            let what = format!("{when:?} call {fail_at}");
            let err = result.expect_err(&what);
            assert!(err.to_string().contains("injected fault"), "{what}: {err}");

            // Read back through plain storage: the version before, or (the fault came after
            // its manifest was written) the append's own.
            let storage = LocalStorage::new(dir.path());
            let store = Store::new(Arc::new(LocalStorage::new(dir.path())), "s");
            let latest = store.latest_version().unwrap();
            assert!(latest == 1 || latest == 2, "{what}: version {latest}");
            check_versions(&store, latest);
            collect(&store, Duration::ZERO, false).unwrap();
            only_named_files(&store, &storage, latest);
            // And writing goes on: the next append lands on top of what was committed.
            let t0 = 4 + 8 * (latest - 1);
            assert_eq!(append(store.clone(), t0).unwrap(), latest + 1, "{what}");
            check_versions(&store, latest + 1);
        }
    }
    assert!(faults >= 8, "{faults} faults injected");
}
