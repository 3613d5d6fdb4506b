//! What a writer is asked for: the schema a front-end describes, the options (chunking,
//! codecs, layout, a parallel writer's block) and their defaults.

use crate::chunking::{ShapeRule, DEFAULT_BINNED_SUBCHUNK_BYTES, DEFAULT_SUBCHUNK_BYTES};
use crate::dtype::DType;
use crate::error::Result;
use crate::index_frames::FRAME_RAW_BYTES;
use crate::manifest::{Attribute, Dim, Layout, Level, Variable};
use crate::write_config::WriteConfig;
use serde::Deserialize;
use std::collections::BTreeMap;
use strata_codecs::plan::CodecRequest;

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

impl VariableSchema {
    /// The variable as a manifest lists it before its chunking, codecs and plan are decided
    /// (a string's values inline, as given).
    pub(crate) fn unplanned(&self) -> Variable {
        Variable {
            name: self.name.clone(),
            dtype: self.dtype,
            dims: self.dims.clone(),
            attrs: self.attrs.clone(),
            chunking: None,
            codecs: vec![],
            inline_strings: (self.dtype == DType::String).then(|| self.inline_strings.clone().unwrap_or_default()),
            plan: None,
        }
    }
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
    /// `auto` plans each variable of at least
    /// [`PLAN_MIN_BYTES`](strata_codecs::plan::PLAN_MIN_BYTES) from its first data (the
    /// sample rule of [`sampling`](crate::sampling)) and records the plan; smaller ones get
    /// the default chain.
    /// When appending, `auto` names the objective later checks use.
    #[serde(default)]
    pub request: Option<CodecRequest>,
    /// When appending: check each planned record variable's chain on the new data, and
    /// switch new slabs to a clearly better one (see
    /// [`recheck`](strata_codecs::plan::recheck)).
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
pub(super) fn default_subchunk_bytes(layout: &Layout) -> u64 {
    if layout.order.contains(&Level::V) {
        DEFAULT_BINNED_SUBCHUNK_BYTES
    } else {
        DEFAULT_SUBCHUNK_BYTES
    }
}

pub(super) fn frame_bytes(options: &WriterOptions) -> usize {
    options.index_frame_bytes.map_or(FRAME_RAW_BYTES, |b| b.clamp(1, 1 << 32) as usize)
}

pub(super) fn gcd(a: u64, b: u64) -> u64 {
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
