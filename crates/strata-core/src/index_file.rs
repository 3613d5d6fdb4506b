//! Index files (`.sidx`): a header, a section directory, sections, and a checksummed trailer.
//! Layout in docs/format.md, "Index files". All integers little-endian.

use crate::bins::BinSummary;
use crate::error::{Error, Result};
use crate::segment::{SegmentEntry, SegmentKey};
use roaring::RoaringBitmap;

pub const MAGIC: &[u8; 8] = b"STRATAIX";
pub const TRAILER_MAGIC: &[u8; 4] = b"XEND";
pub const INDEX_FORMAT_VERSION: u32 = 1;
pub const HEADER_LEN: usize = 32;
pub const SECTION_ENTRY_LEN: usize = 24;
pub const SEGMENT_ENTRY_LEN: usize = 80;
pub const TRAILER_LEN: usize = 8;

/// Section kinds. A section whose `required` flag is set must be understood by the reader.
pub const SECTION_SEGMENT_TABLE: u32 = 1;
pub const SECTION_BIN_POSITIONS: u32 = 2;
pub const SECTION_BIN_SUMMARY: u32 = 3;
/// Level V's positions cut into frames, each its own zstd frame, so that a reader loads
/// only the frames a query touches (a slab's positions run to a quarter of its values).
pub const SECTION_BIN_POSITION_FRAMES: u32 = 4;
/// Where each frame of section 4 is and which sub-chunks it holds.
pub const SECTION_BIN_POSITION_DIRECTORY: u32 = 5;
pub(crate) const FLAG_REQUIRED: u32 = 1;
/// The section body is `u64 raw length` + one zstd frame of the raw body.
pub(crate) const FLAG_ZSTD: u32 = 2;
/// Decompressed bitmap sections larger than this are refused as corrupt.
pub(crate) const MAX_SECTION_BYTES: u64 = 1 << 32;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct SlabIndexData {
    pub slab_id: u64,
    pub segments: Vec<SegmentEntry>,
    /// Level V: the element positions of every (sub-chunk, bin) that has elements.
    pub bitmaps: Vec<BinPositions>,
    /// Level V: per variable, the slab's bin boundaries and counts.
    pub bins: Vec<BinSummary>,
}

/// The positions (row-major offsets inside the sub-chunk) of one bin's elements.
#[derive(Debug, Clone, PartialEq)]
pub struct BinPositions {
    pub var: u32,
    pub chunk: u64,
    pub subchunk: u32,
    pub bin: u32,
    pub positions: RoaringBitmap,
}

/// Bytes of the head of a positions entry (see [`bitmap_entry_head`]).
pub(crate) const BITMAP_ENTRY_HEAD_LEN: usize = 24;

/// The head of one entry of a positions body (section 2, or a frame of section 4): the
/// bin's key and the length of the serialized bitmap that follows it.
pub(crate) fn bitmap_entry_head(
    var: u32,
    chunk: u64,
    subchunk: u32,
    bin: u32,
    len: usize,
) -> [u8; BITMAP_ENTRY_HEAD_LEN] {
    let mut head = [0u8; BITMAP_ENTRY_HEAD_LEN];
    head[..4].copy_from_slice(&var.to_le_bytes());
    head[4..8].copy_from_slice(&subchunk.to_le_bytes());
    head[8..16].copy_from_slice(&chunk.to_le_bytes());
    head[16..20].copy_from_slice(&bin.to_le_bytes());
    head[20..].copy_from_slice(&(len as u32).to_le_bytes());
    head
}

pub(crate) fn encode_bitmaps(bitmaps: &[BinPositions]) -> Vec<u8> {
    let mut raw = Vec::new();
    raw.extend_from_slice(&(bitmaps.len() as u64).to_le_bytes());
    for b in bitmaps {
        raw.extend_from_slice(&bitmap_entry_head(b.var, b.chunk, b.subchunk, b.bin, b.positions.serialized_size()));
        // Writing into a Vec cannot fail.
        let _ = b.positions.serialize_into(&mut raw);
    }
    raw
}

pub(crate) fn compress_section(raw: &[u8]) -> Vec<u8> {
    let mut body = (raw.len() as u64).to_le_bytes().to_vec();
    body.extend_from_slice(&zstd::bulk::compress(raw, 3).unwrap_or_default());
    body
}

