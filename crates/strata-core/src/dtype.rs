use serde::{Deserialize, Serialize};

/// Element types a variable can have. Names follow NumPy's short codes with explicit sizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    I8,
    U8,
    I16,
    U16,
    I32,
    U32,
    I64,
    U64,
    F32,
    F64,
    /// NetCDF `char` (NumPy `S1`): one byte per element.
    Char,
    /// Variable-length UTF-8 strings; stored inline in the manifest, never in segments.
    String,
}

/// Values per block of [`DType::for_each_f64_block`].
pub const F64_BLOCK: usize = 64;

impl DType {
    /// Bytes per element in segments (0 for inline strings).
    pub fn size(self) -> usize {
        match self {
            DType::I8 | DType::U8 | DType::Char => 1,
            DType::I16 | DType::U16 => 2,
            DType::I32 | DType::U32 | DType::F32 => 4,
            DType::I64 | DType::U64 | DType::F64 => 8,
            DType::String => 0,
        }
    }

    /// The element type codecs see; `None` for inline strings.
    pub fn num_type(self) -> Option<strata_codecs::NumType> {
        use strata_codecs::NumType as N;
        Some(match self {
            DType::I8 => N::I8,
            DType::U8 | DType::Char => N::U8,
            DType::I16 => N::I16,
            DType::U16 => N::U16,
            DType::I32 => N::I32,
            DType::U32 => N::U32,
            DType::I64 => N::I64,
            DType::U64 => N::U64,
            DType::F32 => N::F32,
            DType::F64 => N::F64,
            DType::String => return None,
        })
    }

    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F64)
    }

    pub fn name(self) -> &'static str {
        match self {
            DType::I8 => "i8",
            DType::U8 => "u8",
            DType::I16 => "i16",
            DType::U16 => "u16",
            DType::I32 => "i32",
            DType::U32 => "u32",
            DType::I64 => "i64",
            DType::U64 => "u64",
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::Char => "char",
            DType::String => "string",
        }
    }

    /// Calls `f` with every element of little-endian `bytes` as f64 (64-bit integers beyond
    /// 2^53 are rounded to the nearest f64).
    pub fn for_each_f64(self, bytes: &[u8], mut f: impl FnMut(f64)) {
        self.for_each_f64_block(bytes, |block| block.iter().for_each(|&v| f(v)));
    }

    /// [`for_each_f64`](Self::for_each_f64) in blocks of up to `F64_BLOCK` values, for
    /// loops the compiler can vectorize (a call per element cannot be).
    pub fn for_each_f64_block(self, bytes: &[u8], mut f: impl FnMut(&[f64])) {
        fn blocks<const N: usize>(bytes: &[u8], conv: impl Fn([u8; N]) -> f64, f: &mut impl FnMut(&[f64])) {
            let mut block = [0f64; F64_BLOCK];
            for run in bytes.chunks(F64_BLOCK * N) {
                let n = run.len() / N;
                for (o, c) in block.iter_mut().zip(run.chunks_exact(N)) {
                    let mut a = [0u8; N];
                    a.copy_from_slice(c);
                    *o = conv(a);
                }
                if n > 0 {
                    f(&block[..n]);
                }
            }
        }
        match self {
            DType::I8 => blocks::<1>(bytes, |a| i8::from_le_bytes(a) as f64, &mut f),
            DType::U8 | DType::Char => blocks::<1>(bytes, |a| a[0] as f64, &mut f),
            DType::I16 => blocks::<2>(bytes, |a| i16::from_le_bytes(a) as f64, &mut f),
            DType::U16 => blocks::<2>(bytes, |a| u16::from_le_bytes(a) as f64, &mut f),
            DType::I32 => blocks::<4>(bytes, |a| i32::from_le_bytes(a) as f64, &mut f),
            DType::U32 => blocks::<4>(bytes, |a| u32::from_le_bytes(a) as f64, &mut f),
            DType::F32 => blocks::<4>(bytes, |a| f32::from_le_bytes(a) as f64, &mut f),
            DType::F64 => blocks::<8>(bytes, f64::from_le_bytes, &mut f),
            DType::I64 => blocks::<8>(bytes, |a| i64::from_le_bytes(a) as f64, &mut f),
            DType::U64 => blocks::<8>(bytes, |a| u64::from_le_bytes(a) as f64, &mut f),
            DType::String => {}
        }
    }

    /// Which elements of little-endian `bytes` hold a value, as a validity bitmap in
    /// Arrow's layout (bit `i` of byte `i / 8` set where element `i` is valid, least
    /// significant bit first), with the count of invalid ones: NaN and the values in
    /// `missing` (fill values) are invalid. None when every element is valid. SQL's and the
    /// server's columns take their nulls from here, so the per-value test runs at the
    /// engine's optimization rather than that of the crates building the columns.
    pub fn validity(self, bytes: &[u8], missing: &[f64]) -> Option<(Vec<u8>, usize)> {
        let n = bytes.len() / self.size().max(1);
        let mut bits: Vec<u8> = Vec::with_capacity(n.div_ceil(8));
        let mut invalid = 0usize;
        const _: () = assert!(F64_BLOCK == 64);
        // A block is 64 elements: one word of the bitmap (the last one maybe shorter).
        self.for_each_f64_block(bytes, |block| {
            let mut word = 0u64;
            for (i, &v) in block.iter().enumerate() {
                let valid = !v.is_nan() & !missing.contains(&v);
                word |= (valid as u64) << i;
            }
            invalid += block.len() - word.count_ones() as usize;
            bits.extend_from_slice(&word.to_le_bytes()[..block.len().div_ceil(8)]);
        });
        (invalid > 0).then_some((bits, invalid))
    }

    /// The elements of `bytes` as f64 (see [`for_each_f64`](Self::for_each_f64)).
    pub fn to_f64s(self, bytes: &[u8]) -> Vec<f64> {
        let mut out = Vec::with_capacity(bytes.len() / self.size().max(1));
        self.for_each_f64(bytes, |v| out.push(v));
        out
    }

    /// Minimum, maximum and count of the valid elements of little-endian `bytes`, as f64:
    /// NaN and the values in `missing` (fill values) are not valid. Integers beyond 2^53 are
    /// rounded outward so the range still bounds every value.
    pub fn summarize(self, bytes: &[u8], missing: &[f64]) -> ValueSummary {
        // Branch-free over blocks: an invalid value (NaN, a missing value) counts 0 and
        // leaves min and max alone (f64::min/max return the other operand of a NaN).
        fn fold(block: &[f64], missing: impl Fn(f64) -> bool, acc: &mut (u64, f64, f64)) {
            // Eight independent lanes, each `if v < lo { v } else { lo }` (false for a NaN,
            // so an invalid value turned NaN leaves it), which the compiler turns into
            // vector min/max; one running min over the block would stay scalar.
            let (mut c, mut lo, mut hi) = ([0u64; 8], [f64::INFINITY; 8], [f64::NEG_INFINITY; 8]);
            let lanes = block.chunks_exact(8);
            let rest = lanes.remainder();
            for v in lanes {
                for i in 0..8 {
                    let valid = !v[i].is_nan() & !missing(v[i]);
                    let x = if valid { v[i] } else { f64::NAN };
                    c[i] += valid as u64;
                    lo[i] = if x < lo[i] { x } else { lo[i] };
                    hi[i] = if x > hi[i] { x } else { hi[i] };
                }
            }
            for (i, &v) in rest.iter().enumerate() {
                let valid = !v.is_nan() & !missing(v);
                let x = if valid { v } else { f64::NAN };
                c[i] += valid as u64;
                lo[i] = if x < lo[i] { x } else { lo[i] };
                hi[i] = if x > hi[i] { x } else { hi[i] };
            }
            acc.0 += c.iter().sum::<u64>();
            acc.1 = lo.iter().fold(acc.1, |a, &b| a.min(b));
            acc.2 = hi.iter().fold(acc.2, |a, &b| a.max(b));
        }
        let mut acc = (0u64, f64::INFINITY, f64::NEG_INFINITY);
        // No missing value or one (a fill value) is the common case: a loop each, with
        // the test inlined.
        match missing {
            [] => self.for_each_f64_block(bytes, |b| fold(b, |_| false, &mut acc)),
            &[m] => self.for_each_f64_block(bytes, |b| fold(b, |v| v == m, &mut acc)),
            _ => self.for_each_f64_block(bytes, |b| fold(b, |v| missing.contains(&v), &mut acc)),
        }
        let (count, min, max) = acc;
        let mut s = if count == 0 { ValueSummary::empty() } else { ValueSummary { count, min, max } };
        if matches!(self, DType::I64 | DType::U64) {
            s.widen_for_rounding();
        }
        s
    }
}

