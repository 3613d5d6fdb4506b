#![no_main]
//! Manifest parsing and validation must return an error, never panic, on any bytes.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = strata_core::Manifest::from_json(data, "fuzz") {
        // A manifest that validates serialises to one that validates again.
        // (Compared as JSON: NaN attribute values are never equal to themselves.)
        let again = strata_core::Manifest::from_json(&m.to_json(), "fuzz again").expect("re-parse");
        assert_eq!(again.to_json(), m.to_json());
    }
});
