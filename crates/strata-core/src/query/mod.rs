//! Value queries: where does a constraint on one or more variables hold inside a region,
//! and what are the values there.
//!
//! A query is evaluated sub-chunk by sub-chunk of the first variable it names (the
//! *driver*). For each sub-chunk and each constraint the index classifies every segment —
//! a bin with level V, the whole sub-chunk without it — by its count, minimum and maximum as
//! *full* (every element satisfies it: its positions come from the index alone), *empty*
//! (skipped) or *boundary* (its values are read and tested). Results of several
//! constraints combine as Roaring bitmaps (AND, OR).
//!
//! Selection is always exact: boundary values are read at full precision. Only the values
//! a query returns are read at a reduced precision level.

mod dense_scan;
mod evaluate;
mod gather;
mod order;
pub mod pieces;
mod predicate;
#[cfg(test)]
mod tests;

use crate::error::{Error, Result};
use crate::fastdiv::FastDiv;
use crate::grid::AxisBlock;
use crate::manifest::Variable;
use crate::mask::Mask;
use crate::points::picked;
use crate::reader::{DimSelection, RunReads, StoreReader, SubchunkId};
use dense_scan::dense_scan_fits;
use evaluate::*;
use order::*;
pub(crate) use predicate::Coverage;
pub use predicate::{CmpOp, DenseValues, Predicate};
use rayon::prelude::*;
use roaring::RoaringBitmap;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

/// How a selection is computed. `Index` classifies segments from the index and reads only
/// boundary ones; `Scan` reads every sub-chunk of the constrained variables in the region
/// and tests each element in memory. Both give the same result; their costs differ (see
/// [`crate::planner`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Method {
    Index,
    Scan,
}

impl Method {
    pub fn name(self) -> &'static str {
        match self {
            Method::Index => "index",
            Method::Scan => "scan",
        }
    }
}

/// A points query as the planner prices it and the executor runs it: where the predicate
/// holds inside the region (and the mask, an area over the region's grid, when given), the
/// values of `outputs` there at precision `level` (None: exact).
#[derive(Debug, Clone, Copy)]
pub struct Scan<'a> {
    pub predicate: &'a Predicate,
    pub region: &'a [DimSelection],
    pub mask: Option<&'a Mask>,
    pub outputs: &'a [&'a str],
    pub level: Option<usize>,
}

/// Runs value queries on one version of a store: selections (counts, positions) and
/// points, each slab by the method it is given. Which method is the planner's decision
/// ([`crate::planner::Planner`]); a [`crate::session::Session`] plans, runs pieces here and
/// learns from their times.
#[derive(Debug, Clone, Copy)]
pub struct Executor<'r> {
    reader: &'r StoreReader,
    /// The run whose reads these are, which counts them as its own (EXPLAIN's actuals).
    counted: Option<&'r RunReads>,
}

impl<'r> Executor<'r> {
    pub fn new(reader: &'r StoreReader) -> Self {
        Executor { reader, counted: None }
    }

    /// An executor whose reads are also counted in `counted` (a query run's: see
    /// [`crate::session::QueryRun::executor`]).
    pub(crate) fn counting(reader: &'r StoreReader, counted: &'r RunReads) -> Self {
        Executor { reader, counted: Some(counted) }
    }

    /// Reads `sel` of `name` at `level` into `out`, counted as the run's reads.
    fn read(&self, name: &str, sel: &[DimSelection], level: Option<usize>, out: &mut [u8]) -> Result<()> {
        self.reader.read_counted(name, sel, level, out, self.counted)
    }
}

/// What a query did: the evidence that it read only what it needed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueryStats {
    /// Sub-chunks of the driver the region touches.
    pub subchunks: u64,
    /// Segments (bins, or whole sub-chunks without V) answered from the index alone.
    pub full: u64,
    /// Segments skipped: no element can satisfy the constraint.
    pub empty: u64,
    /// Segments whose values were read and tested.
    pub boundary: u64,
    /// Sub-chunks read whole and tested element by element (method `Scan`).
    pub scanned: u64,
}

