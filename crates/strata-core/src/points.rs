//! Points of a query result: from flat element indices (row-major, ascending) to the index
//! along a dimension and the coordinate value there. Shared by `Dataset.query` and SQL, so
//! both build their columns the same way.

use crate::error::{Error, Result};
use crate::fastdiv::FastDiv;
use crate::nontemporal::Streamed;
use rayon::prelude::*;
use std::mem::MaybeUninit;

/// Divisors for dimension `d` of a grid of `shape`: the stride of `d` and its extent.
pub(crate) fn divisors(d: usize, shape: &[u64]) -> (FastDiv, FastDiv) {
    // Flat indices into a grid of fewer than 2^32 elements divide by multiplication.
    let small = shape.iter().product::<u64>() <= u64::from(u32::MAX);
    (FastDiv::new(shape[d + 1..].iter().product(), small), FastDiv::new(shape[d], small))
}

/// The index along dimension `d` of each flat index into a grid of `shape`.
pub fn axis_indices(d: usize, shape: &[u64], flat: &[u64]) -> Vec<u64> {
    let (stride, extent) = divisors(d, shape);
    flat.par_iter()
        .with_min_len(1 << 16)
        .map(|&f| {
            let q = stride.quotient(f);
            q - extent.quotient(q) * extent.d
        })
        .collect()
}

/// `values[(f / stride) % extent]` for each flat index `f` (ascending): the coordinate of
/// dimension `d` at each point. A value holds over a block of `stride` consecutive indices,
/// and along the last dimension (stride 1) the index is the offset into a row of `extent`;
/// so the divisions are made once per block met rather than once per point.
///
/// `values` must hold at least `shape[d]` elements. (Splitting the work across threads
/// gained nothing on 13M points: the loop is bound by memory, not by the divisions.)
pub(crate) fn pick<T: Copy + Default>(values: &[T], d: usize, shape: &[u64], flat: &[u64]) -> Vec<T> {
    // Each slot written once, not zeroed first (a pass of its own over fresh pages).
    let mut out: Vec<T> = crate::large::with_capacity(flat.len());
    let slots = &mut out.spare_capacity_mut()[..flat.len()];
    pick_to(values, d, shape, flat, slots.iter_mut(), |o, v| _ = o.write(v));
    // SAFETY: `pick_to` writes one slot per flat index, and there are as many slots.
    unsafe { out.set_len(flat.len()) };
    out
}

macro_rules! pick_words {
    ($($name:ident: $t:ty),*) => {$(
        /// `pick` for elements of this width, whatever their type: compiled here, at the
        /// engine's optimization, for the crates that build columns of every type (SQL).
        pub fn $name(values: &[$t], d: usize, shape: &[u64], flat: &[u64]) -> Vec<$t> {
            pick(values, d, shape, flat)
        }
    )*};
}
pick_words!(pick_u8: u8, pick_u16: u16, pick_u32: u32, pick_u64: u64);

/// Puts the coordinate of each point into its slot of `slots` (one per flat index): written
/// in place, with no capacity check per point (pushing one at a time took about twice as
/// long).
fn pick_to<'a, T: Copy + Default, O: ?Sized + 'a>(
    values: &[T],
    d: usize,
    shape: &[u64],
    flat: &[u64],
    slots: impl Iterator<Item = &'a mut O>,
    put: impl Fn(&mut O, T),
) {
    let (stride, extent) = divisors(d, shape);
    let (mut lo, mut hi) = (1u64, 0u64);
    if stride.d == 1 {
        for (o, &f) in slots.zip(flat) {
            if f < lo || f >= hi {
                lo = extent.quotient(f) * extent.d;
                hi = lo + extent.d;
            }
            put(o, values[(f - lo) as usize]);
        }
    } else {
        let mut current = T::default();
        for (o, &f) in slots.zip(flat) {
            if f < lo || f >= hi {
                let q = stride.quotient(f);
                lo = q * stride.d;
                hi = lo + stride.d;
                current = values[(q - extent.quotient(q) * extent.d) as usize];
            }
            put(o, current);
        }
    }
}

