#![allow(clippy::unwrap_used)] // tests may panic on failure

//! Codec plans made inside the writer: what any writer gets from `request: auto`.

use std::sync::Arc;
use strata_codecs::analyzer::Objective;
use strata_codecs::plan::{CodecRequest, PlanRecord, DRIFT_THRESHOLD};
use strata_codecs::registry::chain_text;
use strata_core::manifest::Dim;
use strata_core::storage::{MemoryStorage, Storage};
use strata_core::writer::{DatasetSchema, VariableSchema};
use strata_core::{DType, DimSelection, ErrorKind, Store, StoreReader, StoreWriter, WriterOptions};

const LAT: u64 = 64;
const LON: u64 = 80;

fn schema(records: u64) -> DatasetSchema {
    let var = |name: &str, dtype, dims: &[&str]| VariableSchema {
        name: name.into(),
        dtype,
        dims: dims.iter().map(|d| d.to_string()).collect(),
        attrs: vec![],
        inline_strings: None,
    };
    DatasetSchema {
        dims: vec![
            Dim { name: "time".into(), size: records, unlimited: true },
            Dim { name: "lat".into(), size: LAT, unlimited: false },
            Dim { name: "lon".into(), size: LON, unlimited: false },
        ],
        record_dim: Some("time".into()),
        attrs: vec![],
        variables: vec![var("temp", DType::F32, &["time", "lat", "lon"]), var("lat", DType::F64, &["lat"])],
    }
}

/// A smooth field rounded to 0.01 (compressible as real ones are).
fn field(t0: u64, n: u64) -> Vec<u8> {
    let mut v = Vec::new();
    for t in t0..t0 + n {
        for y in 0..LAT {
            for x in 0..LON {
                let f = 20.0 * (y as f64 / 20.0).cos() + 5.0 * (x as f64 / 9.0 + t as f64 / 10.0).sin();
                v.extend_from_slice(&(((f * 100.0).round() / 100.0) as f32).to_le_bytes());
            }
        }
    }
    v
}

fn auto(objective: Objective) -> WriterOptions {
    WriterOptions {
        request: Some(CodecRequest::Auto { objective, error_bound: None }),
        slab_records: Some(20),
        ..Default::default()
    }
}

fn write(store: &Store, options: &WriterOptions, t0: u64, records: u64, create: bool) {
    let mut w = if create {
        let mut w = StoreWriter::create(store.clone(), schema(records), options).unwrap();
        let lat: Vec<u8> = (0..LAT).flat_map(|i| (i as f64).to_le_bytes()).collect();
        w.put_static("lat", &lat).unwrap();
        w
    } else {
        StoreWriter::open_append_with(store.clone(), options).unwrap()
    };
    for start in (0..records).step_by(20) {
        let n = (records - start).min(20);
        w.begin_slab(n).unwrap();
        w.put_records("temp", &field(t0 + start, n)).unwrap();
        w.finish_slab().unwrap();
    }
    w.commit("test").unwrap();
}

fn read_all(store: &Store, records: u64) -> Vec<u8> {
    let r = StoreReader::open(store.clone(), None).unwrap();
    let sel = [
        DimSelection { start: 0, stop: records, step: 1 },
        DimSelection { start: 0, stop: LAT, step: 1 },
        DimSelection { start: 0, stop: LON, step: 1 },
    ];
    let mut out = vec![0u8; (records * LAT * LON * 4) as usize];
    r.read_into("temp", &sel, &mut out).unwrap();
    out
}

fn mem() -> Store {
    Store::new(Arc::new(MemoryStorage::new()), "mem")
}