impl QueryStats {
    /// Adds what another part of the same query did.
    pub fn add(&mut self, other: &QueryStats) {
        self.subchunks += other.subchunks;
        self.full += other.full;
        self.empty += other.empty;
        self.boundary += other.boundary;
        self.scanned += other.scanned;
    }
}

#[derive(Default)]
struct Counters {
    subchunks: AtomicU64,
    full: AtomicU64,
    empty: AtomicU64,
    boundary: AtomicU64,
    scanned: AtomicU64,
}

impl Counters {
    /// How `x op value` covers a summary (see [`CmpOp::coverage`]), counted as an empty or
    /// a full segment when it is one.
    fn coverage(&self, op: CmpOp, count: u64, min: f64, max: f64, all_valid: bool, value: f64) -> Coverage {
        let c = op.coverage(count, min, max, all_valid, value);
        match c {
            Coverage::Empty => self.empty.fetch_add(1, Ordering::Relaxed),
            Coverage::Full => self.full.fetch_add(1, Ordering::Relaxed),
            Coverage::Boundary => 0,
        };
        c
    }

    fn into_stats(self) -> QueryStats {
        QueryStats {
            subchunks: self.subchunks.into_inner(),
            full: self.full.into_inner(),
            empty: self.empty.into_inner(),
            boundary: self.boundary.into_inner(),
            scanned: self.scanned.into_inner(),
        }
    }
}

/// One sub-chunk of the driver inside the region.
struct QueryBox {
    slab: usize,
    id: SubchunkId,
    /// Global coordinates of the sub-chunk's first element, and its lengths.
    start: Vec<u64>,
    len: Vec<u64>,
    /// Selected elements of the sub-chunk (local row-major offsets); None when all are.
    region: Option<RoaringBitmap>,
    /// The same as a bitset (see [`crate::bitset::bitmap_of`]), for lookups by position.
    region_bits: Option<Vec<u64>>,
}

impl QueryBox {
    /// The region, as a bitmap and as bits (None: the whole box).
    fn region(&self) -> Option<(&RoaringBitmap, RegionBits<'_>)> {
        self.region.as_ref().zip(self.region_bits.as_deref().map(RegionBits))
    }

    /// The whole box as a selection.
    fn selection(&self) -> Vec<DimSelection> {
        self.start.iter().zip(&self.len).map(|(&s, &l)| DimSelection { start: s, stop: s + l, step: 1 }).collect()
    }
}

/// The result of a selection: row-major flat indices into the variables' full shape.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selection {
    pub shape: Vec<u64>,
    /// Ascending.
    pub flat: Vec<u64>,
}

impl Selection {
    /// The selected elements' coordinates, one vector per dimension (what `np.nonzero`
    /// gives). Divisions by the trailing extents use a precomputed reciprocal when the
    /// indices fit in 32 bits (Lemire's fastdiv); the work is split across threads.
    pub fn coordinates(&self) -> Vec<Vec<i64>> {
        let nd = self.shape.len();
        let mut out: Vec<Vec<i64>> = (0..nd).map(|_| vec![0i64; self.flat.len()]).collect();
        if nd == 0 || self.flat.is_empty() {
            return out;
        }
        let small = self.shape.iter().product::<u64>() <= u64::from(u32::MAX);
        let divs: Vec<FastDiv> = self.shape.iter().map(|&d| FastDiv::new(d, small)).collect();
        const PART: usize = 1 << 16;
        let mut parts: Vec<Vec<&mut [i64]>> = (0..self.flat.len().div_ceil(PART)).map(|_| Vec::new()).collect();
        for col in out.iter_mut() {
            for (k, piece) in col.chunks_mut(PART).enumerate() {
                parts[k].push(piece);
            }
        }
        parts.into_par_iter().enumerate().for_each(|(k, mut cols)| {
            let flat = &self.flat[k * PART..(k * PART + PART).min(self.flat.len())];
            for (i, &f) in flat.iter().enumerate() {
                let mut rest = f;
                for d in (1..nd).rev() {
                    let q = divs[d].quotient(rest);
                    cols[d][i] = (rest - q * divs[d].d) as i64;
                    rest = q;
                }
                cols[0][i] = rest as i64;
            }
        });
        out
    }
}

