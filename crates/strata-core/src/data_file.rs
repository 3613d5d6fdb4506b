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

/// Why a data file's first [`HEADER_LEN`] bytes are not the header of slab `slab_id`'s file.
pub fn check_header(h: &[u8], slab_id: u64) -> Result<(), String> {
    if h.len() < HEADER_LEN as usize || &h[..8] != MAGIC {
        return Err("not a strata data file (bad magic)".into());
    }
    let word = |at: usize| u32::from_le_bytes([h[at], h[at + 1], h[at + 2], h[at + 3]]);
    if word(8) != DATA_FORMAT_VERSION {
        return Err(format!("data file format version {} (this build reads {DATA_FORMAT_VERSION})", word(8)));
    }
    let mut id = [0u8; 8];
    id.copy_from_slice(&h[16..24]);
    if u64::from_le_bytes(id) != slab_id {
        return Err(format!("the header names slab {}, the manifest slab {slab_id}", u64::from_le_bytes(id)));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_check_magic_version_and_slab() {
        assert_eq!(check_header(&header(7), 7), Ok(()));
        assert!(check_header(&header(7), 8).unwrap_err().contains("slab 7"));
        let mut bad = header(7);
        bad[0] = b'X';
        assert!(check_header(&bad, 7).unwrap_err().contains("bad magic"));
        bad = header(7);
        bad[8] = 9;
        assert!(check_header(&bad, 7).unwrap_err().contains("version 9"));
        assert!(check_header(&header(7)[..10], 7).is_err());
    }
}
