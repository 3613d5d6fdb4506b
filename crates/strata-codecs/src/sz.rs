//! `sz`: an SZ-style error-bounded codec, written here (the SZ3 Rust bindings are GPL).
//!
//! Each element is predicted by the Lorenzo predictor (inclusion–exclusion over the
//! already *reconstructed* neighbours in up to three dimensions, so encoder and decoder
//! predict from the same values), the prediction error is quantized linearly in steps of
//! `2·eb`, and the quantization codes are entropy coded (zstd: Huffman-coded literals plus
//! matches). An element whose code would be too large, whose reconstruction misses the
//! bound in f64 arithmetic, or which is not finite is *unpredictable*: code 0, and its
//! exact bytes are stored apart. So the bound holds for every element by construction.
//!
//! Stream (mode 1; mode 0 is the lossless fallback of [`crate::lossy`]):
//! `u8 1`, `f64 eb`, `u8 code width (1|2)`, `u32 unpredictable count`,
//! `u32 codes length`, codes (zstd of `n` codes of that width), then the unpredictable
//! elements' bytes (zstd).

use crate::backend::zstd_decompress_exact;
use crate::error::{CodecError, Result};
use crate::lossy::{self, BoundSpec, BoundedCodec, Cursor};
use crate::spec::{NumType, Speed};

const NAME: &str = "sz";
/// Quantization codes are `q + RADIUS` in 16 bits; 0 marks an unpredictable element.
const RADIUS: i64 = 32768;
/// When every code fits in one byte, codes are `q + RADIUS8`.
const RADIUS8: i64 = 128;
const ZSTD_LEVEL: i32 = 3;

#[derive(Debug, Clone, Copy)]
pub struct SzBackend {
    pub bound: BoundSpec,
    pub dtype: NumType,
}

/// The reconstructed values with one plane of zeros before each dimension, so the
/// Lorenzo stencil needs no bounds checks.
struct Padded {
    data: Vec<f64>,
    s0: usize,
    s1: usize,
}

impl Padded {
    fn new(d: [usize; 3]) -> Self {
        let s1 = d[2] + 1;
        let s0 = (d[1] + 1) * s1;
        Self { data: vec![0.0; (d[0] + 1) * s0], s0, s1 }
    }

    /// Index of element (i, j, k) in the padded buffer.
    #[inline]
    fn at(&self, i: usize, j: usize, k: usize) -> usize {
        (i + 1) * self.s0 + (j + 1) * self.s1 + k + 1
    }

    #[inline]
    fn lorenzo(&self, p: usize) -> f64 {
        let d = &self.data;
        let (s0, s1) = (self.s0, self.s1);
        d[p - 1] + d[p - s1] + d[p - s0] - d[p - s1 - 1] - d[p - s0 - 1] - d[p - s0 - s1] + d[p - s0 - s1 - 1]
    }
}

/// What stands in for an unpredictable element when predicting its neighbours: itself if
/// finite, else its own prediction (keeps the field smooth around NaN masks), else zero.
#[inline]
fn stand_in(x: f64, pred: f64) -> f64 {
    if x.is_finite() {
        x
    } else if pred.is_finite() {
        pred
    } else {
        0.0
    }
}

impl BoundedCodec for SzBackend {
    const SPEED: Speed = Speed::new(180.0, 260.0);
    const NAME: &'static str = NAME;
    const MODE: u8 = 1;

    fn bound(&self) -> BoundSpec {
        self.bound
    }

    fn dtype(&self) -> NumType {
        self.dtype
    }