/// Elements where a constraint holds, with the values of the returned variables there.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Points {
    /// Row-major flat indices, ascending.
    pub flat: Vec<u64>,
    /// One column per returned variable: its elements' little-endian bytes, in `flat` order.
    pub columns: Vec<Vec<u8>>,
}

/// Which elements of a box satisfy a constraint, and the raw bytes of each constrained
/// variable read to find out.
type ScanTest<'p> = (Vec<bool>, HashMap<&'p str, Vec<u8>>);

/// One box's share of a [`Points`] result.
struct BoxPoints {
    flat: Vec<u64>,
    /// Values read by a scan; None when they are gathered afterwards.
    columns: Option<Vec<Vec<u8>>>,
}

/// The local positions a sub-chunk's selection picks, as a bitset (None: all of them).
/// A bitset made a bitmap at once: inserting each row's range into the bitmap reallocated
/// its containers (half of a query whose box cuts sub-chunks across rows).
fn local_region(blocks: &[AxisBlock]) -> Option<Vec<u64>> {
    if blocks.iter().all(|b| b.first == 0 && b.count == b.len && b.step == 1) {
        return None;
    }
    let Some((last, outer)) = blocks.split_last() else {
        return Some(vec![1]);
    };
    let mut strides = vec![1u64; blocks.len()];
    for d in (0..outer.len()).rev() {
        strides[d] = strides[d + 1] * blocks[d + 1].len;
    }
    let len = strides[0] * blocks[0].len;
    let mut words = vec![0u64; (len as usize).div_ceil(64)];
    let mut idx = vec![0u64; outer.len()];
    for _ in 0..outer.iter().map(|b| b.count).product::<u64>() {
        let row: u64 =
            outer.iter().zip(&idx).zip(&strides).map(|((b, &i), &s)| (b.first + i * b.step) * s).sum::<u64>()
                + last.first;
        if last.step == 1 {
            crate::bitset::set_bits(&mut words, row as usize, (row + last.count) as usize);
        } else {
            for i in 0..last.count {
                let at = (row + i * last.step) as usize;
                words[at / 64] |= 1 << (at % 64);
            }
        }
        for d in (0..outer.len()).rev() {
            idx[d] += 1;
            if idx[d] < outer[d].count {
                break;
            }
            idx[d] = 0;
        }
    }
    Some(words)
}

impl<'r> Executor<'r> {
    /// The variables `pred` compares, the first being the driver; an error unless they are
    /// numeric and all on the driver's dimensions.
    pub(crate) fn query_vars(&self, pred: &Predicate) -> Result<Vec<(usize, &'r Variable)>> {
        let mut names = Vec::new();
        pred.variables(&mut names);
        let vars = names.iter().map(|n| self.reader.manifest().variable(n)).collect::<Result<Vec<_>>>()?;
        let Some((_, driver)) = vars.first() else {
            return Err(Error::InvalidArgument("a value constraint needs at least one comparison".into()));
        };
        for (_, v) in &vars {
            if v.chunking.is_none() {
                return Err(Error::InvalidArgument(format!(
                    "'{}' is a string variable: it has no values to compare",
                    v.name
                )));
            }
            if v.dims != driver.dims {
                return Err(Error::InvalidArgument(format!(
                    "a constraint combines only variables on the same dimensions: '{}' has {:?}, '{}' has {:?}",
                    driver.name, driver.dims, v.name, v.dims
                )));
            }
        }
        if let Predicate::And { args } | Predicate::Or { args } = pred {
            if args.is_empty() {
                return Err(Error::InvalidArgument("AND/OR need at least one argument".into()));
            }
        }
        Ok(vars)
    }

    /// The driver's sub-chunks that the region touches, each with the elements it selects
    /// (restricted to `mask`; sub-chunks with none are left out).
    fn query_boxes(&self, var_idx: usize, sel: &[DimSelection], mask: Option<&Mask>) -> Vec<QueryBox> {
        self.reader
            .subchunks_in(var_idx, sel)
            .into_iter()
            .map(|sc| {
                let bits = match mask {
                    Some(m) => m.restrict(&sc.start, &sc.blocks),
                    None => local_region(&sc.blocks),
                };
                QueryBox {
                    slab: sc.slab,
                    id: sc.id,
                    region: bits.as_deref().map(crate::bitset::bitmap_of),
                    region_bits: bits,
                    start: sc.start,
                    len: sc.blocks.iter().map(|b| b.len).collect(),
                }
            })
            .filter(|b| b.region.as_ref().is_none_or(|r| !r.is_empty()))
            .collect()
    }

