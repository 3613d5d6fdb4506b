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

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::fastdiv::FastDiv;
use crate::grid::{chunk_grid, ravel, subchunk_grid, unravel, AxisBlock};
use crate::manifest::{Level, Variable};
use crate::mask::Mask;
use crate::reader::{BinEntry, BinRead, DimSelection, StoreReader, SubchunkId};
use crate::segment::SegmentKey;
use rayon::prelude::*;
use roaring::RoaringBitmap;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

/// A comparison of a variable's values with a constant. Invalid elements (NaN and the
/// variable's fill values) satisfy no comparison, `!=` included (SQL's NULL semantics).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum CmpOp {
    #[serde(rename = "<")]
    Lt,
    #[serde(rename = "<=")]
    Le,
    #[serde(rename = ">")]
    Gt,
    #[serde(rename = ">=")]
    Ge,
    #[serde(rename = "==")]
    Eq,
    #[serde(rename = "!=")]
    Ne,
}

/// How much of a segment a comparison selects, judged from its summary alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Coverage {
    Empty,
    Full,
    Boundary,
}

impl CmpOp {
    /// The comparison with its sides swapped: `v op x` is `x op.flipped() v`.
    pub fn flipped(self) -> CmpOp {
        match self {
            CmpOp::Lt => CmpOp::Gt,
            CmpOp::Le => CmpOp::Ge,
            CmpOp::Gt => CmpOp::Lt,
            CmpOp::Ge => CmpOp::Le,
            CmpOp::Eq | CmpOp::Ne => self,
        }
    }

    /// `x op v` for any ordered type (floats, and the microseconds of time coordinates).
    pub fn test<T: PartialOrd>(self, x: T, v: T) -> bool {
        match self {
            CmpOp::Lt => x < v,
            CmpOp::Le => x <= v,
            CmpOp::Gt => x > v,
            CmpOp::Ge => x >= v,
            CmpOp::Eq => x == v,
            CmpOp::Ne => x != v,
        }
    }

    /// Which of `values` satisfy `x op v`, NaN and the `missing` values never. One loop per
    /// operator, so each compiles to a vectorized comparison (boundary segments of every
    /// value query go through here).
    pub fn matches(self, values: &[f64], v: f64, missing: &[f64]) -> Vec<bool> {
        self.matches_each(values.iter().copied(), v, missing)
    }

    /// [`matches`](Self::matches) on little-endian elements of `dtype`, floats compared as
    /// they are read (no f64 copy of the segment).
    pub fn matches_raw(self, dtype: DType, bytes: &[u8], v: f64, missing: &[f64]) -> Vec<bool> {
        fn read<const N: usize>(c: &[u8]) -> [u8; N] {
            let mut a = [0u8; N];
            a.copy_from_slice(c);
            a
        }
        match dtype {
            DType::F32 => {
                self.matches_each(bytes.chunks_exact(4).map(|c| f32::from_le_bytes(read(c)) as f64), v, missing)
            }
            DType::F64 => self.matches_each(bytes.chunks_exact(8).map(|c| f64::from_le_bytes(read(c))), v, missing),
            _ => self.matches(&dtype.to_f64s(bytes), v, missing),
        }
    }

    fn matches_each<I: Iterator<Item = f64> + Clone>(self, values: I, v: f64, missing: &[f64]) -> Vec<bool> {
        let mut keep: Vec<bool> = match self {
            CmpOp::Lt => values.clone().map(|x| x < v).collect(),
            CmpOp::Le => values.clone().map(|x| x <= v).collect(),
            CmpOp::Gt => values.clone().map(|x| x > v).collect(),
            CmpOp::Ge => values.clone().map(|x| x >= v).collect(),
            CmpOp::Eq => values.clone().map(|x| x == v).collect(),
            // NaN fails every other comparison by itself.
            CmpOp::Ne => values.clone().map(|x| x != v && !x.is_nan()).collect(),
        };
        // Missing values need a second look only when one of them would pass.
        if missing.iter().any(|&m| self.test(m, v)) {
            for (k, x) in keep.iter_mut().zip(values) {
                if missing.contains(&x) {
                    *k = false;
                }
            }
        }
        keep
    }

    /// From the valid elements' minimum and maximum; `all_valid` when the segment has no
    /// invalid element (otherwise it is never full).
    pub(crate) fn coverage(self, count: u64, min: f64, max: f64, all_valid: bool, v: f64) -> Coverage {
        if count == 0 {
            return Coverage::Empty;
        }
        let (full, empty) = match self {
            CmpOp::Lt => (max < v, min >= v),
            CmpOp::Le => (max <= v, min > v),
            CmpOp::Gt => (min > v, max <= v),
            CmpOp::Ge => (min >= v, max < v),
            CmpOp::Eq => (min == v && max == v, v < min || v > max),
            CmpOp::Ne => (v < min || v > max, min == v && max == v),
        };
        if empty {
            Coverage::Empty
        } else if full && all_valid {
            Coverage::Full
        } else {
            Coverage::Boundary
        }
    }
}

