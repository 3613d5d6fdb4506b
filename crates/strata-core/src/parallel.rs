//! Parallel writers (compressed PnetCDF's idea): N writers — threads, Dask tasks, MPI
//! ranks, C programs — each compress their own block; a coordinator gathers their segment
//! tables into one manifest. Offsets are exchanged, never data.
//!
//! The protocol, whatever carries the messages (docs/writing.md):
//!
//! 1. The coordinator is made with [`Coordinator::create`]; every writer with
//!    [`PartWriter::new`] from the same schema and options (with the `decomposition` the
//!    blocks meet at) and the coordinator's [`token`](Coordinator::token).
//! 2. Writers append records; when [`PartWriter::ready`] says a slab is complete (the same
//!    moment for all: they append the same records), each calls [`PartWriter::encode`] and
//!    sends the [`PartTable`] it returns (bytes, [`PartTable::to_bytes`]) to the coordinator.
//! 3. The coordinator's [`place`](Coordinator::place) takes every writer's table for the slab,
//!    writes the slab's index file and the data file's header, and answers each writer
//!    with a [`PartPlacement`]; each writer's [`write`](PartWriter::write) puts its bytes
//!    where told and makes them durable.
//! 4. Once every writer has written, [`Coordinator::commit`] publishes the version. A writer
//!    that fails makes the commit fail: no version names a slab some writer did not write.
//!
//! Placements: **dense** — one data file per slab in the store's global layout order
//! (offsets are assigned before anyone writes); **hybrid** — one data file per slab, each
//! writer writing at once into a slot reserved from the expected compressed fraction plus
//! padding, with what does not fit placed after the slots; **subfiles** — each writer holds a
//! range of records and writes its own data files, with no exchange until the commit.

use crate::bins::BinSummary;
use crate::data_file::{self, HEADER_LEN};
use crate::error::{Error, Result};
use crate::index_file::{self, SlabIndexData};
use crate::manifest::{FileEntry, Slab};
use crate::segment::{layout_key, SegmentEntry};
use crate::store::{random_suffix, Store};
use crate::stream::RecordBuffers;
use crate::writer::{Block, DatasetSchema, PendingSegment, SlabBuilder, StoreWriter, WriterOptions};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use strata_codecs::CodecSpec;

/// Version of the messages' fields.
pub const MESSAGE_VERSION: u32 = 1;
const TABLE_MAGIC: &[u8; 8] = b"STRATAPT";

/// Where the writers' bytes go.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum Placement {
    Dense,
    /// Slots of `fraction × raw bytes × (1 + padding)`; `fraction` is the first slab's guess
    /// of the compressed size over the raw size (later slabs use the one observed).
    Hybrid {
        fraction: f64,
        padding: f64,
    },
    Subfiles,
}

impl Placement {
    pub fn parse(text: &str) -> Result<Self> {
        match text {
            "dense" => Ok(Placement::Dense),
            "hybrid" => Ok(Placement::Hybrid { fraction: 0.5, padding: 0.2 }),
            "subfiles" => Ok(Placement::Subfiles),
            other => Err(Error::InvalidArgument(format!(
                "unknown placement '{other}' (placements: dense, hybrid, subfiles)"
            ))),
        }
    }
}

/// The paths of slab `id`'s files in a parallel write (`token` is the write's, `writer`
/// names a writer's own data file under subfiles).
fn paths(id: u64, token: &str, writer: Option<u32>) -> (String, String) {
    let own = writer.map(|w| format!("-w{w}")).unwrap_or_default();
    (format!("data/s{id:06}-{token}{own}.sdat"), format!("index/s{id:06}-{token}.sidx"))
}

/// What one writer tells the coordinator about one slab: its segments, without their bytes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PartTable {
    pub version: u32,
    pub writer: u32,
    pub slab: u64,
    pub records: Option<[u64; 2]>,
    /// Per variable, the chains this writer's segments name by position (a plan is made
    /// by each writer from its own data) and its plan record.
    pub codecs: Vec<Vec<Vec<CodecSpec>>>,
    pub plans: Vec<Option<serde_json::Value>>,
    /// Hybrid: the writer's slot `[start, length]`; segments with an offset inside it are
    /// written already. Subfiles: the writer's own data file, written whole.
    pub slot: Option<[u64; 2]>,
    pub own_file: Option<FileEntry>,
    /// Segments (offset 0 when not yet placed), bin positions and bin counts.
    #[serde(skip)]
    pub index: SlabIndexData,
}