#[test]
fn auto_plans_from_the_first_data_records_the_plan_and_is_reproducible() {
    let (a, b) = (mem(), mem());
    write(&a, &auto(Objective::Balanced), 0, 40, true);
    write(&b, &auto(Objective::Balanced), 0, 40, true);
    let (ma, mb) = (a.manifest(None).unwrap(), b.manifest(None).unwrap());
    let temp = ma.variable("temp").unwrap().1;
    let plan: PlanRecord = serde_json::from_str(temp.plan.as_ref().unwrap().text()).unwrap();
    assert_eq!(plan.objective, Objective::Balanced);
    assert_eq!(chain_text(&temp.codecs[0]), plan.chosen);
    assert_eq!(temp.codecs.len(), 1);
    let chosen = plan.scores.iter().find(|s| s.chain == plan.chosen).unwrap();
    assert!(chosen.decode_mb_s >= 1000.0 && chosen.encode_mb_s >= 150.0, "{plan:?}");
    assert_eq!(mb.variable("temp").unwrap().1, temp, "the same data gets the same plan");
    // Small variables keep the default chain, unplanned.
    let lat = ma.variable("lat").unwrap().1;
    assert!(lat.plan.is_none());
    assert_eq!(chain_text(&lat.codecs[0]), "shuffle+zstd:3");
    assert_eq!(read_all(&a, 40), field(0, 40));
}

#[test]
fn a_preview_plans_as_the_import_does_and_writes_nothing() {
    let written = mem();
    write(&written, &auto(Objective::Balanced), 0, 40, true);
    let storage = Arc::new(MemoryStorage::new());
    let mut w =
        StoreWriter::create(Store::new(storage.clone(), "preview"), schema(40), &auto(Objective::Balanced)).unwrap();
    // A record variable from its first slab; whole records only, at most a slab of them.
    for bad in [field(0, 21), field(0, 1)[..100].to_vec(), vec![]] {
        assert_eq!(w.preview("temp", &bad).unwrap_err().kind(), ErrorKind::InvalidArgument);
    }
    w.preview("temp", &field(0, 20)).unwrap();
    assert_eq!(w.preview("nothing", &[]).unwrap_err().kind(), ErrorKind::InvalidArgument);
    let stored = written.manifest(None).unwrap();
    let (a, b) = (w.manifest().variable("temp").unwrap().1, stored.variable("temp").unwrap().1);
    assert!(a.plan.is_some());
    assert_eq!((&a.plan, &a.codecs, &a.chunking), (&b.plan, &b.codecs, &b.chunking));
    assert!(storage.list("").unwrap().is_empty(), "a preview writes nothing");
}

#[test]
fn a_later_check_switches_new_slabs_only_on_a_clear_gain() {
    let store = mem();
    let raw = WriterOptions { codec: Some("raw".into()), slab_records: Some(20), ..Default::default() };
    write(&store, &raw, 0, 40, true);
    let recheck = WriterOptions { recheck: true, ..auto(Objective::Ratio) };
    write(&store, &recheck, 40, 40, false);
    let m = store.manifest(None).unwrap();
    let temp = m.variable("temp").unwrap().1;
    assert_eq!(temp.codecs.len(), 2);
    assert_eq!(chain_text(&temp.codecs[0]), "raw");
    let plan: PlanRecord = serde_json::from_str(temp.plan.as_ref().unwrap().text()).unwrap();
    assert_eq!((plan.previous.as_deref(), chain_text(&temp.codecs[1])), (Some("raw"), plan.chosen.clone()));
    assert!(plan.gain.unwrap() >= DRIFT_THRESHOLD);
    assert_eq!(read_all(&store, 80), field(0, 80), "old slabs keep raw, new ones the new chain");
    // Same data again: the planned chain stays.
    write(&store, &recheck, 80, 40, false);
    assert_eq!(store.manifest(None).unwrap().variable("temp").unwrap().1.codecs.len(), 2);
}

#[test]
fn bad_requests_are_refused_before_anything_is_written() {
    let both = WriterOptions { codec: Some("lz4".into()), ..auto(Objective::Ratio) };
    let err = StoreWriter::create(mem(), schema(1), &both).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    let bound = WriterOptions {
        request: Some(CodecRequest::Auto { objective: Objective::Ratio, error_bound: Some("abs=-1".into()) }),
        ..Default::default()
    };
    let err = StoreWriter::create(mem(), schema(1), &bound).unwrap_err();
    assert!(err.to_string().contains("abs=E or rel=E"), "{err}");
    let json = r#"{"request": {"kind": "auto", "objective": "fastest"}}"#;
    let err = serde_json::from_str::<WriterOptions>(json).unwrap_err();
    assert!(err.to_string().contains("unknown objective 'fastest'"), "{err}");
}
