#![no_main]
//! The body lives in crates/strata-fuzz-targets (src/labels.rs), where make test also runs it
//! on seeds and their mutations.

libfuzzer_sys::fuzz_target!(|data: &[u8]| strata_fuzz_targets::labels::run(data));
