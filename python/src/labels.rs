//! Selection by coordinate value (`strata_core::labels`): Python hands labels over as numbers
//! or strings (dates as ISO text) and gets positions back.

use crate::{to_py, Reader};
use numpy::PyReadonlyArray1;
use pyo3::prelude::*;
use strata_core::labels::{self, Label, Method, Pick};
use strata_core::Error;

#[derive(FromPyObject)]
enum PyLabel {
    Number(f64),
    Text(String),
}

impl From<PyLabel> for Label {
    fn from(l: PyLabel) -> Label {
        match l {
            PyLabel::Number(x) => Label::Number(x),
            PyLabel::Text(t) => Label::Text(t),
        }
    }
}

/// A position, or a range `(start, stop)`.
#[derive(IntoPyObject)]
enum PyPick {
    At(u64),
    Range((u64, u64)),
}

impl From<Pick> for PyPick {
    fn from(p: Pick) -> PyPick {
        match p {
            Pick::At(i) => PyPick::At(i),
            Pick::Range { start, stop } => PyPick::Range((start, stop)),
        }
    }
}

/// A dimension's 1-D coordinate, to select by label.
#[pyclass(frozen, module = "strata._core")]
#[derive(Debug)]
pub struct LabelIndex {
    inner: labels::LabelIndex,
}

#[pymethods]
impl LabelIndex {
    /// From the coordinate's values and its `units` and `calendar` attributes.
    #[new]
    #[pyo3(signature = (dim, values, units=None, calendar=None))]
    fn new(
        dim: &str,
        values: PyReadonlyArray1<'_, f64>,
        units: Option<&str>,
        calendar: Option<&str>,
    ) -> PyResult<Self> {
        let values = values.as_slice().map_err(|e| to_py(Error::InvalidArgument(format!("values: {e}"))))?.to_vec();
        Ok(LabelIndex { inner: labels::LabelIndex::new(dim, values, units, calendar).map_err(to_py)? })
    }

    /// The coordinate variable of `dim` in a store, read whole.
    #[staticmethod]
    fn read(py: Python<'_>, reader: &Reader, dim: &str) -> PyResult<Self> {
        let inner = py.detach(|| labels::LabelIndex::read(&reader.inner, dim)).map_err(to_py)?;
        Ok(LabelIndex { inner })
    }

    /// Positions `(start, stop)` from label `start` to `stop`, both included; None is open.
    #[pyo3(signature = (start=None, stop=None))]
    fn range(&self, start: Option<PyLabel>, stop: Option<PyLabel>) -> PyResult<(u64, u64)> {
        let (start, stop) = (start.map(Label::from), stop.map(Label::from));
        self.inner.range(start.as_ref(), stop.as_ref()).map_err(to_py)
    }

    /// The position of one label, or the range it covers (a partial date).
    #[pyo3(signature = (label, method=None))]
    fn locate(&self, label: PyLabel, method: Option<&str>) -> PyResult<PyPick> {
        let method = Method::parse(method).map_err(to_py)?;
        self.inner.locate(&label.into(), method).map(PyPick::from).map_err(to_py)
    }

    /// What a selection typed as text (`LABEL` or `LO:HI`) picks.
    #[pyo3(signature = (text, method=None))]
    fn select_text(&self, text: &str, method: Option<&str>) -> PyResult<PyPick> {
        let method = Method::parse(method).map_err(to_py)?;
        self.inner.select_text(text, method).map(PyPick::from).map_err(to_py)
    }
}
