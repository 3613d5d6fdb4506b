use crate::error::{CodecError, Result};
use crate::spec::{Capabilities, CodecSpec, ErrorBound, NumType, Speed};

/// A byte rearrangement that keeps the length: the output of `encode` is as long as its
/// input. `shape` is the segment's shape (C order); its product times the element size is
/// the input length.
pub trait Transform: Send + Sync + std::fmt::Debug {
    fn spec(&self) -> CodecSpec;
    fn capabilities(&self) -> Capabilities;
    /// Nominal throughput the planner ranks chains by (see [`Speed`]).
    fn speed(&self) -> Speed;
    fn encode(&self, input: &[u8], shape: &[usize], out: &mut Vec<u8>) -> Result<()>;
    fn decode(&self, input: &[u8], shape: &[usize], out: &mut Vec<u8>) -> Result<()>;
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

    fn speed(&self) -> Speed {
        Speed::new(7_000.0, 30_000.0)
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::LOSSLESS
    }

    fn encode(&self, input: &[u8], _shape: &[usize], out: &mut Vec<u8>) -> Result<()> {
        out.clear();
        out.resize(input.len(), 0);
        crate::shuffle::shuffle(self.element_size, input, out);
        Ok(())
    }

    fn decode(&self, input: &[u8], _shape: &[usize], out: &mut Vec<u8>) -> Result<()> {
        out.clear();
        out.resize(input.len(), 0);
        crate::shuffle::unshuffle(self.element_size, input, out);
        Ok(())
    }
}

/// How [`NeighbourTransform`] combines an element with its predecessor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NeighbourOp {
    /// Wrapping difference of the elements' bit patterns as unsigned integers.
    Delta,
    /// Bitwise XOR of the bit patterns (PStore's bwcXOR / FPC's residual).
    Xor,
}

/// Replaces every element by its difference (or XOR) with the previous element along one
/// axis of the segment; the first element along the axis is kept. Lossless for every type
/// (it works on bit patterns). Along axis 0 of a record variable this is "the previous
/// time step"; along the last axis, "the previous element in memory".
#[derive(Debug, Clone, Copy)]
pub struct NeighbourTransform {
    pub op: NeighbourOp,
    /// Axis; negative counts from the end (-1 is the last axis).
    pub axis: i64,
    pub element_size: usize,
}

