//! The write path: slabs are chunked, compressed in parallel and ordered in memory, then
//! written as one data file and one index file each; `commit` publishes a new version.

use crate::bins::{BinRule, BinSummary, Bins};
use crate::chunking::{
    auto_alternative, piece_shape, subchunk_target, ShapeRule, DEFAULT_BINNED_SUBCHUNK_BYTES, DEFAULT_CHUNK_BYTES,
    DEFAULT_SLAB_BYTES, DEFAULT_SUBCHUNK_BYTES,
};
use crate::data_file;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::grid::{chunk_grid, chunks_touched, copy_block, subchunk_grid, unravel};
use crate::hilbert;
use crate::index_file::{self, BinPositions, SlabIndexData};
use crate::index_frames::{self, PackedPositions, FRAME_RAW_BYTES};
use crate::manifest::{
    Attribute, Chunking, Dim, FileEntry, Layout, Level, Manifest, RawJson, Slab, Variable, FORMAT_NAME, FORMAT_VERSION,
};
use crate::precision;
use crate::sampling::{self, REFINE_SAMPLES};
use crate::segment::{layout_key, SegmentEntry, SegmentKey};
use crate::spill::{Spill, Spilled, SPILL_AT_BYTES};
use crate::storage::Storage;
use crate::store::{now_ms, random_suffix, Store};
use crate::write_config::WriteConfig;
use rayon::prelude::*;
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use strata_codecs::analyzer::{Objective, Sample};
use strata_codecs::plan::{self as codec_plan, CodecRequest, PLAN_MIN_BYTES};
use strata_codecs::{registry, CodecChain, CodecSpec, ElementContext};

/// What a front-end describes when it creates a store. Sizes of the record dimension are a
/// hint for chunk planning (records arrive through slabs).
#[derive(Debug, Clone, Deserialize)]
pub struct DatasetSchema {
    pub dims: Vec<Dim>,
    #[serde(default)]
    pub record_dim: Option<String>,
    #[serde(default)]
    pub attrs: Vec<Attribute>,
    pub variables: Vec<VariableSchema>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct VariableSchema {
    pub name: String,
    pub dtype: DType,
    pub dims: Vec<String>,
    #[serde(default)]
    pub attrs: Vec<Attribute>,
    #[serde(default)]
    pub inline_strings: Option<Vec<String>>,
}

/// What the user asks for; resolved into chunk shapes and codec chains stored in the manifest.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WriterOptions {
    /// Codec chain, e.g. `shuffle+zstd:3` (the default).
    #[serde(default)]
    pub codec: Option<String>,
    /// Chunk length per dimension name; other dimensions follow the automatic rule.
    #[serde(default)]
    pub chunks: BTreeMap<String, u64>,
    #[serde(default)]
    pub subchunks: BTreeMap<String, u64>,
    /// How automatic chunk and sub-chunk shapes are cut (default [`ShapeRule::Auto`]).
    #[serde(default)]
    pub shape_rule: Option<ShapeRule>,
    #[serde(default)]
    pub chunk_bytes: Option<u64>,
    #[serde(default)]
    pub subchunk_bytes: Option<u64>,
    #[serde(default)]
    pub slab_bytes: Option<u64>,
    #[serde(default)]
    pub slab_records: Option<u64>,
    /// Level V: a slab's positions larger than this (raw bytes) are written in frames of
    /// about this size that readers load on demand (default [`FRAME_RAW_BYTES`]).
    #[serde(default)]
    pub index_frame_bytes: Option<u64>,
    #[serde(default)]
    pub layout: Option<String>,
    /// Level V binning: `equal-width`, `equal-frequency` or comma-separated boundaries.
    #[serde(default)]
    pub binning: Option<String>,
    /// Number of bins for `equal-width` and `equal-frequency` (default 16).
    #[serde(default)]
    pub bins: Option<u32>,
    /// Byte groups per float type for level M (`{"f64": [2,1,1,1,1,1,1]}`); defaults otherwise.
    #[serde(default)]
    pub byte_groups: BTreeMap<String, Vec<usize>>,
    /// Codec chain per variable name (overrides `codec` for that variable).
    #[serde(default)]
    pub variable_codecs: BTreeMap<String, String>,
    /// The analyzer's record per variable, stored as the variable's `plan`.
    #[serde(default)]
    pub plans: BTreeMap<String, serde_json::Value>,
    /// What to do for variables without a chain in `variable_codecs`, instead of `codec`:
    /// `auto` plans each variable of at least [`PLAN_MIN_BYTES`] from its first data (the
    /// sample rule of [`sampling`]) and records the plan; smaller ones get the default chain.
    /// When appending, `auto` names the objective later checks use.
    #[serde(default)]
    pub request: Option<CodecRequest>,
    /// When appending: check each planned record variable's chain on the new data, and
    /// switch new slabs to a clearly better one (see [`codec_plan::recheck`]).
    #[serde(default)]
    pub recheck: bool,
    /// A request per variable name (a chain, or `auto` with its own objective and bound),
    /// from a configuration file; `variable_codecs` wins over it.
    #[serde(default)]
    pub variable_requests: BTreeMap<String, CodecRequest>,
    /// Chunk and sub-chunk lengths per variable name, then per dimension name (over `chunks`).
    #[serde(default)]
    pub variable_chunks: BTreeMap<String, BTreeMap<String, u64>>,
    #[serde(default)]
    pub variable_subchunks: BTreeMap<String, BTreeMap<String, u64>>,
    /// A configuration file ([`WriteConfig`]) filling what these options leave unset; when
    /// absent, the file `STRATA_CONFIG` names, if any.
    #[serde(default)]
    pub config: Option<String>,
    /// Parallel writers: where the writers' blocks meet, per dimension name (interior cut
    /// points). Chunks are cut to fit, so that every chunk lies in one writer's block.
    #[serde(default)]
    pub decomposition: BTreeMap<String, Vec<u64>>,
}

/// The part of the dimensions one parallel writer holds: `[start, stop)` per dimension
/// name; dimensions not named are whole. The record dimension is never cut (every writer
/// writes every record of its block).
pub type Block = BTreeMap<String, [u64; 2]>;

/// Whether the writer of `block` writes `var`: a variable that does not vary along a cut
/// dimension belongs to the writer whose block starts at 0 along it (one writer per chunk).
pub(crate) fn block_holds(block: &Block, var: &Variable) -> bool {
    block.iter().all(|(d, r)| var.dims.contains(d) || r[0] == 0)
}

/// The box of `extent` (a shape of `var`) that `block` holds: its origin and shape.
pub(crate) fn block_window(block: &Block, var: &Variable, extent: &[u64]) -> (Vec<u64>, Vec<u64>) {
    let mut origin = vec![0; extent.len()];
    let mut shape = extent.to_vec();
    for (d, name) in var.dims.iter().enumerate() {
        if let Some(&[start, stop]) = block.get(name) {
            origin[d] = start;
            shape[d] = stop - start;
        }
    }
    (origin, shape)
}

/// The sub-chunk target of a layout: bins cut each sub-chunk into segments, so level V
/// keeps them larger.
fn default_subchunk_bytes(layout: &Layout) -> u64 {
    if layout.order.contains(&Level::V) {
        DEFAULT_BINNED_SUBCHUNK_BYTES
    } else {
        DEFAULT_SUBCHUNK_BYTES
    }
}

fn frame_bytes(options: &WriterOptions) -> usize {
    options.index_frame_bytes.map_or(FRAME_RAW_BYTES, |b| b.clamp(1, 1 << 32) as usize)
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

impl WriterOptions {
    /// These options with the configuration file's settings filled in (see [`WriteConfig`]).
    pub fn resolved(&self) -> Result<WriterOptions> {
        let config = match &self.config {
            Some(path) => Some(WriteConfig::load(std::path::Path::new(path))?),
            None => WriteConfig::from_env()?,
        };
        let mut out = self.clone();
        if let Some(c) = config {
            c.apply(&mut out)?;
        }
        Ok(out)
    }
}

/// A plan still to make, from the first data a variable receives in this writer.
#[derive(Debug, Clone)]
enum PendingPlan {
    Plan { objective: Objective, error_bound: Option<String> },
    Recheck { objective: Objective, error_bound: Option<String>, current: String },
}

/// The part of a stored plan record a later check needs (older records have more fields).
#[derive(Debug, Deserialize)]
struct PlanHead {
    objective: Option<Objective>,
    #[serde(default)]
    error_bound: Option<String>,
}

pub(crate) struct PendingSegment {
    pub(crate) key: SegmentKey,
    pub(crate) codec: u8,
    pub(crate) bytes: Vec<u8>,
    pub(crate) raw_length: u64,
    pub(crate) count: u64,
    pub(crate) min: f64,
    pub(crate) max: f64,
    /// Where the bytes went when the slab spilled (`bytes` is then empty).
    pub(crate) spilled: Option<Spilled>,
}

impl PendingSegment {
    /// The encoded length, in memory or spilled.
    pub(crate) fn length(&self) -> u64 {
        self.spilled.map_or(self.bytes.len() as u64, |p| p.length)
    }
}

impl std::fmt::Debug for PendingSegment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PendingSegment({:?}, {} bytes)", self.key, self.bytes.len())
    }
}

