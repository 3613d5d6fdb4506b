//! Stores that bypass the cache, for a points result's joined columns. Those columns are
//! hundreds of MB written once and read by the caller later: an ordinary store first reads
//! each cache line it writes (to own it), so filling them moved every byte twice, while
//! SQL's per-piece batches land in memory malloc just freed, still cached. On x86-64 the
//! writes go straight to memory (`movnti`); elsewhere they are ordinary stores.

use std::mem::MaybeUninit;

/// A value that can be stored around the cache: 1, 2, 4 or 8 bytes.
pub(crate) trait Streamed: Copy {
    /// Writes `v` to `slot` (around the cache where the width allows it).
    fn store(slot: &mut MaybeUninit<Self>, v: Self);
}

macro_rules! plain {
    ($($t:ty),*) => {$(
        impl Streamed for $t {
            #[inline(always)]
            fn store(slot: &mut MaybeUninit<Self>, v: Self) {
                slot.write(v);
            }
        }
    )*};
}
plain!(u8, u16);

#[cfg(target_arch = "x86_64")]
impl Streamed for u32 {
    #[inline(always)]
    fn store(slot: &mut MaybeUninit<Self>, v: Self) {
        // SAFETY: `slot` is a valid, exclusive place for a u32; movnti needs no alignment
        // (and SSE2 is part of x86-64). `fence` orders these stores before the result is
        // handed on.
        unsafe { std::arch::x86_64::_mm_stream_si32(slot.as_mut_ptr().cast(), v as i32) }
    }
}

#[cfg(target_arch = "x86_64")]
impl Streamed for u64 {
    #[inline(always)]
    fn store(slot: &mut MaybeUninit<Self>, v: Self) {
        // SAFETY: as for u32.
        unsafe { std::arch::x86_64::_mm_stream_si64(slot.as_mut_ptr().cast(), v as i64) }
    }
}

#[cfg(not(target_arch = "x86_64"))]
plain!(u32, u64);

/// Copies `from` into `to` (of equal length) around the cache: 8-byte words from where
/// `to` is aligned (the words of `from` are read at any alignment), the ends as ordinary
/// stores.
pub(crate) fn copy(to: &mut [MaybeUninit<u8>], from: &[u8]) {
    debug_assert_eq!(to.len(), from.len());
    let n = to.len().min(from.len());
    let (to, from) = (&mut to[..n], &from[..n]);
    let head = to.as_ptr().align_offset(8).min(n);
    if n - head < 64 {
        crate::points::write_all(to, from);
        return;
    }
    let (to_head, rest) = to.split_at_mut(head);
    crate::points::write_all(to_head, &from[..head]);
    let words = rest.len() / 8;
    let (to_words, to_tail) = rest.split_at_mut(words * 8);
    let (from_words, from_tail) = from[head..].split_at(words * 8);
    // SAFETY: `to_words` starts 8-byte aligned (`head` above) and holds `words` u64s;
    // MaybeUninit<u64> has u64's layout.
    let slots: &mut [MaybeUninit<u64>] = unsafe { std::slice::from_raw_parts_mut(to_words.as_mut_ptr().cast(), words) };
    for (slot, w) in slots.iter_mut().zip(from_words.chunks_exact(8)) {
        u64::store(slot, u64::from_ne_bytes(w.try_into().unwrap_or_default()));
    }
    crate::points::write_all(to_tail, from_tail);
}

/// Makes this thread's stores around the cache visible before what follows (a handover
/// to another thread must come after it).
pub(crate) fn fence() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: sfence has no operands and no preconditions.
    unsafe {
        std::arch::x86_64::_mm_sfence()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_every_byte_at_any_alignment() {
        let from: Vec<u8> = (0..1000u32).map(|i| (i * 7 + 3) as u8).collect();
        for (a, b, n) in [(0, 0, 1000), (1, 1, 900), (3, 0, 500), (0, 5, 64), (2, 2, 70), (0, 0, 7), (4, 4, 0)] {
            let mut to = vec![MaybeUninit::new(0u8); 1010];
            copy(&mut to[a..a + n], &from[b..b + n]);
            fence();
            let got: Vec<u8> = to[a..a + n].iter().map(|x| unsafe { x.assume_init() }).collect();
            assert_eq!(got, &from[b..b + n], "{a} {b} {n}");
        }
    }

    #[test]
    fn stores_every_width() {
        let mut slots = [MaybeUninit::<u64>::uninit(); 3];
        slots.iter_mut().enumerate().for_each(|(i, s)| u64::store(s, u64::MAX - i as u64));
        let mut small = [MaybeUninit::<u32>::uninit(); 2];
        small.iter_mut().for_each(|s| u32::store(s, 0xdead_beef));
        fence();
        assert_eq!(unsafe { slots[2].assume_init() }, u64::MAX - 2);
        assert_eq!(unsafe { small[1].assume_init() }, 0xdead_beef);
    }
}
