#![no_main]
//! The body lives in crates/strata-fuzz-targets (src/part_messages.rs), where make test also runs it
//! on seeds and their mutations.

libfuzzer_sys::fuzz_target!(|data: &[u8]| strata_fuzz_targets::part_messages::run(data));
