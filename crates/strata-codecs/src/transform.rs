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
    /// Restores `buf` in place. `scratch` is room a transform that cannot work in place may
    /// use (its contents on entry and exit are unspecified): decoding is on every read, and
    /// a fresh buffer per stage cost an allocation and a copy of every segment.
    fn decode(&self, buf: &mut Vec<u8>, shape: &[usize], scratch: &mut Vec<u8>) -> Result<()>;
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

    fn decode(&self, buf: &mut Vec<u8>, _shape: &[usize], scratch: &mut Vec<u8>) -> Result<()> {
        scratch.clear();
        scratch.resize(buf.len(), 0);
        crate::shuffle::unshuffle(self.element_size, buf, scratch);
        std::mem::swap(buf, scratch);
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

    /// The segment as blocks of `len` rows of `stride` elements each (see `geometry`), or
    /// `None` when the transform is the identity on it; a length that does not match the
    /// shape is an error of the kind `err` makes.
    fn blocks(
        &self,
        len_bytes: usize,
        shape: &[usize],
        err: impl Fn(String) -> CodecError,
    ) -> Result<Option<(usize, usize)>> {
        let Some((stride, len)) = self.geometry(shape) else { return Ok(None) };
        let es = self.element_size;
        if !len_bytes.is_multiple_of(es) || stride == 0 || len < 2 {
            return Ok(None);
        }
        if !matches!(es, 1 | 2 | 4 | 8) {
            return Err(CodecError::InvalidSpec(format!("{}: element size {es} is not supported", self.name())));
        }
        if !len_bytes.is_multiple_of(stride * es * len) {
            return Err(err(format!("segment of {len_bytes} bytes does not match shape {shape:?}")));
        }
        Ok(Some((stride, len)))
    }

    fn encode_into(&self, input: &[u8], shape: &[usize], out: &mut Vec<u8>) -> Result<()> {
        out.clear();
        out.extend_from_slice(input);
        let name = self.name();
        let Some((stride, len)) =
            self.blocks(input.len(), shape, |d| CodecError::InvalidSpec(format!("{name}: {d}")))?
        else {
            return Ok(());
        };
        // The segment is a sequence of blocks of `len` rows of `stride` elements; within a
        // block every row but the first is combined with the row before it: the block from
        // its second row on, against the block shifted by one row, in one loop that
        // vectorizes whatever the row length.
        let row = stride * self.element_size;
        let block = row * len;
        for (blk_in, blk_out) in input.chunks_exact(block).zip(out.chunks_exact_mut(block)) {
            let (cur, prev, dst) = (&blk_in[row..], &blk_in[..block - row], &mut blk_out[row..]);
            match (self.op, self.element_size) {
                (NeighbourOp::Xor, _) => {
                    for ((d, c), p) in dst.iter_mut().zip(cur).zip(prev) {
                        *d = c ^ p;
                    }
                }
                (NeighbourOp::Delta, 1) => sub_rows::<1, u8>(dst, cur, prev, u8::from_le_bytes),
                (NeighbourOp::Delta, 2) => sub_rows::<2, u16>(dst, cur, prev, u16::from_le_bytes),
                (NeighbourOp::Delta, 4) => sub_rows::<4, u32>(dst, cur, prev, u32::from_le_bytes),
                _ => sub_rows::<8, u64>(dst, cur, prev, u64::from_le_bytes),
            }
        }
        Ok(())
    }

    /// Decoding, in place: row k of each block is restored from row k-1, already restored.
    fn restore(&self, buf: &mut [u8], shape: &[usize]) -> Result<()> {
        let codec = if self.op == NeighbourOp::Xor { "xor" } else { "delta" };
        let Some((stride, len)) = self.blocks(buf.len(), shape, |detail| CodecError::Corrupt { codec, detail })? else {
            return Ok(());
        };
        let es = self.element_size;
        // Viewed as elements where the buffer's alignment allows (the allocator's usual
        // one does): the compiler then vectorizes the row loops and keeps the running value
        // of a prefix in a register.
        match (es, cfg!(target_endian = "little")) {
            (2, true) if bytemuck::try_cast_slice_mut::<u8, u16>(buf).is_ok() => {
                let v = bytemuck::cast_slice_mut::<u8, u16>(buf);
                restore_typed(v, stride, len, self.op);
            }
            (4, true) if bytemuck::try_cast_slice_mut::<u8, u32>(buf).is_ok() => {
                let v = bytemuck::cast_slice_mut::<u8, u32>(buf);
                restore_typed(v, stride, len, self.op);
            }
            (8, true) if bytemuck::try_cast_slice_mut::<u8, u64>(buf).is_ok() => {
                let v = bytemuck::cast_slice_mut::<u8, u64>(buf);
                restore_typed(v, stride, len, self.op);
            }
            (1, _) => restore_typed(buf, stride, len, self.op),
            _ => restore_bytes(buf, es, stride, len, self.op),
        }
        Ok(())
    }
}

