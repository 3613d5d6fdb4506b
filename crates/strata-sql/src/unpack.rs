//! Variables whose physical values are not their stored ones (see `strata_core::decoding`):
//! packed by CF `scale_factor`/`add_offset`, or integers read with the other sign
//! (`_Unsigned`). A SQL column holds what xarray decodes — for a packed variable `stored *
//! scale_factor + add_offset`, in float32 when the attributes are float32 and the stored
//! values are 16 bits or fewer, else float64; for a sign view alone, the same bits as the
//! other integer type — so `WHERE temperature > 10` compares degrees, as `Dataset.query`
//! does, not the stored integers. A comparison pushed into the engine is rewritten on
//! stored values by the engine's rule: exactly for a sign view alone; for a packed
//! variable widened by a stored unit so that float rounding of the physical value cannot
//! leave a row out, and DataFusion filters the physical column again (inexact).

use datafusion::arrow::array::{make_array, Array, ArrayRef, Float32Array, Float64Array};
use datafusion::arrow::datatypes::DataType;
use std::sync::Arc;
use strata_core::decoding::Decoding;
use strata_core::manifest::AttrValue;
use strata_core::query::{CmpOp, Predicate};
use strata_core::{DType, Error, Manifest, Result};

/// How a variable's stored values become physical ones.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Unpack {
    pub decoding: Decoding,
    /// The stored type.
    pub stored: DType,
    /// Physical values of a packed variable as float32 (else float64).
    pub single: bool,
}

impl Unpack {
    /// The decoding of `name`; None when its physical values are its stored ones.
    pub fn of(m: &Manifest, name: &str) -> Result<Option<Unpack>> {
        let decoding = Decoding::of(m, name)?;
        if decoding.is_identity() {
            return Ok(None);
        }
        let (_, v) = m.variable(name)?;
        let attrs_single = v
            .attrs
            .iter()
            .filter(|a| a.name == "scale_factor" || a.name == "add_offset")
            .all(|a| matches!(a.value, AttrValue::F32(_)));
        Ok(Some(Unpack { decoding, stored: v.dtype, single: attrs_single && v.dtype.size() <= 2 }))
    }

    pub fn data_type(&self) -> DataType {
        match self.decoding.packing {
            Some(_) if self.single => DataType::Float32,
            Some(_) => DataType::Float64,
            None => other_sign(self.stored).unwrap_or(DataType::Float64),
        }
    }

    /// Stored values (NULL where missing) -> physical values, NULL kept. The arithmetic
    /// over every value runs in the engine (`Decoding::physical_f32s`).
    pub fn apply(&self, stored: &ArrayRef) -> Result<ArrayRef> {
        if self.decoding.packing.is_none() {
            return reinterpreted(stored);
        }
        let data = stored.to_data();
        let w = self.stored.size();
        let bytes = data
            .buffers()
            .first()
            .and_then(|b| b.as_slice().get(data.offset() * w..(data.offset() + data.len()) * w))
            .ok_or_else(|| {
                Error::InvalidArgument(format!("unpacking: a column of {} values without them", self.stored.name()))
            })?;
        let nulls = stored.nulls().cloned();
        Ok(if self.single {
            Arc::new(Float32Array::new(self.decoding.physical_f32s(self.stored, bytes).into(), nulls))
        } else {
            Arc::new(Float64Array::new(self.decoding.physical_f64s(self.stored, bytes).into(), nulls))
        })
    }

    /// `physical op value` on `var` as a constraint on its stored values that holds wherever
    /// it does, and whether it is exact. A sign view alone: the engine's exact rewrite. A
    /// packing: comparisons ANDed, one stored unit wider (an equality a range). None where
    /// no such constraint is simple (`!=` on a packed variable, a packed sign view), which
    /// DataFusion keeps.
    pub fn on_stored(&self, var: &str, op: CmpOp, value: f64) -> Option<(Predicate, bool)> {
        let Some((scale, offset)) = self.decoding.packing else {
            return Some((self.decoding.on_stored(var, op, value), true));
        };
        if self.decoding.sign.is_some() {
            return None;
        }
        let cmp = |op, value| Predicate::Cmp { var: var.to_string(), op, value };
        let (op, b) = strata_core::decoding::compared_stored(scale, offset, op, value);
        let margin = 1.0f64.max(b.abs() * 1e-6);
        let p = match op {
            CmpOp::Gt | CmpOp::Ge => cmp(CmpOp::Ge, b - margin),
            CmpOp::Lt | CmpOp::Le => cmp(CmpOp::Le, b + margin),
            CmpOp::Eq => Predicate::And { args: vec![cmp(CmpOp::Ge, b - margin), cmp(CmpOp::Le, b + margin)] },
            CmpOp::Ne => return None,
        };
        Some((p, false))
    }
}

/// The integer type of the same width with the other sign.
fn other_sign(t: DType) -> Option<DataType> {
    Some(match t {
        DType::I8 => DataType::UInt8,
        DType::U8 => DataType::Int8,
        DType::I16 => DataType::UInt16,
        DType::U16 => DataType::Int16,
        DType::I32 => DataType::UInt32,
        DType::U32 => DataType::Int32,
        DType::I64 => DataType::UInt64,
        DType::U64 => DataType::Int64,
        _ => return None,
    })
}