    /// Where `pred` holds inside the region `sel`: the flat indices, ascending. With
    /// `count_only` the indices are not collected (`flat` stays empty) and only the count
    /// is returned.
    pub fn select(
        &self,
        pred: &Predicate,
        sel: &[DimSelection],
        count_only: bool,
    ) -> Result<(Selection, u64, QueryStats)> {
        self.select_with(pred, sel, None, count_only, Method::Index)
    }

    /// [`select`](Self::select) by a given method, inside `mask` too when given.
    pub fn select_with(
        &self,
        pred: &Predicate,
        sel: &[DimSelection],
        mask: Option<&Mask>,
        count_only: bool,
        method: Method,
    ) -> Result<(Selection, u64, QueryStats)> {
        let vars = self.query_vars(pred)?;
        let (driver_idx, driver) = vars[0];
        self.reader.check_selection(&driver.name, sel)?;
        let shape = self.reader.manifest().shape(driver);
        if let Some(m) = mask {
            m.check(&shape)?;
        }
        let boxes = self.query_boxes(driver_idx, sel, mask);
        let counters = Counters::default();
        let per_box: Vec<(u64, Vec<u64>)> = boxes
            .par_iter()
            .map(|b| {
                counters.subchunks.fetch_add(1, Ordering::Relaxed);
                if let (Method::Index, Predicate::Cmp { var, op, value }) = (method, pred) {
                    // One comparison: counted, or positions listed, without building bitmaps
                    // (a box's region, from strides or an area's mask, is looked up).
                    let n = b.len.iter().product::<u64>();
                    let (region, bits) = (b.region.as_ref(), b.region());
                    if count_only && region.is_none() {
                        if let Some(count) = self.count_whole_box(var, *op, *value, b, &counters)? {
                            return Ok((count, vec![]));
                        }
                    }
                    if count_only {
                        let count = self.with_verdicts(var, *op, *value, b, region, &counters, |v| v.count(n, bits))?;
                        return Ok((count, vec![]));
                    }
                    let local =
                        self.with_verdicts(var, *op, *value, b, region, &counters, |v| v.unordered_positions(n, bits))?;
                    return Ok((local.len() as u64, flat_of(b, &shape, local.into_iter())));
                }
                let hits = match method {
                    Method::Index => self.eval(pred, b, b.region.as_ref(), &counters)?,
                    Method::Scan => self.scan_box(pred, b, &counters)?,
                };
                let hits = match &b.region {
                    Some(r) => hits & r,
                    None => hits,
                };
                let n = hits.len();
                if count_only {
                    return Ok((n, vec![]));
                }
                Ok((n, flat_of(b, &shape, hits.iter())))
            })
            .collect::<Result<_>>()?;
        let count = per_box.iter().map(|(n, _)| n).sum();
        let bands = boxes.iter().zip(per_box).map(|(b, (_, f))| (b.start.as_slice(), f));
        let flat = sorted_by_bands(bands, &shape);
        let stats = counters.into_stats();
        Ok((Selection { shape, flat }, count, stats))
    }

