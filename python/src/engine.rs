//! The query engine's session, constraints, plans and answers as Python objects: typed
//! values in, buffers and typed values out; every decision is strata-core's.

use crate::columns::column;
use crate::{selection, to_py, Reader};
use numpy::{PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;
use std::sync::Arc;
use strata_core::area::{self, AuxPick, CoordTest};
use strata_core::calibrate as engine_calibrate;
use strata_core::joined::{Columns, Joined};
use strata_core::planner::Coefficients;
use strata_core::query::{Method, Predicate};
use strata_core::session::{self, Output, Query};
use strata_core::Error;

/// Where the cost model is stored (`strata_core::planner::cost_model_path`).
#[pyfunction]
pub fn cost_model_path() -> String {
    strata_core::planner::cost_model_path().display().to_string()
}

/// What `strata calibrate` measured and fitted (`strata_core::calibrate`), as stored.
#[pyclass(frozen, module = "strata._core")]
#[derive(Debug)]
pub struct Calibration {
    inner: engine_calibrate::Calibration,
    path: String,
}

#[pymethods]
impl Calibration {
    /// Where the model was written.
    #[getter]
    fn path(&self) -> &str {
        &self.path
    }

    /// Where the constants come from (date, machine, cores, timings).
    #[getter]
    fn source(&self) -> &str {
        &self.inner.model.source
    }

    /// The index method's constants, ns per unit: (name, value) in the model's order.
    #[getter]
    fn ns(&self) -> Vec<(&'static str, f64)> {
        Coefficients::NAMES.into_iter().zip(self.inner.model.ns.as_array()).collect()
    }

    /// The scan's constants, ns per unit.
    #[getter]
    fn scan_ns(&self) -> Vec<(&'static str, f64)> {
        let scan = self.inner.model.scan_ns.unwrap_or(self.inner.model.ns);
        Coefficients::NAMES.into_iter().zip(scan.as_array()).collect()
    }

    /// Timings taken (two per query).
    #[getter]
    fn timings(&self) -> usize {
        self.inner.fit.timings
    }

    #[getter]
    fn median_relative_error(&self) -> f64 {
        self.inner.fit.median_relative_error
    }

    /// Over the queries timed: the picked method's time over the faster one's, at worst.
    #[getter]
    fn worst_pick_slowdown(&self) -> f64 {
        self.inner.fit.worst_pick_slowdown
    }

    #[getter]
    fn picks_within_10pct(&self) -> f64 {
        self.inner.fit.picks_within_10pct
    }

    /// The model as stored (JSON).
    fn model_json(&self) -> String {
        self.inner.model.to_json()
    }

    fn __repr__(&self) -> String {
        format!("Calibration({:?}, path={:?})", self.inner.model.source, self.path)
    }
}

/// Times both query methods on generated stores, fits the cost model's constants and
/// writes them where sessions load them from. `progress(done, total)` is called after
/// each query; Ctrl-C (or an exception in `progress`) stops the calibration, writing nothing.
#[pyfunction]
#[pyo3(signature = (quick=false, repeats=3, progress=None))]
pub fn calibrate(py: Python<'_>, quick: bool, repeats: usize, progress: Option<Py<PyAny>>) -> PyResult<Calibration> {
    let mut stopped: Option<PyErr> = None;
    let result = py.detach(|| {
        engine_calibrate::calibrate(engine_calibrate::CalibrateOptions { quick, repeats }, &mut |done, total| {
            Python::attach(|py| {
                let step = py.check_signals().and_then(|_| match &progress {
                    Some(f) => f.call1(py, (done, total)).map(drop),
                    None => Ok(()),
                });
                step.map_err(|e| stopped = Some(e)).is_ok()
            })
        })
    });
    if let Some(e) = stopped {
        return Err(e);
    }
    let inner = result.map_err(to_py)?;
    let path = strata_core::planner::cost_model_path();
    py.detach(|| inner.model.save(&path)).map_err(to_py)?;
    Ok(Calibration { inner, path: path.display().to_string() })
}

/// A parsed value constraint (`strata_core::constraint`).
#[pyclass(frozen, module = "strata._core")]
#[derive(Debug)]
pub struct Constraint {
    inner: Predicate,
}

#[pymethods]
impl Constraint {
    /// Parses the text form (`sst > 28 and not lat < 0`).
    #[new]
    fn new(text: &str) -> PyResult<Self> {
        Ok(Self { inner: strata_core::constraint::parse(text).map_err(to_py)? })
    }

    /// The tree form: `{"kind": "cmp", "var": ..., "op": ..., "value": ...}` or
    /// `{"kind": "and"|"or", "args": [...]}`, as JSON text.
    #[staticmethod]
    fn from_json(text: &str) -> PyResult<Self> {
        let inner = serde_json::from_str(text)
            .map_err(|e| to_py(Error::InvalidArgument(format!("bad value constraint: {e}"))))?;
        Ok(Self { inner })
    }

    /// The variables it names, first-named first.
    #[getter]
    fn variables(&self) -> Vec<String> {
        self.inner.variable_names().into_iter().map(String::from).collect()
    }

    fn __str__(&self) -> String {
        self.inner.to_string()
    }

    fn __repr__(&self) -> String {
        format!("Constraint({:?})", self.inner.to_string())
    }
}

/// A cost model and the queries it learned from (`strata_core::Session`).
#[pyclass(frozen, module = "strata._core")]
#[derive(Debug)]
pub struct Session {
    pub(crate) inner: Arc<session::Session>,
}

fn parse_method(text: &str) -> PyResult<Option<Method>> {
    session::parse_method(text).map_err(to_py)
}

/// The elements selected through auxiliary coordinates (`strata_core::area::Area`): a mask
/// over the axes they span and its bounding box. Built once per set of ranges and reused by
/// every query through it.
#[pyclass(frozen, module = "strata._core")]
#[derive(Debug)]
pub struct Area {
    inner: area::Area,
}

#[pymethods]
impl Area {
    /// The area of variables on `dims` (of `shape`) where every coordinate of `ranges`
    /// (name, lo, hi; None: open) holds a physical value within [lo, hi]; lo > hi on a
    /// longitude is a range across the dateline.
    #[staticmethod]
    fn build(
        py: Python<'_>,
        reader: &Reader,
        dims: Vec<String>,
        shape: Vec<u64>,
        ranges: Vec<(String, Option<f64>, Option<f64>)>,
    ) -> PyResult<Self> {
        let tests: Vec<(String, CoordTest)> =
            ranges.into_iter().map(|(name, lo, hi)| (name, CoordTest::Range { lo, hi })).collect();
        let inner = py.detach(|| area::Area::build(&reader.inner, &dims, &shape, &tests)).map_err(to_py)?;
        Ok(Self { inner })
    }

    /// The region shrunk to the area's bounding box: (starts, stops, whether the mask is
    /// still needed: false when every element of the region is in the area).
    fn narrow(&self, starts: Vec<u64>, stops: Vec<u64>, steps: Vec<u64>) -> PyResult<(Vec<u64>, Vec<u64>, bool)> {
        let mut region = selection(&starts, &stops, &steps)?;
        let needed = self.inner.narrow(&mut region).map_err(to_py)?;
        Ok((region.iter().map(|r| r.start).collect(), region.iter().map(|r| r.stop).collect(), needed))
    }

    /// The queried variables' axes the mask spans, ascending.
    #[getter]
    fn axes(&self) -> Vec<usize> {
        self.inner.mask().axes().to_vec()
    }

    /// The mask over those axes' whole extents, as a flat bool array (row-major; its shape
    /// is the variables' along `axes`).
    fn bits<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<bool>> {
        PyArray1::from_slice(py, self.inner.mask().bits())
    }

    /// How many elements of those axes are in the area.
    fn __len__(&self) -> usize {
        self.inner.mask().selected() as usize
    }
}

/// A value query (`strata_core::Query`): built once from Python's arguments, then planned
/// or run by a session.
#[pyclass(frozen, name = "Query", module = "strata._core")]
#[derive(Debug)]
pub struct QuerySpec {
    inner: Query,
}

#[pymethods]
impl QuerySpec {
    /// `area`: an `Area` when the region is an area of auxiliary coordinates; `output`:
    /// count, positions or points; `variables`: returned with points, at precision `level`;
    /// `method`: auto, index or scan; `raw`: compare packed variables' stored values.
    #[new]
    #[pyo3(signature = (constraint, starts, stops, steps, area=None, output="points", variables=vec![], level=None, method="auto", raw=false))]
    #[allow(clippy::too_many_arguments)] // one Python call, flat arguments
    fn new(
        constraint: &Constraint,
        starts: Vec<u64>,
        stops: Vec<u64>,
        steps: Vec<u64>,
        area: Option<&Area>,
        output: &str,
        variables: Vec<String>,
        level: Option<usize>,
        method: &str,
        raw: bool,
    ) -> PyResult<Self> {
        let inner = Query {
            predicate: constraint.inner.clone(),
            region: selection(&starts, &stops, &steps)?,
            mask: area.map(|a| a.inner.mask().clone()),
            output: Output::parse(output).map_err(to_py)?,
            variables,
            level,
            method: parse_method(method)?,
            raw,
        };
        Ok(Self { inner })
    }
}

/// A session's corrections on one track: observed over estimated time per method (a
/// moving average), and how many queries each folds in (a piece counts as its share).
#[pyclass(frozen, get_all, module = "strata._core")]
#[derive(Debug, Clone)]
pub(crate) struct Learned {
    pub index_correction: f64,
    pub scan_correction: f64,
    pub index_observed: f64,
    pub scan_observed: f64,
}

#[pymethods]
impl Session {
    /// A session on the cost model stored at `cost_model_path()` (the built-in defaults
    /// without one), or on `model_json`.
    #[new]
    #[pyo3(signature = (model_json=None))]
    fn new(model_json: Option<&str>) -> PyResult<Self> {
        let inner = match model_json {
            Some(text) => session::Session::new(strata_core::planner::CostModel::from_json(text).map_err(to_py)?),
            None => session::Session::open_default().map_err(to_py)?,
        };
        Ok(Self { inner: Arc::new(inner) })
    }

    /// Where the model's constants come from.
    #[getter]
    fn source(&self) -> String {
        self.inner.source().to_string()
    }

    /// What the session has learned on `track`: `"values"` (points with values returned)
    /// or `"select"` (counts and positions).
    fn learned(&self, track: &str) -> PyResult<Learned> {
        let track = match track {
            "values" => session::Track::Values,
            "select" => session::Track::Select,
            other => {
                return Err(to_py(strata_core::Error::InvalidArgument(format!(
                    "a session learns on the tracks values and select, not '{other}'"
                ))))
            }
        };
        let m = self.inner.model_for(track);
        Ok(Learned {
            index_correction: m.index_correction,
            scan_correction: m.scan_correction,
            index_observed: m.observed(Method::Index),
            scan_observed: m.observed(Method::Scan),
        })
    }

    /// Runs observed after the first `mark` (0: the most recent ones kept): (method,
    /// estimated seconds, observed seconds).
    #[pyo3(signature = (mark=0))]
    fn runs(&self, mark: u64) -> Vec<(String, f64, f64)> {
        self.inner
            .runs_since(mark)
            .into_iter()
            .map(|r| (r.method.name().to_string(), r.estimated_s, r.observed_s))
            .collect()
    }

    /// How many runs the session observed (a mark for `runs`).
    fn run_count(&self) -> u64 {
        self.inner.run_count()
    }

    /// The method the model picks for estimates of `index_s` and `scan_s` seconds.
    fn choose(&self, index_s: f64, scan_s: f64) -> &'static str {
        self.inner.model().choose(index_s, scan_s).name()
    }

    /// Folds a run of `method` (estimated and observed seconds) into the model.
    fn observe(&self, method: &str, estimated_s: f64, observed_s: f64) -> PyResult<()> {
        let method = parse_method(method)?
            .ok_or_else(|| to_py(Error::InvalidArgument("observe a run of 'index' or 'scan'".into())))?;
        self.inner.observe(method, estimated_s, observed_s);
        Ok(())
    }

    /// The plan of a query, without running it.
    fn plan(&self, py: Python<'_>, reader: &Reader, query: &QuerySpec) -> PyResult<Plan> {
        let inner = py.detach(|| self.inner.plan(&reader.inner, &query.inner)).map_err(to_py)?;
        Ok(Plan { inner })
    }

    /// Plans, runs and observes a query. Returns (selected, columns, answer): `selected`
    /// is a uint64 array of flat indices, or with `coordinates` a list of int64 arrays,
    /// one per dimension (np.nonzero's form); `columns` one flat uint8 array per returned
    /// variable; `answer` what the query did.
    #[pyo3(signature = (reader, query, coordinates=false))]
    #[allow(clippy::type_complexity)]
    fn query<'py>(
        &self,
        py: Python<'py>,
        reader: &Reader,
        query: &QuerySpec,
        coordinates: bool,
    ) -> PyResult<(Bound<'py, PyAny>, Vec<Bound<'py, PyArray1<u8>>>, Answer)> {
        let mut answer = py.detach(|| self.inner.run(&reader.inner, &query.inner)).map_err(to_py)?;
        let selection = std::mem::take(&mut answer.selection);
        let first = if coordinates {
            let coords = py.detach(|| selection.coordinates());
            let arrays: Vec<Bound<'py, PyArray1<i64>>> =
                coords.into_iter().map(|c| PyArray1::from_vec(py, c)).collect();
            pyo3::types::PyList::new(py, arrays)?.into_any()
        } else {
            PyArray1::from_vec(py, selection.flat).into_any()
        };
        let columns = std::mem::take(&mut answer.columns).into_iter().map(|c| PyArray1::from_vec(py, c)).collect();
        Ok((first, columns, Answer { inner: answer }))
    }

    /// Plans, runs and observes a points query a piece at a time, returning its columns
    /// already shaped: (dims, values, aux, answer). Per dimension, `dims` holds
    /// (coordinate, index): the coordinate's values at each point as uint8 bytes when
    /// `coordinates[d]` gives them (the coordinate's elements as bytes, and their size), and
    /// the index along the dimension (uint64) when `indices[d]`. `values` has uint8 arrays
    /// per returned variable; `aux` one per auxiliary coordinate of `aux` (its name and
    /// stored bytes), its values at each point. No flat index array is made. With `recycle`
    /// (a whole result, not a streamed frame) the columns return to the engine for the next
    /// result once no array reads them.
    #[pyo3(signature = (reader, query, coordinates, indices, aux=vec![], recycle=true))]
    #[allow(clippy::type_complexity, clippy::too_many_arguments)]
    fn points<'py>(
        &self,
        py: Python<'py>,
        reader: &Reader,
        query: &QuerySpec,
        coordinates: Vec<Option<(PyReadonlyArray1<'py, u8>, usize)>>,
        indices: Vec<bool>,
        aux: Vec<(String, PyReadonlyArray1<'py, u8>)>,
        recycle: bool,
    ) -> PyResult<(PointDims<'py>, Vec<Bound<'py, PyArray1<u8>>>, Vec<Bound<'py, PyArray1<u8>>>, Answer)> {
        let dims = query.inner.grid_dims(reader.inner.manifest()).map_err(to_py)?;
        let columns = point_columns(reader, &dims, coordinates, indices, aux, false)?;
        let (mut joined, answer) =
            py.detach(|| self.inner.run_joined(&reader.inner, &query.inner, columns)).map_err(to_py)?;
        let values =
            std::mem::take(&mut joined.values).into_iter().map(|v| column(py, v, recycle)).collect::<PyResult<_>>()?;
        let (dims, aux) = shaped(py, joined, recycle)?;
        Ok((dims, values, aux, Answer { inner: answer }))
    }
}