    fn encode_values(&self, input: &[u8], shape: &[usize], eb: f64, values: &[f64], out: &mut Vec<u8>) -> Result<()> {
        let es = self.dtype.size();
        let d = lossy::fold_shape(NAME, shape, values.len())?;
        let two_eb = 2.0 * eb;
        let mut pad = Padded::new(d);
        let mut codes: Vec<u16> = Vec::with_capacity(values.len());
        let mut unpredictable: Vec<u8> = Vec::new();
        let mut n = 0usize;
        for i in 0..d[0] {
            for j in 0..d[1] {
                for k in 0..d[2] {
                    let p = pad.at(i, j, k);
                    let pred = pad.lorenzo(p);
                    let x = values[n];
                    let qf = ((x - pred) / two_eb).round();
                    let mut code = 0u16;
                    if qf.abs() < (RADIUS - 1) as f64 {
                        let recon = lossy::round_to(self.dtype, pred + qf * two_eb);
                        if (recon - x).abs() <= eb {
                            code = (qf as i64 + RADIUS) as u16;
                            pad.data[p] = recon;
                        }
                    }
                    if code == 0 {
                        unpredictable.extend_from_slice(&input[n * es..(n + 1) * es]);
                        pad.data[p] = stand_in(x, pred);
                    }
                    codes.push(code);
                    n += 1;
                }
            }
        }
        let narrow = codes.iter().all(|&c| c == 0 || (i64::from(c) - RADIUS).abs() < RADIUS8 - 1);
        let code_bytes: Vec<u8> = if narrow {
            codes.iter().map(|&c| if c == 0 { 0 } else { (i64::from(c) - RADIUS + RADIUS8) as u8 }).collect()
        } else {
            // Low bytes, then high bytes: the high bytes are nearly constant.
            codes.iter().map(|&c| c as u8).chain(codes.iter().map(|&c| (c >> 8) as u8)).collect()
        };
        let zerr = |e: std::io::Error| CodecError::Encode { codec: NAME, detail: e.to_string() };
        let packed_codes = crate::backend::zstd_compress(&code_bytes, ZSTD_LEVEL).map_err(zerr)?;
        let packed_unpred = crate::backend::zstd_compress(&unpredictable, ZSTD_LEVEL).map_err(zerr)?;
        out.extend_from_slice(&eb.to_le_bytes());
        out.push(if narrow { 1 } else { 2 });
        out.extend_from_slice(&((unpredictable.len() / es) as u32).to_le_bytes());
        out.extend_from_slice(&(packed_codes.len() as u32).to_le_bytes());
        out.extend_from_slice(&packed_codes);
        out.extend_from_slice(&packed_unpred);
        Ok(())
    }

    fn decode_values(&self, body: &[u8], decoded_len: usize, shape: &[usize], out: &mut Vec<u8>) -> Result<()> {
        let corrupt = |detail: String| CodecError::Corrupt { codec: NAME, detail };
        let es = self.dtype.size();
        let n = decoded_len / es;
        let d = lossy::fold_shape(NAME, shape, n)?;
        let mut cur = Cursor::new(NAME, body);
        let eb = cur.f64()?;
        if !(eb.is_finite() && eb > 0.0) {
            return Err(corrupt(format!("bad error bound {eb}")));
        }
        let width = cur.u8()? as usize;
        if width != 1 && width != 2 {
            return Err(corrupt(format!("bad code width {width}")));
        }
        let n_unpred = cur.u32()? as usize;
        if n_unpred > n {
            return Err(corrupt(format!("{n_unpred} unpredictable elements of {n}")));
        }
        let codes_len = cur.u32()? as usize;
        let mut codes = vec![0u8; n * width];
        zstd_decompress_exact(cur.take(codes_len)?, &mut codes).map_err(|e| corrupt(format!("codes: {e}")))?;
        let mut unpred = vec![0u8; n_unpred * es];
        zstd_decompress_exact(cur.rest(), &mut unpred).map_err(|e| corrupt(format!("unpredictable values: {e}")))?;
        let code_at = |n: usize| -> i64 {
            if width == 1 {
                match codes[n] {
                    0 => 0,
                    c => i64::from(c) - RADIUS8 + RADIUS,
                }
            } else {
                i64::from(codes[n]) | (i64::from(codes[n + codes.len() / 2]) << 8)
            }
        };
        let two_eb = 2.0 * eb;
        let mut pad = Padded::new(d);
        out.clear();
        out.reserve(decoded_len);
        let mut next_unpred = 0usize;
        let mut n = 0usize;
        for i in 0..d[0] {
            for j in 0..d[1] {
                for k in 0..d[2] {
                    let p = pad.at(i, j, k);
                    let pred = pad.lorenzo(p);
                    let code = code_at(n);
                    if code == 0 {
                        let raw = unpred
                            .get(next_unpred * es..(next_unpred + 1) * es)
                            .ok_or_else(|| corrupt("more unpredictable codes than values".into()))?;
                        next_unpred += 1;
                        out.extend_from_slice(raw);
                        pad.data[p] = stand_in(lossy::get(self.dtype, raw), pred);
                    } else {
                        let recon = lossy::round_to(self.dtype, pred + (code - RADIUS) as f64 * two_eb);
                        lossy::put(self.dtype, recon, out);
                        pad.data[p] = recon;
                    }
                    n += 1;
                }
            }
        }
        if next_unpred != n_unpred {
            return Err(corrupt(format!("{n_unpred} unpredictable values stored, {next_unpred} used")));
        }
        Ok(())
    }
}
