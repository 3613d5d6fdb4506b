//! The size a user converting from netCDF-4 already has: zlib level 4 after byte shuffle,
//! what netCDF4-python and `nccopy -d4 -s` write. The balanced objective must store less
//! than this on the same sample (`analyzer::choose_balanced`), so an archive converted with
//! the defaults does not grow.

use crate::analyzer::Sample;
use crate::shuffle::shuffle;
use crate::spec::NumType;
use std::io::Write;

/// zlib's level in the reference (netCDF users' usual `complevel=4`).
pub const REFERENCE_LEVEL: u32 = 4;

/// Bytes zlib level [`REFERENCE_LEVEL`] stores `bytes` of `es`-byte elements in after a
/// byte shuffle (none for bytes), as one stream with its header and checksum, as an HDF5
/// chunk holds it.
pub fn reference_bytes(bytes: &[u8], es: usize) -> usize {
    let mut planes = vec![0u8; bytes.len()];
    shuffle(es, bytes, &mut planes);
    let mut e = flate2::write::ZlibEncoder::new(
        Vec::with_capacity(bytes.len() / 2 + 64),
        flate2::Compression::new(REFERENCE_LEVEL),
    );
    // Writing into a Vec cannot fail.
    let _ = e.write_all(&planes);
    e.finish().map(|v| v.len()).unwrap_or(bytes.len())
}

/// The reference's compression ratio on `samples` (each compressed alone, as the
/// candidates are), on the calling thread: planning runs it beside the candidates.
pub fn reference_ratio(dtype: NumType, samples: &[Sample]) -> f64 {
    let raw: usize = samples.iter().map(|s| s.bytes.len()).sum();
    let stored: usize = samples.iter().map(|s| reference_bytes(&s.bytes, dtype.size())).sum();
    raw as f64 / stored.max(1) as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn the_reference_is_a_zlib_stream_of_the_shuffled_bytes() {
        let bytes: Vec<u8> = (0..5000u32).flat_map(|i| ((i as f32) * 0.01).sin().to_le_bytes()).collect();
        let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::new(4));
        let mut planes = vec![0u8; bytes.len()];
        shuffle(4, &bytes, &mut planes);
        e.write_all(&planes).unwrap();
        let stream = e.finish().unwrap();
        assert_eq!(reference_bytes(&bytes, 4), stream.len());
        let mut back = Vec::new();
        flate2::read::ZlibDecoder::new(&stream[..]).read_to_end(&mut back).unwrap();
        assert_eq!(back, planes);
        // Shuffling is what makes floats compress under zlib.
        let mut plain = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::new(4));
        plain.write_all(&bytes).unwrap();
        assert!(reference_bytes(&bytes, 4) < plain.finish().unwrap().len());
        let samples = [Sample { bytes: bytes.clone(), shape: vec![5000] }, Sample { bytes, shape: vec![5000] }];
        let r = reference_ratio(NumType::F32, &samples);
        assert!((r - 20_000.0 / stream.len() as f64).abs() < 1e-9, "{r}");
        assert_eq!(reference_ratio(NumType::F32, &[]), 0.0);
    }
}
