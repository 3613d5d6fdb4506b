//! Segment keys, segment table entries and the layout order of segments in a data file.

use crate::manifest::Level;

/// Names one segment: (variable, chunk, sub-chunk, value bin, byte group).
/// `bin` is 0 without level V; `group` is 0 (all bytes) without level M.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SegmentKey {
    pub var: u32,
    /// Row-major index of the chunk in its slab's chunk grid.
    pub chunk: u64,
    /// Row-major index of the sub-chunk in the full chunk's sub-chunk grid.
    pub subchunk: u32,
    pub bin: u32,
    pub group: u8,
}

/// One row of the segment table.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SegmentEntry {
    pub key: SegmentKey,
    /// Position of the codec chain in the variable's `codecs` list.
    pub codec: u8,
    pub offset: u64,
    pub length: u64,
    pub raw_length: u64,
    /// CRC-32C of the stored (encoded) bytes.
    pub checksum: u32,
    /// Non-NaN elements, their minimum and maximum (NaN when `count == 0`).
    pub count: u64,
    pub min: f64,
    pub max: f64,
}

/// Sort key of a segment in its data file: the variable, then one component per layout
/// level in the user's priority order. Level S contributes the chunk's Hilbert rank and the
/// sub-chunk; V the bin; M the byte group.
pub fn layout_key(key: &SegmentKey, hilbert_rank: u64, order: &[Level]) -> (u32, [(u64, u64); 3]) {
    let mut parts = [(0, 0); 3];
    for (slot, level) in parts.iter_mut().zip(order) {
        *slot = match level {
            Level::S => (hilbert_rank, key.subchunk as u64),
            Level::V => (key.bin as u64, 0),
            Level::M => (key.group as u64, 0),
        };
    }
    (key.var, parts)
}