/// One bin's positions in a slab being written (level V), serialized: in memory, or in the
/// slab's spill once it is large (a slab's positions are about a quarter of its values).
pub(crate) struct PendingBitmap {
    pub(crate) packed: PackedPositions,
    /// Number of positions (for the slab's bin counts).
    pub(crate) len: u64,
    pub(crate) spilled: Option<Spilled>,
}

impl PendingBitmap {
    fn key(&self) -> (u32, u64, u32, u32) {
        let p = &self.packed;
        (p.var, p.chunk, p.subchunk, p.bin)
    }

    /// Its serialized length, in memory or spilled.
    fn length(&self) -> usize {
        self.spilled.map_or(self.packed.bytes.len(), |p| p.length as usize)
    }

    /// The packed positions, read back from `spill` if they went there.
    pub(crate) fn take(self, storage: &dyn Storage, spill: Option<&Spill>) -> Result<PackedPositions> {
        match (self.spilled, spill) {
            (None, _) => Ok(self.packed),
            (Some(p), Some(spill)) => Ok(PackedPositions { bytes: spill.read(storage, p)?, ..self.packed }),
            (Some(_), None) => Err(Error::InvalidArgument("positions spilled without a spill file".into())),
        }
    }

    pub(crate) fn new(b: &BinPositions) -> PendingBitmap {
        PendingBitmap { packed: PackedPositions::pack(b), len: b.positions.len(), spilled: None }
    }
}

pub(crate) struct SlabBuilder {
    pub(crate) id: u64,
    pub(crate) records: Option<[u64; 2]>,
    pub(crate) segments: Vec<PendingSegment>,
    pub(crate) bitmaps: Vec<PendingBitmap>,
    pub(crate) bins: Vec<BinSummary>,
    done: BTreeSet<usize>,
    /// Encoded bytes held in memory (the rest are in `spill`).
    held: u64,
    pub(crate) spill: Option<Spill>,
}

impl SlabBuilder {
    pub(crate) fn empty(id: u64, records: Option<[u64; 2]>) -> Self {
        Self::new(id, records)
    }

    fn new(id: u64, records: Option<[u64; 2]>) -> Self {
        Self {
            id,
            records,
            segments: vec![],
            bitmaps: vec![],
            bins: vec![],
            done: BTreeSet::new(),
            held: 0,
            spill: None,
        }
    }

    fn add(&mut self, part: EncodedPart) {
        self.held += part.segments.iter().map(|s| s.bytes.len() as u64).sum::<u64>();
        self.held += part.bitmaps.iter().map(|b| b.packed.bytes.len() as u64).sum::<u64>();
        self.segments.extend(part.segments);
        self.bitmaps.extend(part.bitmaps);
        // A variable written in pieces has one set of bins: its pieces' counts add up.
        if let Some(b) = part.bins {
            match self.bins.iter_mut().find(|a| a.var == b.var && a.boundaries == b.boundaries) {
                Some(a) => a.counts.iter_mut().zip(&b.counts).for_each(|(x, y)| *x += y),
                None => self.bins.push(b),
            }
        }
    }

    /// Moves the encoded bytes and positions held in memory to the spill file once they pass
    /// `limit`.
    fn spill_if_large(&mut self, storage: &dyn Storage, limit: u64) -> Result<()> {
        if self.held < limit {
            return Ok(());
        }
        let id = self.id;
        let spill = self.spill.get_or_insert_with(|| Spill::new(id));
        spill.take(storage, &mut self.segments)?;
        spill.take(storage, &mut self.bitmaps)?;
        self.held = 0;
        Ok(())
    }
}

/// A bin of a sub-chunk: its number, positions (level V only), bytes and segment shape.
type BinnedPart = (u32, Option<roaring::RoaringBitmap>, Vec<u8>, Vec<usize>);

/// One variable's share of a slab, encoded.
struct EncodedPart {
    segments: Vec<PendingSegment>,
    bitmaps: Vec<PendingBitmap>,
    bins: Option<BinSummary>,
}

/// The smallest block that blocks of `a` and of `b` both tile (each axis their least common
/// multiple), no larger than `extent`.
fn common_region(a: &[u64], b: &[u64], extent: &[u64]) -> Vec<u64> {
    a.iter()
        .zip(b)
        .zip(extent)
        .map(|((&x, &y), &e)| (x / gcd(x, y).max(1)).saturating_mul(y).clamp(1, e.max(1)))
        .collect()
}

/// Another sub-chunk shape a planned variable could be stored in; its plan measures both on
/// its first data and keeps the smaller (`strata_codecs::plan::SecondLook`).
#[derive(Debug, Clone)]
enum Alternative {
    /// The variable is compressed whole (`chunking::WHOLE_VARIABLE_BYTES`); these are the
    /// blocks it would otherwise get, which its plan samples.
    Blocks(Vec<u64>),
    /// The variable is one chunk in cube-like blocks; these are blocks of its proportions
    /// (`chunking::auto_alternative`).
    Shape(Vec<u64>),
}

#[derive(Debug)]
pub struct StoreWriter {
    store: Store,
    draft: Manifest,
    base_version: Option<u64>,
    /// Per variable: the position in its `codecs` used for new segments, and that chain.
    chains: Vec<Option<(u8, CodecChain)>>,
    /// Per variable: the plan its first data decides, if any.
    pending: Vec<Option<PendingPlan>>,
    /// Per variable: the other sub-chunk shape its plan compares against, if any (taken when
    /// the plan is made).
    alternatives: Vec<Option<Alternative>>,
    /// The record count the schema announced (None: unknown), for a variable's size.
    records_hint: Option<u64>,
    /// Level V's rule, when the layout has it.
    bin_rule: Option<BinRule>,
    static_slab: Option<SlabBuilderBox>,
    /// Static variables being written in blocks (`put_static_block`).
    static_blocks: HashMap<usize, StaticBlocks>,
    /// Encoded bytes the static slab holds in memory before it spills ([`SPILL_AT_BYTES`]).
    pub(crate) spill_at: u64,
    /// Level V: positions of a slab beyond this many raw bytes go in frames of about this
    /// size (`WriterOptions::index_frame_bytes`).
    frame_bytes: usize,
    open_slab: Option<SlabBuilderBox>,
    next_slab_id: u64,
    /// A parallel writer's block (None: the whole store).
    block: Option<Block>,
}

/// A static variable being written in blocks: the chunks written so far, and the bins its
/// first block resolved (one set of bins per variable and slab; None without level V).
#[derive(Debug)]
struct StaticBlocks {
    chunks: HashSet<u64>,
    bins: Option<Bins>,
}

/// Boxed so that `StoreWriter` can derive `Debug` without exposing segment bytes.
struct SlabBuilderBox(SlabBuilder);

impl std::fmt::Debug for SlabBuilderBox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SlabBuilder(id={}, segments={})", self.0.id, self.0.segments.len())
    }
}

fn parse_layout(text: &str) -> Result<Vec<Level>> {
    let mut order = Vec::new();
    for part in text.split('-') {
        let level = match part.trim() {
            "S" => Level::S,
            "V" => Level::V,
            "M" => Level::M,
            other => return Err(Error::InvalidArgument(format!("unknown layout level '{other}' (levels: S, V, M)"))),
        };
        if order.contains(&level) {
            return Err(Error::InvalidArgument(format!("layout '{text}' names {level:?} twice")));
        }
        order.push(level);
    }
    if !order.contains(&Level::S) {
        return Err(Error::InvalidArgument(format!("layout '{text}' must include S (space)")));
    }
    Ok(order)
}

/// Makes `specs` the chain new segments of `var` use. Positions are referenced by old
/// segments: chains are only ever added at the end, and the last one is what new segments use.
fn push_chain(var: &mut Variable, specs: Vec<CodecSpec>) -> Result<()> {
    if var.codecs.last() != Some(&specs) {
        if var.codecs.len() >= 255 {
            return Err(Error::InvalidArgument(format!("'{}' already has 255 codec chains", var.name)));
        }
        var.codecs.push(specs);
    }
    Ok(())
}

