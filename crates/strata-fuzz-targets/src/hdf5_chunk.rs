//! Chunks of a file indexed in place: decoding arbitrary bytes through any HDF5 filter
//! pipeline strata reads (deflate, shuffle, fletcher32, zstd, big-endian, edge crops) fails
//! cleanly or yields exactly the segment's length.

use strata_codecs::registry::chain;
use strata_codecs::{CodecSpec, ElementContext, NumType};

const FILTERS: &[&[&str]] = &[
    &[],
    &["deflate"],
    &["shuffle", "deflate"],
    &["fletcher32", "shuffle", "deflate"],
    &["zstd"],
    &["shuffle", "zstd"],
    &["fletcher32"],
];
const TYPES: &[NumType] = &[NumType::U8, NumType::I16, NumType::F32, NumType::F64];

/// One input: what libFuzzer or the seed tests hand the target.
pub fn run(data: &[u8]) {
    if data.len() < 6 {
        return;
    }
    let filters = FILTERS[data[0] as usize % FILTERS.len()];
    let dtype = TYPES[data[1] as usize % TYPES.len()];
    // A chunk of up to 16 x 16 and a segment inside it (an edge chunk is cropped).
    let chunk = [1 + (data[2] % 16) as usize, 1 + (data[3] % 16) as usize];
    let shape = [1 + (data[4] as usize % chunk[0]), 1 + (data[5] as usize % chunk[1])];
    let mut spec = CodecSpec::new("hdf5").with("chunk", chunk.to_vec());
    if !filters.is_empty() {
        spec = spec.with("filters", filters.to_vec());
    }
    if data[1] & 0x80 != 0 {
        spec = spec.with("order", "big");
    }
    let c = chain(&[spec], ElementContext::new(dtype)).expect("chain builds");
    let want = shape[0] * shape[1] * dtype.size();
    if let Ok(out) = c.decode(&data[6..], want, &shape) {
        assert_eq!(out.len(), want);
    }
}
