//! Evaluating a constraint on one box: segments judged from the index, boundary ones read
//! and tested.

use super::*;
use crate::error::{Error, Result};
use crate::manifest::{Level, Slab};
use crate::reader::{BinEntry, BinStat, SlabIndex};
use crate::segment::SegmentKey;
use roaring::RoaringBitmap;
use std::sync::atomic::Ordering;

/// Calls `run(i, start, len)` for each run of consecutive positions of a segment's `n`
/// elements: elements `i..i + len` sit at positions `start..start + len`. `p` lists the
/// positions in element order (a bin's), or None when element `i` is at position `i`. Bins
/// are walked by runs (cheaper than decoding each position, even for the short runs of
/// noisy fields).
fn position_runs(p: Option<&RoaringBitmap>, n: usize, mut run: impl FnMut(usize, u32, usize)) {
    let Some(p) = p else {
        run(0, 0, n);
        return;
    };
    let mut it = p.iter();
    let mut i = 0usize;
    while i < n {
        let Some(r) = it.next_range() else { break };
        let len = ((r.end() - r.start()) as usize + 1).min(n - i);
        run(i, *r.start(), len);
        i += len;
    }
}

/// The positions of the elements kept (see [`position_runs`] for `p`), written without
/// branching.
pub(super) fn kept_positions(p: Option<&RoaringBitmap>, keep: &[bool]) -> Vec<u32> {
    let kept = keep.iter().filter(|&&k| k).count();
    let mut out = crate::large::zeroed(kept + 1);
    let mut n = 0usize;
    position_runs(p, keep.len(), |i, start, len| {
        for (j, &k) in keep[i..i + len].iter().enumerate() {
            out[n] = start + j as u32;
            n += k as usize;
        }
    });
    out.truncate(n);
    out
}

/// A box's region as one bit per position (see [`crate::bitset::bitmap_of`]): testing a
/// position is a shift, where a roaring lookup searches a container (that search was a
/// fifth of a count through an area).
pub(super) struct RegionBits<'a>(pub(super) &'a [u64]);

impl RegionBits<'_> {
    #[inline]
    fn has(&self, x: u32) -> u64 {
        (self.0[(x >> 6) as usize] >> (x & 63)) & 1
    }

    /// How many kept elements (see [`position_runs`] for `p`) sit in the region.
    fn count_kept(&self, p: Option<&RoaringBitmap>, keep: &[bool]) -> u64 {
        let mut total = 0u64;
        position_runs(p, keep.len(), |i, start, len| {
            for (j, &k) in keep[i..i + len].iter().enumerate() {
                total += u64::from(k) & self.has(start + j as u32);
            }
        });
        total
    }

    /// The kept elements' positions in the region.
    fn extend_kept(&self, p: Option<&RoaringBitmap>, keep: &[bool], out: &mut Vec<u32>) {
        position_runs(p, keep.len(), |i, start, len| {
            for (j, &k) in keep[i..i + len].iter().enumerate() {
                let x = start + j as u32;
                if k && self.has(x) == 1 {
                    out.push(x);
                }
            }
        });
    }
}

/// What one comparison found in one box: segments selected whole and tested ones.
#[derive(Default)]
pub(super) struct Verdicts<'i> {
    /// The whole box (a sub-chunk without level V whose summary is covered).
    all: bool,
    /// Bins selected whole, from their summaries.
    full: Vec<&'i BinEntry>,
    /// Segments read and tested: their bin's positions (None: the whole box in order) and
    /// which of their elements pass.
    tested: Vec<(Option<&'i RoaringBitmap>, Vec<bool>)>,
}

