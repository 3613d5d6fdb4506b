//! `strata._core`: the thin bridge between the Python package and strata-core.
//!
//! Buffers go in and out as flat `uint8` NumPy arrays (the Python side views them with the
//! right dtype and shape), the GIL is released around every read, encode and write, and
//! errors become the exception classes defined in `strata.errors`.

use numpy::{PyReadonlyArray1, PyReadwriteArray1};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::PyType;
use std::sync::{Arc, Mutex};
use strata_core::reader::DimSelection;
use strata_core::storage::MemoryStorage;
use strata_core::stream::StreamWriter;
use strata_core::writer::DatasetSchema;
use strata_core::{Error, ErrorKind, Store, StoreReader, StoreWriter, WriterOptions};

mod allocator;
mod analysis;
mod columns;
mod engine;
mod in_place;
mod labels;
mod parallel;
mod schema;
mod summaries;

fn to_py(e: Error) -> PyErr {
    exception(e.kind(), e.to_string())
}

/// The `strata.errors` exception for an error of `kind` with its formatted message.
fn exception(kind: ErrorKind, message: String) -> PyErr {
    let class = match kind {
        ErrorKind::Io => "StrataIOError",
        ErrorKind::Corruption => "CorruptionError",
        ErrorKind::InvalidArgument => "InvalidArgumentError",
        ErrorKind::Compatibility => "CompatibilityError",
        ErrorKind::NotFound => "NotFoundError",
        ErrorKind::Conflict => "ConflictError",
    };
    Python::attach(|py| {
        let ty = py.import("strata.errors").and_then(|m| m.getattr(class)).and_then(|c| Ok(c.cast_into::<PyType>()?));
        match ty {
            Ok(ty) => PyErr::from_type(ty, message),
            Err(_) => PyRuntimeError::new_err(message),
        }
    })
}

/// The bytes of a contiguous `data` array (a writer's input).
fn slice<'a>(data: &'a PyReadonlyArray1<'_, u8>) -> PyResult<&'a [u8]> {
    data.as_slice().map_err(|e| to_py(Error::InvalidArgument(format!("data: {e}"))))
}

fn json_arg<T: serde::de::DeserializeOwned>(text: &str, what: &str) -> PyResult<T> {
    serde_json::from_str(text).map_err(|e| {
        // The text is the Python layer's own JSON: a place in it tells the user nothing.
        let message = e.to_string();
        let place = format!(" at line {} column {}", e.line(), e.column());
        let message = message.strip_suffix(&place).unwrap_or(&message);
        to_py(Error::InvalidArgument(format!("bad {what}: {message}")))
    })
}

fn selection(starts: &[u64], stops: &[u64], steps: &[u64]) -> PyResult<Vec<DimSelection>> {
    if starts.len() != stops.len() || starts.len() != steps.len() {
        return Err(to_py(Error::InvalidArgument("starts, stops and steps differ in length".into())));
    }
    Ok(starts.iter().zip(stops).zip(steps).map(|((&start, &stop), &step)| DimSelection { start, stop, step }).collect())
}

/// A pinned version of a store, open for reading.
#[pyclass(frozen, module = "strata._core")]
struct Reader {
    inner: StoreReader,
}

#[pymethods]
impl Reader {
    #[staticmethod]
    #[pyo3(signature = (path, version=None, cache_bytes=None))]
    fn open(py: Python<'_>, path: &str, version: Option<u64>, cache_bytes: Option<u64>) -> PyResult<Self> {
        let cache = cache_bytes.unwrap_or(strata_core::cache::DEFAULT_CACHE_BYTES);
        let inner = py.detach(|| StoreReader::open_with_cache(Store::local(path), version, cache)).map_err(to_py)?;
        Ok(Self { inner })
    }

    /// The manifest as stored (JSON text), for `Dataset.manifest`: users' view of the format.
    fn manifest_json(&self) -> String {
        String::from_utf8(self.inner.manifest().to_json()).unwrap_or_default()
    }

    /// The version's dimensions, attributes, variables and layout as typed objects.
    fn schema(&self, py: Python<'_>) -> PyResult<schema::Schema> {
        schema::Schema::of(py, self.inner.manifest())
    }