impl NeighbourTransform {
    fn name(&self) -> &'static str {
        match self.op {
            NeighbourOp::Delta => "delta",
            NeighbourOp::Xor => "xor",
        }
    }

    /// (distance in elements to the predecessor, length of the axis); `None` when the
    /// segment has no such axis: then the transform is the identity, so one chain can serve
    /// every variable of a store (a 1-d coordinate has no axis -2).
    fn geometry(&self, shape: &[usize]) -> Option<(usize, usize)> {
        let n = shape.len() as i64;
        let axis = if self.axis < 0 { n + self.axis } else { self.axis };
        if !(0..n).contains(&axis) {
            return None;
        }
        let axis = axis as usize;
        Some((shape[axis + 1..].iter().product(), shape[axis]))
    }

    fn run(&self, input: &[u8], shape: &[usize], out: &mut Vec<u8>, encode: bool) -> Result<()> {
        out.clear();
        out.extend_from_slice(input);
        let Some((stride, len)) = self.geometry(shape) else { return Ok(()) };
        let es = self.element_size;
        if !input.len().is_multiple_of(es) || stride == 0 || len < 2 {
            return Ok(());
        }
        // The segment is a sequence of blocks of `len` rows of `stride` elements; within a
        // block every row but the first is combined with the row before it. Whole rows at a
        // time keep the loops free of index arithmetic, so they vectorize.
        let row = stride * es;
        let block = row * len;
        if !input.len().is_multiple_of(block) {
            let detail = format!("segment of {} bytes does not match shape {shape:?}", input.len());
            return Err(if encode {
                CodecError::InvalidSpec(format!("{}: {detail}", self.name()))
            } else {
                CodecError::Corrupt { codec: if self.op == NeighbourOp::Xor { "xor" } else { "delta" }, detail }
            });
        }
        if stride == 1 {
            // Along the fastest axis each row is one element: a sequential pass per block.
            for (blk_in, blk_out) in input.chunks_exact(block).zip(out.chunks_exact_mut(block)) {
                match es {
                    1 => along_fastest::<1, u8>(blk_in, blk_out, self.op, encode, u8::from_le_bytes),
                    2 => along_fastest::<2, u16>(blk_in, blk_out, self.op, encode, u16::from_le_bytes),
                    4 => along_fastest::<4, u32>(blk_in, blk_out, self.op, encode, u32::from_le_bytes),
                    8 => along_fastest::<8, u64>(blk_in, blk_out, self.op, encode, u64::from_le_bytes),
                    _ => return Err(CodecError::InvalidSpec(format!("{}: element size {es}", self.name()))),
                }
            }
            return Ok(());
        }
        for (blk_in, blk_out) in input.chunks_exact(block).zip(out.chunks_exact_mut(block)) {
            for k in 1..len {
                let cur = &blk_in[k * row..(k + 1) * row];
                // Encoding combines with the previous input row; decoding with the previous
                // output row, already restored.
                let (done, rest) = blk_out.split_at_mut(k * row);
                let prev: &[u8] = if encode { &blk_in[(k - 1) * row..k * row] } else { &done[(k - 1) * row..] };
                let dst = &mut rest[..row];
                match (self.op, encode, es) {
                    (NeighbourOp::Xor, _, _) => {
                        for ((d, c), p) in dst.iter_mut().zip(cur).zip(prev) {
                            *d = c ^ p;
                        }
                    }
                    (NeighbourOp::Delta, enc, 1) => combine::<1, u8>(dst, cur, prev, enc, u8::from_le_bytes),
                    (NeighbourOp::Delta, enc, 2) => combine::<2, u16>(dst, cur, prev, enc, u16::from_le_bytes),
                    (NeighbourOp::Delta, enc, 4) => combine::<4, u32>(dst, cur, prev, enc, u32::from_le_bytes),
                    (NeighbourOp::Delta, enc, 8) => combine::<8, u64>(dst, cur, prev, enc, u64::from_le_bytes),
                    _ => return Err(CodecError::InvalidSpec(format!("delta: element size {es} is not supported"))),
                }
            }
        }
        Ok(())
    }
}

/// Element-wise wrapping difference (encode) or sum (decode) of two rows.
fn combine<const N: usize, T>(dst: &mut [u8], cur: &[u8], prev: &[u8], encode: bool, read: fn([u8; N]) -> T)
where
    T: WrappingInt,
{
    for ((d, c), p) in dst.chunks_exact_mut(N).zip(cur.chunks_exact(N)).zip(prev.chunks_exact(N)) {
        let mut a = [0u8; N];
        let mut b = [0u8; N];
        a.copy_from_slice(c);
        b.copy_from_slice(p);
        let (x, y) = (read(a), read(b));
        let v = if encode { x.wrapping_sub_(y) } else { x.wrapping_add_(y) };
        d.copy_from_slice(&v.le_bytes()[..N]);
    }
}

/// One block along the fastest axis: element k combines with element k-1 (the input's on
/// encode, the already restored output's on decode).
fn along_fastest<const N: usize, T: WrappingInt>(
    blk_in: &[u8],
    blk_out: &mut [u8],
    op: NeighbourOp,
    encode: bool,
    read: fn([u8; N]) -> T,
) {
    let mut prev: Option<T> = None;
    for (c, d) in blk_in.chunks_exact(N).zip(blk_out.chunks_exact_mut(N)) {
        let mut a = [0u8; N];
        a.copy_from_slice(c);
        let x = read(a);
        let v = match (prev, op, encode) {
            (None, _, _) => x,
            (Some(p), NeighbourOp::Xor, _) => x.xor_(p),
            (Some(p), NeighbourOp::Delta, true) => x.wrapping_sub_(p),
            (Some(p), NeighbourOp::Delta, false) => x.wrapping_add_(p),
        };
        d.copy_from_slice(&v.le_bytes()[..N]);
        prev = Some(if encode { x } else { v });
    }
}

trait WrappingInt: Copy {
    fn wrapping_sub_(self, o: Self) -> Self;
    fn wrapping_add_(self, o: Self) -> Self;
    fn xor_(self, o: Self) -> Self;
    fn le_bytes(self) -> [u8; 8];
}

