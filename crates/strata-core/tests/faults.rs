#![allow(clippy::unwrap_used)] // tests may panic on failure

//! Fault injection: each call that changes storage during a write fails in turn, as a full
//! disk or a failed fsync does — before anything reaches the disk, or after the bytes landed
//! (the error reported all the same). After each fault the store must open at a committed
//! version, every version must verify and read back exactly, `gc` must leave only files some
//! version names, and the next append must succeed.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;
use strata_core::gc::collect;
use strata_core::manifest::Dim;
use strata_core::storage::{FaultTiming, Faulty, LocalStorage};
use strata_core::verify::verify;
use strata_core::writer::{DatasetSchema, VariableSchema};
use strata_core::{DType, DimSelection, Result, Store, StoreReader, StoreWriter, WriterOptions};

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

/// Records `ts` as stored bytes: each value names its record and position, so any record
/// read back can be checked.
fn records(ts: std::ops::Range<u64>) -> Vec<u8> {
    ts.flat_map(|t| (0..X).flat_map(move |i| ((t * 1000 + i) as f64).to_le_bytes())).collect()
}

/// Records `first..first + 4` as one slab.
fn slab(w: &mut StoreWriter, first: u64) -> Result<()> {
    w.begin_slab(4)?;
    w.put_records("v", &records(first..first + 4))?;
    w.finish_slab()
}

/// Appends records `t0..t0 + 8` as two slabs of four and commits.
fn append(store: Store, t0: u64) -> Result<u64> {
    let mut w = StoreWriter::open_append(store)?;
    slab(&mut w, t0)?;
    slab(&mut w, t0 + 4)?;
    w.commit("append")
}

/// A store at `dir` whose version 1 holds records `0..4`.
fn base(dir: &std::path::Path) {
    let store = Store::new(Arc::new(LocalStorage::new(dir)), "s");
    let options = WriterOptions { slab_records: Some(4), ..Default::default() };
    let mut w = StoreWriter::create(store, schema(), &options).unwrap();
    slab(&mut w, 0).unwrap();
    w.commit("create").unwrap();
}

/// Every version verifies and holds [`records`] `0..n`, `n` growing by 8 a version.
fn check_versions(store: &Store, latest: u64) {
    for version in 1..=latest {
        let report = verify(store.clone(), Some(version), true).unwrap();
        assert!(report.is_clean(), "version {version}: {:?}", report.problems);
        let n = 4 + 8 * (version - 1);
        let reader = StoreReader::open(store.clone(), Some(version)).unwrap();
        let sel = [DimSelection { start: 0, stop: n, step: 1 }, DimSelection { start: 0, stop: X, step: 1 }];
        let mut got = vec![0u8; (n * X * 8) as usize];
        reader.read_into("v", &sel, &mut got).unwrap();
        assert!(got == records(0..n), "version {version} reads back other values");
    }
}

/// The data and index files on disk are exactly those some version names.
fn only_named_files(store: &Store, latest: u64) {
    let named: BTreeSet<String> =
        (1..=latest).flat_map(|v| store.manifest(Some(v)).unwrap().files.into_iter().map(|f| f.path)).collect();
    let on_disk: BTreeSet<String> = ["data/", "index/"].iter().flat_map(|p| store.storage().list(p).unwrap()).collect();
    assert_eq!(on_disk, named);
}

#[test]
fn every_failing_call_of_an_append_leaves_a_committed_version_and_nothing_lost() {
    let mut faults = 0;
    for when in [FaultTiming::Before, FaultTiming::After] {
        for fail_at in 1.. {
            let dir = tempfile::tempdir().unwrap();
            base(dir.path());
            let faulty = Arc::new(Faulty::new(Arc::new(LocalStorage::new(dir.path())), fail_at, when));
            let result = append(Store::new(faulty.clone(), "s"), 4);
            if faulty.calls() < fail_at {
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
            let store = Store::new(Arc::new(LocalStorage::new(dir.path())), "s");
            let latest = store.latest_version().unwrap();
            assert!(latest == 1 || latest == 2, "{what}: version {latest}");
            check_versions(&store, latest);
            collect(&store, Duration::ZERO, false).unwrap();
            only_named_files(&store, latest);
            // And writing goes on: the next append lands on top of what was committed.
            let t0 = 4 + 8 * (latest - 1);
            assert_eq!(append(store.clone(), t0).unwrap(), latest + 1, "{what}");
            check_versions(&store, latest + 1);
        }
    }
    assert!(faults >= 8, "{faults} faults injected");
}
