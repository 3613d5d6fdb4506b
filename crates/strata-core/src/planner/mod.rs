//! Choosing, slab by slab, how to answer a value query: from the index (classify segments
//! by their summaries, read boundary ones, gather the returned values by position) or by a
//! scan (read every sub-chunk of the variables involved and filter in memory).
//!
//! The choice compares estimated times. The work each method would do is counted from the
//! index alone — bytes and segments fetched, elements decoded, tested, taken from bitmaps
//! and gathered — and turned into seconds by a [`CostModel`] whose constants are measured on
//! the machine (`strata calibrate`) and corrected by the times of the queries it runs.

mod cost;
mod plan;

pub use cost::{cost_model_path, Coefficients, CostModel, Work, CLOSE_CALL, COST_MODEL_VERSION, EXPLORED};
pub(crate) use plan::human_bytes;
pub use plan::{QueryPlan, SlabPlan};

use crate::error::{Error, Result};
use crate::manifest::Level;
use crate::query::{CmpOp, Method, Predicate, Scan};
use crate::reader::{SlabIndex, StoreReader, SubchunkId};
use crate::segment::SegmentKey;
use std::collections::BTreeMap;

/// The fraction of a boundary segment's elements a comparison selects, assuming values
/// spread evenly between its minimum and maximum.
fn boundary_fraction(op: CmpOp, min: f64, max: f64, v: f64) -> f64 {
    let span = max - min;
    let f = match op {
        CmpOp::Gt | CmpOp::Ge if span > 0.0 => (max - v) / span,
        CmpOp::Lt | CmpOp::Le if span > 0.0 => (v - min) / span,
        CmpOp::Eq => 0.01,
        CmpOp::Ne => 0.99,
        _ => 0.5,
    };
    f.clamp(0.0, 1.0)
}

/// Stored bytes and segment count of one sub-chunk of a variable: all its bins, the first
/// `groups` byte groups (all when None).
fn subchunk_bytes(index: &SlabIndex, id: SubchunkId, bins: &[u32], groups: u8) -> (f64, f64) {
    let (mut bytes, mut n) = (0.0, 0.0);
    for &bin in bins {
        for group in 0..groups {
            if let Some(e) = index.segments.get(&SegmentKey { var: id.0, chunk: id.1, subchunk: id.2, bin, group }) {
                bytes += e.length as f64;
                n += 1.0;
            }
        }
    }
    (bytes, n)
}

/// Plans value queries on one version of a store under one cost model: counts the work
/// each method would do from the index alone and prices it (see [`CostModel::seconds`]).
/// What it decides, the [`crate::query::Executor`] runs.
#[derive(Debug, Clone, Copy)]
pub struct Planner<'r> {
    reader: &'r StoreReader,
    model: &'r CostModel,
}

impl<'r> Planner<'r> {
    pub fn new(reader: &'r StoreReader, model: &'r CostModel) -> Self {
        Planner { reader, model }
    }

    /// Byte groups stored for a variable (1 without level M) and the number read at `level`.
    fn groups_read(&self, name: &str, level: Option<usize>) -> Result<(u8, u8)> {
        let (_, var) = self.reader.manifest().variable(name)?;
        let n = crate::precision::byte_groups(&self.reader.manifest().layout, var)?.map_or(1, |g| g.len());
        Ok((n as u8, level.unwrap_or(n).clamp(1, n) as u8))
    }

