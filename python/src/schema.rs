//! A store version's manifest as typed Python objects (`Reader.schema()`,
//! `Writer.schema()`): what `strata.Dataset`, the writers, export and the CLI read, so no
//! Python code reads the manifest's JSON by key. Attribute values are decoded here (the one
//! place the manifest's typed attribute form becomes NumPy values).

use numpy::{Element, PyArray1};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use strata_core::manifest::AttrValue;
use strata_core::Manifest;

/// A dimension: its name, its current size and whether it is unlimited.
#[pyclass(frozen, get_all, module = "strata._core")]
#[derive(Debug, Clone)]
pub(crate) struct DimInfo {
    pub name: String,
    pub size: u64,
    pub unlimited: bool,
}

/// An attribute: its name, its NetCDF type as the manifest names it (`f32`, `string`, ...)
/// and its Python value (str, list of str, or a NumPy scalar or array of that type).
#[pyclass(frozen, get_all, module = "strata._core")]
pub(crate) struct AttrInfo {
    pub name: String,
    pub type_name: String,
    pub value: Py<PyAny>,
}

/// A variable as the manifest records it.
#[pyclass(frozen, get_all, module = "strata._core")]
pub(crate) struct VariableInfo {
    pub name: String,
    /// The stored type name (`f32`, `i16`, `char`, `string`, ...).
    pub dtype: String,
    pub dims: Vec<String>,
    pub attrs: Vec<Py<AttrInfo>>,
    /// Chunk and sub-chunk shapes; None for inline string variables.
    pub chunk: Option<Vec<u64>>,
    pub subchunk: Option<Vec<u64>>,
    /// Every codec chain the variable's segments use, in its short form (`shuffle+zstd:3`).
    pub chains: Vec<String>,
    /// The same chains as the manifest stores them: lists of `{"name", "configuration"}`.
    pub codecs: Py<PyAny>,
    /// The values of a `string` variable, row-major.
    pub inline_strings: Option<Vec<String>>,
    /// The analyzer's record as stored, JSON text (`plan` gives it as a dict).
    pub plan_text: Option<String>,
}

#[pymethods]
impl VariableInfo {
    /// The analyzer's record (a dict), or None: read when asked for, not on every open.
    #[getter]
    fn plan<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        match &self.plan_text {
            None => Ok(py.None().into_bound(py)),
            Some(text) => {
                let value: serde_json::Value = serde_json::from_str(text)
                    .map_err(|e| crate::to_py(strata_core::Error::Corruption(format!("plan record: {e}"))))?;
                json_value(py, &value)
            }
        }
    }
}

/// One version of a store: what a reader or writer needs to know of it.
#[pyclass(frozen, get_all, module = "strata._core")]
pub(crate) struct Schema {
    pub version: u64,
    pub format_version: u32,
    pub record_dim: Option<String>,
    pub slab_records: u64,
    pub dims: Vec<DimInfo>,
    pub attrs: Vec<Py<AttrInfo>>,
    pub variables: Vec<Py<VariableInfo>>,
    /// The layout in words: `V-S, 16 equal-frequency bins, byte groups f32=2,1,1`.
    pub layout: String,
    pub slabs: usize,
    pub files: usize,
    pub file_bytes: u64,
}

impl Schema {
    pub(crate) fn of(py: Python<'_>, m: &Manifest) -> PyResult<Schema> {
        Ok(Schema {
            version: m.version,
            format_version: m.format_version,
            record_dim: m.record_dim.clone(),
            slab_records: m.slab_records,
            dims: m
                .dims
                .iter()
                .map(|d| DimInfo { name: d.name.clone(), size: d.size, unlimited: d.unlimited })
                .collect(),
            attrs: attributes(py, &m.attrs)?,
            variables: m.variables.iter().map(|v| Py::new(py, variable(py, v)?)).collect::<PyResult<_>>()?,
            layout: m.layout.summary(),
            slabs: m.slabs.len(),
            files: m.files.len(),
            file_bytes: m.files.iter().map(|f| f.size).sum(),
        })
    }
}