macro_rules! wrapping_int {
    ($($t:ty),*) => {$(
        impl WrappingInt for $t {
            fn wrapping_sub_(self, o: Self) -> Self { self.wrapping_sub(o) }
            fn wrapping_add_(self, o: Self) -> Self { self.wrapping_add(o) }
            fn xor_(self, o: Self) -> Self { self ^ o }
            fn le_bytes(self) -> [u8; 8] {
                let mut out = [0u8; 8];
                out[..std::mem::size_of::<$t>()].copy_from_slice(&self.to_le_bytes());
                out
            }
        }
    )*};
}
wrapping_int!(u8, u16, u32, u64);

impl Transform for NeighbourTransform {
    fn spec(&self) -> CodecSpec {
        CodecSpec::new(self.name()).with("axis", self.axis)
    }

    fn speed(&self) -> Speed {
        Speed::new(18_000.0, 20_000.0)
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::LOSSLESS
    }

    fn encode(&self, input: &[u8], shape: &[usize], out: &mut Vec<u8>) -> Result<()> {
        self.run(input, shape, out, true)
    }

    fn decode(&self, input: &[u8], shape: &[usize], out: &mut Vec<u8>) -> Result<()> {
        self.run(input, shape, out, false)
    }
}

/// Lossy: rounds floats to `keepbits` mantissa bits (round to nearest, ties to even), so
/// the discarded low bits become zeros that the following codecs compress away. Every
/// finite element `x` comes back within 2^-(keepbits+1) · max(|x|, smallest normal): a
/// relative bound for normal numbers, an absolute one for subnormals. NaN, infinities and
/// values that would round up to infinity are kept exactly. Decoding is the identity.
#[derive(Debug, Clone, Copy)]
pub struct BitRoundTransform {
    pub keepbits: u32,
    pub dtype: NumType,
}

impl BitRoundTransform {
    pub fn mantissa_bits(dtype: NumType) -> Option<u32> {
        match dtype {
            NumType::F32 => Some(23),
            NumType::F64 => Some(52),
            _ => None,
        }
    }
}

impl Transform for BitRoundTransform {
    fn spec(&self) -> CodecSpec {
        CodecSpec::new("bitround").with("keepbits", self.keepbits)
    }

    fn speed(&self) -> Speed {
        Speed::new(2_000.0, 50_000.0)
    }

    fn capabilities(&self) -> Capabilities {
        if !self.dtype.is_float() {
            return Capabilities { partial_decode: true, ..Capabilities::LOSSLESS };
        }
        Capabilities {
            lossless: false,
            partial_decode: true,
            error_bound: Some(ErrorBound::PointwiseRelative(2f64.powi(-(self.keepbits as i32 + 1)))),
        }
    }

    fn encode(&self, input: &[u8], _shape: &[usize], out: &mut Vec<u8>) -> Result<()> {
        out.clear();
        out.extend_from_slice(input);
        macro_rules! round {
            ($u:ty, $mant:expr, $exp_mask:expr) => {{
                let drop = $mant - self.keepbits;
                if drop == 0 {
                    return Ok(());
                }
                let half: $u = 1 << (drop - 1);
                let mask: $u = !((1 << drop) - 1);
                for c in out.chunks_exact_mut(std::mem::size_of::<$u>()) {
                    let bits = <$u>::from_le_bytes(c.try_into().unwrap_or_default());
                    if bits & $exp_mask == $exp_mask {
                        continue; // NaN or infinity
                    }
                    let rounded = bits.wrapping_add(half - 1 + ((bits >> drop) & 1)) & mask;
                    // Rounding the largest finite values up would carry into the exponent
                    // and give infinity: those elements are kept exactly instead.
                    if rounded & $exp_mask != $exp_mask {
                        c.copy_from_slice(&rounded.to_le_bytes());
                    }
                }
            }};
        }
        match self.dtype {
            NumType::F32 => round!(u32, 23u32, 0x7f80_0000u32),
            NumType::F64 => round!(u64, 52u32, 0x7ff0_0000_0000_0000u64),
            _ => {} // integers are kept exactly
        }
        Ok(())
    }

    fn decode(&self, input: &[u8], _shape: &[usize], out: &mut Vec<u8>) -> Result<()> {
        out.clear();
        out.extend_from_slice(input);
        Ok(())
    }
}
