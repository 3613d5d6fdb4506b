//! Seed inputs for every target: valid inputs of each kind, from which mutations reach the
//! parsers' error paths. Files come from the golden stores (`tests/golden/v1`, committed);
//! the rest is made here, in each target's input framing (the selector bytes it reads first).

use std::path::Path;
use strata_core::index_file;
use strata_core::parallel::{PartPlacement, PartTable, MESSAGE_VERSION};

/// The seeds of `target` (a name of [`crate::TARGETS`]); `golden` is `tests/golden/v1`.
pub fn seeds(target: &str, golden: &Path) -> Vec<Vec<u8>> {
    match target {
        "manifest" => golden_files(golden, "manifests"),
        "index_file" => golden_files(golden, "index"),
        "part_messages" => part_messages(golden),
        "store" => store(),
        "codec_chain" => codec_chain(),
        "lossy_codecs" => lossy_codecs(),
        "hdf5_chunk" => hdf5_chunk(),
        "constraint" => texts(CONSTRAINTS),
        "dap_constraint" => texts(DAP_CONSTRAINTS),
        "write_config" => texts(WRITE_CONFIGS),
        "cf_time" => cf_time(),
        "labels" => labels(),
        _ => Vec::new(),
    }
}

/// Every file under a directory named `dir` inside the golden stores, sorted by path.
fn golden_files(golden: &Path, dir: &str) -> Vec<Vec<u8>> {
    let mut paths = Vec::new();
    let stores =
        std::fs::read_dir(golden).map(|d| d.flatten().map(|e| e.path()).collect::<Vec<_>>()).unwrap_or_default();
    for store in stores {
        // In-place stores sit one level down (tests/golden/v1/in-place/*.strata).
        let nested: Vec<_> =
            std::fs::read_dir(&store).map(|d| d.flatten().map(|e| e.path()).collect()).unwrap_or_default();
        for sub in std::iter::once(store.join(dir)).chain(nested.iter().map(|s| s.join(dir))) {
            if let Ok(files) = std::fs::read_dir(&sub) {
                paths.extend(files.flatten().map(|e| e.path()).filter(|p| p.is_file()));
            }
        }
    }
    paths.sort();
    paths.dedup();
    paths.iter().filter_map(|p| std::fs::read(p).ok()).collect()
}

fn texts(items: &[&str]) -> Vec<Vec<u8>> {
    items.iter().map(|t| t.as_bytes().to_vec()).collect()
}

fn part_messages(golden: &Path) -> Vec<Vec<u8>> {
    let placement = PartPlacement {
        version: MESSAGE_VERSION,
        slab: 2,
        data: "data/s000002-0123abcd.sdat".into(),
        offsets: vec![0, 4096, 9000],
        fraction: 0.5,
    };
    let mut out = vec![placement.to_bytes()];
    for bytes in golden_files(golden, "index").into_iter().take(6) {
        let Ok(index) = index_file::decode(&bytes, "seed") else { continue };
        let table = PartTable {
            version: MESSAGE_VERSION,
            writer: 1,
            slab: 2,
            records: Some([3, 6]),
            codecs: Vec::new(),
            plans: Vec::new(),
            slot: Some([4096, 8192]),
            own_file: None,
            index,
        };
        out.push(table.to_bytes());
    }
    out
}

/// The store target's edits: which file, then (position, xor) pairs, or 0xFF and a cut.
fn store() -> Vec<Vec<u8>> {
    (0..12u8).flat_map(|file| [vec![file, 7, 0, 1, 40, 0, 0x80], vec![file, 0xFF, 30, 0], vec![file]]).collect()
}

/// Bytes of `n` values of a smooth field in `size`-byte little-endian elements (the kind of
/// data the codecs' transforms are built for).
fn smooth(n: usize, size: usize) -> Vec<u8> {
    (0..n)
        .flat_map(|i| {
            let x = 280.0 + 12.0 * (i as f64 * 0.07).sin();
            match size {
                1 => vec![x as u8],
                2 => ((x * 10.0) as i16).to_le_bytes().to_vec(),
                4 => (x as f32).to_le_bytes().to_vec(),
                _ => x.to_le_bytes().to_vec(),
            }
        })
        .collect()
}

fn codec_chain() -> Vec<Vec<u8>> {
    // Selectors: chain (of 11), type (U8, I16, F32, F64, I64, U32), then the length claimed.
    let sizes = [1, 2, 4, 8, 8, 4];
    let mut out = Vec::new();
    for chain in 0..11u8 {
        for (t, &size) in sizes.iter().enumerate() {
            let body = smooth(48, size);
            let mut seed = vec![chain, t as u8];
            seed.extend_from_slice(&(body.len() as u16).to_le_bytes());
            seed.extend_from_slice(&body);
            out.push(seed);
        }
    }
    out
}

