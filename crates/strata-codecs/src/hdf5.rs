//! Chunks of an HDF5 (NetCDF-4) file, read where they lie: a store that indexes a file in
//! place names the file's own chunks as its segments, and these backends decode them.
//!
//! `hdf5` undoes the file's filter pipeline (deflate, shuffle, fletcher32, zstd), swaps a
//! big-endian file's bytes, and crops an edge chunk (HDF5 stores every chunk at the full
//! chunk shape; a strata segment holds only the part inside the variable). `fill` stands for
//! a chunk the file never allocated: HDF5 reads it as the fill value. Both only decode: they
//! describe bytes another program wrote.

use crate::backend::{zstd_decompress_exact, Backend};
use crate::error::{CodecError, Result};
use crate::shuffle::unshuffle;
use crate::spec::{Capabilities, CodecSpec, Speed};
use std::io::Read;

/// A stage of an HDF5 filter pipeline that strata can undo.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hdf5Filter {
    /// H5Z_FILTER_DEFLATE (1): one zlib stream.
    Deflate,
    /// H5Z_FILTER_SHUFFLE (2): byte planes, as strata's `shuffle`.
    Shuffle,
    /// H5Z_FILTER_FLETCHER32 (3): a 4-byte checksum after the data.
    Fletcher32,
    /// The registered zstd filter (32015): one zstd frame.
    Zstd,
}

impl Hdf5Filter {
    pub const NAMES: &'static [&'static str] = &["deflate", "shuffle", "fletcher32", "zstd"];

    pub fn parse(name: &str) -> Result<Self> {
        match name {
            "deflate" => Ok(Self::Deflate),
            "shuffle" => Ok(Self::Shuffle),
            "fletcher32" => Ok(Self::Fletcher32),
            "zstd" => Ok(Self::Zstd),
            other => Err(CodecError::InvalidSpec(format!(
                "hdf5: filter '{other}' cannot be read in place (known: {})",
                Self::NAMES.join(", ")
            ))),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Deflate => "deflate",
            Self::Shuffle => "shuffle",
            Self::Fletcher32 => "fletcher32",
            Self::Zstd => "zstd",
        }
    }
}

/// One HDF5 chunk: `filters` in pipeline (write) order, the chunk's full `chunk` shape as
/// stored (None: stored at the segment's shape, as for a contiguous variable's pieces), and
/// the file's byte order.
#[derive(Debug, Clone)]
pub struct Hdf5Backend {
    pub filters: Vec<Hdf5Filter>,
    pub chunk: Option<Vec<usize>>,
    pub big_endian: bool,
    pub element_size: usize,
}

fn corrupt(detail: impl Into<String>) -> CodecError {
    CodecError::Corrupt { codec: "hdf5", detail: detail.into() }
}

fn decode_only(codec: &'static str) -> CodecError {
    CodecError::Encode { codec, detail: "reads a file indexed in place and cannot write".into() }
}

impl Hdf5Backend {
    /// Undoes the filters, last first, into the chunk's bytes (`full` of them). Each stage
    /// must give back exactly what its filter was given on write (fletcher32 adds 4 bytes).
    fn unfilter(&self, input: &[u8], full: usize) -> Result<Vec<u8>> {
        let mut sizes = vec![full];
        for f in &self.filters {
            let last = sizes[sizes.len() - 1];
            sizes.push(if *f == Hdf5Filter::Fletcher32 { last + 4 } else { last });
        }
        let mut bytes = input.to_vec();
        for (i, f) in self.filters.iter().enumerate().rev() {
            let want = sizes[i];
            bytes = match f {
                Hdf5Filter::Fletcher32 => {
                    let n = bytes.len().checked_sub(4).ok_or_else(|| corrupt("fletcher32: chunk under 4 bytes"))?;
                    bytes.truncate(n);
                    bytes
                }
                Hdf5Filter::Deflate => {
                    let mut out = Vec::with_capacity(want);
                    // One byte past `want` reveals a stream longer than the chunk.
                    flate2::read::ZlibDecoder::new(&bytes[..])
                        .take(want as u64 + 1)
                        .read_to_end(&mut out)
                        .map_err(|e| corrupt(format!("deflate: {e}")))?;
                    out
                }
                Hdf5Filter::Zstd => {
                    let mut out = vec![0u8; want];
                    zstd_decompress_exact(&bytes, &mut out).map_err(|e| corrupt(format!("zstd: {e}")))?;
                    out
                }
                Hdf5Filter::Shuffle => {
                    let mut out = vec![0u8; bytes.len()];
                    unshuffle(self.element_size, &bytes, &mut out);
                    out
                }
            };
            if bytes.len() != want {
                return Err(corrupt(format!("{} gives {} bytes, {want} expected", f.name(), bytes.len())));
            }
        }
        if bytes.len() != full {
            return Err(corrupt(format!("chunk decodes to {} bytes, {full} expected", bytes.len())));
        }
        Ok(bytes)
    }
}

