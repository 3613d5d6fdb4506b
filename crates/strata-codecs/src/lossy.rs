//! What the error-bounded codecs (`sz`, `zfp`) share: the bound the user asked for, the
//! segment's geometry, element conversion and the lossless fallback stream.

use crate::backend::{zstd_decompress_exact, Backend};
use crate::error::{CodecError, Result};
use crate::spec::{Capabilities, CodecSpec, ErrorBound, NumType, Speed};

/// The bound as configured: absolute, or relative to the value range of each segment.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum BoundSpec {
    Absolute(f64),
    RangeRelative(f64),
}

impl BoundSpec {
    /// Reads `abs` or `rel` (exactly one, positive and finite) from a codec spec.
    pub fn from_spec(spec: &CodecSpec) -> Result<Self> {
        let get = |key: &str| -> Result<Option<f64>> {
            match spec.configuration.get(key) {
                None => Ok(None),
                Some(v) => match v.as_f64() {
                    Some(x) if x.is_finite() && x > 0.0 => Ok(Some(x)),
                    _ => Err(CodecError::InvalidSpec(format!(
                        "{} {key} must be a positive finite number, got {v}",
                        spec.name
                    ))),
                },
            }
        };
        match (get("abs")?, get("rel")?) {
            (Some(a), None) => Ok(BoundSpec::Absolute(a)),
            (None, Some(r)) => Ok(BoundSpec::RangeRelative(r)),
            _ => Err(CodecError::InvalidSpec(format!(
                "{} needs exactly one error bound: abs=E (absolute) or rel=E (relative to the value range)",
                spec.name
            ))),
        }
    }

    pub fn to_spec(self, name: &str) -> CodecSpec {
        match self {
            BoundSpec::Absolute(e) => CodecSpec::new(name).with("abs", e),
            BoundSpec::RangeRelative(e) => CodecSpec::new(name).with("rel", e),
        }
    }

    pub fn error_bound(self) -> ErrorBound {
        match self {
            BoundSpec::Absolute(e) => ErrorBound::Absolute(e),
            BoundSpec::RangeRelative(e) => ErrorBound::RangeRelative(e),
        }
    }

    /// The absolute bound for a segment; `None` when nothing can be lost (a constant or
    /// all-non-finite segment under a relative bound).
    pub fn absolute(self, values: &[f64]) -> Option<f64> {
        let eb = match self {
            BoundSpec::Absolute(e) => e,
            BoundSpec::RangeRelative(r) => {
                let (lo, hi) = values
                    .iter()
                    .filter(|v| v.is_finite())
                    .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &v| (lo.min(v), hi.max(v)));
                r * (hi - lo)
            }
        };
        (eb.is_finite() && eb > 0.0).then_some(eb)
    }
}

/// The segment seen as at most three dimensions (slowest first): leading dimensions are
/// folded into the first. A shape that does not hold `n` elements is an error.
pub fn fold_shape(codec: &'static str, shape: &[usize], n: usize) -> Result<[usize; 3]> {
    let product: usize = shape.iter().product();
    if product != n {
        return Err(CodecError::Corrupt {
            codec,
            detail: format!("segment shape {shape:?} holds {product} elements, {n} expected"),
        });
    }
    let dims: Vec<usize> = shape.iter().copied().filter(|&d| d > 1).collect();
    Ok(match dims.len() {
        0 => [1, 1, n],
        1 => [1, 1, dims[0]],
        2 => [1, dims[0], dims[1]],
        k => [dims[..k - 2].iter().product(), dims[k - 2], dims[k - 1]],
    })
}

/// One float element as f64 (exact for f32); `bytes` holds exactly one element.
#[inline]
pub fn get(dtype: NumType, c: &[u8]) -> f64 {
    if dtype == NumType::F32 {
        f32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64
    } else {
        f64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]])
    }
}

/// Float elements as f64 (exact for f32).
pub fn to_f64(dtype: NumType, bytes: &[u8]) -> Vec<f64> {
    bytes.chunks_exact(dtype.size()).map(|c| get(dtype, c)).collect()
}

/// Rounds to the element type, so encoder and decoder predict from identical values.
#[inline]
pub fn round_to(dtype: NumType, v: f64) -> f64 {
    if dtype == NumType::F32 {
        v as f32 as f64
    } else {
        v
    }
}

#[inline]
pub fn put(dtype: NumType, v: f64, out: &mut Vec<u8>) {
    if dtype == NumType::F32 {
        out.extend_from_slice(&(v as f32).to_le_bytes());
    } else {
        out.extend_from_slice(&v.to_le_bytes());
    }
}

/// Stream mode byte shared by `sz` and `zfp`.
pub const MODE_LOSSLESS: u8 = 0;

/// The lossless fallback: integer variables, and segments with nothing to lose.
fn encode_lossless(codec: &'static str, input: &[u8], out: &mut Vec<u8>) -> Result<()> {
    out.clear();
    out.push(MODE_LOSSLESS);
    let packed =
        crate::backend::zstd_compress(input, 3).map_err(|e| CodecError::Encode { codec, detail: e.to_string() })?;
    out.extend_from_slice(&packed);
    Ok(())
}

fn decode_lossless(codec: &'static str, body: &[u8], decoded_len: usize, out: &mut Vec<u8>) -> Result<()> {
    out.clear();
    out.resize(decoded_len, 0);
    zstd_decompress_exact(body, out).map_err(|detail| CodecError::Corrupt { codec, detail })
}

