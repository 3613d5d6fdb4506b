#![allow(clippy::unwrap_used)] // tests may panic on failure

//! The golden format-v1 stores written by tests/golden/make_golden.py read back forever.

use strata_core::{DimSelection, Store, StoreReader};

fn golden(name: &str) -> Store {
    let path = format!("{}/../../tests/golden/v1/{name}", env!("CARGO_MANIFEST_DIR"));
    Store::local(&path)
}

#[test]
fn golden_v1_stores_decode() {
    for name in ["default.strata", "small-chunks.strata", "raw-codec.strata"] {
        let reader = StoreReader::open(golden(name), Some(1)).unwrap();
        assert_eq!(reader.manifest().format_version, 1);
        let sel = [
            DimSelection { start: 0, stop: 9, step: 1 },
            DimSelection { start: 0, stop: 13, step: 1 },
            DimSelection { start: 0, stop: 17, step: 1 },
        ];
        let mut out = vec![0u8; 9 * 13 * 17 * 4];
        reader.read_into("temp", &sel, &mut out).unwrap();
        for (i, c) in out.chunks_exact(4).enumerate() {
            let v = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
            let (t, y, x) = (i / (13 * 17), (i / 17) % 13, i % 17);
            let want = ((y as f64 / 3.0).sin() * 10.0 + (x as f64 / 5.0).cos() * 5.0 + t as f64 * 0.5) as f32;
            if (t + y + x) % 11 == 0 {
                assert!(v.is_nan(), "{name} element {i} should be NaN");
            } else {
                assert!((v - want).abs() <= 1e-5, "{name} element {i}: {v} vs {want}");
            }
        }
    }
}
