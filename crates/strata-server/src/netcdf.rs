//! Dense subsets as NetCDF files (CDF-5, the 64-bit data format: every strata element type
//! has its NetCDF type, and variables may exceed 4 GiB), streamed, with byte ranges.
//! NetCDF-4 strings, which a classic file cannot hold, go as characters along one more
//! dimension (`stringN`, N the longest in bytes) flagged `_Encoding = "utf-8"`, as xarray
//! writes them to such files and reads them back as strings.
//!
//! A classic file's layout is known before any value is read: the header, then each
//! variable's values contiguous and big-endian at an offset the header states. So any byte
//! range of the file can be produced on its own — `Range: bytes=a-b`, or `parts=N&part=i`
//! (the i-th of N equal byte ranges) — and N connections fetch one file at once, each part
//! exactly as large as the others.

use crate::pieces::boxes;
use crate::ApiError;
use bytes::Bytes;
use strata_core::manifest::{AttrValue, Attribute};
use strata_core::{DType, DimSelection, Manifest, StoreReader};

/// One variable of the subset: its selection and where its values lie in the file.
#[derive(Debug, Clone)]
pub(crate) struct Var {
    pub name: String,
    pub dtype: DType,
    pub sel: Vec<DimSelection>,
    pub begin: u64,
    /// Value bytes (without padding).
    pub bytes: u64,
    /// A string variable's selection as characters, each string NUL-padded to the longest
    /// (strings live in the manifest, so this costs no read).
    pub chars: Option<Vec<u8>>,
}

/// The file a subset becomes: its header and variables.
#[derive(Debug, Clone)]
pub(crate) struct Layout {
    pub header: Vec<u8>,
    pub vars: Vec<Var>,
    pub total: u64,
}

fn nc_type(d: DType) -> Option<u32> {
    Some(match d {
        DType::I8 => 1,
        DType::Char => 2,
        DType::I16 => 3,
        DType::I32 => 4,
        DType::F32 => 5,
        DType::F64 => 6,
        DType::U8 => 7,
        DType::U16 => 8,
        DType::U32 => 9,
        DType::I64 => 10,
        DType::U64 => 11,
        DType::String => return None,
    })
}

fn pad4(n: u64) -> u64 {
    n.div_ceil(4) * 4
}

struct Header(Vec<u8>);

impl Header {
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    fn bytes(&mut self, b: &[u8]) {
        self.u64(b.len() as u64);
        self.0.extend_from_slice(b);
        self.0.resize(pad4(self.0.len() as u64) as usize, 0);
    }
    fn attrs(&mut self, attrs: &[Attribute]) {
        let encoded: Vec<(&str, u32, Vec<u8>, u64)> = attrs
            .iter()
            .map(|a| {
                let (t, raw, n) = attr_value(&a.value);
                (a.name.as_str(), t, raw, n)
            })
            .collect();
        if encoded.is_empty() {
            self.u32(0);
            self.u64(0);
            return;
        }
        self.u32(0x0C);
        self.u64(encoded.len() as u64);
        for (name, t, raw, n) in encoded {
            self.bytes(name.as_bytes());
            self.u32(t);
            self.u64(n);
            self.0.extend_from_slice(&raw);
            self.0.resize(pad4(self.0.len() as u64) as usize, 0);
        }
    }
}