    /// Where the scan's predicate holds inside its region, and the values of its outputs
    /// there at its precision level, each slab answered by the method `method_for(slab
    /// position)` gives it: with the index, boundary segments are tested and the returned
    /// values gathered by position; with a scan, every sub-chunk of the variables involved is
    /// read whole and filtered.
    pub fn points(&self, scan: &Scan, method_for: &(dyn Fn(usize) -> Method + Sync)) -> Result<(Points, QueryStats)> {
        let Scan { predicate: pred, region: sel, mask, outputs, level } = *scan;
        let vars = self.query_vars(pred)?;
        let (driver_idx, driver) = vars[0];
        self.reader.check_selection(&driver.name, sel)?;
        if level == Some(0) {
            return Err(Error::InvalidArgument("precision level must be at least 1".into()));
        }
        let mut out_vars = Vec::with_capacity(outputs.len());
        for name in outputs {
            let (_, v) = self.reader.manifest().variable(name)?;
            if v.chunking.is_none() || v.dims != driver.dims {
                return Err(Error::InvalidArgument(format!(
                    "'{name}' cannot be returned with '{}': it is not a numeric variable on {:?}",
                    driver.name, driver.dims
                )));
            }
            out_vars.push(v);
        }
        let shape = self.reader.manifest().shape(driver);
        if let Some(m) = mask {
            m.check(&shape)?;
        }
        let boxes = self.query_boxes(driver_idx, sel, mask);
        let counters = Counters::default();
        if mask.is_none() && boxes.iter().all(|b| method_for(b.slab) == Method::Scan) && dense_scan_fits(sel) {
            counters.subchunks.fetch_add(boxes.len() as u64, Ordering::Relaxed);
            counters.scanned.fetch_add(boxes.len() as u64, Ordering::Relaxed);
            let points = self.scan_points_dense(pred, sel, &shape, outputs, level)?;
            return Ok((points, counters.into_stats()));
        }
        let parts: Vec<BoxPoints> = boxes
            .par_iter()
            .map(|b| {
                counters.subchunks.fetch_add(1, Ordering::Relaxed);
                match method_for(b.slab) {
                    Method::Index => {
                        let hits = self.eval(pred, b, b.region.as_ref(), &counters)?;
                        let hits = match &b.region {
                            Some(r) => hits & r,
                            None => hits,
                        };
                        // Returned variables chunked like the driver are picked out of the
                        // same sub-chunk here; others are gathered by flat index below.
                        let columns = if out_vars.iter().all(|v| v.chunking == driver.chunking) {
                            let cols = outputs
                                .iter()
                                .map(|name| self.gather_box(name, b, &hits, pred, level))
                                .collect::<Result<Vec<_>>>()?;
                            Some(cols)
                        } else {
                            None
                        };
                        Ok(BoxPoints { flat: flat_of(b, &shape, hits.iter()), columns })
                    }
                    Method::Scan => self.scan_points(pred, b, &shape, outputs, level, &counters),
                }
            })
            .collect::<Result<_>>()?;
        // Values of the index boxes, gathered in one pass per variable.
        let gathered_flat: Vec<u64> =
            parts.iter().filter(|p| p.columns.is_none()).flat_map(|p| p.flat.iter().copied()).collect();
        let mut gathered = Vec::with_capacity(outputs.len());
        for (name, v) in outputs.iter().zip(&out_vars) {
            let mut buf = vec![0u8; gathered_flat.len() * v.dtype.size()];
            self.gather(name, &gathered_flat, level, &mut buf)?;
            gathered.push(buf);
        }
        // Merge in flat order: (flat index, part, row in the part's columns), u32::MAX as
        // the part for values gathered above. Each part is ascending, so each band of
        // boxes is merged by a counting sort on rows.
        let mut g = 0u32;
        let tagged = boxes.iter().zip(&parts).enumerate().map(|(i, (b, p))| {
            let items: Vec<(u64, u32, u32)> = if p.columns.is_none() {
                let items = p.flat.iter().zip(g..).map(|(&f, k)| (f, u32::MAX, k)).collect();
                g += p.flat.len() as u32;
                items
            } else {
                p.flat.iter().zip(0u32..).map(|(&f, j)| (f, i as u32, j)).collect()
            };
            (b.start.as_slice(), items)
        });
        let order = sorted_by_bands(tagged, &shape);
        let mut columns = Vec::with_capacity(outputs.len());
        for (k, v) in out_vars.iter().enumerate() {
            let source = |part: u32| match part {
                u32::MAX => gathered[k].as_slice(),
                p => parts[p as usize].columns.as_ref().map_or(gathered[k].as_slice(), |c| c[k].as_slice()),
            };
            columns.push(picked(v.dtype.size(), order.iter().map(|&(_, part, j)| (source(part), j as usize))));
        }
        let stats = counters.into_stats();
        Ok((Points { flat: order.into_iter().map(|o| o.0).collect(), columns }, stats))
    }

