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

/// [`split`] along the first dimension, and a piece that selects one index there but still
/// holds more than twice `piece_elements` (one member of a large ensemble stored without a
/// record dimension, one time step of a very large grid) cut again along the next dimension,
/// at `starts[1]`, and so on: pieces stay in row-major order and no sub-chunk is read by
/// two of them. `starts[d]` are the sub-chunk starts along dimension `d` ([`starts_nd`]).
pub fn split_nd(region: &[DimSelection], starts: &[Vec<u64>], piece_elements: u64) -> Vec<Vec<DimSelection>> {
    let mut out = Vec::new();
    split_from(region, 0, starts, piece_elements, &mut out);
    out
}

fn split_from(
    region: &[DimSelection],
    d: usize,
    starts: &[Vec<u64>],
    piece_elements: u64,
    out: &mut Vec<Vec<DimSelection>>,
) {
    let cuts = starts.get(d).map_or(&[0u64][..], |s| s.as_slice());
    let (head, tail) = region.split_at(d);
    for piece in split(tail, cuts, piece_elements) {
        let whole: Vec<DimSelection> = head.iter().copied().chain(piece).collect();
        let elements: u64 = whole.iter().map(|s| s.count()).product();
        if d + 1 < region.len() && whole[d].count() == 1 && elements > 2 * piece_elements.max(1) {
            split_from(&whole, d + 1, starts, piece_elements, out);
        } else {
            out.push(whole);
        }
    }
}

/// [`starts`] along every dimension of `name`: the first's as [`starts`] gives them, the
/// others' from its chunk and sub-chunk lengths (the same along the whole dimension).
pub fn starts_nd(reader: &StoreReader, name: &str) -> Result<Vec<Vec<u64>>> {
    let (_, v) = reader.manifest().variable(name)?;
    let shape = reader.manifest().shape(v);
    let mut out = vec![starts(reader, name)?];
    let Some(c) = v.chunking.as_ref() else { return Ok(out) };
    for (d, &n) in shape.iter().enumerate().skip(1) {
        let mut at = Vec::new();
        push_subchunk_starts(&mut at, 0, n, c.chunk[d].max(1), c.subchunk[d].max(1));
        out.push(if at.is_empty() { vec![0] } else { at });
    }
    Ok(out)
}

/// `region` of a query on `name` cut as [`split_nd`] cuts it, each piece at least
/// `records` indices of the first dimension long; without `records`, at least one and
/// about [`PIECE_ELEMENTS`] (`query_batches`' pieces).
pub fn split_records(
    reader: &StoreReader,
    name: &str,
    region: &[DimSelection],
    records: Option<u64>,
) -> Result<Vec<Vec<DimSelection>>> {
    let inner: u64 = region.iter().skip(1).map(|s| s.count()).product::<u64>().max(1);
    let piece = match records {
        Some(r) => r.max(1).saturating_mul(inner),
        None => inner.min(PIECE_ELEMENTS),
    };
    Ok(split_nd(region, &starts_nd(reader, name)?, piece))
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
        push_subchunk_starts(&mut starts, offset, count, chunk, sub);
    }
    starts.sort_unstable();
    starts.dedup();
    Ok(starts)
}

/// The sub-chunk starts along one axis of a part `count` long at `offset`: each chunk's,
/// then every `sub` into it.
fn push_subchunk_starts(out: &mut Vec<u64>, offset: u64, count: u64, chunk: u64, sub: u64) {
    for k in (0..count).step_by(chunk as usize) {
        out.extend((k..(k + chunk).min(count)).step_by(sub as usize).map(|s| offset + s));
    }
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

    #[test]
    fn a_single_row_too_large_is_cut_along_the_next_dimension() {
        // 4 members x 100 times x 50 points, sub-chunks 1 x 10 x 50: a member is 5,000
        // elements, pieces of 1,000 are asked for.
        let starts = vec![vec![0, 1, 2, 3], (0..100).step_by(10).collect(), vec![0]];
        let region = vec![sel(0, 4, 1), sel(5, 100, 1), sel(0, 50, 1)];
        let pieces = split_nd(&region, &starts, 1000);
        // Row-major order, every (member, time) once, cut at sub-chunk starts only.
        let mut seen = Vec::new();
        for p in &pieces {
            assert_eq!(p[0].count(), 1, "{p:?}");
            assert_eq!(p[2], region[2]);
            assert!(p[1].start == 5 || p[1].start % 10 == 0, "{p:?}");
            // At least the size asked for (the last of a member may hold fewer), at most
            // one sub-chunk's 500 beyond it.
            assert!(p.iter().map(|s| s.count()).product::<u64>() < 1500, "{p:?}");
            for t in p[1].start..p[1].stop {
                seen.push((p[0].start, t));
            }
        }
        let want: Vec<(u64, u64)> = (0..4).flat_map(|m| (5..100).map(move |t| (m, t))).collect();
        assert_eq!(seen, want);
        // Rows small enough: the first dimension's cut alone, as split gives it.
        assert_eq!(split_nd(&region, &starts, 100_000), split(&region, &starts[0], 100_000));
        // Several indices of the first dimension in a piece: never cut further (the points
        // would leave row-major order).
        let coarse = vec![vec![0], (0..100).step_by(10).collect(), vec![0]];
        assert_eq!(split_nd(&region, &coarse, 1000).len(), 1);
    }
}