fn decompress_section(buf: &[u8], kind: u32, what: &str) -> Result<Vec<u8>> {
    let corrupt = |m: &str| Error::Corruption(format!("{what}: section {kind}: {m}"));
    let mut c = Cursor { buf, pos: 0, what };
    let raw_len = c.u64()?;
    if raw_len > MAX_SECTION_BYTES {
        return Err(corrupt("implausible size"));
    }
    // Streamed, not into a buffer of the stated size: memory grows with what the frame
    // really holds, so a small damaged file cannot claim gigabytes up front.
    let mut raw = Vec::new();
    zstd::stream::read::Decoder::with_buffer(&buf[8..])
        .and_then(|d| std::io::Read::read_to_end(&mut std::io::Read::take(d, raw_len + 1), &mut raw))
        .map_err(|_| corrupt("bad zstd frame"))?;
    if raw.len() as u64 != raw_len {
        return Err(corrupt("size does not match"));
    }
    Ok(raw)
}

pub(crate) fn encode_bin_summaries(bins: &[BinSummary]) -> Vec<u8> {
    let mut out = (bins.len() as u64).to_le_bytes().to_vec();
    for b in bins {
        out.extend_from_slice(&b.var.to_le_bytes());
        out.extend_from_slice(&(b.boundaries.len() as u32).to_le_bytes());
        for x in &b.boundaries {
            out.extend_from_slice(&x.to_le_bytes());
        }
        for c in &b.counts {
            out.extend_from_slice(&c.to_le_bytes());
        }
    }
    out
}

/// The segment table's raw body (section kind 1).
pub(crate) fn encode_segment_table(segments: &[SegmentEntry]) -> Vec<u8> {
    let mut table = Vec::with_capacity(8 + segments.len() * SEGMENT_ENTRY_LEN);
    table.extend_from_slice(&(segments.len() as u64).to_le_bytes());
    for s in segments {
        table.extend_from_slice(&s.key.var.to_le_bytes());
        table.extend_from_slice(&s.key.subchunk.to_le_bytes());
        table.extend_from_slice(&s.key.chunk.to_le_bytes());
        table.extend_from_slice(&s.key.bin.to_le_bytes());
        table.push(s.key.group);
        table.push(s.codec);
        table.extend_from_slice(&0u16.to_le_bytes());
        table.extend_from_slice(&s.offset.to_le_bytes());
        table.extend_from_slice(&s.length.to_le_bytes());
        table.extend_from_slice(&s.raw_length.to_le_bytes());
        table.extend_from_slice(&s.checksum.to_le_bytes());
        table.extend_from_slice(&0u32.to_le_bytes());
        table.extend_from_slice(&s.count.to_le_bytes());
        table.extend_from_slice(&s.min.to_le_bytes());
        table.extend_from_slice(&s.max.to_le_bytes());
    }
    table
}

/// The header and section directory of a file with `sections` (kind, flags, length), the
/// bodies following the directory in that order; `head_crc` goes at offset 24.
pub(crate) fn encode_head(slab_id: u64, head_crc: u64, sections: &[(u32, u32, u64)]) -> Vec<u8> {
    let mut out = Vec::with_capacity(Head::len_for(sections.len()));
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&INDEX_FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&(sections.len() as u32).to_le_bytes());
    out.extend_from_slice(&slab_id.to_le_bytes());
    out.extend_from_slice(&head_crc.to_le_bytes());
    let mut offset = Head::len_for(sections.len()) as u64;
    for &(kind, flags, len) in sections {
        out.extend_from_slice(&kind.to_le_bytes());
        out.extend_from_slice(&flags.to_le_bytes());
        out.extend_from_slice(&offset.to_le_bytes());
        out.extend_from_slice(&len.to_le_bytes());
        offset += len;
    }
    out
}