    /// Index-method work and selected fraction of `pred` over one driver sub-chunk.
    fn estimate_index(
        &self,
        pred: &Predicate,
        index: &SlabIndex,
        id: SubchunkId,
        n: u64,
        work: &mut Work,
        touched: &mut Vec<u32>,
    ) -> Result<f64> {
        match pred {
            Predicate::Cmp { var, op, value } => {
                let (var_idx, v) = self.reader.manifest().variable(var)?;
                let driver = &self.reader.manifest().variables[id.0 as usize];
                let (groups, _) = self.groups_read(var, None)?;
                let vid = (var_idx as u32, id.1, id.2);
                if v.chunking != driver.chunking {
                    // Read densely over the driver's box.
                    work.bytes += (n * v.dtype.size() as u64) as f64;
                    work.calls += 1.0;
                    work.decoded += n as f64;
                    work.tested += n as f64;
                    return Ok(0.5);
                }
                let mut selected = 0.0;
                let mut boundary = 0.0;
                match index.bin_stats(vid)? {
                    Some(list) => {
                        for e in list.iter() {
                            let all_valid = e.count == e.len;
                            match op.coverage(e.count, e.min, e.max, all_valid, *value) {
                                crate::query::Coverage::Empty => {}
                                crate::query::Coverage::Full => {
                                    work.indexed += e.len as f64;
                                    selected += e.count as f64;
                                    touched.push(e.bin);
                                }
                                crate::query::Coverage::Boundary => {
                                    let (b, s) = subchunk_bytes(index, vid, &[e.bin], groups);
                                    work.bytes += b;
                                    work.segments += s;
                                    work.decoded += e.len as f64;
                                    work.tested += e.len as f64;
                                    selected += e.count as f64 * boundary_fraction(*op, e.min, e.max, *value);
                                    boundary += 1.0;
                                    touched.push(e.bin);
                                }
                            }
                        }
                    }
                    None => {
                        let key = SegmentKey { var: vid.0, chunk: vid.1, subchunk: vid.2, bin: 0, group: 0 };
                        let Some(e) = index.segments.get(&key) else {
                            return Err(Error::Corruption(format!("no segment for '{var}' sub-chunk {vid:?}")));
                        };
                        match op.coverage(e.count, e.min, e.max, e.count == n, *value) {
                            crate::query::Coverage::Empty => {}
                            crate::query::Coverage::Full => {
                                work.indexed += 1.0;
                                selected = n as f64;
                            }
                            crate::query::Coverage::Boundary => {
                                let (b, s) = subchunk_bytes(index, vid, &[0], groups);
                                work.bytes += b;
                                work.segments += s;
                                work.decoded += n as f64;
                                work.tested += n as f64;
                                selected = e.count as f64 * boundary_fraction(*op, e.min, e.max, *value);
                                boundary = 1.0;
                            }
                        }
                    }
                }
                if boundary > 0.0 {
                    work.calls += 1.0;
                }
                Ok(selected / n.max(1) as f64)
            }
            Predicate::And { args } => {
                let mut f = 1.0;
                for a in args {
                    f *= self.estimate_index(a, index, id, n, work, touched)?;
                }
                Ok(f)
            }
            Predicate::Or { args } => {
                let mut g = 1.0;
                for a in args {
                    g *= 1.0 - self.estimate_index(a, index, id, n, work, touched)?;
                }
                Ok(1.0 - g)
            }
        }
    }

