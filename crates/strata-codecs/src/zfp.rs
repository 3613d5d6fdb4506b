//! `zfp`: LLNL's zfp in fixed-accuracy mode (zfp-sys, which builds the bundled BSD-licensed
//! library), made strict: zfp's tolerance is not a hard guarantee for every input, so the
//! encoder decodes its own output and stores every element that misses the bound — and
//! every NaN or infinity, which zfp cannot represent — exactly, as an exception.
//!
//! Stream (mode 2; mode 0 is the lossless fallback of [`crate::lossy`]):
//! `u8 2`, `f64 tolerance`, `u32 zfp length`, the zfp stream, `u32 exception count`, then
//! zstd of the exceptions (`u32` indices, strictly increasing, then their exact bytes).

use crate::backend::zstd_decompress_exact;
use crate::error::{CodecError, Result};
use crate::lossy::{self, BoundSpec, BoundedCodec, Cursor};
use crate::spec::{NumType, Speed};
use std::ffi::c_void;

const NAME: &str = "zfp";
/// Spare bytes after a stream handed to the decoder: zfp reads whole 64-bit words and
/// does not check the end of its buffer.
const READ_SLACK: usize = 64;

#[derive(Debug, Clone, Copy)]
pub struct ZfpBackend {
    pub bound: BoundSpec,
    pub dtype: NumType,
}

/// One zfp field and stream over caller-owned memory, freed on drop.
struct ZfpSession {
    field: *mut zfp_sys::zfp_field,
    stream: *mut zfp_sys::zfp_stream,
    bits: *mut zfp_sys::bitstream,
}

impl ZfpSession {
    /// `values` holds the elements (f32 or f64 as `dtype` says) in C order of `dims`.
    /// `buffer` is the compressed stream (read or written). Both must outlive the session.
    fn new(dtype: NumType, values: *mut c_void, dims: [usize; 3], tolerance: f64, buffer: &mut [u8]) -> Result<Self> {
        let ty =
            if dtype == NumType::F32 { zfp_sys::zfp_type_zfp_type_float } else { zfp_sys::zfp_type_zfp_type_double };
        // SAFETY: zfp only records the pointers and sizes here; the memory they name is
        // owned by the caller and outlives the session (see `new`'s contract).
        unsafe {
            let field = match dims {
                [1, 1, n] => zfp_sys::zfp_field_1d(values, ty, n),
                [1, ny, nx] => zfp_sys::zfp_field_2d(values, ty, nx, ny),
                [nz, ny, nx] => zfp_sys::zfp_field_3d(values, ty, nx, ny, nz),
            };
            let stream = zfp_sys::zfp_stream_open(std::ptr::null_mut());
            if field.is_null() || stream.is_null() {
                return Err(CodecError::Encode { codec: NAME, detail: "zfp could not allocate".into() });
            }
            zfp_sys::zfp_stream_set_accuracy(stream, tolerance);
            let bits = zfp_sys::stream_open(buffer.as_mut_ptr() as *mut c_void, buffer.len());
            zfp_sys::zfp_stream_set_bit_stream(stream, bits);
            zfp_sys::zfp_stream_rewind(stream);
            Ok(Self { field, stream, bits })
        }
    }

    /// The largest stream zfp may write, or read, for this field and tolerance.
    fn maximum_size(dtype: NumType, dims: [usize; 3], tolerance: f64) -> Result<usize> {
        let mut probe = [0u8; 8];
        let mut scratch = [0u8; 8];
        let s = Self::new(dtype, scratch.as_mut_ptr() as *mut c_void, dims, tolerance, &mut probe)?;
        // SAFETY: both pointers were created by zfp in `new` and are still live.
        Ok(unsafe { zfp_sys::zfp_stream_maximum_size(s.stream, s.field) })
    }
}

impl Drop for ZfpSession {
    fn drop(&mut self) {
        // SAFETY: each pointer came from its zfp constructor and is freed exactly once.
        unsafe {
            zfp_sys::zfp_field_free(self.field);
            zfp_sys::zfp_stream_close(self.stream);
            zfp_sys::stream_close(self.bits);
        }
    }
}

fn element_bytes(dtype: NumType, values: &[f64]) -> Vec<u8> {
    let mut out = Vec::with_capacity(values.len() * dtype.size());
    for &v in values {
        lossy::put(dtype, v, &mut out);
    }
    out
}

impl ZfpBackend {
    /// Decodes `n` elements from the zfp stream in `buffer[..len]`; `buffer` holds at least
    /// zfp's maximum stream size for this field and tolerance plus [`READ_SLACK`] (zfp reads
    /// whole words up to that far, whatever the stream says).
    fn decompress_padded(
        &self,
        buffer: &mut [u8],
        len: usize,
        dims: [usize; 3],
        tol: f64,
        n: usize,
    ) -> Result<Vec<u8>> {
        let mut decoded = vec![0u8; n * self.dtype.size()];
        let used = {
            let s = ZfpSession::new(self.dtype, decoded.as_mut_ptr() as *mut c_void, dims, tol, buffer)?;
            // SAFETY: the field names `decoded` (n elements); the stream buffer is large
            // enough for everything zfp reads for this field and tolerance (see above).
            unsafe { zfp_sys::zfp_decompress(s.stream, s.field) }
        };
        if used == 0 || used > len {
            return Err(CodecError::Corrupt {
                codec: NAME,
                detail: format!("zfp stream of {len} bytes is truncated or garbled"),
            });
        }
        Ok(decoded)
    }