pub fn encode(data: &SlabIndexData) -> Vec<u8> {
    let table = encode_segment_table(&data.segments);
    let mut sections = Vec::new();
    if data.bitmaps.is_empty() {
        sections.push((SECTION_SEGMENT_TABLE, FLAG_REQUIRED, table));
    } else {
        // Level V: positions are required (binned segments cannot be placed without them)
        // and listed first, so a reader that predates V reports it as incompatible before
        // it meets the compressed segment table. With a segment per (sub-chunk, bin, group)
        // the table is large and regular: zstd shrinks it several times.
        let flags = FLAG_REQUIRED | FLAG_ZSTD;
        sections.push((SECTION_BIN_POSITIONS, flags, compress_section(&encode_bitmaps(&data.bitmaps))));
        sections.push((SECTION_SEGMENT_TABLE, flags, compress_section(&table)));
    }
    if !data.bins.is_empty() {
        sections.push((SECTION_BIN_SUMMARY, 0, encode_bin_summaries(&data.bins)));
    }
    let lens: Vec<(u32, u32, u64)> = sections.iter().map(|(k, f, b)| (*k, *f, b.len() as u64)).collect();
    let mut out = encode_head(data.slab_id, 0, &lens);
    for (_, _, body) in &sections {
        out.extend_from_slice(body);
    }
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(TRAILER_MAGIC);
    out
}

/// Little-endian cursor that reports truncation as corruption instead of panicking.
pub(crate) struct Cursor<'a> {
    pub(crate) buf: &'a [u8],
    pub(crate) pos: usize,
    pub(crate) what: &'a str,
}

impl<'a> Cursor<'a> {
    fn take<const N: usize>(&mut self) -> Result<[u8; N]> {
        let end = self
            .pos
            .checked_add(N)
            .filter(|&e| e <= self.buf.len())
            .ok_or_else(|| Error::Corruption(format!("{} is truncated at byte {}", self.what, self.pos)))?;
        let mut a = [0u8; N];
        a.copy_from_slice(&self.buf[self.pos..end]);
        self.pos = end;
        Ok(a)
    }
    fn u8(&mut self) -> Result<u8> {
        Ok(self.take::<1>()?[0])
    }
    fn u16(&mut self) -> Result<u16> {
        Ok(u16::from_le_bytes(self.take()?))
    }
    pub(crate) fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.take()?))
    }
    pub(crate) fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.take()?))
    }
    fn f64(&mut self) -> Result<f64> {
        Ok(f64::from_le_bytes(self.take()?))
    }
}

pub fn decode(buf: &[u8], what: &str) -> Result<SlabIndexData> {
    decode_checked(buf, what, false).map(|(data, _)| data)
}

/// Where a file read whole holds its positions (section 2): read again and decoded when a
/// query needs them ([`decode_positions`]), so that a reader of many slabs need not keep
/// every slab's positions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PositionsSection {
    pub at: u64,
    pub len: u64,
    /// CRC-32C of the section's stored bytes, taken when the file was checked whole.
    pub checksum: u32,
    pub compressed: bool,
    /// The positions' bytes once decompressed, as the section states them.
    pub raw_len: u64,
}

/// Like [`decode`], but leaves whole positions (section 2) where they are: the index
/// without them, and where they lie. A file with position frames is decoded whole.
pub fn decode_aside(buf: &[u8], what: &str) -> Result<(SlabIndexData, Option<PositionsSection>)> {
    decode_checked(buf, what, true)
}

/// The positions of section 2 from its stored bytes, checked against where the file said
/// they were.
pub fn decode_positions(stored: &[u8], section: &PositionsSection, what: &str) -> Result<Vec<BinPositions>> {
    if stored.len() as u64 != section.len || crc32c::crc32c(stored) != section.checksum {
        return Err(Error::Corruption(format!("{what}: bin positions: checksum mismatch")));
    }
    match section.compressed {
        true => decode_bitmaps(&decompress_section(stored, SECTION_BIN_POSITIONS, what)?, what),
        false => decode_bitmaps(stored, what),
    }
}

