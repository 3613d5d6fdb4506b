//! Cutting a part (a slab of a record variable, or a static variable) into sub-chunks,
//! bins and byte groups, and compressing them in parallel.

use super::{BinnedPart, EncodedPart, PendingBitmap, PendingSegment, StoreWriter};
use crate::bins::{BinSummary, Bins};
use crate::error::{Error, Result};
use crate::grid::{chunk_grid, chunks_touched, copy_block, subchunk_grid, unravel};
use crate::index_file::BinPositions;
use crate::precision;
use crate::segment::SegmentKey;
use rayon::prelude::*;

impl StoreWriter {
    /// Cuts one part (a slab of a record variable, or a whole static variable) into
    /// sub-chunks and compresses them in parallel.
    pub(super) fn encode_part(
        &self,
        idx: usize,
        extent: &[u64],
        window: &(Vec<u64>, Vec<u64>),
        data: &[u8],
        bins: Option<Bins>,
    ) -> Result<EncodedPart> {
        let var = &self.draft.variables[idx];
        let es = var.dtype.size();
        let (origin, held) = window;
        let expected = held.iter().product::<u64>() as usize * es;
        if data.len() != expected {
            return Err(Error::InvalidArgument(format!(
                "'{}' needs {expected} bytes for shape {held:?} of {}, got {}",
                var.name,
                var.dtype.name(),
                data.len()
            )));
        }
        let (Some(chunking), Some((codec_index, chain))) = (&var.chunking, &self.chains[idx]) else {
            return Err(Error::InvalidArgument(format!("'{}' is not stored in segments", var.name)));
        };
        let grid = chunk_grid(extent, &chunking.chunk);
        let sub_grid = subchunk_grid(&chunking.chunk, &chunking.subchunk);
        let n_subs: u64 = sub_grid.iter().product();
        let ndim = extent.len();
        // Only the chunks the window touches: a block of a large variable is a small share
        // of its grid, and idle tasks split among threads left them waiting on one another.
        let chunks = chunks_touched(origin, held, &chunking.chunk, &grid);
        let tasks: Vec<(u64, u64)> = chunks.iter().flat_map(|&c| (0..n_subs).map(move |s| (c, s))).collect();
        let missing = var.missing_values();
        let groups = precision::byte_groups(&self.draft.layout, var)?;
        type SubchunkOut = (Vec<PendingSegment>, Vec<PendingBitmap>);
        let results: Vec<Option<Result<SubchunkOut>>> = tasks
            .par_iter()
            .map(|&(c, s)| {
                let cc = unravel(c, &grid);
                let sc = unravel(s, &sub_grid);
                let mut start = vec![0u64; ndim];
                let mut len = vec![0u64; ndim];
                for d in 0..ndim {
                    let chunk_lo = cc[d] * chunking.chunk[d];
                    let chunk_hi = (chunk_lo + chunking.chunk[d]).min(extent[d]);
                    if chunk_lo < origin[d] || chunk_lo >= origin[d] + held[d] {
                        return None; // another writer's chunk
                    }
                    let lo = chunk_lo + sc[d] * chunking.subchunk[d];
                    if lo >= chunk_hi {
                        return None; // sub-chunk id beyond a ragged edge chunk
                    }
                    start[d] = lo;
                    len[d] = (lo + chunking.subchunk[d]).min(chunk_hi) - lo;
                    if chunk_hi > origin[d] + held[d] {
                        return Some(Err(Error::InvalidArgument(format!(
                            "'{}': a chunk along dimension {d} crosses the block's edge at {} (blocks must meet at \
                             the decomposition's cuts)",
                            var.name,
                            origin[d] + held[d]
                        ))));
                    }
                }
                let mut raw = vec![0u8; len.iter().product::<u64>() as usize * es];
                let ones = vec![1u64; ndim];
                let local: Vec<u64> = start.iter().zip(origin).map(|(s, o)| s - o).collect();
                copy_block(data, held, &local, &ones, &mut raw, &len, &vec![0; ndim], &len, es);
                let shape: Vec<usize> = len.iter().map(|&l| l as usize).collect();
                // Without level V the sub-chunk is one bin (0) in its spatial shape; with it,
                // each bin's elements form a 1-D run in position order.
                let binned: Vec<BinnedPart> = match &bins {
                    None => vec![(0, None, raw, shape)],
                    Some(b) => b
                        .split(&raw, var.dtype, &missing)
                        .into_iter()
                        .map(|(bin, positions, bytes)| {
                            let n = positions.len() as usize;
                            (bin, Some(positions), bytes, vec![n])
                        })
                        .collect(),
                };
                let mut segments = Vec::new();
                let mut bitmaps = Vec::new();
                for (bin, positions, bytes, shape) in binned {
                    let summary = var.dtype.summarize(&bytes, &missing);
                    let key = SegmentKey { var: idx as u32, chunk: c, subchunk: s as u32, bin, group: 0 };
                    let parts = match &groups {
                        None => vec![(0u8, shape, bytes)],
                        Some(g) => precision::split(&bytes, es, g)
                            .into_iter()
                            .zip(g)
                            .enumerate()
                            .map(|(i, (part, &w))| (i as u8, [vec![w], shape.clone()].concat(), part))
                            .collect(),
                    };
                    // The element summary goes with group 0 only, so statistics count each element once.
                    for (group, shape, bytes) in parts {
                        let encoded = match chain.encode(&bytes, &shape) {
                            Ok(e) => e,
                            Err(e) => return Some(Err(e.into())),
                        };
                        let first = group == 0;
                        segments.push(PendingSegment {
                            key: SegmentKey { group, ..key },
                            codec: *codec_index,
                            bytes: encoded,
                            raw_length: bytes.len() as u64,
                            count: if first { summary.count } else { 0 },
                            min: if first { summary.min } else { f64::NAN },
                            max: if first { summary.max } else { f64::NAN },
                            spilled: None,
                        });
                    }
                    if let Some(positions) = positions {
                        // Serialized here, in parallel, and kept so: smaller than the bitmap,
                        // and what a spill writes.
                        let b = BinPositions { var: idx as u32, chunk: c, subchunk: s as u32, bin, positions };
                        bitmaps.push(PendingBitmap::new(&b));
                    }
                }
                Some(Ok((segments, bitmaps)))
            })
            .collect();
        let mut part = EncodedPart { segments: vec![], bitmaps: vec![], bins: None };
        for r in results.into_iter().flatten() {
            let (segments, bitmaps) = r?;
            part.segments.extend(segments);
            part.bitmaps.extend(bitmaps);
        }
        if let Some(b) = bins {
            let mut counts = vec![0u64; b.missing_bin() as usize + 1];
            for p in &part.bitmaps {
                counts[p.packed.bin as usize] += p.len;
            }
            part.bins = Some(BinSummary { var: idx as u32, boundaries: b.boundaries().to_vec(), counts });
        }
        Ok(part)
    }
}