    /// Reads `name[starts:stops:steps]` into `out`, a flat uint8 array of the exact size,
    /// at precision `level` (byte groups read) when given.
    #[pyo3(signature = (name, starts, stops, steps, out, level=None))]
    #[allow(clippy::too_many_arguments)] // one Python call, flat arguments
    fn read_into(
        &self,
        py: Python<'_>,
        name: &str,
        starts: Vec<u64>,
        stops: Vec<u64>,
        steps: Vec<u64>,
        mut out: PyReadwriteArray1<'_, u8>,
        level: Option<usize>,
    ) -> PyResult<()> {
        let sel = selection(&starts, &stops, &steps)?;
        let buf = out.as_slice_mut().map_err(|e| to_py(Error::InvalidArgument(format!("output buffer: {e}"))))?;
        py.detach(|| self.inner.read_into_at(name, &sel, level, buf)).map_err(to_py)
    }

    /// The values of `name` at the flat indices `flat` into `out` (flat uint8 array of
    /// `len(flat) * itemsize` bytes), at precision `level` when given.
    #[pyo3(signature = (name, flat, out, level=None))]
    fn gather(
        &self,
        py: Python<'_>,
        name: &str,
        flat: PyReadonlyArray1<'_, u64>,
        mut out: PyReadwriteArray1<'_, u8>,
        level: Option<usize>,
    ) -> PyResult<()> {
        let flat = flat.as_slice().map_err(|e| to_py(Error::InvalidArgument(format!("indices: {e}"))))?;
        let buf = out.as_slice_mut().map_err(|e| to_py(Error::InvalidArgument(format!("output buffer: {e}"))))?;
        py.detach(|| strata_core::query::Executor::new(&self.inner).gather(name, flat, level, buf)).map_err(to_py)
    }

    /// The region `starts:stops:steps` of a query driven by `name` cut into pieces
    /// (`strata_core::query::pieces::split_records`): each piece's (starts, stops).
    #[pyo3(signature = (name, starts, stops, steps, records=None))]
    fn pieces(
        &self,
        name: &str,
        starts: Vec<u64>,
        stops: Vec<u64>,
        steps: Vec<u64>,
        records: Option<u64>,
    ) -> PyResult<Vec<(Vec<u64>, Vec<u64>)>> {
        let sel = selection(&starts, &stops, &steps)?;
        Ok(strata_core::query::pieces::split_records(&self.inner, name, &sel, records)
            .map_err(to_py)?
            .iter()
            .map(|p| (p.iter().map(|d| d.start).collect(), p.iter().map(|d| d.stop).collect()))
            .collect())
    }

    /// Whether `name` is an auxiliary coordinate of variables on `dims` (2-D lat/lon, a
    /// mesh's coordinates: not one of `dims`, spanning only some of them).
    fn is_auxiliary(&self, dims: Vec<String>, name: &str) -> bool {
        strata_core::area::is_auxiliary(self.inner.manifest(), &dims, name)
    }

    /// The auxiliary coordinates the CF `coordinates` attribute of `name` names.
    fn auxiliary_coordinates(&self, name: &str) -> PyResult<Vec<String>> {
        let m = self.inner.manifest();
        Ok(strata_core::area::auxiliary_coordinates(m, m.variable(name).map_err(to_py)?.1))
    }

    /// Precision levels of a variable split by level M: (level, bytes kept, worst relative
    /// error) for each; empty when the variable is not split.
    fn precision_levels(&self, name: &str) -> PyResult<Vec<(usize, usize, f64)>> {
        let Some(groups) = self.inner.byte_groups(name).map_err(to_py)? else { return Ok(vec![]) };
        let dtype = self.inner.manifest().variable(name).map_err(to_py)?.1.dtype;
        Ok((1..=groups.len())
            .map(|k| {
                let kept = groups[..k].iter().sum();
                (k, kept, strata_core::precision::relative_error(dtype, &groups, k))
            })
            .collect())
    }

    /// Counters since this reader was opened:
    /// (requests, bytes_read, segments_decoded, index_loads, cache_hits).
    fn read_stats(&self) -> (u64, u64, u64, u64, u64) {
        let s = self.inner.stats();
        (s.requests, s.bytes_read, s.segments_decoded, s.index_loads, s.cache_hits)
    }