/// (nc_type, big-endian values, element count) of an attribute.
fn attr_value(v: &AttrValue) -> (u32, Vec<u8>, u64) {
    fn each<T: Copy>(v: &[T], f: impl Fn(T) -> Vec<u8>) -> (Vec<u8>, u64) {
        (v.iter().flat_map(|&x| f(x)).collect(), v.len() as u64)
    }
    let (t, (raw, n)) = match v {
        AttrValue::String(s) => (2, (s.as_bytes().to_vec(), s.len() as u64)),
        AttrValue::Strings(v) => {
            let s = v.join("\n");
            (2, (s.as_bytes().to_vec(), s.len() as u64))
        }
        AttrValue::I8(v) => (1, each(v, |x| vec![x as i8 as u8])),
        AttrValue::U8(v) => (7, each(v, |x| vec![x as u8])),
        AttrValue::I16(v) => (3, each(v, |x| (x as i16).to_be_bytes().to_vec())),
        AttrValue::U16(v) => (8, each(v, |x| (x as u16).to_be_bytes().to_vec())),
        AttrValue::I32(v) => (4, each(v, |x| (x as i32).to_be_bytes().to_vec())),
        AttrValue::U32(v) => (9, each(v, |x| (x as u32).to_be_bytes().to_vec())),
        AttrValue::I64(v) => (10, each(v, |x| x.to_be_bytes().to_vec())),
        AttrValue::U64(v) => (11, each(v, |x| x.to_be_bytes().to_vec())),
        AttrValue::F32(v) => (5, each(v, |x| x.to_be_bytes().to_vec())),
        AttrValue::F64(v) => (6, each(v, |x| x.to_be_bytes().to_vec())),
    };
    (t, raw, n)
}

impl Layout {
    /// The file holding `vars` (each with its selection) of `m`: dimensions as the
    /// selections leave them, the global and variable attributes.
    pub fn new(m: &Manifest, picked: Vec<(String, Vec<DimSelection>)>) -> Result<Layout, ApiError> {
        // Dimensions in first-use order, each with the size its selection leaves; two
        // variables selecting a dimension differently cannot share it.
        let mut dims: Vec<(String, u64)> = Vec::new();
        let mut vars = Vec::new();
        let mut var_dims: Vec<Vec<u64>> = Vec::new();
        for (name, sel) in picked {
            let (_, v) = m.variable(&name)?;
            let chars = match (&v.inline_strings, v.dtype) {
                (Some(values), DType::String) => Some(string_chars(values, &m.shape(v), &sel)),
                (None, DType::String) => {
                    return Err(ApiError::internal(format!("string variable '{name}' holds no strings")))
                }
                _ => None,
            };
            // A string variable's characters are one more dimension, which strings as long
            // share.
            let strlen = chars.as_ref().map(|(_, width)| *width);
            let mut wanted: Vec<(String, u64)> = v.dims.iter().cloned().zip(sel.iter().map(|s| s.count())).collect();
            wanted.extend(strlen.map(|w| (format!("string{w}"), w)));
            let mut ids = Vec::new();
            for (d, count) in wanted {
                match dims.iter().position(|(n, _)| *n == d) {
                    Some(i) if dims[i].1 == count => ids.push(i as u64),
                    Some(i) => {
                        return Err(ApiError::bad_request(format!(
                            "'{name}' selects {count} of '{d}', another variable {}: select the dimension once",
                            dims[i].1
                        )))
                    }
                    None => {
                        dims.push((d, count));
                        ids.push(dims.len() as u64 - 1);
                    }
                }
            }
            let (dtype, chars) = match chars {
                Some((bytes, _)) => (DType::Char, Some(bytes)),
                None => (v.dtype, None),
            };
            let bytes = match &chars {
                Some(c) => c.len() as u64,
                None => sel.iter().map(|s| s.count()).product::<u64>() * v.dtype.size() as u64,
            };
            vars.push(Var { name, dtype, sel, begin: 0, bytes, chars });
            var_dims.push(ids);
        }
        let build = |vars: &[Var]| -> Vec<u8> {
            let mut h = Header(Vec::new());
            h.0.extend_from_slice(b"CDF\x05");
            h.u64(0); // no record dimension: every variable is fixed-size
            if dims.is_empty() {
                h.u32(0);
                h.u64(0);
            } else {
                h.u32(0x0A);
                h.u64(dims.len() as u64);
                for (n, size) in &dims {
                    h.bytes(n.as_bytes());
                    h.u64(*size);
                }
            }
            h.attrs(&m.attrs);
            if vars.is_empty() {
                h.u32(0);
                h.u64(0);
            } else {
                h.u32(0x0B);
                h.u64(vars.len() as u64);
                for (v, ids) in vars.iter().zip(&var_dims) {
                    h.bytes(v.name.as_bytes());
                    h.u64(ids.len() as u64);
                    for &i in ids {
                        h.u64(i);
                    }
                    let mut attrs = m.variable(&v.name).map(|(_, x)| x.attrs.clone()).unwrap_or_default();
                    if v.chars.is_some() && !attrs.iter().any(|a| a.name == "_Encoding") {
                        attrs.push(Attribute { name: "_Encoding".into(), value: AttrValue::String("utf-8".into()) });
                    }
                    h.attrs(&attrs);
                    h.u32(nc_type(v.dtype).unwrap_or(1));
                    h.u64(pad4(v.bytes));
                    h.u64(v.begin);
                }
            }
            h.0
        };
        let header_len = build(&vars).len() as u64;
        let mut at = header_len;
        for v in &mut vars {
            v.begin = at;
            at += pad4(v.bytes);
        }
        let header = build(&vars);
        Ok(Layout { header, vars, total: at })
    }

