//! Files indexed in place (`strata index FILE.nc`): a store whose segments are the chunks of
//! a NetCDF-4/HDF5 file, read where they lie. The store holds manifests and index files
//! only; the index gives every chunk's place, checksum and value summary (count, minimum,
//! maximum), so region and value queries prune chunks exactly as on a store strata wrote.
//!
//! A front end that can read HDF5's metadata (the Python package, through h5py) describes
//! each variable's storage — its chunk shape, filters and the place of every chunk, or the
//! offset of a contiguous variable — and the indexer reads each chunk once to checksum and
//! summarise it. The file itself is never written.

use crate::bins::{BinRule, BinSummary};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::grid::{chunk_grid, ravel, unravel};
use crate::index_file::{self, BinPositions, SlabIndexData};
use crate::manifest::{Chunking, FileEntry, Layout, Level, Manifest, Slab, FORMAT_NAME, FORMAT_VERSION};
use crate::segment::{SegmentEntry, SegmentKey};
use crate::storage::Storage;
use crate::store::{now_ms, random_suffix, Store};
use crate::writer::{DatasetSchema, VariableSchema};
use rayon::prelude::*;
use serde::Deserialize;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use strata_codecs::{registry, Backend, CodecSpec, ElementContext, RawBackend};

/// Pieces a contiguous variable is cut into target this many bytes: small enough that a
/// value query skips most of a field, large enough that reading it whole is a few long
/// reads (adjacent pieces are fetched together).
const PIECE_BYTES: u64 = 64 << 10;
/// Chunks read and summarised at once while indexing (memory: this many chunks).
const BATCH: usize = 64;

/// How one variable's bytes lie in the file.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum SourceStorage {
    /// One run of bytes in C order from `offset` (None: never written, all fill).
    Contiguous {
        offset: Option<u64>,
        #[serde(default)]
        big_endian: bool,
    },
    /// HDF5 chunks of shape `chunk`, each stored through `filters` (pipeline order).
    Chunked {
        chunk: Vec<u64>,
        #[serde(default)]
        filters: Vec<String>,
        #[serde(default)]
        big_endian: bool,
        chunks: Vec<SourceChunk>,
    },
}

/// One stored chunk: the coordinates of its first element, its bytes, and HDF5's filter
/// mask (bit *i* set: filter *i* was skipped for this chunk).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceChunk {
    pub origin: Vec<u64>,
    pub offset: u64,
    pub length: u64,
    #[serde(default)]
    pub filter_mask: u32,
}

/// A variable of the schema and where its bytes are.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceVariable {
    pub name: String,
    pub storage: SourceStorage,
    /// One element of the fill value, little-endian: what chunks the file never wrote hold.
    #[serde(default)]
    pub fill: Option<Vec<u8>>,
}

/// Where one chunk of the grid is: (codec position, offset, length); None: never written.
type Place = Option<(u8, u64, u64)>;

/// What indexing one variable did.
#[derive(Debug, Clone, Copy, Default)]
pub struct Indexed {
    pub chunks: u64,
    pub bytes_read: u64,
    pub raw_bytes: u64,
}

/// Builds a new version of a store that indexes `file` (beside the store) in place.
#[derive(Debug)]
pub struct InPlaceIndexer {
    store: Store,
    beside: Arc<dyn Storage>,
    file: String,
    size: u64,
    draft: Manifest,
    /// Per slab id: its segments, and (level V) the positions of each chunk's bins.
    segments: BTreeMap<u64, Vec<SegmentEntry>>,
    bitmaps: BTreeMap<u64, Vec<BinPositions>>,
    /// Level V: the binning rule, and each variable's bins (record and static slabs alike
    /// hold whole variables: one summary per variable).
    bin_rule: Option<BinRule>,
    bins: Vec<BinSummary>,
}

fn incompatible(var: &str, why: impl std::fmt::Display) -> Error {
    Error::Compatibility(format!("'{var}' cannot be indexed in place: {why}"))
}