/// [`pick`] for coordinate values given as native-order bytes of `itemsize` (1, 2, 4 or
/// 8) each, written into `out` (`itemsize` bytes per flat index, every byte written);
/// `streamed`, with stores around the cache (see [`crate::nontemporal`]; the caller
/// fences). Checked: `values` holds `shape[d]` elements and `out` one element per flat
/// index; the flat indices are the caller's to check ([`check_flat`]), once for every
/// column it picks.
pub(crate) fn pick_bytes(
    values: &[u8],
    itemsize: usize,
    d: usize,
    shape: &[u64],
    flat: &[u64],
    out: &mut [MaybeUninit<u8>],
    streamed: bool,
) -> Result<()> {
    check_axis(d, shape)?;
    if ![1, 2, 4, 8].contains(&itemsize) || values.len() as u64 != shape[d] * itemsize as u64 {
        return Err(Error::InvalidArgument(format!(
            "coordinate values must hold {} elements of 1, 2, 4 or 8 bytes",
            shape[d]
        )));
    }
    if out.len() != flat.len() * itemsize {
        return Err(Error::InvalidArgument(format!("{} bytes for {} coordinate values", out.len(), flat.len())));
    }
    macro_rules! picked {
        ($t:ty) => {{
            const N: usize = std::mem::size_of::<$t>();
            let typed: Vec<$t> =
                values.chunks_exact(N).map(|b| <$t>::from_ne_bytes(b.try_into().unwrap_or_default())).collect();
            // SAFETY: MaybeUninit<u8> and MaybeUninit<$t> hold any bytes; align_to_mut
            // leaves unaligned ends out of the middle.
            let (head, slots, tail) = unsafe { out.align_to_mut::<MaybeUninit<$t>>() };
            if streamed && head.is_empty() && tail.is_empty() {
                pick_to(&typed, d, shape, flat, slots.iter_mut(), |o, v: $t| Streamed::store(o, v));
            } else {
                // Fixed-size slots: a store of N bytes each (slices of N bytes took a
                // call to memmove per point).
                let (slots, _) = out.as_chunks_mut::<N>();
                pick_to(&typed, d, shape, flat, slots.iter_mut(), |o: &mut [MaybeUninit<u8>; N], v: $t| {
                    *o = v.to_ne_bytes().map(MaybeUninit::new)
                });
            }
        }};
    }
    match itemsize {
        1 => picked!(u8),
        2 => picked!(u16),
        4 => picked!(u32),
        _ => picked!(u64),
    }
    Ok(())
}