    /// Produces bytes `[lo, hi)` of the file, in pieces of about `target` bytes, each
    /// handed to `send` (false: the client has gone).
    pub fn produce(
        &self,
        reader: &StoreReader,
        lo: u64,
        hi: u64,
        target: usize,
        send: &mut dyn FnMut(Bytes) -> bool,
    ) -> Result<(), ApiError> {
        if lo < self.header.len() as u64 {
            let end = hi.min(self.header.len() as u64);
            if !send(Bytes::copy_from_slice(&self.header[lo as usize..end as usize])) {
                return Ok(());
            }
        }
        for v in &self.vars {
            let (start, end) = (v.begin.max(lo), (v.begin + pad4(v.bytes)).min(hi));
            if start >= end {
                continue;
            }
            let es = v.dtype.size() as u64;
            // Elements covering [start, end) of this variable's values (padding excluded).
            let (b0, b1) = (start - v.begin, (end - v.begin).min(v.bytes));
            if let Some(chars) = v.chars.as_ref().filter(|_| b0 < b1) {
                if !send(Bytes::copy_from_slice(&chars[b0 as usize..b1 as usize])) {
                    return Ok(());
                }
            } else if b0 < b1 {
                let (e0, e1) = (b0 / es, b1.div_ceil(es));
                let counts: Vec<u64> = v.sel.iter().map(|s| s.count()).collect();
                let mut skip = (b0 - e0 * es) as usize;
                let mut left = (b1 - b0) as usize;
                for (starts, lens) in flat_range_boxes(&counts, e0, e1) {
                    let sel: Vec<DimSelection> = v
                        .sel
                        .iter()
                        .zip(starts.iter().zip(&lens))
                        .map(|(s, (&a, &n))| DimSelection {
                            start: s.start + a * s.step,
                            stop: s.start + (a + n - 1) * s.step + 1,
                            step: s.step,
                        })
                        .collect();
                    for b in boxes(&sel, es as usize, target) {
                        let n: u64 = b.iter().map(|s| s.count()).product();
                        let mut raw = vec![0u8; (n * es) as usize];
                        reader.read_into(&v.name, &b, &mut raw)?;
                        strata_core::wire::to_big_endian(&mut raw, es as usize);
                        let from = skip.min(raw.len());
                        skip -= from;
                        let take = (raw.len() - from).min(left);
                        left -= take;
                        // The piece itself, cut to the range (no copy).
                        if take > 0 && !send(Bytes::from(raw).slice(from..from + take)) {
                            return Ok(());
                        }
                    }
                }
            }
            // The variable's padding, as far as the range reaches.
            let pad_from = start.max(v.begin + v.bytes);
            if end > pad_from && !send(Bytes::from(vec![0u8; (end - pad_from) as usize])) {
                return Ok(());
            }
        }
        Ok(())
    }
}

