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
    let count: u64 = b.iter().map(|s| s.count()).product();
    match text {
        Text::Chars { strlen, has_dim } => {
            let mut buf = vec![0u8; count as usize];
            reader.read_into(&var.name, b, &mut buf)?;
            let width = if has_dim { strlen.max(1) as usize } else { 1 };
            Ok(buf
                .chunks(width)
                .map(|row| row[..row.iter().position(|&c| c == 0).unwrap_or(row.len())].to_vec())
                .collect())
        }
        Text::Inline => {
            let values = var.inline_strings.as_deref().unwrap_or_default();
            let shape = reader.manifest().shape(var);
            let mut out = Vec::with_capacity(count as usize);
            for_each_position(b, &shape, |flat| {
                out.push(values.get(flat as usize).map(|s| s.as_bytes().to_vec()).unwrap_or_default())
            });
            Ok(out)
        }
    }
}

/// Calls `f` with the flat (row-major) index in `shape` of every position of `b`, in order.
fn for_each_position(b: &[DimSelection], shape: &[u64], mut f: impl FnMut(u64)) {
    if b.iter().any(|s| s.count() == 0) {
        return;
    }
    let strides: Vec<u64> = (0..shape.len()).map(|d| shape[d + 1..].iter().product()).collect();
    let mut at: Vec<u64> = b.iter().map(|s| s.start).collect();
    loop {
        f(at.iter().zip(&strides).map(|(i, s)| i * s).sum());
        // The next position, last dimension fastest.
        let mut d = b.len();
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            at[d] += b[d].step;
            if at[d] < b[d].stop {
                break;
            }
            at[d] = b[d].start;
        }
    }
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

    #[test]
    fn positions_walk_a_strided_box_in_row_major_order() {
        let b = [DimSelection { start: 1, stop: 4, step: 2 }, DimSelection { start: 0, stop: 3, step: 1 }];
        let mut seen = vec![];
        for_each_position(&b, &[4, 3], |f| seen.push(f));
        assert_eq!(seen, [3, 4, 5, 9, 10, 11]);
        let mut none = vec![];
        for_each_position(&[DimSelection { start: 2, stop: 2, step: 1 }], &[4], |f| none.push(f));
        assert!(none.is_empty());
        let mut scalar = vec![];
        for_each_position(&[], &[], |f| scalar.push(f));
        assert_eq!(scalar, [0]);
    }
}
