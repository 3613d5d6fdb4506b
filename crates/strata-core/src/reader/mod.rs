//! The read path: map a selection to the sub-chunks it touches, read them with coalesced
//! range reads, decode in parallel, and scatter the selected elements into the output.

mod decode;
mod fetch;
mod index;

pub(crate) use decode::SendPtr;
use decode::Task;
pub(crate) use fetch::Fetched;
#[cfg(test)]
pub(crate) use index::INDEXES_KEPT_BYTES;
use index::NEXT_READER;
pub use index::{BinEntry, BinStat, Bins, ReaderCaches, SlabIndex};

use crate::cache::DEFAULT_CACHE_BYTES;
use crate::error::{Error, Result};
use crate::grid::{axis_blocks, ravel, subchunk_grid, unravel, AxisBlock, AxisSelection};
use crate::manifest::{Manifest, Slab, Variable};
use crate::precision;
use crate::segment::{SegmentEntry, SegmentKey};
use crate::store::Store;
use std::sync::atomic::{AtomicU64, Ordering};
use strata_codecs::{registry, CodecChain, ElementContext};

/// Selection along one dimension: `start, start+step, ... < stop`.
pub type DimSelection = AxisSelection;

/// (variable, chunk, sub-chunk): one sub-chunk of one variable in a slab.
pub type SubchunkId = (u32, u64, u32);

/// The segments of one bin of a sub-chunk to decode: one per byte group read.
#[derive(Debug, Clone)]
pub(crate) struct BinRead {
    pub bin: u32,
    pub entries: Vec<SegmentEntry>,
}

/// Stored and raw bytes of one variable, summed over its segments.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct VariableStats {
    pub raw_bytes: u64,
    pub stored_bytes: u64,
    pub segments: u64,
    pub count: u64,
    pub min: f64,
    pub max: f64,
}

/// What the reader has done since it was opened: the evidence that a selection touches
/// only the sub-chunks it needs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReadStats {
    /// Range requests sent to storage for data files (after coalescing).
    pub requests: u64,
    /// Bytes fetched from data files.
    pub bytes_read: u64,
    /// Segments decoded.
    pub segments_decoded: u64,
    /// Index files loaded.
    pub index_loads: u64,
    /// Segments served from the decoded-segment cache.
    pub cache_hits: u64,
}

/// The data reads of one query run, counted where they are made: a reader's own counters
/// ([`StoreReader::stats`]) also count the reads of every other query on it at the time.
#[derive(Debug, Default)]
pub(crate) struct RunReads {
    requests: AtomicU64,
    bytes: AtomicU64,
}

impl RunReads {
    /// Data bytes fetched and range requests sent.
    pub(crate) fn get(&self) -> (u64, u64) {
        (self.bytes.load(Ordering::Relaxed), self.requests.load(Ordering::Relaxed))
    }

    /// One range request of `bytes`.
    fn add(&self, bytes: u64) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
    }
}

#[derive(Debug, Default)]
struct Counters {
    requests: AtomicU64,
    bytes_read: AtomicU64,
    segments_decoded: AtomicU64,
    index_loads: AtomicU64,
    cache_hits: AtomicU64,
}

#[derive(Debug)]
pub struct StoreReader {
    store: Store,
    manifest: Manifest,
    chains: Vec<Vec<CodecChain>>,
    /// Its number among the readers that share its caches.
    key: u64,
    /// Decoded segments, slab indexes and Level V's frames of positions loaded last.
    caches: ReaderCaches,
    counters: Counters,
    /// Whether large reads fetch the next batch of segments while decoding the current one.
    overlap: std::sync::atomic::AtomicBool,
    /// Per slab: its data file's header was read and found right (set once, on first use).
    header_checked: Vec<std::sync::OnceLock<()>>,
    /// The file this store indexes in place, if any: the data file of every slab.
    source: Option<String>,
}

/// A file the manifest names but storage lacks is a damaged store, not a user error.
fn missing_is_corruption(e: Error, path: &str) -> Error {
    match e {
        Error::NotFound(_) => Error::Corruption(format!("file '{path}' named by the manifest is missing")),
        other => other,
    }
}

/// A sub-chunk touched by a selection: its slab (position in the manifest), id, the global
/// coordinates of its first element, and the selected part along each axis.
pub(crate) struct SelectedSubchunk {
    pub slab: usize,
    pub id: SubchunkId,
    pub start: Vec<u64>,
    pub blocks: Vec<AxisBlock>,
}

