//! A finished slab to disk: its data file and index file, flushed before a commit names them.

use super::{PendingBitmap, SlabBuilder, StoreWriter};
use crate::bins::BinSummary;
use crate::data_file;
use crate::error::Result;
use crate::index_file::{self, SlabIndexData};
use crate::index_frames;
use crate::manifest::{FileEntry, Slab};
use crate::segment::SegmentEntry;
use crate::spill::Spill;
use crate::store::random_suffix;
use rayon::prelude::*;

impl StoreWriter {
    /// Writes a slab's index file at `path` (a name no manifest gives yet) and returns its
    /// entry: level V's positions (any order; spilled ones read back from `spill`) in
    /// frames once they pass `index_frame_bytes`, else whole.
    pub(crate) fn write_index(
        &self,
        path: &str,
        slab_id: u64,
        segments: Vec<SegmentEntry>,
        mut positions: Vec<PendingBitmap>,
        bins: Vec<BinSummary>,
        spill: Option<&Spill>,
    ) -> Result<FileEntry> {
        let storage = self.store.storage().as_ref();
        positions.sort_by_key(PendingBitmap::key);
        let raw = 8 + positions.iter().map(|b| index_file::BITMAP_ENTRY_HEAD_LEN + b.length()).sum::<usize>();
        if raw > self.frame_bytes {
            let packed = positions.into_iter().map(|b| b.take(storage, spill));
            let (size, crc32c) =
                index_frames::write(storage, path, slab_id, &segments, packed, &bins, self.frame_bytes)?;
            return Ok(FileEntry { path: path.to_string(), size, crc32c, external: false, modified_ns: None });
        }
        let bitmaps = positions
            .into_iter()
            .map(|b| b.take(storage, spill).and_then(|p| p.unpack()))
            .collect::<Result<Vec<_>>>()?;
        let index = index_file::encode(&SlabIndexData { slab_id, segments, bitmaps, bins });
        storage.write_new_parts(path, &[&index])?;
        Ok(FileEntry::new(path, &index))
    }

    pub(super) fn write_slab(&mut self, slab: SlabBuilder) -> Result<()> {
        let SlabBuilder { id, records, mut segments, bitmaps, bins, spill, .. } = slab;
        self.sort_segments(records, &mut segments);

        let suffix = random_suffix();
        let data_path = format!("data/s{id:06}-{suffix}.sdat");
        let index_path = format!("index/s{id:06}-{suffix}.sidx");
        let header = data_file::header(id);
        // Segment checksums in parallel (a spilled segment's was taken as it spilled).
        let checksums: Vec<u32> =
            segments.par_iter().map(|s| s.spilled.map_or_else(|| crc32c::crc32c(&s.bytes), |p| p.checksum)).collect();
        let mut offset = header.len() as u64;
        let mut entries = Vec::with_capacity(segments.len());
        for (s, &checksum) in segments.iter().zip(&checksums) {
            entries.push(SegmentEntry {
                key: s.key,
                codec: s.codec,
                offset,
                length: s.length(),
                raw_length: s.raw_length,
                checksum,
                count: s.count,
                min: s.min,
                max: s.max,
            });
            offset += s.length();
        }
        let storage = self.store.storage();
        // Both files are flushed to disk before the commit can name them; written side by
        // side, their flushes overlap (and the index is encoded while the data is written).
        let (d, i) = rayon::join(
            || crate::spill::write_data_file(storage.as_ref(), &data_path, &header, &segments, spill.as_ref()),
            || self.write_index(&index_path, id, entries, bitmaps, bins, spill.as_ref()),
        );
        if let Some(spill) = &spill {
            spill.remove(storage.as_ref());
        }
        let file_crc = d?;
        let index = i?;
        drop(segments);
        self.draft.files.push(FileEntry {
            path: data_path.clone(),
            size: offset,
            crc32c: file_crc,
            external: false,
            modified_ns: None,
        });
        self.draft.files.push(index);
        self.draft.slabs.push(Slab { id, records, data: data_path, index: index_path });
        Ok(())
    }
}