/// A value constraint: comparisons combined with AND and OR.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum Predicate {
    Cmp {
        var: String,
        op: CmpOp,
        #[serde(deserialize_with = "number_or_infinity")]
        value: f64,
    },
    And {
        args: Vec<Predicate>,
    },
    Or {
        args: Vec<Predicate>,
    },
}

/// JSON has no infinities: they come as the strings "inf" and "-inf".
fn number_or_infinity<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<f64, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Repr {
        Num(f64),
        Text(String),
    }
    match Repr::deserialize(d)? {
        Repr::Num(x) => Ok(x),
        Repr::Text(t) => match t.to_ascii_lowercase().as_str() {
            "inf" | "+inf" | "infinity" => Ok(f64::INFINITY),
            "-inf" | "-infinity" => Ok(f64::NEG_INFINITY),
            _ => Err(serde::de::Error::custom(format!("'{t}' is not a number to compare with"))),
        },
    }
}

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

/// Decoded values of the constrained variables over one box, as f64, with each variable's
/// missing values (fill values; NaN is always invalid).
#[derive(Debug)]
pub struct DenseValues<'a> {
    pub len: usize,
    pub columns: HashMap<&'a str, (Vec<f64>, Vec<f64>)>,
}

impl Predicate {
    /// The variables the constraint names, first-named first.
    pub fn variable_names(&self) -> Vec<&str> {
        let mut out = Vec::new();
        self.variables(&mut out);
        out
    }

    /// Which elements of a dense box satisfy the constraint.
    pub fn test_dense(&self, values: &DenseValues<'_>) -> Result<Vec<bool>> {
        match self {
            Predicate::Cmp { var, op, value } => {
                let Some((xs, missing)) = values.columns.get(var.as_str()) else {
                    return Err(Error::InvalidArgument(format!("no values of '{var}' to test")));
                };
                Ok(op.matches(xs, *value, missing))
            }
            Predicate::And { args } => {
                let mut acc = vec![true; values.len];
                for a in args {
                    for (x, y) in acc.iter_mut().zip(a.test_dense(values)?) {
                        *x &= y;
                    }
                }
                Ok(acc)
            }
            Predicate::Or { args } => {
                let mut acc = vec![false; values.len];
                for a in args {
                    for (x, y) in acc.iter_mut().zip(a.test_dense(values)?) {
                        *x |= y;
                    }
                }
                Ok(acc)
            }
        }
    }

    fn variables<'a>(&'a self, out: &mut Vec<&'a str>) {
        match self {
            Predicate::Cmp { var, .. } => {
                if !out.contains(&var.as_str()) {
                    out.push(var)
                }
            }
            Predicate::And { args } | Predicate::Or { args } => args.iter().for_each(|a| a.variables(out)),
        }
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

#[derive(Default)]
struct Counters {
    subchunks: AtomicU64,
    full: AtomicU64,
    empty: AtomicU64,
    boundary: AtomicU64,
    scanned: AtomicU64,
}

impl Counters {
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
}

impl QueryBox {
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

/// The union of disjoint-or-not position sets. Run containers are expanded first: the
/// crate inserts into a run container element by element, which dominated query time.
fn union_all<'a>(parts: impl IntoIterator<Item = &'a RoaringBitmap>) -> RoaringBitmap {
    let mut acc = RoaringBitmap::new();
    for p in parts {
        let mut p = p.clone();
        p.remove_run_compression();
        acc |= p;
    }
    acc
}

/// Local row-major offsets of a box -> global flat indices, without per-element
/// allocation: a multiplication by a reciprocal splits a local offset into its row (all
/// axes but the last) and column, and a table gives each row's global offset.
fn flat_of(b: &QueryBox, shape: &[u64], local: impl Iterator<Item = u32>) -> Vec<u64> {
    let nd = b.len.len();
    let mut strides = vec![1u64; nd];
    for d in (0..nd.saturating_sub(1)).rev() {
        strides[d] = strides[d + 1] * shape[d + 1];
    }
    let base: u64 = b.start.iter().zip(&strides).map(|(s, t)| s * t).sum();
    let mut flat = Vec::with_capacity(local.size_hint().0);
    if nd == 0 {
        flat.extend(local.map(|_| base));
        return flat;
    }
    let mut local = local.peekable();
    if local.peek().is_none() {
        return flat;
    }
    let cols = b.len[nd - 1].max(1) as u32;
    let rows: u64 = b.len[..nd - 1].iter().product();
    // Each row's global offset, counting the rows like an odometer (no divisions).
    let mut row_base = Vec::with_capacity(rows as usize);
    let mut coord = vec![0u64; nd - 1];
    let mut f = base;
    for _ in 0..rows {
        row_base.push(f);
        for d in (0..nd - 1).rev() {
            coord[d] += 1;
            f += strides[d];
            if coord[d] < b.len[d] {
                break;
            }
            f -= coord[d] * strides[d];
            coord[d] = 0;
        }
    }
    let div = FastDiv::new(u64::from(cols), true);
    for p in local {
        let row = div.quotient(u64::from(p)) as u32;
        let col = p - row * cols;
        // A position past the box comes only from a corrupt index (bin_reads rejects those
        // it reads); it falls on the last row rather than panicking.
        let at = row_base.get(row as usize).or(row_base.last()).copied().unwrap_or(base);
        flat.push(at + col as u64);
    }
    flat
}

/// An element of a result being put in flat order: its flat index, with or without a
/// payload (where its values are).
trait Flat: Copy + Send {
    fn flat(&self) -> u64;
}

impl Flat for u64 {
    fn flat(&self) -> u64 {
        *self
    }
}

/// (flat index, part, row in the part's columns) of a points result.
impl Flat for (u64, u32, u32) {
    fn flat(&self) -> u64 {
        self.0
    }
}

/// Joins per-box elements in ascending flat order. Boxes starting at the same index along
/// the first axis form a band (sub-chunk rows partition that axis, so bands never
/// interleave): each band is ordered on its own, bands in parallel, and joined in order.
/// `shape` is the grid's; `parts` are (box start, elements).
fn sorted_by_bands<'s, T: Flat>(parts: impl Iterator<Item = (&'s [u64], Vec<T>)>, shape: &[u64]) -> Vec<T> {
    let mut bands: std::collections::BTreeMap<u64, Vec<(u64, Vec<T>)>> = std::collections::BTreeMap::new();
    for (start, items) in parts {
        if !items.is_empty() {
            let first = start.first().copied().unwrap_or(0);
            bands.entry(first).or_default().push((start.last().copied().unwrap_or(0), items));
        }
    }
    // Flat indices of a grid of fewer than 2^32 elements divide by multiplication.
    let small = shape.iter().product::<u64>() <= u64::from(u32::MAX);
    let div = FastDiv::new(shape.last().copied().unwrap_or(1), small);
    let sorted: Vec<Vec<T>> =
        bands.into_values().collect::<Vec<_>>().into_par_iter().map(|parts| sort_band(parts, div)).collect();
    sorted.concat()
}

