//! Large buffers on huge pages. A query's piece fills buffers of megabytes (the values
//! read, the positions kept, the result's columns) and frees them; glibc hands such
//! buffers back to the kernel, so the next piece takes a page fault per 4 KiB to touch
//! them again — a SQL points query on ERSST took ~9k faults. NumPy avoids this for its
//! own arrays by asking for transparent huge pages (`madvise(MADV_HUGEPAGE)`), which is
//! what the kernel's default `madvise` mode waits for; these buffers ask the same, so a
//! fault brings in 2 MiB. Elsewhere (other systems, THP off) they are plain vectors.

/// Buffers below this many bytes stay on ordinary pages (NumPy's threshold too).
const HUGE_MIN: usize = 4 << 20;

/// `n` zeroed elements.
pub(crate) fn zeroed<T: Copy + Default>(n: usize) -> Vec<T> {
    let mut v = with_capacity(n);
    v.resize(n, T::default());
    v
}

/// An empty vector with room for `n` elements, its pages not yet touched.
pub(crate) fn with_capacity<T>(n: usize) -> Vec<T> {
    let v: Vec<T> = Vec::with_capacity(n);
    advise(v.as_ptr() as usize, v.capacity().saturating_mul(std::mem::size_of::<T>()));
    v
}

/// Makes room in `v` for `additional` more elements (amortized, as `Vec::reserve`),
/// asking for huge pages over the grown buffer.
pub(crate) fn reserve<T>(v: &mut Vec<T>, additional: usize) {
    if v.capacity() - v.len() >= additional {
        return;
    }
    v.reserve(additional);
    advise(v.as_ptr() as usize, v.capacity().saturating_mul(std::mem::size_of::<T>()));
}

/// Makes room in `v` for `additional` more elements if memory allows (a refusal leaves
/// `v` as it was), asking for huge pages over it. An empty `v` starts in a column handed
/// back ([`crate::recycle`]) when one fits.
pub(crate) fn try_reserve<T: crate::recycle::Recyclable>(v: &mut Vec<T>, additional: usize) {
    if v.capacity() == 0 {
        if let Some(column) = crate::recycle::take(additional) {
            *v = column;
            return;
        }
    }
    if v.try_reserve_exact(additional).is_ok() {
        advise(v.as_ptr() as usize, v.capacity().saturating_mul(std::mem::size_of::<T>()));
    }
}

fn advise(addr: usize, len: usize) {
    const HUGE_PAGE: usize = 2 << 20;
    if len >= HUGE_MIN {
        // Changes how the kernel backs those pages, never their contents; a refusal (THP
        // compiled out, an old kernel) leaves ordinary pages.
        #[cfg(target_os = "linux")]
        advise_within(addr, len, HUGE_PAGE, libc::MADV_HUGEPAGE);
        #[cfg(not(target_os = "linux"))]
        let _ = (addr, HUGE_PAGE);
    }
}

/// `madvise(advice)` over the whole `unit`-aligned pages inside `[addr, addr + len)`:
/// madvise wants an aligned start, and the advice must not reach memory the buffer does
/// not own. The result is ignored: every advice given here is a hint.
#[cfg(target_os = "linux")]
pub(crate) fn advise_within(addr: usize, len: usize, unit: usize, advice: libc::c_int) {
    let start = addr.next_multiple_of(unit);
    let end = (addr + len) / unit * unit;
    if end > start {
        // SAFETY: [start, end) lies inside the caller's own allocation (its callers pass a
        // vector's buffer and capacity); the advices used (MADV_HUGEPAGE, MADV_FREE on a
        // buffer holding no elements) leave the memory valid to use.
        unsafe {
            libc::madvise(start as *mut libc::c_void, end - start, advice);
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn buffers_are_zeroed_and_sized() {
        for n in [0usize, 1, 1000, 3 << 20] {
            let v: Vec<u32> = super::zeroed(n);
            assert_eq!(v.len(), n);
            assert!(v.iter().all(|&x| x == 0));
            let w: Vec<u64> = super::with_capacity(n);
            assert!(w.is_empty() && w.capacity() >= n);
        }
    }
}