/// Element-wise wrapping difference of two rows (encoding a delta).
fn sub_rows<const N: usize, T: WrappingInt>(dst: &mut [u8], cur: &[u8], prev: &[u8], read: fn([u8; N]) -> T) {
    for ((d, c), p) in dst.chunks_exact_mut(N).zip(cur.chunks_exact(N)).zip(prev.chunks_exact(N)) {
        let mut a = [0u8; N];
        let mut b = [0u8; N];
        a.copy_from_slice(c);
        b.copy_from_slice(p);
        d.copy_from_slice(&read(a).wrapping_sub_(read(b)).le_bytes()[..N]);
    }
}

fn restore_typed<T: WrappingInt>(v: &mut [T], stride: usize, len: usize, op: NeighbourOp) {
    let combine = |x: T, p: T| if op == NeighbourOp::Xor { x.xor_(p) } else { x.wrapping_add_(p) };
    for blk in v.chunks_exact_mut(stride * len) {
        if stride == 1 {
            // A running prefix along the fastest axis.
            let mut acc = blk[0];
            for x in &mut blk[1..] {
                acc = combine(*x, acc);
                *x = acc;
            }
            continue;
        }
        for k in 1..len {
            let (done, rest) = blk.split_at_mut(k * stride);
            for (x, &p) in rest[..stride].iter_mut().zip(&done[(k - 1) * stride..]) {
                *x = combine(*x, p);
            }
        }
    }
}

/// The portable form of [`restore_typed`] for buffers that cannot be viewed as elements
/// (misaligned, or a big-endian machine): little-endian bytes read and written one element
/// at a time.
fn restore_bytes(buf: &mut [u8], es: usize, stride: usize, len: usize, op: NeighbourOp) {
    let read = |b: &[u8]| {
        let mut a = [0u8; 8];
        a[..es].copy_from_slice(b);
        u64::from_le_bytes(a)
    };
    let mask = if es == 8 { u64::MAX } else { (1u64 << (8 * es)) - 1 };
    let row = stride * es;
    for blk in buf.chunks_exact_mut(row * len) {
        for i in (row..blk.len()).step_by(es) {
            let (x, p) = (read(&blk[i..i + es]), read(&blk[i - row..i - row + es]));
            let v = if op == NeighbourOp::Xor { x ^ p } else { x.wrapping_add(p) & mask };
            blk[i..i + es].copy_from_slice(&v.to_le_bytes()[..es]);
        }
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
        self.encode_into(input, shape, out)
    }

    fn decode(&self, buf: &mut Vec<u8>, shape: &[usize], _scratch: &mut Vec<u8>) -> Result<()> {
        self.restore(buf, shape)
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

    fn decode(&self, _buf: &mut Vec<u8>, _shape: &[usize], _scratch: &mut Vec<u8>) -> Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The portable byte-wise restore (for misaligned buffers) agrees with the typed one on
    /// every width, both ops, along the fastest axis and across rows.
    #[test]
    fn byte_restore_matches_typed_restore() {
        for op in [NeighbourOp::Delta, NeighbourOp::Xor] {
            for (stride, len) in [(1usize, 7usize), (3, 5), (16, 2)] {
                let n = stride * len * 3;
                let raw: Vec<u64> = (0..n as u64).map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 7).collect();
                macro_rules! check {
                    ($t:ty) => {{
                        let es = std::mem::size_of::<$t>();
                        let mut typed: Vec<$t> = raw.iter().map(|&x| x as $t).collect();
                        let mut bytes: Vec<u8> = typed.iter().flat_map(|x| x.to_le_bytes()).collect();
                        restore_typed(&mut typed, stride, len, op);
                        restore_bytes(&mut bytes, es, stride, len, op);
                        let want: Vec<u8> = typed.iter().flat_map(|x| x.to_le_bytes()).collect();
                        assert_eq!(bytes, want, "{op:?} es {es} stride {stride} len {len}");
                    }};
                }
                check!(u16);
                check!(u32);
                check!(u64);
            }
        }
    }
}