impl Backend for Hdf5Backend {
    fn spec(&self) -> CodecSpec {
        let mut spec = CodecSpec::new("hdf5");
        if !self.filters.is_empty() {
            spec = spec.with("filters", self.filters.iter().map(|f| f.name()).collect::<Vec<_>>());
        }
        if let Some(chunk) = &self.chunk {
            spec = spec.with("chunk", chunk.clone());
        }
        if self.big_endian {
            spec = spec.with("order", "big");
        }
        spec
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::LOSSLESS
    }

    fn speed(&self) -> Speed {
        // zlib's inflate, the usual NetCDF-4 filter; never ranked (nothing plans it).
        Speed::new(0.0, 300.0)
    }

    fn encode(&self, _input: &[u8], _shape: &[usize], _out: &mut Vec<u8>) -> Result<()> {
        Err(decode_only("hdf5"))
    }

    fn decode(&self, input: &[u8], decoded_len: usize, shape: &[usize], out: &mut Vec<u8>) -> Result<()> {
        let es = self.element_size;
        let stored: &[usize] = self.chunk.as_deref().unwrap_or(shape);
        if stored.len() != shape.len() || stored.iter().zip(shape).any(|(c, s)| s > c) {
            return Err(corrupt(format!("segment shape {shape:?} does not fit the chunk {stored:?}")));
        }
        let full = stored.iter().product::<usize>() * es;
        let mut bytes = self.unfilter(input, full)?;
        if self.big_endian {
            crate::endian::swap_elements(&mut bytes, es);
        }
        out.clear();
        if stored == shape {
            *out = bytes;
        } else {
            crop(&bytes, stored, shape, es, out);
        }
        if out.len() != decoded_len {
            return Err(corrupt(format!("segment decodes to {} bytes, {decoded_len} expected", out.len())));
        }
        Ok(())
    }
}