impl Verdicts<'_> {
    /// The passing local positions of a box of `n` elements.
    fn positions(self, n: u64) -> RoaringBitmap {
        if self.all {
            let mut hits = RoaringBitmap::new();
            hits.insert_range(0..n as u32);
            return hits;
        }
        let kept: Vec<RoaringBitmap> = self
            .tested
            .iter()
            .map(|(p, keep)| RoaringBitmap::from_sorted_iter(kept_positions(*p, keep)).unwrap_or_default())
            .collect();
        // Full bins' positions (often run containers) are unioned once at the end: adding
        // array containers into a run container one by one is quadratic.
        union_all(self.full.iter().map(|e| &e.positions).chain(&kept))
    }

    /// The passing local positions of a box of `n` elements inside `region` (all when
    /// None), not in order (the caller sorts the query's flat indices once).
    pub(super) fn unordered_positions(self, n: u64, region: Option<(&RoaringBitmap, RegionBits<'_>)>) -> Vec<u32> {
        if self.all {
            return match region {
                Some((r, _)) => r.iter().collect(),
                None => (0..n as u32).collect(),
            };
        }
        let mut out = Vec::with_capacity(self.full.iter().map(|e| e.len as usize).sum());
        for e in &self.full {
            match region {
                Some((r, _)) => out.extend(&(&e.positions & r)),
                None => {
                    let mut it = e.positions.iter();
                    while let Some(range) = it.next_range() {
                        out.extend(range);
                    }
                }
            }
        }
        for (p, keep) in &self.tested {
            match region.as_ref().map(|(_, bits)| bits) {
                Some(bits) => bits.extend_kept(*p, keep, &mut out),
                None => out.extend(kept_positions(*p, keep)),
            }
        }
        out
    }

    /// How many elements of a box of `n` pass, inside `region` (all when None).
    pub(super) fn count(self, n: u64, region: Option<(&RoaringBitmap, RegionBits<'_>)>) -> u64 {
        let Some((r, bits)) = region else {
            if self.all {
                return n;
            }
            let full: u64 = self.full.iter().map(|e| e.len).sum();
            return full + self.tested.iter().map(|(_, keep)| keep.iter().filter(|&&k| k).count() as u64).sum::<u64>();
        };
        if self.all {
            return r.len();
        }
        let full: u64 = self.full.iter().map(|e| e.positions.intersection_len(r)).sum();
        full + self.tested.iter().map(|(p, keep)| bits.count_kept(*p, keep)).sum::<u64>()
    }
}

impl Executor<'_> {
    /// The local positions of a box where `pred` holds. `mask`: only these positions matter
    /// (segments disjoint from it are not read).
    pub(super) fn eval(
        &self,
        pred: &Predicate,
        b: &QueryBox,
        mask: Option<&RoaringBitmap>,
        counters: &Counters,
    ) -> Result<RoaringBitmap> {
        match pred {
            Predicate::Cmp { var, op, value } => self.eval_cmp(var, *op, *value, b, mask, counters),
            Predicate::And { args } => {
                let mut acc: Option<RoaringBitmap> = None;
                for a in args {
                    let m = acc.as_ref().or(mask);
                    let r = self.eval(a, b, m, counters)?;
                    acc = Some(match acc {
                        Some(x) => x & r,
                        None => r,
                    });
                    if acc.as_ref().is_some_and(|x| x.is_empty()) {
                        break;
                    }
                }
                Ok(acc.unwrap_or_default())
            }
            Predicate::Or { args } => {
                let mut acc = RoaringBitmap::new();
                for a in args {
                    acc |= self.eval(a, b, mask, counters)?;
                }
                Ok(acc)
            }
        }
    }

    pub(super) fn eval_cmp(
        &self,
        name: &str,
        op: CmpOp,
        value: f64,
        b: &QueryBox,
        mask: Option<&RoaringBitmap>,
        counters: &Counters,
    ) -> Result<RoaringBitmap> {
        let n = b.len.iter().product::<u64>();
        self.with_verdicts(name, op, value, b, mask, counters, |v| v.positions(n))
    }

    /// How many elements of box `b`, whole, hold `x op value`, counted from the bins'
    /// summaries and the boundary bins' values alone: no positions read, as a count of a
    /// whole box needs none. None where it cannot be (no level V, another sub-chunk grid,
    /// a file indexed in place): [`with_verdicts`](Self::with_verdicts) counts those.
    pub(super) fn count_whole_box(
        &self,
        name: &str,
        op: CmpOp,
        value: f64,
        b: &QueryBox,
        counters: &Counters,
    ) -> Result<Option<u64>> {
        let (var_idx, var) = self.reader.manifest().variable(name)?;
        let driver = &self.reader.manifest().variables[b.id.0 as usize];
        let slab = &self.reader.manifest().slabs[b.slab];
        let binned = self.reader.manifest().layout.order.contains(&Level::V);
        if !binned || var.chunking != driver.chunking || self.reader.is_in_place(slab) {
            return Ok(None);
        }
        let index = self.reader.slab_index(slab)?;
        let id = (var_idx as u32, b.id.1, b.id.2);
        let n = b.len.iter().product::<u64>();
        let (mut count, mut boundary) = (0u64, Vec::new());
        for (e, c) in judge_bins(&index, slab, id, n, op, value, counters)? {
            match c {
                Coverage::Empty => {}
                Coverage::Full => count += e.len,
                Coverage::Boundary => boundary.push((e.bin, e.len)),
            }
        }
        if boundary.is_empty() {
            return Ok(Some(count));
        }
        counters.boundary.fetch_add(boundary.len() as u64, Ordering::Relaxed);
        let groups = crate::precision::byte_groups(&self.reader.manifest().layout, var)?;
        let widths = crate::precision::widths_read(groups.as_deref(), None, var.dtype.size());
        let lens: Vec<u64> = boundary.iter().map(|&(_, len)| len).collect();
        let reads = self.reader.reads_for(&index, slab, id, n, &widths, boundary)?;
        let fetched =
            self.reader.fetch(reads.iter().flat_map(|r| r.entries.iter().map(|e| (b.slab, e))), false, self.counted)?;
        let split = groups.map(|g| (g.clone(), g.len()));
        let missing = var.missing_values();
        for (r, len) in reads.iter().zip(lens) {
            let values = self.reader.decode_bin((b.slab, id), r, &[len as usize], split.as_ref(), &fetched)?;
            count += op.matches_raw(var.dtype, &values, value, &missing).iter().filter(|&&k| k).count() as u64;
        }
        Ok(Some(count))
    }

    /// Classifies the segments of `name` in box `b` for `x op value` (from the index
    /// summaries), reads and tests the boundary ones, and hands the verdicts to `then`.
    #[allow(clippy::too_many_arguments)] // internal: one comparison and its context
    pub(super) fn with_verdicts<R>(
        &self,
        name: &str,
        op: CmpOp,
        value: f64,
        b: &QueryBox,
        mask: Option<&RoaringBitmap>,
        counters: &Counters,
        then: impl FnOnce(Verdicts<'_>) -> R,
    ) -> Result<R> {
        let (var_idx, var) = self.reader.manifest().variable(name)?;
        let driver = &self.reader.manifest().variables[b.id.0 as usize];
        let missing = var.missing_values();
        let n = b.len.iter().product::<u64>();
        let mut v = Verdicts::default();
        if var.chunking != driver.chunking {
            // Another sub-chunk grid: read this box of the variable and test every element.
            counters.boundary.fetch_add(1, Ordering::Relaxed);
            let sel = b.selection();
            let mut raw = vec![0u8; n as usize * var.dtype.size()];
            self.read(name, &sel, None, &mut raw)?;
            v.tested.push((None, op.matches_raw(var.dtype, &raw, value, &missing)));
            return Ok(then(v));
        }
        let slab = &self.reader.manifest().slabs[b.slab];
        let index = self.reader.slab_index(slab)?;
        let id = (var_idx as u32, b.id.1, b.id.2);
        let binned = self.reader.manifest().layout.order.contains(&Level::V);
        let mut boundary = Vec::new();
        let no_positions = || Error::Corruption(format!("slab {}: no bin positions for {id:?}", slab.id));
        let judged = if binned { Some(judge_bins(&index, slab, id, n, op, value, counters)?) } else { None };
        if let Some(judged) = &judged {
            // A box no element of which can hold, or every element of which holds, needs
            // no positions, which are a frame of the index file to read and decode (most of
            // a one-shot query's time when it selects nothing).
            if judged.iter().all(|(_, c)| *c == Coverage::Empty) {
                return Ok(then(v));
            }
            if judged.iter().all(|(_, c)| *c == Coverage::Full) {
                v.all = true;
                return Ok(then(v));
            }
        }
        // Held to the end: the verdicts borrow its positions.
        let bins = if binned { Some(index.bins_of(id)?.ok_or_else(no_positions)?) } else { None };
        if let (Some(list), Some(judged)) = (&bins, &judged) {
            let unlike =
                || Error::Corruption(format!("slab {}: the bin positions of {id:?} are not its bins", slab.id));
            if list.len() != judged.len() {
                return Err(unlike());
            }
            for (e, (stat, c)) in list.iter().zip(judged) {
                if e.bin != stat.bin {
                    return Err(unlike());
                }
                match c {
                    Coverage::Empty => {}
                    Coverage::Full => v.full.push(e),
                    Coverage::Boundary if mask.is_some_and(|m| crate::bitset::disjoint(m, &e.positions)) => {
                        counters.empty.fetch_add(1, Ordering::Relaxed);
                    }
                    Coverage::Boundary => boundary.push(e.bin),
                }
            }
        } else {
            let key = SegmentKey { var: id.0, chunk: id.1, subchunk: id.2, bin: 0, group: 0 };
            let e = index.segments.get(&key).ok_or_else(|| {
                Error::Corruption(format!("slab {} has no segment for '{name}' sub-chunk {id:?}", slab.id))
            })?;
            match counters.coverage(op, e.count, e.min, e.max, e.count == n, value) {
                Coverage::Empty => return Ok(then(v)),
                Coverage::Full => {
                    v.all = true;
                    return Ok(then(v));
                }
                Coverage::Boundary => boundary.push(0),
            }
        }
        if boundary.is_empty() {
            return Ok(then(v));
        }
        counters.boundary.fetch_add(boundary.len() as u64, Ordering::Relaxed);
        // Boundary segments are read at full precision: the selection is exact.
        let groups = crate::precision::byte_groups(&self.reader.manifest().layout, var)?;
        let widths = crate::precision::widths_read(groups.as_deref(), None, var.dtype.size());
        let reads = self.reader.bin_reads(&index, slab, id, n, &widths, &|bin| boundary.contains(&bin))?;
        let fetched =
            self.reader.fetch(reads.iter().flat_map(|r| r.entries.iter().map(|e| (b.slab, e))), false, self.counted)?;
        let split = groups.map(|g| (g.clone(), g.len()));
        let shape: Vec<usize> = b.len.iter().map(|&l| l as usize).collect();
        if self.reader.is_in_place(slab) && binned {
            // Every bin names the file's whole chunk: decode it once, test each boundary
            // bin's values at its positions.
            let Some(first) = reads.first() else { return Ok(then(v)) };
            let whole = self.reader.decode_bin((b.slab, id), first, &shape, split.as_ref(), &fetched)?;
            let es = var.dtype.size();
            for r in &reads {
                let p = bins.as_ref().map(|b| b.positions(r.bin)).transpose()?.ok_or_else(|| {
                    Error::Corruption(format!("slab {}: no positions for bin {} of {id:?}", slab.id, r.bin))
                })?;
                let values = crate::bins::values_at(&whole, p, es)?;
                v.tested.push((Some(p), op.matches_raw(var.dtype, &values, value, &missing)));
            }
            return Ok(then(v));
        }
        for r in &reads {
            let positions = bins.as_ref().map(|b| b.positions(r.bin)).transpose()?;
            let seg_shape = match positions {
                Some(p) => vec![p.len() as usize],
                None => shape.clone(),
            };
            let values = self.reader.decode_bin((b.slab, id), r, &seg_shape, split.as_ref(), &fetched)?;
            v.tested.push((positions, op.matches_raw(var.dtype, &values, value, &missing)));
        }
        Ok(then(v))
    }
}

/// The bins of sub-chunk `id` in `slab` and how their summaries judge them for `x op
/// value` (counted in `counters`, once), from the segments table: no positions read. The
/// bins must hold the box's `n` elements between them.
#[allow(clippy::too_many_arguments)] // internal: one comparison and where it applies
fn judge_bins(
    index: &SlabIndex,
    slab: &Slab,
    id: SubchunkId,
    n: u64,
    op: CmpOp,
    value: f64,
    counters: &Counters,
) -> Result<Vec<(BinStat, Coverage)>> {
    let stats =
        index.bin_stats(id)?.ok_or_else(|| Error::Corruption(format!("slab {}: no bins for {id:?}", slab.id)))?;
    if stats.iter().map(|e| e.len).sum::<u64>() != n {
        return Err(Error::Corruption(format!("slab {}: the bins of {id:?} do not hold its {n} elements", slab.id)));
    }
    Ok(stats.iter().map(|e| (*e, counters.coverage(op, e.count, e.min, e.max, e.count == e.len, value))).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// Counting and listing kept elements inside a region by its bits agrees with
        /// roaring's lookups, for bins of runs and scattered positions, ranges crossing
        /// word boundaries, and fewer flags than positions.
        #[test]
        fn region_bits_agree_with_the_bitmap(
            positions in proptest::collection::btree_set(0u32..3000, 0..400),
            runs in proptest::collection::vec((0u32..3000, 1u32..200), 0..12),
            keep_seed in proptest::num::u64::ANY,
            flags in 0usize..500,
            in_order in proptest::bool::ANY,
        ) {
            let n = 3200u64;
            let region: RoaringBitmap = runs.iter().flat_map(|&(a, l)| a..(a + l).min(n as u32)).collect();
            let bin: RoaringBitmap = positions.into_iter().collect();
            let p = (!in_order).then_some(&bin);
            let len = if in_order { flags.min(n as usize) } else { flags };
            let keep: Vec<bool> = (0..len).map(|i| (keep_seed >> (i % 64)) & 1 == 1 || i % 7 == 0).collect();
            let want: Vec<u32> = kept_positions(p, &keep).into_iter().filter(|&x| region.contains(x)).collect();
            let mut words = vec![0u64; (n as usize).div_ceil(64)];
            for x in &region {
                words[x as usize / 64] |= 1 << (x % 64);
            }
            let bits = RegionBits(&words);
            proptest::prop_assert_eq!(bits.count_kept(p, &keep), want.len() as u64);
            let mut got = Vec::new();
            bits.extend_kept(p, &keep, &mut got);
            proptest::prop_assert_eq!(got, want);
        }
    }
}
