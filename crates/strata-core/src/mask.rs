//! A selection that is not a box: which elements of some axes of a query's variables are in
//! (a curvilinear or mesh area, from ranges of 2-D latitude/longitude or of a mesh's
//! coordinates). The engine applies it to each sub-chunk's region, so a count through an
//! area is answered from the bin bitmaps ANDed with the mask, and sub-chunks outside the
//! area are never read.

use crate::error::{Error, Result};
use crate::grid::AxisBlock;
use roaring::RoaringBitmap;

/// Which elements of `axes` (ascending axes of the queried variables) are selected, over the
/// whole extent of those axes, row-major.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mask {
    axes: Vec<usize>,
    shape: Vec<u64>,
    bits: Vec<bool>,
    /// Row-major strides of `shape`.
    strides: Vec<u64>,
    /// Elements in the mask before each flat position (one more entry than `bits`).
    prefix: Vec<u64>,
}

impl Mask {
    pub fn new(axes: Vec<usize>, shape: Vec<u64>, bits: Vec<bool>) -> Result<Mask> {
        if axes.is_empty() || axes.len() != shape.len() || axes.windows(2).any(|w| w[0] >= w[1]) {
            return Err(Error::InvalidArgument(format!(
                "a mask spans ascending axes with one extent each (axes {axes:?}, shape {shape:?})"
            )));
        }
        let n = shape.iter().try_fold(1u64, |a, &b| a.checked_mul(b));
        if n != Some(bits.len() as u64) {
            return Err(Error::InvalidArgument(format!(
                "a mask of shape {shape:?} holds {} elements, not {}",
                n.map_or("too many".to_string(), |n| n.to_string()),
                bits.len()
            )));
        }
        let mut strides = vec![1u64; shape.len()];
        for d in (0..shape.len().saturating_sub(1)).rev() {
            strides[d] = strides[d + 1] * shape[d + 1];
        }
        let mut prefix = Vec::with_capacity(bits.len() + 1);
        prefix.push(0u64);
        for &bit in &bits {
            prefix.push(prefix[prefix.len() - 1] + u64::from(bit));
        }
        Ok(Mask { axes, shape, bits, strides, prefix })
    }

    /// Checks the mask against the queried variables' shape.
    pub fn check(&self, var_shape: &[u64]) -> Result<()> {
        for (&a, &n) in self.axes.iter().zip(&self.shape) {
            if var_shape.get(a) != Some(&n) {
                return Err(Error::InvalidArgument(format!(
                    "the mask spans axis {a} with {n} elements; the queried variables have shape {var_shape:?}"
                )));
            }
        }
        Ok(())
    }

    /// The local positions (row-major in the sub-chunk) of the elements a sub-chunk's
    /// selection picks (`blocks`, the sub-chunk starting at global `start`) that are in the
    /// mask. None when every element of the sub-chunk is picked and in; empty when none is.
    pub(crate) fn restrict(&self, start: &[u64], blocks: &[AxisBlock]) -> Option<RoaringBitmap> {
        // Runs are merged as they come (in ascending order) and inserted once each:
        // inserting element by element costs a container lookup per element.
        let mut picked = RoaringBitmap::new();
        let mut current: Option<(u32, u32)> = None;
        let n = self.walk(start, blocks, |lo, hi| match &mut current {
            Some((_, end)) if *end == lo => *end = hi,
            _ => {
                if let Some((a, b)) = current.replace((lo, hi)) {
                    picked.insert_range(a..b);
                }
            }
        });
        if let Some((a, b)) = current {
            picked.insert_range(a..b);
        }
        if n == blocks.iter().map(|b| b.len).product::<u64>() {
            return None;
        }
        Some(picked)
    }

    /// How many of the elements a sub-chunk's selection picks are in the mask.
    pub(crate) fn count_in(&self, start: &[u64], blocks: &[AxisBlock]) -> u64 {
        self.walk(start, blocks, |_, _| {})
    }

