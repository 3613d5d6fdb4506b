//! A new store's first draft: the layout, each variable's chunk and block shapes, codec
//! chains and pending plans, from the schema a front-end describes and the resolved options.

use super::{
    build_chain, default_subchunk_bytes, frame_bytes, gcd, Alternative, DatasetSchema, PendingPlan, SlabBuilder,
    SlabBuilderBox, StoreWriter, VariableSchema, WriterOptions,
};
use crate::bins::BinRule;
use crate::chunking::{auto_alternative, subchunk_target, ShapeRule, DEFAULT_CHUNK_BYTES, DEFAULT_SLAB_BYTES};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::grid::subchunk_grid;
use crate::manifest::{Chunking, Dim, Layout, Level, Manifest, RawJson, Variable, FORMAT_NAME, FORMAT_VERSION};
use crate::precision;
use crate::spill::SPILL_AT_BYTES;
use crate::store::Store;
use std::collections::{BTreeMap, HashMap};
use strata_codecs::plan::{self as codec_plan, CodecRequest, PLAN_MIN_BYTES};
use strata_codecs::{registry, CodecSpec, ElementContext};

impl StoreWriter {
    /// The draft manifest and writer state that the schema and (resolved) options give.
    pub(super) fn build(store: Store, schema: DatasetSchema, options: &WriterOptions) -> Result<Self> {
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
                variables.push(v.unplanned());
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
                chunking: Some(Chunking { chunk, subchunk: sub }),
                codecs: vec![chain_of.get(&v.name).cloned().unwrap_or_else(|| codec.clone())],
                plan: options.plans.get(&v.name).map(RawJson::new),
                ..v.unplanned()
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
        // Variables known to be small get the default chain unplanned, or raw where that is
        // smaller (a record variable's size is known once its records are: see `resolve_plan`).
        let pending = draft
            .variables
            .iter()
            .map(|v| {
                let plan = planned.remove(&v.name)?;
                Some(if draft.is_record_var(v) || draft.bytes(v) >= PLAN_MIN_BYTES {
                    plan
                } else {
                    PendingPlan::Unplanned
                })
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
