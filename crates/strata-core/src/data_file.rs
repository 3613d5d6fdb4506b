//! Data files (`.sdat`): a 24-byte header followed by segments at the offsets the index gives.

pub const MAGIC: &[u8; 8] = b"STRATADT";
pub const DATA_FORMAT_VERSION: u32 = 1;
pub const HEADER_LEN: u64 = 24;

pub fn header(slab_id: u64) -> Vec<u8> {
    let mut h = Vec::with_capacity(HEADER_LEN as usize);
    h.extend_from_slice(MAGIC);
    h.extend_from_slice(&DATA_FORMAT_VERSION.to_le_bytes());
    h.extend_from_slice(&0u32.to_le_bytes());
    h.extend_from_slice(&slab_id.to_le_bytes());
    h
}
