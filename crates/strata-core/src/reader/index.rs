//! Slab indexes as the reader keeps them: segment tables, level V's bins and their positions
//! (loaded whole or frame by frame), and the caches readers share.

use super::{missing_is_corruption, StoreReader, SubchunkId};
use crate::bins::BinSummary;
use crate::cache::{SegmentCache, DEFAULT_CACHE_BYTES};
use crate::error::{Error, Result};
use crate::fxhash::FxHashMap;
use crate::index_file;
use crate::index_frames::Frames;
use crate::kept::Kept;
use crate::manifest::Slab;
use crate::precision;
use crate::segment::{SegmentEntry, SegmentKey};
use rayon::prelude::*;
use roaring::RoaringBitmap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The segment table of one slab, keyed for lookups, with level V's positions.
#[derive(Debug)]
pub struct SlabIndex {
    pub segments: FxHashMap<SegmentKey, SegmentEntry>,
    /// Level V: the bins of each sub-chunk, ascending, with positions and summaries.
    positions: Positions,
    /// Level V: per variable, the slab's bin boundaries and counts.
    pub bins: FxHashMap<u32, BinSummary>,
    /// Per sub-chunk, its stored bytes and segments by byte group (all bins together):
    /// what a scan reads, looked up once instead of per (bin, group) when planning.
    pub totals: FxHashMap<SubchunkId, Vec<(u64, u32)>>,
    /// Level V with positions read when needed: each sub-chunk's bins as the segments
    /// table tells them, so that planning reads none (the query that follows reads them
    /// once). None where positions are read with the index: in place, where a bin's
    /// segment is the file's whole chunk and its length says nothing of the bin's.
    stats: Option<FxHashMap<SubchunkId, Vec<BinStat>>>,
}

/// One bin of one sub-chunk as planning sees it: its elements, and its group-0 segment's
/// summary.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BinStat {
    pub bin: u32,
    pub len: u64,
    pub count: u64,
    pub min: f64,
    pub max: f64,
}

impl From<&BinEntry> for BinStat {
    fn from(e: &BinEntry) -> Self {
        BinStat { bin: e.bin, len: e.len, count: e.count, min: e.min, max: e.max }
    }
}

/// Level V's positions of a slab: read with its index (in place, or none at all), or
/// loaded when a query needs them, the last used kept in the reader's [`FrameCache`] (a
/// query that walks a whole store holds a few frames, not all its positions).
pub(super) enum Positions {
    Whole(Arc<BinMap>),
    Lazy(LazyPositions),
}

/// Positions left in their index file, read a part at a time: a frame (the one holding a
/// sub-chunk), or the whole positions section of a file small enough to be read whole.
pub(super) struct LazyPositions {
    storage: Arc<dyn crate::storage::Storage>,
    path: String,
    parts: Parts,
    /// The reader's number (see [`ReaderCaches`]) and the slab's id.
    slab: (u64, u64),
    cache: Arc<FrameCache>,
}

pub(super) enum Parts {
    Frames(Frames),
    Section(index_file::PositionsSection),
}

impl LazyPositions {
    /// The part that may hold sub-chunk `id`.
    fn part_of(&self, id: SubchunkId) -> Option<usize> {
        match &self.parts {
            Parts::Frames(frames) => frames.frame_of(id),
            Parts::Section(_) => Some(0),
        }
    }

    /// Part `i`'s positions, read and checked, and its size as the cache counts it.
    fn load(&self, i: usize) -> Result<(Vec<index_file::BinPositions>, u64)> {
        let what = format!("index file {}", self.path);
        match &self.parts {
            Parts::Frames(frames) => {
                let bitmaps = crate::index_frames::load_frame(self.storage.as_ref(), &self.path, frames, i, &what)?;
                Ok((bitmaps, frames.frames[i].raw_length))
            }
            Parts::Section(section) => {
                let stored = self.storage.read_range(&self.path, section.at, section.len)?;
                Ok((index_file::decode_positions(&stored, section, &what)?, section.raw_len))
            }
        }
    }
}

type BinMap = FxHashMap<SubchunkId, Vec<BinEntry>>;