/// One band's elements in ascending flat order, by a counting sort on their rows (all axes
/// but the last): a band's boxes cover a few rows each, so this is linear where a
/// comparison sort was 13% of a selective query. Taking the boxes by their start along the
/// last axis, the boxes sharing a row land there in order, so rows need sorting only when
/// a box's own elements were not ascending. `parts` are (start along the last axis,
/// elements).
fn sort_band<T: Flat>(mut parts: Vec<(u64, Vec<T>)>, div: FastDiv) -> Vec<T> {
    parts.sort_by_key(|p| p.0);
    let n: usize = parts.iter().map(|p| p.1.len()).sum();
    if n == 0 {
        return Vec::new();
    }
    let ascending = parts.iter().all(|p| p.1.is_sorted_by_key(Flat::flat));
    let (mut lo, mut hi) = (u64::MAX, 0);
    for p in &parts {
        let (a, b) = match (ascending, p.1.first(), p.1.last()) {
            (true, Some(a), Some(b)) => (a.flat(), b.flat()),
            _ => (p.1.iter().map(Flat::flat).min().unwrap_or(u64::MAX), p.1.iter().map(Flat::flat).max().unwrap_or(0)),
        };
        lo = lo.min(a);
        hi = hi.max(b);
    }
    let first_row = div.quotient(lo);
    let rows = (div.quotient(hi) - first_row + 1) as usize;
    if parts.len() == 1 || rows > 4 * n + 4096 {
        // One box, or rows too sparse for a histogram: a comparison sort.
        let mut all: Vec<T> = parts.into_iter().flat_map(|p| p.1).collect();
        if !(ascending && all.is_sorted_by_key(Flat::flat)) {
            if all.len() > 1 << 16 {
                all.par_sort_unstable_by_key(Flat::flat);
            } else {
                all.sort_unstable_by_key(Flat::flat);
            }
        }
        return all;
    }
    let mut ends = vec![0usize; rows + 1];
    for p in &parts {
        for e in &p.1 {
            ends[(div.quotient(e.flat()) - first_row) as usize + 1] += 1;
        }
    }
    for r in 0..rows {
        ends[r + 1] += ends[r];
    }
    let mut next = ends.clone();
    let mut out: Vec<T> = Vec::with_capacity(n);
    let slots = out.spare_capacity_mut();
    for p in &parts {
        for e in &p.1 {
            let r = (div.quotient(e.flat()) - first_row) as usize;
            slots[next[r]].write(*e);
            next[r] += 1;
        }
    }
    // SAFETY: the row counts sum to n and each row's slots were written once each (`next`
    // ends at the next row's start), so all n slots are initialized.
    unsafe { out.set_len(n) };
    if !ascending {
        for r in 0..rows {
            out[ends[r]..ends[r + 1]].sort_unstable_by_key(Flat::flat);
        }
    }
    out
}