/// What a read weighs before it runs (see [`StoreReader::read_weight`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadWeight {
    /// At most how many bytes it decodes: every sub-chunk it touches, whole, at full
    /// precision.
    pub decoded_bytes: u64,
    /// Whether every slab index it needs is loaded (no index file would be read).
    pub indexes_loaded: bool,
}

/// The blocks of each axis a selection touches in one slab (see `touched_blocks`).
struct TouchedBlocks {
    slab: usize,
    offsets: Vec<u64>,
    extent: Vec<u64>,
    per_axis: Vec<Vec<AxisBlock>>,
}

impl StoreReader {
    pub fn open(store: Store, version: Option<u64>) -> Result<Self> {
        Self::open_with_cache(store, version, DEFAULT_CACHE_BYTES)
    }

    /// Opens with a decoded-segment cache of `cache_bytes` (0 disables it).
    pub fn open_with_cache(store: Store, version: Option<u64>, cache_bytes: u64) -> Result<Self> {
        Self::open_sharing(store, version, ReaderCaches::new(cache_bytes))
    }

    /// Opens keeping what it loads in `caches`, which other readers may share.
    pub fn open_sharing(store: Store, version: Option<u64>, caches: ReaderCaches) -> Result<Self> {
        let manifest = store.manifest(version)?;
        let chains = manifest
            .variables
            .iter()
            .map(|v| {
                let Some(t) = precision::chain_type(&manifest.layout, v)? else { return Ok(vec![]) };
                v.codecs
                    .iter()
                    .map(|specs| registry::chain(specs, ElementContext::new(t)))
                    .collect::<std::result::Result<Vec<_>, _>>()
                    .map_err(|e| Error::Compatibility(format!("variable '{}': {e}", v.name)))
            })
            .collect::<Result<Vec<_>>>()?;
        let n_slabs = manifest.slabs.len();
        let manifest_source = manifest.source().map(|f| f.path.clone());
        Ok(Self {
            store,
            manifest,
            chains,
            key: NEXT_READER.fetch_add(1, Ordering::Relaxed),
            caches,
            counters: Counters::default(),
            overlap: std::sync::atomic::AtomicBool::new(true),
            header_checked: (0..n_slabs).map(|_| std::sync::OnceLock::new()).collect(),
            source: manifest_source,
        })
    }

    /// Turns the overlap of reading and decoding off (or back on): for measuring what it
    /// gains. Results are the same either way.
    pub fn set_overlap(&self, on: bool) {
        self.overlap.store(on, Ordering::Relaxed);
    }

    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    pub fn stats(&self) -> ReadStats {
        let c = &self.counters;
        ReadStats {
            requests: c.requests.load(Ordering::Relaxed),
            bytes_read: c.bytes_read.load(Ordering::Relaxed),
            segments_decoded: c.segments_decoded.load(Ordering::Relaxed),
            index_loads: c.index_loads.load(Ordering::Relaxed),
            cache_hits: c.cache_hits.load(Ordering::Relaxed),
        }
    }

    /// The slabs holding a variable, with the record offset of each.
    pub(crate) fn parts_of(&self, var: &Variable) -> Vec<(usize, u64, u64)> {
        let record = self.manifest.is_record_var(var);
        self.manifest
            .slabs
            .iter()
            .enumerate()
            .filter_map(|(i, s)| match (s.records, record) {
                (Some([start, count]), true) => Some((i, start, count)),
                (None, false) => Some((i, 0, 0)),
                _ => None,
            })
            .collect()
    }

    /// Validates a selection against a variable and returns the output shape.
    pub fn check_selection(&self, name: &str, sel: &[DimSelection]) -> Result<Vec<u64>> {
        let (_, var) = self.manifest.variable(name)?;
        let shape = self.manifest.shape(var);
        if sel.len() != shape.len() {
            return Err(Error::InvalidArgument(format!(
                "'{name}' has {} dimensions {:?}, the selection has {}",
                shape.len(),
                var.dims,
                sel.len()
            )));
        }
        for (d, (s, &n)) in sel.iter().zip(&shape).enumerate() {
            if s.step == 0 || s.start > s.stop || s.stop > n {
                return Err(Error::InvalidArgument(format!(
                    "selection {}:{}:{} is out of range for dimension '{}' of length {n}",
                    s.start, s.stop, s.step, var.dims[d]
                )));
            }
        }
        Ok(sel.iter().map(|s| s.count()).collect())
    }

