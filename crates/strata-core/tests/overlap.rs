#![allow(clippy::unwrap_used)] // tests may panic on failure

//! Reads that overlap fetching with decoding return exactly what plain reads return,
//! through any storage.

use std::sync::Arc;
use std::time::Duration;
use strata_core::manifest::Dim;
use strata_core::storage::{MemoryStorage, Storage, Throttled};
use strata_core::writer::{DatasetSchema, VariableSchema};
use strata_core::{DType, DimSelection, Store, StoreReader, StoreWriter, WriterOptions};

const SHAPE: [u64; 3] = [24, 180, 360];

fn value(t: u64, y: u64, x: u64) -> f32 {
    ((t * 7 + y * 3 + x) % 1000) as f32 * 0.5 + (y as f32 * 0.1).sin()
}

fn write(storage: Arc<dyn Storage>) -> Store {
    let store = Store::new(storage, "mem");
    let schema = DatasetSchema {
        dims: ["time", "lat", "lon"]
            .iter()
            .zip(SHAPE)
            .map(|(n, size)| Dim { name: n.to_string(), size, unlimited: *n == "time" })
            .collect(),
        record_dim: Some("time".into()),
        attrs: vec![],
        variables: vec![VariableSchema {
            name: "v".into(),
            dtype: DType::F32,
            dims: vec!["time".into(), "lat".into(), "lon".into()],
            attrs: vec![],
            inline_strings: None,
        }],
    };
    let options = WriterOptions { slab_records: Some(8), ..Default::default() };
    let mut w = StoreWriter::create(store.clone(), schema, &options).unwrap();
    for t0 in (0..SHAPE[0]).step_by(8) {
        w.begin_slab(8).unwrap();
        let bytes: Vec<u8> = (t0..t0 + 8)
            .flat_map(|t| {
                (0..SHAPE[1]).flat_map(move |y| (0..SHAPE[2]).flat_map(move |x| value(t, y, x).to_le_bytes()))
            })
            .collect();
        w.put_records("v", &bytes).unwrap();
        w.finish_slab().unwrap();
    }
    w.commit("test").unwrap();
    store
}

fn read(reader: &StoreReader, sel: &[DimSelection]) -> Vec<u8> {
    let n: u64 = sel.iter().map(|s| s.count()).product();
    let mut out = vec![0u8; n as usize * 4];
    reader.read_into("v", sel, &mut out).unwrap();
    out
}

#[test]
fn overlapped_reads_equal_plain_reads_and_the_values() {
    let memory: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
    write(memory.clone());
    // A fast link still goes through the throttle's code path.
    let throttled: Arc<dyn Storage> = Arc::new(Throttled::new(memory.clone(), 5e9, Duration::ZERO));
    let sels = [
        vec![
            DimSelection { start: 0, stop: 24, step: 1 },
            DimSelection { start: 0, stop: 180, step: 1 },
            DimSelection { start: 0, stop: 360, step: 1 },
        ],
        vec![
            DimSelection { start: 3, stop: 22, step: 2 },
            DimSelection { start: 10, stop: 170, step: 3 },
            DimSelection { start: 0, stop: 360, step: 7 },
        ],
    ];
    for sel in &sels {
        let expected: Vec<u8> = (sel[0].start..sel[0].stop)
            .step_by(sel[0].step as usize)
            .flat_map(|t| {
                (sel[1].start..sel[1].stop).step_by(sel[1].step as usize).flat_map(move |y| {
                    (sel[2].start..sel[2].stop)
                        .step_by(sel[2].step as usize)
                        .flat_map(move |x| value(t, y, x).to_le_bytes())
                })
            })
            .collect();
        for storage in [&memory, &throttled] {
            let reader = StoreReader::open_with_cache(Store::new(storage.clone(), "mem"), None, 0).unwrap();
            assert_eq!(read(&reader, sel), expected);
            reader.set_overlap(false);
            assert_eq!(read(&reader, sel), expected);
            assert!(reader.fetch_only("v", sel).unwrap() > 0);
        }
    }
}

#[test]
fn a_dense_read_is_costed_from_what_it_would_fetch() {
    let memory: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
    let reader = StoreReader::open_with_cache(write(memory), None, 0).unwrap();
    let all = [(0, 24), (0, 180), (0, 360)].map(|(start, stop)| DimSelection { start, stop, step: 1 });
    let corner = [(0, 4), (0, 10), (0, 10)].map(|(start, stop)| DimSelection { start, stop, step: 1 });
    let session = strata_core::session::Session::new(strata_core::planner::CostModel::default());
    let mut seconds = vec![];
    let stored = reader.variable_stats().unwrap()[0].stored_bytes;
    for sel in [&all[..], &corner[..]] {
        let work = reader.read_work("v", sel).unwrap();
        // Stored bytes of the segments touched (a read fetches them, in runs that may span
        // more); every element touched is decoded, at least those selected.
        assert!(work.bytes > 0.0 && work.bytes as u64 <= stored);
        let selected: u64 = sel.iter().map(|s| s.count()).product();
        assert!(work.decoded >= selected as f64 && work.calls >= 1.0 && work.segments >= work.calls);
        seconds.push(session.read_seconds(&reader, "v", sel).unwrap());
    }
    let whole = reader.read_work("v", &all).unwrap();
    assert_eq!(whole.decoded as u64, 24 * 180 * 360, "the whole variable is decoded once");
    assert_eq!(whole.bytes as u64, stored, "and every stored byte fetched");
    assert!(seconds[0] > seconds[1] && seconds[1] > 0.0, "{seconds:?}");
    assert!(reader.read_work("nope", &all).is_err() && reader.read_work("v", &all[..2]).is_err());
}
