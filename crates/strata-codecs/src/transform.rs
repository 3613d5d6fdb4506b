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
        Capabilities {
            lossless: true,
            partial_decode: false,
        }
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
    if es <= 1 {
        out.copy_from_slice(input);
        return;
    }
    let n = input.len() / es;
    let body = n * es;
    for (i, elem) in input[..body].chunks_exact(es).enumerate() {
        for (b, &byte) in elem.iter().enumerate() {
            out[b * n + i] = byte;
        }
    }
    out[body..].copy_from_slice(&input[body..]);
}

fn unshuffle(es: usize, input: &[u8], out: &mut [u8]) {
    if es <= 1 {
        out.copy_from_slice(input);
        return;
    }
    let n = input.len() / es;
    let body = n * es;
    for (i, elem) in out[..body].chunks_exact_mut(es).enumerate() {
        for (b, byte) in elem.iter_mut().enumerate() {
            *byte = input[b * n + i];
        }
    }
    out[body..].copy_from_slice(&input[body..]);
}