/// The same bits read as the integer type of the other sign (NULLs kept): the column's
/// buffers under the other type, nothing copied.
fn reinterpreted(a: &ArrayRef) -> Result<ArrayRef> {
    let other = match a.data_type() {
        DataType::Int8 => DataType::UInt8,
        DataType::UInt8 => DataType::Int8,
        DataType::Int16 => DataType::UInt16,
        DataType::UInt16 => DataType::Int16,
        DataType::Int32 => DataType::UInt32,
        DataType::UInt32 => DataType::Int32,
        DataType::Int64 => DataType::UInt64,
        DataType::UInt64 => DataType::Int64,
        other => return Err(Error::InvalidArgument(format!("a sign view of {other} values"))),
    };
    let data = a
        .to_data()
        .into_builder()
        .data_type(other)
        .build()
        .map_err(|e| Error::InvalidArgument(format!("a sign view: {e}")))?;
    Ok(make_array(data))
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{AsArray, Int16Array, Int8Array, UInt8Array};
    use datafusion::arrow::datatypes::{Float32Type, Float64Type, UInt8Type};
    use strata_core::decoding::SignView;

    fn packed(scale: f64, offset: f64, single: bool) -> Unpack {
        Unpack { decoding: Decoding { sign: None, packing: Some((scale, offset)) }, stored: DType::I16, single }
    }

    /// The bounds `on_stored` gives for a packed variable, as (op, value) pairs.
    fn bounds(u: &Unpack, op: CmpOp, v: f64) -> Option<Vec<(CmpOp, f64)>> {
        let (p, exact) = u.on_stored("x", op, v)?;
        assert!(!exact);
        let one = |p: &Predicate| match p {
            Predicate::Cmp { op, value, .. } => (*op, *value),
            other => panic!("{other:?}"),
        };
        Some(match &p {
            Predicate::And { args } => args.iter().map(one).collect(),
            p => vec![one(p)],
        })
    }

    #[test]
    fn bounds_hold_every_stored_value_whose_physical_value_passes() {
        let u = packed(0.01, 0.0, true);
        for x in -2000i32..2000 {
            let p = x as f32 * 0.01f32;
            for v in [-10.0, -0.005, 0.0, 3.33, 9.99, 10.0, 10.01] {
                for op in [CmpOp::Gt, CmpOp::Ge, CmpOp::Lt, CmpOp::Le, CmpOp::Eq] {
                    if op.test(p as f64, v) {
                        let bounds = bounds(&u, op, v).unwrap_or_else(|| panic!("{op:?}"));
                        assert!(bounds.iter().all(|(sop, b)| sop.test(x as f64, *b)), "{x} {op:?} {v}");
                    }
                }
            }
        }
        let neg = packed(-0.5, 3.0, false);
        let b = bounds(&neg, CmpOp::Gt, 1.0).unwrap_or_default();
        assert_eq!(b.len(), 1);
        assert_eq!(b[0].0, CmpOp::Le);
        assert!(b[0].0.test(3.0, b[0].1), "stored 3 is physical 1.5 > 1");
        assert!(u.on_stored("x", CmpOp::Ne, 1.0).is_none());
    }

    #[test]
    fn unsigned_bytes_read_as_xarray_decodes_them() {
        let u = Unpack {
            decoding: Decoding { sign: Some(SignView::Unsigned(8)), packing: None },
            stored: DType::I8,
            single: false,
        };
        assert_eq!(u.data_type(), DataType::UInt8);
        let stored: ArrayRef = Arc::new(Int8Array::from(vec![Some(-1), None, Some(5), Some(-128)]));
        let read = u.apply(&stored).unwrap();
        assert_eq!(read.as_primitive::<UInt8Type>(), &UInt8Array::from(vec![Some(255), None, Some(5), Some(128)]));
        // Pushed down exactly, by the engine's rule.
        let (_, exact) = u.on_stored("q", CmpOp::Gt, 200.0).unwrap();
        assert!(exact);
        // Packed too: physical = unsigned * 0.5; kept by DataFusion.
        let both = Unpack { decoding: Decoding { sign: Some(SignView::Unsigned(8)), packing: Some((0.5, 0.0)) }, ..u };
        assert_eq!(both.data_type(), DataType::Float64);
        let read = both.apply(&stored).unwrap();
        assert_eq!(read.as_primitive::<Float64Type>().values().to_vec()[..1], [127.5]);
        assert!(both.on_stored("q", CmpOp::Gt, 100.0).is_none());
    }

    #[test]
    fn packed_shorts_unpack_in_float32_as_xarray_does_nulls_kept() {
        let u = packed(0.01, 5.0, true);
        let stored: ArrayRef = Arc::new(Int16Array::from(vec![Some(-300), None, Some(0), Some(1234)]).slice(1, 3));
        let read = u.apply(&stored).unwrap();
        let want: Vec<f32> = [0i16, 1234].iter().map(|&s| s as f32 * 0.01f32 + 5.0f32).collect();
        let got = read.as_primitive::<Float32Type>();
        assert_eq!(got.null_count(), 1);
        assert_eq!(got.values()[1..].to_vec(), want);
    }
}
