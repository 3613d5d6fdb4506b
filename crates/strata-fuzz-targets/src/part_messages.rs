//! The parallel writers' messages (part tables and placements, carried as bytes between
//! processes) are read or refused, never a panic; a table read back writes the same bytes.

use strata_core::parallel::{PartPlacement, PartTable};

/// One input: what libFuzzer or the seed tests hand the target.
pub fn run(data: &[u8]) {
    if let Ok(table) = PartTable::from_bytes(data) {
        let bytes = table.to_bytes();
        let again = PartTable::from_bytes(&bytes).expect("a table written is read back");
        assert_eq!(again.to_bytes(), bytes);
    }
    let _ = PartPlacement::from_bytes(data);
}
