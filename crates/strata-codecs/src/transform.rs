use crate::error::Result;
use crate::spec::{Capabilities, CodecSpec};

/// A byte rearrangement that keeps the length: the output of `encode` is as long as its input.
pub trait Transform: Send + Sync + std::fmt::Debug {
    fn spec(&self) -> CodecSpec;
    fn capabilities(&self) -> Capabilities;
    fn encode(&self, input: &[u8], out: &mut Vec<u8>) -> Result<()>;
    fn decode(&self, input: &[u8], out: &mut Vec<u8>) -> Result<()>;
}

/// Byte shuffle: byte `b` of every element is gathered into the `b`-th stream.
///
/// Floats from smooth fields share their sign/exponent bytes, so after a shuffle the high
/// byte streams hold long runs that the backend compresses far better. A tail of
/// `len % element_size` bytes (never present for whole arrays) is copied unchanged.
#[derive(Debug, Clone, Copy)]
pub struct ShuffleTransform {
    pub element_size: usize,
}

impl Transform for ShuffleTransform {
    fn spec(&self) -> CodecSpec {
        CodecSpec::new("shuffle")
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities { lossless: true, partial_decode: false }
    }

    fn encode(&self, input: &[u8], out: &mut Vec<u8>) -> Result<()> {
        out.clear();
        out.resize(input.len(), 0);
        shuffle(self.element_size, input, out);
        Ok(())
    }

    fn decode(&self, input: &[u8], out: &mut Vec<u8>) -> Result<()> {
        out.clear();
        out.resize(input.len(), 0);
        unshuffle(self.element_size, input, out);
        Ok(())
    }
}

fn shuffle(es: usize, input: &[u8], out: &mut [u8]) {
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

fn unshuffle(es: usize, input: &[u8], out: &mut [u8]) {
    let n = input.len() / es.max(1);
    let body = n * es;
    match es {
        0 | 1 => out.copy_from_slice(input),
        2 => unshuffle_fixed::<2>(&input[..body], &mut out[..body], n),
        4 => unshuffle_fixed::<4>(&input[..body], &mut out[..body], n),
        8 => unshuffle_fixed::<8>(&input[..body], &mut out[..body], n),
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

// Width-specific kernels: iterating the byte streams in lockstep (one zipped iterator) has no
// bounds checks and vectorizes to byte unpack/pack instructions, about 5x a strided loop.

fn unshuffle_fixed<const N: usize>(input: &[u8], out: &mut [u8], n: usize) {
    if n == 0 {
        return;
    }
    let s: Vec<&[u8]> = input.chunks_exact(n).collect();
    match N {
        2 => {
            for ((o, a), b) in out.chunks_exact_mut(2).zip(s[0]).zip(s[1]) {
                o.copy_from_slice(&[*a, *b]);
            }
        }
        4 => {
            for ((((o, a), b), c), d) in out.chunks_exact_mut(4).zip(s[0]).zip(s[1]).zip(s[2]).zip(s[3]) {
                o.copy_from_slice(&[*a, *b, *c, *d]);
            }
        }
        _ => {
            let lo = s[0].iter().zip(s[1]).zip(s[2].iter().zip(s[3]));
            let hi = s[4].iter().zip(s[5]).zip(s[6].iter().zip(s[7]));
            for (o, (((a, b), (c, d)), ((e, f), (g, h)))) in out.chunks_exact_mut(8).zip(lo.zip(hi)) {
                o.copy_from_slice(&[*a, *b, *c, *d, *e, *f, *g, *h]);
            }
        }
    }
}

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
