//! The read path: map a selection to the sub-chunks it touches, read them with coalesced
//! range reads, decode in parallel, and scatter the selected elements into the output.

use crate::bins::{self, BinSummary};
use crate::cache::{SegmentCache, DEFAULT_CACHE_BYTES};
use crate::error::{Error, Result};
use crate::fxhash::FxHashMap;
use crate::grid::{axis_blocks, copy_block_raw, ravel, subchunk_grid, unravel, AxisBlock, AxisSelection};
use crate::index_file;
use crate::index_frames::Frames;
use crate::kept::Kept;
use crate::manifest::{Manifest, Slab, Variable};
use crate::precision;
use crate::segment::{SegmentEntry, SegmentKey};
use crate::store::Store;
use rayon::prelude::*;
use roaring::RoaringBitmap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use strata_codecs::{registry, CodecChain, ElementContext};

/// Reads separated by less than this are merged into one (fewer requests, a little waste).
const COALESCE_GAP: u64 = 64 << 10;
/// A merged read never grows past this.
const COALESCE_MAX: u64 = 16 << 20;
/// Reads decoding at most this many bytes run on the calling thread.
const SEQUENTIAL_BYTES: u64 = 256 << 10;
/// Raw bytes of sub-chunks per batch when a read overlaps fetching with decoding: the
/// first batch's fetch and the last one's decode are not overlapped, so batches are small
/// against a large read, and large enough that each fetch coalesces its ranges.
const OVERLAP_BATCH_BYTES: u64 = 2 << 20;
/// Range reads in flight at once for one fetch: enough to hide a storage's latency.
const IO_THREADS: usize = 4;
/// How many batches the reads may run ahead of decoding (bounds the bytes held).
const PREFETCH_BATCHES: usize = 2;

/// Which runs of a streaming fetch have arrived, and the first error; readers and the
/// consumer wait on it.
#[derive(Default)]
struct Progress {
    state: std::sync::Mutex<ProgressState>,
    changed: std::sync::Condvar,
}

#[derive(Default)]
struct ProgressState {
    arrived: Vec<bool>,
    /// Runs 0..contiguous have all arrived.
    contiguous: usize,
    completed: usize,
    /// The first read error.
    error: Option<Error>,
    /// The consumer gave up: readers stop.
    stopped: bool,
}