    /// Per variable: raw and stored bytes, segment count, valid count, min and max.
    fn variable_stats(&self, py: Python<'_>) -> PyResult<Vec<summaries::VariableStats>> {
        let stats = py.detach(|| self.inner.variable_stats()).map_err(to_py)?;
        Ok(self
            .inner
            .manifest()
            .variables
            .iter()
            .zip(stats)
            .map(|(v, s)| summaries::VariableStats {
                name: v.name.clone(),
                raw_bytes: s.raw_bytes,
                stored_bytes: s.stored_bytes,
                segments: s.segments,
                count: s.count,
                min: (s.count > 0).then_some(s.min),
                max: (s.count > 0).then_some(s.max),
            })
            .collect())
    }
}

/// Writes a new store, or new slabs of an existing one, then commits a version.
#[pyclass(frozen, module = "strata._core")]
struct Writer {
    inner: Mutex<Option<StreamWriter>>,
}

impl Writer {
    fn with<T>(&self, py: Python<'_>, f: impl FnOnce(&mut StreamWriter) -> strata_core::Result<T> + Send) -> PyResult<T>
    where
        T: Send,
    {
        py.detach(|| {
            let mut guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
            let w = guard.as_mut().ok_or_else(|| Error::InvalidArgument("this writer has already committed".into()))?;
            f(w)
        })
        .map_err(to_py)
    }
}

#[pymethods]
impl Writer {
    #[staticmethod]
    fn create(py: Python<'_>, path: &str, schema_json: &str, options_json: &str) -> PyResult<Self> {
        let schema: DatasetSchema = json_arg(schema_json, "schema")?;
        let options: WriterOptions = json_arg(options_json, "writer options")?;
        let w = py.detach(|| StoreWriter::create(Store::local(path), schema, &options)).map_err(to_py)?;
        Ok(Self { inner: Mutex::new(Some(StreamWriter::new(w))) })
    }

    /// A writer over memory that only plans (`preview`): what an import would choose, with
    /// nothing written anywhere.
    #[staticmethod]
    fn create_preview(py: Python<'_>, schema_json: &str, options_json: &str) -> PyResult<Self> {
        let schema: DatasetSchema = json_arg(schema_json, "schema")?;
        let options: WriterOptions = json_arg(options_json, "writer options")?;
        let store = Store::new(Arc::new(MemoryStorage::new()), "preview");
        let w = py.detach(|| StoreWriter::create(store, schema, &options)).map_err(to_py)?;
        Ok(Self { inner: Mutex::new(Some(StreamWriter::new(w))) })
    }

    /// Plans variable `name` from `data` (whole, or a record variable's first slab) without
    /// writing it (`StoreWriter::preview`); `schema()` then shows the plan.
    fn preview(&self, py: Python<'_>, name: &str, data: PyReadonlyArray1<'_, u8>) -> PyResult<()> {
        let bytes = slice(&data)?;
        self.with(py, |w| w.direct()?.preview(name, bytes))
    }

    /// `options_json` may give `variable_codecs` (chains for new slabs) and `plans`.
    #[staticmethod]
    #[pyo3(signature = (path, options_json="{}"))]
    fn open_append(py: Python<'_>, path: &str, options_json: &str) -> PyResult<Self> {
        let options: WriterOptions = json_arg(options_json, "append options")?;
        let w = py.detach(|| StoreWriter::open_append_with(Store::local(path), &options)).map_err(to_py)?;
        Ok(Self { inner: Mutex::new(Some(StreamWriter::new(w))) })
    }

    /// The manifest the writer works on, as typed objects.
    fn schema(&self, py: Python<'_>) -> PyResult<schema::Schema> {
        let manifest = self.with(py, |w| Ok(w.with_writer(|w| w.manifest().clone())))?;
        schema::Schema::of(py, &manifest)
    }

    fn slab_records(&self, py: Python<'_>) -> PyResult<u64> {
        self.with(py, |w| Ok(w.slab_records()))
    }