/// An error-bounded codec of float elements. The [`Backend`] implementation shared by all
/// of them writes the mode byte, falls back to the lossless mode 0 for integers, partial
/// elements, unusable sizes and segments with nothing to lose, and declares the bound.
pub trait BoundedCodec: Send + Sync + std::fmt::Debug {
    const NAME: &'static str;
    /// This codec's stream mode byte (never [`MODE_LOSSLESS`]).
    const MODE: u8;
    fn bound(&self) -> BoundSpec;
    /// Nominal throughput (see [`Speed`]).
    const SPEED: Speed;
    fn dtype(&self) -> NumType;
    /// Whether a segment of `n` elements can be coded (counts are stored as `u32`).
    fn usable(n: usize) -> bool {
        n <= u32::MAX as usize
    }
    /// Appends the stream after the mode byte, for absolute bound `eb`.
    fn encode_values(&self, input: &[u8], shape: &[usize], eb: f64, values: &[f64], out: &mut Vec<u8>) -> Result<()>;
    /// Decodes the stream after the mode byte into exactly `decoded_len` bytes.
    fn decode_values(&self, body: &[u8], decoded_len: usize, shape: &[usize], out: &mut Vec<u8>) -> Result<()>;
}

impl<T: BoundedCodec> Backend for T {
    fn spec(&self) -> CodecSpec {
        self.bound().to_spec(T::NAME)
    }

    fn speed(&self) -> Speed {
        T::SPEED
    }

    fn capabilities(&self) -> Capabilities {
        if !self.dtype().is_float() {
            return Capabilities::LOSSLESS;
        }
        Capabilities { lossless: false, partial_decode: false, error_bound: Some(self.bound().error_bound()) }
    }

    fn encode(&self, input: &[u8], shape: &[usize], out: &mut Vec<u8>) -> Result<()> {
        let (dtype, es) = (self.dtype(), self.dtype().size());
        if !dtype.is_float() || !input.len().is_multiple_of(es) || !T::usable(input.len() / es) {
            return encode_lossless(T::NAME, input, out);
        }
        let values = to_f64(dtype, input);
        match self.bound().absolute(&values) {
            Some(eb) => {
                out.clear();
                out.push(T::MODE);
                self.encode_values(input, shape, eb, &values, out)
            }
            None => encode_lossless(T::NAME, input, out),
        }
    }

    fn decode(&self, input: &[u8], decoded_len: usize, shape: &[usize], out: &mut Vec<u8>) -> Result<()> {
        let (dtype, es) = (self.dtype(), self.dtype().size());
        let corrupt = |detail: String| CodecError::Corrupt { codec: T::NAME, detail };
        let mode = *input.first().ok_or_else(|| corrupt("empty stream".into()))?;
        let whole = dtype.is_float() && decoded_len.is_multiple_of(es) && T::usable(decoded_len / es);
        match mode {
            MODE_LOSSLESS => decode_lossless(T::NAME, &input[1..], decoded_len, out),
            m if m == T::MODE && whole => self.decode_values(&input[1..], decoded_len, shape, out),
            m => Err(corrupt(format!("bad mode {m}"))),
        }
    }
}

/// A little-endian cursor that reports truncation as corruption.
#[derive(Debug)]
pub struct Cursor<'a> {
    pub codec: &'static str,
    pub bytes: &'a [u8],
    pub pos: usize,
}

impl<'a> Cursor<'a> {
    pub fn new(codec: &'static str, bytes: &'a [u8]) -> Self {
        Self { codec, bytes, pos: 0 }
    }

    pub fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.bytes.len()).ok_or_else(|| CodecError::Corrupt {
            codec: self.codec,
            detail: format!("stream truncated at byte {} ({n} more needed)", self.pos),
        })?;
        let s = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    pub fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }

    pub fn u32(&mut self) -> Result<u32> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub fn f64(&mut self) -> Result<f64> {
        let b = self.take(8)?;
        Ok(f64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]))
    }

    pub fn rest(&mut self) -> &'a [u8] {
        let s = &self.bytes[self.pos..];
        self.pos = self.bytes.len();
        s
    }
}

/// Whether `decoded` holds `bound` against `original` (both little-endian elements of
/// `dtype`): finite elements within the bound (range over the segment's finite values),
/// the others bit for bit; lossless chains (`bound` None) must give the bytes back.
pub fn holds_bound(bound: Option<ErrorBound>, dtype: NumType, original: &[u8], decoded: &[u8]) -> bool {
    let Some(bound) = bound.filter(|_| dtype.is_float()) else {
        return original == decoded;
    };
    if original.len() != decoded.len() {
        return false;
    }
    let es = dtype.size();
    let x = to_f64(dtype, original);
    let (lo, hi) = x
        .iter()
        .filter(|v| v.is_finite())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &v| (lo.min(v), hi.max(v)));
    let smallest_normal = if dtype == NumType::F32 { f32::MIN_POSITIVE as f64 } else { f64::MIN_POSITIVE };
    x.iter().zip(decoded.chunks_exact(es)).zip(original.chunks_exact(es)).all(|((&a, d), o)| {
        if a.is_finite() {
            (get(dtype, d) - a).abs() <= bound.absolute_for(a, hi - lo, smallest_normal)
        } else {
            d == o
        }
    })
}