/// Bytes of positions (as stored, decompressed) a reader keeps loaded, over all its slabs:
/// frames of about `index_frame_bytes` (1 MiB by default), and the whole positions of
/// slabs whose index is read whole (at most that size each). A count over a 1 GB field
/// under V-S (250 frames) took 4.7 s keeping 8 frames, as its Hilbert-ordered walk came
/// back to frames dropped; 0.68 s keeping 64 (174 MB resident); 0.48 s keeping all (299
/// MB). Kept per slab, a store of many slabs held up to 64 frames of each: on a 200 MB
/// field in ten framed slabs a first query grew the process by 114 MB kept per slab, 88
/// MB kept here, in the same time. Counted in bytes, not frames: 114 slabs of 30 kB held
/// as 64 entries read most of them again on every query (points 4.5 -> 12 ms). Shared
/// only because planning reads none ([`SlabIndex::bin_stats`]): walked twice, they were
/// read twice. (4 KiB in this crate's unit tests, so that they drop frames and read them
/// again.)
const POSITIONS_KEPT_BYTES: u64 = if cfg!(test) { 4 << 10 } else { 64 << 20 };

/// The frames of positions readers keep, by (reader, slab, frame): the last used, up to
/// [`POSITIONS_KEPT_BYTES`].
pub(crate) type FrameCache = Kept<(u64, u64, usize), Arc<BinMap>>;

/// Slab indexes readers keep, by (reader, slab): the last used, up to
/// `INDEXES_KEPT_BYTES`.
type IndexCache = Kept<(u64, u64), Arc<SlabIndex>>;

/// Where readers keep what they loaded: decoded segments, slab indexes, frames of
/// positions, each within its budget. A reader opened alone has its own; a process that
/// opens many stores at once (a server) gives them the same, so that what they hold
/// together is bounded, not their number times each. Each reader keys its entries by a
/// number of its own: two stores' slab 1 are not the same.
#[derive(Debug, Clone)]
pub struct ReaderCaches {
    pub(super) segments: Arc<SegmentCache>,
    pub(super) indexes: Arc<IndexCache>,
    frames: Arc<FrameCache>,
}

impl ReaderCaches {
    /// Caches of the default sizes for indexes and positions, and `segment_bytes` of
    /// decoded segments (0 keeps none).
    pub fn new(segment_bytes: u64) -> Self {
        ReaderCaches {
            segments: Arc::new(SegmentCache::new(segment_bytes)),
            indexes: Arc::new(Kept::new(INDEXES_KEPT_BYTES)),
            frames: Arc::new(Kept::new(POSITIONS_KEPT_BYTES)),
        }
    }

    /// The same caches of indexes and positions, with a cache of `segment_bytes` of decoded
    /// segments of its own: what a server gives each reader. Shared, 64 MiB of segments
    /// thrashed between four datasets of 44 MB that a DAP2 benchmark reads by turns (each
    /// request decoded again: 3.1-3.7x pydap's speed fell to 1.4-2.9x), and a budget large
    /// enough for many would be filled by one long answer streamed.
    pub fn with_own_segments(&self, segment_bytes: u64) -> Self {
        ReaderCaches { segments: Arc::new(SegmentCache::new(segment_bytes)), ..self.clone() }
    }

    /// Bytes held: decoded segments, slab indexes, frames of positions.
    pub fn bytes(&self) -> (u64, u64, u64) {
        (self.segments.bytes(), self.indexes.kept().1, self.frames.kept().1)
    }
}

impl Default for ReaderCaches {
    fn default() -> Self {
        ReaderCaches::new(DEFAULT_CACHE_BYTES)
    }
}

/// The next reader's number (see [`ReaderCaches`]).
pub(super) static NEXT_READER: AtomicU64 = AtomicU64::new(1);