fn decode_checked(buf: &[u8], what: &str, aside: bool) -> Result<(SlabIndexData, Option<PositionsSection>)> {
    let corrupt = |m: String| Error::Corruption(format!("{what}: {m}"));
    if buf.len() < HEADER_LEN + TRAILER_LEN || &buf[..8] != MAGIC {
        return Err(corrupt("not a strata index file (bad magic or too short)".into()));
    }
    let body_len = buf.len() - TRAILER_LEN;
    if &buf[body_len + 4..] != TRAILER_MAGIC {
        return Err(corrupt("missing trailer: the file is truncated".into()));
    }
    let stored_crc = u32::from_le_bytes([buf[body_len], buf[body_len + 1], buf[body_len + 2], buf[body_len + 3]]);
    if crc32c::crc32c(&buf[..body_len]) != stored_crc {
        return Err(corrupt("checksum mismatch".into()));
    }
    let head = Head::parse(&buf[..body_len], body_len, what)?;
    let body = |s: &SectionEntry| Ok(std::borrow::Cow::Borrowed(&buf[s.offset..s.offset + s.len]));
    let (mut data, frames, aside) = head.read_sections(body, what, aside)?;
    if let Some(f) = frames {
        for info in &f.frames {
            let at = f.at as usize + info.offset as usize;
            let stored = &buf[at..at + info.length as usize];
            data.bitmaps.extend(crate::index_frames::decode_frame(stored, info, what)?);
        }
    }
    let aside = aside.map(|s| {
        let stored = &buf[s.offset..s.offset + s.len];
        let compressed = s.flags & FLAG_ZSTD != 0;
        // A compressed body starts with its raw length (checked when decompressed).
        let raw_len = match (compressed, stored.get(..8)) {
            (true, Some(b)) => u64::from_le_bytes(b.try_into().unwrap_or_default()).min(MAX_SECTION_BYTES),
            _ => s.len as u64,
        };
        PositionsSection {
            at: s.offset as u64,
            len: s.len as u64,
            checksum: crc32c::crc32c(stored),
            compressed,
            raw_len,
        }
    });
    Ok((data, aside))
}

/// A section's place in its file, as the section directory gives it (checked to lie
/// between the directory and the trailer).
#[derive(Debug, Clone, Copy)]
pub(crate) struct SectionEntry {
    pub(crate) kind: u32,
    pub(crate) flags: u32,
    pub(crate) offset: usize,
    pub(crate) len: usize,
}

/// An index file's header and section directory.
#[derive(Debug)]
pub(crate) struct Head {
    pub(crate) slab_id: u64,
    /// The header's `u64` at offset 24: with position frames, the CRC-32C of every byte
    /// but the frames (see [`Head::read_sections`]); else 0.
    pub(crate) head_crc: u64,
    pub(crate) sections: Vec<SectionEntry>,
    /// The CRC-32C of the header and directory as the head checksum covers them
    /// ([`head_part_crc`]).
    pub(crate) head_part_crc: u32,
}

/// The head checksum's share of a file's header and section directory (`head`): the
/// header's first 24 bytes (the checksum itself, at 24, left out), then the directory.
pub(crate) fn head_part_crc(head: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(&head[..24]), &head[HEADER_LEN..])
}

/// Sections a file can list: far more than any writer makes, few enough that a damaged
/// count cannot ask for a large read.
pub(crate) const MAX_SECTIONS: usize = 64;

impl Head {
    /// The header and directory from `buf` (at least the header, then as much as the
    /// directory needs), for a file of `body_len` bytes before its trailer.
    pub(crate) fn parse(buf: &[u8], body_len: usize, what: &str) -> Result<Head> {
        let corrupt = |m: String| Error::Corruption(format!("{what}: {m}"));
        let mut c = Cursor { buf, pos: 8, what };
        let version = c.u32()?;
        if version != INDEX_FORMAT_VERSION {
            return Err(Error::Compatibility(format!("{what}: index format version {version} is not supported")));
        }
        let n_sections = c.u32()? as usize;
        if n_sections > MAX_SECTIONS {
            return Err(corrupt(format!("{n_sections} sections")));
        }
        let slab_id = c.u64()?;
        let head_crc = c.u64()?;
        let table_end = Head::len_for(n_sections);
        let mut sections = Vec::with_capacity(n_sections);
        for _ in 0..n_sections {
            let kind = c.u32()?;
            let flags = c.u32()?;
            let offset = c.u64()? as usize;
            let len = c.u64()? as usize;
            let end = offset.checked_add(len).filter(|&e| e <= body_len && offset >= table_end);
            if end.is_none() {
                return Err(corrupt(format!("section {kind} lies outside the file")));
            }
            sections.push(SectionEntry { kind, flags, offset, len });
        }
        Ok(Head { slab_id, head_crc, sections, head_part_crc: head_part_crc(&buf[..table_end]) })
    }

    /// The directory's length in bytes for `n_sections` sections, header included.
    pub(crate) fn len_for(n_sections: usize) -> usize {
        HEADER_LEN + n_sections * SECTION_ENTRY_LEN
    }