fn lossy_codecs() -> Vec<Vec<u8>> {
    // Selectors: chain (of 5), type (even F32, odd F64), claimed length / 3, mode forced.
    let mut out = Vec::new();
    for chain in 0..5u8 {
        for (t, size) in [(0u8, 4), (1, 8)] {
            let mut seed = vec![chain, t, 20, 0];
            seed.extend_from_slice(&smooth(60, size));
            out.push(seed);
        }
    }
    out
}

fn hdf5_chunk() -> Vec<Vec<u8>> {
    // Selectors: filters (of 7), type (U8, I16, F32, F64; bit 7 big-endian), chunk and
    // segment shapes.
    let sizes = [1, 2, 4, 8];
    let mut out = Vec::new();
    for filters in 0..7u8 {
        for (t, &size) in sizes.iter().enumerate() {
            let mut seed = vec![filters, t as u8, 7, 7, 6, 6];
            seed.extend_from_slice(&smooth(49, size));
            out.push(seed);
        }
    }
    out
}

fn cf_time() -> Vec<Vec<u8>> {
    let units = [
        "days since 1850-01-01|noleap",
        "hours since 2000-01-01T00:00:00|standard",
        "seconds since 1970-01-01 00:00:00Z",
        "days since 0001-01-01|360_day",
        "minutes since 1582-10-15|julian",
        "days since 2000-02-29|all_leap",
        "months since 1900-01-01|proleptic_gregorian",
    ];
    let values = [0.0f64, 1.5, -730.25, 36524.0, 1e9];
    units
        .iter()
        .flat_map(|u| {
            values.iter().map(move |v| {
                let mut seed = v.to_le_bytes().to_vec();
                seed.extend_from_slice(u.as_bytes());
                seed
            })
        })
        .collect()
}

fn labels() -> Vec<Vec<u8>> {
    // The value count, the values, then "units|calendar|selection".
    let axes: [(&[f64], &str); 5] = [
        (&[-90.0, -45.0, 0.0, 45.0, 90.0], "degrees_north||-50:50"),
        (&[10.0, 5.0, 0.0], "m||7"),
        (&[0.0, 6.0, 12.0, 18.0], "hours since 2000-01-01|standard|2000-01-01T06:00:2000-01-01T12:00"),
        (&[0.0, 31.0, 59.0], "days since 1850-01-01|noleap|1850-02"),
        (&[1.0, 2.0, 4.0, 8.0], "||3:"),
    ];
    axes.iter()
        .map(|(values, text)| {
            let mut seed = vec![values.len() as u8];
            for v in values.iter() {
                seed.extend_from_slice(&v.to_le_bytes());
            }
            seed.extend_from_slice(text.as_bytes());
            seed
        })
        .collect()
}

const CONSTRAINTS: &[&str] = &[
    "sst > 28",
    "25 < sst",
    "t = -1.5e3",
    "t<.5",
    "t > -inf",
    "a >= 1 and (b < 2 or a.b != 3) || c <= 4",
    "not x > 1",
    "NOT (x > 1 and \"sea ice\" == 0)",
    "`T-2m` >= 273.15 & x != 0 | y == 1e-30",
];

const DAP_CONSTRAINTS: &[&str] = &[
    "sst",
    "sst[0:1:2][3][4:5],lat,sst.sst[1]",
    "sst%5B0:1:2%5D%5B3%5D[4:5]",
    "sst&sst>25&10.5%3C=sst&sst!=3",
    "time,lat,lon&lat>-10&lon<=100.5",
    "sst.sst[0][0:3][0:3]&time>=\"2019-03-01\"",
];

const WRITE_CONFIGS: &[&str] = &[
    "version = 1\nlayout = \"V-S\"\nbins = 16\nbinning = \"equal-frequency\"\ncodec = \"auto\"\nobjective = \"ratio\"\n\
     chunks = { lat = 45, lon = 90 }\nshape_rule = \"cube\"\nslab_records = 24\n\n[variables.salt]\ncodec = \"zstd:5\"\n\
     chunks = { lon = 45 }\n\n[variables.ice]\nerror_bound = \"rel=1e-3\"\n",
    "version = 1\nlayout = \"M-S\"\n[byte_groups]\nf64 = [2, 1, 1, 1, 1, 1, 1]\n",
    "version = 1\nbinning = \"0,5,10,20\"\nindex_frame_bytes = 65536\n",
];
