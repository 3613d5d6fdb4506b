#![allow(clippy::unwrap_used)] // tests may panic on failure

//! Property: for any shape, chunking, slabbing and strided selection, the reader returns
//! exactly the elements a direct computation on the original array gives.

use proptest::prelude::*;
use std::collections::BTreeMap;
use std::sync::Arc;
use strata_core::grid::{ravel, unravel};
use strata_core::manifest::Dim;
use strata_core::storage::MemoryStorage;
use strata_core::writer::{DatasetSchema, VariableSchema};
use strata_core::{DType, DimSelection, Store, StoreReader, StoreWriter, WriterOptions};

#[derive(Debug, Clone)]
struct Case {
    shape: Vec<u64>,
    chunk: Vec<u64>,
    sub: Vec<u64>,
    slab: u64,
    sels: Vec<Vec<DimSelection>>,
}

fn case() -> impl Strategy<Value = Case> {
    (0usize..=4)
        .prop_flat_map(|ndim| proptest::collection::vec(0u64..9, ndim))
        .prop_flat_map(|shape| {
            let n = shape.len();
            let chunk = proptest::collection::vec(1u64..6, n);
            let frac = proptest::collection::vec(0.0f64..1.0, n);
            let slab = 1u64..8;
            let sels = proptest::collection::vec(
                shape
                    .iter()
                    .map(|&len| {
                        (0..=len, 0..=len, 1u64..4).prop_map(|(a, b, step)| DimSelection {
                            start: a.min(b),
                            stop: a.max(b),
                            step,
                        })
                    })
                    .collect::<Vec<_>>(),
                1..6,
            );
            (Just(shape), chunk, frac, slab, sels)
        })
        .prop_map(|(shape, chunk, frac, slab, sels)| {
            let mut chunk = chunk;
            if let Some(c0) = chunk.first_mut() {
                *c0 = (*c0).min(slab);
            }
            let sub = chunk.iter().zip(&frac).map(|(&c, f)| ((c as f64 * f).ceil() as u64).clamp(1, c)).collect();
            Case { shape, chunk, sub, slab, sels }
        })
}

fn value(i: u64) -> f64 {
    if i % 7 == 3 {
        f64::NAN
    } else {
        i as f64 * 0.5 - 3.0
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, .. ProptestConfig::default() })]

    #[test]
    fn reads_equal_the_reference(c in case()) {
        let names: Vec<String> = (0..c.shape.len()).map(|d| format!("d{d}")).collect();
        let record = names.first().cloned();
        let schema = DatasetSchema {
            dims: names.iter().zip(&c.shape).map(|(n, &s)| Dim { name: n.clone(), size: s, unlimited: false }).collect(),
            record_dim: record.clone(),
            attrs: vec![],
            variables: vec![VariableSchema { name: "v".into(), dtype: DType::F64, dims: names.clone(), attrs: vec![], inline_strings: None }],
        };
        let options = WriterOptions {
            chunks: names.iter().cloned().zip(c.chunk.iter().copied()).collect::<BTreeMap<_, _>>(),
            subchunks: names.iter().cloned().zip(c.sub.iter().copied()).collect::<BTreeMap<_, _>>(),
            slab_records: Some(c.slab),
            ..Default::default()
        };
        let total: u64 = c.shape.iter().product();
        let data: Vec<u8> = (0..total).flat_map(|i| value(i).to_le_bytes()).collect();
        let store = Store::new(Arc::new(MemoryStorage::new()), "mem");
        let mut w = StoreWriter::create(store.clone(), schema, &options).unwrap();
        if c.shape.is_empty() {
            w.put_static("v", &data).unwrap();
        } else {
            let per_record = (total / c.shape[0].max(1)) as usize * 8;
            let mut r = 0;
            while r < c.shape[0] {
                let n = (c.shape[0] - r).min(w.slab_records());
                w.begin_slab(n).unwrap();
                w.put_records("v", &data[r as usize * per_record..(r + n) as usize * per_record]).unwrap();
                w.finish_slab().unwrap();
                r += n;
            }
        }
        w.commit("prop").unwrap();
        let reader = StoreReader::open_with_cache(store, None, if c.slab % 2 == 0 { 0 } else { 1 << 20 }).unwrap();
        for sel in &c.sels {
            let out_shape = reader.check_selection("v", sel).unwrap();
            let n: u64 = out_shape.iter().product();
            let mut out = vec![0u8; n as usize * 8];
            reader.read_into("v", sel, &mut out).unwrap();
            // The bound counts the sub-chunks the read decodes, whole, without listing them.
            let (_, var) = reader.manifest().variable("v").unwrap();
            let sub_bytes: u64 = var.chunking.as_ref().map_or(0, |k| k.subchunk.iter().product::<u64>() * 8);
            let decodes = reader.read_work("v", sel).unwrap().calls as u64;
            let bound = reader.read_weight("v", sel).unwrap().decoded_bytes;
            prop_assert_eq!(bound, decodes * sub_bytes, "selection {:?}", sel);
            prop_assert!(bound >= n * 8);
            for o in 0..n {
                let oc = unravel(o, &out_shape);
                let src: Vec<u64> = oc.iter().zip(sel).map(|(&k, s)| s.start + k * s.step).collect();
                let want = value(ravel(&src, &c.shape)).to_bits();
                let got = u64::from_le_bytes(out[o as usize * 8..o as usize * 8 + 8].try_into().unwrap());
                prop_assert_eq!(got, want, "element {:?} of selection {:?}", src, sel);
            }
        }
    }
}