    /// Plans a query: both methods' work and time per slab, each slab choosing the cheaper
    /// (the session then decides for the query).
    pub fn plan(&self, scan: &Scan) -> Result<QueryPlan> {
        let Scan { predicate: pred, region: sel, mask, outputs, level } = *scan;
        let names = pred.variable_names();
        let (driver_idx, driver) = self.reader.manifest().variable(names.first().copied().unwrap_or_default())?;
        self.reader.check_selection(&driver.name, sel)?;
        if let Some(m) = mask {
            m.check(&self.reader.manifest().shape(driver))?;
        }
        let binned = self.reader.manifest().layout.order.contains(&Level::V);
        let mut per_slab: BTreeMap<usize, SlabPlan> = BTreeMap::new();
        let subchunks = self.reader.subchunks_in(driver_idx, sel);
        self.reader.load_indexes(subchunks.iter().map(|b| b.slab))?;
        for b in subchunks {
            let slab = &self.reader.manifest().slabs[b.slab];
            let index = self.reader.slab_index(slab)?;
            let n: u64 = b.blocks.iter().map(|x| x.len).product();
            let region: u64 = match mask {
                Some(m) => m.count_in(&b.start, &b.blocks),
                None => b.blocks.iter().map(|x| x.count).product(),
            };
            if region == 0 {
                continue;
            }
            let region_frac = region as f64 / n.max(1) as f64;
            let mut iw = Work::default();
            let mut touched = Vec::new();
            let frac = self.estimate_index(pred, &index, b.id, n, &mut iw, &mut touched)? * region_frac;
            let selected = frac * n as f64;
            let mut sw = Work::default();
            for name in &names {
                let (var_idx, _) = self.reader.manifest().variable(name)?;
                let vid = (var_idx as u32, b.id.1, b.id.2);
                let (groups, _) = self.groups_read(name, None)?;
                let (bytes, segs) = index.stored(vid, groups);
                sw.bytes += bytes as f64;
                sw.segments += segs as f64;
                sw.calls += 1.0;
                sw.decoded += n as f64;
            }
            sw.tested += n as f64 * count_comparisons(pred) as f64;
            for name in outputs {
                let (var_idx, _) = self.reader.manifest().variable(name)?;
                let vid = (var_idx as u32, b.id.1, b.id.2);
                let (_, read) = self.groups_read(name, level)?;
                let bins = index.bin_stats(vid)?.map_or(1, |b| b.len());
                let (bytes, segs) = index.stored(vid, read);
                let (bytes, segs) = (bytes as f64, segs as f64);
                // A scan reads each returned variable whole, unless it was read to test
                // the constraint at the same precision.
                if !(names.contains(name) && level.is_none()) {
                    sw.bytes += bytes;
                    sw.segments += segs;
                    sw.calls += 1.0;
                    sw.decoded += n as f64;
                }
                // Either method copies the selected elements out of decoded sub-chunks.
                sw.gathered += selected;
                if selected > 0.0 {
                    // The index method reads them again; with level V only the bins holding
                    // them (all of them for another variable).
                    let share = if binned && names.contains(name) {
                        let mut t = touched.clone();
                        t.sort_unstable();
                        t.dedup();
                        t.len() as f64 / bins.max(1) as f64
                    } else {
                        1.0
                    };
                    iw.bytes += bytes * share;
                    iw.segments += segs * share;
                    iw.calls += 1.0;
                    iw.decoded += n as f64 * share;
                    iw.gathered += selected;
                }
            }
            let p = per_slab.entry(b.slab).or_insert_with(|| SlabPlan {
                slab: b.slab,
                subchunks: 0,
                selected: 0.0,
                index: Work::default(),
                scan: Work::default(),
                index_seconds: 0.0,
                scan_seconds: 0.0,
                choice: Method::Index,
            });
            p.subchunks += 1;
            p.selected += selected;
            p.index.add(&iw);
            p.scan.add(&sw);
        }
        let slabs = per_slab
            .into_values()
            .map(|mut p| {
                p.index_seconds = self.model.seconds(Method::Index, &p.index);
                p.scan_seconds = self.model.seconds(Method::Scan, &p.scan);
                p.choice = if p.scan_seconds < p.index_seconds { Method::Scan } else { Method::Index };
                p
            })
            .collect();
        Ok(QueryPlan { slabs, forced: None })
    }
}

fn count_comparisons(pred: &Predicate) -> usize {
    match pred {
        Predicate::Cmp { .. } => 1,
        Predicate::And { args } | Predicate::Or { args } => args.iter().map(count_comparisons).sum(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boundary_fraction_interpolates() {
        assert_eq!(boundary_fraction(CmpOp::Gt, 0.0, 10.0, 7.5), 0.25);
        assert_eq!(boundary_fraction(CmpOp::Lt, 0.0, 10.0, 7.5), 0.75);
        assert_eq!(boundary_fraction(CmpOp::Gt, 0.0, 10.0, 20.0), 0.0);
    }
}
