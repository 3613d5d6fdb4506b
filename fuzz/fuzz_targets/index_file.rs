#![no_main]
//! Index-file decoding must return an error, never panic, on any bytes.

use libfuzzer_sys::fuzz_target;
use strata_core::index_file::{decode, encode, TRAILER_MAGIC};

fn check(bytes: &[u8]) {
    if let Ok(index) = decode(bytes, "fuzz") {
        // Whatever decodes must encode to a file that decodes to the same index. (Not to
        // the same bytes: readers skip unknown optional sections, as docs/format.md says,
        // and the encoder writes none.)
        let again = decode(&encode(&index), "fuzz re-encoded").expect("an encoded index decodes");
        assert_eq!(again, index);
    }
}

fuzz_target!(|data: &[u8]| {
    check(data);
    // Random bytes rarely carry a valid checksum: also treat the input as the body of a
    // file with a correct trailer, so the fuzzer reaches the parser behind the CRC.
    let mut sealed = data.to_vec();
    sealed.extend_from_slice(&crc32c::crc32c(data).to_le_bytes());
    sealed.extend_from_slice(TRAILER_MAGIC);
    check(&sealed);
});
