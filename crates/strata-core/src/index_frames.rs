//! Level V's positions in frames (index sections 4 and 5; docs/format.md, "Index files"):
//! a writer closes a frame every [`FRAME_RAW_BYTES`] or so at a sub-chunk's end, a reader
//! loads only the frames holding the sub-chunks a query touches. The positions of a large
//! slab are a quarter of its values' size; read whole, they made a query of a few values
//! read and decode them all.

use crate::bins::BinSummary;
use crate::error::{Error, Result};
use crate::index_file::{
    bitmap_entry_head, compress_section, encode_bin_summaries, encode_head, encode_segment_table, BinPositions, Cursor,
    Head, FLAG_REQUIRED, FLAG_ZSTD, MAX_SECTION_BYTES, SECTION_BIN_POSITION_DIRECTORY, SECTION_BIN_POSITION_FRAMES,
    SECTION_BIN_SUMMARY, SECTION_SEGMENT_TABLE, TRAILER_LEN, TRAILER_MAGIC,
};
use crate::segment::SegmentEntry;
use crate::storage::Storage;

/// Raw bytes of positions a writer gathers in a frame before it closes it at the end of a
/// sub-chunk (the default of `WriterOptions::index_frame_bytes`): large enough for zstd,
/// small enough that a small query reads little.
pub const FRAME_RAW_BYTES: usize = 1 << 20;

/// (variable, chunk, sub-chunk).
type SubchunkKey = (u32, u64, u32);

/// Bytes of a frame's directory entry.
const FRAME_ENTRY_LEN: usize = 64;

/// A bin's positions serialized as the index stores them (a portable Roaring bitmap): what
/// a writer keeps, and spills, while a slab is being written.
#[derive(Debug, Clone, PartialEq)]
pub struct PackedPositions {
    pub var: u32,
    pub chunk: u64,
    pub subchunk: u32,
    pub bin: u32,
    pub bytes: Vec<u8>,
}

impl PackedPositions {
    pub fn pack(b: &BinPositions) -> PackedPositions {
        let mut bytes = Vec::with_capacity(b.positions.serialized_size());
        // Writing into a Vec cannot fail.
        let _ = b.positions.serialize_into(&mut bytes);
        PackedPositions { var: b.var, chunk: b.chunk, subchunk: b.subchunk, bin: b.bin, bytes }
    }

    pub fn unpack(&self) -> Result<BinPositions> {
        let positions = roaring::RoaringBitmap::deserialize_from(&self.bytes[..]).map_err(|e| {
            Error::Corruption(format!("bin positions of {:?}: {e}", (self.var, self.chunk, self.subchunk)))
        })?;
        Ok(BinPositions { var: self.var, chunk: self.chunk, subchunk: self.subchunk, bin: self.bin, positions })
    }
}

/// One frame of positions: where it is in section 4, its sizes and checksum, and the
/// first and last sub-chunk it holds (frames hold whole sub-chunks, in key order).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameInfo {
    pub offset: u64,
    pub length: u64,
    pub raw_length: u64,
    pub checksum: u32,
    pub count: u32,
    pub first: SubchunkKey,
    pub last: SubchunkKey,
}

/// The frames of one index file, and where section 4 starts in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frames {
    pub at: u64,
    pub frames: Vec<FrameInfo>,
}

impl Frames {
    /// Checks the directory against section 4 (`at`, `len`): frames inside it, in key
    /// order, without overlap.
    pub(crate) fn new(at: u64, len: u64, frames: Vec<FrameInfo>, what: &str) -> Result<Frames> {
        let corrupt = |m: &str| Error::Corruption(format!("{what}: position frames: {m}"));
        for (i, f) in frames.iter().enumerate() {
            if f.offset.checked_add(f.length).is_none_or(|e| e > len) {
                return Err(corrupt("a frame lies outside its section"));
            }
            if f.first > f.last || f.count == 0 || f.raw_length > MAX_SECTION_BYTES {
                return Err(corrupt("a frame's entry is not consistent"));
            }
            if i > 0 && (frames[i - 1].last >= f.first || frames[i - 1].offset + frames[i - 1].length > f.offset) {
                return Err(corrupt("frames out of order"));
            }
        }
        Ok(Frames { at, frames })
    }