    /// Calls `run(lo, hi)` for each run of picked elements in the mask, as local positions
    /// `lo..hi` in ascending order, and returns how many there are. A row along the last
    /// axis is judged whole from the prefix counts when the mask is all in or all out there.
    fn walk(&self, start: &[u64], blocks: &[AxisBlock], mut run: impl FnMut(u32, u32)) -> u64 {
        let nd = blocks.len();
        if nd == 0 {
            return 0;
        }
        let last = nd - 1;
        let lens: Vec<u64> = blocks.iter().map(|b| b.len).collect();
        let mut local_strides = vec![1u64; nd];
        for d in (0..last).rev() {
            local_strides[d] = local_strides[d + 1] * lens[d + 1];
        }
        // Each axis's step in the mask (0 for axes the mask does not span).
        let mask_stride: Vec<u64> =
            (0..nd).map(|d| self.axes.iter().position(|&a| a == d).map_or(0, |k| self.strides[k])).collect();
        let b = &blocks[last];
        let rows: u64 = blocks[..last].iter().map(|b| b.count).product();
        let mut idx = vec![0u64; last];
        let mut total = 0u64;
        for _ in 0..rows {
            let (mut local, mut masked) = (0u64, 0u64);
            for d in 0..last {
                let c = blocks[d].first + idx[d] * blocks[d].step;
                local += c * local_strides[d];
                masked += (start[d] + c) * mask_stride[d];
            }
            let first = masked + (start[last] + b.first) * mask_stride[last];
            let whole = if mask_stride[last] == 0 {
                // The mask does not vary along the row.
                Some(self.bits[first as usize])
            } else if b.step == 1 {
                let in_mask = self.prefix[(first + b.count) as usize] - self.prefix[first as usize];
                (in_mask == 0 || in_mask == b.count).then_some(in_mask > 0)
            } else {
                None
            };
            let lo = (local + b.first) as u32;
            match whole {
                Some(true) if b.step == 1 => {
                    run(lo, lo + b.count as u32);
                    total += b.count;
                }
                Some(false) => {}
                _ => {
                    for i in 0..b.count {
                        let at = first + i * b.step * mask_stride[last];
                        if self.bits[at as usize] {
                            let p = lo + (i * b.step) as u32;
                            run(p, p + 1);
                            total += 1;
                        }
                    }
                }
            }
            for d in (0..last).rev() {
                idx[d] += 1;
                if idx[d] < blocks[d].count {
                    break;
                }
                idx[d] = 0;
            }
        }
        total
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grid::{axis_blocks, AxisSelection};

    #[test]
    fn restrict_picks_the_selected_elements_inside() {
        // A 4x6 grid, mask over both axes: the upper-left triangle.
        let bits: Vec<bool> = (0..24).map(|i| i % 6 <= i / 6 * 2).collect();
        let m = Mask::new(vec![0, 1], vec![4, 6], bits.clone()).unwrap();
        let sel = |start, stop, step| AxisSelection { start, stop, step };
        let ya = axis_blocks(sel(0, 4, 1), 0, 4, 4, 4);
        let xa = axis_blocks(sel(1, 6, 2), 0, 6, 6, 6);
        let got = m.restrict(&[0, 0], &[ya[0], xa[0]]).unwrap();
        let want: Vec<u32> = (0..4u32)
            .flat_map(|y| (1..6u32).step_by(2).map(move |x| y * 6 + x))
            .filter(|&p| bits[p as usize])
            .collect();
        assert_eq!(got.iter().collect::<Vec<_>>(), want);
        // All in: None; all out: empty.
        let all = Mask::new(vec![1], vec![6], vec![true; 6]).unwrap();
        let full = axis_blocks(sel(0, 6, 1), 0, 6, 6, 6);
        assert_eq!(all.restrict(&[0, 0], &[ya[0], full[0]]), None);
        let none = Mask::new(vec![1], vec![6], vec![false; 6]).unwrap();
        assert!(none.restrict(&[0, 0], &[ya[0], full[0]]).unwrap().is_empty());
        assert!(Mask::new(vec![1, 0], vec![6, 4], bits.clone()).is_err());
        assert!(Mask::new(vec![0], vec![5], vec![true; 4]).is_err());
        assert!(m.check(&[4, 7]).is_err() && m.check(&[4, 6]).is_ok());
        assert_eq!(m.count_in(&[0, 0], &[ya[0], xa[0]]), want.len() as u64);
        // Rows judged whole from the prefix counts, and a mask over the first axis only.
        let rows = Mask::new(vec![0], vec![4], vec![true, false, true, true]).unwrap();
        let got = rows.restrict(&[0, 0], &[ya[0], full[0]]).unwrap();
        let want: Vec<u32> = [0u32, 2, 3].iter().flat_map(|y| (0..6).map(move |x| y * 6 + x)).collect();
        assert_eq!(got.iter().collect::<Vec<_>>(), want);
        let stripe: Vec<bool> = (0..24).map(|i| i / 6 != 1 && i % 6 >= 2).collect();
        let m = Mask::new(vec![0, 1], vec![4, 6], stripe.clone()).unwrap();
        let got = m.restrict(&[0, 0], &[ya[0], full[0]]).unwrap();
        let want: Vec<u32> = (0..24u32).filter(|&p| stripe[p as usize]).collect();
        assert_eq!(got.iter().collect::<Vec<_>>(), want);
    }
}