    fn record_count(&self, py: Python<'_>) -> PyResult<u64> {
        self.with(py, |w| Ok(w.record_count()))
    }

    /// Attributes (the manifest's typed form, as JSON) of the store or of variable `var`.
    #[pyo3(signature = (var, attrs_json))]
    fn set_attributes(&self, py: Python<'_>, var: Option<&str>, attrs_json: &str) -> PyResult<()> {
        let attrs: Vec<strata_core::manifest::Attribute> = json_arg(attrs_json, "attributes")?;
        self.with(py, |w| w.set_attributes(var, attrs))
    }

    fn put_static(&self, py: Python<'_>, name: &str, data: PyReadonlyArray1<'_, u8>) -> PyResult<()> {
        let bytes = slice(&data)?;
        self.with(py, |w| w.put_static(name, bytes))
    }

    /// A block of a static variable, `shape` elements from `origin` (whole chunks:
    /// `static_piece` gives such a shape).
    fn put_static_block(
        &self,
        py: Python<'_>,
        name: &str,
        origin: Vec<u64>,
        shape: Vec<u64>,
        data: PyReadonlyArray1<'_, u8>,
    ) -> PyResult<()> {
        let bytes = slice(&data)?;
        self.with(py, |w| w.put_static_block(name, &origin, &shape, bytes))
    }

    /// The block shape to write static variable `name` in (empty: write it whole).
    fn static_piece(&self, py: Python<'_>, name: &str) -> PyResult<Vec<u64>> {
        self.with(py, |w| w.static_piece(name))
    }

    fn begin_slab(&self, py: Python<'_>, records: u64) -> PyResult<()> {
        self.with(py, |w| w.direct()?.begin_slab(records))
    }

    fn put_records(&self, py: Python<'_>, name: &str, data: PyReadonlyArray1<'_, u8>) -> PyResult<()> {
        let bytes = slice(&data)?;
        self.with(py, |w| w.direct()?.put_records(name, bytes))
    }

    fn finish_slab(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, |w| w.direct()?.finish_slab())
    }

    /// Whether full slabs are written on the writer's own thread while Python goes on.
    fn set_overlap(&self, py: Python<'_>, on: bool) -> PyResult<()> {
        self.with(py, |w| {
            w.set_overlap(on);
            Ok(())
        })
    }

    /// Lets a variable run `records` ahead of the others beyond a slab (None: no bound).
    #[pyo3(signature = (records))]
    fn allow_ahead(&self, py: Python<'_>, records: Option<u64>) -> PyResult<()> {
        self.with(py, |w| {
            w.allow_ahead(records);
            Ok(())
        })
    }

    /// Whole records of one record variable, as a simulation produces them; full slabs are
    /// laid out, compressed and written as they complete.
    fn append(&self, py: Python<'_>, name: &str, data: PyReadonlyArray1<'_, u8>) -> PyResult<()> {
        let bytes = slice(&data)?;
        self.with(py, |w| w.append(name, bytes))
    }

    fn commit(&self, py: Python<'_>, message: &str) -> PyResult<u64> {
        py.detach(|| {
            let w = self
                .inner
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take()
                .ok_or_else(|| Error::InvalidArgument("this writer has already committed".into()))?;
            w.commit(message)
        })
        .map_err(to_py)
    }
}

/// A SQL session over stores (strata-sql, DataFusion).
#[pyclass(frozen, module = "strata._core")]
struct SqlSession {
    inner: strata_sql::SqlSession,
}

#[pymethods]
impl SqlSession {
    /// `stores`: (path, table name or None). `force`: "index"/"scan" for every piece.
    #[staticmethod]
    #[pyo3(signature = (stores, session, method="auto", partitions=None, cache_bytes=None))]
    fn open(
        py: Python<'_>,
        stores: Vec<(String, Option<String>)>,
        session: &engine::Session,
        method: &str,
        partitions: Option<usize>,
        cache_bytes: Option<u64>,
    ) -> PyResult<Self> {
        let force = strata_core::session::parse_method(method).map_err(to_py)?;
        let options = strata_sql::SqlOptions {
            session: session.inner.clone(),
            force,
            target_partitions: partitions,
            cache_bytes,
            caches: None,
        };
        let inner = py.detach(|| strata_sql::SqlSession::open(&stores, options)).map_err(to_py)?;
        Ok(Self { inner })
    }

