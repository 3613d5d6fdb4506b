//! A layout file (STRATA_CONFIG) of any text is read or refused, never a panic; one that
//! is read applies to writer options.

use strata_core::write_config::WriteConfig;
use strata_core::WriterOptions;

/// One input: what libFuzzer or the seed tests hand the target.
pub fn run(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    if let Ok(config) = WriteConfig::parse(&text, "fuzz.toml") {
        let mut options = WriterOptions::default();
        let _ = config.apply(&mut options);
    }
}
