//! Byte shuffle and its inverse: byte `b` of every element gathered into the `b`-th stream.
//!
//! Unshuffling is on the read path of every shuffled chain, so it has a SIMD kernel: on
//! x86-64 (where SSE2 is always present) 16 elements at a time are interleaved back with
//! byte/word unpack instructions, several times faster than the portable kernel, which
//! finishes the tail.

pub(crate) fn shuffle(es: usize, input: &[u8], out: &mut [u8]) {
    let n = input.len() / es.max(1);
    let body = n * es;
    match es {
        0 | 1 => out.copy_from_slice(input),
        2 => shuffle_fixed::<2>(&input[..body], &mut out[..body], n),
        4 => shuffle_fixed::<4>(&input[..body], &mut out[..body], n),
        8 => shuffle_fixed::<8>(&input[..body], &mut out[..body], n),
        _ => {
            for (i, elem) in input[..body].chunks_exact(es).enumerate() {
                for (b, &byte) in elem.iter().enumerate() {
                    out[b * n + i] = byte;
                }
            }
        }
    }
    out[body..].copy_from_slice(&input[body..]);
}

pub(crate) fn unshuffle(es: usize, input: &[u8], out: &mut [u8]) {
    let n = input.len() / es.max(1);
    let body = n * es;
    match es {
        0 | 1 => out.copy_from_slice(input),
        2 => unshuffle_wide::<2>(&input[..body], &mut out[..body], n),
        4 => unshuffle_wide::<4>(&input[..body], &mut out[..body], n),
        8 => unshuffle_wide::<8>(&input[..body], &mut out[..body], n),
        _ => {
            for (i, elem) in out[..body].chunks_exact_mut(es).enumerate() {
                for (b, byte) in elem.iter_mut().enumerate() {
                    *byte = input[b * n + i];
                }
            }
        }
    }
    out[body..].copy_from_slice(&input[body..]);
}

// Width-specific encode kernel: iterating the byte streams in lockstep (one zipped iterator)
// has no bounds checks, about 5x a strided loop.

fn shuffle_fixed<const N: usize>(input: &[u8], out: &mut [u8], n: usize) {
    if n == 0 {
        return;
    }
    let mut s: Vec<&mut [u8]> = out.chunks_exact_mut(n).collect();
    match N {
        2 => {
            let [a, b] = &mut s[..] else { return };
            for ((i, a), b) in input.chunks_exact(2).zip(a.iter_mut()).zip(b.iter_mut()) {
                (*a, *b) = (i[0], i[1]);
            }
        }
        4 => {
            let [a, b, c, d] = &mut s[..] else { return };
            for ((((i, a), b), c), d) in
                input.chunks_exact(4).zip(a.iter_mut()).zip(b.iter_mut()).zip(c.iter_mut()).zip(d.iter_mut())
            {
                (*a, *b, *c, *d) = (i[0], i[1], i[2], i[3]);
            }
        }
        _ => {
            let [a, b, c, d, e, f, g, h] = &mut s[..] else { return };
            let lo = a.iter_mut().zip(b.iter_mut()).zip(c.iter_mut().zip(d.iter_mut()));
            let hi = e.iter_mut().zip(f.iter_mut()).zip(g.iter_mut().zip(h.iter_mut()));
            for (i, (((a, b), (c, d)), ((e, f), (g, h)))) in input.chunks_exact(8).zip(lo.zip(hi)) {
                (*a, *b, *c, *d, *e, *f, *g, *h) = (i[0], i[1], i[2], i[3], i[4], i[5], i[6], i[7]);
            }
        }
    }
}

