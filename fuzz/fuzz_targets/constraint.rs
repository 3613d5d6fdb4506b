#![no_main]
//! The body lives in crates/strata-fuzz-targets (src/constraint.rs), where make test also runs it
//! on seeds and their mutations.

libfuzzer_sys::fuzz_target!(|data: &[u8]| strata_fuzz_targets::constraint::run(data));