/// The leading `shape` corner of a C-order block of shape `full`, appended to `out`.
fn crop(bytes: &[u8], full: &[usize], shape: &[usize], es: usize, out: &mut Vec<u8>) {
    let n = shape.len();
    if n == 0 {
        out.extend_from_slice(&bytes[..es]);
        return;
    }
    let row = shape[n - 1] * es;
    let full_row = full[n - 1] * es;
    let rows: usize = shape[..n - 1].iter().product();
    let mut idx = vec![0usize; n - 1];
    for _ in 0..rows {
        let mut off = 0;
        for d in 0..n - 1 {
            off = off * full[d] + idx[d];
        }
        let start = off * full_row;
        out.extend_from_slice(&bytes[start..start + row]);
        for d in (0..n - 1).rev() {
            idx[d] += 1;
            if idx[d] < shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
}

/// A chunk the file never wrote: every element is the variable's fill value (`value`, one
/// element's little-endian bytes). Nothing is stored.
#[derive(Debug, Clone)]
pub struct FillBackend {
    pub value: Vec<u8>,
}

impl Backend for FillBackend {
    fn spec(&self) -> CodecSpec {
        let hex: String = self.value.iter().map(|b| format!("{b:02x}")).collect();
        CodecSpec::new("fill").with("value", hex)
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::LOSSLESS
    }

    fn speed(&self) -> Speed {
        Speed::new(0.0, 50_000.0)
    }

    fn encode(&self, _input: &[u8], _shape: &[usize], _out: &mut Vec<u8>) -> Result<()> {
        Err(decode_only("fill"))
    }

    fn decode(&self, input: &[u8], decoded_len: usize, _shape: &[usize], out: &mut Vec<u8>) -> Result<()> {
        let es = self.value.len();
        if !input.is_empty() || es == 0 || !decoded_len.is_multiple_of(es) {
            return Err(CodecError::Corrupt {
                codec: "fill",
                detail: format!("{} bytes stored (none expected) for {decoded_len} bytes", input.len()),
            });
        }
        out.clear();
        out.reserve(decoded_len);
        for _ in 0..decoded_len / es {
            out.extend_from_slice(&self.value);
        }
        Ok(())
    }
}

/// Parses `fill`'s value: one element's bytes as hex.
pub(crate) fn parse_hex(text: &str, element_size: usize) -> Result<Vec<u8>> {
    let bad = || CodecError::InvalidSpec(format!("fill value '{text}' is not {element_size} bytes of hex"));
    if text.len() != element_size * 2 || !text.is_ascii() {
        return Err(bad());
    }
    (0..element_size).map(|i| u8::from_str_radix(&text[2 * i..2 * i + 2], 16).map_err(|_| bad())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn zlib(bytes: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::new(4));
        e.write_all(bytes).unwrap();
        e.finish().unwrap()
    }

    fn shuffled(bytes: &[u8], es: usize) -> Vec<u8> {
        let n = bytes.len() / es;
        let mut out = vec![0u8; bytes.len()];
        for i in 0..n {
            for b in 0..es {
                out[b * n + i] = bytes[i * es + b];
            }
        }
        out
    }

    #[test]
    fn undoes_shuffle_and_deflate_and_crops_an_edge_chunk() {
        // A 3x4 chunk of f32 of which the segment holds the top-left 2x3.
        let values: Vec<f32> = (0..12).map(|i| i as f32 * 1.5).collect();
        let raw: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let stored = zlib(&shuffled(&raw, 4));
        let b = Hdf5Backend {
            filters: vec![Hdf5Filter::Shuffle, Hdf5Filter::Deflate],
            chunk: Some(vec![3, 4]),
            big_endian: false,
            element_size: 4,
        };
        let mut out = Vec::new();
        b.decode(&stored, 24, &[2, 3], &mut out).unwrap();
        let got: Vec<f32> = out.chunks(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
        assert_eq!(got, vec![0.0, 1.5, 3.0, 6.0, 7.5, 9.0]);
        // The whole chunk, and a damaged stream, which fails instead of returning bytes.
        b.decode(&stored, 48, &[3, 4], &mut out).unwrap();
        assert_eq!(out, raw);
        let mut bad = stored.clone();
        bad.truncate(stored.len() / 2);
        assert!(b.decode(&bad, 48, &[3, 4], &mut out).is_err());
        assert!(b.encode(&raw, &[3, 4], &mut out).is_err());
    }

    #[test]
    fn fletcher32_before_shuffle_and_deflate_as_netcdf_writes_it() {
        let raw: Vec<u8> = (0..40u8).collect();
        let mut with_sum = raw.clone();
        with_sum.extend_from_slice(&[1, 2, 3, 4]);
        let stored = zlib(&shuffled(&with_sum, 4));
        let b = Hdf5Backend {
            filters: vec![Hdf5Filter::Fletcher32, Hdf5Filter::Shuffle, Hdf5Filter::Deflate],
            chunk: None,
            big_endian: false,
            element_size: 4,
        };
        let mut out = Vec::new();
        b.decode(&stored, 40, &[10], &mut out).unwrap();
        assert_eq!(out, raw);
    }

    #[test]
    fn swaps_big_endian_and_strips_fletcher32() {
        let values: Vec<i16> = vec![1, -2, 300, 4];
        let mut stored: Vec<u8> = values.iter().flat_map(|v| v.to_be_bytes()).collect();
        stored.extend_from_slice(&[9, 9, 9, 9]);
        let b = Hdf5Backend { filters: vec![Hdf5Filter::Fletcher32], chunk: None, big_endian: true, element_size: 2 };
        let mut out = Vec::new();
        b.decode(&stored, 8, &[4], &mut out).unwrap();
        assert_eq!(out, values.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<_>>());
    }

    #[test]
    fn fill_repeats_its_value_and_stores_nothing() {
        let f = FillBackend { value: parse_hex("0000c07f", 4).unwrap() };
        let mut out = Vec::new();
        f.decode(&[], 12, &[3], &mut out).unwrap();
        assert_eq!(out, [0, 0, 0xc0, 0x7f].repeat(3));
        assert!(f.decode(&[1], 4, &[1], &mut out).is_err());
        assert!(parse_hex("00", 4).is_err());
    }
}