    /// Reads the selection of variable `name` into `out` (C order, little-endian).
    /// Every element of variable `name`, as stored (little-endian bytes).
    pub fn read_whole(&self, name: &str) -> Result<Vec<u8>> {
        let (_, var) = self.manifest().variable(name)?;
        let shape = self.manifest().shape(var);
        let n: u64 = shape.iter().product();
        let mut out = vec![0u8; n as usize * var.dtype.size()];
        let sel: Vec<DimSelection> = shape.iter().map(|&n| DimSelection { start: 0, stop: n, step: 1 }).collect();
        self.read_into(name, &sel, &mut out)?;
        Ok(out)
    }

    pub fn read_into(&self, name: &str, sel: &[DimSelection], out: &mut [u8]) -> Result<()> {
        self.read_into_at(name, sel, None, out)
    }

    /// The byte groups of a variable split by level M, or None.
    pub fn byte_groups(&self, name: &str) -> Result<Option<Vec<usize>>> {
        precision::byte_groups(&self.manifest.layout, self.manifest.variable(name)?.1)
    }

    /// Like [`read_into`](Self::read_into), at precision `level` (the number of byte groups
    /// read, see [`precision`]): only those groups' segments are fetched and decoded, and
    /// the missing bytes are filled. `None`, or a level of at least the number of groups,
    /// reads everything; variables not split by level M are always read whole.
    pub fn read_into_at(&self, name: &str, sel: &[DimSelection], level: Option<usize>, out: &mut [u8]) -> Result<()> {
        self.read_counted(name, sel, level, out, None)
    }

    /// [`read_into_at`](Self::read_into_at), its reads also counted in `counted`.
    pub(crate) fn read_counted(
        &self,
        name: &str,
        sel: &[DimSelection],
        level: Option<usize>,
        out: &mut [u8],
        counted: Option<&RunReads>,
    ) -> Result<()> {
        let out_shape = self.check_selection(name, sel)?;
        let (var_idx, var) = self.manifest.variable(name)?;
        if level == Some(0) {
            return Err(Error::InvalidArgument("precision level must be at least 1".into()));
        }
        let groups = precision::byte_groups(&self.manifest.layout, var)?;
        let widths = precision::widths_read(groups.as_deref(), level, var.dtype.size());
        let es = var.dtype.size();
        let expected = out_shape.iter().product::<u64>() as usize * es;
        if out.len() != expected {
            return Err(Error::InvalidArgument(format!("output buffer has {} bytes, {expected} needed", out.len())));
        }
        if var.chunking.is_none() {
            return Err(Error::InvalidArgument(format!("'{name}' is a string variable: read it from the manifest")));
        }
        if expected == 0 {
            return Ok(());
        }
        let tasks = self.tasks_for(var_idx, sel, &widths)?;
        let split = groups.map(|g| (g, widths.len()));
        self.execute(var_idx, &tasks, split.as_ref(), &out_shape, out, counted)?;
        if let Some((groups, level)) = &split {
            precision::restore_missing(out, var.dtype, groups, *level, &var.missing_values());
        }
        Ok(())
    }

    /// Reads the stored bytes a full-precision selection of `name` needs, without decoding
    /// them, the way a read fetches them (coalesced ranges, in file order, checksums not
    /// checked); returns the bytes read. What a read costs in I/O alone.
    pub fn fetch_only(&self, name: &str, sel: &[DimSelection]) -> Result<u64> {
        let tasks = self.full_precision_tasks(name, sel)?;
        let entries =
            tasks.iter().flat_map(|t| t.reads.iter().flat_map(move |r| r.entries.iter().map(move |e| (t.slab, e))));
        let fetched = self.fetch_streamed(entries, None)?;
        Ok(fetched.bytes.iter().filter_map(|b| b.get()).map(|b| b.len() as u64).sum())
    }

    /// The work a full-precision read of `sel` does, counted from the index (nothing is
    /// fetched): the stored bytes and segments of every sub-chunk it touches, one call per
    /// sub-chunk, and their elements decoded. The copy of the selected elements out of
    /// them is not counted: the model's `gathered` cost is that of building points.
    pub fn read_work(&self, name: &str, sel: &[DimSelection]) -> Result<crate::planner::Work> {
        let mut work = crate::planner::Work::default();
        for t in self.full_precision_tasks(name, sel)? {
            work.calls += 1.0;
            work.decoded += t.blocks.iter().map(|b| b.len).product::<u64>() as f64;
            for e in t.reads.iter().flat_map(|r| &r.entries) {
                work.segments += 1.0;
                work.bytes += e.length as f64;
            }
        }
        Ok(work)
    }

