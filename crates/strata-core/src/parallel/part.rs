//! One writer of a parallel write: its block, its records, its encoded slabs.

use super::{paths, PartPlacement, PartTable, Placement, MESSAGE_VERSION};
use crate::data_file::{self, HEADER_LEN};
use crate::error::{Error, Result};
use crate::index_file::SlabIndexData;
use crate::manifest::FileEntry;
use crate::segment::SegmentEntry;
use crate::store::Store;
use crate::stream::{RecordBuffers, WriterRef};
use crate::writer::{
    block_holds, block_window, Block, DatasetSchema, PendingSegment, SlabBuilder, StoreWriter, WriterOptions,
};
use serde::{Deserialize, Serialize};

/// The raw bytes each writer holds per record slab of `records` records: what hybrid
/// slots are reserved from (every writer computes every slot: no exchange).
fn held_bytes(writer: &StoreWriter, blocks: &[Block], records: u64) -> Vec<u64> {
    let m = writer.manifest();
    blocks
        .iter()
        .map(|block| {
            m.variables
                .iter()
                .filter(|v| v.chunking.is_some() && m.is_record_var(v))
                .filter(|v| block_holds(block, v))
                .map(|v| {
                    let mut extent = m.shape(v);
                    extent[0] = records;
                    block_window(block, v, &extent).1.iter().product::<u64>() * v.dtype.size() as u64
                })
                .sum()
        })
        .collect()
}

/// The blocks must not overlap and must cover every dimension they cut: every chunk is
/// then written by exactly one writer.
fn check_blocks(schema: &DatasetSchema, blocks: &[Block]) -> Result<()> {
    let cut: Vec<&String> = {
        let mut names: Vec<&String> = blocks.iter().flat_map(|b| b.keys()).collect();
        names.sort();
        names.dedup();
        names
    };
    let size = |name: &str| schema.dims.iter().find(|d| d.name == name).map_or(0, |d| d.size);
    let range = |b: &Block, d: &String| b.get(d).copied().unwrap_or([0, size(d)]);
    for (i, a) in blocks.iter().enumerate() {
        for (j, b) in blocks.iter().enumerate().skip(i + 1) {
            let overlap = cut.iter().all(|d| {
                let ([a0, a1], [b0, b1]) = (range(a, d), range(b, d));
                a0 < b1 && b0 < a1
            });
            if overlap {
                return Err(Error::InvalidArgument(format!(
                    "the blocks of writers {i} and {j} overlap ({a:?} and {b:?}): each element has one writer"
                )));
            }
        }
    }
    let volume = |b: &Block| cut.iter().map(|d| range(b, d)).map(|[x, y]| y.saturating_sub(x)).product::<u64>();
    let whole: u64 = cut.iter().map(|d| size(d)).product();
    let covered: u64 = blocks.iter().map(volume).sum();
    if covered != whole {
        return Err(Error::InvalidArgument(format!(
            "the blocks cover {covered} of the {whole} elements of {cut:?}: together they must cover all"
        )));
    }
    Ok(())
}

/// Which part of a parallel write a writer is: what every writer is told at the start.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PartOf {
    /// The coordinator's [`token`](super::Coordinator::token).
    pub token: String,
    pub placement: Placement,
    /// Every writer's block (subfiles: none).
    #[serde(default)]
    pub blocks: Vec<Block>,
    pub rank: u32,
    /// Subfiles: the first record this writer holds.
    #[serde(default)]
    pub first_record: u64,
}

/// One writer of a parallel write.
#[derive(Debug)]
pub struct PartWriter {
    writer: StoreWriter,
    buffers: RecordBuffers,
    rank: u32,
    token: String,
    placement: Placement,
    /// Hybrid: every writer's block, for the slots.
    blocks: Vec<Block>,
    fraction: f64,
    /// The slab encoded and not yet written: its segments in table order, with whether
    /// each is written already (into a hybrid slot; its bytes are then dropped).
    encoded: Option<(u64, Vec<(PendingSegment, bool)>)>,
    static_done: bool,
}

