//! What a store holds, summarised for `Dataset.stats()` and `strata log`: typed rows, which
//! Python shapes into its own results.

use crate::to_py;
use pyo3::prelude::*;
use strata_core::Store;

/// One variable's storage and values, from the index alone.
#[pyclass(frozen, get_all, module = "strata._core")]
#[derive(Debug, Clone)]
pub(crate) struct VariableStats {
    pub name: String,
    pub raw_bytes: u64,
    pub stored_bytes: u64,
    pub segments: u64,
    /// Valid (non-missing, non-NaN) elements.
    pub count: u64,
    /// None when no element is valid.
    pub min: Option<f64>,
    pub max: Option<f64>,
}

/// One committed version of a store.
#[pyclass(frozen, get_all, module = "strata._core")]
#[derive(Debug, Clone)]
pub(crate) struct VersionInfo {
    pub version: u64,
    pub parent: Option<u64>,
    pub created_ms: u64,
    pub message: String,
    /// Records along the record dimension (None: the store has none).
    pub records: Option<u64>,
    pub files: usize,
    pub bytes: u64,
}

/// Every committed version of the store at `path`, oldest first.
#[pyfunction]
pub(crate) fn versions(py: Python<'_>, path: &str) -> PyResult<Vec<VersionInfo>> {
    let store = Store::local(path);
    py.detach(|| -> strata_core::Result<Vec<VersionInfo>> {
        store
            .versions()?
            .into_iter()
            .map(|v| {
                let m = store.manifest(Some(v))?;
                Ok(VersionInfo {
                    version: m.version,
                    parent: m.parent,
                    created_ms: m.created_ms,
                    message: m.message.clone(),
                    records: m.record_dim.as_deref().and_then(|r| m.dim(r)).map(|d| d.size),
                    files: m.files.len(),
                    bytes: m.files.iter().map(|f| f.size).sum(),
                })
            })
            .collect()
    })
    .map_err(to_py)
}