    /// The sub-chunks a selection of `name` touches, with every byte group's segments
    /// (the selection checked first).
    fn full_precision_tasks(&self, name: &str, sel: &[DimSelection]) -> Result<Vec<Task>> {
        self.check_selection(name, sel)?;
        let (var_idx, var) = self.manifest.variable(name)?;
        let groups = precision::byte_groups(&self.manifest.layout, var)?;
        let widths = precision::widths_read(groups.as_deref(), None, var.dtype.size());
        self.tasks_for(var_idx, sel, &widths)
    }

    /// The sub-chunks a (checked) selection of `var_idx` touches, with their segments.
    fn tasks_for(&self, var_idx: usize, sel: &[DimSelection], widths: &[usize]) -> Result<Vec<Task>> {
        let mut tasks: Vec<Task> = Vec::new();
        let subchunks = self.subchunks_in(var_idx, sel);
        self.load_indexes(subchunks.iter().map(|sc| sc.slab))?;
        for sc in subchunks {
            let slab = &self.manifest.slabs[sc.slab];
            // Consecutive sub-chunks share a slab: its index is looked up once per run.
            let index = match tasks.last() {
                Some(t) if t.slab == sc.slab => t.index.clone(),
                _ => self.slab_index(slab)?,
            };
            let elements = sc.blocks.iter().map(|b| b.len).product::<u64>();
            let reads = self.bin_reads(&index, slab, sc.id, elements, widths, &|_| true)?;
            tasks.push(Task { slab: sc.slab, index, id: sc.id, reads, blocks: sc.blocks });
        }
        Ok(tasks)
    }

    /// The sub-chunks of variable `var_idx` that a (checked) selection touches, slab by slab.
    pub(crate) fn subchunks_in(&self, var_idx: usize, sel: &[DimSelection]) -> Vec<SelectedSubchunk> {
        let var = &self.manifest.variables[var_idx];
        let Some(chunking) = &var.chunking else { return vec![] };
        let sub_grid = subchunk_grid(&chunking.chunk, &chunking.subchunk);
        let mut out = Vec::new();
        for touched in self.touched_blocks(var, sel) {
            let grid = crate::grid::chunk_grid(&touched.extent, &chunking.chunk);
            // Every combination of one block per axis is one sub-chunk.
            let lens: Vec<u64> = touched.per_axis.iter().map(|b| b.len() as u64).collect();
            for combo in 0..lens.iter().product::<u64>() {
                let pick = unravel(combo, &lens);
                let blocks: Vec<AxisBlock> = pick.iter().zip(&touched.per_axis).map(|(&i, b)| b[i as usize]).collect();
                let chunk_coords: Vec<u64> = blocks.iter().map(|b| b.chunk).collect();
                let sub_coords: Vec<u64> = blocks.iter().map(|b| b.sub).collect();
                let start = (0..touched.extent.len())
                    .map(|d| {
                        touched.offsets[d] + chunk_coords[d] * chunking.chunk[d] + sub_coords[d] * chunking.subchunk[d]
                    })
                    .collect();
                let id = (var_idx as u32, ravel(&chunk_coords, &grid), ravel(&sub_coords, &sub_grid) as u32);
                out.push(SelectedSubchunk { slab: touched.slab, id, start, blocks });
            }
        }
        out
    }

    /// Per slab holding part of `var`, the sub-chunk blocks of each axis that a (checked)
    /// selection touches (slabs it misses left out).
    fn touched_blocks(&self, var: &Variable, sel: &[DimSelection]) -> Vec<TouchedBlocks> {
        let Some(chunking) = &var.chunking else { return vec![] };
        let full_shape = self.manifest.shape(var);
        let mut out = Vec::new();
        for (slab, offset, count) in self.parts_of(var) {
            let mut extent = full_shape.clone();
            let mut offsets = vec![0u64; extent.len()];
            if self.manifest.slabs[slab].records.is_some() {
                extent[0] = count;
                offsets[0] = offset;
            }
            let per_axis: Vec<Vec<AxisBlock>> = (0..extent.len())
                .map(|d| axis_blocks(sel[d], offsets[d], extent[d], chunking.chunk[d], chunking.subchunk[d]))
                .collect();
            if !per_axis.iter().any(|b| b.is_empty()) {
                out.push(TouchedBlocks { slab, offsets, extent, per_axis });
            }
        }
        out
    }

