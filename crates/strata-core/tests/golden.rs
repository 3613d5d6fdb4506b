#![allow(clippy::unwrap_used)] // tests may panic on failure

//! The golden format-v1 stores written by tests/golden/make_golden.py read back forever.

use strata_core::{DimSelection, Store, StoreReader};

/// The golden stores of this checkout. Cargo sets `CARGO_MANIFEST_DIR` when it runs a test,
/// and that is read at run time: a test binary reused from a build in another checkout (the
/// target directory lives outside the clone) must not read that checkout's files.
fn golden_dir() -> String {
    let manifest = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").to_string());
    format!("{manifest}/../../tests/golden/v1")
}

fn golden(name: &str) -> Store {
    let path = format!("{}/{name}", golden_dir());
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

/// The feature stores (one per layout level, binning rule and codec; see
/// tests/golden/make_golden.py): lossless ones hold the generated fields exactly, lossy ones
/// the decoded values committed beside them.
#[test]
fn golden_v1_feature_stores_decode() {
    let dir = golden_dir();
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().to_string();
        let Some(stem) = name.strip_suffix(".strata").filter(|n| n.starts_with("layout-") || n.starts_with("codec-"))
        else {
            continue;
        };
        seen += 1;
        let reader = StoreReader::open(golden(&name), Some(1)).unwrap();
        let sel = [
            DimSelection { start: 0, stop: 9, step: 1 },
            DimSelection { start: 0, stop: 13, step: 1 },
            DimSelection { start: 0, stop: 17, step: 1 },
        ];
        let lossy = ["codec-sz", "codec-zfp", "codec-bitround"].contains(&stem);
        for (var, size) in [("temp", 4usize), ("height", 8)] {
            let mut out = vec![0u8; 9 * 13 * 17 * size];
            reader.read_into(var, &sel, &mut out).unwrap();
            if lossy {
                let expected = std::fs::read(format!("{dir}/expected/{stem}.{var}.le")).unwrap();
                assert!(out == expected, "{name}:{var} decodes other values than committed");
                continue;
            }
            for (i, c) in out.chunks_exact(size).enumerate() {
                let (t, y, x) = (i / (13 * 17), (i / 17) % 13, i % 17);
                let temp = ((y as f64 / 3.0).sin() * 10.0 + (x as f64 / 5.0).cos() * 5.0 + t as f64 * 0.5) as f32;
                let got = if size == 4 {
                    f32::from_le_bytes(c.try_into().unwrap()) as f64
                } else {
                    f64::from_le_bytes(c.try_into().unwrap())
                };
                let want = if size == 4 { temp as f64 } else { temp as f64 * 2.0 + 1000.0 };
                if (t + y + x) % 11 == 0 {
                    assert!(got.is_nan(), "{name}:{var} element {i} should be NaN");
                } else {
                    assert!(got == want, "{name}:{var} element {i}: {got} vs {want}");
                }
            }
        }
    }
    assert_eq!(seen, 13, "every feature store is read");
}