impl PartWriter {
    /// Writer `part.rank` of `part.blocks.len()` (subfiles: of any number), holding
    /// `part.blocks[rank]` (subfiles: the whole domain, records from `part.first_record`).
    pub fn new(store: Store, schema: DatasetSchema, options: &WriterOptions, part: PartOf) -> Result<Self> {
        let PartOf { token, placement, blocks, rank, first_record } = part;
        let block = match placement {
            Placement::Subfiles => Block::new(),
            _ => blocks
                .get(rank as usize)
                .cloned()
                .ok_or_else(|| Error::InvalidArgument(format!("writer {rank} of {}: no block for it", blocks.len())))?,
        };
        if placement != Placement::Subfiles {
            check_blocks(&schema, &blocks)?;
        }
        let mut writer = StoreWriter::part(store, schema, options, block)?;
        if placement == Placement::Subfiles {
            writer.start_at(first_record)?;
        } else if first_record != 0 {
            return Err(Error::InvalidArgument("only subfile writers start at a later record".into()));
        }
        let fraction = match placement {
            Placement::Hybrid { fraction, .. } => fraction,
            _ => 1.0,
        };
        let buffers = RecordBuffers::new(&writer);
        Ok(Self { writer, buffers, rank, token, placement, blocks, fraction, encoded: None, static_done: false })
    }

    /// Spills its static slab past `bytes` encoded (tests: the spill path on small data).
    #[cfg(test)]
    pub(crate) fn spill_at(&mut self, bytes: u64) {
        self.writer.spill_at = bytes;
    }

    /// Writes this writer's block of a variable without the record dimension.
    pub fn put_static(&mut self, name: &str, data: &[u8]) -> Result<()> {
        self.writer.put_static(name, data)
    }

    /// Writes a block of whole chunks of a variable without the record dimension, as
    /// [`StoreWriter::put_static_block`] does: for a subfile writer, which holds the whole
    /// domain (`origin` is the variable's own); a block writer writes its block whole.
    pub fn put_static_block(&mut self, name: &str, origin: &[u64], shape: &[u64], data: &[u8]) -> Result<()> {
        self.writer.put_static_block(name, origin, shape, data)
    }

    /// The block shape [`put_static_block`](Self::put_static_block) takes for `name`.
    pub fn static_piece(&self, name: &str) -> Result<Vec<u64>> {
        self.writer.static_piece(name)
    }

    /// Takes whole records of this writer's block of a record variable.
    pub fn append(&mut self, name: &str, data: &[u8]) -> Result<()> {
        if self.encoded.is_some() {
            return Err(Error::InvalidArgument(
                "the encoded slab is not written yet: write its placement first".into(),
            ));
        }
        let writer = &self.writer;
        self.buffers.push(writer.slab_records(), || WriterRef::Borrowed(writer), name, data)
    }

    /// Whether a full slab waits (call [`encode`](Self::encode) then).
    pub fn ready(&self) -> bool {
        self.buffers.complete() >= self.writer.slab_records()
    }

    /// Encodes the next slab — a full one, or with `last` whatever waits, or the static
    /// variables first — and returns its table (None: nothing to send). Hybrid writes what
    /// fits its slot now; subfiles write the whole data file now.
    pub fn encode(&mut self, last: bool) -> Result<Option<PartTable>> {
        if self.encoded.is_some() {
            return Err(Error::InvalidArgument(
                "the encoded slab is not written yet: write its placement first".into(),
            ));
        }
        let slab = if !self.static_done && self.placement != Placement::Subfiles {
            // Static parts go first, as the static slab is the first slab.
            self.static_done = true;
            match self.writer.take_static()? {
                Some(s) => s,
                None => SlabBuilder::empty(0, None),
            }
        } else {
            if self.placement == Placement::Subfiles && !self.static_done {
                self.static_done = true;
                if let Some(s) = self.writer.take_static()? {
                    return self.table_for(s).map(Some);
                }
            }
            let Some(n) = self.buffers.next_slab(self.writer.slab_records(), last)? else { return Ok(None) };
            self.buffers.cut(&mut self.writer, n)?;
            self.writer.close_slab()?
        };
        self.table_for(slab).map(Some)
    }

