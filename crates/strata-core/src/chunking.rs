//! The documented rule that picks chunk and sub-chunk shapes (docs/format.md, "Chunk shapes").

/// Target raw size of a chunk, the unit of I/O.
pub const DEFAULT_CHUNK_BYTES: u64 = 4 << 20;
/// Target raw size of a sub-chunk, the unit of compression.
pub const DEFAULT_SUBCHUNK_BYTES: u64 = 64 << 10;
/// Sub-chunk target under level V: bins cut each sub-chunk into many segments, so larger
/// sub-chunks keep segments (and index entries) from getting tiny.
pub const DEFAULT_BINNED_SUBCHUNK_BYTES: u64 = 256 << 10;
/// Target raw size of the largest variable's slab, the unit of files and of ingest memory.
pub const DEFAULT_SLAB_BYTES: u64 = 64 << 20;

/// Halves the longest axis (the leading one on ties) until the block fits `target_bytes`.
/// Axes of length 0 count as 1. The result never exceeds `shape`.
pub fn auto_shape(shape: &[u64], elem_size: u64, target_bytes: u64) -> Vec<u64> {
    let mut c: Vec<u64> = shape.iter().map(|&s| s.max(1)).collect();
    let bytes = |c: &[u64]| c.iter().product::<u64>().saturating_mul(elem_size.max(1));
    while bytes(&c) > target_bytes {
        let (i, &longest) = c.iter().enumerate().max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(&a.0))).unwrap_or((0, &1));
        if longest <= 1 {
            break;
        }
        c[i] = longest.div_ceil(2);
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_fit_their_target_and_split_long_axes_first() {
        let c = auto_shape(&[684, 89, 180], 4, DEFAULT_CHUNK_BYTES);
        assert!(c.iter().product::<u64>() * 4 <= DEFAULT_CHUNK_BYTES);
        assert_eq!(c, vec![86, 89, 90]);
        assert_eq!(auto_shape(&[10], 8, 1 << 20), vec![10]);
        assert_eq!(auto_shape(&[], 8, 1), Vec::<u64>::new());
        assert_eq!(auto_shape(&[0, 5], 4, 1 << 20), vec![1, 5]);
    }
}