/// The columns of a points result besides its values, as `Session.points` and
/// `points_at` take them from Python.
pub(crate) fn point_columns(
    reader: &Reader,
    dims: &[String],
    coordinates: Vec<Option<(PyReadonlyArray1<'_, u8>, usize)>>,
    indices: Vec<bool>,
    aux: Vec<(String, PyReadonlyArray1<'_, u8>)>,
    flat: bool,
) -> PyResult<Columns> {
    let bytes = |a: &PyReadonlyArray1<'_, u8>, what: &str| {
        a.as_slice().map(<[u8]>::to_vec).map_err(|e| to_py(Error::InvalidArgument(format!("{what}: {e}"))))
    };
    let coordinates = coordinates
        .iter()
        .map(|c| c.as_ref().map(|(a, size)| Ok((bytes(a, "coordinate values")?, *size))).transpose())
        .collect::<PyResult<_>>()?;
    let aux = aux
        .iter()
        .map(|(name, a)| AuxPick::new(reader.inner.manifest(), dims, name, bytes(a, name)?).map_err(to_py))
        .collect::<PyResult<_>>()?;
    Ok(Columns { coordinates, indices, flat, aux })
}

/// A joined result's dimension columns (those asked for) and auxiliary coordinates as
/// NumPy arrays over its own buffers.
#[allow(clippy::type_complexity)]
pub(crate) fn shaped<'py>(
    py: Python<'py>,
    joined: Joined,
    recycle: bool,
) -> PyResult<(PointDims<'py>, Vec<Bound<'py, PyArray1<u8>>>)> {
    let asked = joined.asked();
    let dims = joined
        .coordinates
        .into_iter()
        .zip(joined.indices)
        .zip(asked)
        .map(|((c, i), (picked, kept))| {
            Ok((picked.then(|| column(py, c, recycle)).transpose()?, kept.then(|| column(py, i, recycle)).transpose()?))
        })
        .collect::<PyResult<_>>()?;
    let aux = joined.aux.into_iter().map(|a| column(py, a, recycle)).collect::<PyResult<_>>()?;
    Ok((dims, aux))
}

