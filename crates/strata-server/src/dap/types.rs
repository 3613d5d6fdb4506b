//! DAP2's atomic types for strata's element types, and their XDR encoding.
//!
//! DAP2 has no 8-bit signed or 64-bit integers: `i8` is sent as `Int16`, `i64` and `u64` as
//! `Float64` (exact up to 2^53), as THREDDS does for the types it lacks. Text variables
//! (`char`, `string`) are not served over DAP2.

use strata_core::DType;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DapType {
    Byte,
    Int16,
    UInt16,
    Int32,
    UInt32,
    Float32,
    Float64,
}

impl DapType {
    pub fn of(dtype: DType) -> Option<DapType> {
        Some(match dtype {
            DType::U8 => DapType::Byte,
            DType::I8 | DType::I16 => DapType::Int16,
            DType::U16 => DapType::UInt16,
            DType::I32 => DapType::Int32,
            DType::U32 => DapType::UInt32,
            DType::F32 => DapType::Float32,
            DType::I64 | DType::U64 | DType::F64 => DapType::Float64,
            DType::Char | DType::String => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            DapType::Byte => "Byte",
            DapType::Int16 => "Int16",
            DapType::UInt16 => "UInt16",
            DapType::Int32 => "Int32",
            DapType::UInt32 => "UInt32",
            DapType::Float32 => "Float32",
            DapType::Float64 => "Float64",
        }
    }

    /// Bytes per value on the wire (XDR widens 16-bit integers to 4 bytes).
    pub fn wire_size(self) -> usize {
        match self {
            DapType::Byte => 1,
            DapType::Float64 => 8,
            _ => 4,
        }
    }
}

/// Appends the XDR (big-endian) form of `le`, little-endian values of `dtype`.
pub(crate) fn encode(dtype: DType, le: &[u8], out: &mut Vec<u8>) {
    macro_rules! each {
        ($w:literal, |$c:ident| $body:expr) => {
            for $c in le.chunks_exact($w) {
                out.extend_from_slice(&$body);
            }
        };
    }
    match dtype {
        DType::U8 | DType::Char => out.extend_from_slice(le),
        DType::I8 => each!(1, |c| i32::from(c[0] as i8).to_be_bytes()),
        DType::I16 => each!(2, |c| i32::from(i16::from_le_bytes([c[0], c[1]])).to_be_bytes()),
        DType::U16 => each!(2, |c| u32::from(u16::from_le_bytes([c[0], c[1]])).to_be_bytes()),
        DType::I32 | DType::U32 | DType::F32 => each!(4, |c| [c[3], c[2], c[1], c[0]]),
        DType::F64 => each!(8, |c| [c[7], c[6], c[5], c[4], c[3], c[2], c[1], c[0]]),
        DType::I64 => each!(8, |c| (i64::from_le_bytes(c.try_into().unwrap_or([0; 8])) as f64).to_be_bytes()),
        DType::U64 => each!(8, |c| (u64::from_le_bytes(c.try_into().unwrap_or([0; 8])) as f64).to_be_bytes()),
        DType::String => {}
    }
}

/// `v` as one little-endian element of `dtype` (the fill written where a value selection
/// does not hold); None when `v` does not fit.
pub(crate) fn element(dtype: DType, v: f64) -> Option<Vec<u8>> {
    let int = |lo: f64, hi: f64| (v.fract() == 0.0 && v >= lo && v <= hi).then_some(v);
    Some(match dtype {
        DType::F32 => (v as f32).to_le_bytes().to_vec(),
        DType::F64 => v.to_le_bytes().to_vec(),
        DType::I8 => (int(-128.0, 127.0)? as i8).to_le_bytes().to_vec(),
        DType::U8 | DType::Char => vec![int(0.0, 255.0)? as u8],
        DType::I16 => (int(-32768.0, 32767.0)? as i16).to_le_bytes().to_vec(),
        DType::U16 => (int(0.0, 65535.0)? as u16).to_le_bytes().to_vec(),
        DType::I32 => (int(-2147483648.0, 2147483647.0)? as i32).to_le_bytes().to_vec(),
        DType::U32 => (int(0.0, 4294967295.0)? as u32).to_le_bytes().to_vec(),
        DType::I64 => (int(-9.2e18, 9.2e18)? as i64).to_le_bytes().to_vec(),
        DType::U64 => (int(0.0, 1.8e19)? as u64).to_le_bytes().to_vec(),
        DType::String => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xdr_is_big_endian_and_widens_short_integers() {
        let mut out = Vec::new();
        encode(DType::I16, &(-2i16).to_le_bytes(), &mut out);
        assert_eq!(out, (-2i32).to_be_bytes());
        out.clear();
        encode(DType::F32, &1.5f32.to_le_bytes(), &mut out);
        assert_eq!(out, 1.5f32.to_be_bytes());
        out.clear();
        encode(DType::F64, &(-0.25f64).to_le_bytes(), &mut out);
        assert_eq!(out, (-0.25f64).to_be_bytes());
        out.clear();
        encode(DType::I8, &[0xff], &mut out);
        assert_eq!(out, (-1i32).to_be_bytes());
    }

    #[test]
    fn fills_that_do_not_fit_are_refused() {
        assert_eq!(element(DType::I16, -999.0), Some((-999i16).to_le_bytes().to_vec()));
        assert_eq!(element(DType::U8, 300.0), None);
        assert_eq!(element(DType::I32, 0.5), None);
    }
}
