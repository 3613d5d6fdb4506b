//! Evaluating a constraint on one box: segments judged from the index, boundary ones read
//! and tested.

use super::*;
use crate::error::{Error, Result};
use crate::manifest::Level;
use crate::reader::{BinEntry, StoreReader};
use crate::segment::SegmentKey;
use roaring::RoaringBitmap;
use std::sync::atomic::Ordering;

/// The positions of the elements kept: `p` lists them in element order (a bin's positions),
/// or None when element `i` is at position `i`. Bins are walked by runs of consecutive
/// positions (cheaper than decoding each position, even for the short runs of noisy
/// fields), and the kept ones written without branching.
pub(super) fn kept_positions(p: Option<&RoaringBitmap>, keep: &[bool]) -> Vec<u32> {
    let kept = keep.iter().filter(|&&k| k).count();
    let mut out = vec![0u32; kept + 1];
    let mut n = 0usize;
    match p {
        None => {
            for (i, &k) in keep.iter().enumerate() {
                out[n] = i as u32;
                n += k as usize;
            }
        }
        Some(p) => {
            let mut it = p.iter();
            let mut i = 0usize;
            while let Some(r) = it.next_range() {
                let start = *r.start();
                let end = (i + (r.end() - start) as usize + 1).min(keep.len());
                for (j, &k) in keep[i.min(end)..end].iter().enumerate() {
                    out[n] = start + j as u32;
                    n += k as usize;
                }
                i = end;
                if i == keep.len() {
                    break;
                }
            }
        }
    }
    out.truncate(n);
    out
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
    pub(super) fn unordered_positions(self, n: u64, region: Option<&RoaringBitmap>) -> Vec<u32> {
        if self.all {
            return match region {
                Some(r) => r.iter().collect(),
                None => (0..n as u32).collect(),
            };
        }
        let mut out = Vec::with_capacity(self.full.iter().map(|e| e.len as usize).sum());
        for e in &self.full {
            match region {
                Some(r) => out.extend(&(&e.positions & r)),
                None => {
                    let mut it = e.positions.iter();
                    while let Some(range) = it.next_range() {
                        out.extend(range);
                    }
                }
            }
        }
        for (p, keep) in &self.tested {
            let kept = kept_positions(*p, keep);
            match region {
                Some(r) => out.extend(kept.into_iter().filter(|&x| r.contains(x))),
                None => out.extend(kept),
            }
        }
        out
    }

    /// How many elements of a box of `n` pass, inside `region` (all when None).
    pub(super) fn count(self, n: u64, region: Option<&RoaringBitmap>) -> u64 {
        let Some(r) = region else {
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
        let tested: u64 = self
            .tested
            .iter()
            .map(|(p, keep)| kept_positions(*p, keep).into_iter().filter(|&x| r.contains(x)).count() as u64)
            .sum();
        full + tested
    }
}

impl StoreReader {
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
        let (var_idx, var) = self.manifest().variable(name)?;
        let driver = &self.manifest().variables[b.id.0 as usize];
        let missing = var.missing_values();
        let n = b.len.iter().product::<u64>();
        let mut v = Verdicts::default();
        if var.chunking != driver.chunking {
            // Another sub-chunk grid: read this box of the variable and test every element.
            counters.boundary.fetch_add(1, Ordering::Relaxed);
            let sel = b.selection();
            let mut raw = vec![0u8; n as usize * var.dtype.size()];
            self.read_into_at(name, &sel, None, &mut raw)?;
            v.tested.push((None, op.matches_raw(var.dtype, &raw, value, &missing)));
            return Ok(then(v));
        }
        let slab = &self.manifest().slabs[b.slab];
        let index = self.slab_index(slab)?;
        let id = (var_idx as u32, b.id.1, b.id.2);
        let binned = self.manifest().layout.order.contains(&Level::V);
        let mut boundary = Vec::new();
        if binned {
            let Some(list) = index.bins_of(id) else {
                return Err(Error::Corruption(format!("slab {}: no bin positions for {id:?}", slab.id)));
            };
            for e in list {
                match op.coverage(e.count, e.min, e.max, e.count == e.len, value) {
                    Coverage::Empty => {
                        counters.empty.fetch_add(1, Ordering::Relaxed);
                    }
                    Coverage::Full => {
                        counters.full.fetch_add(1, Ordering::Relaxed);
                        v.full.push(e);
                    }
                    Coverage::Boundary if mask.is_some_and(|m| m.is_disjoint(&e.positions)) => {
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
            match op.coverage(e.count, e.min, e.max, e.count == n, value) {
                Coverage::Empty => {
                    counters.empty.fetch_add(1, Ordering::Relaxed);
                    return Ok(then(v));
                }
                Coverage::Full => {
                    counters.full.fetch_add(1, Ordering::Relaxed);
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
        let groups = crate::precision::byte_groups(&self.manifest().layout, var)?;
        let widths = groups.clone().unwrap_or_else(|| vec![var.dtype.size()]);
        let reads = self.bin_reads(&index, slab, id, n, &widths, &|bin| boundary.contains(&bin))?;
        let fetched = self.fetch(reads.iter().flat_map(|r| r.entries.iter().map(|e| (b.slab, e))), false)?;
        let split = groups.map(|g| (g.clone(), g.len()));
        let shape: Vec<usize> = b.len.iter().map(|&l| l as usize).collect();
        if self.is_in_place(slab) && binned {
            // Every bin names the file's whole chunk: decode it once, test each boundary
            // bin's values at its positions.
            let Some(first) = reads.first() else { return Ok(then(v)) };
            let whole = self.decode_bin((b.slab, id), first, &shape, split.as_ref(), &fetched)?;
            let es = var.dtype.size();
            for r in &reads {
                let p = self.bin_positions(&index, id, r.bin)?.ok_or_else(|| {
                    Error::Corruption(format!("slab {}: no positions for bin {} of {id:?}", slab.id, r.bin))
                })?;
                let values = crate::bins::values_at(&whole, p, es)?;
                v.tested.push((Some(p), op.matches_raw(var.dtype, &values, value, &missing)));
            }
            return Ok(then(v));
        }
        for r in &reads {
            let positions = self.bin_positions(&index, id, r.bin)?;
            let seg_shape = match positions {
                Some(p) => vec![p.len() as usize],
                None => shape.clone(),
            };
            let values = self.decode_bin((b.slab, id), r, &seg_shape, split.as_ref(), &fetched)?;
            v.tested.push((positions, op.matches_raw(var.dtype, &values, value, &missing)));
        }
        Ok(then(v))
    }
}
