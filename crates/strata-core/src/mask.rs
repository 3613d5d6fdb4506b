//! A selection that is not a box: which elements of some axes of a query's variables are in
//! (a curvilinear or mesh area, from ranges of 2-D latitude/longitude or of a mesh's
//! coordinates). The engine applies it to each sub-chunk's region, so a count through an
//! area is answered from the bin bitmaps ANDed with the mask, and sub-chunks outside the
//! area are never read.

use crate::bitset::set_bits;
use crate::error::{Error, Result};
use crate::grid::AxisBlock;

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
    /// `bits` as a bitset (bit `i` of word `i / 64`): rows the mask cuts are walked a run
    /// at a time, found a word at a time, instead of element by element.
    words: Vec<u64>,
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
        let strides = crate::grid::row_major_strides(&shape);
        let mut prefix = Vec::with_capacity(bits.len() + 1);
        prefix.push(0u64);
        for &bit in &bits {
            prefix.push(prefix[prefix.len() - 1] + u64::from(bit));
        }
        let mut words = vec![0u64; bits.len().div_ceil(64)];
        for (i, _) in bits.iter().enumerate().filter(|(_, &b)| b) {
            words[i / 64] |= 1 << (i % 64);
        }
        Ok(Mask { axes, shape, bits, strides, prefix, words })
    }

    /// The queried variables' axes the mask spans, ascending.
    pub fn axes(&self) -> &[usize] {
        &self.axes
    }

    /// The mask's extent along each of its axes.
    pub fn shape(&self) -> &[u64] {
        &self.shape
    }

    /// Whether each element is selected, row-major over [`Mask::shape`].
    pub fn bits(&self) -> &[bool] {
        &self.bits
    }

    /// The bytes the mask holds on the heap: a flag, a running count and a bit per element
    /// (a curvilinear grid of 6.5 million points holds about 60 MB).
    pub fn heap_bytes(&self) -> usize {
        let words = |n: usize| n * std::mem::size_of::<u64>();
        self.bits.len()
            + words(self.prefix.len())
            + words(self.words.len())
            + words(self.strides.len())
            + words(self.shape.len())
            + self.axes.len() * std::mem::size_of::<usize>()
    }

    /// How many elements are selected.
    pub fn selected(&self) -> u64 {
        self.prefix[self.bits.len()]
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
    /// mask, as a bitset (bit `i` of word `i / 64` for position `i`; [`crate::bitset::bitmap_of`] makes
    /// it a bitmap). None when every element of the sub-chunk is picked and in.
    pub(crate) fn restrict(&self, start: &[u64], blocks: &[AxisBlock]) -> Option<Vec<u64>> {
        // Runs are set in a bitset and the bitmap built from it at once: inserting a
        // bitmap's thousands of row runs one by one reallocated its containers each time
        // (half of a count through the Southern Ocean).
        let len: u64 = blocks.iter().map(|b| b.len).product();
        let mut words = vec![0u64; (len as usize).div_ceil(64)];
        let (lead, pattern) = self.pattern(blocks);
        let n = if lead == 0 {
            self.walk_rows(start, blocks, |lo, hi| set_bits(&mut words, lo as usize, hi as usize))
        } else {
            // The pattern's bits are set once and copied, shifted, to each repetition.
            let mut once = vec![0u64; words.len()];
            let (mut first, mut end) = (usize::MAX, 0usize);
            let per = self.walk_rows(start, &pattern, |lo, hi| {
                set_bits(&mut once, lo as usize, hi as usize);
                first = first.min(lo as usize);
                end = hi as usize;
            });
            if per > 0 {
                let src = &once[first / 64..end.div_ceil(64)];
                for shift in repeat_shifts(&blocks[..lead], &local_strides(blocks)) {
                    or_shifted(&mut words, src, (first / 64) * 64 + shift as usize);
                }
            }
            per * blocks[..lead].iter().map(|b| b.count).product::<u64>()
        };
        (n != len).then_some(words)
    }

    /// How many of the elements a sub-chunk's selection picks are in the mask.
    pub(crate) fn count_in(&self, start: &[u64], blocks: &[AxisBlock]) -> u64 {
        let (lead, pattern) = self.pattern(blocks);
        let repeats: u64 = blocks[..lead].iter().map(|b| b.count).product();
        repeats * self.walk_rows(start, &pattern, |_, _| {})
    }

    /// The selection of the leading axes the mask does not span (a time axis before a 2-D
    /// area), and `blocks` with one element picked on each of them: the area's pattern,
    /// which repeats unchanged along those axes.
    fn pattern(&self, blocks: &[AxisBlock]) -> (usize, Vec<AxisBlock>) {
        let lead = self.axes.first().map_or(0, |&a| a.min(blocks.len().saturating_sub(1)));
        let mut pattern = blocks.to_vec();
        for b in &mut pattern[..lead] {
            b.count = b.count.min(1);
        }
        (lead, pattern)
    }

    /// Calls `run(lo, hi)` for each run of picked elements in the mask, as local positions
    /// `lo..hi` in ascending order, and returns how many there are, walking row by row along
    /// the last axis. A row is judged whole from the prefix counts when the mask is all in
    /// or all out there. (Callers walk an area's pattern once, see [`Mask::pattern`]: walking
    /// every row again cost more than the query it planned.)
    fn walk_rows(&self, start: &[u64], blocks: &[AxisBlock], mut run: impl FnMut(u32, u32)) -> u64 {
        let nd = blocks.len();
        if nd == 0 {
            return 0;
        }
        let last = nd - 1;
        let local_strides = local_strides(blocks);
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
                // A row the mask cuts, contiguous in the mask too: its runs.
                _ if b.step == 1 && mask_stride[last] == 1 => {
                    let first = first as usize;
                    for_each_run(&self.words, first, first + b.count as usize, |s, e| {
                        run(lo + (s - first) as u32, lo + (e - first) as u32);
                        total += (e - s) as u64;
                    });
                }
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

/// Calls `f(start, end)` for each run of set bits of `words` within `from..to`, in order.
fn for_each_run(words: &[u64], from: usize, to: usize, mut f: impl FnMut(usize, usize)) {
    // The first position at or after `at`, before `to`, whose bit is `set`.
    let next = |at: usize, set: bool| -> Option<usize> {
        let word = |w: usize| if set { words[w] } else { !words[w] };
        let mut w = at / 64;
        let mut x = word(w) & (!0u64 << (at % 64));
        loop {
            if x != 0 {
                let p = w * 64 + x.trailing_zeros() as usize;
                return (p < to).then_some(p);
            }
            w += 1;
            if w * 64 >= to {
                return None;
            }
            x = word(w);
        }
    };
    let mut at = from;
    while at < to {
        let Some(start) = next(at, true) else { return };
        let end = next(start, false).unwrap_or(to);
        f(start, end);
        at = end;
    }
}

/// Row-major strides of a sub-chunk's elements.
fn local_strides(blocks: &[AxisBlock]) -> Vec<u64> {
    let mut strides = vec![1u64; blocks.len()];
    for d in (0..blocks.len().saturating_sub(1)).rev() {
        strides[d] = strides[d + 1] * blocks[d + 1].len;
    }
    strides
}

/// The offsets, in ascending order, of the repetitions of a pattern along the selection
/// `lead` of the leading axes (relative to their first selected elements).
fn repeat_shifts(lead: &[AxisBlock], strides: &[u64]) -> Vec<u64> {
    let mut shifts = vec![0u64];
    // Outer axes first, each repetition of an outer one holding all of the inner ones.
    for (b, &stride) in lead.iter().zip(strides) {
        shifts = shifts.iter().flat_map(|&s| (0..b.count).map(move |i| s + i * b.step * stride)).collect();
    }
    shifts
}

/// ORs the bits of `src` into `dst`, bit `i` of `src` landing on bit `at + i`.
fn or_shifted(dst: &mut [u64], src: &[u64], at: usize) {
    let (w, r) = (at / 64, at % 64);
    for (k, &x) in src.iter().enumerate() {
        if x == 0 {
            continue;
        }
        dst[w + k] |= x << r;
        if r != 0 && x >> (64 - r) != 0 {
            dst[w + k + 1] |= x >> (64 - r);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bitset::bitmap_of;
    use crate::grid::{axis_blocks, AxisSelection};

    #[test]
    fn heap_bytes_count_a_flag_a_running_count_and_a_bit_per_element() {
        let bytes = |n: usize| Mask::new(vec![0, 1], vec![n as u64, 100], vec![true; n * 100]).unwrap().heap_bytes();
        let (small, large) = (bytes(10), bytes(1000));
        // 1 + 8 + 1/8 bytes an element, with the fixed parts alike.
        assert_eq!(large - small, 990 * 100 * 9 + ((1000 * 100usize).div_ceil(64) - (10 * 100usize).div_ceil(64)) * 8);
        assert!(small >= 10 * 100 * 9);
    }

    #[test]
    fn restrict_picks_the_selected_elements_inside() {
        // A 4x6 grid, mask over both axes: the upper-left triangle.
        let bits: Vec<bool> = (0..24).map(|i| i % 6 <= i / 6 * 2).collect();
        let m = Mask::new(vec![0, 1], vec![4, 6], bits.clone()).unwrap();
        let sel = |start, stop, step| AxisSelection { start, stop, step };
        let ya = axis_blocks(sel(0, 4, 1), 0, 4, 4, 4);
        let xa = axis_blocks(sel(1, 6, 2), 0, 6, 6, 6);
        let got = bitmap_of(&m.restrict(&[0, 0], &[ya[0], xa[0]]).unwrap());
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
        assert!(bitmap_of(&none.restrict(&[0, 0], &[ya[0], full[0]]).unwrap()).is_empty());
        assert!(Mask::new(vec![1, 0], vec![6, 4], bits.clone()).is_err());
        assert!(Mask::new(vec![0], vec![5], vec![true; 4]).is_err());
        assert!(m.check(&[4, 7]).is_err() && m.check(&[4, 6]).is_ok());
        assert_eq!(m.count_in(&[0, 0], &[ya[0], xa[0]]), want.len() as u64);
        // Rows judged whole from the prefix counts, and a mask over the first axis only.
        let rows = Mask::new(vec![0], vec![4], vec![true, false, true, true]).unwrap();
        let got = bitmap_of(&rows.restrict(&[0, 0], &[ya[0], full[0]]).unwrap());
        let want: Vec<u32> = [0u32, 2, 3].iter().flat_map(|y| (0..6).map(move |x| y * 6 + x)).collect();
        assert_eq!(got.iter().collect::<Vec<_>>(), want);
        let stripe: Vec<bool> = (0..24).map(|i| i / 6 != 1 && i % 6 >= 2).collect();
        let m = Mask::new(vec![0, 1], vec![4, 6], stripe.clone()).unwrap();
        let got = bitmap_of(&m.restrict(&[0, 0], &[ya[0], full[0]]).unwrap());
        let want: Vec<u32> = (0..24u32).filter(|&p| stripe[p as usize]).collect();
        assert_eq!(got.iter().collect::<Vec<_>>(), want);
    }

    #[test]
    fn an_area_repeats_along_the_axes_before_it() {
        // (time, y, x) = (7, 4, 6), one sub-chunk of (7, 4, 6) or a corner of it; masks over
        // (y, x) (repeated along time), over x alone, and over (time, x) (not repeated).
        let shape = [7u64, 4, 6];
        let tri: Vec<bool> = (0..24).map(|i| i % 6 <= i / 6 * 2).collect();
        let col: Vec<bool> = (0..6).map(|x| x != 2).collect();
        let tx: Vec<bool> = (0..42).map(|i| (i * 5) % 7 < 3).collect();
        let masks = [
            Mask::new(vec![1, 2], vec![4, 6], tri.clone()).unwrap(),
            Mask::new(vec![2], vec![6], col.clone()).unwrap(),
            Mask::new(vec![0, 2], vec![7, 6], tx.clone()).unwrap(),
        ];
        let inside = |k: usize, t: u64, y: u64, x: u64| match k {
            0 => tri[(y * 6 + x) as usize],
            1 => col[x as usize],
            _ => tx[(t * 6 + x) as usize],
        };
        let sel = |start, stop, step| AxisSelection { start, stop, step };
        for (k, m) in masks.iter().enumerate() {
            for (ts, ys, xs) in [(sel(0, 7, 1), sel(0, 4, 1), sel(0, 6, 1)), (sel(1, 7, 3), sel(1, 4, 2), sel(0, 5, 2))]
            {
                let blocks =
                    [axis_blocks(ts, 0, 7, 7, 7)[0], axis_blocks(ys, 0, 4, 4, 4)[0], axis_blocks(xs, 0, 6, 6, 6)[0]];
                let mut want = Vec::new();
                for t in (ts.start..ts.stop).step_by(ts.step as usize) {
                    for y in (ys.start..ys.stop).step_by(ys.step as usize) {
                        for x in (xs.start..xs.stop).step_by(xs.step as usize) {
                            if inside(k, t, y, x) {
                                want.push((t * 24 + y * 6 + x) as u32);
                            }
                        }
                    }
                }
                let got = m.restrict(&[0, 0, 0], &blocks).map(|r| bitmap_of(&r).iter().collect::<Vec<_>>());
                assert_eq!(got.unwrap_or_default(), want, "mask {k}, {ts:?} {ys:?} {xs:?}");
                assert_eq!(m.count_in(&[0, 0, 0], &blocks), want.len() as u64, "mask {k}");
                assert!(m.check(&shape).is_ok());
            }
        }
    }

    proptest::proptest! {
        /// Runs found a word at a time are the runs of the bits, across word edges.
        #[test]
        fn runs_are_the_set_bits(bits in proptest::collection::vec(proptest::bool::weighted(0.7), 1..400),
                                 a in 0usize..400, b in 0usize..400) {
            let (from, to) = (a.min(b).min(bits.len()), a.max(b).min(bits.len()));
            let m = Mask::new(vec![0], vec![bits.len() as u64], bits.clone()).unwrap();
            let mut got = Vec::new();
            for_each_run(&m.words, from, to, |s, e| got.extend(s..e));
            let want: Vec<usize> = (from..to).filter(|&i| bits[i]).collect();
            proptest::prop_assert_eq!(got, want);
        }

        /// Rows longer than a word, cut by the mask: what restrict and count_in find is what
        /// the mask holds.
        #[test]
        fn cut_rows_are_restricted_exactly(bits in proptest::collection::vec(proptest::bool::ANY, 3 * 150),
                                           x0 in 0u64..150, len in 1u64..150) {
            use crate::grid::{axis_blocks, AxisSelection};
            let m = Mask::new(vec![1, 2], vec![3, 150], bits.clone()).unwrap();
            let x1 = (x0 + len).min(150);
            let blocks = [
                axis_blocks(AxisSelection { start: 0, stop: 2, step: 1 }, 0, 2, 2, 2)[0],
                axis_blocks(AxisSelection { start: 0, stop: 3, step: 1 }, 0, 3, 3, 3)[0],
                axis_blocks(AxisSelection { start: x0, stop: x1, step: 1 }, 0, 150, 150, 150)[0],
            ];
            let mut want = Vec::new();
            for t in 0..2u64 {
                for y in 0..3u64 {
                    for x in x0..x1 {
                        if bits[(y * 150 + x) as usize] {
                            want.push((t * 3 * 150 + y * 150 + x) as u32);
                        }
                    }
                }
            }
            let got = m.restrict(&[0, 0, 0], &blocks).map(|r| bitmap_of(&r).iter().collect::<Vec<_>>());
            let all = want.len() as u64 == 2 * 3 * (x1 - x0);
            proptest::prop_assert_eq!(got.unwrap_or_else(|| if all { want.clone() } else { vec![] }), want.clone());
            proptest::prop_assert_eq!(m.count_in(&[0, 0, 0], &blocks), want.len() as u64);
        }
    }
}
