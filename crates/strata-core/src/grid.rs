//! Chunk and sub-chunk geometry, and the n-dimensional block copies that move data
//! between arrays and sub-chunks.

/// Row-major coordinates of linear index `id` in a grid of shape `grid`.
pub fn unravel(mut id: u64, grid: &[u64]) -> Vec<u64> {
    let mut c = vec![0; grid.len()];
    for d in (0..grid.len()).rev() {
        let g = grid[d].max(1);
        c[d] = id % g;
        id /= g;
    }
    c
}

/// Row-major linear index of `coords` in a grid of shape `grid`.
pub fn ravel(coords: &[u64], grid: &[u64]) -> u64 {
    coords.iter().zip(grid).fold(0, |acc, (&c, &g)| acc * g + c)
}

pub fn ceil_div(a: u64, b: u64) -> u64 {
    a.div_ceil(b.max(1))
}

/// Number of chunks along each dimension of a part with extent `extent`.
pub fn chunk_grid(extent: &[u64], chunk: &[u64]) -> Vec<u64> {
    extent.iter().zip(chunk).map(|(&e, &c)| ceil_div(e, c)).collect()
}

/// The linear ids, ascending, of the chunks (of shape `chunk`, in a grid of shape `grid`)
/// that the box of `shape` at `origin` touches.
pub fn chunks_touched(origin: &[u64], shape: &[u64], chunk: &[u64], grid: &[u64]) -> Vec<u64> {
    let first: Vec<u64> = origin.iter().zip(chunk).map(|(&o, &c)| o / c.max(1)).collect();
    let counts: Vec<u64> = (0..origin.len())
        .map(|d| ceil_div(origin[d] + shape[d], chunk[d]).min(grid[d]).saturating_sub(first[d]))
        .collect();
    (0..counts.iter().product::<u64>())
        .map(|i| {
            let at: Vec<u64> = unravel(i, &counts).iter().zip(&first).map(|(i, f)| i + f).collect();
            ravel(&at, grid)
        })
        .collect()
}

/// Sub-chunk grid of a full chunk; edge chunks use the same numbering and simply lack some ids.
pub fn subchunk_grid(chunk: &[u64], sub: &[u64]) -> Vec<u64> {
    chunk.iter().zip(sub).map(|(&c, &s)| ceil_div(c, s)).collect()
}

/// The row-major (C order) strides of a grid of `shape`, in elements.
pub fn row_major_strides(shape: &[u64]) -> Vec<u64> {
    let mut strides = vec![1u64; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        strides[d] = strides[d + 1] * shape[d + 1];
    }
    strides
}

/// Where the element at global index `idx` stands in a read of `sel` (row-major over the
/// selection's counts); `idx` must be one `sel` picks.
pub fn position_in(sel: &[AxisSelection], idx: impl IntoIterator<Item = u64>) -> u64 {
    sel.iter().zip(idx).fold(0, |acc, (s, i)| acc * s.count() + (i - s.start) / s.step.max(1))
}

/// Calls `visit` with the index and the flat index (row-major over `shape`) of every element
/// `sel` picks, in order, until it returns false.
pub fn for_each_flat(shape: &[u64], sel: &[AxisSelection], mut visit: impl FnMut(&[u64], u64) -> bool) {
    if sel.iter().any(|s| s.count() == 0) {
        return;
    }
    let strides = row_major_strides(shape);
    let mut idx: Vec<u64> = sel.iter().map(|s| s.start).collect();
    loop {
        if !visit(&idx, idx.iter().zip(&strides).map(|(i, s)| i * s).sum()) {
            return;
        }
        let mut d = sel.len();
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            idx[d] += sel[d].step.max(1);
            if idx[d] < sel[d].stop {
                break;
            }
            idx[d] = sel[d].start;
        }
    }
}

/// The flat indices (row-major over `shape`) of every element `sel` picks, in order: a row
/// of the last axis at a time.
pub fn flat_indices(shape: &[u64], sel: &[AxisSelection]) -> Vec<u64> {
    let Some((last, outer)) = sel.split_last() else { return vec![0] };
    let count: u64 = sel.iter().map(|s| s.count()).product();
    let mut out = Vec::with_capacity(count as usize);
    let row = shape[shape.len() - 1];
    for_each_flat(&shape[..shape.len() - 1], outer, |_, f| {
        let base = f * row;
        out.extend((last.start..last.stop).step_by(last.step.max(1) as usize).map(|i| base + i));
        true
    });
    out
}

