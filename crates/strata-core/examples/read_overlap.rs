//! Reading overlapped with decoding, measured: a dense read of a box through a storage whose
//! reads are slowed to a given bandwidth, against the read alone and the decode alone.
//! `bench/bench_overlap.py` runs it; prints one JSON object per bandwidth.
//!
//!     cargo run --release -p strata-core --example read_overlap -- STORE VAR FRACTION MB_S...

use std::sync::Arc;
use std::time::{Duration, Instant};
use strata_core::storage::{LocalStorage, Storage, Throttled};
use strata_core::{DimSelection, Store, StoreReader};

fn best(turns: usize, mut f: impl FnMut() -> strata_core::Result<()>) -> strata_core::Result<f64> {
    let mut best = f64::INFINITY;
    for _ in 0..turns {
        let t0 = Instant::now();
        f()?;
        best = best.min(t0.elapsed().as_secs_f64());
    }
    Ok(best)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [path, var, fraction, rest @ ..] = args.as_slice() else {
        return Err("usage: read_overlap STORE VAR FRACTION MB_S...".into());
    };
    let fraction: f64 = fraction.parse()?;
    let local: Arc<dyn Storage> = Arc::new(LocalStorage::new(path));
    let plain = StoreReader::open_with_cache(Store::new(local.clone(), path.clone()), None, 0)?;
    // A box in the middle holding `fraction` of the elements: every axis the same share.
    let shape = plain.manifest().shape(plain.manifest().variable(var)?.1);
    let share = fraction.powf(1.0 / shape.len() as f64);
    let sel: Vec<DimSelection> = shape
        .iter()
        .map(|&n| {
            let len = ((n as f64 * share).round() as u64).clamp(1, n);
            let start = (n - len) / 2;
            DimSelection { start, stop: start + len, step: 1 }
        })
        .collect();
    let count: u64 = sel.iter().map(|s| s.count()).product();
    let es = plain.manifest().variable(var)?.1.dtype.size();
    let mut out = vec![0u8; count as usize * es];
    // Decoding alone: files in the page cache, no decoded-segment cache.
    plain.read_into(var, &sel, &mut out)?;
    let decode_s = best(5, || plain.read_into(var, &sel, &mut out))?;
    for mb_s in rest {
        let mb_s: f64 = mb_s.parse()?;
        // 0: the files as they are (the page cache), to see what the overlap costs there.
        let slow: Arc<dyn Storage> = if mb_s > 0.0 {
            Arc::new(Throttled::new(local.clone(), mb_s * 1e6, Duration::from_micros(500)))
        } else {
            local.clone()
        };
        let reader = StoreReader::open_with_cache(Store::new(slow, path.clone()), None, 0)?;
        let mut stored = 0;
        let read_s = best(3, || {
            stored = reader.fetch_only(var, &sel)?;
            Ok(())
        })?;
        let (mut overlapped_s, mut sequential_s) = (f64::INFINITY, f64::INFINITY);
        for _ in 0..5 {
            reader.set_overlap(true);
            overlapped_s = overlapped_s.min(best(1, || reader.read_into(var, &sel, &mut out))?);
            reader.set_overlap(false);
            sequential_s = sequential_s.min(best(1, || reader.read_into(var, &sel, &mut out))?);
        }
        let floor = read_s.max(decode_s);
        println!(
            "{{\"mb_s\": {mb_s}, \"raw_bytes\": {}, \"stored_bytes\": {stored}, \"read_s\": {read_s:.5}, \
             \"decode_s\": {decode_s:.5}, \"overlapped_s\": {overlapped_s:.5}, \"sequential_s\": {sequential_s:.5}, \
             \"overlapped_vs_max\": {:.3}, \"sequential_vs_max\": {:.3}}}",
            count as usize * es,
            overlapped_s / floor,
            sequential_s / floor
        );
    }
    Ok(())
}