/// The strings of `values` (row-major over `shape`) that `sel` picks, as characters, each
/// NUL-padded to the longest of them (at least one byte), and that width.
fn string_chars(values: &[String], shape: &[u64], sel: &[DimSelection]) -> (Vec<u8>, u64) {
    let picked = crate::dap::strings::inline_picked(values, shape, sel);
    let width = picked.iter().map(|s| s.len()).max().unwrap_or(0).max(1);
    let mut out = vec![0u8; picked.len() * width];
    for (dst, s) in out.chunks_exact_mut(width).zip(&picked) {
        dst[..s.len()].copy_from_slice(s);
    }
    (out, width as u64)
}

/// The boxes (start, count per dimension) holding flat elements `[e0, e1)` of an array of
/// shape `counts`, in C order: at most two per dimension plus one.
pub(crate) fn flat_range_boxes(counts: &[u64], e0: u64, e1: u64) -> Vec<(Vec<u64>, Vec<u64>)> {
    if e0 >= e1 {
        return vec![];
    }
    let Some((&n0, rest)) = counts.split_first() else { return vec![(vec![], vec![])] };
    let inner: u64 = rest.iter().product();
    let prefixed = |i: u64, parts: Vec<(Vec<u64>, Vec<u64>)>| {
        parts.into_iter().map(move |(mut s, mut c)| {
            s.insert(0, i);
            c.insert(0, 1);
            (s, c)
        })
    };
    let (mut i0, off0) = (e0 / inner, e0 % inner);
    let (i1, off1) = (e1 / inner, e1 % inner);
    if i0 == i1 {
        return prefixed(i0, flat_range_boxes(rest, off0, off1)).collect();
    }
    let mut out = Vec::new();
    if off0 > 0 {
        out.extend(prefixed(i0, flat_range_boxes(rest, off0, inner)));
        i0 += 1;
    }
    if i1 > i0 {
        let mut s = vec![i0];
        s.extend(std::iter::repeat_n(0, rest.len()));
        let mut c = vec![i1 - i0];
        c.extend_from_slice(rest);
        out.push((s, c));
    }
    if off1 > 0 && i1 < n0 {
        out.extend(prefixed(i1, flat_range_boxes(rest, 0, off1)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_become_characters_padded_to_the_longest_picked() {
        let values: Vec<String> = ["a", "bcd", "", "x", "g", "éf"].iter().map(|s| s.to_string()).collect();
        let sel = [DimSelection { start: 0, stop: 2, step: 1 }, DimSelection { start: 1, stop: 3, step: 1 }];
        // Shape (2, 3): picks "bcd", "", "g" and "éf" (3 bytes).
        let (chars, width) = string_chars(&values, &[2, 3], &sel);
        assert_eq!(width, 3);
        assert_eq!(chars, b"bcd\0\0\0g\0\0\xc3\xa9f");
        assert_eq!(string_chars(&values, &[6], &[DimSelection { start: 2, stop: 3, step: 1 }]), (vec![0], 1));
    }

    #[test]
    fn flat_ranges_become_boxes_covering_exactly_them() {
        let counts = [3u64, 4, 5];
        let total: u64 = counts.iter().product();
        for e0 in 0..total {
            for e1 in e0..=total {
                let mut got = Vec::new();
                for (s, c) in flat_range_boxes(&counts, e0, e1) {
                    for i in 0..c[0] {
                        for j in 0..c[1] {
                            for k in 0..c[2] {
                                got.push(((s[0] + i) * 4 + s[1] + j) * 5 + s[2] + k);
                            }
                        }
                    }
                }
                assert_eq!(got, (e0..e1).collect::<Vec<_>>(), "[{e0}, {e1})");
            }
        }
    }
}
