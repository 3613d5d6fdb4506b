//! The bodies of the decoders' fuzz targets, one module each, so that two runners share
//! them: cargo-fuzz (`fuzz/fuzz_targets`, coverage-guided under AddressSanitizer, `make fuzz`
//! and the CI's smoke run) and this crate's tests, which hand every target its seeds
//! ([`seeds`]) and thousands of their mutations ([`mutate`]) on the stable release build
//! that `make test` already has: no nightly and no second compile of the dependencies.

pub mod cf_time;
pub mod codec_chain;
pub mod constraint;
pub mod dap_constraint;
pub mod hdf5_chunk;
pub mod index_file;
pub mod labels;
pub mod lossy_codecs;
pub mod manifest;
pub mod mutate;
pub mod part_messages;
pub mod seeds;
pub mod store;
pub mod write_config;

/// A target's body: one input, any bytes; a panic is a finding.
pub type Target = fn(&[u8]);

/// Every target by its cargo-fuzz name (the Makefile's `FUZZ_TARGETS`), with its body.
pub const TARGETS: &[(&str, Target)] = &[
    ("index_file", index_file::run),
    ("manifest", manifest::run),
    ("codec_chain", codec_chain::run),
    ("lossy_codecs", lossy_codecs::run),
    ("constraint", constraint::run),
    ("store", store::run),
    ("dap_constraint", dap_constraint::run),
    ("write_config", write_config::run),
    ("part_messages", part_messages::run),
    ("hdf5_chunk", hdf5_chunk::run),
    ("cf_time", cf_time::run),
    ("labels", labels::run),
];