fn variable(py: Python<'_>, v: &strata_core::manifest::Variable) -> PyResult<VariableInfo> {
    let codecs = serde_json::to_value(&v.codecs).unwrap_or(serde_json::Value::Null);
    Ok(VariableInfo {
        name: v.name.clone(),
        dtype: v.dtype.name().to_string(),
        dims: v.dims.clone(),
        attrs: attributes(py, &v.attrs)?,
        chunk: v.chunking.as_ref().map(|c| c.chunk.clone()),
        subchunk: v.chunking.as_ref().map(|c| c.subchunk.clone()),
        chains: v.codecs.iter().map(|c| strata_codecs::registry::chain_text(c)).collect(),
        codecs: json_value(py, &codecs)?.unbind(),
        inline_strings: v.inline_strings.clone(),
        plan_text: v.plan.as_ref().map(|p| p.text().to_string()),
    })
}

fn attributes(py: Python<'_>, attrs: &[strata_core::manifest::Attribute]) -> PyResult<Vec<Py<AttrInfo>>> {
    attrs
        .iter()
        .map(|a| {
            let info = AttrInfo {
                name: a.name.clone(),
                type_name: a.value.type_name().to_string(),
                value: attr_value(py, &a.value)?.unbind(),
            };
            Py::new(py, info)
        })
        .collect()
}

/// A numeric attribute as NumPy gives it: a scalar of its type when it holds one value,
/// else an array.
fn numbers<'py, T: Element + Copy>(py: Python<'py>, values: Vec<T>) -> PyResult<Bound<'py, PyAny>> {
    let array = PyArray1::from_vec(py, values).into_any();
    if array.len()? == 1 {
        array.get_item(0)
    } else {
        Ok(array)
    }
}

fn attr_value<'py>(py: Python<'py>, v: &AttrValue) -> PyResult<Bound<'py, PyAny>> {
    // The manifest keeps integers widened; their type says how wide they were written.
    match v {
        AttrValue::String(s) => Ok(s.into_pyobject(py)?.into_any()),
        AttrValue::Strings(s) => Ok(PyList::new(py, s)?.into_any()),
        AttrValue::I8(x) => numbers(py, x.iter().map(|&x| x as i8).collect()),
        AttrValue::U8(x) => numbers(py, x.iter().map(|&x| x as u8).collect()),
        AttrValue::I16(x) => numbers(py, x.iter().map(|&x| x as i16).collect()),
        AttrValue::U16(x) => numbers(py, x.iter().map(|&x| x as u16).collect()),
        AttrValue::I32(x) => numbers(py, x.iter().map(|&x| x as i32).collect()),
        AttrValue::U32(x) => numbers(py, x.iter().map(|&x| x as u32).collect()),
        AttrValue::I64(x) => numbers(py, x.clone()),
        AttrValue::U64(x) => numbers(py, x.clone()),
        AttrValue::F32(x) => numbers(py, x.clone()),
        AttrValue::F64(x) => numbers(py, x.clone()),
    }
}

/// A JSON value (a codec chain, a plan record) as the plain Python value `json.loads`
/// would give.
fn json_value<'py>(py: Python<'py>, v: &serde_json::Value) -> PyResult<Bound<'py, PyAny>> {
    use serde_json::Value;
    Ok(match v {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => b.into_pyobject(py)?.to_owned().into_any(),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => i.into_pyobject(py)?.into_any(),
            (None, Some(u)) => u.into_pyobject(py)?.into_any(),
            _ => n.as_f64().unwrap_or(f64::NAN).into_pyobject(py)?.into_any(),
        },
        Value::String(s) => s.into_pyobject(py)?.into_any(),
        Value::Array(items) => {
            PyList::new(py, items.iter().map(|x| json_value(py, x)).collect::<PyResult<Vec<_>>>()?)?.into_any()
        }
        Value::Object(map) => {
            let dict = PyDict::new(py);
            for (k, x) in map {
                dict.set_item(k, json_value(py, x)?)?;
            }
            dict.into_any()
        }
    })
}