/// Bytes of slab indexes a reader keeps loaded (their segments tables, bin summaries and
/// the positions read with them), the last used first: every slab's stayed for the
/// reader's life, about 1.25% of the raw data under V-S (5 MB for 100 slabs of a 400 MB
/// field), so a count over a store of 10,000 appended files held them all. A query over
/// more than this reads the indexes it dropped again. (12 KiB in this crate's unit tests,
/// so that they drop indexes and read them again.)
pub(crate) const INDEXES_KEPT_BYTES: u64 = if cfg!(test) { 12 << 10 } else { 256 << 20 };

impl std::fmt::Debug for Positions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Positions::Whole(m) => write!(f, "Positions::Whole({} sub-chunks)", m.len()),
            Positions::Lazy(LazyPositions { path, parts: Parts::Frames(frames), .. }) => {
                write!(f, "Positions::Lazy({path}, {} frames)", frames.frames.len())
            }
            Positions::Lazy(LazyPositions { path, parts: Parts::Section(s), .. }) => {
                write!(f, "Positions::Lazy({path}, {} bytes whole)", s.len)
            }
        }
    }
}

/// The bins of one sub-chunk (level V), ascending, with positions and summaries; holding
/// it keeps their frame loaded.
#[derive(Debug, Clone)]
pub struct Bins {
    map: Arc<BinMap>,
    id: SubchunkId,
}

impl std::ops::Deref for Bins {
    type Target = [BinEntry];
    fn deref(&self) -> &[BinEntry] {
        self.map.get(&self.id).map_or(&[], |v| &v[..])
    }
}

impl Bins {
    /// The positions of bin `bin`.
    pub fn positions(&self, bin: u32) -> Result<&RoaringBitmap> {
        self.binary_search_by_key(&bin, |e| e.bin)
            .map(|i| &self[i].positions)
            .map_err(|_| Error::Corruption(format!("no positions for bin {bin} of {:?}", self.id)))
    }
}

/// Index files up to this size are read whole; larger ones without their position frames.
/// (0 in this crate's unit tests, so that every store they write is read as a large one.)
const WHOLE_INDEX_BYTES: u64 = if cfg!(test) { 0 } else { 1 << 20 };

/// Bytes a hash map's table takes (its entries and control bytes), its entries' own heap
/// left to the caller.
fn table_bytes<K, V, S>(m: &std::collections::HashMap<K, V, S>) -> u64 {
    (m.capacity() * (std::mem::size_of::<(K, V)>() + 1)) as u64
}

/// Bytes a map of positions takes: its table, its entries, their bitmaps as serialized.
fn bin_map_bytes(m: &BinMap) -> u64 {
    let entries = m.values().map(|v| {
        (v.capacity() * std::mem::size_of::<BinEntry>()) as u64
            + v.iter().map(|e| e.positions.serialized_size() as u64).sum::<u64>()
    });
    table_bytes(m) + entries.sum::<u64>()
}

impl SlabIndex {
    /// About how many bytes of memory it holds (positions read when needed are counted
    /// where they are kept, see `FrameCache`): what the reader's budget of kept indexes
    /// counts.
    pub fn heap_bytes(&self) -> u64 {
        let vecs = |n: usize, each: usize| (n * each) as u64;
        let bins = self.bins.values().map(|b| vecs(b.boundaries.capacity() + b.counts.capacity(), 8));
        let totals = self.totals.values().map(|t| vecs(t.capacity(), std::mem::size_of::<(u64, u32)>()));
        let stats = self.stats.as_ref().map_or(0, |m| {
            table_bytes(m) + m.values().map(|v| vecs(v.capacity(), std::mem::size_of::<BinStat>())).sum::<u64>()
        });
        let positions = match &self.positions {
            Positions::Whole(m) => bin_map_bytes(m),
            Positions::Lazy(_) => 0,
        };
        table_bytes(&self.segments)
            + table_bytes(&self.bins)
            + bins.sum::<u64>()
            + table_bytes(&self.totals)
            + totals.sum::<u64>()
            + stats
            + positions
    }