/// The selection `start, start+step, ... < stop` along one dimension (global indices).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AxisSelection {
    pub start: u64,
    pub stop: u64,
    pub step: u64,
}

impl AxisSelection {
    pub fn count(&self) -> u64 {
        if self.stop <= self.start {
            0
        } else {
            (self.stop - self.start).div_ceil(self.step)
        }
    }

    /// First selected index `>= lo`, if it is below `hi`.
    pub(crate) fn first_in(&self, lo: u64, hi: u64) -> Option<u64> {
        let first =
            if lo <= self.start { self.start } else { self.start + (lo - self.start).div_ceil(self.step) * self.step };
        (first < hi.min(self.stop)).then_some(first)
    }
}

/// One sub-chunk's extent along one axis, and which of its elements the selection takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AxisBlock {
    pub chunk: u64,
    pub sub: u64,
    /// Length of the sub-chunk along this axis.
    pub len: u64,
    /// Offset inside the sub-chunk of the first selected element.
    pub first: u64,
    /// Number of selected elements in the sub-chunk.
    pub count: u64,
    /// Position of the first selected element in the output.
    pub out: u64,
    /// Distance between selected elements.
    pub step: u64,
}

/// The sub-chunks along one axis of a part `[offset, offset+extent)` that the selection hits.
pub fn axis_blocks(sel: AxisSelection, offset: u64, extent: u64, chunk: u64, sub: u64) -> Vec<AxisBlock> {
    let mut blocks = Vec::new();
    let lo = sel.start.max(offset);
    let hi = sel.stop.min(offset + extent);
    if lo >= hi {
        return blocks;
    }
    let (c0, c1) = ((lo - offset) / chunk, (hi - 1 - offset) / chunk);
    for c in c0..=c1 {
        let chunk_lo = offset + c * chunk;
        let chunk_hi = offset + ((c + 1) * chunk).min(extent);
        let s0 = lo.max(chunk_lo).saturating_sub(chunk_lo) / sub;
        let s1 = (hi.min(chunk_hi) - 1 - chunk_lo) / sub;
        for s in s0..=s1 {
            let b_lo = chunk_lo + s * sub;
            let b_hi = (b_lo + sub).min(chunk_hi);
            if let Some(first) = sel.first_in(b_lo, b_hi) {
                let end = b_hi.min(sel.stop);
                let count = (end - first).div_ceil(sel.step);
                blocks.push(AxisBlock {
                    chunk: c,
                    sub: s,
                    len: b_hi - b_lo,
                    first: first - b_lo,
                    count,
                    out: (first - sel.start) / sel.step,
                    step: sel.step,
                });
            }
        }
    }
    blocks
}

/// Copies a `count`-shaped block of `elem`-byte elements from `src` (shape `src_shape`,
/// starting at `src_start`, stepping `src_step`) into `dst` (shape `dst_shape`, starting at
/// `dst_start`, contiguous).
#[allow(clippy::too_many_arguments)]
pub fn copy_block(
    src: &[u8],
    src_shape: &[u64],
    src_start: &[u64],
    src_step: &[u64],
    dst: &mut [u8],
    dst_shape: &[u64],
    dst_start: &[u64],
    count: &[u64],
    elem: usize,
) {
    // SAFETY: `dst` is an exclusive slice of `dst.len()` bytes.
    unsafe {
        copy_block_raw(
            src,
            src_shape,
            src_start,
            src_step,
            dst.as_mut_ptr(),
            dst.len(),
            dst_shape,
            dst_start,
            count,
            elem,
        )
    }
}

/// Copies one element, `bytes`, to `dst`: without a call to `memcpy` for the usual sizes.
///
/// # Safety
/// `dst` must be valid for writes of `bytes.len()` bytes that nothing else accesses.
#[inline(always)]
unsafe fn copy_element(bytes: &[u8], dst: *mut u8) {
    let src = bytes.as_ptr();
    // SAFETY: both sides hold `bytes.len()` bytes (the caller's contract for `dst`).
    unsafe {
        match bytes.len() {
            8 => dst.cast::<u64>().write_unaligned(src.cast::<u64>().read_unaligned()),
            4 => dst.cast::<u32>().write_unaligned(src.cast::<u32>().read_unaligned()),
            2 => dst.cast::<u16>().write_unaligned(src.cast::<u16>().read_unaligned()),
            1 => *dst = *src,
            n => std::ptr::copy_nonoverlapping(src, dst, n),
        }
    }
}

