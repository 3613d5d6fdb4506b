//! The coordinator of a parallel write: places each slab, writes its index, commits once.

use super::{paths, PartPlacement, PartTable, Placement, MESSAGE_VERSION};
use crate::bins::BinSummary;
use crate::data_file::{self, HEADER_LEN};
use crate::error::{Error, Result};
use crate::manifest::{FileEntry, Slab};
use crate::segment::{layout_key, SegmentEntry};
use crate::store::{random_suffix, Store};
use crate::writer::{DatasetSchema, PendingBitmap, StoreWriter, WriterOptions};
use std::collections::BTreeMap;

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
            bitmaps.extend(t.index.bitmaps.iter().map(PendingBitmap::new));
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
        let index = self.writer.write_index(&index_path, id, entries, bitmaps, bins.into_values().collect(), None)?;
        let fraction = if raw > 0 { (size - HEADER_LEN) as f64 / raw as f64 } else { 1.0 };
        let files =
            [FileEntry { path: data_path.clone(), size, crc32c: crc, external: false, modified_ns: None }, index];
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
        let positions = index.bitmaps.iter().map(PendingBitmap::new).collect();
        let entry = self.writer.write_index(&index_path, t.slab, index.segments, positions, index.bins, None)?;
        let files = [own.clone(), entry];
        self.add_slab(Slab { id: t.slab, records: t.records, data: own.path.clone(), index: index_path }, files);
        Ok(PartPlacement { version: MESSAGE_VERSION, slab: t.slab, data: own.path, offsets: vec![], fraction: 1.0 })
    }

    /// Publishes the version: call it after every writer's last [`PartWriter::write`](super::PartWriter::write) returned.
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