    /// Decodes a stored zfp stream of `n` elements; the bytes of the decoded elements.
    fn run_decompress(&self, zfp_stream: &[u8], dims: [usize; 3], tol: f64, n: usize) -> Result<Vec<u8>> {
        let max = ZfpSession::maximum_size(self.dtype, dims, tol)?;
        if zfp_stream.len() > max {
            return Err(CodecError::Corrupt {
                codec: NAME,
                detail: format!("stream of {} bytes, at most {max} possible", zfp_stream.len()),
            });
        }
        let mut buffer = vec![0u8; max + READ_SLACK];
        buffer[..zfp_stream.len()].copy_from_slice(zfp_stream);
        self.decompress_padded(&mut buffer, zfp_stream.len(), dims, tol, n)
    }
}

impl BoundedCodec for ZfpBackend {
    const SPEED: Speed = Speed::new(135.0, 270.0);
    const NAME: &'static str = NAME;
    const MODE: u8 = 2;

    fn bound(&self) -> BoundSpec {
        self.bound
    }

    fn dtype(&self) -> NumType {
        self.dtype
    }

    /// zfp needs at least one element.
    fn usable(n: usize) -> bool {
        n > 0 && n <= u32::MAX as usize
    }

    fn encode_values(&self, input: &[u8], shape: &[usize], tol: f64, values: &[f64], out: &mut Vec<u8>) -> Result<()> {
        let es = self.dtype.size();
        let n = values.len();
        let dims = lossy::fold_shape(NAME, shape, n)?;
        // zfp cannot hold NaN or infinity: they become the mean (exceptions restore them).
        let (sum, count) = values.iter().filter(|v| v.is_finite()).fold((0.0, 0usize), |(s, c), v| (s + v, c + 1));
        let mean = if count == 0 { 0.0 } else { sum / count as f64 };
        let cleaned: Vec<f64> = values.iter().map(|&v| if v.is_finite() { v } else { mean }).collect();
        let mut field_bytes = element_bytes(self.dtype, &cleaned);
        let max = ZfpSession::maximum_size(self.dtype, dims, tol)?;
        let mut stream = vec![0u8; max + READ_SLACK];
        let written = {
            let s = ZfpSession::new(self.dtype, field_bytes.as_mut_ptr() as *mut c_void, dims, tol, &mut stream)?;
            // SAFETY: the field names `field_bytes` (n elements of the field's type) and the
            // stream `stream` (`max` bytes, zfp's own upper bound); both outlive `s`.
            unsafe { zfp_sys::zfp_compress(s.stream, s.field) }
        };
        if written == 0 || written > max {
            return Err(CodecError::Encode { codec: NAME, detail: "zfp_compress failed".into() });
        }
        // Decode what was written and keep, exactly, every element that misses the bound.
        let decoded = self.decompress_padded(&mut stream, written, dims, tol, n)?;
        let mut indices = Vec::new();
        let mut exact = Vec::new();
        for (i, (&x, y)) in values.iter().zip(decoded.chunks_exact(es)).enumerate() {
            if !x.is_finite() || (lossy::get(self.dtype, y) - x).abs() > tol {
                indices.extend_from_slice(&(i as u32).to_le_bytes());
                exact.extend_from_slice(&input[i * es..(i + 1) * es]);
            }
        }
        let count = indices.len() / 4;
        indices.extend_from_slice(&exact);
        let packed = crate::backend::zstd_compress(&indices, 3)
            .map_err(|e| CodecError::Encode { codec: NAME, detail: e.to_string() })?;
        out.extend_from_slice(&tol.to_le_bytes());
        out.extend_from_slice(&(written as u32).to_le_bytes());
        out.extend_from_slice(&stream[..written]);
        out.extend_from_slice(&(count as u32).to_le_bytes());
        out.extend_from_slice(&packed);
        Ok(())
    }

    fn decode_values(&self, body: &[u8], decoded_len: usize, shape: &[usize], out: &mut Vec<u8>) -> Result<()> {
        let corrupt = |detail: String| CodecError::Corrupt { codec: NAME, detail };
        let es = self.dtype.size();
        let n = decoded_len / es;
        let dims = lossy::fold_shape(NAME, shape, n)?;
        let mut cur = Cursor::new(NAME, body);
        let tol = cur.f64()?;
        if !(tol.is_finite() && tol > 0.0) {
            return Err(corrupt(format!("bad tolerance {tol}")));
        }
        let len = cur.u32()? as usize;
        let zfp_stream = cur.take(len)?;
        let count = cur.u32()? as usize;
        if count > n {
            return Err(corrupt(format!("{count} exceptions for {n} elements")));
        }
        let mut exceptions = vec![0u8; count * (4 + es)];
        zstd_decompress_exact(cur.rest(), &mut exceptions).map_err(|e| corrupt(format!("exceptions: {e}")))?;
        *out = self.run_decompress(zfp_stream, dims, tol, n)?;
        let (indices, exact) = exceptions.split_at(count * 4);
        let mut last: Option<usize> = None;
        for (idx, value) in indices.chunks_exact(4).zip(exact.chunks_exact(es)) {
            let i = u32::from_le_bytes([idx[0], idx[1], idx[2], idx[3]]) as usize;
            if i >= n || last.is_some_and(|l| i <= l) {
                return Err(corrupt(format!("exception index {i} out of order or range")));
            }
            last = Some(i);
            out[i * es..(i + 1) * es].copy_from_slice(value);
        }
        Ok(())
    }
}