    /// The bins present in a sub-chunk (None without V). A framed index reads the frame
    /// holding them unless it is among the last few used.
    pub fn bins_of(&self, id: SubchunkId) -> Result<Option<Bins>> {
        let map = match &self.positions {
            Positions::Whole(m) => m.clone(),
            Positions::Lazy(lazy) => {
                let Some(i) = lazy.part_of(id) else { return Ok(None) };
                match lazy.cache.get(&(lazy.slab.0, lazy.slab.1, i)) {
                    Some(m) => m,
                    None => {
                        // Read outside the lock: two threads may read the same part.
                        let (bitmaps, bytes) = lazy.load(i)?;
                        let m = Arc::new(bin_entries(bitmaps, &self.segments, &lazy.path)?);
                        lazy.cache.put((lazy.slab.0, lazy.slab.1, i), m.clone(), bytes);
                        m
                    }
                }
            }
        };
        Ok(map.contains_key(&id).then_some(Bins { map, id }))
    }

    /// The bins present in a sub-chunk (None without V), ascending, with their sizes and
    /// summaries: from the segments table where it holds them, without reading positions.
    pub fn bin_stats(&self, id: SubchunkId) -> Result<Option<std::borrow::Cow<'_, [BinStat]>>> {
        use std::borrow::Cow;
        match &self.stats {
            Some(stats) => Ok(stats.get(&id).map(|v| Cow::Borrowed(&v[..]))),
            None => Ok(self.bins_of(id)?.map(|b| Cow::Owned(b.iter().map(BinStat::from).collect()))),
        }
    }

    #[cfg(test)]
    pub(crate) fn stats_from_segments(&self) -> bool {
        self.stats.is_some()
    }

    /// Stored bytes and segments of a sub-chunk's first `groups` byte groups, all bins.
    pub fn stored(&self, id: SubchunkId, groups: u8) -> (u64, u32) {
        self.totals
            .get(&id)
            .map_or((0, 0), |t| t.iter().take(groups as usize).fold((0, 0), |(b, n), &(gb, gn)| (b + gb, n + gn)))
    }
}

/// Level V's positions by sub-chunk, each bin with its group-0 segment's summary, checked:
/// every bitmap names a segment, no bin twice.
fn bin_entries(
    bitmaps: Vec<index_file::BinPositions>,
    segments: &FxHashMap<SegmentKey, SegmentEntry>,
    path: &str,
) -> Result<BinMap> {
    let mut positions: BinMap = FxHashMap::default();
    for b in bitmaps {
        let key = SegmentKey { var: b.var, chunk: b.chunk, subchunk: b.subchunk, bin: b.bin, group: 0 };
        let e = segments
            .get(&key)
            .ok_or_else(|| Error::Corruption(format!("index file {path}: bin positions without a segment {key:?}")))?;
        let len = b.positions.len();
        let entry = BinEntry { bin: b.bin, positions: b.positions, len, count: e.count, min: e.min, max: e.max };
        positions.entry((b.var, b.chunk, b.subchunk)).or_default().push(entry);
    }
    for list in positions.values_mut() {
        list.sort_unstable_by_key(|e| e.bin);
        if list.windows(2).any(|w| w[0].bin == w[1].bin) {
            return Err(Error::Corruption(format!("index file {path} lists a bin's positions twice")));
        }
    }
    Ok(positions)
}

/// One bin of one sub-chunk (level V): its element positions and the summary of its
/// group-0 segment, kept together so that value queries classify bins without lookups.
#[derive(Debug)]
pub struct BinEntry {
    pub bin: u32,
    pub positions: RoaringBitmap,
    /// `positions.len()`, counted once at load: for run containers roaring sums the runs
    /// on every call, and the planner asks for every bin of every sub-chunk.
    pub len: u64,
    pub count: u64,
    pub min: f64,
    pub max: f64,
}

impl StoreReader {
    /// How many frames of positions it keeps loaded, over every slab, and their bytes.
    #[cfg(test)]
    pub(crate) fn frames_kept(&self) -> (usize, u64) {
        self.caches.frames.kept()
    }