/// Per dimension of a points result: its coordinate values' bytes and its indices, each
/// when asked for.
pub(crate) type PointDims<'py> = Vec<(Option<Bound<'py, PyArray1<u8>>>, Option<Bound<'py, PyArray1<u64>>>)>;

/// A query's plan: both methods' estimates per slab, and the choice. `str()` is EXPLAIN.
#[pyclass(frozen, module = "strata._core")]
#[derive(Debug)]
pub struct Plan {
    inner: strata_core::planner::QueryPlan,
}

#[pymethods]
impl Plan {
    /// Estimated seconds of the plan as chosen.
    #[getter]
    fn estimated_s(&self) -> f64 {
        self.inner.seconds()
    }

    /// Estimated seconds if every slab ran `method`.
    fn seconds_with(&self, method: &str) -> PyResult<f64> {
        let m = parse_method(method)?.unwrap_or(Method::Index);
        Ok(self.inner.seconds_with(m))
    }

    /// The work `method` would do over every slab, in the cost model's feature order
    /// (bytes, segments, calls, decoded, tested, indexed, gathered).
    fn work(&self, method: &str) -> PyResult<Vec<f64>> {
        let m = parse_method(method)?.unwrap_or(Method::Index);
        Ok(self.inner.work_with(m).as_array().to_vec())
    }