impl PartTable {
    /// The table as bytes (what MPI or a socket carries).
    pub fn to_bytes(&self) -> Vec<u8> {
        let head = serde_json::to_vec(self).unwrap_or_default();
        let mut out = TABLE_MAGIC.to_vec();
        out.extend_from_slice(&(head.len() as u64).to_le_bytes());
        out.extend_from_slice(&head);
        out.extend_from_slice(&index_file::encode(&self.index));
        out
    }

    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let bad = |why: &str| Error::InvalidArgument(format!("not a part table: {why}"));
        if bytes.len() < 16 || &bytes[..8] != TABLE_MAGIC {
            return Err(bad("bad magic"));
        }
        let n = u64::from_le_bytes(bytes[8..16].try_into().map_err(|_| bad("short"))?) as usize;
        let head = bytes.get(16..16usize.saturating_add(n)).ok_or_else(|| bad("short header"))?;
        let mut table: PartTable = serde_json::from_slice(head).map_err(|e| bad(&e.to_string()))?;
        if table.version != MESSAGE_VERSION {
            return Err(bad(&format!("message version {} (this build speaks {MESSAGE_VERSION})", table.version)));
        }
        table.index = index_file::decode(&bytes[16 + n..], "part table")?;
        Ok(table)
    }
}

/// The coordinator's answer to one writer: where its segments go.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PartPlacement {
    pub version: u32,
    pub slab: u64,
    /// The shared data file.
    pub data: String,
    /// The offset of each of the writer's segments, in its table's order.
    pub offsets: Vec<u64>,
    /// Hybrid: the compressed fraction observed, for the next slab's slots.
    pub fraction: f64,
}