    /// One box by a scan: the constrained variables read whole and tested, the returned
    /// ones read whole (at `level`) and filtered.
    fn scan_points(
        &self,
        pred: &Predicate,
        b: &QueryBox,
        shape: &[u64],
        outputs: &[&str],
        level: Option<usize>,
        counters: &Counters,
    ) -> Result<BoxPoints> {
        let (mask, raws) = self.scan_test(pred, b, counters)?;
        let local: Vec<u32> = match &b.region {
            Some(r) => r.iter().filter(|&p| mask[p as usize]).collect(),
            None => kept_positions(None, &mask),
        };
        let cols = self.scanned_columns(outputs, &b.selection(), mask.len(), level, &raws, &local)?;
        Ok(BoxPoints { flat: flat_of(b, shape, local.into_iter()), columns: Some(cols) })
    }

    /// The values of `outputs` at the positions `local` of the `n` elements of `sel` a
    /// scan tested, at `level`: taken from the bytes the test read (`raws`) when they are
    /// at full precision, read otherwise.
    fn scanned_columns(
        &self,
        outputs: &[&str],
        sel: &[DimSelection],
        n: usize,
        level: Option<usize>,
        raws: &HashMap<&str, Vec<u8>>,
        local: &[u32],
    ) -> Result<Vec<Vec<u8>>> {
        let mut cols = Vec::with_capacity(outputs.len());
        for name in outputs {
            let (_, var) = self.reader.manifest().variable(name)?;
            let es = var.dtype.size();
            let read;
            let raw = match raws.get(name) {
                Some(r) if level.is_none() => r,
                _ => {
                    let mut buf = crate::large::zeroed(n * es);
                    self.read(name, sel, level, &mut buf)?;
                    read = buf;
                    &read
                }
            };
            cols.push(picked(es, local.iter().map(|&p| (raw.as_slice(), p as usize))));
        }
        Ok(cols)
    }

    /// Reads the box of every constrained variable whole (full precision) and tests each
    /// element: which satisfy `pred`, and the raw bytes read, by variable.
    fn scan_test<'p>(&self, pred: &'p Predicate, b: &QueryBox, counters: &Counters) -> Result<ScanTest<'p>> {
        counters.scanned.fetch_add(1, Ordering::Relaxed);
        self.test_region(pred, &b.selection(), b.len.iter().product::<u64>() as usize)
    }

    /// Reads the `n` elements of `sel` of every constrained variable (full precision) and
    /// tests each, in row-major order.
    fn test_region<'p>(&self, pred: &'p Predicate, sel: &[DimSelection], n: usize) -> Result<ScanTest<'p>> {
        let mut raws = HashMap::new();
        if let Predicate::Cmp { var, op, value } = pred {
            // One comparison: tested on the stored bytes, with no f64 copy.
            let (_, v) = self.reader.manifest().variable(var)?;
            let mut raw = crate::large::zeroed(n * v.dtype.size());
            self.read(var, sel, None, &mut raw)?;
            let mask = op.matches_raw(v.dtype, &raw, *value, &v.missing_values());
            raws.insert(var.as_str(), raw);
            return Ok((mask, raws));
        }
        let mut columns = HashMap::new();
        for name in pred.variable_names() {
            let (_, var) = self.reader.manifest().variable(name)?;
            let mut raw = crate::large::zeroed(n * var.dtype.size());
            self.read(name, sel, None, &mut raw)?;
            columns.insert(name, (var.dtype.to_f64s(&raw), var.missing_values()));
            raws.insert(name, raw);
        }
        Ok((pred.test_dense(&DenseValues { len: n, columns })?, raws))
    }

    /// The local positions of a box where `pred` holds, by a scan.
    fn scan_box(&self, pred: &Predicate, b: &QueryBox, counters: &Counters) -> Result<RoaringBitmap> {
        let (mask, _) = self.scan_test(pred, b, counters)?;
        Ok(RoaringBitmap::from_sorted_iter(kept_positions(None, &mask)).unwrap_or_default())
    }
}