/// min/max/count of the valid values of a segment, kept in the segment table.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ValueSummary {
    pub count: u64,
    pub min: f64,
    pub max: f64,
}

impl ValueSummary {
    pub fn empty() -> Self {
        Self { count: 0, min: f64::NAN, max: f64::NAN }
    }

    fn widen_for_rounding(&mut self) {
        if self.count > 0 && self.min.abs() > 9.0e15 {
            self.min = self.min.next_down();
        }
        if self.count > 0 && self.max.abs() > 9.0e15 {
            self.max = self.max.next_up();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::DType;

    #[test]
    fn validity_marks_nan_and_fill_values_in_arrows_bit_order() {
        // 130 elements: two whole words and two bits of a third.
        let values: Vec<f32> = (0..130)
            .map(|i| {
                if i % 7 == 0 {
                    f32::NAN
                } else if i % 11 == 0 {
                    -999.0
                } else {
                    i as f32
                }
            })
            .collect();
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let (bits, invalid) = DType::F32.validity(&bytes, &[-999.0]).unwrap_or_else(|| panic!("some are invalid"));
        assert_eq!(bits.len(), 17);
        let expected: Vec<bool> = values.iter().map(|v| !v.is_nan() && *v != -999.0).collect();
        let got: Vec<bool> = (0..130).map(|i| bits[i / 8] >> (i % 8) & 1 == 1).collect();
        assert_eq!(got, expected);
        assert_eq!(invalid, expected.iter().filter(|v| !**v).count());
        let ints: Vec<u8> = [1i16, 2, 3].iter().flat_map(|v| v.to_le_bytes()).collect();
        assert_eq!(DType::I16.validity(&ints, &[]), None);
        assert_eq!(DType::I16.validity(&ints, &[2.0]), Some((vec![0b101], 1)));
    }
}