/// The pieces of a contiguous variable: `[1, .., 1, k, n, .., n]`, each one run of bytes.
pub fn contiguous_pieces(shape: &[u64], element_size: u64) -> Vec<u64> {
    let mut chunk = vec![1u64; shape.len()];
    let mut bytes = element_size;
    for d in (0..shape.len()).rev() {
        let n = shape[d].max(1);
        if bytes * n <= PIECE_BYTES {
            chunk[d] = n;
            bytes *= n;
        } else {
            chunk[d] = (PIECE_BYTES / bytes).clamp(1, n);
            break;
        }
    }
    chunk
}

impl InPlaceIndexer {
    /// Starts indexing `file` (a plain name, or a relative path below the directory that
    /// holds the store) with the dataset's `schema`. The store may be new, or an index of
    /// the same file that this makes a new version of (after the file changed).
    /// `bins`: a binning rule for level V (value bins and their positions per chunk, so
    /// value queries answer whole bins from the index), or None for chunk summaries only.
    pub fn new(store: Store, file: &str, schema: DatasetSchema, bins: Option<BinRule>) -> Result<Self> {
        crate::storage::check_key(file).map_err(|_| {
            Error::InvalidArgument(format!("'{file}' must be a relative path below the store's directory"))
        })?;
        let beside = store.beside()?.clone();
        let size = beside.size(file).map_err(|e| match e {
            Error::NotFound(_) => Error::NotFound(format!("'{file}' is not beside the index '{}'", store.name())),
            other => other,
        })?;
        let (version, parent) = if store.exists()? {
            let base = store.manifest(None)?;
            if base.source().is_none_or(|s| s.path != file) {
                return Err(Error::InvalidArgument(format!(
                    "'{}' is a store, not an index of '{file}': index into a new directory",
                    store.name()
                )));
            }
            (base.version + 1, Some(base.version))
        } else {
            if !store.storage().is_empty()? {
                return Err(Error::InvalidArgument(format!(
                    "'{}' is not empty and is not an index: index into a new or empty directory",
                    store.name()
                )));
            }
            (1, None)
        };
        let variables = schema.variables.iter().map(VariableSchema::unplanned).collect();
        let mut draft = Manifest {
            format: FORMAT_NAME.into(),
            format_version: FORMAT_VERSION,
            version,
            parent,
            created_ms: 0,
            message: String::new(),
            dims: schema.dims,
            record_dim: schema.record_dim,
            slab_records: 1,
            attrs: schema.attrs,
            variables,
            layout: Layout::space_only(),
            slabs: vec![],
            files: vec![],
        };
        if let Some(rule) = &bins {
            rule.check()?;
            draft.layout = Layout {
                order: vec![Level::V, Level::S],
                bins: Some(serde_json::to_value(rule).map_err(|e| Error::InvalidArgument(e.to_string()))?),
                ..Layout::space_only()
            };
        }
        Ok(Self {
            store,
            beside,
            file: file.to_string(),
            size,
            draft,
            segments: BTreeMap::new(),
            bitmaps: BTreeMap::new(),
            bin_rule: bins,
            bins: vec![],
        })
    }