    /// Reads every section but the position frames (`body` gives a section's stored
    /// bytes) into the index; with frames, where they are; with `aside`, whole positions
    /// too are left where they are (their entry is returned). A file with frames must
    /// also match its head checksum: the header's first 24 bytes, the directory, then
    /// every section but the frames, in directory order, so that it can be checked
    /// without reading the frames (each frame has its own checksum).
    pub(crate) fn read_sections<'b>(
        &self,
        body: impl Fn(&SectionEntry) -> Result<std::borrow::Cow<'b, [u8]>>,
        what: &str,
        aside: bool,
    ) -> Result<(SlabIndexData, Option<crate::index_frames::Frames>, Option<SectionEntry>)> {
        let corrupt = |m: String| Error::Corruption(format!("{what}: {m}"));
        let mut segments = None;
        let (mut bitmaps, mut bins) = (vec![], vec![]);
        let (mut frames_at, mut directory) = (None, None);
        let mut positions_at: Option<SectionEntry> = None;
        let mut crc = self.head_part_crc;
        for s in &self.sections {
            let kind = s.kind;
            let known = matches!(
                kind,
                SECTION_SEGMENT_TABLE
                    | SECTION_BIN_POSITIONS
                    | SECTION_BIN_SUMMARY
                    | SECTION_BIN_POSITION_FRAMES
                    | SECTION_BIN_POSITION_DIRECTORY
            );
            if s.flags & !(FLAG_REQUIRED | FLAG_ZSTD) != 0 && known {
                return Err(Error::Compatibility(format!("{what}: section {kind} has unknown flags {:#x}", s.flags)));
            }
            if kind == SECTION_BIN_POSITION_FRAMES {
                if s.flags & FLAG_ZSTD != 0 || frames_at.replace((s.offset as u64, s.len as u64)).is_some() {
                    return Err(corrupt("a second or compressed frames section".into()));
                }
                continue;
            }
            if !known && s.flags & FLAG_REQUIRED != 0 {
                return Err(Error::Compatibility(format!(
                    "{what}: required index section kind {kind} is not supported by this build"
                )));
            }
            if !known {
                continue;
            }
            let stored = body(s)?;
            crc = crc32c::crc32c_append(crc, &stored);
            if kind == SECTION_BIN_POSITIONS && aside {
                if positions_at.replace(*s).is_some() {
                    return Err(corrupt("a second positions section".into()));
                }
                continue;
            }
            let decompressed;
            let section = if s.flags & FLAG_ZSTD != 0 {
                decompressed = decompress_section(&stored, kind, what)?;
                &decompressed[..]
            } else {
                &stored[..]
            };
            match kind {
                SECTION_SEGMENT_TABLE => segments = Some(decode_segments(section, what)?),
                SECTION_BIN_POSITIONS => bitmaps = decode_bitmaps(section, what)?,
                SECTION_BIN_SUMMARY => bins = decode_bin_summaries(section, what)?,
                _ => directory = Some(crate::index_frames::decode_directory(section, what)?),
            }
        }
        let segments = segments.ok_or_else(|| corrupt("no segment table".into()))?;
        let frames = match (frames_at, directory) {
            (None, None) => None,
            (Some((at, len)), Some(frames)) => {
                if u64::from(crc) != self.head_crc {
                    return Err(corrupt("head checksum mismatch".into()));
                }
                if !bitmaps.is_empty() || positions_at.is_some() {
                    return Err(corrupt("positions both whole and in frames".into()));
                }
                Some(crate::index_frames::Frames::new(at, len, frames, what)?)
            }
            _ => return Err(corrupt("position frames without their directory, or the reverse".into())),
        };
        Ok((SlabIndexData { slab_id: self.slab_id, segments, bitmaps, bins }, frames, positions_at))
    }
}

