//! A query region cut into pieces along its first dimension, so a large result is built a
//! piece at a time: each piece's intermediate buffers stay small (and are reused by the
//! allocator) while the pieces run side by side. Python's points queries, the C API, the
//! server and SQL's scans all cut regions here.

use crate::error::Result;
use crate::reader::{DimSelection, StoreReader};
use rayon::prelude::*;

/// Elements per piece, about: large enough to amortize planning and the per-piece setup,
/// small enough that a piece's buffers stay in the allocator's reused memory rather than
/// fresh pages (several columns of this many values).
pub const PIECE_ELEMENTS: u64 = 1 << 20;

/// How many pieces run side by side in a round: two per engine thread, so a slow piece does
/// not leave a thread idle, while memory holds a round's results and not a whole query's.
pub fn round_len() -> usize {
    2 * rayon::current_num_threads().max(1)
}

/// `run` on each piece number of `round`, side by side on the engine's threads; the results
/// in the round's order. A piece's own parallel steps then run on the thread already working
/// on it: pieces run one by one from a thread outside the pool handed each of those steps to
/// the pool and waited for it (a fifth of a 0.1% points query on ERSST x4 went on switching
/// threads).
pub fn run_round<T: Send>(round: &[usize], run: impl Fn(usize) -> T + Sync + Send) -> Vec<T> {
    round.par_iter().map(|&piece| run(piece)).collect()
}

/// `region` cut along its first dimension into pieces of at least `piece_elements`
/// selected elements (the last may hold fewer), each boundary at one of `starts` (the
/// sub-chunk starts along that dimension, ascending: see [`starts`]), so
/// no sub-chunk is read by two pieces. Strides are kept: each piece starts at the first
/// selected index of its span. An empty region has no pieces; a region without dimensions
/// is one piece.
pub fn split(region: &[DimSelection], starts: &[u64], piece_elements: u64) -> Vec<Vec<DimSelection>> {
    let Some(first) = region.first().copied() else {
        return vec![region.to_vec()];
    };
    if region.iter().any(|s| s.count() == 0) {
        return vec![];
    }
    let inner: u64 = region[1..].iter().map(|s| s.count()).product::<u64>().max(1);
    // Selected indices along the first dimension a piece needs.
    let rows = piece_elements.max(1).div_ceil(inner);
    let selected = |lo: u64, hi: u64| {
        let span = DimSelection { start: first.start, stop: hi.min(first.stop), step: first.step };
        span.first_in(lo, hi).map_or(0, |a| (span.stop - a).div_ceil(first.step.max(1)))
    };
    let mut out = Vec::new();
    let mut push = |lo: u64, hi: u64| {
        if let Some(start) = first.first_in(lo, hi) {
            let mut sel = region.to_vec();
            sel[0] = DimSelection { start, stop: hi, step: first.step };
            out.push(sel);
        }
    };
    let mut lo = first.start;
    for &cut in starts.iter().filter(|&&c| c > first.start && c < first.stop) {
        if cut > lo && selected(lo, cut) >= rows {
            push(lo, cut);
            lo = cut;
        }
    }
    push(lo, first.stop);
    out
}

/// Where the sub-chunks of `name` start along its first dimension, ascending: pieces of a
/// query driven by it are cut there. Record slabs restart the chunk grid, and a chunk not a
/// multiple of its sub-chunk ends with a shorter one, so these are not multiples of one
/// length.
pub fn starts(reader: &StoreReader, name: &str) -> Result<Vec<u64>> {
    let (_, v) = reader.manifest().variable(name)?;
    let shape = reader.manifest().shape(v);
    let (Some(c), Some(&extent)) = (v.chunking.as_ref(), shape.first()) else {
        return Ok(vec![0]);
    };
    let (chunk, sub) = (c.chunk[0].max(1), c.subchunk[0].max(1));
    let mut starts = Vec::new();
    for (_, offset, count) in reader.parts_of(v) {
        let (offset, count) = if reader.manifest().is_record_var(v) { (offset, count) } else { (0, extent) };
        let mut k = 0;
        while k < count {
            let mut s = 0;
            while s < chunk && k + s < count {
                starts.push(offset + k + s);
                s += sub;
            }
            k += chunk;
        }
    }
    starts.sort_unstable();
    starts.dedup();
    Ok(starts)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sel(start: u64, stop: u64, step: u64) -> DimSelection {
        DimSelection { start, stop, step }
    }

    /// Every selected index of the first dimension, over all pieces.
    fn indices(pieces: &[Vec<DimSelection>]) -> Vec<u64> {
        pieces.iter().flat_map(|p| (p[0].start..p[0].stop).step_by(p[0].step as usize)).collect()
    }

    #[test]
    fn pieces_cover_the_region_once_cut_at_sub_chunk_starts() {
        // Irregular starts: slabs of 7 records, chunks of 4, sub-chunks of 3.
        let starts: Vec<u64> = (0..100u64).filter(|r| (r % 7) % 4 == 0 || (r % 7) % 4 == 3).collect();
        for (first, per) in [(sel(0, 100, 1), 40), (sel(3, 97, 5), 30), (sel(7, 8, 1), 1), (sel(5, 60, 2), 1)] {
            let region = vec![first, sel(2, 12, 1)];
            let pieces = split(&region, &starts, per);
            let want: Vec<u64> = (first.start..first.stop).step_by(first.step as usize).collect();
            assert_eq!(indices(&pieces), want);
            for (i, p) in pieces.iter().enumerate() {
                assert_eq!(p[1], region[1]);
                assert!(p[0].count() > 0);
                if i + 1 < pieces.len() {
                    // Full pieces, each ending where a sub-chunk starts.
                    assert!(p[0].count() * 10 >= per, "{first:?}: {p:?}");
                    assert!(starts.contains(&p[0].stop), "{first:?}: {p:?}");
                }
            }
        }
        assert!(split(&[sel(0, 10, 1), sel(4, 4, 1)], &[0], 10).is_empty());
        assert_eq!(split(&[], &[0], 10), vec![Vec::<DimSelection>::new()]);
        // Huge pieces asked for: one piece.
        assert_eq!(split(&[sel(0, 10, 1)], &[0, 3, 6, 9], u64::MAX).len(), 1);
    }
}
