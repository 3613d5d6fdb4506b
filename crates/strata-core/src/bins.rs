//! Level V: value bins. Per slab and variable, the valid values are cut into bins by interior
//! boundaries; invalid elements (NaN, fill values) get a bin of their own after the value
//! bins. A sub-chunk's elements are stored bin by bin, and each (sub-chunk, bin) keeps the
//! positions of its elements as a Roaring bitmap in the index file (docs/format.md §6.2).

use crate::bitset::bitmap_of_runs;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::manifest::{Layout, Level};
use roaring::RoaringBitmap;
use serde::{Deserialize, Serialize};

/// Most value bins a rule may ask for (bins are u32 in segment keys; this keeps the index small).
pub const MAX_BINS: u32 = 4096;
/// Values sampled per slab to place equal-frequency boundaries.
pub(crate) const QUANTILE_SAMPLE: usize = 1 << 16;

/// The user's binning rule, kept in the manifest (`layout.bins`); each slab resolves it into
/// boundaries from its own values, so drifting distributions keep balanced bins.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "method", rename_all = "kebab-case", deny_unknown_fields)]
pub enum BinRule {
    /// `count` bins of equal width between the slab's minimum and maximum.
    EqualWidth { count: u32 },
    /// `count` bins holding about as many values each (quantiles of a sample of the slab).
    EqualFrequency { count: u32 },
    /// The given interior boundaries (strictly increasing): `edges.len() + 1` bins.
    Edges { edges: Vec<f64> },
}

impl BinRule {
    /// Parses the command-line form: `equal-width`, `equal-frequency` (with `count`) or a
    /// comma-separated list of boundaries.
    pub fn parse(binning: &str, count: u32) -> Result<Self> {
        let rule = match binning.trim() {
            "equal-width" => BinRule::EqualWidth { count },
            "equal-frequency" => BinRule::EqualFrequency { count },
            list => {
                let edges = list
                    .split(',')
                    .map(|t| {
                        t.trim().parse::<f64>().map_err(|_| {
                            Error::InvalidArgument(format!(
                                "binning '{binning}': expected equal-width, equal-frequency or comma-separated \
                                 boundaries, '{t}' is not a number"
                            ))
                        })
                    })
                    .collect::<Result<Vec<_>>>()?;
                BinRule::Edges { edges }
            }
        };
        rule.check()?;
        Ok(rule)
    }

    /// A bin count as a caller gave it (any integer), checked: 1 to [`MAX_BINS`].
    pub fn count(count: i64) -> Result<u32> {
        u32::try_from(count)
            .ok()
            .filter(|c| (1..=MAX_BINS).contains(c))
            .ok_or_else(|| Error::InvalidArgument(format!("bin count must be 1 to {MAX_BINS}, not {count}")))
    }

    pub fn check(&self) -> Result<()> {
        match self {
            BinRule::EqualWidth { count } | BinRule::EqualFrequency { count } => {
                Self::count(i64::from(*count))?;
            }
            BinRule::Edges { edges } => {
                if edges.is_empty() || edges.len() >= MAX_BINS as usize {
                    return Err(Error::InvalidArgument(format!(
                        "give 1 to {} bin boundaries, not {}",
                        MAX_BINS - 1,
                        edges.len()
                    )));
                }
                if edges.iter().any(|e| !e.is_finite()) || edges.windows(2).any(|w| w[0] >= w[1]) {
                    return Err(Error::InvalidArgument(format!(
                        "bin boundaries must be finite and strictly increasing: {edges:?}"
                    )));
                }
            }
        }
        Ok(())
    }

    /// The rule of a layout with level V; None without it.
    pub fn of_layout(layout: &Layout) -> Result<Option<Self>> {
        if !layout.order.contains(&Level::V) {
            return Ok(None);
        }
        let value = layout
            .bins
            .as_ref()
            .ok_or_else(|| Error::Corruption("the layout has level V but no binning rule".into()))?;
        let rule: BinRule = serde_json::from_value(value.clone())
            .map_err(|e| Error::Compatibility(format!("binning rule {value}: {e}")))?;
        rule.check().map_err(|e| Error::Corruption(format!("binning rule in the manifest: {e}")))?;
        Ok(Some(rule))
    }