/// The chain new segments of `var` use: its last listed chain (appends add chains at the end).
fn build_chain(layout: &Layout, var: &Variable) -> Result<Option<(u8, CodecChain)>> {
    match (var.codecs.last(), precision::chain_type(layout, var)?) {
        (Some(specs), Some(t)) => {
            Ok(Some(((var.codecs.len() - 1) as u8, registry::chain(specs, ElementContext::new(t))?)))
        }
        _ => Ok(None),
    }
}

impl StoreWriter {
    /// Starts a new store. Nothing is visible until [`commit`](Self::commit).
    pub fn create(store: Store, schema: DatasetSchema, options: &WriterOptions) -> Result<Self> {
        Self::check_new(&store)?;
        Self::build(store, schema, &options.resolved()?)
    }

    /// One of several writers of a new store (see [`crate::parallel`]): the same draft as
    /// [`create`](Self::create) makes from the same schema and options, writing `block`.
    pub fn part(store: Store, schema: DatasetSchema, options: &WriterOptions, block: Block) -> Result<Self> {
        let mut w = Self::build(store, schema, &options.resolved()?)?;
        for (name, &[start, stop]) in &block {
            let dim = w.draft.dim(name).ok_or_else(|| {
                Error::InvalidArgument(format!("the block names dimension '{name}', which the store does not have"))
            })?;
            if w.draft.record_dim.as_deref() == Some(name.as_str()) {
                return Err(Error::InvalidArgument(format!(
                    "the record dimension '{name}' is not cut between writers: each writes every record of its block"
                )));
            }
            if start >= stop || stop > dim.size {
                return Err(Error::InvalidArgument(format!(
                    "block {name}=[{start}, {stop}) is empty or beyond the dimension's {}",
                    dim.size
                )));
            }
        }
        if w.bin_rule.as_ref().is_some_and(|r| !matches!(r, BinRule::Edges { .. })) {
            return Err(Error::InvalidArgument(
                "parallel writers under level V need bin boundaries given (binning = \"0,5,10\"): bins from a \
                 slab's values would differ between writers, each of whom sees only its block"
                    .into(),
            ));
        }
        w.block = Some(block);
        Ok(w)
    }

