//! Bitsets of 64-bit words (bit `i` is bit `i % 64` of word `i / 64`): how the engine
//! builds sets of positions in a sub-chunk before making them bitmaps at once.

use roaring::RoaringBitmap;

/// The positions set in a bitset, as a bitmap.
pub(crate) fn bitmap_of(words: &[u64]) -> RoaringBitmap {
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    RoaringBitmap::from_lsb0_bytes(0, &bytes)
}

/// Sets bits `lo..hi` of a bitset (bit `i` is bit `i % 64` of word `i / 64`).
pub(crate) fn set_bits(words: &mut [u64], lo: usize, hi: usize) {
    if lo >= hi {
        return;
    }
    let (wl, wh) = (lo / 64, (hi - 1) / 64);
    let head = !0u64 << (lo % 64);
    let tail = !0u64 >> (63 - (hi - 1) % 64);
    if wl == wh {
        words[wl] |= head & tail;
    } else {
        words[wl] |= head;
        words[wl + 1..wh].fill(!0);
        words[wh] |= tail;
    }
}