    /// Resolves the rule for one slab of a variable from its values.
    pub fn resolve(&self, dtype: DType, bytes: &[u8], missing: &[f64]) -> Bins {
        let valid = |v: f64| !v.is_nan() && !missing.contains(&v);
        self.resolve_with(
            || dtype.summarize(bytes, missing),
            || {
                let n = bytes.len() / dtype.size().max(1);
                let stride = n.div_ceil(QUANTILE_SAMPLE).max(1);
                let es = dtype.size();
                let mut sample = Vec::with_capacity(n.min(QUANTILE_SAMPLE));
                for i in (0..n).step_by(stride) {
                    dtype.for_each_f64(&bytes[i * es..(i + 1) * es], |v| {
                        if valid(v) {
                            sample.push(v)
                        }
                    });
                }
                sample
            },
        )
    }

    /// Resolves the rule from what it needs: the valid values' summary (equal-width) or a
    /// sample of them of about `QUANTILE_SAMPLE` values (equal-frequency), each asked for
    /// only when the rule needs it. A file indexed in place gathers both chunk by chunk.
    pub fn resolve_with(
        &self,
        summary: impl FnOnce() -> crate::dtype::ValueSummary,
        sample: impl FnOnce() -> Vec<f64>,
    ) -> Bins {
        let boundaries = match self {
            BinRule::Edges { edges } => edges.clone(),
            BinRule::EqualWidth { count } => {
                let s = summary();
                let (lo, hi) = (s.min, s.max);
                if s.count == 0 || hi <= lo || !(hi - lo).is_finite() {
                    vec![]
                } else {
                    (1..*count).map(|i| lo + (hi - lo) * f64::from(i) / f64::from(*count)).collect()
                }
            }
            BinRule::EqualFrequency { count } => {
                let mut sample = sample();
                sample.sort_unstable_by(f64::total_cmp);
                if sample.is_empty() {
                    vec![]
                } else {
                    let k = *count as usize;
                    (1..k).map(|i| sample[i * sample.len() / k]).filter(|v| v.is_finite()).collect()
                }
            }
        };
        Bins::new(boundaries)
    }
}

/// The bins of one slab of one variable.
#[derive(Debug, Clone, PartialEq)]
pub struct Bins {
    /// Strictly increasing, finite. Value bin `i` holds `[b[i-1], b[i])` (open at the ends).
    boundaries: Vec<f64>,
}

impl Bins {
    /// Boundaries are sorted and deduplicated (equal quantiles collapse into one).
    pub fn new(mut boundaries: Vec<f64>) -> Self {
        boundaries.retain(|b| b.is_finite());
        boundaries.sort_unstable_by(f64::total_cmp);
        boundaries.dedup();
        Self { boundaries }
    }

    pub fn boundaries(&self) -> &[f64] {
        &self.boundaries
    }

    /// Number of value bins; the missing bin comes after them.
    pub fn value_bins(&self) -> u32 {
        self.boundaries.len() as u32 + 1
    }

    pub fn missing_bin(&self) -> u32 {
        self.value_bins()
    }

    pub fn bin_of(&self, v: f64, missing: &[f64]) -> u32 {
        if v.is_nan() || missing.contains(&v) {
            self.missing_bin()
        } else {
            self.boundaries.partition_point(|&b| b <= v) as u32
        }
    }

    /// Each element's bin, as [`bin_of`](Self::bin_of) gives it.
    fn bin_ids(&self, raw: &[u8], dtype: DType, missing: &[f64]) -> Vec<u32> {
        let n = raw.len() / dtype.size().max(1);
        let missing_bin = self.missing_bin();
        let few = self.boundaries.len() <= 32;
        if few && dtype == DType::F32 {
            return self.f32_bin_ids(raw, missing);
        }
        let mut ids = Vec::with_capacity(n);
        dtype.for_each_f64_block(raw, |block| {
            let at = ids.len();
            if few {
                // A branch-free count over a few boundaries, a block at a time so the
                // compiler vectorizes it: several times a binary search per element.
                let lanes = block.chunks_exact(8);
                let rest = lanes.remainder();
                for v in lanes {
                    // Counts as u64, the width of an f64 comparison's mask: no narrowing
                    // inside the loop, and all eight stay in registers.
                    let mut acc = [0u64; 8];
                    for &b in &self.boundaries {
                        for i in 0..8 {
                            acc[i] += (b <= v[i]) as u64;
                        }
                    }
                    ids.extend(acc.iter().map(|&c| c as u32));
                }
                ids.extend(rest.iter().map(|&v| self.boundaries.iter().map(|&b| (b <= v) as u32).sum::<u32>()));
            } else {
                ids.extend(block.iter().map(|&v| self.boundaries.partition_point(|&b| b <= v) as u32));
            }
            let out = &mut ids[at..];
            match missing {
                [] => invalid_to(out, block, missing_bin, |_| false),
                &[m] => invalid_to(out, block, missing_bin, |v| v == m),
                _ => invalid_to(out, block, missing_bin, |v| missing.contains(&v)),
            }
        });
        ids
    }

