//! Every codec chain: decoding arbitrary bytes fails cleanly or yields exactly the asked
//! length; encoding then decoding arbitrary bytes gives them back.

use strata_codecs::registry::{chain, parse_chain};
use strata_codecs::{ElementContext, NumType};

const CHAINS: &[&str] = &[
    "shuffle+zstd:3",
    "zstd:1",
    "raw",
    "shuffle+raw",
    "lz4",
    "xor:0+shuffle+lz4",
    "delta:-1+zstd:1",
    "pco:4",
    "bytecols:1",
    "fpc:0",
    "fpc",
];
const TYPES: &[NumType] = &[NumType::U8, NumType::I16, NumType::F32, NumType::F64, NumType::I64, NumType::U32];

/// One input: what libFuzzer or the seed tests hand the target.
pub fn run(data: &[u8]) {
    if data.len() < 4 {
        return;
    }
    let specs = parse_chain(CHAINS[data[0] as usize % CHAINS.len()]).expect("known chain");
    let dtype = TYPES[data[1] as usize % TYPES.len()];
    let c = chain(&specs, ElementContext::new(dtype)).expect("chain builds");
    let es = dtype.size();
    let claimed = u16::from_le_bytes([data[2], data[3]]) as usize / es * es;
    let rest = &data[4..];
    let body = &rest[..rest.len() / es * es];
    // A 2-d segment shape when the element count allows it, else 1-d.
    let n = body.len() / es;
    let shape = if n.is_multiple_of(3) && n > 0 { vec![3, n / 3] } else { vec![n] };
    if let Ok(out) = c.decode(rest, claimed, &[claimed / es]) {
        assert_eq!(out.len(), claimed);
    }
    let encoded = c.encode(body, &shape).expect("encode never fails on whole elements");
    assert_eq!(c.decode(&encoded, body.len(), &shape).expect("round trip"), body);
}
