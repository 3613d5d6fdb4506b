//! Result columns as NumPy arrays that read the engine's buffers in place and, when the
//! last array over one is gone, hand it back for the next result's columns
//! ([`strata_core::recycle`]).

use numpy::ndarray::ArrayView1;
use numpy::{Element, PyArray1};
use pyo3::prelude::*;
use strata_core::recycle::{recycle, Recyclable};

/// The owner of one column's buffer: the base object of the NumPy arrays over it.
#[pyclass(frozen, module = "strata._core")]
pub(crate) struct Column(Buffer);

/// A column's elements: bytes (values, coordinates) or 64-bit words (indices).
enum Buffer {
    Bytes(Vec<u8>),
    Words(Vec<u64>),
}

impl Drop for Column {
    fn drop(&mut self) {
        match &mut self.0 {
            Buffer::Bytes(v) => recycle(std::mem::take(v)),
            Buffer::Words(v) => recycle(std::mem::take(v)),
        }
    }
}

/// An element type a column holds.
pub(crate) trait ColumnElement: Element + Recyclable {
    fn owner(v: Vec<Self>) -> Column;
    fn data(c: &Column) -> &[Self];
}

impl ColumnElement for u8 {
    fn owner(v: Vec<u8>) -> Column {
        Column(Buffer::Bytes(v))
    }
    fn data(c: &Column) -> &[u8] {
        match &c.0 {
            Buffer::Bytes(v) => v,
            Buffer::Words(_) => &[],
        }
    }
}

impl ColumnElement for u64 {
    fn owner(v: Vec<u64>) -> Column {
        Column(Buffer::Words(v))
    }
    fn data(c: &Column) -> &[u64] {
        match &c.0 {
            Buffer::Words(v) => v,
            Buffer::Bytes(_) => &[],
        }
    }
}

/// `v` as a 1-D NumPy array, no copy; with `recycle`, its buffer returns to the engine
/// when the last array over it goes (a whole result), else it is freed (a streamed frame:
/// frames are many, and their memory must stay bounded by the few in flight).
pub(crate) fn column<T: ColumnElement>(py: Python<'_>, v: Vec<T>, recycle: bool) -> PyResult<Bound<'_, PyArray1<T>>> {
    if !recycle {
        return Ok(PyArray1::from_vec(py, v));
    }
    let owner = Bound::new(py, T::owner(v))?;
    let data = T::data(owner.get());
    let view = ArrayView1::from(data);
    // SAFETY: the array reads `data`, which `owner` holds and never changes (the class is
    // frozen; its vector leaves only when it is dropped), and the array keeps `owner`
    // alive as its base object.
    Ok(unsafe { PyArray1::borrow_from_array(&view, owner.clone().into_any()) })
}
