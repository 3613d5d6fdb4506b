//! Putting a result in flat (row-major) order: positions per box become global flat
//! indices, joined band by band.

use super::QueryBox;
use crate::fastdiv::FastDiv;
use rayon::prelude::*;
use roaring::RoaringBitmap;
use std::mem::MaybeUninit;

/// The union of disjoint-or-not position sets. Run containers are expanded first: the
/// crate inserts into a run container element by element, which dominated query time.
pub(super) fn union_all<'a>(parts: impl IntoIterator<Item = &'a RoaringBitmap>) -> RoaringBitmap {
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
pub(super) fn flat_of(b: &QueryBox, shape: &[u64], local: impl Iterator<Item = u32>) -> Vec<u64> {
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
pub(super) trait Flat: Copy + Send {
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
/// interleave): each band is ordered on its own, bands in parallel, each straight into its
/// own stretch of the result. (Sorting each band into a vector of its own and joining them
/// afterwards copied the result once more into fresh pages: a tenth of a 50% points query
/// on ERSST x4.) `shape` is the grid's; `parts` are (box start, elements).
pub(super) fn sorted_by_bands<'s, T: Flat>(parts: impl Iterator<Item = (&'s [u64], Vec<T>)>, shape: &[u64]) -> Vec<T> {
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
    let bands: Vec<_> = bands.into_values().collect();
    let total: usize = bands.iter().flatten().map(|p| p.1.len()).sum();
    let mut out: Vec<T> = crate::large::with_capacity(total);
    let mut rest = &mut out.spare_capacity_mut()[..total];
    let mut slots = Vec::with_capacity(bands.len());
    for band in &bands {
        let (here, after) = rest.split_at_mut(band.iter().map(|p| p.1.len()).sum());
        slots.push(here);
        rest = after;
    }
    bands.into_par_iter().zip(slots).for_each(|(parts, slot)| sort_band_into(parts, div, slot));
    // SAFETY: the slots partition the first `total` elements of the buffer and
    // `sort_band_into` writes every element of its slot.
    unsafe { out.set_len(total) };
    out
}

/// Writes one band's elements into `out` (exactly as many slots as elements: every slot is
/// written) in ascending flat order, by a counting sort on their rows (all axes but the
/// last): a band's boxes cover a few rows each, so this is linear where a comparison sort
/// was 13% of a selective query. Taking the boxes by their start along the last axis, the
/// boxes sharing a row land there in order, so rows need sorting only when a box's own
/// elements were not ascending. `parts` are (start along the last axis, elements).
fn sort_band_into<T: Flat>(mut parts: Vec<(u64, Vec<T>)>, div: FastDiv, out: &mut [MaybeUninit<T>]) {
    parts.sort_by_key(|p| p.0);
    let n: usize = parts.iter().map(|p| p.1.len()).sum();
    assert_eq!(n, out.len(), "a band's slots hold its elements");
    if n == 0 {
        return;
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
        for (slot, e) in out.iter_mut().zip(parts.iter().flat_map(|p| &p.1)) {
            slot.write(*e);
        }
        // SAFETY: the parts hold n elements and `out` n slots, each written just above.
        let all = unsafe { init(out) };
        if !(ascending && all.is_sorted_by_key(Flat::flat)) {
            if all.len() > 1 << 16 {
                all.par_sort_unstable_by_key(Flat::flat);
            } else {
                all.sort_unstable_by_key(Flat::flat);
            }
        }
        return;
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
    for p in &parts {
        for e in &p.1 {
            let r = (div.quotient(e.flat()) - first_row) as usize;
            out[next[r]].write(*e);
            next[r] += 1;
        }
    }
    // SAFETY: the row counts sum to n and each row's slots were written once each (`next`
    // ends at the next row's start), so every slot is written.
    let all = unsafe { init(out) };
    if !ascending {
        for r in 0..rows {
            all[ends[r]..ends[r + 1]].sort_unstable_by_key(Flat::flat);
        }
    }
}

/// `slots` as values.
///
/// # Safety
/// Every slot must have been written.
unsafe fn init<T: Copy>(slots: &mut [MaybeUninit<T>]) -> &mut [T] {
    // SAFETY: every slot is written (the caller's promise), MaybeUninit<T> has T's layout,
    // and T: Copy has no drop to run twice.
    unsafe { std::slice::from_raw_parts_mut(slots.as_mut_ptr().cast::<T>(), slots.len()) }
}