    /// [`bin_ids`](Self::bin_ids) of f32 elements compared as f32: eight to an AVX2
    /// register where f64 holds four, and no conversion pass. Exact: for an f32 `v`,
    /// `b <= v` holds just when the least f32 not below `b` is `<= v`; a fill value no f32
    /// equals matches nothing.
    fn f32_bin_ids(&self, raw: &[u8], missing: &[f64]) -> Vec<u32> {
        let edges: Vec<f32> = self.boundaries.iter().map(|&b| f32_at_least(b)).collect();
        let fills: Vec<f32> = missing
            .iter()
            .filter_map(|&m| {
                let f = m as f32;
                (f64::from(f) == m).then_some(f)
            })
            .collect();
        match fills[..] {
            [] => f32_ids(raw, &edges, self.missing_bin(), |v| v.is_nan()),
            [m] => f32_ids(raw, &edges, self.missing_bin(), |v| v.is_nan() | (v == m)),
            _ => f32_ids(raw, &edges, self.missing_bin(), |v| v.is_nan() | fills.contains(&v)),
        }
    }

    /// The elements of a sub-chunk grouped by bin: per non-empty bin (ascending), the
    /// positions of its elements and their bytes in position order.
    pub fn split(&self, raw: &[u8], dtype: DType, missing: &[f64]) -> Vec<(u32, RoaringBitmap, Vec<u8>)> {
        let es = dtype.size().max(1);
        let n = raw.len() / es;
        let missing_bin = self.missing_bin();
        let ids = self.bin_ids(raw, dtype, missing);
        // Counted first, so every bin's buffers are allocated once at their size.
        let bins = missing_bin as usize + 1;
        // Runs of one bin in position order (a field's neighbours mostly share a bin): a
        // run is one copy and one range of positions, where element by element each
        // write waited on the one before to the same bin's buffer.
        let mut runs: Vec<(u32, usize)> = Vec::new();
        let mut counts = vec![0usize; bins];
        for_each_run_start(&ids, |from| runs.push((ids[from], from)));
        for (k, &(b, s)) in runs.iter().enumerate() {
            counts[b as usize] += runs.get(k + 1).map_or(n, |r| r.1) - s;
        }
        // Each bin's buffer has room for a whole block past its end: a short run (most of
        // them) is copied as one block of fixed size, inlined, instead of a call to memmove
        // for its length; the bytes past the run are overwritten by the next one.
        const BLOCK: usize = 64;
        let mut per_bin: Vec<Vec<u8>> = counts.iter().map(|&c| vec![0u8; c * es + BLOCK]).collect();
        let mut filled = vec![0usize; bins];
        let mut ranges: Vec<Vec<(u32, u32)>> = vec![Vec::new(); bins];
        for (k, &(b, s)) in runs.iter().enumerate() {
            let e = runs.get(k + 1).map_or(n, |r| r.1);
            let (from, len) = (s * es, (e - s) * es);
            let (out, at) = (&mut per_bin[b as usize], &mut filled[b as usize]);
            match raw.get(from..from + BLOCK) {
                Some(block) if len <= BLOCK => out[*at..*at + BLOCK].copy_from_slice(block),
                _ => out[*at..*at + len].copy_from_slice(&raw[from..from + len]),
            }
            *at += len;
            ranges[b as usize].push((s as u32, e as u32));
        }
        for (out, &len) in per_bin.iter_mut().zip(&filled) {
            out.truncate(len);
        }
        per_bin
            .into_iter()
            .zip(ranges)
            .enumerate()
            .filter(|(b, _)| counts[*b] > 0)
            .map(|(b, (bytes, ranges))| (b as u32, bitmap_of_runs(ranges), bytes))
            .collect()
    }
}

/// Puts each invalid element (NaN, or `missing`) of `block` in `missing_bin`; a loop per
/// kind of `missing`, with the test inlined.
fn invalid_to(ids: &mut [u32], block: &[f64], missing_bin: u32, missing: impl Fn(f64) -> bool) {
    for (o, &v) in ids.iter_mut().zip(block) {
        let invalid = v.is_nan() | missing(v);
        *o = if invalid { missing_bin } else { *o };
    }
}