    /// The frame holding the positions of `id`, if any frame may.
    pub fn frame_of(&self, id: SubchunkKey) -> Option<usize> {
        let i = self.frames.partition_point(|f| f.last < id);
        self.frames.get(i).filter(|f| f.first <= id).map(|_| i)
    }
}

fn put_key(out: &mut Vec<u8>, (var, chunk, subchunk): SubchunkKey) {
    out.extend_from_slice(&var.to_le_bytes());
    out.extend_from_slice(&subchunk.to_le_bytes());
    out.extend_from_slice(&chunk.to_le_bytes());
}

fn encode_directory(frames: &[FrameInfo]) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + frames.len() * FRAME_ENTRY_LEN);
    out.extend_from_slice(&(frames.len() as u64).to_le_bytes());
    for f in frames {
        out.extend_from_slice(&f.offset.to_le_bytes());
        out.extend_from_slice(&f.length.to_le_bytes());
        out.extend_from_slice(&f.raw_length.to_le_bytes());
        out.extend_from_slice(&f.checksum.to_le_bytes());
        out.extend_from_slice(&f.count.to_le_bytes());
        put_key(&mut out, f.first);
        put_key(&mut out, f.last);
    }
    out
}

pub(crate) fn decode_directory(raw: &[u8], what: &str) -> Result<Vec<FrameInfo>> {
    let mut c = Cursor { buf: raw, pos: 0, what };
    let n = c.u64()?;
    if n.checked_mul(FRAME_ENTRY_LEN as u64).is_none_or(|b| b + 8 != raw.len() as u64) {
        return Err(Error::Corruption(format!("{what}: the frame directory's size does not match its count")));
    }
    let key = |c: &mut Cursor| -> Result<SubchunkKey> {
        let var = c.u32()?;
        let subchunk = c.u32()?;
        Ok((var, c.u64()?, subchunk))
    };
    (0..n)
        .map(|_| {
            Ok(FrameInfo {
                offset: c.u64()?,
                length: c.u64()?,
                raw_length: c.u64()?,
                checksum: c.u32()?,
                count: c.u32()?,
                first: key(&mut c)?,
                last: key(&mut c)?,
            })
        })
        .collect()
}

/// The positions of one frame from its stored bytes, checked against its entry.
pub fn decode_frame(stored: &[u8], info: &FrameInfo, what: &str) -> Result<Vec<BinPositions>> {
    let corrupt = |m: &str| Error::Corruption(format!("{what}: position frame at {}: {m}", info.offset));
    if stored.len() as u64 != info.length || crc32c::crc32c(stored) != info.checksum {
        return Err(corrupt("checksum mismatch"));
    }
    let mut raw = Vec::new();
    zstd::stream::read::Decoder::with_buffer(stored)
        .and_then(|d| std::io::Read::read_to_end(&mut std::io::Read::take(d, info.raw_length + 1), &mut raw))
        .map_err(|_| corrupt("bad zstd frame"))?;
    if raw.len() as u64 != info.raw_length {
        return Err(corrupt("size does not match"));
    }
    let bitmaps = crate::index_file::decode_bitmaps(&raw, what)?;
    let keys: Vec<(SubchunkKey, u32)> = bitmaps.iter().map(|b| ((b.var, b.chunk, b.subchunk), b.bin)).collect();
    let in_order = keys.windows(2).all(|w| w[0] < w[1]);
    let bounded = keys.first().is_some_and(|k| k.0 == info.first) && keys.last().is_some_and(|k| k.0 == info.last);
    if bitmaps.len() != info.count as usize || !in_order || !bounded {
        return Err(corrupt("its positions do not match its entry"));
    }
    Ok(bitmaps)
}

/// Reads one frame of the index file at `path`.
pub fn load_frame(
    storage: &dyn Storage,
    path: &str,
    frames: &Frames,
    i: usize,
    what: &str,
) -> Result<Vec<BinPositions>> {
    let info = &frames.frames[i];
    let stored = storage.read_range(path, frames.at + info.offset, info.length)?;
    decode_frame(&stored, info, what)
}