/// Unshuffles `n` elements of width `N`: the SIMD kernel for whole blocks of 16 elements,
/// then the portable one for the rest.
fn unshuffle_wide<const N: usize>(input: &[u8], out: &mut [u8], n: usize) {
    #[cfg(target_arch = "x86_64")]
    let done = sse2::unshuffle::<N>(input, out, n);
    #[cfg(not(target_arch = "x86_64"))]
    let done = 0;
    if done == n {
        return;
    }
    // The tail: element `done + i` takes byte `b` from stream `b` at position `done + i`.
    for (i, o) in out[done * N..].chunks_exact_mut(N).enumerate() {
        for (b, byte) in o.iter_mut().enumerate() {
            *byte = input[b * n + done + i];
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod sse2 {
    use std::arch::x86_64::{
        __m128i, _mm_loadu_si128, _mm_storeu_si128, _mm_unpackhi_epi16, _mm_unpackhi_epi32, _mm_unpackhi_epi8,
        _mm_unpacklo_epi16, _mm_unpacklo_epi32, _mm_unpacklo_epi8,
    };

    /// Unshuffles the first `n / 16 * 16` elements; returns how many it did.
    pub(super) fn unshuffle<const N: usize>(input: &[u8], out: &mut [u8], n: usize) -> usize {
        let blocks = n / 16;
        assert!(input.len() >= N * n && out.len() >= N * n, "unshuffle buffers too short");
        for blk in 0..blocks {
            let at = blk * 16;
            // SAFETY: every load reads 16 bytes of stream b at [b*n + at, b*n + at + 16), and
            // at + 16 <= n, so within input (N*n bytes, asserted); every store writes 16 bytes
            // inside out[at*N .. (at+16)*N], within out (asserted). SSE2 is part of x86-64.
            unsafe {
                let load = |b: usize| _mm_loadu_si128(input.as_ptr().add(b * n + at) as *const __m128i);
                let dst = out.as_mut_ptr().add(at * N) as *mut __m128i;
                match N {
                    2 => {
                        let (a, b) = (load(0), load(1));
                        _mm_storeu_si128(dst, _mm_unpacklo_epi8(a, b));
                        _mm_storeu_si128(dst.add(1), _mm_unpackhi_epi8(a, b));
                    }
                    4 => {
                        let (a, b, c, d) = (load(0), load(1), load(2), load(3));
                        let (ab_lo, ab_hi) = (_mm_unpacklo_epi8(a, b), _mm_unpackhi_epi8(a, b));
                        let (cd_lo, cd_hi) = (_mm_unpacklo_epi8(c, d), _mm_unpackhi_epi8(c, d));
                        _mm_storeu_si128(dst, _mm_unpacklo_epi16(ab_lo, cd_lo));
                        _mm_storeu_si128(dst.add(1), _mm_unpackhi_epi16(ab_lo, cd_lo));
                        _mm_storeu_si128(dst.add(2), _mm_unpacklo_epi16(ab_hi, cd_hi));
                        _mm_storeu_si128(dst.add(3), _mm_unpackhi_epi16(ab_hi, cd_hi));
                    }
                    8 => {
                        // Pairs of streams interleaved by byte, then by 16-bit words (four
                        // bytes of 4 elements per register), then by 32-bit words (whole
                        // elements, two per register).
                        let s: [__m128i; 8] = std::array::from_fn(load);
                        let p: [[__m128i; 2]; 4] = std::array::from_fn(|k| {
                            [_mm_unpacklo_epi8(s[2 * k], s[2 * k + 1]), _mm_unpackhi_epi8(s[2 * k], s[2 * k + 1])]
                        });
                        // q[h][j]: bytes 4h..4h+4 of elements 4j..4j+4.
                        let q: [[__m128i; 4]; 2] = std::array::from_fn(|h| {
                            let (x, y) = (p[2 * h], p[2 * h + 1]);
                            [
                                _mm_unpacklo_epi16(x[0], y[0]),
                                _mm_unpackhi_epi16(x[0], y[0]),
                                _mm_unpacklo_epi16(x[1], y[1]),
                                _mm_unpackhi_epi16(x[1], y[1]),
                            ]
                        });
                        for (j, (&lo, &hi)) in q[0].iter().zip(&q[1]).enumerate() {
                            _mm_storeu_si128(dst.add(2 * j), _mm_unpacklo_epi32(lo, hi));
                            _mm_storeu_si128(dst.add(2 * j + 1), _mm_unpackhi_epi32(lo, hi));
                        }
                    }
                    _ => return 0,
                }
            }
        }
        blocks * 16
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unshuffle_inverts_shuffle_for_every_width_and_length() {
        for es in [1usize, 2, 3, 4, 8] {
            for n in (0..70).chain([255, 256, 1000, 4099]) {
                // A tail of fewer bytes than an element is copied unchanged.
                let len = n * es + (n % es.max(1));
                let input: Vec<u8> = (0..len).map(|i| (i * 131 + i / 7) as u8).collect();
                let mut shuffled = vec![0; len];
                shuffle(es, &input, &mut shuffled);
                // The definition: byte b of element i at b*n + i.
                for i in 0..n {
                    for b in 0..es {
                        assert_eq!(shuffled[b * n + i], input[i * es + b], "es {es} n {n}");
                    }
                }
                let mut back = vec![0; len];
                unshuffle(es, &shuffled, &mut back);
                assert_eq!(back, input, "es {es} n {n}");
            }
        }
    }
}
