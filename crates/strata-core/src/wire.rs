//! Values in the big-endian forms other tools read: NetCDF classic (each element swapped)
//! and XDR as DAP2 sends it (16-bit integers widened to four bytes, 64-bit integers as
//! doubles); and in the host's order for native callers (the C API on a big-endian host).
//! The server streams every response through these loops; they live here, at the engine's
//! optimization, so the server crate itself can be compiled for build time.

use crate::DType;

/// Little-endian elements of `size` bytes (what segments hold) to big-endian, in place
/// ([`strata_codecs::endian::swap_elements`]).
pub fn to_big_endian(buf: &mut [u8], size: usize) {
    strata_codecs::endian::swap_elements(buf, size);
}

/// Little-endian elements of `size` bytes to the host's order and back, in place: a swap
/// of each element on a big-endian host, nothing on a little-endian one (for callers that
/// hand values to native code, as the C API does).
pub fn le_to_host(buf: &mut [u8], size: usize) {
    if cfg!(target_endian = "big") {
        strata_codecs::endian::swap_elements(buf, size);
    }
}

/// `le` (little-endian values of `dtype`) in XDR: bytes as they are; elements that keep
/// their width byte-swapped in `le`'s own buffer (one buffer per piece, not a second
/// zero-filled copy); 8- and 16-bit integers widened to four bytes, 64-bit ones sent as
/// doubles. Strings have no fixed-size form: empty.
pub fn xdr(dtype: DType, mut le: Vec<u8>) -> Vec<u8> {
    match dtype {
        DType::U8 | DType::Char => le,
        DType::I32 | DType::U32 | DType::F32 | DType::F64 => {
            to_big_endian(&mut le, dtype.size());
            le
        }
        DType::I8 => widened::<1, 4>(&le, |c| i32::from(c[0] as i8).to_be_bytes()),
        DType::I16 => widened::<2, 4>(&le, |c| i32::from(i16::from_le_bytes(c)).to_be_bytes()),
        DType::U16 => widened::<2, 4>(&le, |c| u32::from(u16::from_le_bytes(c)).to_be_bytes()),
        DType::I64 => widened::<8, 8>(&le, |c| (i64::from_le_bytes(c) as f64).to_be_bytes()),
        DType::U64 => widened::<8, 8>(&le, |c| (u64::from_le_bytes(c) as f64).to_be_bytes()),
        DType::String => Vec::new(),
    }
}

/// `conv` of each `N`-byte element of `le` (`W` bytes each on the wire), written in place
/// into space made once: appending value by value checked the capacity each time and kept
/// the conversion from being vectorized.
fn widened<const N: usize, const W: usize>(le: &[u8], conv: impl Fn([u8; N]) -> [u8; W]) -> Vec<u8> {
    let mut out = vec![0u8; le.len() / N * W];
    for (o, c) in out.chunks_exact_mut(W).zip(le.chunks_exact(N)) {
        let mut a = [0u8; N];
        a.copy_from_slice(c);
        o.copy_from_slice(&conv(a));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xdr_is_big_endian_and_widens_short_integers() {
        assert_eq!(xdr(DType::I16, (-2i16).to_le_bytes().to_vec()), (-2i32).to_be_bytes());
        assert_eq!(xdr(DType::F32, 1.5f32.to_le_bytes().to_vec()), 1.5f32.to_be_bytes());
        assert_eq!(xdr(DType::F64, (-0.25f64).to_le_bytes().to_vec()), (-0.25f64).to_be_bytes());
        assert_eq!(xdr(DType::I8, vec![0xff]), (-1i32).to_be_bytes());
        assert_eq!(xdr(DType::U8, vec![0xff, 1]), [0xff, 1]);
        let le: Vec<u8> = [1u16, 65535].iter().flat_map(|x| x.to_le_bytes()).collect();
        assert_eq!(xdr(DType::U16, le), [1u32.to_be_bytes(), 65535u32.to_be_bytes()].concat());
        let le: Vec<u8> = [-3i64, 5].iter().flat_map(|x| x.to_le_bytes()).collect();
        assert_eq!(xdr(DType::I64, le), [(-3f64).to_be_bytes(), 5f64.to_be_bytes()].concat());
        assert_eq!(xdr(DType::U64, u64::MAX.to_le_bytes().to_vec()), (u64::MAX as f64).to_be_bytes());
        assert!(xdr(DType::String, vec![1, 2]).is_empty());
    }
}