/// An index file read but for its position frames.
#[derive(Debug)]
pub struct Opened {
    pub data: crate::index_file::SlabIndexData,
    pub frames: Frames,
}

/// Opens the index file at `path` (`size` bytes) without reading its position frames:
/// its header, directory, trailer and other sections, checked against the head checksum.
/// None when it has no frames (read it whole).
pub fn open(storage: &dyn Storage, path: &str, size: u64, what: &str) -> Result<Option<Opened>> {
    let corrupt = |m: String| Error::Corruption(format!("{what}: {m}"));
    let min = (Head::len_for(0) + TRAILER_LEN) as u64;
    if size < min {
        return Err(corrupt("not a strata index file (too short)".into()));
    }
    let body_len = (size - TRAILER_LEN as u64) as usize;
    let header = storage.read_range(path, 0, Head::len_for(0) as u64)?;
    if &header[..8] != crate::index_file::MAGIC {
        return Err(corrupt("not a strata index file (bad magic)".into()));
    }
    let n = u32::from_le_bytes([header[12], header[13], header[14], header[15]]) as usize;
    let dir_len = Head::len_for(n.min(crate::index_file::MAX_SECTIONS));
    if dir_len > body_len {
        return Err(corrupt("the section directory runs past the file's end".into()));
    }
    let head = Head::parse(&storage.read_range(path, 0, dir_len as u64)?, body_len, what)?;
    if !head.sections.iter().any(|s| s.kind == SECTION_BIN_POSITION_FRAMES) {
        return Ok(None);
    }
    if storage.read_range(path, body_len as u64 + 4, 4)? != TRAILER_MAGIC {
        return Err(corrupt("missing trailer: the file is truncated".into()));
    }
    let body = |s: &crate::index_file::SectionEntry| {
        storage.read_range(path, s.offset as u64, s.len as u64).map(std::borrow::Cow::Owned)
    };
    let (data, frames, _) = head.read_sections(body, what, false)?;
    Ok(frames.map(|frames| Opened { data, frames }))
}

