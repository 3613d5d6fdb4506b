//! Text variables over DAP2, as THREDDS serves them: a NetCDF `char` array whose last
//! dimension holds the characters (`char Times(Time, DateStrLen)`) is a DAP2 `String` array
//! over the other dimensions (`String Times[Time = 4]`); a NetCDF-4 `string` variable is one
//! as it is. The DAS tells netCDF's client the string dimension (`DODS.strlen`,
//! `DODS.dimName`), so it shows the variable with the dimensions the file has.
//!
//! On the wire a `String` array is its count once (not twice, as numbers are), then each
//! string as XDR: its length, its bytes, zeros to a multiple of four.

use strata_core::manifest::Variable;
use strata_core::{DType, DimSelection, Manifest, StoreReader};

/// How a text variable's strings are held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Text {
    /// Characters along the last dimension (`strlen` of them), when there is one: a `char`
    /// variable with no dimension is one string of one character.
    Chars { strlen: u64, has_dim: bool },
    /// NetCDF-4 strings, kept in the manifest.
    Inline,
}

impl Text {
    pub fn of(m: &Manifest, var: &Variable) -> Option<Text> {
        match var.dtype {
            DType::Char => {
                let strlen = m.shape(var).last().copied();
                Some(Text::Chars { strlen: strlen.unwrap_or(1), has_dim: strlen.is_some() })
            }
            DType::String if var.inline_strings.is_some() => Some(Text::Inline),
            _ => None,
        }
    }

    /// The dimensions a DAP2 client sees: the variable's, less the characters' own.
    pub fn dap_rank(self, rank: usize) -> usize {
        match self {
            Text::Chars { has_dim: true, .. } => rank - 1,
            _ => rank,
        }
    }

    /// The longest string it can hold, in bytes.
    pub fn max_len(self, var: &Variable) -> u64 {
        match self {
            Text::Chars { strlen, .. } => strlen,
            Text::Inline => var.inline_strings.iter().flatten().map(|s| s.len() as u64).max().unwrap_or(0),
        }
    }

    /// Bytes on the wire of `count` strings at most (their length words included).
    pub fn wire_bound(self, var: &Variable, count: u64) -> u64 {
        count * (4 + self.max_len(var).next_multiple_of(4))
    }
}

/// The strings of `var` in `b` (a selection over the DAP2 dimensions, and for characters
/// over their own dimension too, whole), in row-major order. Characters end at the first
/// NUL, as C readers take them.
pub(crate) fn strings_in(
    reader: &StoreReader,
    var: &Variable,
    text: Text,
    b: &[DimSelection],
) -> strata_core::Result<Vec<Vec<u8>>> {
    match text {
        Text::Chars { strlen, has_dim } => {
            let mut buf = vec![0u8; b.iter().map(|s| s.count()).product::<u64>() as usize];
            reader.read_into(&var.name, b, &mut buf)?;
            let width = if has_dim { strlen.max(1) as usize } else { 1 };
            Ok(buf
                .chunks(width)
                .map(|row| row[..row.iter().position(|&c| c == 0).unwrap_or(row.len())].to_vec())
                .collect())
        }
        Text::Inline => {
            let values = var.inline_strings.as_deref().unwrap_or_default();
            Ok(inline_picked(values, &reader.manifest().shape(var), b).into_iter().map(<[u8]>::to_vec).collect())
        }
    }
}

/// The strings of `values` (a string variable's, row-major over `shape`) that `sel`
/// picks, in row-major order.
pub(crate) fn inline_picked<'a>(values: &'a [String], shape: &[u64], sel: &[DimSelection]) -> Vec<&'a [u8]> {
    strata_core::grid::flat_indices(shape, sel)
        .iter()
        .map(|&f| values.get(f as usize).map_or(&b""[..], |s| s.as_bytes()))
        .collect()
}

/// Each string as XDR: its length, its bytes, zeros to a multiple of four.
pub(crate) fn xdr(strings: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::with_capacity(strings.iter().map(|s| 4 + s.len().next_multiple_of(4)).sum());
    for s in strings {
        out.extend_from_slice(&(s.len() as u32).to_be_bytes());
        out.extend_from_slice(s);
        out.resize(out.len().next_multiple_of(4), 0);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_padded_to_four_bytes_after_their_length() {
        let got = xdr(&[b"2005-08-28_00:00:00".to_vec(), vec![], b"abcd".to_vec()]);
        let mut want = 19u32.to_be_bytes().to_vec();
        want.extend_from_slice(b"2005-08-28_00:00:00\0");
        want.extend_from_slice(&0u32.to_be_bytes());
        want.extend_from_slice(&4u32.to_be_bytes());
        want.extend_from_slice(b"abcd");
        assert_eq!(got, want);
    }
}