impl Progress {
    fn lock(&self) -> std::sync::MutexGuard<'_, ProgressState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn done(&self, i: usize) {
        let mut s = self.lock();
        if s.arrived.len() <= i {
            s.arrived.resize(i + 1, false);
        }
        s.arrived[i] = true;
        s.completed += 1;
        while s.arrived.get(s.contiguous) == Some(&true) {
            s.contiguous += 1;
        }
        drop(s);
        self.changed.notify_all();
    }

    fn fail(&self, e: Error) {
        let mut s = self.lock();
        s.error.get_or_insert(e);
        drop(s);
        self.changed.notify_all();
    }

    /// Tells waiting readers to look again. Taking the lock first means a reader between
    /// its check and its wait cannot miss the news.
    fn wake(&self) {
        drop(self.lock());
        self.changed.notify_all();
    }

    fn stop(&self) {
        self.lock().stopped = true;
        self.changed.notify_all();
    }

    fn completed(&self) -> usize {
        self.lock().completed
    }

    /// The first error, taken (later calls see none).
    fn check(&self) -> Result<()> {
        match self.lock().error.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Waits until `ready()` or an error; false on an error (the reader should stop).
    fn wait_for(&self, ready: impl Fn() -> bool) -> bool {
        let mut s = self.lock();
        loop {
            if s.error.is_some() || s.stopped {
                return false;
            }
            if ready() {
                return true;
            }
            s = self.changed.wait(s).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Waits until runs 0..n have all arrived: false if a read failed first (the error
    /// stays for [`check`](Self::check)).
    fn until_contiguous(&self, n: usize) -> bool {
        let mut s = self.lock();
        while s.contiguous < n {
            if s.error.is_some() {
                return false;
            }
            s = self.changed.wait(s).unwrap_or_else(|p| p.into_inner());
        }
        true
    }
}

/// Selection along one dimension: `start, start+step, ... < stop`.
pub type DimSelection = AxisSelection;

/// (variable, chunk, sub-chunk): one sub-chunk of one variable in a slab.
pub type SubchunkId = (u32, u64, u32);

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
enum Positions {
    Whole(Arc<BinMap>),
    Lazy(LazyPositions),
}

/// Positions left in their index file, read a part at a time: a frame (the one holding a
/// sub-chunk), or the whole positions section of a file small enough to be read whole.
struct LazyPositions {
    storage: Arc<dyn crate::storage::Storage>,
    path: String,
    parts: Parts,
    /// The reader's number (see [`ReaderCaches`]) and the slab's id.
    slab: (u64, u64),
    cache: Arc<FrameCache>,
}

enum Parts {
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
    segments: Arc<SegmentCache>,
    indexes: Arc<IndexCache>,
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
static NEXT_READER: AtomicU64 = AtomicU64::new(1);

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

/// One sub-chunk to decode (one segment, or one per byte group read) and where its
/// selected elements go.
struct Task {
    slab: usize,
    index: Arc<SlabIndex>,
    id: SubchunkId,
    reads: Vec<BinRead>,
    blocks: Vec<AxisBlock>,
}

/// Data-file bytes fetched as coalesced runs, handed out per segment with its CRC checked.
/// Runs fill in as they arrive (a streaming read hands out segments of the runs it has).
pub(crate) struct Fetched<'a> {
    manifest: &'a Manifest,
    runs: Vec<(usize, u64, u64)>,
    bytes: Vec<std::sync::OnceLock<Vec<u8>>>,
}

impl<'a> Fetched<'a> {
    fn new(manifest: &'a Manifest, runs: Vec<(usize, u64, u64)>) -> Self {
        let bytes = runs.iter().map(|_| std::sync::OnceLock::new()).collect();
        Self { manifest, runs, bytes }
    }

    /// The run holding the segment at `offset` of slab `slab`'s data file.
    fn run_of(&self, slab: usize, offset: u64) -> usize {
        self.runs.partition_point(|run| (run.0, run.1) <= (slab, offset)).saturating_sub(1)
    }

    pub(crate) fn get(&self, slab: usize, e: &SegmentEntry) -> Result<&[u8]> {
        let r = self.run_of(slab, e.offset);
        let lo = (e.offset - self.runs[r].1) as usize;
        let run = self.bytes[r]
            .get()
            .ok_or_else(|| Error::Corruption(format!("segment at offset {} was not fetched", e.offset)))?;
        let bytes = &run[lo..lo + e.length as usize];
        if crc32c::crc32c(bytes) != e.checksum {
            let path = &self.manifest.slabs[slab].data;
            return Err(Error::Corruption(format!("segment at {path}:{} fails its checksum", e.offset)));
        }
        Ok(bytes)
    }
}

pub(crate) struct SendPtr(*mut u8);
// SAFETY: tasks write disjoint parts of the output buffer (each output element belongs to
// exactly one sub-chunk), and the buffer outlives the parallel loop.
unsafe impl Send for SendPtr {}
unsafe impl Sync for SendPtr {}

impl SendPtr {
    pub(crate) fn new(p: *mut u8) -> Self {
        Self(p)
    }

    // A method, so closures capture the whole wrapper rather than its raw-pointer field.
    pub(crate) fn get(&self) -> *mut u8 {
        self.0
    }
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
        self.execute(var_idx, &tasks, split.as_ref(), &out_shape, out)?;
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
        let fetched = self.fetch_streamed(entries)?;
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

    /// The coalesced range reads that fetch the given segments, in file order.
    fn runs_of<'a>(segments: impl Iterator<Item = (usize, &'a SegmentEntry)>) -> Vec<(usize, u64, u64)> {
        let mut wanted: Vec<(usize, u64, u64)> =
            segments.map(|(slab, e)| (slab, e.offset, e.offset + e.length)).collect();
        wanted.sort_unstable();
        let mut runs: Vec<(usize, u64, u64)> = Vec::new(); // slab, start, end
        for (slab, start, end) in wanted {
            if let Some(last) = runs.last_mut() {
                if last.0 == slab && start >= last.1 && start <= last.2 + COALESCE_GAP && end - last.1 <= COALESCE_MAX {
                    last.2 = last.2.max(end);
                    continue;
                }
            }
            runs.push((slab, start, end));
        }
        runs
    }

    /// Checks a data file's header (magic, version, slab id) the first time a read needs
    /// the file: a file swapped or overwritten is found even where its segments' checksums
    /// happen to hold.
    pub(crate) fn check_data_header(&self, slab: usize) -> Result<()> {
        if self.header_checked[slab].get().is_some() {
            return Ok(());
        }
        let s = &self.manifest.slabs[slab];
        let path = s.data.as_str();
        if self.is_in_place(s) {
            self.check_in_place(path)?;
            let _ = self.header_checked[slab].set(());
            return Ok(());
        }
        let h = self
            .store
            .storage()
            .read_range(path, 0, crate::data_file::HEADER_LEN)
            .map_err(|e| missing_is_corruption(e, path))?;
        crate::data_file::check_header(&h, s.id).map_err(|why| Error::Corruption(format!("'{path}': {why}")))?;
        let _ = self.header_checked[slab].set(());
        Ok(())
    }

    /// A file indexed in place must still be the file that was indexed: the same size, and
    /// the same modification time or else (a copy) the same checksum over the whole file.
    /// Bytes that change without either (damage on disk) are found by each chunk's checksum.
    fn check_in_place(&self, path: &str) -> Result<()> {
        let Some(entry) = self.manifest.files.iter().find(|f| f.path == path) else { return Ok(()) };
        let beside = self.store.beside()?;
        let size = beside.size(path).map_err(|e| match e {
            Error::NotFound(_) => Error::Corruption(format!("'{path}', indexed in place, is missing")),
            other => other,
        })?;
        let changed = |why: String| {
            Error::Corruption(format!("'{path}' has changed since it was indexed ({why}): index it again"))
        };
        if size != entry.size {
            return Err(changed(format!("{size} bytes, the index says {}", entry.size)));
        }
        let modified = beside.modified_ns(path)?;
        if entry.modified_ns.is_some()
            && modified != entry.modified_ns
            && crate::in_place::file_crc(&**beside, path, size)? != entry.crc32c
        {
            return Err(changed("it was modified and its checksum differs".into()));
        }
        Ok(())
    }

    /// Whether `slab` lies in a file indexed in place: its segments are whole sub-chunks
    /// (the file's chunks), and under level V every bin of a sub-chunk names the whole
    /// sub-chunk, the bin's values being the sub-chunk's at the bin's positions.
    pub(crate) fn is_in_place(&self, slab: &Slab) -> bool {
        self.source.as_deref() == Some(slab.data.as_str())
    }

    /// The storage holding slab `slab`'s data file.
    pub(crate) fn data_storage(&self, slab: usize) -> Result<&Arc<dyn crate::storage::Storage>> {
        if self.is_in_place(&self.manifest.slabs[slab]) {
            self.store.beside()
        } else {
            Ok(self.store.storage())
        }
    }

    fn read_run(&self, &(slab, start, end): &(usize, u64, u64)) -> Result<Vec<u8>> {
        self.check_data_header(slab)?;
        let path = self.manifest.slabs[slab].data.as_str();
        let bytes = self
            .data_storage(slab)?
            .read_range(path, start, end - start)
            .map_err(|e| missing_is_corruption(e, path))?;
        self.counters.requests.fetch_add(1, Ordering::Relaxed);
        self.counters.bytes_read.fetch_add(end - start, Ordering::Relaxed);
        Ok(bytes)
    }

    /// Fetches the given segments with coalesced range reads, in file order (`parallel`:
    /// on the pool, whose threads are already awake: what small reads need).
    pub(crate) fn fetch<'a>(
        &'a self,
        segments: impl Iterator<Item = (usize, &'a SegmentEntry)>,
        parallel: bool,
    ) -> Result<Fetched<'a>> {
        let fetched = Fetched::new(&self.manifest, Self::runs_of(segments));
        let read = |i: usize| -> Result<()> {
            let bytes = self.read_run(&fetched.runs[i])?;
            let _ = fetched.bytes[i].set(bytes);
            Ok(())
        };
        if parallel {
            (0..fetched.runs.len()).into_par_iter().try_for_each(read)?;
        } else {
            (0..fetched.runs.len()).try_for_each(read)?;
        }
        Ok(fetched)
    }

    /// Like [`fetch`](Self::fetch), with [`IO_THREADS`] reads in flight on threads of their
    /// own: what large reads use, overlapped with decoding or not.
    fn fetch_streamed<'a>(&'a self, segments: impl Iterator<Item = (usize, &'a SegmentEntry)>) -> Result<Fetched<'a>> {
        let fetched = Fetched::new(&self.manifest, Self::runs_of(segments));
        self.stream(&fetched, IO_THREADS, &|_| true)?;
        Ok(fetched)
    }

    /// Reads every run of `fetched`, in file order, with up to `threads` range reads in
    /// flight (on threads of their own: reads wait on storage, not the CPU, and must not
    /// hold up the decoding pool). `may_read(i)` holds a reader back from run `i` until it
    /// is true (re-checked whenever a run completes or [`Progress::wake`] is called).
    fn stream(&self, fetched: &Fetched, threads: usize, may_read: &(dyn Fn(usize) -> bool + Sync)) -> Result<()> {
        let progress = Progress::default();
        let n = fetched.runs.len();
        // The consumer waits for every run (a read error is reported by `stream_with`).
        self.stream_with(fetched, threads, may_read, &progress, || {
            progress.until_contiguous(n);
            Ok(())
        })
    }

    /// [`stream`](Self::stream), running `consume` on the calling thread meanwhile; the
    /// first error of either stops both.
    fn stream_with(
        &self,
        fetched: &Fetched,
        threads: usize,
        may_read: &(dyn Fn(usize) -> bool + Sync),
        progress: &Progress,
        consume: impl FnOnce() -> Result<()>,
    ) -> Result<()> {
        let n = fetched.runs.len();
        let next = std::sync::atomic::AtomicUsize::new(0);
        let worker = || loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            if i >= n || !progress.wait_for(|| may_read(i)) {
                return;
            }
            match self.read_run(&fetched.runs[i]) {
                Ok(bytes) => {
                    let _ = fetched.bytes[i].set(bytes);
                    progress.done(i);
                }
                Err(e) => progress.fail(e),
            }
        };
        let threads = threads.clamp(1, n.max(1));
        let consumed = if threads == 1 {
            // No thread to hand out: read everything, then consume.
            worker();
            progress.check()?;
            consume()
        } else {
            std::thread::scope(|scope| {
                for _ in 0..threads {
                    scope.spawn(worker);
                }
                let r = consume();
                // Readers waiting for room must not wait for a consumer that is gone.
                progress.stop();
                r
            })
        };
        // A read error explains a consumer that stopped early: it comes first.
        progress.check()?;
        consumed?;
        if progress.completed() < n {
            return Err(Error::Corruption("a range read was lost (a reader thread panicked)".into()));
        }
        Ok(())
    }

    /// Decodes the bins of one sub-chunk of `shape` into its raw bytes (C order). Without
    /// level V the one read is the whole sub-chunk and its decoded bytes are returned as
    /// they are; with it, each bin's values go to its positions, and elements of bins not
    /// read are zero. `split`: the variable's byte groups and how many of them were read.
    pub(crate) fn decode_subchunk(
        &self,
        (slab, index, id): (usize, &SlabIndex, SubchunkId),
        reads: &[BinRead],
        shape: &[usize],
        split: Option<&(Vec<usize>, usize)>,
        fetched: &Fetched,
    ) -> Result<Vec<u8>> {
        let bins = index.bins_of(id)?;
        if bins.is_none() || self.is_in_place(&self.manifest.slabs[slab]) {
            // One segment holds the whole sub-chunk (in place: every bin names it).
            if let Some(r) = reads.first() {
                return self.decode_bin((slab, id), r, shape, split, fetched);
            }
        }
        let es = self.manifest.variables[id.0 as usize].dtype.size();
        let mut out = vec![0u8; shape.iter().product::<usize>() * es];
        for r in reads {
            let bins = bins
                .as_ref()
                .ok_or_else(|| Error::Corruption(format!("sub-chunk {id:?} has several segments but no bins")))?;
            let p = bins.positions(r.bin)?;
            let values = self.decode_bin((slab, id), r, &[p.len() as usize], split, fetched)?;
            bins::scatter(&values, p, es, &mut out);
        }
        Ok(out)
    }

    /// Decodes one bin's segments (one per byte group read) into its values, in position
    /// order; `shape` is the segment's shape (`[n]` for a bin, the sub-chunk's without V).
    pub(crate) fn decode_bin(
        &self,
        (slab, id): (usize, SubchunkId),
        r: &BinRead,
        shape: &[usize],
        split: Option<&(Vec<usize>, usize)>,
        fetched: &Fetched,
    ) -> Result<Vec<u8>> {
        let var_idx = id.0 as usize;
        let dtype = self.manifest.variables[var_idx].dtype;
        let chains = &self.chains[var_idx];
        let n = shape.iter().product::<usize>();
        self.counters.segments_decoded.fetch_add(r.entries.len() as u64, Ordering::Relaxed);
        match split {
            None => {
                let e = &r.entries[0];
                Ok(chains[e.codec as usize].decode(fetched.get(slab, e)?, e.raw_length as usize, shape)?)
            }
            Some((groups, _)) => {
                let mut parts = Vec::with_capacity(r.entries.len());
                for (e, &w) in r.entries.iter().zip(groups) {
                    let group_shape = [vec![w], shape.to_vec()].concat();
                    parts.push(chains[e.codec as usize].decode(
                        fetched.get(slab, e)?,
                        e.raw_length as usize,
                        &group_shape,
                    )?);
                }
                let refs: Vec<&[u8]> = parts.iter().map(|p| &p[..]).collect();
                let mut values = vec![0u8; n * dtype.size()];
                precision::assemble(&refs, n, dtype, groups, &mut values);
                Ok(values)
            }
        }
    }

    /// `split`: the variable's byte groups and how many of them the tasks read.
    fn execute(
        &self,
        var_idx: usize,
        tasks: &[Task],
        split: Option<&(Vec<usize>, usize)>,
        out_shape: &[u64],
        out: &mut [u8],
    ) -> Result<()> {
        let dtype = self.manifest.variables[var_idx].dtype;
        let es = dtype.size();
        let out_len = out.len();
        let out_ptr = SendPtr(out.as_mut_ptr());
        let scatter = |t: &Task, raw: &[u8]| {
            let src_shape: Vec<u64> = t.blocks.iter().map(|b| b.len).collect();
            let src_start: Vec<u64> = t.blocks.iter().map(|b| b.first).collect();
            let count: Vec<u64> = t.blocks.iter().map(|b| b.count).collect();
            let dst_start: Vec<u64> = t.blocks.iter().map(|b| b.out).collect();
            let steps: Vec<u64> = t.blocks.iter().map(|b| b.step).collect();
            // SAFETY: see `SendPtr`: the buffer is `out_len` bytes and this task's elements
            // are written by no other task.
            unsafe {
                copy_block_raw(
                    raw,
                    &src_shape,
                    &src_start,
                    &steps,
                    out_ptr.get(),
                    out_len,
                    out_shape,
                    &dst_start,
                    &count,
                    es,
                )
            };
        };
        let level = split.map_or(0, |(_, k)| *k as u8);
        let segment_id = |t: &Task| (self.key, self.manifest.slabs[t.slab].id, t.id, level);
        // Sub-chunks already decoded are served from the cache; only the rest are read.
        let mut pending = Vec::with_capacity(tasks.len());
        for (i, t) in tasks.iter().enumerate() {
            match self.caches.segments.get(segment_id(t)) {
                Some(raw) => {
                    self.counters.cache_hits.fetch_add(1, Ordering::Relaxed);
                    scatter(t, &raw);
                }
                None => pending.push(i),
            }
        }
        // Handing work to the thread pool costs tens of microseconds of wake-up: small reads
        // run on the caller's thread, larger ones fan out.
        let entries = || {
            pending.iter().flat_map(|&i| {
                tasks[i].reads.iter().flat_map(move |r| r.entries.iter().map(move |e| (tasks[i].slab, e)))
            })
        };
        let raw_total: u64 = entries().map(|(_, e)| e.raw_length).sum();
        let parallel = raw_total > SEQUENTIAL_BYTES;
        let decode = |i: usize, fetched: &Fetched| -> Result<()> {
            let t = &tasks[i];
            let shape: Vec<usize> = t.blocks.iter().map(|b| b.len as usize).collect();
            let raw = self.decode_subchunk((t.slab, &t.index, t.id), &t.reads, &shape, split, fetched)?;
            scatter(t, &raw);
            if self.caches.segments.capacity() > 0 {
                self.caches.segments.insert(segment_id(t), Arc::new(raw));
            }
            Ok(())
        };
        let decode_all = |batch: &[usize], fetched: &Fetched| -> Result<()> {
            if parallel {
                batch.par_iter().try_for_each(|&i| decode(i, fetched))
            } else {
                batch.iter().try_for_each(|&i| decode(i, fetched))
            }
        };
        if raw_total < 2 * OVERLAP_BATCH_BYTES {
            let fetched = self.fetch(entries(), parallel)?;
            return decode_all(&pending, &fetched);
        }
        if !self.overlap.load(Ordering::Relaxed) {
            let fetched = self.fetch_streamed(entries())?;
            return decode_all(&pending, &fetched);
        }
        // PStore's prefetch: the range reads stream in file order on I/O threads, at most
        // PREFETCH_BATCHES batches ahead, while the pool decodes each batch as soon as its
        // runs are in; a slow read path then costs about max(read, decode), not their sum.
        let mut batches: Vec<&[usize]> = Vec::new();
        let (mut from, mut bytes) = (0, 0u64);
        for (k, &i) in pending.iter().enumerate() {
            bytes += tasks[i].reads.iter().flat_map(|r| &r.entries).map(|e| e.raw_length).sum::<u64>();
            if bytes >= OVERLAP_BATCH_BYTES || k + 1 == pending.len() {
                batches.push(&pending[from..=k]);
                (from, bytes) = (k + 1, 0);
            }
        }
        let fetched = Fetched::new(&self.manifest, Self::runs_of(entries()));
        // The last run each batch needs (a running maximum: runs arrive in order).
        let mut need = Vec::with_capacity(batches.len());
        for b in &batches {
            let last = b
                .iter()
                .flat_map(|&i| {
                    tasks[i].reads.iter().flat_map(move |r| r.entries.iter().map(move |e| (tasks[i].slab, e)))
                })
                .map(|(slab, e)| fetched.run_of(slab, e.offset))
                .max()
                .unwrap_or(0);
            need.push(need.last().map_or(last, |&m: &usize| m.max(last)));
        }
        let decoding = std::sync::atomic::AtomicUsize::new(0);
        let may_read = |run: usize| {
            let k = decoding.load(Ordering::Relaxed);
            run <= need[(k + PREFETCH_BATCHES).min(need.len() - 1)]
        };
        let progress = Progress::default();
        self.stream_with(&fetched, IO_THREADS, &may_read, &progress, || {
            for (k, batch) in batches.iter().enumerate() {
                if !progress.until_contiguous(need[k] + 1) {
                    return Ok(()); // the read error is reported by `stream_with`
                }
                decode_all(batch, &fetched)?;
                decoding.store(k + 1, Ordering::Relaxed);
                progress.wake();
            }
            Ok(())
        })
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