/// Writes an index file whose positions are in frames, at `path` (a name no manifest
/// gives yet), a frame at a time: `bitmaps` in key order (variable, chunk, sub-chunk,
/// bin), each taken when its frame is gathered (a writer's may come from its spill). The
/// file's sections: frames, their directory, the segment table and, if any, the bin
/// summaries. Returns the file's size and CRC-32C (of all of it, as the manifest
/// lists files).
pub(crate) fn write(
    storage: &dyn Storage,
    path: &str,
    slab_id: u64,
    segments: &[SegmentEntry],
    bitmaps: impl IntoIterator<Item = Result<PackedPositions>>,
    bins: &[BinSummary],
    frame_raw_bytes: usize,
) -> Result<(u64, u32)> {
    let n_sections = if bins.is_empty() { 3 } else { 4 };
    let start = Head::len_for(n_sections) as u64;
    let mut frames: Vec<FrameInfo> = Vec::new();
    // The frame being gathered: its raw body, entry count, first and last sub-chunk.
    let mut raw: Vec<u8> = Vec::new();
    let (mut count, mut first, mut last) = (0u32, (0, 0, 0), (0, 0, 0));
    let (mut at, mut rest_crc) = (0u64, 0u32);
    let mut flush = |raw: &mut Vec<u8>, count: u32, first, last, frames: &mut Vec<FrameInfo>| -> Result<()> {
        if count == 0 {
            return Ok(());
        }
        raw[..8].copy_from_slice(&u64::from(count).to_le_bytes());
        let stored = zstd::bulk::compress(raw, 3).map_err(|e| Error::io(path, e))?;
        let checksum = crc32c::crc32c(&stored);
        frames.push(FrameInfo {
            offset: at,
            length: stored.len() as u64,
            raw_length: raw.len() as u64,
            checksum,
            count,
            first,
            last,
        });
        storage.write_at(path, start + at, &stored)?;
        rest_crc = crc32c::crc32c_combine(rest_crc, checksum, stored.len());
        at += stored.len() as u64;
        Ok(())
    };
    for b in bitmaps {
        let b = b?;
        let key = (b.var, b.chunk, b.subchunk);
        if count > 0 && key != last && raw.len() >= frame_raw_bytes {
            flush(&mut raw, count, first, last, &mut frames)?;
            count = 0;
        }
        if count == 0 {
            raw.clear();
            raw.extend_from_slice(&0u64.to_le_bytes());
            first = key;
        }
        raw.extend_from_slice(&bitmap_entry_head(b.var, b.chunk, b.subchunk, b.bin, b.bytes.len()));
        raw.extend_from_slice(&b.bytes);
        (count, last) = (count + 1, key);
    }
    flush(&mut raw, count, first, last, &mut frames)?;
    let zstd = FLAG_REQUIRED | FLAG_ZSTD;
    let mut others = vec![
        (SECTION_BIN_POSITION_DIRECTORY, zstd, compress_section(&encode_directory(&frames))),
        (SECTION_SEGMENT_TABLE, zstd, compress_section(&encode_segment_table(segments))),
    ];
    if !bins.is_empty() {
        others.push((SECTION_BIN_SUMMARY, 0, encode_bin_summaries(bins)));
    }
    let mut lens = vec![(SECTION_BIN_POSITION_FRAMES, FLAG_REQUIRED, at)];
    lens.extend(others.iter().map(|(k, f, b)| (*k, *f, b.len() as u64)));
    // The head checksum covers the head (but its own place), then the other sections.
    let mut head_crc = crate::index_file::head_part_crc(&encode_head(slab_id, 0, &lens));
    let mut pos = start + at;
    for (_, _, body) in &others {
        head_crc = crc32c::crc32c_append(head_crc, body);
        rest_crc = crc32c::crc32c_append(rest_crc, body);
        storage.write_at(path, pos, body)?;
        pos += body.len() as u64;
    }
    let head = encode_head(slab_id, u64::from(head_crc), &lens);
    let crc = crc32c::crc32c_combine(crc32c::crc32c(&head), rest_crc, (pos - start) as usize);
    let mut trailer = crc.to_le_bytes().to_vec();
    trailer.extend_from_slice(TRAILER_MAGIC);
    storage.write_at(path, pos, &trailer)?;
    storage.write_at(path, 0, &head)?;
    let size = pos + trailer.len() as u64;
    storage.sync(path, size)?;
    Ok((size, crc32c::crc32c_append(crc, &trailer)))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::index_file::{decode, SlabIndexData};
    use crate::segment::SegmentKey;
    use crate::storage::MemoryStorage;
    use roaring::RoaringBitmap;

    /// A slab of 2 variables x 2 chunks x 3 sub-chunks x 3 bins, positions of every kind of
    /// container (array, run, bitmap).
    fn sample() -> SlabIndexData {
        let (mut segments, mut bitmaps) = (vec![], vec![]);
        for var in 0..2u32 {
            for chunk in 0..2u64 {
                for subchunk in 0..3u32 {
                    for bin in 0..3u32 {
                        let key = SegmentKey { var, chunk, subchunk, bin, group: 0 };
                        let mut positions = RoaringBitmap::new();
                        match bin {
                            0 => {
                                positions.insert_range(0..5000);
                            }
                            1 => positions.extend((5000..9000).step_by(3)),
                            _ => positions.extend([70_001, 70_005, subchunk * 1000 + 80_000].map(|p| p + var)),
                        }
                        segments.push(SegmentEntry {
                            key,
                            codec: 0,
                            offset: 24 + segments.len() as u64 * 10,
                            length: 10,
                            raw_length: positions.len() * 4,
                            checksum: 7,
                            count: positions.len(),
                            min: f64::from(bin),
                            max: f64::from(bin) + 1.0,
                        });
                        bitmaps.push(BinPositions { var, chunk, subchunk, bin, positions });
                    }
                }
            }
        }
        let bins = vec![BinSummary { var: 1, boundaries: vec![1.0, 2.0], counts: vec![1, 2, 3, 4] }];
        SlabIndexData { slab_id: 3, segments, bitmaps, bins }
    }

    fn written(frame_bytes: usize) -> (MemoryStorage, Vec<u8>) {
        let d = sample();
        let storage = MemoryStorage::new();
        let (size, crc) = write(
            &storage,
            "index/x.sidx",
            3,
            &d.segments,
            d.bitmaps.iter().map(|b| Ok(PackedPositions::pack(b))),
            &d.bins,
            frame_bytes,
        )
        .unwrap();
        let bytes = storage.read("index/x.sidx").unwrap();
        assert_eq!((size, crc), (bytes.len() as u64, crc32c::crc32c(&bytes)));
        (storage, bytes)
    }

    /// Every frame of an opened file, in order.
    fn all_frames(storage: &dyn Storage, opened: &Opened) -> Result<Vec<BinPositions>> {
        let mut out = vec![];
        for i in 0..opened.frames.frames.len() {
            out.extend(load_frame(storage, "index/x.sidx", &opened.frames, i, "t")?);
        }
        Ok(out)
    }

    /// What the reader does: frames one at a time, or, when `open` finds none, the file whole.
    fn read_lazily(bytes: &[u8]) -> Result<()> {
        let s = MemoryStorage::new();
        s.write_atomic("index/x.sidx", bytes)?;
        match open(&s, "index/x.sidx", bytes.len() as u64, "t")? {
            Some(o) => all_frames(&s, &o).map(|_| ()),
            None => decode(bytes, "t").map(|_| ()),
        }
    }

    #[test]
    fn frames_read_whole_or_one_at_a_time_give_the_positions_written() {
        let d = sample();
        for frame_bytes in [1, 3000, 1 << 30] {
            let (storage, bytes) = written(frame_bytes);
            assert_eq!(decode(&bytes, "t").unwrap(), d);
            let opened = open(&storage, "index/x.sidx", bytes.len() as u64, "t").unwrap().unwrap();
            assert_eq!(opened.data, SlabIndexData { bitmaps: vec![], ..d.clone() });
            assert_eq!(all_frames(&storage, &opened).unwrap(), d.bitmaps);
            let n = opened.frames.frames.len();
            // Frames hold whole sub-chunks: one per sub-chunk when each fills a frame.
            assert_eq!(
                n,
                if frame_bytes == 1 {
                    12
                } else if frame_bytes == 1 << 30 {
                    1
                } else {
                    n.max(2)
                }
            );
            for b in &d.bitmaps {
                let i = opened.frames.frame_of((b.var, b.chunk, b.subchunk)).unwrap();
                let frame = load_frame(&storage, "index/x.sidx", &opened.frames, i, "t").unwrap();
                assert!(frame.contains(b));
            }
            assert_eq!(opened.frames.frame_of((2, 0, 0)), None);
        }
    }

    #[test]
    fn a_file_without_frames_is_left_to_the_whole_reader() {
        let d = sample();
        let storage = MemoryStorage::new();
        let bytes = crate::index_file::encode(&d);
        storage.write_atomic("index/x.sidx", &bytes).unwrap();
        assert!(open(&storage, "index/x.sidx", bytes.len() as u64, "t").unwrap().is_none());
    }

    #[test]
    fn every_truncation_and_every_bit_flip_is_detected_read_whole_or_by_frame() {
        let (_, bytes) = written(3000);
        for cut in 0..bytes.len() {
            assert_eq!(decode(&bytes[..cut], "t").unwrap_err().kind(), crate::ErrorKind::Corruption, "cut {cut}");
            assert!(read_lazily(&bytes[..cut]).is_err(), "cut {cut}");
        }
        for i in 0..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 0x10;
            assert!(decode(&b, "t").is_err(), "flip at {i}");
            // Read lazily, a flip in the trailer's CRC goes unseen (it covers the frames,
            // which are not read whole); anywhere else it is found.
            let unseen = (bytes.len() - 8..bytes.len() - 4).contains(&i);
            assert!(read_lazily(&b).is_err() || unseen, "flip at {i}");
        }
    }
}
