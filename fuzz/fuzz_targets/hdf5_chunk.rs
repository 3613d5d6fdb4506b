#![no_main]
//! The body lives in crates/strata-fuzz-targets (src/hdf5_chunk.rs), where make test also runs it
//! on seeds and their mutations.

libfuzzer_sys::fuzz_target!(|data: &[u8]| strata_fuzz_targets::hdf5_chunk::run(data));
