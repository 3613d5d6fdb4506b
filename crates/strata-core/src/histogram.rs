//! A variable's value distribution from its index alone (no data read): what a person
//! looks at before writing a value query.
//!
//! Each segment's summary (count, minimum, maximum) is spread evenly over its range. Under
//! level V a segment holds one value bin of one sub-chunk, so ranges are narrow and the
//! histogram is close to exact; without V it is coarser. Segments holding only a fill value
//! are counted as missing.

use crate::error::Result;
use crate::reader::StoreReader;
use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Histogram {
    pub variable: String,
    /// `bins + 1` ascending edges; empty when no valid value is stored.
    pub edges: Vec<f64>,
    pub counts: Vec<f64>,
    pub min: f64,
    pub max: f64,
    /// Valid (non-NaN, non-fill) elements.
    pub valid: u64,
    /// Elements that are fill values (NaN is not counted by the index).
    pub missing: u64,
}

impl StoreReader {
    /// The distribution of `name`'s values in `bins` equal-width bins, from the index files.
    pub fn histogram(&self, name: &str, bins: usize) -> Result<Histogram> {
        let (var_idx, var) = self.manifest().variable(name)?;
        let missing_values = var.missing_values();
        let mut summaries = Vec::new();
        let mut missing = 0u64;
        for index in self.slab_indexes()? {
            let index = index?;
            for s in index.segments.values() {
                if s.key.var as usize != var_idx || s.key.group != 0 || s.count == 0 {
                    continue;
                }
                if s.min == s.max && missing_values.contains(&s.min) {
                    missing += s.count;
                } else {
                    summaries.push((s.count, s.min, s.max));
                }
            }
        }
        let valid: u64 = summaries.iter().map(|s| s.0).sum();
        let (lo, hi) =
            summaries.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), s| (lo.min(s.1), hi.max(s.2)));
        let mut h =
            Histogram { variable: name.to_string(), edges: vec![], counts: vec![], min: lo, max: hi, valid, missing };
        if valid == 0 || !lo.is_finite() || !hi.is_finite() {
            h.min = f64::NAN;
            h.max = f64::NAN;
            return Ok(h);
        }
        let bins = bins.max(1);
        let width = if hi > lo { (hi - lo) / bins as f64 } else { 1.0 };
        h.edges = (0..=bins).map(|i| lo + width * i as f64).collect();
        h.counts = vec![0.0; bins];
        let bin_of = |x: f64| (((x - lo) / width) as usize).min(bins - 1);
        for (count, smin, smax) in summaries {
            let (a, b) = (bin_of(smin), bin_of(smax));
            if a == b || smax <= smin {
                h.counts[a] += count as f64;
                continue;
            }
            for (k, c) in h.counts.iter_mut().enumerate().take(b + 1).skip(a) {
                let (e0, e1) = (lo + width * k as f64, lo + width * (k + 1) as f64);
                let overlap = (e1.min(smax) - e0.max(smin)).max(0.0);
                *c += count as f64 * overlap / (smax - smin);
            }
        }
        Ok(h)
    }
}
