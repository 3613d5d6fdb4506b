//! A query region cut into pieces along its first dimension, so a large result is built a
//! piece at a time: each piece's intermediate buffers stay small (and are reused by the
//! allocator) while the pieces run side by side. Python's points queries, the C API, the
//! server and SQL's scans all cut regions here.

use crate::error::Result;
use crate::reader::{DimSelection, StoreReader};

/// Elements per piece, about: large enough to amortize planning and the per-piece setup,
/// small enough that a piece's buffers stay in the allocator's reused memory rather than
/// fresh pages (several columns of this many values).
pub const PIECE_ELEMENTS: u64 = 1 << 20;

/// `region` cut along its first dimension into pieces of about `piece_elements` selected
/// elements, each boundary at a multiple of `align` (the sub-chunk length along that
/// dimension, so no sub-chunk is read by two pieces). Strides are kept: each piece starts at
/// the first selected index of its span. An empty region has no pieces; a region without
/// dimensions is one piece.
pub fn split(region: &[DimSelection], align: u64, piece_elements: u64) -> Vec<Vec<DimSelection>> {
    let Some(first) = region.first() else {
        return vec![region.to_vec()];
    };
    if region.iter().any(|s| s.count() == 0) {
        return vec![];
    }
    let inner: u64 = region[1..].iter().map(|s| s.count()).product::<u64>().max(1);
    let align = align.max(1);
    // Indices along the first dimension per piece: enough selected ones (at its stride) to
    // make `piece_elements`, rounded up to the alignment.
    let per = (piece_elements.max(1) / inner).max(1).saturating_mul(first.step.max(1));
    let span = per.div_ceil(align).saturating_mul(align);
    let mut out = Vec::new();
    let mut lo = first.start;
    while lo < first.stop {
        let hi = (lo / span).saturating_add(1).saturating_mul(span).min(first.stop);
        if let Some(start) = first.first_in(lo, hi) {
            let mut sel = region.to_vec();
            sel[0] = DimSelection { start, stop: hi, step: first.step };
            out.push(sel);
        }
        lo = hi;
    }
    out
}

impl StoreReader {
    /// The length along the first dimension pieces of a query driven by `name` are aligned
    /// to: its sub-chunks'.
    pub fn piece_alignment(&self, name: &str) -> Result<u64> {
        let (_, v) = self.manifest().variable(name)?;
        Ok(v.chunking.as_ref().and_then(|c| c.subchunk.first().copied()).unwrap_or(1).max(1))
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
    fn pieces_cover_the_region_once_on_aligned_boundaries() {
        for (first, align, per) in [(sel(0, 100, 1), 8, 40), (sel(3, 97, 5), 4, 30), (sel(7, 8, 1), 16, 1)] {
            let region = vec![first, sel(2, 12, 1)];
            let pieces = split(&region, align, per);
            let want: Vec<u64> = (first.start..first.stop).step_by(first.step as usize).collect();
            assert_eq!(indices(&pieces), want);
            for p in &pieces {
                assert_eq!(p[1], region[1]);
                assert!(p[0].count() > 0);
            }
            // Every boundary between pieces is aligned.
            for w in pieces.windows(2) {
                assert_eq!(w[0][0].stop % align, 0);
                assert!(w[0][0].stop <= w[1][0].start);
            }
        }
        assert!(split(&[sel(0, 10, 1), sel(4, 4, 1)], 1, 10).is_empty());
        assert_eq!(split(&[], 1, 10), vec![Vec::<DimSelection>::new()]);
        // Huge pieces asked for: one piece.
        assert_eq!(split(&[sel(0, 10, 1)], 3, u64::MAX).len(), 1);
    }
}
