//! Index-file decoding must return an error, never panic, on any bytes: read whole (its
//! positions at once, or left aside and then read from where the file said), or opened
//! without its position frames and then a frame at a time.

use strata_core::index_file::{decode, decode_aside, decode_positions, encode, TRAILER_MAGIC};
use strata_core::index_frames::{load_frame, open};
use strata_core::storage::{MemoryStorage, Storage};

fn check_lazy(bytes: &[u8]) {
    let s = MemoryStorage::new();
    if s.write_atomic("index/f.sidx", bytes).is_err() {
        return;
    }
    if let Ok(Some(o)) = open(&s, "index/f.sidx", bytes.len() as u64, "fuzz") {
        for i in 0..o.frames.frames.len() {
            let _ = load_frame(&s, "index/f.sidx", &o.frames, i, "fuzz");
        }
    }
}

fn check_aside(bytes: &[u8]) {
    if let Ok((index, Some(section))) = decode_aside(bytes, "fuzz") {
        let stored = &bytes[section.at as usize..(section.at + section.len) as usize];
        // Read whole, the same file gives the same positions.
        let whole = decode(bytes, "fuzz whole").map(|i| i.bitmaps);
        assert_eq!(decode_positions(stored, &section, "fuzz").ok(), whole.as_ref().ok().cloned());
        assert!(index.bitmaps.is_empty());
    }
}

fn check(bytes: &[u8]) {
    check_lazy(bytes);
    check_aside(bytes);
    if let Ok(index) = decode(bytes, "fuzz") {
        // Whatever decodes must encode to a file that decodes to the same index. (Not to
        // the same bytes: readers skip unknown optional sections, as docs/format.md says,
        // and the encoder writes none.) Compared encoded: a bin of invalid elements only
        // has NaN bounds, never equal to themselves (the golden stores hold such bins).
        let encoded = encode(&index);
        let again = decode(&encoded, "fuzz re-encoded").expect("an encoded index decodes");
        assert_eq!(encode(&again), encoded);
    }
}

/// One input: what libFuzzer or the seed tests hand the target.
pub fn run(data: &[u8]) {
    check(data);
    // Random bytes rarely carry a valid checksum: also treat the input as the body of a
    // file with a correct trailer, so the fuzzer reaches the parser behind the CRC.
    let mut sealed = data.to_vec();
    sealed.extend_from_slice(&crc32c::crc32c(data).to_le_bytes());
    sealed.extend_from_slice(TRAILER_MAGIC);
    check(&sealed);
}
