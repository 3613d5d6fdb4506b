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
        fn each<const N: usize>(bytes: &[u8], conv: impl Fn([u8; N]) -> f64, f: &mut impl FnMut(f64)) {
            for c in bytes.chunks_exact(N) {
                let mut a = [0u8; N];
                a.copy_from_slice(c);
                f(conv(a));
            }
        }
        match self {
            DType::I8 => each::<1>(bytes, |a| i8::from_le_bytes(a) as f64, &mut f),
            DType::U8 | DType::Char => each::<1>(bytes, |a| a[0] as f64, &mut f),
            DType::I16 => each::<2>(bytes, |a| i16::from_le_bytes(a) as f64, &mut f),
            DType::U16 => each::<2>(bytes, |a| u16::from_le_bytes(a) as f64, &mut f),
            DType::I32 => each::<4>(bytes, |a| i32::from_le_bytes(a) as f64, &mut f),
            DType::U32 => each::<4>(bytes, |a| u32::from_le_bytes(a) as f64, &mut f),
            DType::F32 => each::<4>(bytes, |a| f32::from_le_bytes(a) as f64, &mut f),
            DType::F64 => each::<8>(bytes, f64::from_le_bytes, &mut f),
            DType::I64 => each::<8>(bytes, |a| i64::from_le_bytes(a) as f64, &mut f),
            DType::U64 => each::<8>(bytes, |a| u64::from_le_bytes(a) as f64, &mut f),
            DType::String => {}
        }
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
        let mut s = ValueSummary::empty();
        self.for_each_f64(bytes, |v| {
            if missing.is_empty() || !missing.contains(&v) {
                s.add(v);
            }
        });
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

    fn add(&mut self, v: f64) {
        if v.is_nan() {
            return;
        }
        if self.count == 0 {
            self.min = v;
            self.max = v;
        } else {
            self.min = self.min.min(v);
            self.max = self.max.max(v);
        }
        self.count += 1;
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
