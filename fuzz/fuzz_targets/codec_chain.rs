#![no_main]
//! Every codec chain: decoding arbitrary bytes fails cleanly or yields exactly the asked
//! length; encoding then decoding arbitrary bytes gives them back.

use libfuzzer_sys::fuzz_target;
use strata_codecs::registry::{chain, parse_chain};
use strata_codecs::ElementContext;

const CHAINS: &[&str] = &["shuffle+zstd:3", "zstd:1", "raw", "shuffle+raw", "shuffle+zstd:-3"];

fuzz_target!(|data: &[u8]| {
    if data.len() < 4 {
        return;
    }
    let specs = parse_chain(CHAINS[data[0] as usize % CHAINS.len()]).expect("known chain");
    let element_size = [1, 2, 4, 8, 3][data[1] as usize % 5];
    let c = chain(&specs, ElementContext { element_size }).expect("chain builds");
    let claimed = u16::from_le_bytes([data[2], data[3]]) as usize;
    let body = &data[4..];
    if let Ok(out) = c.decode(body, claimed) {
        assert_eq!(out.len(), claimed);
    }
    let encoded = c.encode(body).expect("encode never fails on bytes");
    assert_eq!(c.decode(&encoded, body.len()).expect("round trip"), body);
});
