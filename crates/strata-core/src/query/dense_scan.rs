//! Points by a scan of a whole region at once. A piece of a points query (about 2^20
//! elements) whose sub-chunks all run by the scan is read dense, row-major, tested in that
//! order and compacted: the positions come out ascending, so nothing is merged or sorted,
//! where the scan box by box tests each sub-chunk on its own and then orders the points of
//! every box by flat index. At high selectivity that ordering was most of a query's time.

use super::evaluate::kept_positions;
use super::pieces::PIECE_ELEMENTS;
use super::{Executor, Points, Predicate};
use crate::error::Result;
use crate::fastdiv::FastDiv;
use crate::reader::DimSelection;

/// Regions up to this many elements are scanned whole: a piece, with room (a piece is cut
/// on sub-chunk boundaries, so it can exceed its target), bounding the dense buffers.
const DENSE_SCAN_ELEMENTS: u64 = 4 * PIECE_ELEMENTS;

/// Whether `sel` is small enough to scan whole.
pub(super) fn dense_scan_fits(sel: &[DimSelection]) -> bool {
    sel.iter().map(|s| s.count()).product::<u64>() <= DENSE_SCAN_ELEMENTS
}

impl Executor<'_> {
    /// Where `pred` holds inside `sel` of a grid of `shape`, and the values of `outputs`
    /// there (at `level`), the region read dense.
    pub(super) fn scan_points_dense(
        &self,
        pred: &Predicate,
        sel: &[DimSelection],
        shape: &[u64],
        outputs: &[&str],
        level: Option<usize>,
    ) -> Result<Points> {
        let counts: Vec<u64> = sel.iter().map(|s| s.count()).collect();
        let n = counts.iter().product::<u64>() as usize;
        if n == 0 {
            return Ok(Points { flat: vec![], columns: vec![vec![]; outputs.len()] });
        }
        let (keep, raws) = self.test_region(pred, sel, n)?;
        let local = kept_positions(None, &keep);
        drop(keep);
        let flat = flat_in_region(sel, &counts, shape, &local);
        let columns = self.scanned_columns(outputs, sel, n, level, &raws, &local)?;
        Ok(Points { flat, columns })
    }
}

/// Row-major positions inside the region `sel` (whose per-dimension counts are `counts`)
/// -> flat indices into a grid of `shape`. Ascending positions give ascending indices.
fn flat_in_region(sel: &[DimSelection], counts: &[u64], shape: &[u64], local: &[u32]) -> Vec<u64> {
    let nd = sel.len();
    if nd == 0 {
        return local.iter().map(|_| 0).collect();
    }
    let mut strides = vec![1u64; nd];
    for d in (0..nd - 1).rev() {
        strides[d] = strides[d + 1] * shape[d + 1];
    }
    // Each row's (all dimensions but the last) global offset, counted like an odometer.
    let rows: u64 = counts[..nd - 1].iter().product();
    let mut row_base = Vec::with_capacity(rows as usize);
    let mut at = vec![0u64; nd - 1];
    for _ in 0..rows {
        row_base.push(at.iter().enumerate().map(|(d, &i)| (sel[d].start + i * sel[d].step) * strides[d]).sum::<u64>());
        for d in (0..nd - 1).rev() {
            at[d] += 1;
            if at[d] < counts[d] {
                break;
            }
            at[d] = 0;
        }
    }
    let last = sel[nd - 1];
    let cols = counts[nd - 1].max(1);
    let div = FastDiv::new(cols, true);
    let mut flat = crate::large::with_capacity(local.len());
    flat.extend(local.iter().map(|&p| {
        let p = u64::from(p);
        let row = div.quotient(p);
        let col = p - row * cols;
        // Positions come from a region of `rows * cols` elements, so `row` is in range.
        row_base.get(row as usize).copied().unwrap_or(0) + last.start + col * last.step
    }));
    flat
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn region_positions_become_flat_indices() {
        let shape = [5u64, 6, 7];
        let sel = [
            DimSelection { start: 1, stop: 5, step: 2 },
            DimSelection { start: 0, stop: 6, step: 1 },
            DimSelection { start: 2, stop: 7, step: 3 },
        ];
        let counts: Vec<u64> = sel.iter().map(|s| s.count()).collect();
        let mut want = Vec::new();
        for t in (1..5).step_by(2) {
            for y in 0..6 {
                for x in (2..7).step_by(3) {
                    want.push((t * 6 + y) * 7 + x);
                }
            }
        }
        let all: Vec<u32> = (0..want.len() as u32).collect();
        assert_eq!(flat_in_region(&sel, &counts, &shape, &all), want);
        let some: Vec<u32> = all.iter().copied().filter(|p| p % 3 == 1).collect();
        let picked: Vec<u64> = some.iter().map(|&p| want[p as usize]).collect();
        assert_eq!(flat_in_region(&sel, &counts, &shape, &some), picked);
    }
}
