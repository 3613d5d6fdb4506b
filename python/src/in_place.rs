//! `strata index`: a store over a NetCDF-4/HDF5 file's own chunks (strata_core::in_place).
//! Python reads the file's HDF5 metadata and hands each variable's storage over; the engine
//! reads, checksums and summarises the chunks with the GIL released.

use crate::{json_arg, to_py};
use pyo3::prelude::*;
use std::sync::Mutex;
use strata_core::bins::BinRule;
use strata_core::in_place::{InPlaceIndexer, SourceVariable};
use strata_core::writer::DatasetSchema;
use strata_core::{Error, Store};

#[pyclass(frozen, module = "strata._core")]
#[derive(Debug)]
pub struct Indexer {
    inner: Mutex<Option<InPlaceIndexer>>,
}

#[pymethods]
impl Indexer {
    /// Starts an index at `path` (a directory beside `file`) of `file` with `schema_json`;
    /// `bins` value bins per variable by `binning` (level V), or none when 0.
    #[new]
    #[pyo3(signature = (path, file, schema_json, bins=0, binning=None))]
    fn new(
        py: Python<'_>,
        path: &str,
        file: &str,
        schema_json: &str,
        bins: i64,
        binning: Option<&str>,
    ) -> PyResult<Self> {
        let schema: DatasetSchema = json_arg(schema_json, "schema")?;
        let rule = match (bins, binning) {
            (0, None) => None,
            (0, Some(rule)) => Some(BinRule::parse(rule, 1).map_err(to_py)?),
            (n, rule) => {
                let n = BinRule::count(n).map_err(to_py)?;
                Some(BinRule::parse(rule.unwrap_or("equal-frequency"), n).map_err(to_py)?)
            }
        };
        let ix = py.detach(|| InPlaceIndexer::new(Store::local(path), file, schema, rule)).map_err(to_py)?;
        Ok(Self { inner: Mutex::new(Some(ix)) })
    }

    /// Indexes one variable; returns (chunks, bytes read, raw bytes).
    fn add(&self, py: Python<'_>, source_json: &str) -> PyResult<(u64, u64, u64)> {
        let source: SourceVariable = json_arg(source_json, "variable storage")?;
        py.detach(|| {
            let mut guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
            let ix = guard.as_mut().ok_or_else(|| Error::InvalidArgument("this index has already committed".into()))?;
            let r = ix.add(source)?;
            Ok((r.chunks, r.bytes_read, r.raw_bytes))
        })
        .map_err(to_py)
    }

    /// Writes the index files and publishes the version; returns its number.
    fn commit(&self, py: Python<'_>, message: &str) -> PyResult<u64> {
        py.detach(|| {
            let ix = self
                .inner
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take()
                .ok_or_else(|| Error::InvalidArgument("this index has already committed".into()))?;
            ix.commit(message)
        })
        .map_err(to_py)
    }
}
