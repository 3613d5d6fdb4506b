//! The parallel writers' protocol (strata_core::parallel) for Python: tables and
//! placements cross as `bytes`, so threads, Dask and mpi4py carry them alike.

use crate::{json_arg, slice, to_py};
use numpy::PyReadonlyArray1;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use std::sync::Mutex;
use strata_core::parallel::{self, PartPlacement, PartTable, Placement};
use strata_core::writer::{Block, DatasetSchema};
use strata_core::{Error, Store, WriterOptions};

fn placement(kind: &str, fraction: Option<f64>, padding: Option<f64>) -> PyResult<Placement> {
    let mut p = Placement::parse(kind).map_err(to_py)?;
    if let Placement::Hybrid { fraction: f, padding: pad } = &mut p {
        *f = fraction.unwrap_or(*f);
        *pad = padding.unwrap_or(*pad);
        if !(*f > 0.0 && f.is_finite() && *pad >= 0.0 && pad.is_finite()) {
            return Err(to_py(Error::InvalidArgument("hybrid slots need fraction > 0 and padding >= 0".into())));
        }
    }
    Ok(p)
}

/// Gathers the writers' tables into one manifest (rank 0 of a parallel write).
#[pyclass(frozen, module = "strata._core")]
#[derive(Debug)]
pub struct Coordinator {
    inner: Mutex<Option<parallel::Coordinator>>,
}

impl Coordinator {
    fn with<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut parallel::Coordinator) -> strata_core::Result<T> + Send,
    ) -> PyResult<T> {
        py.detach(|| {
            let mut guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
            let c = guard.as_mut().ok_or_else(|| Error::InvalidArgument("this write has already committed".into()))?;
            f(c)
        })
        .map_err(to_py)
    }
}

#[pymethods]
impl Coordinator {
    #[staticmethod]
    #[pyo3(signature = (path, schema_json, options_json, writers, kind, fraction=None, padding=None))]
    #[allow(clippy::too_many_arguments)]
    fn create(
        py: Python<'_>,
        path: &str,
        schema_json: &str,
        options_json: &str,
        writers: u32,
        kind: &str,
        fraction: Option<f64>,
        padding: Option<f64>,
    ) -> PyResult<Self> {
        let schema: DatasetSchema = json_arg(schema_json, "schema")?;
        let options: WriterOptions = json_arg(options_json, "writer options")?;
        let p = placement(kind, fraction, padding)?;
        let c = py.detach(|| parallel::Coordinator::create(Store::local(path), schema, &options, writers, p));
        Ok(Self { inner: Mutex::new(Some(c.map_err(to_py)?)) })
    }

    fn token(&self, py: Python<'_>) -> PyResult<String> {
        self.with(py, |c| Ok(c.token().to_string()))
    }

    /// Every writer's table for one slab (subfiles: any tables) → each one's placement.
    fn place<'py>(&self, py: Python<'py>, tables: Vec<Vec<u8>>) -> PyResult<Vec<Bound<'py, PyBytes>>> {
        let out = self.with(py, |c| {
            let tables = tables.iter().map(|t| PartTable::from_bytes(t)).collect::<strata_core::Result<Vec<_>>>()?;
            Ok(c.place(tables)?.iter().map(PartPlacement::to_bytes).collect::<Vec<_>>())
        })?;
        Ok(out.iter().map(|b| PyBytes::new(py, b)).collect())
    }

    fn commit(&self, py: Python<'_>, message: &str) -> PyResult<u64> {
        py.detach(|| {
            let c = self
                .inner
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take()
                .ok_or_else(|| Error::InvalidArgument("this write has already committed".into()))?;
            c.commit(message)
        })
        .map_err(to_py)
    }
}

/// One writer of a parallel write: its block, its segments.
#[pyclass(frozen, module = "strata._core")]
#[derive(Debug)]
pub struct PartWriter {
    inner: Mutex<parallel::PartWriter>,
}

impl PartWriter {
    fn with<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut parallel::PartWriter) -> strata_core::Result<T> + Send,
    ) -> PyResult<T> {
        py.detach(|| f(&mut self.inner.lock().unwrap_or_else(|p| p.into_inner()))).map_err(to_py)
    }
}

#[pymethods]
impl PartWriter {
    /// `blocks_json`: every writer's block, `[{"lat": [0, 90]}, ...]` (subfiles: `[]`).
    #[new]
    #[pyo3(signature = (path, schema_json, options_json, token, kind, blocks_json, rank, first_record=0, fraction=None, padding=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        path: &str,
        schema_json: &str,
        options_json: &str,
        token: &str,
        kind: &str,
        blocks_json: &str,
        rank: u32,
        first_record: u64,
        fraction: Option<f64>,
        padding: Option<f64>,
    ) -> PyResult<Self> {
        let schema: DatasetSchema = json_arg(schema_json, "schema")?;
        let options: WriterOptions = json_arg(options_json, "writer options")?;
        let blocks: Vec<Block> = json_arg(blocks_json, "blocks")?;
        let p = placement(kind, fraction, padding)?;
        let part = parallel::PartOf { token: token.to_string(), placement: p, blocks, rank, first_record };
        let w = py.detach(|| parallel::PartWriter::new(Store::local(path), schema, &options, part));
        Ok(Self { inner: Mutex::new(w.map_err(to_py)?) })
    }

    fn put_static(&self, py: Python<'_>, name: &str, data: PyReadonlyArray1<'_, u8>) -> PyResult<()> {
        let bytes = slice(&data)?;
        self.with(py, |w| w.put_static(name, bytes))
    }

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

    fn static_piece(&self, py: Python<'_>, name: &str) -> PyResult<Vec<u64>> {
        self.with(py, |w| w.static_piece(name))
    }

    fn append(&self, py: Python<'_>, name: &str, data: PyReadonlyArray1<'_, u8>) -> PyResult<()> {
        let bytes = slice(&data)?;
        self.with(py, |w| w.append(name, bytes))
    }

    fn ready(&self, py: Python<'_>) -> PyResult<bool> {
        self.with(py, |w| Ok(w.ready()))
    }

    /// The next slab's table as bytes (None: nothing to send).
    fn encode<'py>(&self, py: Python<'py>, last: bool) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let table = self.with(py, |w| Ok(w.encode(last)?.map(|t| t.to_bytes())))?;
        Ok(table.map(|b| PyBytes::new(py, &b)))
    }

    fn write(&self, py: Python<'_>, placement: &[u8]) -> PyResult<()> {
        let p = PartPlacement::from_bytes(placement).map_err(to_py)?;
        self.with(py, |w| w.write(&p))
    }
}
