//! The whole read path from a store's files (HEAD, manifest, index, data together): a valid
//! store with fuzzer-chosen bytes flipped or cut must open and read with an error or the
//! original values, never a panic and never other values.

use std::sync::{Arc, OnceLock};
use strata_core::manifest::Dim;
use strata_core::storage::{MemoryStorage, Storage};
use strata_core::writer::{DatasetSchema, VariableSchema};
use strata_core::{DType, DimSelection, Store, StoreReader, StoreWriter, WriterOptions};

const T: u64 = 6;
const X: u64 = 40;

/// A store's files (path, bytes) and the values of its variable `v`.
type Base = (Vec<(String, Vec<u8>)>, Vec<u8>);

/// The files of a small store (V-S layout, two slabs and a static variable), and its values.
fn base() -> &'static Base {
    static BASE: OnceLock<Base> = OnceLock::new();
    BASE.get_or_init(|| {
        let mem = Arc::new(MemoryStorage::new());
        let store = Store::new(mem.clone(), "fuzz");
        let var = |name: &str, dims: &[&str]| VariableSchema {
            name: name.into(),
            dtype: DType::F32,
            dims: dims.iter().map(|d| d.to_string()).collect(),
            attrs: vec![],
            inline_strings: None,
        };
        let schema = DatasetSchema {
            dims: vec![
                Dim { name: "t".into(), size: T, unlimited: true },
                Dim { name: "x".into(), size: X, unlimited: false },
            ],
            record_dim: Some("t".into()),
            attrs: vec![],
            variables: vec![var("v", &["t", "x"]), var("x", &["x"])],
        };
        let options =
            WriterOptions { slab_records: Some(3), layout: Some("V-S".into()), bins: Some(4), ..Default::default() };
        let mut w = StoreWriter::create(store.clone(), schema, &options).expect("create");
        w.put_static("x", &(0..X).flat_map(|i| (i as f32).to_le_bytes()).collect::<Vec<u8>>()).expect("static");
        let values: Vec<u8> = (0..T * X).flat_map(|i| ((i * 37 % 101) as f32 * 0.5).to_le_bytes()).collect();
        for s in 0..2u64 {
            w.begin_slab(3).expect("slab");
            let part = &values[(s * 3 * X * 4) as usize..((s + 1) * 3 * X * 4) as usize];
            w.put_records("v", part).expect("records");
            w.finish_slab().expect("finish");
        }
        w.commit("fuzz").expect("commit");
        let files = mem.list("").expect("list").into_iter().map(|p| (p.clone(), mem.read(&p).expect("read"))).collect();
        (files, values)
    })
}

fn read_all(store: Store) -> strata_core::Result<Vec<u8>> {
    let reader = StoreReader::open_with_cache(store, None, 0)?;
    let sel = [DimSelection { start: 0, stop: T, step: 1 }, DimSelection { start: 0, stop: X, step: 1 }];
    let mut out = vec![0u8; (T * X * 4) as usize];
    reader.read_into("v", &sel, &mut out)?;
    Ok(out)
}

/// One input: what libFuzzer or the seed tests hand the target.
pub fn run(data: &[u8]) {
    let (files, values) = base();
    let Some((&which, edits)) = data.split_first() else { return };
    let mem = MemoryStorage::new();
    let target = which as usize % files.len();
    for (i, (path, bytes)) in files.iter().enumerate() {
        let mut bytes = bytes.clone();
        if i == target {
            // Edits: (position, xor) pairs; a leading 0xFF cuts the file at a position.
            if edits.first() == Some(&0xFF) && edits.len() >= 3 {
                let cut = u16::from_le_bytes([edits[1], edits[2]]) as usize % (bytes.len() + 1);
                bytes.truncate(cut);
            } else {
                for pair in edits.chunks_exact(3) {
                    let pos = u16::from_le_bytes([pair[0], pair[1]]) as usize;
                    if !bytes.is_empty() {
                        let at = pos % bytes.len();
                        bytes[at] ^= pair[2];
                    }
                }
            }
        }
        mem.write_atomic(path, &bytes).expect("memory storage");
    }
    if let Ok(got) = read_all(Store::new(Arc::new(mem), "fuzz")) {
        assert_eq!(&got, values, "a damaged store read back other values");
    }
}