    /// (table name, its variables comma-separated) for every registered table.
    fn tables(&self) -> Vec<(String, String)> {
        self.inner.tables()
    }

    /// Plans and starts a query; its result streams from the returned object.
    fn execute(&self, py: Python<'_>, sql: &str) -> PyResult<SqlStream> {
        let stream = py.detach(|| self.inner.execute(sql)).map_err(to_py)?;
        Ok(SqlStream { inner: Mutex::new(Some(stream)), error: Arc::new(Mutex::new(None)) })
    }

    /// Pieces run after the first `mark` (0: the most recent ones kept): (method,
    /// estimated seconds, observed seconds).
    #[pyo3(signature = (mark=0))]
    fn pieces_run(&self, mark: u64) -> Vec<(String, f64, f64)> {
        self.inner
            .pieces_run(mark)
            .into_iter()
            .map(|r| (r.method.name().to_string(), r.estimated_s, r.observed_s))
            .collect()
    }

    /// How many pieces this session ran.
    fn pieces_run_count(&self) -> u64 {
        self.inner.pieces_run_count()
    }
}

/// The first error a query's stream met: (kind, message), kept for the typed exception.
type StreamError = Arc<Mutex<Option<(ErrorKind, String)>>>;

/// Adapts a query's batches to arrow's reader interface for the C stream export.
struct ArrowReader {
    stream: strata_sql::BatchStream,
    error: StreamError,
}

impl Iterator for ArrowReader {
    type Item = Result<arrow::record_batch::RecordBatch, arrow::error::ArrowError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.stream.next().map(|r| {
            r.map_err(|e| {
                let mut slot = self.error.lock().unwrap_or_else(|p| p.into_inner());
                slot.get_or_insert((e.kind(), e.to_string()));
                arrow::error::ArrowError::ExternalError(Box::new(e))
            })
        })
    }
}

impl arrow::record_batch::RecordBatchReader for ArrowReader {
    fn schema(&self) -> arrow::datatypes::SchemaRef {
        self.stream.schema()
    }
}

/// A query's result, exported once through the Arrow C stream interface
/// (`pyarrow.RecordBatchReader.from_stream(obj)`).
#[pyclass(frozen, module = "strata._core")]
struct SqlStream {
    inner: Mutex<Option<strata_sql::BatchStream>>,
    error: StreamError,
}

#[pymethods]
impl SqlStream {
    /// Raises the typed exception for the error the stream met, if any.
    fn raise_error(&self) -> PyResult<()> {
        match self.error.lock().unwrap_or_else(|p| p.into_inner()).take() {
            Some((kind, message)) => Err(exception(kind, message)),
            None => Ok(()),
        }
    }

    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_stream__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, pyo3::types::PyCapsule>> {
        let _ = requested_schema; // the result has one schema; pyarrow casts if it must
        let stream = self
            .inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .ok_or_else(|| to_py(Error::InvalidArgument("this result has already been read".into())))?;
        let reader = ArrowReader { stream, error: self.error.clone() };
        let ffi = arrow::ffi_stream::FFI_ArrowArrayStream::new(Box::new(reader));
        pyo3::types::PyCapsule::new_with_value(py, ffi, c"arrow_array_stream")
    }
}

/// The codecs this build knows: (name, kind, option set by `name:N` in a short chain).
#[pyfunction]
fn known_codecs() -> Vec<(String, String, Option<String>)> {
    strata_codecs::registry::KNOWN.iter().map(|(n, k, o)| (n.to_string(), k.to_string(), o.map(String::from))).collect()
}

/// Blocks the planner samples: (start per dimension) for `count` blocks of shape `block`
/// inside `extent`, seeded by the variable's name (the rule of `strata_core::sampling`).
#[pyfunction]
fn sample_starts(name: &str, extent: Vec<u64>, block: Vec<u64>, count: usize) -> Vec<Vec<u64>> {
    strata_core::sampling::block_starts(&extent, &block, count, strata_core::sampling::seed_of(name))
}