/// Calls `f` with each position where a run of equal ids starts, in order. The starts are
/// found 64 ids at a time as a mask of "differs from the one before" (compared without
/// branches, so vectorized), then read off the mask bit by bit: a branch per run that
/// ends at an unpredictable place mispredicted once per run, and took half of `split`.
fn for_each_run_start(ids: &[u32], mut f: impl FnMut(usize)) {
    if ids.is_empty() {
        return;
    }
    f(0);
    // Element i + 1 against element i, so position 0 (started above) is bit 0 of no word.
    let (next, prev) = (&ids[1..], &ids[..ids.len() - 1]);
    for (w, (a, b)) in next.chunks(64).zip(prev.chunks(64)).enumerate() {
        let mut mask = 0u64;
        for (j, (x, y)) in a.iter().zip(b).enumerate() {
            mask |= u64::from(x != y) << j;
        }
        while mask != 0 {
            f(w * 64 + mask.trailing_zeros() as usize + 1);
            mask &= mask - 1;
        }
    }
}

/// The least f32 not below `b`.
fn f32_at_least(b: f64) -> f32 {
    let f = b as f32; // the nearest: above `b`, or below it by less than a step
    if f64::from(f) < b {
        f.next_up()
    } else {
        f
    }
}

/// Per f32 element of `raw`, the count of `edges` at or below it, or `missing_bin` where
/// `invalid`; eight at a time, branch-free, so the compiler vectorizes the count.
fn f32_ids(raw: &[u8], edges: &[f32], missing_bin: u32, invalid: impl Fn(f32) -> bool) -> Vec<u32> {
    let value = |c: &[u8]| f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
    let bin = |v: f32, count: u32| if invalid(v) { missing_bin } else { count };
    let mut ids = Vec::with_capacity(raw.len() / 4);
    let lanes = raw.chunks_exact(32);
    let rest = lanes.remainder();
    for lane in lanes {
        let v: [f32; 8] = std::array::from_fn(|i| value(&lane[4 * i..]));
        let mut acc = [0u32; 8];
        for &b in edges {
            for i in 0..8 {
                acc[i] += u32::from(b <= v[i]);
            }
        }
        ids.extend((0..8).map(|i| bin(v[i], acc[i])));
    }
    for c in rest.chunks_exact(4) {
        let v = value(c);
        ids.push(bin(v, edges.iter().map(|&b| u32::from(b <= v)).sum()));
    }
    ids
}

/// Writes a bin's elements (`values`, in position order) to their positions in a sub-chunk.
/// Positions past the end of `out`, and those beyond the values given, are skipped (a
/// corrupt index must not panic; the segment checks catch the mismatch).
/// The values of a sub-chunk (`raw`, elements of `es` bytes) at `positions`, in position
/// order: a bin's values, from a sub-chunk stored whole.
pub fn values_at(raw: &[u8], positions: &RoaringBitmap, es: usize) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(positions.len() as usize * es);
    for p in positions {
        let at = p as usize * es;
        let v = raw
            .get(at..at + es)
            .ok_or_else(|| Error::Corruption(format!("bin position {p} lies past its sub-chunk")))?;
        out.extend_from_slice(v);
    }
    Ok(out)
}

pub fn scatter(values: &[u8], positions: &RoaringBitmap, es: usize, out: &mut [u8]) {
    // Every element of a sub-chunk of a V layout goes through here on a full read: fixed
    // widths make each copy one move, and positions come from the bitmap in batches.
    match es {
        1 => scatter_fixed::<1>(values, positions, out),
        2 => scatter_fixed::<2>(values, positions, out),
        4 => scatter_fixed::<4>(values, positions, out),
        8 => scatter_fixed::<8>(values, positions, out),
        _ => {
            for (p, v) in positions.iter().zip(values.chunks_exact(es.max(1))) {
                let at = p as usize * es;
                if let Some(dst) = out.get_mut(at..at + es) {
                    dst.copy_from_slice(v);
                }
            }
        }
    }
}