    /// The methods the plan runs.
    #[getter]
    fn methods(&self) -> Vec<&'static str> {
        self.inner.methods().into_iter().map(Method::name).collect()
    }

    fn __str__(&self) -> String {
        self.inner.to_string()
    }
}

/// What a query did (`strata_core::Answer` without its buffers). `str()` is EXPLAIN's
/// plan followed by the actuals.
#[pyclass(frozen, module = "strata._core")]
#[derive(Debug)]
pub struct Answer {
    inner: session::Answer,
}

#[pymethods]
impl Answer {
    #[getter]
    fn count(&self) -> u64 {
        self.inner.count
    }

    /// (sub-chunks, full, empty, boundary, scanned).
    #[getter]
    fn stats(&self) -> (u64, u64, u64, u64, u64) {
        let s = &self.inner.stats;
        (s.subchunks, s.full, s.empty, s.boundary, s.scanned)
    }

    #[getter]
    fn methods(&self) -> Vec<&'static str> {
        self.inner.methods.iter().map(|m| m.name()).collect()
    }

    #[getter]
    fn estimated_s(&self) -> f64 {
        self.inner.estimated_s
    }

    #[getter]
    fn seconds(&self) -> f64 {
        self.inner.seconds
    }

    #[getter]
    fn bytes_read(&self) -> u64 {
        self.inner.bytes_read
    }

    #[getter]
    fn plan(&self) -> Plan {
        Plan { inner: self.inner.plan.clone() }
    }

    fn __str__(&self) -> String {
        format!("{}\n{}", self.inner.plan, self.inner)
    }
}