    /// Indexes one variable: every chunk read, checksummed, decoded and summarised; with
    /// bins, read a second time (the bins come from the whole variable, known only after the
    /// first pass), to split it and record each bin's positions.
    pub fn add(&mut self, source: SourceVariable) -> Result<Indexed> {
        let (idx, var) = self.draft.variable(&source.name)?;
        let name = var.name.clone();
        if var.dtype == DType::String {
            return Err(Error::InvalidArgument(format!("'{name}' is a string variable: its values are inline")));
        }
        if var.chunking.is_some() {
            return Err(Error::InvalidArgument(format!("'{name}' was indexed already")));
        }
        let record = self.draft.is_record_var(var);
        let shape = self.draft.shape(var);
        let dtype = var.dtype;
        let es = dtype.size() as u64;
        let ndim = shape.len();
        let fill_chain = |value: &Option<Vec<u8>>| -> Result<Vec<CodecSpec>> {
            let value = value.clone().unwrap_or_else(|| vec![0; es as usize]);
            if value.len() as u64 != es {
                return Err(incompatible(
                    &name,
                    format!("a fill value of {} bytes for {es}-byte elements", value.len()),
                ));
            }
            let hex: String = value.iter().map(|b| format!("{b:02x}")).collect();
            Ok(vec![CodecSpec::new("fill").with("value", hex)])
        };
        // Per chunk of the grid (row-major): (codec position, offset, length); None: fill.
        let (chunk, mut chains, places): (Vec<u64>, Vec<Vec<CodecSpec>>, Vec<Place>) = match &source.storage {
            SourceStorage::Contiguous { offset, big_endian } => {
                let chunk = contiguous_pieces(&shape, es);
                let grid = chunk_grid(&shape, &chunk);
                let n: u64 = grid.iter().product();
                let chain = if *big_endian && es > 1 {
                    vec![CodecSpec::new("hdf5").with("order", "big")]
                } else {
                    vec![RawBackend.spec()]
                };
                let places = (0..n)
                    .map(|c| {
                        let origin: Vec<u64> = unravel(c, &grid).iter().zip(&chunk).map(|(i, k)| i * k).collect();
                        let len: u64 = (0..ndim).map(|d| chunk[d].min(shape[d] - origin[d])).product();
                        offset.map(|o| (0u8, o + ravel(&origin, &shape) * es, len * es))
                    })
                    .collect();
                (chunk, vec![chain], places)
            }
            SourceStorage::Chunked { chunk, filters, big_endian, chunks } => {
                if chunk.len() != ndim || chunk.contains(&0) {
                    return Err(incompatible(&name, format!("chunk shape {chunk:?} for {ndim} dimensions")));
                }
                let grid = chunk_grid(&shape, chunk);
                let n: u64 = grid.iter().product();
                let mut places = vec![None; n as usize];
                let mut by_mask: BTreeMap<u32, u8> = BTreeMap::new();
                let mut chains = vec![];
                for c in chunks {
                    let inside = c.origin.len() == ndim
                        && (0..ndim).all(|d| c.origin[d] % chunk[d] == 0 && c.origin[d] < shape[d]);
                    if !inside {
                        return Err(incompatible(&name, format!("a chunk at {:?} outside {shape:?}", c.origin)));
                    }
                    let pos = match by_mask.get(&c.filter_mask) {
                        Some(&p) => p,
                        None => {
                            let kept: Vec<&str> = filters
                                .iter()
                                .enumerate()
                                .filter(|(i, _)| *i >= 32 || c.filter_mask & (1 << i) == 0)
                                .map(|(_, f)| f.as_str())
                                .collect();
                            let mut spec = CodecSpec::new("hdf5").with("chunk", chunk.clone());
                            if !kept.is_empty() {
                                spec = spec.with("filters", kept);
                            }
                            if *big_endian {
                                spec = spec.with("order", "big");
                            }
                            chains.push(vec![spec]);
                            let p = u8::try_from(chains.len() - 1)
                                .map_err(|_| incompatible(&name, "more than 255 filter masks"))?;
                            by_mask.insert(c.filter_mask, p);
                            p
                        }
                    };
                    let coords: Vec<u64> = c.origin.iter().zip(chunk).map(|(o, k)| o / k).collect();
                    places[ravel(&coords, &grid) as usize] = Some((pos, c.offset, c.length));
                }
                (chunk.clone(), chains, places)
            }
        };
        let fill_pos = if places.iter().any(Option::is_none) {
            chains.push(fill_chain(&source.fill)?);
            Some(u8::try_from(chains.len() - 1).map_err(|_| incompatible(&name, "too many codec chains"))?)
        } else {
            None
        };
        let t = dtype.num_type().ok_or_else(|| incompatible(&name, format!("type {}", dtype.name())))?;
        let built = chains
            .iter()
            .map(|specs| registry::chain(specs, ElementContext::new(t)))
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| incompatible(&name, e))?;
        let grid = chunk_grid(&shape, &chunk);
        let missing = var.missing_values();
        let all: Vec<(u64, Place)> = places.into_iter().enumerate().map(|(i, p)| (i as u64, p)).collect();
        // Reads, checks and decodes one chunk: its segment entry (bin 0, whole chunk) and values.
        let decode = |c: u64, place: Place| -> Result<(SegmentEntry, Vec<u8>)> {
            let origin: Vec<u64> = unravel(c, &grid).iter().zip(&chunk).map(|(i, k)| i * k).collect();
            let seg_shape: Vec<usize> = (0..ndim).map(|d| chunk[d].min(shape[d] - origin[d]) as usize).collect();
            let raw_length = seg_shape.iter().product::<usize>() as u64 * es;
            let (codec, offset, length) = place.unwrap_or((fill_pos.unwrap_or(0), 0, 0));
            if offset.checked_add(length).is_none_or(|end| end > self.size) {
                return Err(Error::Corruption(format!(
                    "'{}': a chunk of '{name}' at {offset}+{length} lies past the end of the file",
                    self.file
                )));
            }
            let stored = if length == 0 { vec![] } else { self.beside.read_range(&self.file, offset, length)? };
            let values = built[codec as usize]
                .decode(&stored, raw_length as usize, &seg_shape)
                .map_err(|e| Error::Corruption(format!("'{}': chunk of '{name}' at {offset}: {e}", self.file)))?;
            let s = dtype.summarize(&values, &missing);
            let key = SegmentKey { var: idx as u32, chunk: c, subchunk: 0, bin: 0, group: 0 };
            let checksum = crc32c::crc32c(&stored);
            let entry = SegmentEntry {
                key,
                codec,
                offset,
                length,
                raw_length,
                checksum,
                count: s.count,
                min: s.min,
                max: s.max,
            };
            Ok((entry, values))
        };
        // Equal-frequency bins sample about QUANTILE_SAMPLE valid values, chunk by chunk.
        let total: u64 = shape.iter().product();
        let stride = total.div_ceil(crate::bins::QUANTILE_SAMPLE as u64).max(1) as usize;
        let sampling = matches!(self.bin_rule, Some(BinRule::EqualFrequency { .. }));
        let mut report = Indexed::default();
        let mut entries = Vec::with_capacity(all.len());
        let mut sample = Vec::new();
        for batch in all.chunks(BATCH) {
            let done: Vec<Result<(SegmentEntry, Vec<f64>)>> = batch
                .par_iter()
                .map(|&(c, place)| {
                    let (entry, values) = decode(c, place)?;
                    let mut picked = Vec::new();
                    if sampling {
                        let mut i = 0usize;
                        dtype.for_each_f64(&values, |v| {
                            if i.is_multiple_of(stride) && !v.is_nan() && !missing.contains(&v) {
                                picked.push(v);
                            }
                            i += 1;
                        });
                    }
                    Ok((entry, picked))
                })
                .collect();
            for d in done {
                let (entry, picked) = d?;
                report.chunks += 1;
                report.bytes_read += entry.length;
                report.raw_bytes += entry.raw_length;
                entries.push(entry);
                sample.extend(picked);
            }
        }
        let mut bitmaps = Vec::new();
        if let Some(rule) = &self.bin_rule {
            // Level V: bins over the whole variable, then each chunk read again and split:
            // every bin's entry names the whole chunk, with the bin's own summary.
            let summary = || {
                let mut s = crate::dtype::ValueSummary::empty();
                for e in entries.iter().filter(|e| e.count > 0) {
                    (s.min, s.max) = if s.count == 0 { (e.min, e.max) } else { (s.min.min(e.min), s.max.max(e.max)) };
                    s.count += e.count;
                }
                s
            };
            let bins = rule.resolve_with(summary, || std::mem::take(&mut sample));
            let mut counts = vec![0u64; bins.missing_bin() as usize + 1];
            let mut binned = Vec::with_capacity(entries.len());
            for batch in all.chunks(BATCH) {
                let done: Vec<Result<Vec<(SegmentEntry, BinPositions)>>> = batch
                    .par_iter()
                    .map(|&(c, place)| {
                        let (whole, values) = decode(c, place)?;
                        Ok(bins
                            .split(&values, dtype, &missing)
                            .into_iter()
                            .map(|(bin, positions, bytes)| {
                                let s = dtype.summarize(&bytes, &missing);
                                let key = SegmentKey { bin, ..whole.key };
                                let entry = SegmentEntry { key, count: s.count, min: s.min, max: s.max, ..whole };
                                (entry, BinPositions { var: idx as u32, chunk: c, subchunk: 0, bin, positions })
                            })
                            .collect())
                    })
                    .collect();
                for d in done {
                    for (entry, positions) in d? {
                        counts[entry.key.bin as usize] += positions.positions.len();
                        binned.push(entry);
                        bitmaps.push(positions);
                    }
                }
            }
            report.bytes_read *= 2;
            entries = binned;
            self.bins.push(BinSummary { var: idx as u32, boundaries: bins.boundaries().to_vec(), counts });
        }
        self.bitmaps.entry(if record { 1 } else { 0 }).or_default().extend(bitmaps);
        let slab = if record { 1 } else { 0 };
        if record {
            self.draft.slab_records = self.draft.slab_records.max(chunk[0]);
        }
        self.segments.entry(slab).or_default().extend(entries);
        let v = &mut self.draft.variables[idx];
        v.chunking = Some(Chunking { subchunk: chunk.clone(), chunk });
        v.codecs = chains;
        Ok(report)
    }

    /// Writes the index files and publishes the version; returns its number.
    pub fn commit(mut self, message: &str) -> Result<u64> {
        if let Some(v) = self.draft.variables.iter().find(|v| v.dtype != DType::String && v.chunking.is_none()) {
            return Err(Error::InvalidArgument(format!("'{}' was not indexed: every variable must be", v.name)));
        }
        let records = self.draft.record_dim.as_deref().and_then(|r| self.draft.dim(r)).map_or(0, |d| d.size);
        self.draft.slab_records = self.draft.slab_records.max(records).max(1);
        let modified_ns = self.beside.modified_ns(&self.file)?;
        let crc = file_crc(&*self.beside, &self.file, self.size)?;
        if self.beside.size(&self.file)? != self.size || self.beside.modified_ns(&self.file)? != modified_ns {
            return Err(Error::Conflict(format!("'{}' changed while it was being indexed: index it again", self.file)));
        }
        self.draft.files.push(FileEntry {
            path: self.file.clone(),
            size: self.size,
            crc32c: crc,
            external: true,
            modified_ns,
        });
        let has_static = self.draft.variables.iter().any(|v| v.chunking.is_some() && !self.draft.is_record_var(v));
        let has_record = records > 0 && self.draft.variables.iter().any(|v| self.draft.is_record_var(v));
        let mut written = HashMap::new();
        for (id, wanted) in [(0u64, has_static), (1, has_record)] {
            if !wanted {
                continue;
            }
            let mut segments = self.segments.remove(&id).unwrap_or_default();
            segments.sort_by_key(|e| (e.key.var, e.key.chunk));
            let path = format!("index/s{id:06}-{}.sidx", random_suffix());
            let bitmaps = self.bitmaps.remove(&id).unwrap_or_default();
            let in_slab: Vec<u32> = segments.iter().map(|e| e.key.var).collect();
            let bins = self.bins.iter().filter(|b| in_slab.contains(&b.var)).cloned().collect();
            let bytes = index_file::encode(&SlabIndexData { slab_id: id, segments, bitmaps, bins });
            self.store.storage().write_atomic(&path, &bytes)?;
            self.draft.files.push(FileEntry::new(path.clone(), &bytes));
            written.insert(id, path);
        }
        for (id, index) in [(0u64, written.remove(&0)), (1, written.remove(&1))] {
            let Some(index) = index else { continue };
            let records = (id == 1).then_some([0, records]);
            self.draft.slabs.push(Slab { id, records, data: self.file.clone(), index });
        }
        self.draft.created_ms = now_ms();
        self.draft.message = message.to_string();
        self.draft.validate()?;
        self.store.commit(&self.draft)?;
        Ok(self.draft.version)
    }
}