/// [`copy_block`] into a raw buffer, so that parallel tasks can fill disjoint parts of one
/// output. Every write is bounds-checked against `dst_len`.
///
/// # Safety
/// `dst` must be valid for writes of `dst_len` bytes, and no other thread may access the
/// bytes this call writes while it runs.
#[allow(clippy::too_many_arguments)]
pub unsafe fn copy_block_raw(
    src: &[u8],
    src_shape: &[u64],
    src_start: &[u64],
    src_step: &[u64],
    dst: *mut u8,
    dst_len: usize,
    dst_shape: &[u64],
    dst_start: &[u64],
    count: &[u64],
    elem: usize,
) {
    let put = |dof: usize, bytes: &[u8]| {
        assert!(dof + bytes.len() <= dst_len, "copy_block: destination overflow");
        // SAFETY: in bounds (checked above); exclusivity is the caller's contract.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), dst.add(dof), bytes.len()) }
    };
    let put_one = |dof: usize, bytes: &[u8]| {
        assert!(dof + bytes.len() <= dst_len, "copy_block: destination overflow");
        // SAFETY: as for `put`.
        unsafe { copy_element(bytes, dst.add(dof)) }
    };
    let n = count.len();
    if count.contains(&0) {
        return;
    }
    if n == 0 {
        put(0, &src[..elem]);
        return;
    }
    let strides = |shape: &[u64]| {
        let mut s = vec![1u64; n];
        for d in (0..n.saturating_sub(1)).rev() {
            s[d] = s[d + 1] * shape[d + 1];
        }
        s
    };
    let (ss, ds) = (strides(src_shape), strides(dst_shape));
    // The first row's offsets (in elements), then moved by each outer step: recomputing
    // them from every index took as long as copying a row of a few dozen elements.
    let mut so: u64 = (0..n).map(|d| src_start[d] * ss[d]).sum();
    let mut dof: u64 = (0..n).map(|d| dst_start[d] * ds[d]).sum();
    let src_move: Vec<u64> = (0..n).map(|d| src_step[d] * ss[d]).collect();
    // Trailing axes one element long add nothing to walk: rows run along the last axis
    // that has more (a block one corner wide copies columns of corners, not single ones).
    let m = (1..=n).rev().find(|&m| count[m - 1] > 1).unwrap_or(1);
    let inner = count[m - 1] as usize;
    let (src_inner, dst_inner) = (src_move[m - 1] as usize * elem, ds[m - 1] as usize * elem);
    let mut idx = vec![0u64; m - 1];
    loop {
        let (s0, d0) = (so as usize * elem, dof as usize * elem);
        if src_inner == elem && dst_inner == elem {
            put(d0, &src[s0..s0 + inner * elem]);
        } else {
            for i in 0..inner {
                let s = s0 + i * src_inner;
                put_one(d0 + i * dst_inner, &src[s..s + elem]);
            }
        }
        // Advance the outer index like an odometer, the offsets with it.
        let mut d = m - 1;
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            idx[d] += 1;
            if idx[d] < count[d] {
                so += src_move[d];
                dof += ds[d];
                break;
            }
            so -= (count[d] - 1) * src_move[d];
            dof -= (count[d] - 1) * ds[d];
            idx[d] = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// Blocks of any shape, steps and element size, trailing axes one element long
        /// among them (a cell's corners taken one at a time), land where element-by-element
        /// copying puts them.
        #[test]
        fn blocks_are_copied_element_for_element(
            dims in proptest::collection::vec((1u64..7, 0u64..3, 1u64..3, 0u64..3), 1..5),
            elem in proptest::sample::select(vec![1usize, 2, 3, 4, 8]),
            ones in 0usize..3,
        ) {
            // Per axis: the count, the source's start and step, the destination's margin;
            // the last `ones` axes copy one element.
            let n = dims.len();
            let count: Vec<u64> = dims.iter().enumerate().map(|(d, x)| if d + ones >= n { 1 } else { x.0 }).collect();
            let src_start: Vec<u64> = dims.iter().map(|x| x.1).collect();
            let src_step: Vec<u64> = dims.iter().map(|x| x.2).collect();
            let src_shape: Vec<u64> = (0..n).map(|d| src_start[d] + (count[d] - 1) * src_step[d] + 1 + dims[d].3).collect();
            let dst_start: Vec<u64> = dims.iter().map(|x| x.3).collect();
            let dst_shape: Vec<u64> = (0..n).map(|d| dst_start[d] + count[d] + 1).collect();
            let src: Vec<u8> = (0..src_shape.iter().product::<u64>() as usize * elem).map(|i| (i * 7 + 1) as u8).collect();
            let size = dst_shape.iter().product::<u64>() as usize * elem;
            let (mut fast, mut slow) = (vec![0u8; size], vec![0u8; size]);
            copy_block(&src, &src_shape, &src_start, &src_step, &mut fast, &dst_shape, &dst_start, &count, elem);
            // Element by element, as copy_block's doc says.
            let flat = |shape: &[u64], at: &[u64]| at.iter().zip(shape).fold(0u64, |acc, (&i, &n)| acc * n + i) as usize;
            for k in 0..count.iter().product::<u64>() {
                let at = unravel(k, &count);
                let s: Vec<u64> = (0..n).map(|d| src_start[d] + at[d] * src_step[d]).collect();
                let t: Vec<u64> = (0..n).map(|d| dst_start[d] + at[d]).collect();
                let (so, to) = (flat(&src_shape, &s) * elem, flat(&dst_shape, &t) * elem);
                slow[to..to + elem].copy_from_slice(&src[so..so + elem]);
            }
            proptest::prop_assert_eq!(fast, slow);
        }
    }

    #[test]
    fn flat_indices_are_the_walk_of_every_picked_element() {
        let shape = [4u64, 5, 6];
        let sel = |start, stop, step| AxisSelection { start, stop, step };
        for s in [
            vec![sel(0, 4, 1), sel(0, 5, 1), sel(0, 6, 1)],
            vec![sel(1, 4, 2), sel(2, 5, 1), sel(1, 6, 3)],
            vec![sel(3, 4, 1), sel(0, 0, 1), sel(0, 6, 1)],
        ] {
            let mut walked = Vec::new();
            for_each_flat(&shape, &s, |idx, f| {
                assert_eq!(f, ravel(idx, &shape));
                walked.push(f);
                true
            });
            let want: Vec<u64> = (0..shape.iter().product::<u64>())
                .filter(|&f| {
                    let idx = unravel(f, &shape);
                    idx.iter().zip(&s).all(|(&i, a)| i >= a.start && i < a.stop && (i - a.start) % a.step == 0)
                })
                .collect();
            assert_eq!(walked, want);
            assert_eq!(flat_indices(&shape, &s), want);
        }
        assert_eq!(flat_indices(&[], &[]), vec![0]);
    }

    #[test]
    fn axis_blocks_cover_exactly_the_selection() {
        for (start, stop, step) in [(0, 100, 1), (3, 97, 7), (10, 11, 1), (0, 100, 33), (50, 50, 1), (99, 100, 5)] {
            let sel = AxisSelection { start, stop, step };
            for (offset, extent) in [(0, 100), (20, 40)] {
                let blocks = axis_blocks(sel, offset, extent, 16, 5);
                let mut got = Vec::new();
                for b in &blocks {
                    for k in 0..b.count {
                        let global = offset + b.chunk * 16 + b.sub * 5 + b.first + k * step;
                        got.push((global, b.out + k));
                    }
                }
                let want: Vec<(u64, u64)> = (start..stop)
                    .step_by(step as usize)
                    .filter(|&i| i >= offset && i < offset + extent)
                    .map(|i| (i, (i - start) / step))
                    .collect();
                assert_eq!(got, want, "sel {start}:{stop}:{step} part {offset}+{extent}");
            }
        }
    }

    #[test]
    fn ravel_inverts_unravel() {
        let grid = [3, 4, 5];
        for id in 0..60 {
            assert_eq!(ravel(&unravel(id, &grid), &grid), id);
        }
    }
}