impl PartPlacement {
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        serde_json::from_slice(bytes).map_err(|e| Error::InvalidArgument(format!("not a part placement: {e}")))
    }
}

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
                .filter(|v| block.iter().all(|(d, r)| v.dims.contains(d) || r[0] == 0))
                .map(|v| {
                    let mut shape = m.shape(v);
                    shape[0] = records;
                    for (d, name) in v.dims.iter().enumerate() {
                        if let Some(&[a, b]) = block.get(name) {
                            shape[d] = b - a;
                        }
                    }
                    shape.iter().product::<u64>() * v.dtype.size() as u64
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
    /// The coordinator's [`token`](Coordinator::token).
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

    /// Writes this writer's block of a variable without the record dimension.
    pub fn put_static(&mut self, name: &str, data: &[u8]) -> Result<()> {
        self.writer.put_static(name, data)
    }

    /// Takes whole records of this writer's block of a record variable.
    pub fn append(&mut self, name: &str, data: &[u8]) -> Result<()> {
        if self.encoded.is_some() {
            return Err(Error::InvalidArgument(
                "the encoded slab is not written yet: write its placement first".into(),
            ));
        }
        self.buffers.push(&self.writer, name, data)
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
            self.writer.take_slab()?
        };
        self.table_for(slab).map(Some)
    }

    fn table_for(&mut self, slab: SlabBuilder) -> Result<PartTable> {
        let SlabBuilder { id, records, mut segments, bitmaps, bins, .. } = slab;
        self.writer.sort_segments(records, &mut segments);
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
            index: SlabIndexData { slab_id: id, segments: vec![], bitmaps, bins },
        };
        let storage = self.writer.store().storage();
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
        let mut own = data_file::header(id);
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
                    own.extend_from_slice(&s.bytes);
                    own.len() as u64 - s.bytes.len() as u64
                }
            };
            table.index.segments.push(SegmentEntry {
                key: s.key,
                codec: s.codec,
                offset: placed,
                length: s.bytes.len() as u64,
                raw_length: s.raw_length,
                checksum: crc32c::crc32c(&s.bytes),
                count: s.count,
                min: s.min,
                max: s.max,
            });
        }
        if self.placement == Placement::Subfiles {
            storage.write_atomic(&own_data, &own)?;
            table.own_file = Some(FileEntry { path: own_data, size: own.len() as u64, crc32c: crc32c::crc32c(&own) });
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

/// Gathers the writers' tables into one manifest.
#[derive(Debug)]
pub struct Coordinator {
    writer: StoreWriter,
    token: String,
    placement: Placement,
    writers: u32,
    /// Variables whose chains were replaced by the writers' (the first slab that has them).
    seen: Vec<bool>,
}

impl Coordinator {
    /// Starts a new store written by `writers` writers.
    pub fn create(
        store: Store,
        schema: DatasetSchema,
        options: &WriterOptions,
        writers: u32,
        placement: Placement,
    ) -> Result<Self> {
        if writers == 0 {
            return Err(Error::InvalidArgument("a parallel write needs at least one writer".into()));
        }
        let mut writer = StoreWriter::create(store, schema, options)?;
        writer.forget_static();
        let seen = vec![false; writer.manifest().variables.len()];
        Ok(Self { writer, token: random_suffix(), placement, writers, seen })
    }

    /// The write's name for its files, which every writer needs.
    pub fn token(&self) -> &str {
        &self.token
    }

    pub fn manifest(&self) -> &crate::Manifest {
        self.writer.manifest()
    }

    /// Places one slab from every writer's table (subfiles: any tables, each a slab one
    /// writer wrote whole) and writes its index; returns each table's placement, in order.
    pub fn place(&mut self, tables: Vec<PartTable>) -> Result<Vec<PartPlacement>> {
        if self.placement == Placement::Subfiles {
            return tables.into_iter().map(|t| self.record_subfile(t)).collect();
        }
        if tables.len() != self.writers as usize {
            return Err(Error::InvalidArgument(format!(
                "a slab needs the tables of all {} writers, got {}",
                self.writers,
                tables.len()
            )));
        }
        let (id, records) = (tables[0].slab, tables[0].records);
        if let Some(t) = tables.iter().find(|t| t.slab != id || t.records != records) {
            return Err(Error::InvalidArgument(format!(
                "writers disagree on the slab: writer {} sent slab {} records {:?}, writer {} slab {id} records \
                 {records:?}",
                t.writer, t.slab, t.records, tables[0].writer
            )));
        }
        if records.is_none() && tables.iter().all(|t| t.index.segments.is_empty()) {
            // No static variables: no static slab.
            return Ok(tables.iter().map(|_| self.nothing(id)).collect());
        }
        let expected_id = if records.is_none() { 0 } else { self.next_id() };
        if id != expected_id {
            return Err(Error::InvalidArgument(format!("slab {id} arrived where slab {expected_id} was expected")));
        }
        // Every segment with its writer and position, codecs renumbered into one list.
        let mut all: Vec<(usize, usize, SegmentEntry)> = Vec::new();
        let mut bitmaps = Vec::new();
        let mut bins: BTreeMap<u32, BinSummary> = BTreeMap::new();
        let mut raw = 0u64;
        for (w, t) in tables.iter().enumerate() {
            let map = self.merge_codecs(t)?;
            for (i, e) in t.index.segments.iter().enumerate() {
                let codec = *map.get(e.key.var as usize).and_then(|m| m.get(e.codec as usize)).ok_or_else(|| {
                    Error::InvalidArgument(format!(
                        "writer {}: segment names chain {} it did not list",
                        t.writer, e.codec
                    ))
                })?;
                raw += e.raw_length;
                all.push((w, i, SegmentEntry { codec, ..*e }));
            }
            bitmaps.extend(t.index.bitmaps.iter().cloned());
            for b in &t.index.bins {
                let merged =
                    bins.entry(b.var).or_insert_with(|| BinSummary { counts: vec![0; b.counts.len()], ..b.clone() });
                if merged.boundaries != b.boundaries || merged.counts.len() != b.counts.len() {
                    return Err(Error::InvalidArgument(format!("writers used different bins for variable #{}", b.var)));
                }
                for (m, c) in merged.counts.iter_mut().zip(&b.counts) {
                    *m += c;
                }
            }
        }
        let (data_path, index_path) = paths(id, &self.token, None);
        // Dense: everything in the global layout order. Hybrid: what is in the slots stays,
        // what overflowed follows the last slot in layout order.
        let ranks = self.writer.chunk_ranks(records, all.iter().map(|a| a.2.key.var));
        let order = self.writer.manifest().layout.order.clone();
        let key = |e: &SegmentEntry| layout_key(&e.key, ranks[&e.key.var][&e.key.chunk], &order);
        let placed = |w: usize, e: &SegmentEntry| {
            tables[w]
                .slot
                .is_some_and(|[start, len]| e.offset >= start && e.offset + e.length <= start + len && len > 0)
        };
        let mut end = match self.placement {
            Placement::Hybrid { .. } => {
                tables.iter().filter_map(|t| t.slot).map(|[s, l]| s + l).max().unwrap_or(HEADER_LEN).max(HEADER_LEN)
            }
            _ => HEADER_LEN,
        };
        let mut to_place: Vec<usize> = (0..all.len()).filter(|&k| !placed(all[k].0, &all[k].2)).collect();
        to_place.sort_by_key(|&k| key(&all[k].2));
        for k in to_place {
            all[k].2.offset = end;
            end += all[k].2.length;
        }
        // The data file's size and CRC from the segments' own CRCs, zeros between them.
        let mut by_offset: Vec<&SegmentEntry> = all.iter().map(|a| &a.2).collect();
        by_offset.sort_by_key(|e| e.offset);
        let header = data_file::header(id);
        let mut crc = crc32c::crc32c(&header);
        let mut at = HEADER_LEN;
        for e in &by_offset {
            if e.offset < at {
                return Err(Error::InvalidArgument(format!("segments overlap at offset {} of slab {id}", e.offset)));
            }
            crc = append_zeros(crc, e.offset - at);
            crc = crc32c::crc32c_combine(crc, e.checksum, e.length as usize);
            at = e.offset + e.length;
        }
        let size = by_offset.last().map_or(HEADER_LEN, |e| e.offset + e.length).max(at);
        let storage = self.writer.store().storage();
        storage.write_at(&data_path, 0, &header)?;
        storage.sync(&data_path, size)?;
        let mut entries: Vec<SegmentEntry> = all.iter().map(|a| a.2).collect();
        entries.sort_by_key(|e| e.offset);
        let index = index_file::encode(&SlabIndexData {
            slab_id: id,
            segments: entries,
            bitmaps,
            bins: bins.into_values().collect(),
        });
        storage.write_atomic(&index_path, &index)?;
        let fraction = if raw > 0 { (size - HEADER_LEN) as f64 / raw as f64 } else { 1.0 };
        let files = [
            FileEntry { path: data_path.clone(), size, crc32c: crc },
            FileEntry { path: index_path.clone(), size: index.len() as u64, crc32c: crc32c::crc32c(&index) },
        ];
        self.add_slab(Slab { id, records, data: data_path.clone(), index: index_path }, files);
        let mut placements: Vec<PartPlacement> = tables
            .iter()
            .map(|_| PartPlacement {
                version: MESSAGE_VERSION,
                slab: id,
                data: data_path.clone(),
                offsets: vec![],
                fraction,
            })
            .collect();
        for (w, i, e) in &all {
            let p = &mut placements[*w];
            if p.offsets.len() <= *i {
                p.offsets.resize(i + 1, 0);
            }
            p.offsets[*i] = e.offset;
        }
        for (p, t) in placements.iter_mut().zip(&tables) {
            p.offsets.resize(t.index.segments.len(), 0);
        }
        Ok(placements)
    }

    fn nothing(&self, slab: u64) -> PartPlacement {
        PartPlacement { version: MESSAGE_VERSION, slab, data: String::new(), offsets: vec![], fraction: 1.0 }
    }

    fn next_id(&self) -> u64 {
        self.writer.manifest().slabs.iter().map(|s| s.id).max().unwrap_or(0) + 1
    }

    /// Renumbers a writer's chains into the store's list: per variable, the position in
    /// the store's `codecs` of each chain the writer lists.
    fn merge_codecs(&mut self, t: &PartTable) -> Result<Vec<Vec<u8>>> {
        let draft = self.writer.draft_mut();
        if t.codecs.len() != draft.variables.len() {
            return Err(Error::InvalidArgument(format!("writer {} lists {} variables", t.writer, t.codecs.len())));
        }
        // Per variable, the chains the writer's segments name.
        let mut named = vec![std::collections::BTreeSet::new(); draft.variables.len()];
        for e in &t.index.segments {
            let set = named.get_mut(e.key.var as usize).ok_or_else(|| {
                Error::InvalidArgument(format!("writer {}: a segment of variable #{}", t.writer, e.key.var))
            })?;
            set.insert(e.codec as usize);
        }
        let used: Vec<bool> = named.iter().map(|n| !n.is_empty()).collect();
        let mut map = Vec::with_capacity(t.codecs.len());
        for (v, chains) in t.codecs.iter().enumerate() {
            let var = &mut draft.variables[v];
            if used[v] && !self.seen[v] {
                // The placeholder chain of a planned variable was never used.
                self.seen[v] = true;
                var.codecs.clear();
                if var.plan.is_none() {
                    var.plan = t.plans[v].clone();
                }
            }
            let mut positions = Vec::with_capacity(chains.len());
            for (k, c) in chains.iter().enumerate() {
                let pos = match var.codecs.iter().position(|x| x == c) {
                    Some(p) => p,
                    None if !named[v].contains(&k) => 0, // not named here: never looked up
                    None => {
                        if var.codecs.len() >= 255 {
                            return Err(Error::InvalidArgument(format!("'{}' has 255 codec chains", var.name)));
                        }
                        var.codecs.push(c.clone());
                        var.codecs.len() - 1
                    }
                };
                positions.push(pos as u8);
            }
            map.push(positions);
        }
        Ok(map)
    }

    fn add_slab(&mut self, slab: Slab, files: [FileEntry; 2]) {
        let draft = self.writer.draft_mut();
        if let (Some([_, count]), Some(r)) = (slab.records, draft.record_dim.clone()) {
            if let Some(d) = draft.dims.iter_mut().find(|d| d.name == r) {
                d.size = d.size.max(slab.records.map_or(0, |r| r[0]) + count);
            }
        }
        if slab.records.is_none() {
            draft.slabs.insert(0, slab);
        } else {
            draft.slabs.push(slab);
        }
        draft.files.extend(files);
    }

    /// Subfiles: a slab a writer wrote whole, its index written here.
    fn record_subfile(&mut self, t: PartTable) -> Result<PartPlacement> {
        let own = t.own_file.clone().ok_or_else(|| {
            Error::InvalidArgument(format!("writer {}: a subfile table without its data file", t.writer))
        })?;
        let map = self.merge_codecs(&t)?;
        let mut index = t.index.clone();
        for e in &mut index.segments {
            e.codec = map[e.key.var as usize][e.codec as usize];
        }
        let (_, index_path) = paths(t.slab, &self.token, None);
        let bytes = index_file::encode(&index);
        self.writer.store().storage().write_atomic(&index_path, &bytes)?;
        let files = [
            own.clone(),
            FileEntry { path: index_path.clone(), size: bytes.len() as u64, crc32c: crc32c::crc32c(&bytes) },
        ];
        self.add_slab(Slab { id: t.slab, records: t.records, data: own.path.clone(), index: index_path }, files);
        Ok(PartPlacement { version: MESSAGE_VERSION, slab: t.slab, data: own.path, offsets: vec![], fraction: 1.0 })
    }

    /// Publishes the version: call it after every writer's last [`PartWriter::write`] returned.
    pub fn commit(mut self, message: &str) -> Result<u64> {
        let draft = self.writer.draft_mut();
        let mut statics: Vec<Slab> = draft.slabs.iter().filter(|s| s.records.is_none()).cloned().collect();
        let mut records: Vec<Slab> = draft.slabs.iter().filter(|s| s.records.is_some()).cloned().collect();
        records.sort_by_key(|s| s.records.map_or(0, |r| r[0]));
        let mut at = 0;
        for s in &records {
            let [start, count] = s.records.unwrap_or([0, 0]);
            if start > at {
                return Err(Error::InvalidArgument(format!(
                    "records {at}..{start} were written by no writer: the writers' ranges must meet"
                )));
            }
            if start < at {
                return Err(Error::InvalidArgument(format!(
                    "records {start}..{at} were written by two writers: the writers' ranges must not overlap"
                )));
            }
            at = start + count;
        }
        statics.truncate(1);
        draft.slabs = statics.into_iter().chain(records).collect();
        if let Some(r) = draft.record_dim.clone() {
            if let Some(d) = draft.dims.iter_mut().find(|d| d.name == r) {
                d.size = at;
            }
        }
        self.writer.commit(message)
    }
}

/// The CRC-32C of `crc`'s bytes followed by `n` zero bytes.
fn append_zeros(mut crc: u32, mut n: u64) -> u32 {
    const ZEROS: [u8; 4096] = [0; 4096];
    while n > 0 {
        let k = n.min(ZEROS.len() as u64) as usize;
        crc = crc32c::crc32c_append(crc, &ZEROS[..k]);
        n -= k as u64;
    }
    crc
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::Dim;
    use crate::writer::VariableSchema;
    use crate::{DType, DimSelection, StoreReader};

    const T: u64 = 25;
    const NY: u64 = 40;
    const NX: u64 = 60;

    fn schema() -> DatasetSchema {
        let dim = |name: &str, size| Dim { name: name.into(), size, unlimited: name == "t" };
        let var = |name: &str, dtype, dims: &[&str]| VariableSchema {
            name: name.into(),
            dtype,
            dims: dims.iter().map(|d| d.to_string()).collect(),
            attrs: vec![],
            inline_strings: None,
        };
        DatasetSchema {
            dims: vec![dim("t", 0), dim("y", NY), dim("x", NX)],
            record_dim: Some("t".into()),
            attrs: vec![],
            variables: vec![
                var("time", DType::F64, &["t"]),
                var("lat", DType::F32, &["y"]),
                var("mask", DType::I8, &["y", "x"]),
                var("a", DType::F32, &["t", "y", "x"]),
                var("b", DType::F64, &["t", "y"]),
            ],
        }
    }

    fn a(t: u64, y: u64, x: u64) -> f32 {
        ((t * 7 + y * 3 + x) % 97) as f32 * 0.5 + (y as f32).sin()
    }

    fn b(t: u64, y: u64) -> f64 {
        t as f64 * 100.0 + y as f64 / 3.0
    }

    fn le<T: Copy, const N: usize>(v: impl Iterator<Item = T>, bytes: impl Fn(T) -> [u8; N]) -> Vec<u8> {
        v.flat_map(bytes).collect()
    }

    fn part(token: &str, placement: Placement, blocks: Vec<Block>, rank: u32, first_record: u64) -> PartOf {
        PartOf { token: token.into(), placement, blocks, rank, first_record }
    }

    fn blocks() -> Vec<Block> {
        let mut out = vec![];
        for y in [[0, 20], [20, NY]] {
            for x in [[0, 30], [30, NX]] {
                out.push(Block::from([("y".to_string(), y), ("x".to_string(), x)]));
            }
        }
        out
    }

    /// Every writer's block of every variable it holds, for records `r0..r1`.
    fn feed(w: &mut PartWriter, block: &Block, r0: u64, r1: u64) {
        let [y0, y1] = block.get("y").copied().unwrap_or([0, NY]);
        let [x0, x1] = block.get("x").copied().unwrap_or([0, NX]);
        for t in r0..r1 {
            let av = le((y0..y1).flat_map(|y| (x0..x1).map(move |x| a(t, y, x))), f32::to_le_bytes);
            w.append("a", &av).unwrap();
            if x0 == 0 {
                w.append("b", &le((y0..y1).map(|y| b(t, y)), f64::to_le_bytes)).unwrap();
            }
            if x0 == 0 && y0 == 0 {
                w.append("time", &(t as f64 * 6.0).to_le_bytes()).unwrap();
            }
        }
    }

    fn feed_static(w: &mut PartWriter, block: &Block) {
        let [y0, y1] = block.get("y").copied().unwrap_or([0, NY]);
        let [x0, x1] = block.get("x").copied().unwrap_or([0, NX]);
        w.put_static("mask", &(y0..y1).flat_map(|y| (x0..x1).map(move |x| ((x + y) % 3) as u8)).collect::<Vec<_>>())
            .unwrap();
        if x0 == 0 {
            w.put_static("lat", &le((y0..y1).map(|y| y as f32 - 20.0), f32::to_le_bytes)).unwrap();
        }
    }

    fn check(path: &str) {
        let r = StoreReader::open(Store::local(path), None).unwrap();
        assert_eq!(r.manifest().dim("t").unwrap().size, T);
        let all = |n: u64| DimSelection { start: 0, stop: n, step: 1 };
        let mut got = vec![0u8; (T * NY * NX * 4) as usize];
        r.read_into("a", &[all(T), all(NY), all(NX)], &mut got).unwrap();
        let want =
            le((0..T).flat_map(|t| (0..NY).flat_map(move |y| (0..NX).map(move |x| a(t, y, x)))), f32::to_le_bytes);
        assert!(got == want, "a differs");
        let mut got = vec![0u8; (T * NY * 8) as usize];
        r.read_into("b", &[all(T), all(NY)], &mut got).unwrap();
        assert_eq!(got, le((0..T).flat_map(|t| (0..NY).map(move |y| b(t, y))), f64::to_le_bytes));
        let mut got = vec![0u8; (NY * NX) as usize];
        r.read_into("mask", &[all(NY), all(NX)], &mut got).unwrap();
        assert_eq!(got, (0..NY).flat_map(|y| (0..NX).map(move |x| ((x + y) % 3) as u8)).collect::<Vec<_>>());
        let mut got = vec![0u8; (T * 8) as usize];
        r.read_into("time", &[all(T)], &mut got).unwrap();
        assert_eq!(got, le((0..T).map(|t| t as f64 * 6.0), f64::to_le_bytes));
        let report = crate::verify::verify(Store::local(path), None, true).unwrap();
        assert!(report.is_clean(), "{report:?}");
    }

    fn options(layout: &str, codec: Option<&str>) -> WriterOptions {
        let mut o = WriterOptions {
            slab_records: Some(10),
            layout: Some(layout.into()),
            codec: codec.map(str::to_string),
            decomposition: BTreeMap::from([("y".into(), vec![20]), ("x".into(), vec![30])]),
            ..Default::default()
        };
        if layout.contains('V') {
            o.binning = Some("2,10,20,40".into());
        }
        o
    }

    /// The protocol run in one thread, writers taking turns (the Python drivers run it on
    /// threads, Dask or MPI).
    fn write_blocks(path: &str, placement: Placement, options: &WriterOptions) {
        write_blocks_with(path, placement, options, |_| options.clone())
    }

    fn write_blocks_with(
        path: &str,
        placement: Placement,
        options: &WriterOptions,
        own: impl Fn(u32) -> WriterOptions,
    ) {
        let store = || Store::local(path);
        let blocks = blocks();
        let mut coord = Coordinator::create(store(), schema(), options, 4, placement).unwrap();
        let token = coord.token().to_string();
        let mut writers: Vec<PartWriter> = (0..4)
            .map(|r| {
                PartWriter::new(store(), schema(), &own(r), part(&token, placement, blocks.clone(), r, 0)).unwrap()
            })
            .collect();
        let mut round = |writers: &mut Vec<PartWriter>, last: bool| {
            let tables: Vec<PartTable> = writers
                .iter_mut()
                .map(|w| w.encode(last).unwrap())
                .map(|t| PartTable::from_bytes(&t.unwrap().to_bytes()).unwrap())
                .collect();
            let placements = coord.place(tables).unwrap();
            for (w, p) in writers.iter_mut().zip(placements) {
                w.write(&PartPlacement::from_bytes(&p.to_bytes()).unwrap()).unwrap();
            }
        };
        for (w, block) in writers.iter_mut().zip(&blocks) {
            feed_static(w, block);
        }
        round(&mut writers, false); // the static slab
        for t in 0..T {
            for (w, block) in writers.iter_mut().zip(&blocks) {
                feed(w, block, t, t + 1);
            }
            if writers[0].ready() {
                round(&mut writers, false);
            }
        }
        round(&mut writers, true);
        coord.commit("parallel").unwrap();
    }

    #[test]
    fn dense_and_hybrid_blocks_read_back_and_verify() {
        let hybrid = |fraction, padding| Placement::Hybrid { fraction, padding };
        // Slots too small for anything, large enough for everything, and in between.
        for placement in [Placement::Dense, hybrid(0.01, 0.0), hybrid(2.0, 0.0), hybrid(0.3, 0.1)] {
            for (layout, codec) in [("S", None), ("V-S", Some("shuffle+zstd:1")), ("M-S", None)] {
                let dir = tempfile::tempdir().unwrap();
                let path = format!("{}/s", dir.path().display());
                write_blocks(&path, placement, &options(layout, codec));
                check(&path);
                let m = Store::local(&path).manifest(None).unwrap();
                assert_eq!(m.slabs.len(), 4, "{placement:?} {layout}"); // static + 10 + 10 + 5
                                                                        // Chunks cut to fit the blocks, which meet at y = 20 and x = 30.
                let chunk = &m.variables[3].chunking.as_ref().unwrap().chunk;
                assert!(20 % chunk[1] == 0 && 30 % chunk[2] == 0, "{chunk:?}");
            }
        }
    }

    #[test]
    fn chains_chosen_by_each_writer_are_merged() {
        // As auto plans made by each writer from its own block would differ.
        let dir = tempfile::tempdir().unwrap();
        let path = format!("{}/s", dir.path().display());
        let o = options("S", None);
        let own = |rank: u32| WriterOptions { codec: Some(["lz4", "zstd:1"][rank as usize % 2].into()), ..o.clone() };
        write_blocks_with(&path, Placement::Dense, &o, own);
        check(&path);
        let m = Store::local(&path).manifest(None).unwrap();
        let a = m.variable("a").unwrap().1;
        assert_eq!(a.codecs.len(), 2, "{:?}", a.codecs);
    }

    #[test]
    fn subfile_writers_of_record_ranges() {
        let dir = tempfile::tempdir().unwrap();
        let path = format!("{}/s", dir.path().display());
        let store = || Store::local(&path);
        let mut o = options("S", None);
        o.decomposition.clear();
        let mut coord = Coordinator::create(store(), schema(), &o, 3, Placement::Subfiles).unwrap();
        let token = coord.token().to_string();
        let mut tables = vec![];
        // Writer 2 finishes first: order does not matter.
        for (rank, [r0, r1]) in [(2u32, [20, T]), (0, [0, 10]), (1, [10, 20])] {
            let mut w =
                PartWriter::new(store(), schema(), &o, part(&token, Placement::Subfiles, vec![], rank, r0)).unwrap();
            if r0 == 0 {
                feed_static(&mut w, &Block::new());
            }
            feed(&mut w, &Block::new(), r0, r1);
            while let Some(t) = w.encode(true).unwrap() {
                tables.push(PartTable::from_bytes(&t.to_bytes()).unwrap());
            }
        }
        coord.place(tables).unwrap();
        coord.commit("subfiles").unwrap();
        check(&path);
        let m = Store::local(&path).manifest(None).unwrap();
        assert!(m.slabs.iter().filter(|s| s.records.is_some()).map(|s| &s.data).any(|d| d.contains("-w2")));
    }

    #[test]
    fn a_missing_writer_or_range_fails_the_write() {
        let dir = tempfile::tempdir().unwrap();
        let path = format!("{}/s", dir.path().display());
        let store = || Store::local(&path);
        let o = options("S", None);
        let mut coord = Coordinator::create(store(), schema(), &o, 4, Placement::Dense).unwrap();
        let token = coord.token().to_string();
        let mut w = PartWriter::new(store(), schema(), &o, part(&token, Placement::Dense, blocks(), 0, 0)).unwrap();
        feed_static(&mut w, &blocks()[0]);
        let err = coord.place(vec![w.encode(false).unwrap().unwrap()]).unwrap_err().to_string();
        assert!(err.contains("all 4 writers"), "{err}");
        // Blocks that overlap, or leave a gap.
        let mut overlapping = blocks();
        overlapping[1].insert("x".into(), [20, NX]);
        let err =
            PartWriter::new(store(), schema(), &o, part(&token, Placement::Dense, overlapping, 0, 0)).unwrap_err();
        assert!(err.to_string().contains("writers 0 and 1 overlap"), "{err}");
        let mut gap = blocks();
        gap[1].insert("x".into(), [40, NX]);
        let err = PartWriter::new(store(), schema(), &o, part(&token, Placement::Dense, gap, 0, 0)).unwrap_err();
        assert!(err.to_string().contains("must cover all"), "{err}");
        // Writers whose blocks cross a chunk: refused when the chunks were given.
        let mut bad = o.clone();
        bad.chunks.insert("x".into(), 25);
        let err = Coordinator::create(store(), schema(), &bad, 4, Placement::Dense).unwrap_err().to_string();
        assert!(err.contains("do not fit the writers' blocks"), "{err}");
        // Subfile ranges must meet.
        let mut o = options("S", None);
        o.decomposition.clear();
        let mut coord = Coordinator::create(store(), schema(), &o, 2, Placement::Subfiles).unwrap();
        let token = coord.token().to_string();
        let mut w = PartWriter::new(store(), schema(), &o, part(&token, Placement::Subfiles, vec![], 1, 10)).unwrap();
        feed(&mut w, &Block::new(), 10, 20);
        let t = w.encode(true).unwrap().unwrap();
        coord.place(vec![t]).unwrap();
        let err = coord.commit("gap").unwrap_err().to_string();
        assert!(err.contains("records 0..10 were written by no writer"), "{err}");
        assert!(!Store::local(&path).exists().unwrap());
    }
}
