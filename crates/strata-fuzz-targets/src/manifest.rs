//! Manifest parsing and validation must return an error, never panic, on any bytes.

/// One input: what libFuzzer or the seed tests hand the target.
pub fn run(data: &[u8]) {
    if let Ok(m) = strata_core::Manifest::from_json(data, "fuzz") {
        // A manifest that validates serialises to one that validates again.
        // (Compared as JSON: NaN attribute values are never equal to themselves.)
        let again = strata_core::Manifest::from_json(&m.to_json(), "fuzz again").expect("re-parse");
        assert_eq!(again.to_json(), m.to_json());
    }
}