/// A column of `es`-byte values, the i-th copied from element j of the slice `at` gives as
/// its i-th (slice, j). The usual widths make each copy a single move, not a call to memcpy.
pub(crate) fn picked<'a>(es: usize, at: impl ExactSizeIterator<Item = (&'a [u8], usize)>) -> Vec<u8> {
    fn fixed<'a, const W: usize>(at: impl ExactSizeIterator<Item = (&'a [u8], usize)>) -> Vec<u8> {
        // Written once each, not zeroed first: zeroing a fresh column was a pass of its own.
        let mut col: Vec<[u8; W]> = crate::large::with_capacity(at.len());
        let mut written = 0;
        for (slot, (src, j)) in col.spare_capacity_mut().iter_mut().zip(at) {
            let mut v = [0u8; W];
            v.copy_from_slice(&src[j * W..(j + 1) * W]);
            slot.write(v);
            written += 1;
        }
        // SAFETY: the first `written` slots were written just above.
        unsafe { col.set_len(written) };
        col.into_flattened()
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

/// The elements at positions `at` of `raw` (elements of `itemsize` bytes), in that order;
/// an error when a position lies past the end of `raw`.
pub fn elements_at(raw: &[u8], itemsize: usize, at: &[u64]) -> Result<Vec<u8>> {
    let n = raw.len() / itemsize.max(1);
    if let Some(&bad) = at.iter().find(|&&p| p >= n as u64) {
        return Err(Error::InvalidArgument(format!("position {bad} is past the {n} elements read")));
    }
    Ok(picked(itemsize.max(1), at.iter().map(|&p| (raw, p as usize))))
}

/// Writes `from` into `to`, element by element (the two are as long): a column's place is
/// filled this way before the column's length covers it.
pub(crate) fn write_all<T: Copy>(to: &mut [MaybeUninit<T>], from: &[T]) {
    to.iter_mut().zip(from).for_each(|(t, f)| _ = t.write(*f));
}

/// An error unless `d` is a dimension of `shape`.
pub fn check_axis(d: usize, shape: &[u64]) -> Result<()> {
    if d >= shape.len() {
        return Err(Error::InvalidArgument(format!("dimension {d} of a {}-D grid", shape.len())));
    }
    Ok(())
}

/// An error unless every flat index lies inside a grid of `shape`.
pub fn check_flat(shape: &[u64], flat: &[u64]) -> Result<()> {
    let total: u64 = shape.iter().product();
    if flat.iter().any(|&f| f >= total) {
        return Err(Error::InvalidArgument(format!("a flat index is outside the grid of {total} elements")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Picked both ways (as usual and around the cache), which must agree.
    fn picked_bytes(values: &[u8], itemsize: usize, d: usize, shape: &[u64], flat: &[u64]) -> Result<Vec<u8>> {
        check_flat(shape, flat)?;
        let pick_with = |streamed: bool| -> Result<Vec<u8>> {
            let mut out = vec![MaybeUninit::new(0u8); flat.len() * itemsize.max(1)];
            pick_bytes(values, itemsize, d, shape, flat, &mut out, streamed)?;
            crate::nontemporal::fence();
            // SAFETY: initialized above, and written by the pick.
            Ok(out.into_iter().map(|b| unsafe { b.assume_init() }).collect())
        };
        let usual = pick_with(false)?;
        assert_eq!(pick_with(true)?, usual);
        Ok(usual)
    }

    #[test]
    fn picks_and_indices_match_unravel() {
        let shape = [3u64, 4, 5];
        let flat: Vec<u64> = (0..60).filter(|f| f % 7 != 3).collect();
        for d in 0..3 {
            let coord: Vec<i32> = (0..shape[d] as i32).map(|i| i * 10 + d as i32).collect();
            let want_idx: Vec<u64> =
                flat.iter().map(|&f| (f / shape[d + 1..].iter().product::<u64>()) % shape[d]).collect();
            assert_eq!(axis_indices(d, &shape, &flat), want_idx);
            let want: Vec<i32> = want_idx.iter().map(|&i| coord[i as usize]).collect();
            assert_eq!(pick(&coord, d, &shape, &flat), want);
            // Every element width: each point gets its coordinate's bytes.
            for itemsize in [1usize, 2, 4, 8] {
                let element = |i: u64| ((i * 10 + d as u64) * 0x0101_0101_0101_0101).to_ne_bytes()[..itemsize].to_vec();
                let bytes: Vec<u8> = (0..shape[d]).flat_map(element).collect();
                let want: Vec<u8> = want_idx.iter().flat_map(|&i| element(i)).collect();
                assert_eq!(picked_bytes(&bytes, itemsize, d, &shape, &flat).unwrap(), want, "{itemsize} bytes");
            }
        }
        assert!(pick::<u8>(&[1, 2], 0, &[2], &[]).is_empty());
        // Elements by position, every width; a position past the end is an error.
        for itemsize in [1usize, 2, 3, 4, 8] {
            let raw: Vec<u8> = (0..10 * itemsize).map(|i| i as u8).collect();
            let at = [7u64, 0, 7, 9];
            let want: Vec<u8> = at.iter().flat_map(|&p| raw[p as usize * itemsize..][..itemsize].to_vec()).collect();
            assert_eq!(elements_at(&raw, itemsize, &at).unwrap(), want, "{itemsize} bytes");
            assert!(elements_at(&raw, itemsize, &[10]).is_err());
        }
        // Bad arguments are errors, not panics.
        assert!(picked_bytes(&[0; 8], 4, 0, &[3], &[0]).is_err());
        assert!(picked_bytes(&[0; 12], 3, 0, &[4], &[0]).is_err());
        assert!(picked_bytes(&[0; 12], 4, 0, &[3], &[3]).is_err());
        assert!(picked_bytes(&[0; 12], 4, 1, &[3], &[0]).is_err());
        let mut short = [MaybeUninit::new(0u8); 3];
        assert!(pick_bytes(&[0; 12], 4, 0, &[3], &[0], &mut short, false).is_err());
        // Large enough for axis_indices to split across threads.
        let big = [600u64, 700, 3];
        let flat: Vec<u64> = (0..big.iter().product::<u64>()).filter(|f| f % 3 != 1).collect();
        let want: Vec<u64> = flat.iter().map(|&f| (f / 3) % 700).collect();
        assert_eq!(axis_indices(1, &big, &flat), want);
    }
}
