//! DAP2's atomic types for strata's element types, and their XDR encoding.
//!
//! DAP2 has no 8-bit signed or 64-bit integers: `i8` is sent as `Int16`, `i64` and `u64` as
//! `Float64` (exact up to 2^53), as THREDDS does for the types it lacks. Text variables
//! (`char`, `string`) are `String`s (`strings.rs`).

use strata_core::decoding::SignView;
use strata_core::manifest::Variable;
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
    String,
}

impl DapType {
    pub fn of(dtype: DType) -> DapType {
        match dtype {
            DType::U8 => DapType::Byte,
            DType::I8 | DType::I16 => DapType::Int16,
            DType::U16 => DapType::UInt16,
            DType::I32 => DapType::Int32,
            DType::U32 => DapType::UInt32,
            DType::F32 => DapType::Float32,
            DType::I64 | DType::U64 | DType::F64 => DapType::Float64,
            DType::Char | DType::String => DapType::String,
        }
    }

    /// The type `var` is served as: its element type's ([`DapType::of`]), except that
    /// signed bytes flagged `_Unsigned = "true"` (NetCDF-3's unsigned bytes) go as `Byte`
    /// with their bits unchanged, so the flag still reads right (as `Int16`, a client that
    /// honours it would turn -1 into 65535, not 255).
    pub fn of_variable(var: &Variable) -> DapType {
        if SignView::of(var) == Some(SignView::Unsigned(8)) {
            return DapType::Byte;
        }
        DapType::of(var.dtype)
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
            DapType::String => "String",
        }
    }

    /// Bytes per value on the wire (XDR widens 16-bit integers to 4 bytes); None for
    /// strings, whose length each string gives.
    pub fn wire_size(self) -> Option<usize> {
        match self {
            DapType::Byte => Some(1),
            DapType::Float64 => Some(8),
            DapType::String => None,
            _ => Some(4),
        }
    }
}

/// `le` (little-endian values of `dtype`) in XDR as `dap`: bytes as they are (signed ones
/// flagged unsigned included), else the type's own XDR form ([`strata_core::wire::xdr`]).
pub(crate) fn to_wire(dtype: DType, dap: DapType, le: Vec<u8>) -> Vec<u8> {
    if dap == DapType::Byte {
        return le;
    }
    strata_core::wire::xdr(dtype, le)
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
    use strata_core::manifest::{AttrValue, Attribute};

    /// Values of `dtype` served as its own DAP type.
    fn own(dtype: DType, le: &[u8]) -> Vec<u8> {
        to_wire(dtype, DapType::of(dtype), le.to_vec())
    }

    #[test]
    fn signed_bytes_flagged_unsigned_go_as_bytes() {
        let var = |dtype, unsigned: Option<&str>| Variable {
            name: "v".into(),
            dtype,
            dims: vec!["x".into()],
            attrs: unsigned
                .map(|u| vec![Attribute { name: "_Unsigned".into(), value: AttrValue::String(u.into()) }])
                .unwrap_or_default(),
            chunking: None,
            codecs: vec![],
            inline_strings: None,
            plan: None,
        };
        assert_eq!(DapType::of_variable(&var(DType::I8, Some("true"))), DapType::Byte);
        assert_eq!(DapType::of_variable(&var(DType::I8, Some("TRUE "))), DapType::Byte);
        assert_eq!(DapType::of_variable(&var(DType::I8, Some("false"))), DapType::Int16);
        assert_eq!(DapType::of_variable(&var(DType::I8, None)), DapType::Int16);
        assert_eq!(DapType::of_variable(&var(DType::U8, None)), DapType::Byte);
        assert_eq!(DapType::of_variable(&var(DType::I16, Some("true"))), DapType::Int16);
        assert_eq!(to_wire(DType::I8, DapType::Byte, vec![0xff, 0x01]), [0xff, 0x01], "the bits, unchanged");
    }

    #[test]
    fn each_type_goes_in_its_own_xdr_form() {
        // The forms themselves are strata_core::wire's tests; here, that a type served as
        // itself reaches them.
        assert_eq!(own(DType::I16, &(-2i16).to_le_bytes()), (-2i32).to_be_bytes());
        let le: Vec<u8> = [-7i32, 9].iter().flat_map(|v| v.to_le_bytes()).collect();
        assert_eq!(own(DType::I32, &le), [(-7i32).to_be_bytes(), 9i32.to_be_bytes()].concat());
        let le: Vec<u8> = [2.5f64, -1e300].iter().flat_map(|v| v.to_le_bytes()).collect();
        assert_eq!(own(DType::F64, &le), [2.5f64.to_be_bytes(), (-1e300f64).to_be_bytes()].concat());
    }

    #[test]
    fn fills_that_do_not_fit_are_refused() {
        assert_eq!(element(DType::I16, -999.0), Some((-999i16).to_le_bytes().to_vec()));
        assert_eq!(element(DType::U8, 300.0), None);
        assert_eq!(element(DType::I32, 0.5), None);
    }
}
