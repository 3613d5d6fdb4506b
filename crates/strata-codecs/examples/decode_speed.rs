//! Decode MB/s of codec chains on raw arrays, one core: what `bench/bench_target_cpu.py`
//! runs once per build to compare compiler target settings.
//!
//! `decode_speed FILE DTYPE BLOCK_SHAPE CHAIN...` — FILE holds raw little-endian elements of
//! DTYPE (f32, f64, i16, i32), cut into blocks of BLOCK_SHAPE (comma-separated, C order) as
//! a store's sub-chunks; each chain encodes every block once, then decodes them all, best of
//! five. Prints one JSON object per chain.

use std::time::Instant;
use strata_codecs::registry::{chain, parse_chain};
use strata_codecs::{ElementContext, NumType};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, file, dtype, shape, chains @ ..] = args.as_slice() else {
        return Err("usage: decode_speed FILE DTYPE BLOCK_SHAPE CHAIN...".into());
    };
    let bytes = std::fs::read(file)?;
    let dtype = match dtype.as_str() {
        "f32" => NumType::F32,
        "f64" => NumType::F64,
        "i16" => NumType::I16,
        "i32" => NumType::I32,
        other => return Err(format!("unknown dtype {other}").into()),
    };
    let shape: Vec<usize> = shape.split(',').map(str::parse).collect::<Result<_, _>>()?;
    let block = shape.iter().product::<usize>() * dtype.size();
    let blocks: Vec<&[u8]> = bytes.chunks_exact(block).collect();
    for text in chains {
        let c = chain(&parse_chain(text)?, ElementContext::new(dtype))?;
        let encoded = blocks.iter().map(|b| c.encode(b, &shape)).collect::<Result<Vec<_>, _>>()?;
        let mut out = Vec::new();
        let mut best = f64::MAX;
        for _ in 0..5 {
            let t = Instant::now();
            for (e, b) in encoded.iter().zip(&blocks) {
                c.decode_into(e, block, &shape, &mut out)?;
                if out.as_slice() != *b {
                    return Err(format!("{text} did not round-trip").into());
                }
            }
            best = best.min(t.elapsed().as_secs_f64());
        }
        let raw = (block * blocks.len()) as f64;
        let stored: usize = encoded.iter().map(Vec::len).sum();
        println!(
            r#"{{"chain": "{text}", "ratio": {:.4}, "decode_mb_s": {:.1}}}"#,
            raw / stored as f64,
            raw / 1e6 / best
        );
    }
    Ok(())
}