    fn check_new(store: &Store) -> Result<()> {
        let name = store.name();
        if name.trim().is_empty() {
            return Err(Error::InvalidArgument("a new store needs a path".into()));
        }
        if let Some((scheme, _)) = name.split_once("://") {
            if !scheme.is_empty() && scheme.chars().all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c)) {
                return Err(Error::InvalidArgument(format!(
                    "'{name}': URL scheme '{scheme}' is not supported yet; a store is a local directory"
                )));
            }
        }
        if store.exists()? {
            return Err(Error::InvalidArgument(format!("'{name}' already holds a strata store")));
        }
        // The top level first: a directory holding anything but a store's own parts is
        // refused without walking it (from `/` or a home directory, a walk would read the
        // whole tree and stop at the first unreadable place). Below a store's own parts,
        // what remains is empty directories of a store (left by `strata gc` after an
        // interrupted import, which do not count), the leftovers of an interrupted write,
        // or files no store write makes, which make it someone else's directory.
        let top = store.storage().top_level()?;
        if !top.iter().all(|n| crate::gc::is_store_part(n)) {
            return Err(Error::InvalidArgument(format!(
                "'{name}' is not empty and holds no strata store: write a new store into a new or empty directory"
            )));
        }
        let files = if top.is_empty() { vec![] } else { store.storage().list_for_gc("")? };
        // A file no store write makes (by its name), even under `data/`: not our leftovers,
        // and gc would not remove it.
        if let Some(other) = files.iter().find(|f| !crate::gc::is_store_file(&f.path)) {
            return Err(Error::InvalidArgument(format!(
                "'{name}' is not empty and holds no strata store ('{}' is not a store's file): write a new store \
                 into a new or empty directory",
                other.path
            )));
        }
        if !files.is_empty() {
            return Err(Error::InvalidArgument(format!(
                "'{name}' holds only the leftovers of an interrupted write ({} files, no version): if no other \
                 write is running, remove them with `strata gc --grace 0 {name}`",
                files.len()
            )));
        }
        Ok(())
    }

    /// The draft manifest and writer state that the schema and (resolved) options give.
    fn build(store: Store, schema: DatasetSchema, options: &WriterOptions) -> Result<Self> {
        let order = parse_layout(options.layout.as_deref().unwrap_or("S"))?;
        let mut layout = Layout { order, ..Layout::space_only() };
        if layout.order.contains(&Level::M) {
            let mut groups = serde_json::Map::new();
            for dtype in [DType::F32, DType::F64] {
                let g = match options.byte_groups.get(dtype.name()) {
                    Some(g) => g.clone(),
                    None => precision::default_groups(dtype).unwrap_or_default(),
                };
                precision::check_groups(dtype, &g)?;
                groups.insert(dtype.name().to_string(), serde_json::json!(g));
            }
            layout.byte_groups = Some(serde_json::Value::Object(groups));
        }
        if layout.order.contains(&Level::V) {
            let rule =
                BinRule::parse(options.binning.as_deref().unwrap_or("equal-frequency"), options.bins.unwrap_or(16))?;
            layout.bins = Some(serde_json::to_value(&rule).map_err(|e| Error::InvalidArgument(e.to_string()))?);
        } else if options.binning.is_some() || options.bins.is_some() {
            return Err(Error::InvalidArgument(
                "bins and binning need level V in the layout (e.g. --layout V-S)".into(),
            ));
        }
        let (explicit, auto) = match (&options.codec, &options.request) {
            (Some(_), Some(_)) => {
                return Err(Error::InvalidArgument("give a codec chain or a codec request, not both".into()))
            }
            (Some(text), None) | (None, Some(CodecRequest::Chain { chain: text })) => (Some(text.clone()), None),
            (None, Some(CodecRequest::Auto { objective, error_bound })) => {
                let bound = error_bound.as_deref().map(codec_plan::parse_error_bound).transpose()?;
                (None, Some((*objective, bound)))
            }
            (None, None) => (None, None),
        };
        let codec: Vec<CodecSpec> = match &explicit {
            Some(text) => registry::parse_chain(text)?,
            None => registry::default_chain(),
        };
        let named = options.variable_codecs.keys().chain(options.plans.keys()).chain(options.variable_requests.keys());
        for name in named.chain(options.variable_chunks.keys()).chain(options.variable_subchunks.keys()) {
            if !schema.variables.iter().any(|v| &v.name == name) {
                return Err(Error::InvalidArgument(format!(
                    "codec, chunks or plan given for unknown variable '{name}'"
                )));
            }
        }
        // Each variable's chain, validated up front for the variable's type.
        let mut chain_of = BTreeMap::new();
        let mut planned = BTreeMap::new();
        for v in &schema.variables {
            let split = precision::splits(&layout, v.dtype);
            let own = match options.variable_requests.get(&v.name) {
                Some(CodecRequest::Auto { objective, error_bound }) => {
                    let bound = error_bound.as_deref().map(codec_plan::parse_error_bound).transpose()?;
                    Some((None, Some((*objective, bound))))
                }
                Some(CodecRequest::Chain { chain }) => Some((Some(chain.clone()), None)),
                None => None,
            };
            let own_chain = options.variable_codecs.get(&v.name).cloned().or(own.as_ref().and_then(|o| o.0.clone()));
            let var_auto = own.map_or(auto.clone(), |o| o.1);
            let specs = match own_chain {
                Some(text) => registry::parse_chain(&text)?,
                // Byte-group segments are not values: value-level plans do not apply.
                None if split && explicit.is_none() => registry::parse_chain(precision::BYTE_GROUP_CHAIN)?,
                None => {
                    if let (Some((objective, bound)), Some(_)) = (&var_auto, v.dtype.num_type()) {
                        let error_bound = bound.clone();
                        planned.insert(v.name.clone(), PendingPlan::Plan { objective: *objective, error_bound });
                    }
                    codec.clone()
                }
            };
            let chain_type =
                if precision::splits(&layout, v.dtype) { Some(strata_codecs::NumType::U8) } else { v.dtype.num_type() };
            if let Some(t) = chain_type {
                registry::chain(&specs, ElementContext::new(t))
                    .map_err(|e| Error::InvalidArgument(format!("codec for '{}': {e}", v.name)))?;
            }
            chain_of.insert(v.name.clone(), specs);
        }
        let dim_size = |name: &str| schema.dims.iter().find(|d| d.name == name).map(|d| d.size);
        let per_var = options.variable_chunks.values().chain(options.variable_subchunks.values());
        let cut = options.decomposition.keys().map(|k| (k, &0u64));
        for (name, _) in options.chunks.iter().chain(&options.subchunks).chain(per_var.clone().flatten()).chain(cut) {
            if dim_size(name).is_none() {
                return Err(Error::InvalidArgument(format!("--chunks/--subchunks name unknown dimension '{name}'")));
            }
        }
        if options
            .chunks
            .values()
            .chain(options.subchunks.values())
            .chain(per_var.flat_map(|m| m.values()))
            .any(|&v| v == 0)
        {
            return Err(Error::InvalidArgument("chunk and sub-chunk lengths must be at least 1".into()));
        }
        let record_dim = schema.record_dim.clone();
        let is_record = |v: &VariableSchema| record_dim.is_some() && v.dims.first() == record_dim.as_ref();
        let elem_shape = |v: &VariableSchema| -> Vec<u64> { v.dims.iter().map(|d| dim_size(d).unwrap_or(0)).collect() };

        // Slab length: the largest record variable's slab should be about slab_bytes.
        let slab_bytes = options.slab_bytes.unwrap_or(DEFAULT_SLAB_BYTES);
        let record_bytes = schema
            .variables
            .iter()
            .filter(|v| is_record(v) && v.dtype != DType::String)
            .map(|v| elem_shape(v)[1..].iter().product::<u64>() * v.dtype.size() as u64)
            .max()
            .unwrap_or(1)
            .max(1);
        let slab_records = options.slab_records.unwrap_or((slab_bytes / record_bytes).max(1));
        if slab_records == 0 {
            return Err(Error::InvalidArgument("slab_records must be at least 1".into()));
        }
        let records_hint = record_dim.as_deref().and_then(dim_size).unwrap_or(0);

        let default_sub = default_subchunk_bytes(&layout);
        let rule = options.shape_rule.unwrap_or_default();
        let mut variables = Vec::new();
        // Variables with another sub-chunk shape for their plan to measure.
        let mut alternative_of = BTreeMap::new();
        for v in &schema.variables {
            if v.dtype == DType::String {
                variables.push(Variable {
                    name: v.name.clone(),
                    dtype: v.dtype,
                    dims: v.dims.clone(),
                    attrs: v.attrs.clone(),
                    chunking: None,
                    codecs: vec![],
                    inline_strings: Some(v.inline_strings.clone().unwrap_or_default()),
                    plan: None,
                });
                continue;
            }
            let mut extent = elem_shape(v);
            if is_record(v) {
                // Unknown (a stream): plan for a full slab.
                extent[0] = if records_hint == 0 { slab_records } else { records_hint.min(slab_records) };
            }
            let es = v.dtype.size() as u64;
            let own_chunks = options.variable_chunks.get(&v.name);
            let own_subchunks = options.variable_subchunks.get(&v.name);
            let mut chunk = rule.shape(&extent, es, options.chunk_bytes.unwrap_or(DEFAULT_CHUNK_BYTES));
            for (d, name) in v.dims.iter().enumerate() {
                if let Some(&c) = own_chunks.and_then(|m| m.get(name)).or(options.chunks.get(name)) {
                    chunk[d] = c.min(extent[d].max(1));
                }
            }
            for (d, name) in v.dims.iter().enumerate() {
                let Some(cuts) = options.decomposition.get(name) else { continue };
                if record_dim.as_ref() == Some(name) {
                    return Err(Error::InvalidArgument(format!(
                        "the record dimension '{name}' is not cut between writers (each writes every record of its \
                         block; writers of separate record ranges use the subfiles placement)"
                    )));
                }
                let g = cuts.iter().fold(0, |g, &c| gcd(g, c));
                if g == 0 || cuts.iter().any(|&c| c == 0 || c >= extent[d]) {
                    return Err(Error::InvalidArgument(format!(
                        "decomposition of '{name}' at {cuts:?}: cuts lie strictly inside the dimension (1 to {})",
                        extent[d].saturating_sub(1)
                    )));
                }
                if g % chunk[d] != 0 {
                    if own_chunks.and_then(|m| m.get(name)).or(options.chunks.get(name)).is_some() {
                        return Err(Error::InvalidArgument(format!(
                            "'{}': chunks of {} along '{name}' do not fit the writers' blocks (cut at {cuts:?})",
                            v.name, chunk[d]
                        )));
                    }
                    // The largest length that both fits the blocks and is no longer than planned.
                    chunk[d] = (1..=chunk[d]).rev().find(|c| g % c == 0).unwrap_or(1);
                }
            }
            let named_sub = |name: &String| own_subchunks.and_then(|m| m.get(name)).or(options.subchunks.get(name));
            let mut sub = rule.shape(&chunk, es, options.subchunk_bytes.unwrap_or(default_sub));
            for (d, name) in v.dims.iter().enumerate() {
                if let Some(&s) = named_sub(name) {
                    sub[d] = s.min(chunk[d]);
                }
            }
            // Small enough to be compressed whole, unless the user gave sub-chunk sizes (a
            // stream's length is unknown until it ends: its records are not held whole).
            let known = !is_record(v) || (records_hint > 0 && records_hint <= slab_records);
            let untouched = options.subchunk_bytes.is_none() && !v.dims.iter().any(|d| named_sub(d).is_some());
            if untouched {
                let bytes = known.then(|| extent.iter().product::<u64>().saturating_mul(es));
                let whole = rule.shape(&chunk, es, subchunk_target(default_sub, bytes));
                if whole != sub {
                    alternative_of.insert(v.name.clone(), Alternative::Blocks(std::mem::replace(&mut sub, whole)));
                } else if known && rule == ShapeRule::Auto && chunk == extent {
                    // One chunk: its blocks shape only how much a read decodes, by a few
                    // MB at most, so the smaller of the two automatic shapes is worth it.
                    if let Some(other) = auto_alternative(&chunk, es, default_sub) {
                        alternative_of.insert(v.name.clone(), Alternative::Shape(other));
                    }
                }
            }
            if subchunk_grid(&chunk, &sub).iter().product::<u64>() > u32::MAX as u64 {
                return Err(Error::InvalidArgument(format!("variable '{}': too many sub-chunks per chunk", v.name)));
            }
            variables.push(Variable {
                name: v.name.clone(),
                dtype: v.dtype,
                dims: v.dims.clone(),
                attrs: v.attrs.clone(),
                chunking: Some(Chunking { chunk, subchunk: sub }),
                codecs: vec![chain_of.get(&v.name).cloned().unwrap_or_else(|| codec.clone())],
                inline_strings: None,
                plan: options.plans.get(&v.name).map(RawJson::new),
            });
        }
        let dims = schema
            .dims
            .iter()
            .map(|d| Dim {
                name: d.name.clone(),
                size: if Some(&d.name) == record_dim.as_ref() { 0 } else { d.size },
                unlimited: d.unlimited,
            })
            .collect();
        let draft = Manifest {
            format: FORMAT_NAME.into(),
            format_version: FORMAT_VERSION,
            version: 1,
            parent: None,
            created_ms: 0,
            message: String::new(),
            dims,
            record_dim,
            slab_records,
            attrs: schema.attrs,
            variables,
            layout,
            slabs: vec![],
            files: vec![],
        };
        draft.validate()?;
        let chains = draft.variables.iter().map(|v| build_chain(&draft.layout, v)).collect::<Result<Vec<_>>>()?;
        // Variables known to be small get the default chain unplanned (a record variable's
        // size is known once its records are: see `resolve_plan`).
        let pending = draft
            .variables
            .iter()
            .map(|v| {
                let known = draft.shape(v).iter().product::<u64>() * v.dtype.size() as u64;
                planned.remove(&v.name).filter(|_| draft.is_record_var(v) || known >= PLAN_MIN_BYTES)
            })
            .collect();
        let has_static = draft.variables.iter().any(|v| v.chunking.is_some() && !draft.is_record_var(v));
        let static_slab = has_static.then(|| SlabBuilderBox(SlabBuilder::new(0, None)));
        let bin_rule = BinRule::of_layout(&draft.layout)?;
        let records_hint = if records_hint > 0 { Some(records_hint) } else { None };
        let alternatives = draft.variables.iter().map(|v| alternative_of.remove(&v.name)).collect();
        Ok(Self {
            store,
            draft,
            base_version: None,
            chains,
            pending,
            alternatives,
            records_hint,
            bin_rule,
            static_slab,
            static_blocks: HashMap::new(),
            spill_at: SPILL_AT_BYTES,
            frame_bytes: frame_bytes(options),
            open_slab: None,
            next_slab_id: 1,
            block: None,
        })
    }

    /// Continues the newest version of an existing store: new slabs along the record dimension.
    pub fn open_append(store: Store) -> Result<Self> {
        Self::open_append_with(store, &WriterOptions::default())
    }

    /// Like [`open_append`](Self::open_append), with `options.variable_codecs` (new slabs of
    /// those variables use the given chains, added to the variable's `codecs` unless already
    /// listed; old segments keep theirs), `options.plans` (replacing the variables' plans)
    /// and `options.recheck` (each planned record variable checked on its first new slab,
    /// for its recorded objective or the one of an `auto` request). Layout and chunk options
    /// are the store's and cannot change.
    pub fn open_append_with(store: Store, options: &WriterOptions) -> Result<Self> {
        let mut base = store.manifest(None)?;
        if let Some(source) = base.source() {
            return Err(Error::InvalidArgument(format!(
                "'{}' indexes '{}' in place and is read-only: append to the file and index it again, or \
                 import it (strata import) to append to a store",
                store.name(),
                source.path
            )));
        }
        for (name, text) in &options.variable_codecs {
            let specs = registry::parse_chain(text)?;
            let pos = base.variable(name)?.0;
            let var = &mut base.variables[pos];
            let Some(t) = precision::chain_type(&base.layout, var)? else { continue };
            registry::chain(&specs, ElementContext::new(t))
                .map_err(|e| Error::InvalidArgument(format!("codec for '{name}': {e}")))?;
            push_chain(var, specs)?;
        }
        for (name, plan) in &options.plans {
            let pos = base.variable(name)?.0;
            base.variables[pos].plan = Some(RawJson::new(plan));
        }
        if base.record_dim.is_none() {
            return Err(Error::InvalidArgument(format!("'{}' has no record dimension to append along", store.name())));
        }
        let objective_override = match &options.request {
            Some(CodecRequest::Auto { objective, .. }) => Some(*objective),
            _ => None,
        };
        let pending = base
            .variables
            .iter()
            .map(|v| {
                let eligible = options.recheck
                    && base.is_record_var(v)
                    && !options.variable_codecs.contains_key(&v.name)
                    && !precision::splits(&base.layout, v.dtype)
                    && v.dtype.num_type().is_some();
                let current = v.codecs.last().filter(|_| eligible).map(|specs| registry::chain_text(specs))?;
                let head = v.plan.as_ref().and_then(|p| serde_json::from_str::<PlanHead>(p.text()).ok());
                let objective =
                    objective_override.or(head.as_ref().and_then(|h| h.objective)).unwrap_or(Objective::Balanced);
                let error_bound = head.and_then(|h| h.error_bound);
                Some(PendingPlan::Recheck { objective, error_bound, current })
            })
            .collect();
        let chains = base.variables.iter().map(|v| build_chain(&base.layout, v)).collect::<Result<Vec<_>>>()?;
        let next_slab_id = base.slabs.iter().map(|s| s.id + 1).max().unwrap_or(1);
        let base_version = Some(base.version);
        let bin_rule = BinRule::of_layout(&base.layout)?;
        let mut draft = base;
        draft.parent = base_version;
        draft.version += 1;
        let alternatives = vec![None; draft.variables.len()];
        Ok(Self {
            store,
            draft,
            base_version,
            chains,
            pending,
            alternatives,
            records_hint: None,
            bin_rule,
            static_slab: None,
            static_blocks: HashMap::new(),
            spill_at: SPILL_AT_BYTES,
            frame_bytes: frame_bytes(options),
            open_slab: None,
            next_slab_id,
            block: None,
        })
    }

    /// Makes the plan `idx` is waiting for, from its first data (`extent`, C order).
    fn resolve_plan(&mut self, idx: usize, extent: &[u64], data: &[u8]) -> Result<()> {
        let Some(pending) = self.pending[idx].take() else { return Ok(()) };
        let var = &self.draft.variables[idx];
        let (Some(t), Some(chunking)) = (var.dtype.num_type(), &var.chunking) else { return Ok(()) };
        // The variable's whole size: a record variable's first slab times the slabs the
        // schema announced (a writer that was not told sees the slab alone).
        let record_bytes = data.len() as u64 / extent.first().copied().unwrap_or(1).max(1);
        let whole = match (self.draft.is_record_var(var), self.records_hint) {
            (true, Some(n)) => record_bytes * n,
            _ => data.len() as u64,
        };
        if whole < PLAN_MIN_BYTES {
            return Ok(());
        }
        let (seed, es) = (sampling::seed_of(&var.name), var.dtype.size());
        // A variable compressed whole is sampled in the blocks it would otherwise get, so its
        // plan costs what any variable's does; then both ways are compared on all of it.
        let alternative = self.alternatives[idx].take();
        let block = match &alternative {
            Some(Alternative::Blocks(b)) => b.clone(),
            _ => chunking.subchunk.clone(),
        };
        let block_bytes = block.iter().zip(extent).map(|(&b, &e)| b.min(e)).product::<u64>() * es as u64;
        let count = sampling::plan_samples(data.len() as u64, block_bytes);
        let sample = sampling::samples(data, extent, &block, es, count, seed);
        // A parallel writer sees only its block, and keeps the shape it was given.
        let own = self.block.is_none();
        let holds_all = own && chunking.subchunk.iter().zip(extent).all(|(&s, &e)| s >= e);
        let record = match pending {
            PendingPlan::Plan { objective, error_bound } => {
                let (mut whole_unit, mut ranked, mut other) = (None, vec![], vec![]);
                match &alternative {
                    Some(Alternative::Blocks(b)) if holds_all => {
                        let shape = extent.iter().map(|&e| e as usize).collect();
                        whole_unit = Some(Sample { bytes: data.to_vec(), shape });
                        ranked = sampling::tiles(data, extent, b, es);
                    }
                    Some(Alternative::Shape(o)) if own => {
                        // Regions that both shapes tile, each cut both ways.
                        let region = common_region(&block, o, extent);
                        let bytes = region.iter().product::<u64>() * es as u64;
                        let n = sampling::shape_regions(data.len() as u64, bytes);
                        for r in sampling::grid_samples(data, extent, &region, es, n, seed.wrapping_add(2)) {
                            let at: Vec<u64> = r.shape.iter().map(|&x| x as u64).collect();
                            ranked.extend(sampling::tiles(&r.bytes, &at, &block, es));
                            other.extend(sampling::tiles(&r.bytes, &at, o, es));
                        }
                    }
                    _ => {}
                }
                let second = match (&alternative, &whole_unit) {
                    (_, Some(w)) => Some(codec_plan::SecondLook::Whole { blocks: &ranked, whole: w }),
                    (Some(Alternative::Shape(o)), None) if !other.is_empty() => {
                        Some(codec_plan::SecondLook::Shape { ranked: &ranked, other: &other, shape: o })
                    }
                    _ => None,
                };
                let refine = if objective == Objective::Ratio && second.is_none() {
                    sampling::samples(data, extent, &block, es, REFINE_SAMPLES, seed.wrapping_add(1))
                } else {
                    vec![]
                };
                codec_plan::plan(t, &sample, &refine, second, objective, error_bound.as_deref())?
            }
            PendingPlan::Recheck { objective, error_bound, current } => {
                match codec_plan::recheck(t, &sample, &current, objective, error_bound.as_deref())? {
                    Some(r) => r,
                    None => return Ok(()),
                }
            }
        };
        // A variable compressed whole goes back to blocks unless whole measured smaller (the
        // speed objective does not measure: blocks read faster); one in cubes takes the other
        // shape only when that measured smaller.
        let new_shape = match alternative {
            Some(Alternative::Blocks(b)) if holds_all && !record.unit.as_ref().is_some_and(|u| u.stored_whole) => {
                Some(b)
            }
            Some(Alternative::Shape(o)) if record.shape.as_ref().is_some_and(|s| s.stored_other) => Some(o),
            _ => None,
        };
        if let Some(shape) = new_shape.filter(|_| record.previous.is_none()) {
            if let Some(c) = self.draft.variables[idx].chunking.as_mut() {
                c.subchunk = shape;
            }
        }
        let specs = registry::parse_chain(&record.chosen)?;
        let plan = serde_json::to_value(&record).map_err(|e| Error::InvalidArgument(e.to_string()))?;
        let var = &mut self.draft.variables[idx];
        if record.previous.is_some() {
            push_chain(var, specs)?;
        } else {
            // A new variable: nothing was written with its placeholder chain yet.
            var.codecs = vec![specs];
        }
        var.plan = Some(RawJson::new(&plan));
        self.chains[idx] = build_chain(&self.draft.layout, &self.draft.variables[idx])?;
        Ok(())
    }

    /// Sets attributes of the store (`var` None) or of a variable before the commit,
    /// replacing those of the same name (netCDF programs set them at any time).
    pub fn set_attributes(&mut self, var: Option<&str>, attrs: Vec<Attribute>) -> Result<()> {
        let list = match var {
            None => &mut self.draft.attrs,
            Some(name) => {
                let idx = self.draft.variable(name)?.0;
                &mut self.draft.variables[idx].attrs
            }
        };
        for a in attrs {
            match list.iter_mut().find(|b| b.name == a.name) {
                Some(b) => *b = a,
                None => list.push(a),
            }
        }
        Ok(())
    }

    /// The manifest as it will be committed (dimension sizes grow as slabs finish).
    pub fn manifest(&self) -> &Manifest {
        &self.draft
    }

    pub fn slab_records(&self) -> u64 {
        self.draft.slab_records
    }

    pub fn record_count(&self) -> u64 {
        self.draft.record_dim.as_deref().and_then(|r| self.draft.dim(r)).map_or(0, |d| d.size)
    }

    /// Writes a variable that does not have the record dimension: the whole array, C order,
    /// little-endian. Only when creating a store.
    pub fn put_static(&mut self, name: &str, data: &[u8]) -> Result<()> {
        let (idx, var) = self.draft.variable(name)?;
        if self.draft.is_record_var(var) {
            return Err(Error::InvalidArgument(format!("'{name}' has the record dimension: write it through slabs")));
        }
        if var.chunking.is_none() {
            return Err(Error::InvalidArgument(format!("'{name}' is a string variable, stored in the manifest")));
        }
        if self.static_blocks.contains_key(&idx) {
            return Err(Error::InvalidArgument(format!("'{name}' is being written in blocks (put_static_block)")));
        }
        let extent = self.draft.shape(var);
        let window = self.window(idx, &extent)?;
        if self.static_slab.as_ref().is_some_and(|s| !s.0.done.contains(&idx)) {
            self.resolve_plan(idx, &window.1, data)?;
        }
        let part = self.encode_part(idx, &extent, &window, data, self.bins_of(idx, data))?;
        let slab = self.static_slab_mut()?;
        if !slab.done.insert(idx) {
            return Err(Error::InvalidArgument(format!("'{name}' was already written")));
        }
        slab.add(part);
        self.spill_static()
    }

    /// Writes a block of a variable without the record dimension: `shape` elements from
    /// `origin` (C order, little-endian). A static variable larger than memory should hold is
    /// written this way, block by block in any order, each block made of whole chunks (it
    /// may stop at the variable's edge): [`static_piece`](Self::static_piece) gives such a
    /// shape. Its plan and bins come from the first block, as a record variable's come from
    /// its first slab. Only when creating a store.
    pub fn put_static_block(&mut self, name: &str, origin: &[u64], shape: &[u64], data: &[u8]) -> Result<()> {
        let (idx, var) = self.draft.variable(name)?;
        let bad = |why: String| Err(Error::InvalidArgument(format!("'{name}' {why}")));
        let Some(chunk) = var.chunking.as_ref().map(|c| c.chunk.clone()) else {
            return bad("is a string variable, stored in the manifest".into());
        };
        if self.draft.is_record_var(var) {
            return bad("has the record dimension: write it through slabs".into());
        }
        // A subfile writer's block is the whole domain (empty): it may write in blocks too.
        if self.block.as_ref().is_some_and(|b| !b.is_empty()) {
            return bad("is written whole by a parallel writer (its block, with put_static)".into());
        }
        let extent = self.draft.shape(var);
        if extent.is_empty() {
            return bad("is a scalar: write it with put_static".into());
        }
        if origin.len() != extent.len() || shape.len() != extent.len() {
            return bad(format!("has {} dimensions: a block gives an origin and a shape of as many", extent.len()));
        }
        for d in 0..extent.len() {
            let end = origin[d].saturating_add(shape[d]);
            let aligned = origin[d].is_multiple_of(chunk[d]) && (end.is_multiple_of(chunk[d]) || end == extent[d]);
            if shape[d] == 0 || end > extent[d] || !aligned {
                return bad(format!(
                    "is chunked by {chunk:?}: a block is whole chunks inside {extent:?}, not {shape:?} at {origin:?}"
                ));
            }
        }
        let expected = shape.iter().product::<u64>() * var.dtype.size() as u64;
        if data.len() as u64 != expected {
            return bad(format!("needs {expected} bytes for a block of shape {shape:?}, got {}", data.len()));
        }
        if self.static_slab_mut()?.done.contains(&idx) {
            return bad("was already written".into());
        }
        // The chunks the block covers, none of them written before.
        let grid = chunk_grid(&extent, &chunk);
        let covered = chunks_touched(origin, shape, &chunk, &grid);
        let state = self.static_blocks.get(&idx);
        if covered.iter().any(|c| state.is_some_and(|s| s.chunks.contains(c))) {
            return bad(format!("was already written in part of the block of shape {shape:?} at {origin:?}"));
        }
        let bins = match state {
            Some(s) => s.bins.clone(),
            None => {
                self.resolve_plan(idx, shape, data)?;
                self.bins_of(idx, data)
            }
        };
        let part = self.encode_part(idx, &extent, &(origin.to_vec(), shape.to_vec()), data, bins.clone())?;
        // Recorded once the block is encoded: a block refused leaves the variable as it was.
        let state = self.static_blocks.entry(idx).or_insert_with(|| StaticBlocks { chunks: HashSet::new(), bins });
        state.chunks.extend(covered);
        let complete = state.chunks.len() as u64 == grid.iter().product::<u64>();
        let slab = self.static_slab_mut()?;
        slab.add(part);
        if complete {
            slab.done.insert(idx);
            self.static_blocks.remove(&idx);
        }
        self.spill_static()
    }

    /// The block shape of [`put_static_block`](Self::put_static_block) for static variable
    /// `name`: whole chunks, about a slab's bytes, cut along the leading dimensions first
    /// (empty for a scalar or a string variable, written whole).
    pub fn static_piece(&self, name: &str) -> Result<Vec<u64>> {
        let (_, var) = self.draft.variable(name)?;
        let Some(c) = &var.chunking else { return Ok(vec![]) };
        Ok(piece_shape(&self.draft.shape(var), &c.chunk, var.dtype.size() as u64, DEFAULT_SLAB_BYTES))
    }

    fn static_slab_mut(&mut self) -> Result<&mut SlabBuilder> {
        self.static_slab
            .as_mut()
            .map(|s| &mut s.0)
            .ok_or_else(|| Error::InvalidArgument("static variables can only be written when creating a store".into()))
    }

    /// Level V's bins for data of variable `idx` (None without level V).
    fn bins_of(&self, idx: usize, data: &[u8]) -> Option<Bins> {
        let var = &self.draft.variables[idx];
        self.bin_rule.as_ref().map(|r| r.resolve(var.dtype, data, &var.missing_values()))
    }

    /// Spills the static slab's encoded bytes once they are many. A writer of a block does
    /// not: its coordinator places its parts from memory. A subfile writer (the whole
    /// domain: an empty block) writes its own data file from the spill as a store's writer does.
    fn spill_static(&mut self) -> Result<()> {
        if self.block.as_ref().is_some_and(|b| !b.is_empty()) {
            return Ok(());
        }
        let (storage, limit) = (self.store.storage().clone(), self.spill_at);
        self.static_slab_mut()?.spill_if_large(storage.as_ref(), limit)
    }

    /// Makes the plan variable `name` would get from `data` and writes nothing: `data` is
    /// what the writer would plan it from (a record variable's first slab, 1 to
    /// `slab_records` whole records; a static variable whole, or its first block of
    /// [`static_piece`](Self::static_piece)'s shape). The chain, the sub-chunk shape it
    /// settled on and the plan record are then in [`manifest`](Self::manifest): what
    /// `strata analyze` shows an import would store, made by the same code.
    pub fn preview(&mut self, name: &str, data: &[u8]) -> Result<()> {
        let (idx, var) = self.draft.variable(name)?;
        if var.chunking.is_none() {
            return Err(Error::InvalidArgument(format!("'{name}' is a string variable, stored in the manifest")));
        }
        let es = var.dtype.size() as u64;
        let mut extent = self.draft.shape(var);
        if self.draft.is_record_var(var) {
            let record = extent[1..].iter().product::<u64>() * es;
            let records = (data.len() as u64).checked_div(record).unwrap_or(0);
            if records == 0 || records > self.draft.slab_records || records * record != data.len() as u64 {
                return Err(Error::InvalidArgument(format!(
                    "'{name}': a preview takes 1 to {} whole records of {record} bytes, not {} bytes",
                    self.draft.slab_records,
                    data.len()
                )));
            }
            extent[0] = records;
        } else {
            let piece = self.static_piece(name)?;
            if data.len() as u64 == piece.iter().product::<u64>() * es {
                extent = piece;
            }
        }
        let window = self.window(idx, &extent)?;
        let expected = window.1.iter().product::<u64>() * es;
        if data.len() as u64 != expected {
            return Err(Error::InvalidArgument(format!(
                "'{name}' needs {expected} bytes for shape {:?}, got {}",
                window.1,
                data.len()
            )));
        }
        self.resolve_plan(idx, &window.1, data)
    }

    /// The box of `extent` this writer holds for variable `idx`: its origin and shape. A
    /// parallel writer holds its block; a variable without some cut dimension belongs to
    /// the writer whose block starts at 0 along it (one writer per chunk), and none else.
    fn window(&self, idx: usize, extent: &[u64]) -> Result<(Vec<u64>, Vec<u64>)> {
        let var = &self.draft.variables[idx];
        let Some(block) = &self.block else { return Ok((vec![0; extent.len()], extent.to_vec())) };
        if let Some((dim, _)) = block.iter().find(|(d, r)| !var.dims.contains(d) && r[0] != 0) {
            return Err(Error::InvalidArgument(format!(
                "'{}' does not vary along '{dim}': the writer whose block starts at 0 along '{dim}' writes it",
                var.name
            )));
        }
        Ok(block_window(block, var, extent))
    }

    /// Whether this writer writes variable `idx` (see [`block_holds`]).
    fn holds(&self, idx: usize) -> bool {
        self.block.as_ref().is_none_or(|b| block_holds(b, &self.draft.variables[idx]))
    }

    /// Opens a slab of `records` records (at most `slab_records`) after the current end.
    pub fn begin_slab(&mut self, records: u64) -> Result<()> {
        if self.open_slab.is_some() {
            return Err(Error::InvalidArgument("a slab is already open: finish it first".into()));
        }
        if self.draft.record_dim.is_none() {
            return Err(Error::InvalidArgument("this store has no record dimension".into()));
        }
        if records == 0 || records > self.draft.slab_records {
            return Err(Error::InvalidArgument(format!(
                "a slab holds 1 to {} records, not {records}",
                self.draft.slab_records
            )));
        }
        let start = self.record_count();
        self.open_slab = Some(SlabBuilderBox(SlabBuilder::new(self.next_slab_id, Some([start, records]))));
        self.next_slab_id += 1;
        Ok(())
    }

    /// Writes the open slab's records of one record variable (C order, little-endian).
    pub fn put_records(&mut self, name: &str, data: &[u8]) -> Result<()> {
        let (idx, var) = self.draft.variable(name)?;
        if !self.draft.is_record_var(var) {
            return Err(Error::InvalidArgument(format!("'{name}' does not have the record dimension")));
        }
        let Some(slab) = &self.open_slab else {
            return Err(Error::InvalidArgument("no slab is open: call begin_slab first".into()));
        };
        let [_, count] = slab.0.records.unwrap_or([0, 0]);
        if slab.0.done.contains(&idx) {
            return Err(Error::InvalidArgument(format!("'{name}' was already written for this slab")));
        }
        let mut extent = self.draft.shape(var);
        extent[0] = count;
        let window = self.window(idx, &extent)?;
        let expected = window.1.iter().product::<u64>() * var.dtype.size() as u64;
        if data.len() as u64 == expected {
            self.resolve_plan(idx, &window.1, data)?;
        }
        let part = self.encode_part(idx, &extent, &window, data, self.bins_of(idx, data))?;
        if let Some(slab) = self.open_slab.as_mut() {
            slab.0.done.insert(idx);
            slab.0.add(part);
        }
        Ok(())
    }

    /// Writes the open slab's data and index files. Every record variable must have been put.
    pub fn finish_slab(&mut self) -> Result<()> {
        let slab = self.close_slab()?;
        self.write_slab(slab)
    }

    /// Ends the open slab (and hands it out encoded, for a parallel placement): every
    /// record variable this writer holds must have been put.
    pub(crate) fn close_slab(&mut self) -> Result<SlabBuilder> {
        let Some(SlabBuilderBox(slab)) = self.open_slab.take() else {
            return Err(Error::InvalidArgument("no slab is open".into()));
        };
        let missing: Vec<&str> = self
            .draft
            .variables
            .iter()
            .enumerate()
            .filter(|(i, v)| self.draft.is_record_var(v) && v.chunking.is_some() && self.holds(*i))
            .filter(|(i, _)| !slab.done.contains(i))
            .map(|(_, v)| v.name.as_str())
            .collect();
        if !missing.is_empty() {
            return Err(Error::InvalidArgument(format!("slab is missing record variables: {}", missing.join(", "))));
        }
        let [_, count] = slab.records.unwrap_or([0, 0]);
        if let Some(r) = self.draft.record_dim.clone() {
            if let Some(d) = self.draft.dims.iter_mut().find(|d| d.name == r) {
                d.size += count;
            }
        }
        Ok(slab)
    }

    /// Publishes everything written as a new version and returns its number.
    pub fn commit(mut self, message: &str) -> Result<u64> {
        if self.open_slab.is_some() {
            return Err(Error::InvalidArgument("a slab is still open: finish it before committing".into()));
        }
        if let Some(slab) = self.take_static()? {
            self.write_slab(slab)?;
            // The static slab comes first in the list, as it was created first.
            if let Some(s) = self.draft.slabs.pop() {
                self.draft.slabs.insert(0, s);
            }
        }
        self.draft.created_ms = now_ms();
        self.draft.message = message.to_string();
        self.draft.validate()?;
        self.store.commit(&self.draft).map_err(|e| match e {
            Error::Conflict(_) => Error::Conflict(format!(
                "version {} of '{}' was committed by another writer{}",
                self.draft.version,
                self.store.name(),
                self.base_version.map(|b| format!(" after version {b}")).unwrap_or_default()
            )),
            other => other,
        })?;
        Ok(self.draft.version)
    }

    /// Cuts one part (a slab of a record variable, or a whole static variable) into
    /// sub-chunks and compresses them in parallel.
    fn encode_part(
        &self,
        idx: usize,
        extent: &[u64],
        window: &(Vec<u64>, Vec<u64>),
        data: &[u8],
        bins: Option<Bins>,
    ) -> Result<EncodedPart> {
        let var = &self.draft.variables[idx];
        let es = var.dtype.size();
        let (origin, held) = window;
        let expected = held.iter().product::<u64>() as usize * es;
        if data.len() != expected {
            return Err(Error::InvalidArgument(format!(
                "'{}' needs {expected} bytes for shape {held:?} of {}, got {}",
                var.name,
                var.dtype.name(),
                data.len()
            )));
        }
        let (Some(chunking), Some((codec_index, chain))) = (&var.chunking, &self.chains[idx]) else {
            return Err(Error::InvalidArgument(format!("'{}' is not stored in segments", var.name)));
        };
        let grid = chunk_grid(extent, &chunking.chunk);
        let sub_grid = subchunk_grid(&chunking.chunk, &chunking.subchunk);
        let n_subs: u64 = sub_grid.iter().product();
        let ndim = extent.len();
        // Only the chunks the window touches: a block of a large variable is a small share
        // of its grid, and idle tasks split among threads left them waiting on one another.
        let chunks = chunks_touched(origin, held, &chunking.chunk, &grid);
        let tasks: Vec<(u64, u64)> = chunks.iter().flat_map(|&c| (0..n_subs).map(move |s| (c, s))).collect();
        let missing = var.missing_values();
        let groups = precision::byte_groups(&self.draft.layout, var)?;
        type SubchunkOut = (Vec<PendingSegment>, Vec<PendingBitmap>);
        let results: Vec<Option<Result<SubchunkOut>>> = tasks
            .par_iter()
            .map(|&(c, s)| {
                let cc = unravel(c, &grid);
                let sc = unravel(s, &sub_grid);
                let mut start = vec![0u64; ndim];
                let mut len = vec![0u64; ndim];
                for d in 0..ndim {
                    let chunk_lo = cc[d] * chunking.chunk[d];
                    let chunk_hi = (chunk_lo + chunking.chunk[d]).min(extent[d]);
                    if chunk_lo < origin[d] || chunk_lo >= origin[d] + held[d] {
                        return None; // another writer's chunk
                    }
                    let lo = chunk_lo + sc[d] * chunking.subchunk[d];
                    if lo >= chunk_hi {
                        return None; // sub-chunk id beyond a ragged edge chunk
                    }
                    start[d] = lo;
                    len[d] = (lo + chunking.subchunk[d]).min(chunk_hi) - lo;
                    if chunk_hi > origin[d] + held[d] {
                        return Some(Err(Error::InvalidArgument(format!(
                            "'{}': a chunk along dimension {d} crosses the block's edge at {} (blocks must meet at \
                             the decomposition's cuts)",
                            var.name,
                            origin[d] + held[d]
                        ))));
                    }
                }
                let mut raw = vec![0u8; len.iter().product::<u64>() as usize * es];
                let ones = vec![1u64; ndim];
                let local: Vec<u64> = start.iter().zip(origin).map(|(s, o)| s - o).collect();
                copy_block(data, held, &local, &ones, &mut raw, &len, &vec![0; ndim], &len, es);
                let shape: Vec<usize> = len.iter().map(|&l| l as usize).collect();
                // Without level V the sub-chunk is one bin (0) in its spatial shape; with it,
                // each bin's elements form a 1-D run in position order.
                let binned: Vec<BinnedPart> = match &bins {
                    None => vec![(0, None, raw, shape)],
                    Some(b) => b
                        .split(&raw, var.dtype, &missing)
                        .into_iter()
                        .map(|(bin, positions, bytes)| {
                            let n = positions.len() as usize;
                            (bin, Some(positions), bytes, vec![n])
                        })
                        .collect(),
                };
                let mut segments = Vec::new();
                let mut bitmaps = Vec::new();
                for (bin, positions, bytes, shape) in binned {
                    let summary = var.dtype.summarize(&bytes, &missing);
                    let key = SegmentKey { var: idx as u32, chunk: c, subchunk: s as u32, bin, group: 0 };
                    let parts = match &groups {
                        None => vec![(0u8, shape, bytes)],
                        Some(g) => precision::split(&bytes, es, g)
                            .into_iter()
                            .zip(g)
                            .enumerate()
                            .map(|(i, (part, &w))| (i as u8, [vec![w], shape.clone()].concat(), part))
                            .collect(),
                    };
                    // The element summary goes with group 0 only, so statistics count each element once.
                    for (group, shape, bytes) in parts {
                        let encoded = match chain.encode(&bytes, &shape) {
                            Ok(e) => e,
                            Err(e) => return Some(Err(e.into())),
                        };
                        let first = group == 0;
                        segments.push(PendingSegment {
                            key: SegmentKey { group, ..key },
                            codec: *codec_index,
                            bytes: encoded,
                            raw_length: bytes.len() as u64,
                            count: if first { summary.count } else { 0 },
                            min: if first { summary.min } else { f64::NAN },
                            max: if first { summary.max } else { f64::NAN },
                            spilled: None,
                        });
                    }
                    if let Some(positions) = positions {
                        // Serialized here, in parallel, and kept so: smaller than the bitmap,
                        // and what a spill writes.
                        let b = BinPositions { var: idx as u32, chunk: c, subchunk: s as u32, bin, positions };
                        bitmaps.push(PendingBitmap::new(&b));
                    }
                }
                Some(Ok((segments, bitmaps)))
            })
            .collect();
        let mut part = EncodedPart { segments: vec![], bitmaps: vec![], bins: None };
        for r in results.into_iter().flatten() {
            let (segments, bitmaps) = r?;
            part.segments.extend(segments);
            part.bitmaps.extend(bitmaps);
        }
        if let Some(b) = bins {
            let mut counts = vec![0u64; b.missing_bin() as usize + 1];
            for p in &part.bitmaps {
                counts[p.packed.bin as usize] += p.len;
            }
            part.bins = Some(BinSummary { var: idx as u32, boundaries: b.boundaries().to_vec(), counts });
        }
        Ok(part)
    }

    /// The Hilbert rank of every chunk of the given variables in a slab of `records`
    /// (chunk grids differ between variables): the S component of the layout order.
    pub(crate) fn chunk_ranks(
        &self,
        records: Option<[u64; 2]>,
        vars: impl Iterator<Item = u32>,
    ) -> HashMap<u32, HashMap<u64, u64>> {
        let mut ranks: HashMap<u32, HashMap<u64, u64>> = HashMap::new();
        for var_idx in vars.collect::<BTreeSet<_>>() {
            let var = &self.draft.variables[var_idx as usize];
            let mut extent = self.draft.shape(var);
            if let (Some([_, count]), true) = (records, self.draft.is_record_var(var)) {
                extent[0] = count;
            }
            let chunking = var.chunking.as_ref().map(|c| c.chunk.clone()).unwrap_or_default();
            let order = hilbert::order(&chunk_grid(&extent, &chunking));
            ranks.insert(var_idx, order.into_iter().enumerate().map(|(rank, id)| (id, rank as u64)).collect());
        }
        ranks
    }

    /// Sorts a slab's segments into the store's layout order.
    pub(crate) fn sort_segments(&self, records: Option<[u64; 2]>, segments: &mut [PendingSegment]) {
        let ranks = self.chunk_ranks(records, segments.iter().map(|s| s.key.var));
        let order = &self.draft.layout.order;
        segments.sort_by_key(|s| layout_key(&s.key, ranks[&s.key.var][&s.key.chunk], order));
    }

    pub(crate) fn draft_mut(&mut self) -> &mut Manifest {
        &mut self.draft
    }

    pub(crate) fn store(&self) -> &Store {
        &self.store
    }

    /// The static variables this writer holds, encoded (None when it holds none).
    pub(crate) fn take_static(&mut self) -> Result<Option<SlabBuilder>> {
        let Some(SlabBuilderBox(slab)) = self.static_slab.take() else { return Ok(None) };
        let missing: Vec<String> = self
            .draft
            .variables
            .iter()
            .enumerate()
            .filter(|(i, v)| v.chunking.is_some() && !self.draft.is_record_var(v) && self.holds(*i))
            .filter(|(i, _)| !slab.done.contains(i))
            .map(|(i, v)| match self.static_blocks.get(&i) {
                Some(p) => format!("{} ({} chunks written)", v.name, p.chunks.len()),
                None => v.name.clone(),
            })
            .collect();
        if !missing.is_empty() {
            return Err(Error::InvalidArgument(format!("variables never written whole: {}", missing.join(", "))));
        }
        Ok((!slab.done.is_empty()).then_some(slab))
    }

    /// Drops the static slab (a coordinator receives static parts from the writers).
    pub(crate) fn forget_static(&mut self) {
        self.static_slab = None;
    }

    /// Starts record numbering (and slab numbering) at `start`, for a writer of one range.
    pub(crate) fn start_at(&mut self, start: u64) -> Result<()> {
        let slab = self.draft.slab_records;
        if !start.is_multiple_of(slab) {
            return Err(Error::InvalidArgument(format!(
                "a writer's records start at a multiple of the slab length ({slab}), not at {start}"
            )));
        }
        if let Some(r) = self.draft.record_dim.clone() {
            if let Some(d) = self.draft.dims.iter_mut().find(|d| d.name == r) {
                d.size = start;
            }
        }
        self.next_slab_id = 1 + start / slab;
        if start > 0 {
            self.static_slab = None;
        }
        Ok(())
    }

    /// Bytes per record of record variable `idx` within this writer's block (None: the
    /// writer does not hold it).
    pub(crate) fn held_record_bytes(&self, idx: usize) -> Option<usize> {
        let var = &self.draft.variables[idx];
        if !self.draft.is_record_var(var) || var.chunking.is_none() || !self.holds(idx) {
            return None;
        }
        let mut extent = self.draft.shape(var);
        extent[0] = 1;
        let (_, held) = self.window(idx, &extent).ok()?;
        Some(held.iter().product::<u64>() as usize * var.dtype.size())
    }

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

    fn write_slab(&mut self, slab: SlabBuilder) -> Result<()> {
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

#[cfg(test)]
mod tests {
    use super::common_region;

    #[test]
    fn common_regions_are_tiled_by_both_shapes() {
        assert_eq!(common_region(&[1, 17, 24, 24], &[1, 5, 24, 96], &[1, 17, 96, 192]), vec![1, 17, 24, 96]);
        assert_eq!(common_region(&[16, 32, 32], &[16, 16, 64], &[64, 64, 128]), vec![16, 32, 64]);
        // Never beyond the array, even when the multiple is far larger or overflows.
        assert_eq!(common_region(&[23, 1 << 40], &[24, (1 << 40) - 1], &[100, 7]), vec![100, 7]);
        assert_eq!(common_region(&[0], &[5], &[0]), vec![1]);
    }
}