    /// Loads the indexes of the slabs at `positions` (in the manifest) that are not loaded
    /// yet, side by side: a read or a query spanning several slabs would otherwise decode
    /// them one after another (ERSST x4's three V-S slab indexes: 10 MB of bitmaps, most of
    /// what opening it for SQL cost). Stops after half the budget of kept indexes: the rest
    /// are loaded one by one as they are used, rather than loaded here to be dropped unused.
    pub(crate) fn load_indexes(&self, positions: impl IntoIterator<Item = usize>) -> Result<()> {
        let mut wanted: Vec<usize> = positions.into_iter().collect();
        wanted.sort_unstable();
        wanted.dedup();
        wanted
            .retain(|&i| self.manifest.slabs.get(i).is_some_and(|s| !self.caches.indexes.contains(&(self.key, s.id))));
        if wanted.len() < 2 {
            return Ok(());
        }
        let mut loaded = 0u64;
        for batch in wanted.chunks(4 * rayon::current_num_threads().max(1)) {
            if loaded >= self.caches.indexes.budget() / 2 {
                break;
            }
            loaded += batch
                .par_iter()
                .map(|&i| self.slab_index(&self.manifest.slabs[i]).map(|ix| ix.heap_bytes()))
                .sum::<Result<u64>>()?;
        }
        Ok(())
    }