pub(crate) fn decode_bitmaps(buf: &[u8], what: &str) -> Result<Vec<BinPositions>> {
    let corrupt = |m: &str| Error::Corruption(format!("{what}: bin positions: {m}"));
    let raw = buf;
    let mut c = Cursor { buf: raw, pos: 0, what };
    let n = c.u64()?;
    let mut out = Vec::with_capacity(n.min(1 << 20) as usize);
    for _ in 0..n {
        let var = c.u32()?;
        let subchunk = c.u32()?;
        let chunk = c.u64()?;
        let bin = c.u32()?;
        let len = c.u32()? as usize;
        let end = c.pos.checked_add(len).filter(|&e| e <= raw.len()).ok_or_else(|| corrupt("truncated"))?;
        let positions =
            RoaringBitmap::deserialize_from(&raw[c.pos..end]).map_err(|e| corrupt(&format!("bad bitmap: {e}")))?;
        c.pos = end;
        out.push(BinPositions { var, chunk, subchunk, bin, positions });
    }
    if c.pos != raw.len() {
        return Err(corrupt("trailing bytes"));
    }
    Ok(out)
}

fn decode_bin_summaries(buf: &[u8], what: &str) -> Result<Vec<BinSummary>> {
    let mut c = Cursor { buf, pos: 0, what };
    let n = c.u64()?;
    let mut out = Vec::with_capacity(n.min(1 << 16) as usize);
    for _ in 0..n {
        let var = c.u32()?;
        let nb = c.u32()? as usize;
        if nb >= crate::bins::MAX_BINS as usize {
            return Err(Error::Corruption(format!("{what}: {nb} bin boundaries")));
        }
        let boundaries = (0..nb).map(|_| c.f64()).collect::<Result<Vec<_>>>()?;
        let counts = (0..nb + 2).map(|_| c.u64()).collect::<Result<Vec<_>>>()?;
        out.push(BinSummary { var, boundaries, counts });
    }
    if c.pos != buf.len() {
        return Err(Error::Corruption(format!("{what}: trailing bytes in the bin summary")));
    }
    Ok(out)
}

fn decode_segments(buf: &[u8], what: &str) -> Result<Vec<SegmentEntry>> {
    let mut c = Cursor { buf, pos: 0, what };
    let n = c.u64()?;
    if n.checked_mul(SEGMENT_ENTRY_LEN as u64) != Some(buf.len() as u64 - 8) {
        return Err(Error::Corruption(format!("{what}: segment table length does not match its {n} entries")));
    }
    let mut out = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let var = c.u32()?;
        let subchunk = c.u32()?;
        let chunk = c.u64()?;
        let bin = c.u32()?;
        let group = c.u8()?;
        let codec = c.u8()?;
        let _flags = c.u16()?;
        let offset = c.u64()?;
        let length = c.u64()?;
        let raw_length = c.u64()?;
        let checksum = c.u32()?;
        let _reserved = c.u32()?;
        let count = c.u64()?;
        let min = c.f64()?;
        let max = c.f64()?;
        out.push(SegmentEntry {
            key: SegmentKey { var, chunk, subchunk, bin, group },
            codec,
            offset,
            length,
            raw_length,
            checksum,
            count,
            min,
            max,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> SlabIndexData {
        let segments = (0..5u32)
            .map(|i| SegmentEntry {
                key: SegmentKey { var: i % 2, chunk: i as u64 * 3, subchunk: i, bin: 0, group: 0 },
                codec: 0,
                offset: 24 + i as u64 * 100,
                length: 100,
                raw_length: 400,
                checksum: i * 7,
                count: 100,
                min: -1.5,
                max: f64::from(i),
            })
            .collect();
        let mut positions = RoaringBitmap::new();
        positions.insert_range(3..900);
        positions.insert(70_000);
        let bitmaps = vec![BinPositions { var: 1, chunk: 3, subchunk: 2, bin: 4, positions }];
        let bins = vec![BinSummary { var: 1, boundaries: vec![0.5, 2.0], counts: vec![1, 2, 3, 4] }];
        SlabIndexData { slab_id: 9, segments, bitmaps, bins }
    }

    #[test]
    fn round_trips() {
        let d = sample();
        assert_eq!(decode(&encode(&d), "t").unwrap(), d);
    }

    #[test]
    fn every_truncation_and_every_bit_flip_is_detected() {
        let bytes = encode(&sample());
        for cut in 0..bytes.len() {
            let e = decode(&bytes[..cut], "t").unwrap_err();
            assert_eq!(e.kind(), crate::ErrorKind::Corruption, "cut {cut}");
        }
        for i in 0..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 0x10;
            assert!(decode(&b, "t").is_err(), "flip at {i}");
        }
    }
}