/// The decoded `units` of CF time `values`, and the values as a slice.
fn time_units<'a>(
    values: &'a PyReadonlyArray1<'_, f64>,
    units: &str,
    calendar: Option<&str>,
) -> PyResult<(strata_core::cftime::TimeUnits, &'a [f64])> {
    let t = strata_core::cftime::TimeUnits::parse(units, calendar).map_err(to_py)?;
    let values = values.as_slice().map_err(|e| to_py(Error::InvalidArgument(format!("values: {e}"))))?;
    Ok((t, values))
}

/// CF time `values` in `units` and `calendar` as microseconds since 1970-01-01 (proleptic
/// Gregorian), or None when one of them is not a timestamp's date (another calendar, a
/// standard-calendar date before 1582-10-15, a NaN).
#[pyfunction]
#[pyo3(signature = (values, units, calendar=None))]
fn cf_unix_micros<'py>(
    py: Python<'py>,
    values: PyReadonlyArray1<'_, f64>,
    units: &str,
    calendar: Option<&str>,
) -> PyResult<Option<Bound<'py, numpy::PyArray1<i64>>>> {
    let (t, values) = time_units(&values, units, calendar)?;
    let out = py.detach(|| t.all_unix_micros(values));
    Ok(out.map(|v| numpy::PyArray1::from_vec(py, v)))
}

/// CF time `values` in `units` and `calendar` as dates of that calendar: (year, month, day,
/// microseconds into the day) per value, flattened; None when one does not decode (a NaN).
#[pyfunction]
#[pyo3(signature = (values, units, calendar=None))]
fn cf_date_fields<'py>(
    py: Python<'py>,
    values: PyReadonlyArray1<'_, f64>,
    units: &str,
    calendar: Option<&str>,
) -> PyResult<Option<Bound<'py, numpy::PyArray1<i64>>>> {
    let (t, values) = time_units(&values, units, calendar)?;
    let out = py.detach(|| {
        let mut out = Vec::with_capacity(values.len() * 4);
        for &v in values {
            let d = t.date(v)?;
            out.extend([d.year, i64::from(d.month), i64::from(d.day), d.micros]);
        }
        Some(out)
    });
    Ok(out.map(|v| numpy::PyArray1::from_vec(py, v)))
}

