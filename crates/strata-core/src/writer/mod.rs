//! The write path: slabs are chunked, compressed in parallel and ordered in memory, then
//! written as one data file and one index file each; `commit` publishes a new version.

mod build;
mod encode;
mod files;
mod options;
mod plan;
mod slab;
mod statics;

pub(crate) use options::{block_holds, block_window};
use options::{default_subchunk_bytes, frame_bytes, gcd};
pub use options::{Block, DatasetSchema, VariableSchema, WriterOptions};
use plan::{Alternative, PendingPlan, PlanHead};
use slab::{BinnedPart, EncodedPart};
pub(crate) use slab::{PendingBitmap, PendingSegment, SlabBuilder};
use statics::StaticBlocks;

use crate::bins::{BinRule, Bins};
use crate::error::{Error, Result};
use crate::grid::chunk_grid;
use crate::hilbert;
use crate::manifest::{Attribute, Layout, Manifest, RawJson, Variable};
use crate::precision;
use crate::segment::layout_key;
use crate::spill::SPILL_AT_BYTES;
use crate::store::{now_ms, Store};
use std::collections::{BTreeSet, HashMap};
use strata_codecs::analyzer::{Goal, Objective, Scale};
use strata_codecs::plan::CodecRequest;
use strata_codecs::{registry, CodecChain, CodecSpec, ElementContext};

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

/// Boxed so that `StoreWriter` can derive `Debug` without exposing segment bytes.
struct SlabBuilderBox(SlabBuilder);

impl std::fmt::Debug for SlabBuilderBox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SlabBuilder(id={}, segments={})", self.0.id, self.0.segments.len())
    }
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
                let scale = head.as_ref().map_or(Scale::Stream, PlanHead::scale);
                let error_bound = head.and_then(|h| h.error_bound);
                Some(PendingPlan::Recheck { goal: Goal::new(objective, scale), error_bound, current })
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

    /// Level V's bins for data of variable `idx` (None without level V).
    fn bins_of(&self, idx: usize, data: &[u8]) -> Option<Bins> {
        let var = &self.draft.variables[idx];
        self.bin_rule.as_ref().map(|r| r.resolve(var.dtype, data, &var.missing_values()))
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
}