fn scatter_fixed<const N: usize>(values: &[u8], positions: &RoaringBitmap, out: &mut [u8]) {
    let stats = positions.statistics();
    if stats.n_containers > 0 && stats.n_run_containers == stats.n_containers {
        // Positions kept as runs (a bin of a smooth field): a run's values are one copy,
        // where position by position each came out of the run and was moved alone.
        let mut it = positions.iter();
        let mut from = 0usize;
        while let Some(r) = it.next_range() {
            let (a, b) = (*r.start() as usize, *r.end() as usize + 1);
            let len = (b - a) * N;
            let (Some(src), Some(dst)) = (values.get(from..from + len), out.get_mut(a * N..b * N)) else {
                return; // a corrupt index: the segment checks catch the mismatch
            };
            dst.copy_from_slice(src);
            from += len;
        }
        return;
    }
    let mut src = values.chunks_exact(N);
    let mut batch = [0u32; 1024];
    let mut it = positions.iter();
    loop {
        let got = it.next_many(&mut batch);
        if got.is_empty() {
            return;
        }
        for &p in got.iter() {
            let Some(v) = src.next() else { return };
            let at = p as usize * N;
            if let Some(dst) = out.get_mut(at..at + N) {
                dst.copy_from_slice(v);
            }
        }
    }
}

/// The value-distribution summary of one variable in one slab (index section kind 3).
#[derive(Debug, Clone, PartialEq)]
pub struct BinSummary {
    pub var: u32,
    pub boundaries: Vec<f64>,
    /// Elements per bin: the value bins, then the missing bin.
    pub counts: Vec<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_fall_in_half_open_bins_and_invalid_values_apart() {
        let b = Bins::new(vec![10.0, 0.0, 20.0, 10.0]);
        assert_eq!(b.boundaries(), &[0.0, 10.0, 20.0]);
        let m = [-999.0];
        let got: Vec<u32> = [-5.0, 0.0, 9.99, 10.0, 25.0, f64::NAN, -999.0].iter().map(|&v| b.bin_of(v, &m)).collect();
        assert_eq!(got, vec![0, 1, 1, 2, 3, 4, 4]);
    }

    #[test]
    fn split_and_scatter_round_trip() {
        let values: Vec<f32> = (0..1000).map(|i| ((i * 37) % 101) as f32 - 50.0).collect();
        let raw: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let bins = BinRule::EqualFrequency { count: 8 }.resolve(DType::F32, &raw, &[]);
        assert_eq!(bins.value_bins(), 8);
        let parts = bins.split(&raw, DType::F32, &[]);
        assert_eq!(parts.iter().map(|p| p.1.len()).sum::<u64>(), 1000);
        let mut back = vec![0u8; raw.len()];
        for (_, positions, bytes) in &parts {
            scatter(bytes, positions, 4, &mut back);
        }
        assert_eq!(back, raw);
    }

    #[test]
    fn scatter_spans_containers_and_batches_for_every_width() {
        let scattered: RoaringBitmap = (0..200_000u32).step_by(3).collect();
        // Runs of 1 to 9 positions, one every 64, kept as run containers.
        let mut runs: RoaringBitmap = (0..200_000u32).filter(|p| p % 64 < 1 + p / 64 % 9).collect();
        runs.optimize();
        assert_eq!(runs.statistics().n_run_containers, runs.statistics().n_containers);
        for (positions, es) in [&scattered, &runs].into_iter().flat_map(|p| [1usize, 2, 4, 8, 3].map(|es| (p, es))) {
            let n = positions.len() as usize;
            let values: Vec<u8> = (0..n * es).map(|i| (i % 251) as u8).collect();
            let mut out = vec![0u8; 200_000 * es];
            scatter(&values, positions, es, &mut out);
            for (i, p) in positions.iter().enumerate() {
                let p = p as usize;
                assert_eq!(out[p * es..(p + 1) * es], values[i * es..(i + 1) * es], "es {es} element {i}");
            }
            // A corrupt index (positions past the buffer, too few values) must not panic.
            scatter(&values[..es * 10], positions, es, &mut out[..es * 5]);
        }
    }