/// The columns of a points result at the flat indices `flat` (ascending) into the grid of
/// `variable`: (dims, aux) as `Session.points` gives them, built by the same code.
#[pyfunction]
#[allow(clippy::type_complexity)]
fn points_at<'py>(
    py: Python<'py>,
    reader: &Reader,
    variable: &str,
    flat: PyReadonlyArray1<'_, u64>,
    coordinates: Vec<Option<(PyReadonlyArray1<'py, u8>, usize)>>,
    indices: Vec<bool>,
    aux: Vec<(String, PyReadonlyArray1<'py, u8>)>,
) -> PyResult<(engine::PointDims<'py>, Vec<Bound<'py, numpy::PyArray1<u8>>>)> {
    let m = reader.inner.manifest();
    let (_, var) = m.variable(variable).map_err(to_py)?;
    let (dims, shape) = (var.dims.clone(), m.shape(var));
    let columns = engine::point_columns(reader, &dims, coordinates, indices, aux, false)?;
    let flat = flat.as_slice().map_err(|e| to_py(Error::InvalidArgument(format!("flat: {e}"))))?.to_vec();
    let piece = strata_core::query::Points { flat, columns: vec![] };
    let joined = py
        .detach(|| {
            let mut joined = strata_core::joined::Joined::new(shape, columns, vec![])?;
            joined.add(std::slice::from_ref(&piece))?;
            Ok::<_, Error>(joined)
        })
        .map_err(to_py)?;
    engine::shaped(py, joined, true)
}

/// Verifies a store version (the newest when None): (version, files, bytes, segments,
/// problems), each problem (file, slab, variable, segment, what). `deep` also decodes
/// every segment.
#[pyfunction]
#[pyo3(signature = (path, version=None, deep=false))]
#[allow(clippy::type_complexity)]
fn verify(
    py: Python<'_>,
    path: &str,
    version: Option<u64>,
    deep: bool,
) -> PyResult<(u64, u64, u64, u64, Vec<(String, Option<u64>, Option<String>, Option<String>, String)>)> {
    let r = py.detach(|| strata_core::verify::verify(Store::local(path), version, deep)).map_err(to_py)?;
    let problems = r.problems.into_iter().map(|p| (p.file, p.slab, p.variable, p.segment, p.what)).collect();
    Ok((r.version, r.files, r.bytes, r.segments, problems))
}

/// Removes the files no version of the store names, once older than `grace_s` seconds
/// (see `strata_core::gc`): (versions, removed (path, bytes), young paths left).
#[pyfunction]
#[pyo3(signature = (path, grace_s=3600.0, dry_run=false))]
#[allow(clippy::type_complexity)]
fn gc(py: Python<'_>, path: &str, grace_s: f64, dry_run: bool) -> PyResult<(usize, Vec<(String, u64)>, Vec<String>)> {
    if !(grace_s >= 0.0 && grace_s.is_finite()) {
        return Err(to_py(Error::InvalidArgument(format!("grace must be a number of seconds >= 0, not {grace_s}"))));
    }
    let store = Store::local(path);
    let grace = std::time::Duration::from_secs_f64(grace_s);
    let r = py.detach(|| strata_core::gc::collect(&store, grace, dry_run)).map_err(to_py)?;
    Ok((r.versions, r.removed, r.young))
}

/// The automatic block shape rule (docs/format.md, "Chunk shapes").
#[pyfunction]
fn auto_shape(shape: Vec<u64>, element_size: u64, target_bytes: u64) -> Vec<u64> {
    strata_core::chunking::auto_shape(&shape, element_size, target_bytes)
}

/// The block shape a large array is moved in (`strata_core::chunking::piece_shape`).
#[pyfunction]
fn piece_shape(shape: Vec<u64>, chunk: Vec<u64>, element_size: u64, target_bytes: u64) -> PyResult<Vec<u64>> {
    if chunk.len() != shape.len() {
        return Err(exception(ErrorKind::InvalidArgument, format!("chunk {chunk:?} does not fit shape {shape:?}")));
    }
    Ok(strata_core::chunking::piece_shape(&shape, &chunk, element_size, target_bytes))
}

/// Serves every store under `root` over HTTP and DAP2 until Ctrl-C / SIGTERM or the
/// bounds (see `strata_server`); prints the address it listens on to stderr first. `config`
/// is a server.toml read first: the other arguments, when given, win over it.
#[pyfunction]
#[pyo3(signature = (root=None, host=None, port=None, max_requests=None, max_seconds=None, quiet=false, config=None))]
#[allow(clippy::too_many_arguments)]
fn serve(
    py: Python<'_>,
    root: Option<String>,
    host: Option<String>,
    port: Option<i64>,
    max_requests: Option<i64>,
    max_seconds: Option<f64>,
    quiet: bool,
    config: Option<String>,
) -> PyResult<()> {
    let options = strata_server::ServeOptions {
        root: root.map(Into::into),
        config: config.map(Into::into),
        host,
        port,
        max_requests,
        max_seconds,
        quiet,
    };
    let c = options.resolve().map_err(|e| exception(ErrorKind::InvalidArgument, e))?;
    py.detach(|| strata_server::run(c, |url| strata_server::log!("strata serve: listening on {url}")))
        .map_err(|e| exception(ErrorKind::Io, e.message))
}

/// CRC-32C of `data` continuing from `crc` (the digest the server sends in its
/// `x-strata-crc32c` trailer).
#[pyfunction]
#[pyo3(name = "crc32c", signature = (data, crc=0))]
fn crc32c_digest(data: &[u8], crc: u32) -> u32 {
    ::crc32c::crc32c_append(crc, data)
}

/// Seconds to download a subset and the whole dataset on a link of `bits_per_s`, from a
/// fetch estimate's figures: the server's one formula (`strata_server::fetch_seconds`).
#[pyfunction]
fn fetch_seconds(
    subset_bytes: u64,
    dataset_bytes: u64,
    server_seconds: f64,
    pieces: u64,
    bits_per_s: f64,
) -> PyResult<(f64, f64)> {
    if !(bits_per_s > 0.0 && bits_per_s.is_finite()) {
        return Err(exception(ErrorKind::InvalidArgument, format!("a link speed must be positive, not {bits_per_s}")));
    }
    Ok(strata_server::fetch_seconds(subset_bytes, dataset_bytes, server_seconds, pieces, bits_per_s))
}

/// The quick look of `var` in the store at `path` as PNG bytes (the server's renderer).
#[pyfunction]
#[pyo3(signature = (path, var, isel=None))]
fn quicklook(py: Python<'_>, path: &str, var: &str, isel: Option<&str>) -> PyResult<Vec<u8>> {
    py.detach(|| strata_server::quicklook(path, var, isel)).map_err(|e| {
        let kind = match e.status.as_u16() {
            404 => ErrorKind::NotFound,
            400 | 413 | 422 => ErrorKind::InvalidArgument,
            _ => ErrorKind::Io,
        };
        exception(kind, e.message)
    })
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    allocator::limit_arenas();
    allocator::keep_freed_blocks();
    m.add_function(wrap_pyfunction!(allocator::malloc_arena_limit, m)?)?;
    m.add_function(wrap_pyfunction!(allocator::malloc_thresholds, m)?)?;
    m.add_class::<Reader>()?;
    m.add_class::<Writer>()?;
    m.add_class::<parallel::Coordinator>()?;
    m.add_class::<in_place::Indexer>()?;
    m.add_class::<parallel::PartWriter>()?;
    m.add_class::<SqlSession>()?;
    m.add_class::<SqlStream>()?;
    m.add_function(wrap_pyfunction!(summaries::versions, m)?)?;
    m.add_function(wrap_pyfunction!(fetch_seconds, m)?)?;
    m.add_function(wrap_pyfunction!(known_codecs, m)?)?;
    m.add_function(wrap_pyfunction!(engine::cost_model_path, m)?)?;
    m.add_function(wrap_pyfunction!(engine::calibrate, m)?)?;
    m.add_class::<engine::Calibration>()?;
    m.add_class::<engine::Constraint>()?;
    m.add_class::<engine::Area>()?;
    m.add_class::<labels::LabelIndex>()?;
    m.add_class::<engine::QuerySpec>()?;
    m.add_class::<engine::Session>()?;
    m.add_class::<engine::Answer>()?;
    m.add_class::<engine::Plan>()?;
    m.add_class::<engine::Learned>()?;
    m.add_class::<analysis::ChainScore>()?;
    m.add_class::<summaries::VariableStats>()?;
    m.add_class::<summaries::VersionInfo>()?;
    m.add_class::<schema::Schema>()?;
    m.add_class::<schema::DimInfo>()?;
    m.add_class::<schema::AttrInfo>()?;
    m.add_class::<schema::VariableInfo>()?;
    m.add_class::<analysis::SampleAnalysis>()?;
    m.add_function(wrap_pyfunction!(analysis::analyze_samples, m)?)?;
    m.add_function(wrap_pyfunction!(auto_shape, m)?)?;
    m.add_function(wrap_pyfunction!(piece_shape, m)?)?;
    m.add_function(wrap_pyfunction!(analysis::candidates, m)?)?;
    m.add_function(wrap_pyfunction!(sample_starts, m)?)?;
    m.add_function(wrap_pyfunction!(points_at, m)?)?;
    m.add_function(wrap_pyfunction!(cf_unix_micros, m)?)?;
    m.add_function(wrap_pyfunction!(cf_date_fields, m)?)?;
    m.add_function(wrap_pyfunction!(verify, m)?)?;
    m.add_function(wrap_pyfunction!(gc, m)?)?;
    m.add_function(wrap_pyfunction!(serve, m)?)?;
    m.add_function(wrap_pyfunction!(quicklook, m)?)?;
    m.add_function(wrap_pyfunction!(crc32c_digest, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("FORMAT_VERSION", strata_core::manifest::FORMAT_VERSION)?;
    m.add("DEFAULT_SUBCHUNK_BYTES", strata_core::chunking::DEFAULT_SUBCHUNK_BYTES)?;
    Ok(())
}