    /// Every slab's index, in manifest order, the first ones loaded side by side (see
    /// `load_indexes`): what the summaries over a whole store read.
    /// Each is loaded as the walk comes to it, and may be dropped after (see
    /// `INDEXES_KEPT_BYTES`).
    pub fn slab_indexes(&self) -> Result<impl Iterator<Item = Result<Arc<SlabIndex>>> + '_> {
        self.load_indexes(0..self.manifest.slabs.len())?;
        Ok(self.manifest.slabs.iter().map(|s| self.slab_index(s)))
    }

    /// Slab indexes kept loaded, and their bytes (see [`SlabIndex::heap_bytes`]).
    #[cfg(test)]
    pub(crate) fn indexes_kept(&self) -> (usize, u64) {
        self.caches.indexes.kept()
    }

    /// Loads (once) and checks a slab's index file.
    pub fn slab_index(&self, slab: &Slab) -> Result<Arc<SlabIndex>> {
        if let Some(ix) = self.caches.indexes.get(&(self.key, slab.id)) {
            return Ok(ix);
        }
        let storage = self.store.storage();
        let what = format!("index file {}", slab.index);
        let size = self.manifest.files.iter().find(|f| f.path == slab.index).map(|f| f.size);
        self.counters.index_loads.fetch_add(1, Ordering::Relaxed);
        let mut opened = None;
        if let Some(size) = size.filter(|&n| n > WHOLE_INDEX_BYTES) {
            let on_disk = storage.size(&slab.index).map_err(|e| missing_is_corruption(e, &slab.index))?;
            if on_disk != size {
                return Err(Error::Corruption(format!("{what} has {on_disk} bytes, the manifest says {size}")));
            }
            opened = crate::index_frames::open(storage.as_ref(), &slab.index, size, &what)?;
        }
        let in_place = self.is_in_place(slab);
        let (data, frames, aside) = match opened {
            Some(o) => (o.data, Some(o.frames), None),
            None => {
                let bytes = storage.read(&slab.index).map_err(|e| missing_is_corruption(e, &slab.index))?;
                if let Some(size) = size.filter(|&n| n != bytes.len() as u64) {
                    return Err(Error::Corruption(format!(
                        "{what} has {} bytes, the manifest says {size}",
                        bytes.len()
                    )));
                }
                // In place, a bin's segment is the file's whole chunk: planning needs the
                // positions to size its bins, so they are read with the index.
                match in_place {
                    true => (index_file::decode(&bytes, &what)?, None, None),
                    false => {
                        let (data, aside) = index_file::decode_aside(&bytes, &what)?;
                        (data, None, aside)
                    }
                }
            }
        };
        if data.slab_id != slab.id {
            return Err(Error::Corruption(format!(
                "index file {} belongs to slab {}, not {}",
                slab.index, data.slab_id, slab.id
            )));
        }
        let data_size = self.manifest.files.iter().find(|f| f.path == slab.data).map(|f| f.size);
        // A file indexed in place has no strata header; its chunks may start anywhere.
        let first = if self.is_in_place(slab) { 0 } else { crate::data_file::HEADER_LEN };
        let mut segments = FxHashMap::with_capacity_and_hasher(data.segments.len(), Default::default());
        for s in data.segments {
            if s.key.var as usize >= self.manifest.variables.len() {
                return Err(Error::Corruption(format!("index file {} names variable #{}", slab.index, s.key.var)));
            }
            // Every segment must lie inside its data file, after the header.
            let end = s.offset.checked_add(s.length);
            let inside = s.offset >= first && end.is_some_and(|e| data_size.is_none_or(|n| e <= n));
            if !inside {
                return Err(Error::Corruption(format!(
                    "index file {}: segment {:?} at {}+{} lies outside data file {}",
                    slab.index, s.key, s.offset, s.length, slab.data
                )));
            }
            if segments.insert(s.key, s).is_some() {
                return Err(Error::Corruption(format!("index file {} lists segment {:?} twice", slab.index, s.key)));
            }
        }
        let bins = data.bins.into_iter().map(|b| (b.var, b)).collect();
        let mut totals: FxHashMap<SubchunkId, Vec<(u64, u32)>> = FxHashMap::default();
        for s in segments.values() {
            let t = totals.entry((s.key.var, s.key.chunk, s.key.subchunk)).or_default();
            let g = s.key.group as usize;
            if t.len() <= g {
                t.resize(g + 1, (0, 0));
            }
            t[g].0 += s.length;
            t[g].1 += 1;
        }
        let stats = match (frames.is_some() || aside.is_some()) && !in_place {
            true => Some(self.bin_stats_of(&segments, &bins, &slab.index)?),
            false => None,
        };
        let parts = match (frames, aside) {
            (Some(frames), _) => Some(Parts::Frames(frames)),
            (None, Some(section)) => Some(Parts::Section(section)),
            (None, None) => None,
        };
        let positions = match parts {
            Some(parts) => Positions::Lazy(LazyPositions {
                storage: storage.clone(),
                path: slab.index.clone(),
                parts,
                slab: (self.key, slab.id),
                cache: self.caches.frames.clone(),
            }),
            None => Positions::Whole(Arc::new(bin_entries(data.bitmaps, &segments, &slab.index)?)),
        };
        let ix = Arc::new(SlabIndex { segments, positions, bins, totals, stats });
        self.caches.indexes.put((self.key, slab.id), ix.clone(), ix.heap_bytes());
        Ok(ix)
    }

    /// Each sub-chunk's bins from its group-0 segments: a bin's elements are its segment's
    /// raw length over group 0's width (the element's under no level M).
    fn bin_stats_of(
        &self,
        segments: &FxHashMap<SegmentKey, SegmentEntry>,
        binned: &FxHashMap<u32, BinSummary>,
        path: &str,
    ) -> Result<FxHashMap<SubchunkId, Vec<BinStat>>> {
        let mut widths: FxHashMap<u32, u64> = FxHashMap::default();
        let mut stats: FxHashMap<SubchunkId, Vec<BinStat>> = FxHashMap::default();
        for e in segments.values().filter(|e| e.key.group == 0 && binned.contains_key(&e.key.var)) {
            let k = e.key;
            let width = match widths.get(&k.var) {
                Some(&w) => w,
                None => {
                    let var = &self.manifest.variables[k.var as usize];
                    let groups = precision::byte_groups(&self.manifest.layout, var)?;
                    let w = precision::widths_read(groups.as_deref(), Some(1), var.dtype.size())[0] as u64;
                    widths.insert(k.var, w);
                    w
                }
            };
            if width == 0 || e.raw_length % width != 0 {
                return Err(Error::Corruption(format!(
                    "index file {path}: segment {k:?} holds {} bytes, not whole elements of {width}",
                    e.raw_length
                )));
            }
            let stat = BinStat { bin: k.bin, len: e.raw_length / width, count: e.count, min: e.min, max: e.max };
            stats.entry((k.var, k.chunk, k.subchunk)).or_default().push(stat);
        }
        for list in stats.values_mut() {
            list.sort_unstable_by_key(|s| s.bin);
        }
        Ok(stats)
    }
}