    fn table_for(&mut self, slab: SlabBuilder) -> Result<PartTable> {
        let SlabBuilder { id, records, mut segments, bitmaps, bins, spill, .. } = slab;
        self.writer.sort_segments(records, &mut segments);
        let storage = self.writer.store().storage().clone();
        // Only a subfile writer's static slab spills (`StoreWriter::spill_static`).
        if spill.is_some() && self.placement != Placement::Subfiles {
            return Err(Error::InvalidArgument("a block writer's slab was spilled".into()));
        }
        let m = self.writer.manifest();
        let mut table = PartTable {
            version: MESSAGE_VERSION,
            writer: self.rank,
            slab: id,
            records,
            codecs: m.variables.iter().map(|v| v.codecs.clone()).collect(),
            plans: m.variables.iter().map(|v| v.plan.clone()).collect(),
            slot: None,
            own_file: None,
            index: SlabIndexData {
                slab_id: id,
                segments: vec![],
                bitmaps: bitmaps
                    .into_iter()
                    .map(|b| b.take(storage.as_ref(), spill.as_ref()).and_then(|p| p.unpack()))
                    .collect::<Result<_>>()?,
                bins,
            },
        };
        let mut offset = 0u64;
        let mut limit = u64::MAX;
        match self.placement {
            Placement::Dense => {}
            Placement::Hybrid { padding, .. } => {
                let n = records.map_or(0, |r| r[1]);
                let held = if id == 0 { vec![0; self.blocks.len()] } else { held_bytes(&self.writer, &self.blocks, n) };
                let slot = |b: u64| (b as f64 * self.fraction * (1.0 + padding)).ceil() as u64;
                let start = HEADER_LEN + held[..self.rank as usize].iter().map(|&b| slot(b)).sum::<u64>();
                let len = if id == 0 { 0 } else { slot(held[self.rank as usize]) };
                table.slot = Some([start, len]);
                offset = start;
                limit = start + len;
            }
            Placement::Subfiles => offset = HEADER_LEN,
        }
        let (own_data, _) = paths(id, &self.token, Some(self.rank));
        let (shared_data, _) = paths(id, &self.token, None);
        let mut wrote = vec![false; segments.len()];
        for (k, s) in segments.iter().enumerate() {
            let placed = match self.placement {
                Placement::Dense => 0,
                Placement::Hybrid { .. } if offset + s.bytes.len() as u64 <= limit => {
                    storage.write_at(&shared_data, offset, &s.bytes)?;
                    wrote[k] = true;
                    offset += s.bytes.len() as u64;
                    offset - s.bytes.len() as u64
                }
                Placement::Hybrid { .. } => 0,
                Placement::Subfiles => {
                    offset += s.length();
                    offset - s.length()
                }
            };
            table.index.segments.push(SegmentEntry {
                key: s.key,
                codec: s.codec,
                offset: placed,
                length: s.length(),
                raw_length: s.raw_length,
                checksum: s.spilled.map_or_else(|| crc32c::crc32c(&s.bytes), |p| p.checksum),
                count: s.count,
                min: s.min,
                max: s.max,
            });
        }
        if self.placement == Placement::Subfiles {
            // Streamed to the file: a static slab of a large field is not held twice (its
            // segments and the file's bytes) nor, once spilled, at all.
            let header = data_file::header(id);
            let written =
                crate::spill::write_data_file(storage.as_ref(), &own_data, &header, &segments, spill.as_ref());
            if let Some(spill) = &spill {
                spill.remove(storage.as_ref());
            }
            let crc32c = written?;
            // The coordinator, in another process, commits it.
            storage.sync_names()?;
            table.own_file =
                Some(FileEntry { path: own_data, size: offset, crc32c, external: false, modified_ns: None });
            return Ok(table);
        }
        if wrote.iter().any(|&w| w) {
            storage.sync(&shared_data, 0)?;
        }
        let kept = segments
            .into_iter()
            .zip(wrote)
            .map(|(mut s, w)| {
                if w {
                    s.bytes = Vec::new();
                }
                (s, w)
            })
            .collect();
        self.encoded = Some((id, kept));
        Ok(table)
    }

    /// Writes the encoded slab's segments where `placement` says (those not already in a
    /// hybrid slot) and makes them durable.
    pub fn write(&mut self, placement: &PartPlacement) -> Result<()> {
        let Some((id, segments)) = self.encoded.take() else {
            return Ok(()); // nothing waited (subfiles, or a slot that held everything)
        };
        if id != placement.slab || segments.len() != placement.offsets.len() {
            return Err(Error::InvalidArgument(format!(
                "placement for slab {} with {} segments, but slab {id} with {} waits",
                placement.slab,
                placement.offsets.len(),
                segments.len()
            )));
        }
        let storage = self.writer.store().storage();
        let mut any = false;
        for ((s, written), &offset) in segments.iter().zip(&placement.offsets) {
            if !written {
                storage.write_at(&placement.data, offset, &s.bytes)?;
                any = true;
            }
        }
        if any {
            storage.sync(&placement.data, 0)?;
        }
        if matches!(self.placement, Placement::Hybrid { .. }) {
            self.set_fraction(placement.fraction);
        }
        Ok(())
    }

    /// Hybrid: the compressed fraction the coordinator observed (for writers that had
    /// nothing to write in a slab and so no placement to learn it from).
    pub fn set_fraction(&mut self, fraction: f64) {
        if fraction.is_finite() && fraction > 0.0 {
            self.fraction = fraction;
        }
    }
}