/// The CRC-32C of a whole file, read in pieces (memory bounded whatever its size).
pub(crate) fn file_crc(storage: &dyn Storage, path: &str, size: u64) -> Result<u32> {
    const PIECE: u64 = 16 << 20;
    let mut crc = 0u32;
    let mut at = 0;
    while at < size {
        let piece = storage.read_range(path, at, PIECE.min(size - at))?;
        if piece.is_empty() {
            return Err(Error::Corruption(format!("'{path}' ended at {at} of {size} bytes")));
        }
        crc = crc32c::crc32c_append(crc, &piece);
        at += piece.len() as u64;
    }
    Ok(crc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reader::{DimSelection, StoreReader};
    use crate::storage::MemoryStorage;
    use crate::writer::VariableSchema;
    use std::io::Write;

    fn f32s(bytes: &[u8]) -> Vec<f32> {
        bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
    }

    /// A "file" of 40 junk bytes, then `a` (contiguous, 6x7 f32), then `b` (5x4 f32 in 2x3
    /// chunks, deflated, one chunk never written), as HDF5 would lay them out.
    fn file_and_spec() -> (Vec<u8>, Vec<f32>, Vec<f32>, DatasetSchema, Vec<SourceVariable>) {
        let mut file = vec![7u8; 40];
        let a: Vec<f32> = (0..42).map(|i| i as f32 - 10.0).collect();
        file.extend(a.iter().flat_map(|v| v.to_le_bytes()));
        let b: Vec<f32> = (0..20).map(|i| 100.0 + i as f32).collect();
        let mut chunks = vec![];
        for (ci, cj) in [(0u64, 0u64), (0, 3), (2, 0), (4, 0), (4, 3)] {
            // The chunk at (2, 3) is left unwritten: it reads as the fill value.
            let mut raw = [0f32; 6];
            for i in 0..2 {
                for j in 0..3 {
                    let (r, c) = (ci as usize + i, cj as usize + j);
                    raw[i * 3 + j] = if r < 5 && c < 4 { b[r * 4 + c] } else { -1.0 };
                }
            }
            let bytes: Vec<u8> = raw.iter().flat_map(|v| v.to_le_bytes()).collect();
            let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::new(4));
            z.write_all(&bytes).unwrap();
            let stored = z.finish().unwrap();
            chunks.push(SourceChunk {
                origin: vec![ci, cj],
                offset: file.len() as u64,
                length: stored.len() as u64,
                filter_mask: 0,
            });
            file.extend(stored);
        }
        let mut b_read = b.clone();
        for r in 2..4 {
            for c in 3..4 {
                b_read[r * 4 + c] = -1.0;
            }
        }
        let dim = |n: &str, size| crate::manifest::Dim { name: n.into(), size, unlimited: false };
        let var = |n: &str, dims: &[&str]| VariableSchema {
            name: n.into(),
            dtype: DType::F32,
            dims: dims.iter().map(|d| d.to_string()).collect(),
            attrs: vec![],
            inline_strings: None,
        };
        let schema = DatasetSchema {
            dims: vec![dim("y", 6), dim("x", 7), dim("r", 5), dim("c", 4)],
            record_dim: None,
            attrs: vec![],
            variables: vec![var("a", &["y", "x"]), var("b", &["r", "c"])],
        };
        let sources = vec![
            SourceVariable {
                name: "a".into(),
                storage: SourceStorage::Contiguous { offset: Some(40), big_endian: false },
                fill: None,
            },
            SourceVariable {
                name: "b".into(),
                storage: SourceStorage::Chunked {
                    chunk: vec![2, 3],
                    filters: vec!["deflate".into()],
                    big_endian: false,
                    chunks,
                },
                fill: Some((-1f32).to_le_bytes().to_vec()),
            },
        ];
        (file, a, b_read, schema, sources)
    }

    fn read_all(reader: &StoreReader, name: &str, shape: &[u64]) -> Result<Vec<f32>> {
        let sel: Vec<DimSelection> = shape.iter().map(|&n| DimSelection { start: 0, stop: n, step: 1 }).collect();
        let mut out = vec![0u8; shape.iter().product::<u64>() as usize * 4];
        reader.read_into(name, &sel, &mut out)?;
        Ok(f32s(&out))
    }

    #[test]
    fn a_file_indexed_in_place_reads_back_exactly_and_refuses_changes() {
        let (file, a, b, schema, sources) = file_and_spec();
        let beside: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
        beside.write_atomic("run.nc", &file).unwrap();
        let store = Store::new(Arc::new(MemoryStorage::new()), "run.nc.strata").with_beside(beside.clone());
        let mut ix = InPlaceIndexer::new(store.clone(), "run.nc", schema, None).unwrap();
        for s in sources {
            ix.add(s).unwrap();
        }
        assert_eq!(ix.commit("index run.nc").unwrap(), 1);
        let reader = StoreReader::open(store.clone(), None).unwrap();
        assert_eq!(read_all(&reader, "a", &[6, 7]).unwrap(), a);
        assert_eq!(read_all(&reader, "b", &[5, 4]).unwrap(), b);
        // The summaries are the chunks' values: a's first piece holds -10..
        let stats = reader.variable_stats().unwrap();
        assert!(!stats.is_empty());
        assert!(crate::verify::verify(store.clone(), None, true).unwrap().is_clean());
        assert!(crate::writer::StoreWriter::open_append(store.clone()).is_err());

        // With value bins: every bin names the whole chunk and reads back the same.
        let (_, _, _, schema, sources) = file_and_spec();
        let binned = Store::new(Arc::new(MemoryStorage::new()), "binned").with_beside(beside.clone());
        let rule = BinRule::EqualFrequency { count: 4 };
        let mut ix = InPlaceIndexer::new(binned.clone(), "run.nc", schema, Some(rule)).unwrap();
        for s in sources {
            assert!(ix.add(s).unwrap().chunks > 0);
        }
        ix.commit("index run.nc").unwrap();
        let reader = StoreReader::open(binned.clone(), None).unwrap();
        assert_eq!(reader.manifest().layout.order, vec![Level::V, Level::S]);
        assert_eq!(read_all(&reader, "a", &[6, 7]).unwrap(), a);
        assert_eq!(read_all(&reader, "b", &[5, 4]).unwrap(), b);
        assert!(crate::verify::verify(binned, None, true).unwrap().is_clean());

        // A byte of a chunk changed: the read touching it fails; the other variable reads.
        let mut damaged = file.clone();
        let last = damaged.len() - 3;
        damaged[last] ^= 0x40;
        beside.write_atomic("run.nc", &damaged).unwrap();
        let reader = StoreReader::open(store.clone(), None).unwrap();
        assert!(matches!(read_all(&reader, "b", &[5, 4]), Err(Error::Corruption(_))));
        assert_eq!(read_all(&reader, "a", &[6, 7]).unwrap(), a);
        assert!(!crate::verify::verify(store.clone(), None, false).unwrap().is_clean());
        // The file cut short: refused before any chunk is read.
        beside.write_atomic("run.nc", &file[..file.len() - 1]).unwrap();
        let reader = StoreReader::open(store, None).unwrap();
        let e = read_all(&reader, "a", &[6, 7]).unwrap_err();
        assert!(e.to_string().contains("changed since it was indexed"), "{e}");
    }

    #[test]
    fn contiguous_pieces_are_runs_of_about_the_target() {
        assert_eq!(contiguous_pieces(&[684, 89, 180], 4), vec![1, 89, 180]);
        assert_eq!(contiguous_pieces(&[10], 8), vec![10]);
        assert_eq!(contiguous_pieces(&[], 4), Vec::<u64>::new());
        assert_eq!(contiguous_pieces(&[3, 1_000_000], 4), vec![1, 16_384]);
    }
}
