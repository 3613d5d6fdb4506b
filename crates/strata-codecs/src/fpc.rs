//! `fpc`: FPC-style coding with a neighbour as the predictor (PStore's sFPC along a spatial
//! axis, tFPC along the record axis, i.e. the previous time step). Each element's bit
//! pattern is XORed with its predecessor along `axis` (the first one along the axis with
//! zero); the residual's leading zero bytes are counted, the count is stored in a 4-bit
//! code and only the remaining low bytes are stored. Lossless for every element type.
//!
//! Stream: `ceil(n / 2)` bytes of codes (two per byte, low nibble first), then the
//! residuals' significant bytes, little-endian, element after element.

use crate::backend::Backend;
use crate::error::{CodecError, Result};
use crate::spec::{Capabilities, CodecSpec, Speed};

const NAME: &str = "fpc";

#[derive(Debug, Clone, Copy)]
pub struct FpcBackend {
    pub axis: i64,
    pub element_size: usize,
}

/// Distance (in elements) to the predecessor along the axis, and the axis length;
/// `(n, 1)`-like when the axis does not exist, so nothing has a predecessor.
fn stride_and_extent(shape: &[usize], axis: i64, n: usize) -> (usize, usize) {
    let nd = shape.len() as i64;
    let a = if axis < 0 { nd + axis } else { axis };
    if a < 0 || a >= nd || shape.iter().product::<usize>() != n {
        return (n.max(1), 1);
    }
    let a = a as usize;
    (shape[a + 1..].iter().product(), shape[a])
}

#[inline]
fn load(bytes: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    b[..bytes.len()].copy_from_slice(bytes);
    u64::from_le_bytes(b)
}

impl Backend for FpcBackend {
    fn spec(&self) -> CodecSpec {
        CodecSpec::new(NAME).with("axis", self.axis)
    }

    fn speed(&self) -> Speed {
        Speed::new(400.0, 400.0)
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::LOSSLESS
    }

    fn encode(&self, input: &[u8], shape: &[usize], out: &mut Vec<u8>) -> Result<()> {
        let es = self.element_size;
        if es == 0 || es > 8 || !input.len().is_multiple_of(es) {
            return Err(CodecError::Encode { codec: NAME, detail: "input is not whole elements".into() });
        }
        let n = input.len() / es;
        let (stride, extent) = stride_and_extent(shape, self.axis, n);
        let mut codes = vec![0u8; n.div_ceil(2)];
        let mut residuals = Vec::with_capacity(input.len());
        // Runs of `stride * extent` elements: the first `stride` of each have no predecessor.
        let run = stride * extent;
        for i in 0..n {
            let v = load(&input[i * es..(i + 1) * es]);
            let pred = if i % run >= stride { load(&input[(i - stride) * es..(i - stride + 1) * es]) } else { 0 };
            let r = v ^ pred;
            let significant = if r == 0 { 0 } else { 8 - (r.leading_zeros() / 8) as usize };
            codes[i / 2] |= ((es - significant) as u8) << (4 * (i % 2));
            residuals.extend_from_slice(&r.to_le_bytes()[..significant]);
        }
        out.clear();
        out.extend_from_slice(&codes);
        out.extend_from_slice(&residuals);
        Ok(())
    }

    fn decode(&self, input: &[u8], decoded_len: usize, shape: &[usize], out: &mut Vec<u8>) -> Result<()> {
        let corrupt = |detail: String| CodecError::Corrupt { codec: NAME, detail };
        let es = self.element_size;
        if es == 0 || es > 8 || !decoded_len.is_multiple_of(es) {
            return Err(corrupt(format!("{decoded_len} bytes is not whole elements of {es}")));
        }
        let n = decoded_len / es;
        let (stride, extent) = stride_and_extent(shape, self.axis, n);
        let header = n.div_ceil(2);
        if input.len() < header {
            return Err(corrupt("truncated codes".into()));
        }
        let (codes, residuals) = input.split_at(header);
        out.clear();
        out.resize(decoded_len, 0);
        let mut pos = 0usize;
        let run = stride * extent;
        let (mut in_run, mut prev) = (0usize, 0usize);
        for i in 0..n {
            let zeros = ((codes[i / 2] >> (4 * (i % 2))) & 0x0f) as usize;
            if zeros > es {
                return Err(corrupt(format!("element {i}: {zeros} leading zero bytes of {es}")));
            }
            let significant = es - zeros;
            let r = residuals
                .get(pos..pos + significant)
                .ok_or_else(|| corrupt(format!("residuals end at element {i}")))?;
            pos += significant;
            let mut v = load(r);
            if in_run >= stride {
                v ^= load(&out[prev * es..(prev + 1) * es]);
                prev += 1;
            }
            in_run += 1;
            if in_run == run {
                in_run = 0;
                prev = i + 1;
            }
            out[i * es..(i + 1) * es].copy_from_slice(&v.to_le_bytes()[..es]);
        }
        if pos != residuals.len() {
            return Err(corrupt(format!("{} trailing bytes", residuals.len() - pos)));
        }
        if n % 2 == 1 && codes[header - 1] >> 4 != 0 {
            return Err(corrupt("padding nibble is not zero".into()));
        }
        Ok(())
    }
}