/// A column of `es`-byte values, the i-th copied from element j of the slice `at` gives as
/// its i-th (slice, j). The usual widths make each copy a single move, not a call to memcpy.
fn picked<'a>(es: usize, at: impl ExactSizeIterator<Item = (&'a [u8], usize)>) -> Vec<u8> {
    fn fixed<'a, const W: usize>(at: impl ExactSizeIterator<Item = (&'a [u8], usize)>) -> Vec<u8> {
        let mut col = vec![0u8; at.len() * W];
        for (dst, (src, j)) in col.chunks_exact_mut(W).zip(at) {
            dst.copy_from_slice(&src[j * W..(j + 1) * W]);
        }
        col
    }
    match es {
        1 => fixed::<1>(at),
        2 => fixed::<2>(at),
        4 => fixed::<4>(at),
        8 => fixed::<8>(at),
        _ => {
            let mut col = Vec::with_capacity(at.len() * es);
            for (src, j) in at {
                col.extend_from_slice(&src[j * es..(j + 1) * es]);
            }
            col
        }
    }
}

/// The positions of the elements kept: `p` lists them in element order (a bin's positions),
/// or None when element `i` is at position `i`. Bins are walked by runs of consecutive
/// positions (cheaper than decoding each position, even for the short runs of noisy
/// fields), and the kept ones written without branching.
fn kept_positions(p: Option<&RoaringBitmap>, keep: &[bool]) -> Vec<u32> {
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
struct Verdicts<'i> {
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
    fn unordered_positions(self, n: u64, region: Option<&RoaringBitmap>) -> Vec<u32> {
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
    fn count(self, n: u64, region: Option<&RoaringBitmap>) -> u64 {
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

fn local_region(blocks: &[AxisBlock]) -> Option<RoaringBitmap> {
    if blocks.iter().all(|b| b.first == 0 && b.count == b.len && b.step == 1) {
        return None;
    }
    let lens: Vec<u64> = blocks.iter().map(|b| b.len).collect();
    let counts: Vec<u64> = blocks.iter().map(|b| b.count).collect();
    let (outer, last) = counts.split_at(counts.len().saturating_sub(1));
    let last = last.first().copied().unwrap_or(1);
    let lb = blocks.last();
    let mut bitmap = RoaringBitmap::new();
    for o in 0..outer.iter().product::<u64>() {
        let idx = unravel(o, outer);
        let mut coords: Vec<u64> = idx.iter().zip(blocks).map(|(&i, b)| b.first + i * b.step).collect();
        match lb {
            Some(b) if b.step == 1 => {
                coords.push(b.first);
                let lo = ravel(&coords, &lens) as u32;
                bitmap.insert_range(lo..lo + last as u32);
            }
            Some(b) => {
                coords.push(0);
                for i in 0..last {
                    *coords.last_mut().unwrap_or(&mut 0) = b.first + i * b.step;
                    bitmap.insert(ravel(&coords, &lens) as u32);
                }
            }
            None => {
                bitmap.insert(0);
            }
        }
    }
    Some(bitmap)
}

impl StoreReader {
    fn query_vars<'a>(&'a self, pred: &Predicate) -> Result<Vec<(usize, &'a Variable)>> {
        let mut names = Vec::new();
        pred.variables(&mut names);
        let vars = names.iter().map(|n| self.manifest().variable(n)).collect::<Result<Vec<_>>>()?;
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
                    "constraints combine variables on the same dimensions: '{}' has {:?}, '{}' has {:?}",
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
        self.subchunks_in(var_idx, sel)
            .into_iter()
            .map(|sc| QueryBox {
                slab: sc.slab,
                id: sc.id,
                region: match mask {
                    Some(m) => m.restrict(&sc.start, &sc.blocks),
                    None => local_region(&sc.blocks),
                },
                start: sc.start,
                len: sc.blocks.iter().map(|b| b.len).collect(),
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
        self.check_selection(&driver.name, sel)?;
        let shape = self.manifest().shape(driver);
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
                    let region = b.region.as_ref();
                    if count_only {
                        let count =
                            self.with_verdicts(var, *op, *value, b, region, &counters, |v| v.count(n, region))?;
                        return Ok((count, vec![]));
                    }
                    let local = self
                        .with_verdicts(var, *op, *value, b, region, &counters, |v| v.unordered_positions(n, region))?;
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

    /// Where `pred` holds inside `sel`, and the values of `outputs` there at precision
    /// `level`, each slab answered by the method `method_for(slab position)` gives it: with
    /// the index, boundary segments are tested and the returned values gathered by position;
    /// with a scan, every sub-chunk of the variables involved is read whole and filtered.
    pub fn points(
        &self,
        pred: &Predicate,
        sel: &[DimSelection],
        mask: Option<&Mask>,
        outputs: &[&str],
        level: Option<usize>,
        method_for: &(dyn Fn(usize) -> Method + Sync),
    ) -> Result<(Points, QueryStats)> {
        let vars = self.query_vars(pred)?;
        let (driver_idx, driver) = vars[0];
        self.check_selection(&driver.name, sel)?;
        if level == Some(0) {
            return Err(Error::InvalidArgument("precision level must be at least 1".into()));
        }
        let mut out_vars = Vec::with_capacity(outputs.len());
        for name in outputs {
            let (_, v) = self.manifest().variable(name)?;
            if v.chunking.is_none() || v.dims != driver.dims {
                return Err(Error::InvalidArgument(format!(
                    "'{name}' cannot be returned with '{}': it is not a numeric variable on {:?}",
                    driver.name, driver.dims
                )));
            }
            out_vars.push(v);
        }
        let shape = self.manifest().shape(driver);
        if let Some(m) = mask {
            m.check(&shape)?;
        }
        let boxes = self.query_boxes(driver_idx, sel, mask);
        let counters = Counters::default();
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
                                .map(|name| self.gather_box(name, b, &hits, level))
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
        let sel = b.selection();
        let n = mask.len();
        let mut cols = Vec::with_capacity(outputs.len());
        for name in outputs {
            let (_, var) = self.manifest().variable(name)?;
            let es = var.dtype.size();
            let read;
            let raw = match raws.get(name) {
                Some(r) if level.is_none() => r,
                _ => {
                    let mut buf = vec![0u8; n * es];
                    self.read_into_at(name, &sel, level, &mut buf)?;
                    read = buf;
                    &read
                }
            };
            cols.push(picked(es, local.iter().map(|&p| (raw.as_slice(), p as usize))));
        }
        Ok(BoxPoints { flat: flat_of(b, shape, local.into_iter()), columns: Some(cols) })
    }

    /// Reads the box of every constrained variable whole (full precision) and tests each
    /// element: which satisfy `pred`, and the raw bytes read, by variable.
    fn scan_test<'p>(&self, pred: &'p Predicate, b: &QueryBox, counters: &Counters) -> Result<ScanTest<'p>> {
        counters.scanned.fetch_add(1, Ordering::Relaxed);
        let sel = b.selection();
        let n = b.len.iter().product::<u64>() as usize;
        let mut raws = HashMap::new();
        if let Predicate::Cmp { var, op, value } = pred {
            // One comparison: tested on the stored bytes, with no f64 copy.
            let (_, v) = self.manifest().variable(var)?;
            let mut raw = vec![0u8; n * v.dtype.size()];
            self.read_into_at(var, &sel, None, &mut raw)?;
            let mask = op.matches_raw(v.dtype, &raw, *value, &v.missing_values());
            raws.insert(var.as_str(), raw);
            return Ok((mask, raws));
        }
        let mut columns = HashMap::new();
        for name in pred.variable_names() {
            let (_, var) = self.manifest().variable(name)?;
            let mut raw = vec![0u8; n * var.dtype.size()];
            self.read_into_at(name, &sel, None, &mut raw)?;
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

    /// The local positions of a box where `pred` holds. `mask`: only these positions matter
    /// (segments disjoint from it are not read).
    fn eval(
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

    fn eval_cmp(
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
    fn with_verdicts<R>(
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

    /// Fetches and decodes some bins of one sub-chunk into a sub-chunk buffer (elements of
    /// other bins are zero). `groups`: the variable's byte groups, if split; the reads say
    /// how many are read.
    fn decode_reads(
        &self,
        slab: usize,
        index: &crate::reader::SlabIndex,
        id: SubchunkId,
        reads: &[BinRead],
        len: &[u64],
        groups: Option<Vec<usize>>,
    ) -> Result<Vec<u8>> {
        let shape: Vec<usize> = len.iter().map(|&l| l as usize).collect();
        let fetched = self.fetch(reads.iter().flat_map(|r| r.entries.iter().map(move |e| (slab, e))), false)?;
        let k = reads.first().map_or(0, |r| r.entries.len());
        let split = groups.map(|g| (g, k));
        self.decode_subchunk((slab, index, id), reads, &shape, split.as_ref(), &fetched)
    }

    /// The values of `name` at the local positions `hits` of the driver's sub-chunk `b`
    /// (`name` is chunked like the driver), at precision `level`: only the bins holding
    /// them are read.
    fn gather_box(&self, name: &str, b: &QueryBox, hits: &RoaringBitmap, level: Option<usize>) -> Result<Vec<u8>> {
        let (var_idx, var) = self.manifest().variable(name)?;
        let es = var.dtype.size();
        if hits.is_empty() {
            return Ok(Vec::new());
        }
        let groups = crate::precision::byte_groups(&self.manifest().layout, var)?;
        let widths = crate::precision::widths_read(groups.as_deref(), level, es);
        let slab = &self.manifest().slabs[b.slab];
        let index = self.slab_index(slab)?;
        let id = (var_idx as u32, b.id.1, b.id.2);
        let n = b.len.iter().product::<u64>();
        let needed: Vec<u32> = match index.bins_of(id) {
            Some(list) => list.iter().filter(|e| !e.positions.is_disjoint(hits)).map(|e| e.bin).collect(),
            None => vec![0],
        };
        let reads = self.bin_reads(&index, slab, id, n, &widths, &|bin| needed.contains(&bin))?;
        let raw = self.decode_reads(b.slab, &index, id, &reads, &b.len, groups)?;
        let mut col = Vec::with_capacity(hits.len() as usize * es);
        for l in hits {
            let at = l as usize * es;
            let Some(v) = raw.get(at..at + es) else {
                return Err(Error::Corruption(format!("sub-chunk {id:?} of '{name}' is shorter than its index says")));
            };
            col.extend_from_slice(v);
        }
        Ok(col)
    }

    /// The values of `name` at the given flat indices (any order) into `out` (one element
    /// per index, little-endian), at precision `level` (see [`read_into_at`](Self::read_into_at)).
    /// Only the sub-chunks — with level V, only the bins — holding those elements are read.
    pub fn gather(&self, name: &str, flat: &[u64], level: Option<usize>, out: &mut [u8]) -> Result<()> {
        let (var_idx, var) = self.manifest().variable(name)?;
        let Some(chunking) = var.chunking.clone() else {
            return Err(Error::InvalidArgument(format!("'{name}' is a string variable: read it from the manifest")));
        };
        if level == Some(0) {
            return Err(Error::InvalidArgument("precision level must be at least 1".into()));
        }
        let es = var.dtype.size();
        if out.len() != flat.len() * es {
            return Err(Error::InvalidArgument(format!(
                "output buffer has {} bytes, {} needed",
                out.len(),
                flat.len() * es
            )));
        }
        let shape = self.manifest().shape(var);
        let total: u64 = shape.iter().product();
        if let Some(&bad) = flat.iter().find(|&&f| f >= total) {
            return Err(Error::InvalidArgument(format!("index {bad} is outside '{name}' of shape {shape:?}")));
        }
        let groups = crate::precision::byte_groups(&self.manifest().layout, var)?;
        let widths = crate::precision::widths_read(groups.as_deref(), level, es);
        let parts = self.parts_of(var);
        let record = self.manifest().is_record_var(var);
        // Group the wanted elements by sub-chunk: (slab, chunk, sub-chunk) -> (lengths,
        // (local, output) pairs). The loop reuses its buffers: it runs once per element.
        type Wanted = HashMap<(usize, u64, u32), (Vec<u64>, Vec<(u32, usize)>)>;
        let mut wanted: Wanted = HashMap::new();
        let sub_grid = subchunk_grid(&chunking.chunk, &chunking.subchunk);
        let nd = shape.len();
        let (mut coords, mut cc, mut sc, mut len, mut extent) =
            (vec![0; nd], vec![0; nd], vec![0; nd], vec![0; nd], shape.clone());
        let mut grids: HashMap<usize, Vec<u64>> = HashMap::new();
        let mut last: Option<(usize, u64, u64)> = None;
        for (i, &f) in flat.iter().enumerate() {
            let mut rest = f;
            for d in (0..nd).rev() {
                coords[d] = rest % shape[d];
                rest /= shape[d];
            }
            let slab_pos = if record {
                let hit = match last {
                    Some(l @ (_, start, count)) if coords[0] >= start && coords[0] < start + count => l,
                    _ => {
                        let Some(&found) =
                            parts.iter().find(|(_, start, count)| coords[0] >= *start && coords[0] < start + count)
                        else {
                            return Err(Error::Corruption(format!("no slab holds record {} of '{name}'", coords[0])));
                        };
                        last = Some(found);
                        found
                    }
                };
                coords[0] -= hit.1;
                extent[0] = hit.2;
                hit.0
            } else {
                parts.first().map_or(0, |p| p.0)
            };
            let grid = grids.entry(slab_pos).or_insert_with(|| chunk_grid(&extent, &chunking.chunk));
            let (mut local, mut key_chunk, mut key_sub) = (0u64, 0u64, 0u64);
            for d in 0..nd {
                cc[d] = coords[d] / chunking.chunk[d];
                let chunk_lo = cc[d] * chunking.chunk[d];
                let chunk_hi = (chunk_lo + chunking.chunk[d]).min(extent[d]);
                sc[d] = (coords[d] - chunk_lo) / chunking.subchunk[d];
                let lo = chunk_lo + sc[d] * chunking.subchunk[d];
                len[d] = (lo + chunking.subchunk[d]).min(chunk_hi) - lo;
                local = local * len[d] + (coords[d] - lo);
                key_chunk = key_chunk * grid[d] + cc[d];
                key_sub = key_sub * sub_grid[d] + sc[d];
            }
            let key = (slab_pos, key_chunk, key_sub as u32);
            wanted.entry(key).or_insert_with(|| (len.clone(), vec![])).1.push((local as u32, i));
        }
        let out_ptr = crate::reader::SendPtr::new(out.as_mut_ptr());
        let out_len = out.len();
        let jobs: Vec<_> = wanted.into_iter().collect();
        jobs.par_iter().try_for_each(|((slab_pos, chunk, sub), (len, picks))| -> Result<()> {
            let slab = &self.manifest().slabs[*slab_pos];
            let index = self.slab_index(slab)?;
            let id = (var_idx as u32, *chunk, *sub);
            let n = len.iter().product::<u64>();
            let needed: Vec<u32> = match index.bins_of(id) {
                Some(list) => {
                    let mut locals: Vec<u32> = picks.iter().map(|p| p.0).collect();
                    locals.sort_unstable();
                    locals.dedup();
                    let locals = RoaringBitmap::from_sorted_iter(locals).unwrap_or_default();
                    list.iter().filter(|e| !e.positions.is_disjoint(&locals)).map(|e| e.bin).collect()
                }
                None => vec![0],
            };
            let reads = self.bin_reads(&index, slab, id, n, &widths, &|b| needed.contains(&b))?;
            let raw = self.decode_reads(*slab_pos, &index, id, &reads, len, groups.clone())?;
            for &(l, i) in picks {
                let l = l as usize;
                debug_assert!((i + 1) * es <= out_len);
                // SAFETY: every output index appears in exactly one job, and is in bounds.
                unsafe {
                    std::ptr::copy_nonoverlapping(raw[l * es..].as_ptr(), out_ptr.get().add(i * es), es);
                }
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coordinates_unravel_flat_indices() {
        for shape in [vec![5u64, 7, 9], vec![4, 1, 6], vec![3, 1 << 20, 1 << 13], vec![70_000]] {
            let total: u64 = shape.iter().product();
            let flat: Vec<u64> = (0..200_000u64).map(|i| (i * 2_654_435_761) % total).collect();
            let sel = Selection { shape: shape.clone(), flat: flat.clone() };
            let coords = sel.coordinates();
            for (i, &f) in flat.iter().enumerate() {
                let mut rest = f;
                for d in (0..shape.len()).rev() {
                    assert_eq!(coords[d][i] as u64, rest % shape[d], "{shape:?} {f}");
                    rest /= shape[d];
                }
            }
        }
    }

    #[test]
    fn bands_join_in_flat_order() {
        // A 2-D grid of rows of 10: two boxes per band (side by side along the last axis),
        // given out of order.
        let parts: Vec<(Vec<u64>, Vec<u64>)> = vec![
            (vec![4, 0], vec![40, 42, 50]),
            (vec![0, 5], vec![6, 8, 16]),
            (vec![4, 5], vec![45, 47, 55]),
            (vec![0, 0], vec![1, 3, 11]),
        ];
        let got = sorted_by_bands(parts.iter().map(|(s, f)| (s.as_slice(), f.clone())), &[8, 10]);
        assert_eq!(got, vec![1, 3, 6, 8, 11, 16, 40, 42, 45, 47, 50, 55]);
    }

    #[test]
    fn bands_sort_any_tiling_and_unordered_boxes() {
        // A 12x7x9 grid tiled by 4x3x4 boxes (edge boxes shorter), a pseudo-random subset
        // of each box, some boxes' indices reversed (several bins), boxes in any order.
        let shape = [12u64, 7, 9];
        let sub = [4u64, 3, 4];
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut rand = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut parts: Vec<(Vec<u64>, Vec<u64>)> = Vec::new();
        for t in (0..shape[0]).step_by(sub[0] as usize) {
            for y in (0..shape[1]).step_by(sub[1] as usize) {
                for x in (0..shape[2]).step_by(sub[2] as usize) {
                    let mut flat = Vec::new();
                    for a in t..(t + sub[0]).min(shape[0]) {
                        for b in y..(y + sub[1]).min(shape[1]) {
                            for c in x..(x + sub[2]).min(shape[2]) {
                                if rand() % 3 == 0 {
                                    flat.push((a * shape[1] + b) * shape[2] + c);
                                }
                            }
                        }
                    }
                    if rand() % 2 == 0 {
                        flat.reverse();
                    }
                    parts.push((vec![t, y, x], flat));
                }
            }
        }
        for i in (1..parts.len()).rev() {
            parts.swap(i, (rand() % (i as u64 + 1)) as usize);
        }
        let mut want: Vec<u64> = parts.iter().flat_map(|p| p.1.iter().copied()).collect();
        want.sort_unstable();
        let got = sorted_by_bands(parts.iter().map(|(s, f)| (s.as_slice(), f.clone())), &shape);
        assert_eq!(got, want);
    }

    #[test]
    fn flat_indices_of_a_box() {
        let shape = [5u64, 7, 9];
        let b = QueryBox { slab: 0, id: (0, 0, 0), start: vec![1, 2, 3], len: vec![3, 4, 5], region: None };
        let local: Vec<u32> = (0..60).collect();
        let got = flat_of(&b, &shape, local.iter().copied());
        let mut want = vec![];
        for t in 1..4u64 {
            for y in 2..6u64 {
                for x in 3..8u64 {
                    want.push((t * 7 + y) * 9 + x);
                }
            }
        }
        assert_eq!(got, want);
    }

    #[test]
    fn matches_agrees_with_test_and_drops_nan_and_missing() {
        let values = [-999.0, f64::NAN, -1.0, 0.0, 2.5, 3.0, f64::INFINITY];
        let missing = [-999.0];
        for op in [CmpOp::Lt, CmpOp::Le, CmpOp::Gt, CmpOp::Ge, CmpOp::Eq, CmpOp::Ne] {
            for v in [-1000.0, -999.0, 0.0, 3.0] {
                let want: Vec<bool> =
                    values.iter().map(|&x| !x.is_nan() && !missing.contains(&x) && op.test(x, v)).collect();
                assert_eq!(op.matches(&values, v, &missing), want, "{op:?} {v}");
                let f64s: Vec<u8> = values.iter().flat_map(|x| x.to_le_bytes()).collect();
                assert_eq!(op.matches_raw(DType::F64, &f64s, v, &missing), want, "{op:?} {v} f64");
                let f32s: Vec<u8> = values.iter().flat_map(|&x| (x as f32).to_le_bytes()).collect();
                assert_eq!(op.matches_raw(DType::F32, &f32s, v, &missing), want, "{op:?} {v} f32");
                let i32s: Vec<u8> = [-999i32, 0, -1, 0, 2, 3, i32::MAX].iter().flat_map(|x| x.to_le_bytes()).collect();
                let ints = [-999.0, 0.0, -1.0, 0.0, 2.0, 3.0, i32::MAX as f64];
                assert_eq!(
                    op.matches_raw(DType::I32, &i32s, v, &missing),
                    op.matches(&ints, v, &missing),
                    "{op:?} {v} i32"
                );
            }
        }
        // Runs and single positions, and fewer flags than positions.
        let runs: RoaringBitmap = (10u32..20).chain(30..33).chain([50]).collect();
        let keep: Vec<bool> = (0..14).map(|i| i % 3 == 0).collect();
        let want: Vec<u32> = runs.iter().zip(&keep).filter(|(_, &k)| k).map(|(p, _)| p).collect();
        assert_eq!(kept_positions(Some(&runs), &keep), want);
        assert_eq!(kept_positions(Some(&runs), &keep[..11]), want[..want.len() - 1].to_vec());
        assert_eq!(kept_positions(None, &[false, true, true]), vec![1, 2]);
        let p: RoaringBitmap = [3u32, 9, 70_000].into_iter().collect();
        assert_eq!(kept_positions(Some(&p), &[true, false, true]), vec![3, 70_000]);
        assert_eq!(kept_positions(Some(&p), &[true]), vec![3], "missing flags count as not kept");
    }

    #[test]
    fn coverage_follows_the_summary() {
        use Coverage::*;
        assert_eq!(CmpOp::Gt.coverage(5, 26.0, 30.0, true, 25.0), Full);
        assert_eq!(CmpOp::Gt.coverage(5, 26.0, 30.0, false, 25.0), Boundary);
        assert_eq!(CmpOp::Gt.coverage(5, 20.0, 25.0, true, 25.0), Empty);
        assert_eq!(CmpOp::Ge.coverage(5, 20.0, 25.0, true, 25.0), Boundary);
        assert_eq!(CmpOp::Eq.coverage(5, 1.0, 1.0, true, 1.0), Full);
        assert_eq!(CmpOp::Ne.coverage(5, 1.0, 1.0, true, 1.0), Empty);
        assert_eq!(CmpOp::Ne.coverage(5, 1.0, 3.0, true, 5.0), Full);
        assert_eq!(CmpOp::Lt.coverage(0, f64::NAN, f64::NAN, false, 5.0), Empty);
    }

    #[test]
    fn region_bitmaps_list_the_selected_elements() {
        let b = |first, count, len, step| AxisBlock { chunk: 0, sub: 0, len, first, count, out: 0, step };
        assert_eq!(local_region(&[b(0, 4, 4, 1), b(0, 5, 5, 1)]), None);
        let r = local_region(&[b(1, 2, 4, 1), b(1, 2, 5, 2)]).unwrap_or_default();
        assert_eq!(r.iter().collect::<Vec<_>>(), vec![6, 8, 11, 13]);
    }
}
