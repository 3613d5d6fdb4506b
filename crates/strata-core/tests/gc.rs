#![allow(clippy::unwrap_used)] // tests may panic on failure

//! `strata gc` removes what no version names once it is older than the grace period, and
//! nothing any version (or a young writer) still needs.

use std::sync::Arc;
use std::time::Duration;
use strata_core::gc::collect;
use strata_core::manifest::Dim;
use strata_core::storage::{LocalStorage, Storage};
use strata_core::writer::{DatasetSchema, VariableSchema};
use strata_core::{DType, DimSelection, Store, StoreReader, StoreWriter, WriterOptions};

fn schema() -> DatasetSchema {
    DatasetSchema {
        dims: vec![
            Dim { name: "t".into(), size: 4, unlimited: true },
            Dim { name: "x".into(), size: 50, unlimited: false },
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

fn records(w: &mut StoreWriter, t0: u64) {
    w.begin_slab(4).unwrap();
    let bytes: Vec<u8> = (0..200).flat_map(|i| ((t0 * 50 + i) as f64).to_le_bytes()).collect();
    w.put_records("v", &bytes).unwrap();
    w.finish_slab().unwrap();
}

#[test]
fn only_old_unnamed_files_go() {
    let dir = tempfile::tempdir().unwrap();
    let storage: Arc<dyn Storage> = Arc::new(LocalStorage::new(dir.path()));
    let store = Store::new(storage.clone(), "s");
    let options = WriterOptions { slab_records: Some(4), ..Default::default() };
    let mut w = StoreWriter::create(store.clone(), schema(), &options).unwrap();
    records(&mut w, 0);
    w.commit("v1").unwrap();
    let mut w = StoreWriter::open_append(store.clone()).unwrap();
    records(&mut w, 4);
    w.commit("v2").unwrap();
    // A writer that died before its commit, a temporary file, and a file that is not ours.
    let mut dead = StoreWriter::open_append(store.clone()).unwrap();
    records(&mut dead, 8);
    drop(dead);
    std::fs::write(dir.path().join("data/.x.sdat.tmp-0123"), b"partial").unwrap();
    std::fs::write(dir.path().join("notes.txt"), b"mine").unwrap();
    let before = storage.list("").unwrap();

    // Young leftovers stay: their writer may still be about to commit.
    let r = collect(&store, Duration::from_secs(3600), false).unwrap();
    assert!(r.removed.is_empty() && r.young.len() == 3, "{r:?}");
    // Dry run: listed, not removed.
    let r = collect(&store, Duration::ZERO, true).unwrap();
    assert_eq!(r.removed.len(), 3, "{r:?}");
    assert_eq!(storage.list("").unwrap(), before);
    let r = collect(&store, Duration::ZERO, false).unwrap();
    assert_eq!((r.versions, r.removed.len()), (2, 3));
    assert!(dir.path().join("notes.txt").exists() && !dir.path().join("data/.x.sdat.tmp-0123").exists());

    // Both versions still read in full.
    for (version, n) in [(1, 4u64), (2, 8)] {
        let reader = StoreReader::open(store.clone(), Some(version)).unwrap();
        let sel = [DimSelection { start: 0, stop: n, step: 1 }, DimSelection { start: 0, stop: 50, step: 1 }];
        let mut out = vec![0u8; (n * 50 * 8) as usize];
        reader.read_into("v", &sel, &mut out).unwrap();
        let want: Vec<u8> = (0..n * 50).flat_map(|i| (i as f64).to_le_bytes()).collect();
        assert_eq!(out, want);
    }
    assert!(collect(&store, Duration::ZERO, false).unwrap().removed.is_empty(), "nothing left to collect");
}

#[test]
fn a_directory_that_is_not_a_store_loses_nothing() {
    // A project with a `data/` folder, gc pointed at it by mistake: refused, nothing removed.
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("data")).unwrap();
    std::fs::write(dir.path().join("data/s000001-results.sdat"), b"looks like ours").unwrap();
    std::fs::write(dir.path().join("data/measurements.csv"), b"1,2,3").unwrap();
    std::fs::write(dir.path().join("notes.txt"), b"mine").unwrap();
    let storage: Arc<dyn Storage> = Arc::new(LocalStorage::new(dir.path()));
    let store = Store::new(storage.clone(), "project");
    let before = storage.list("").unwrap();
    let e = collect(&store, Duration::ZERO, false).unwrap_err().to_string();
    assert!(e.contains("not a strata store") && e.contains("notes.txt"), "{e}");
    assert_eq!(storage.list("").unwrap(), before);
    // Without the top-level file it is still not ours: the writer refuses to start a
    // store there, and gc removes only what a store write names so (not the CSV).
    std::fs::remove_file(dir.path().join("notes.txt")).unwrap();
    let e = StoreWriter::create(store.clone(), schema(), &WriterOptions::default()).err().unwrap().to_string();
    assert!(e.contains("data/measurements.csv"), "{e}");
    let r = collect(&store, Duration::ZERO, false).unwrap();
    assert_eq!(r.removed.iter().map(|(p, _)| p.as_str()).collect::<Vec<_>>(), ["data/s000001-results.sdat"]);
    assert!(dir.path().join("data/measurements.csv").exists());
}

#[test]
fn store_file_names_are_the_writers_own() {
    use strata_core::gc::is_store_file;
    for ours in [
        "data/s000001-0123456789abcdef.sdat",
        "data/s000012-tok-w3.sdat",
        "index/s000001-0123456789abcdef.sidx",
        "manifests/v00000007.json",
        "data/.s000001-ab.sdat.tmp-0123",
        ".HEAD.tmp-0123456789abcdef",
    ] {
        assert!(is_store_file(ours), "{ours}");
    }
    for theirs in [
        "data/a.sdat",
        "data/readme.txt",
        "data/sx-1.sdat",
        "index/s1.sidx",
        "manifests/v.json",
        "manifests/notes.json",
        "HEAD",
        "notes.txt",
        "data/sub/s000001-a.sdat.bak",
    ] {
        assert!(!is_store_file(theirs), "{theirs}");
    }
}