    /// What reading `sel` of `name` weighs, from the chunk grid and the indexes already
    /// kept (no index is read, and the sub-chunks are counted, not listed): what a caller
    /// weighs a small read by before choosing the thread it runs on.
    pub fn read_weight(&self, name: &str, sel: &[DimSelection]) -> Result<ReadWeight> {
        self.check_selection(name, sel)?;
        let (_, var) = self.manifest.variable(name)?;
        let Some(chunking) = &var.chunking else { return Ok(ReadWeight { decoded_bytes: 0, indexes_loaded: true }) };
        let per = chunking.subchunk.iter().product::<u64>().saturating_mul(var.dtype.size() as u64);
        let (mut count, mut indexes_loaded) = (0u64, true);
        for t in self.touched_blocks(var, sel) {
            let here = t.per_axis.iter().map(|b| b.len() as u64).fold(1u64, u64::saturating_mul);
            count = count.saturating_add(here);
            indexes_loaded &= self.caches.indexes.contains(&(self.key, self.manifest.slabs[t.slab].id));
        }
        Ok(ReadWeight { decoded_bytes: count.saturating_mul(per), indexes_loaded })
    }

    /// The segments to decode for a sub-chunk of `elements` elements: per bin (only bin 0
    /// without level V) accepted by `want`, one segment per byte group width in `widths`.
    /// Everything is checked against the variable so that decoding cannot misplace bytes.
    pub(crate) fn bin_reads(
        &self,
        index: &SlabIndex,
        slab: &Slab,
        id: SubchunkId,
        elements: u64,
        widths: &[usize],
        want: &dyn Fn(u32) -> bool,
    ) -> Result<Vec<BinRead>> {
        let binned = self.manifest.layout.order.contains(&crate::manifest::Level::V);
        let bins: Vec<(u32, u64)> = if binned {
            let list = index
                .bins_of(id)?
                .ok_or_else(|| Error::Corruption(format!("slab {}: no bin positions for segment {id:?}", slab.id)))?;
            if list.iter().map(|e| e.len).sum::<u64>() != elements
                || list.iter().any(|e| e.positions.max().is_some_and(|m| m as u64 >= elements))
            {
                return Err(Error::Corruption(format!(
                    "slab {}: bin positions of sub-chunk {id:?} do not cover its {elements} elements",
                    slab.id
                )));
            }
            list.iter().filter(|e| want(e.bin)).map(|e| (e.bin, e.len)).collect()
        } else {
            vec![(0, elements)]
        };
        self.reads_for(index, slab, id, elements, widths, bins)
    }

    /// The segments to decode for `bins` (bin, elements) of a sub-chunk of `elements`
    /// elements, one per byte group width in `widths`, checked against the variable.
    pub(crate) fn reads_for(
        &self,
        index: &SlabIndex,
        slab: &Slab,
        id: SubchunkId,
        elements: u64,
        widths: &[usize],
        bins: Vec<(u32, u64)>,
    ) -> Result<Vec<BinRead>> {
        let (var, chunk, subchunk) = id;
        let var_idx = var as usize;
        let whole = self.is_in_place(slab);
        let mut reads = Vec::with_capacity(bins.len());
        for (bin, n) in bins {
            let n = if whole { elements } else { n };
            let mut entries = Vec::with_capacity(widths.len());
            for (g, &w) in widths.iter().enumerate() {
                let key = SegmentKey { var, chunk, subchunk, bin, group: g as u8 };
                let entry = *index.segments.get(&key).ok_or_else(|| {
                    Error::Corruption(format!(
                        "slab {} has no segment for '{}' {key:?}",
                        slab.id, self.manifest.variables[var_idx].name
                    ))
                })?;
                if entry.raw_length != n * w as u64 || entry.codec as usize >= self.chains[var_idx].len() {
                    return Err(Error::Corruption(format!(
                        "slab {}: segment {key:?} does not match the variable",
                        slab.id
                    )));
                }
                entries.push(entry);
            }
            reads.push(BinRead { bin, entries });
        }
        Ok(reads)
    }

    /// Raw and stored bytes per variable, from the index files only.
    pub fn variable_stats(&self) -> Result<Vec<VariableStats>> {
        let mut stats =
            vec![VariableStats { min: f64::NAN, max: f64::NAN, ..Default::default() }; self.manifest.variables.len()];
        for index in self.slab_indexes()? {
            let index = index?;
            for s in index.segments.values() {
                let st = &mut stats[s.key.var as usize];
                st.raw_bytes += s.raw_length;
                st.stored_bytes += s.length;
                st.segments += 1;
                if s.count > 0 {
                    st.min = if st.count == 0 { s.min } else { st.min.min(s.min) };
                    st.max = if st.count == 0 { s.max } else { st.max.max(s.max) };
                    st.count += s.count;
                }
            }
        }
        Ok(stats)
    }
}