    proptest::proptest! {
        /// `split` (run starts by mask, block copies, bitmaps from runs) and `summarize`
        /// (lanes) give what one element at a time does: `bin_of` per element, a running
        /// min/max/count.
        #[test]
        fn split_and_summarize_agree_with_one_element_at_a_time(
            values in proptest::collection::vec(
                proptest::prop_oneof![-50i32..50, proptest::strategy::Just(999)], 0..700),
            run in 1usize..40,
            edges in proptest::collection::vec(-60i32..60, 0..40),
            nan_every in 0usize..9,
        ) {
            // Runs of equal values: short runs copied as one block, long ones by length.
            let mut v: Vec<f64> = values.iter().flat_map(|&x| std::iter::repeat_n(x as f64 / 2.0, run % 7 + 1)).collect();
            if nan_every > 0 {
                v.iter_mut().step_by(nan_every).for_each(|x| *x = f64::NAN);
            }
            let missing = [999.0 / 2.0];
            let raw: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
            let bins = Bins::new(edges.iter().map(|&e| e as f64 / 3.0).collect());
            let parts = bins.split(&raw, DType::F64, &missing);
            let mut want: Vec<(u32, Vec<u32>)> = vec![];
            for (i, &x) in v.iter().enumerate() {
                let b = bins.bin_of(x, &missing);
                match want.iter_mut().find(|w| w.0 == b) {
                    Some(w) => w.1.push(i as u32),
                    None => want.push((b, vec![i as u32])),
                }
            }
            want.sort();
            let got: Vec<(u32, Vec<u32>)> = parts.iter().map(|(b, p, _)| (*b, p.iter().collect())).collect();
            proptest::prop_assert_eq!(&got, &want);
            for (b, positions, bytes) in &parts {
                let expect: Vec<u8> = positions.iter().flat_map(|p| v[p as usize].to_le_bytes()).collect();
                proptest::prop_assert_eq!(bytes, &expect, "bin {}", b);
            }
            let s = DType::F64.summarize(&raw, &missing);
            let valid: Vec<f64> = v.iter().copied().filter(|x| !x.is_nan() && *x != missing[0]).collect();
            proptest::prop_assert_eq!(s.count, valid.len() as u64);
            if !valid.is_empty() {
                proptest::prop_assert_eq!(s.min, valid.iter().copied().fold(f64::INFINITY, f64::min));
                proptest::prop_assert_eq!(s.max, valid.iter().copied().fold(f64::NEG_INFINITY, f64::max));
            } else {
                proptest::prop_assert!(s.min.is_nan() && s.max.is_nan());
            }
        }
    }

    proptest::proptest! {
        /// f32 elements, binned as f32 against boundaries that are f64 (most of them no f32
        /// exactly), land where `bin_of` puts their f64 value: values next to each boundary,
        /// fill values that are and are not f32 numbers, NaN and infinities included.
        #[test]
        fn f32_bins_agree_with_f64_comparison(
            edges in proptest::collection::vec(-1.0e6f64..1.0e6, 0..33),
            picks in proptest::collection::vec((0usize..40, -2i32..3), 0..300),
            fill_is_f32 in proptest::bool::ANY,
        ) {
            let bins = Bins::new(edges.iter().map(|e| e / 3.0).collect());
            let b = bins.boundaries();
            let fill = if fill_is_f32 { -999.0 } else { 0.1 };
            let mut v: Vec<f32> = vec![f32::NAN, f32::INFINITY, f32::NEG_INFINITY, -999.0, 0.1, -0.0];
            // Values at, just above and just below each boundary's nearest f32.
            for &(k, step) in &picks {
                let mut x = b.get(k).map_or(k as f32, |&e| e as f32);
                for _ in 0..step.unsigned_abs() {
                    x = if step > 0 { x.next_up() } else { x.next_down() };
                }
                v.push(x);
            }
            let raw: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
            let want: Vec<u32> = v.iter().map(|&x| bins.bin_of(f64::from(x), &[fill])).collect();
            proptest::prop_assert_eq!(bins.bin_ids(&raw, DType::F32, &[fill]), want);
        }
    }

    #[test]
    fn rules_are_checked() {
        assert!(BinRule::parse("equal-width", 0).is_err());
        assert_eq!(BinRule::count(7).unwrap(), 7);
        for bad in [0, -3, i64::from(MAX_BINS) + 1, 1 << 40] {
            assert!(BinRule::count(bad).unwrap_err().to_string().contains(&format!("not {bad}")));
        }
        assert!(BinRule::parse("1,1", 0).is_err());
        assert!(BinRule::parse("1,x", 0).is_err());
        assert_eq!(BinRule::parse("1, 2.5", 0).unwrap(), BinRule::Edges { edges: vec![1.0, 2.5] });
        let w = BinRule::EqualWidth { count: 4 };
        let raw: Vec<u8> = [0.0f64, 8.0].iter().flat_map(|v| v.to_le_bytes()).collect();
        assert_eq!(w.resolve(DType::F64, &raw, &[]).boundaries(), &[2.0, 4.0, 6.0]);
    }
}
