//! Packed variables (CF `scale_factor`, `add_offset`) as physical values. A SQL column of a
//! packed variable holds what xarray decodes — `stored * scale_factor + add_offset`, in
//! float32 when the attributes are float32 and the stored values are 16 bits or fewer,
//! else float64 — so `WHERE temperature > 10` compares degrees, as `Dataset.query` does,
//! not the stored integers. A comparison pushed into the engine is rewritten on stored
//! values (`strata_core::constraint::compared_stored`), widened by a stored unit so
//! that float rounding of the physical value cannot leave a row out, and DataFusion filters
//! the physical column again (inexact).

use datafusion::arrow::array::{ArrayRef, AsArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Float32Type, Float64Type};
use std::sync::Arc;
use strata_core::manifest::AttrValue;
use strata_core::query::CmpOp;
use strata_core::{Error, Manifest, Result};

/// How a packed variable's stored values become physical ones.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Unpack {
    pub scale: f64,
    pub offset: f64,
    /// Physical values as float32 (else float64).
    pub single: bool,
}

impl Unpack {
    /// The unpacking of `name`; None when it is not packed.
    pub fn of(m: &Manifest, name: &str) -> Result<Option<Unpack>> {
        let Some((scale, offset)) = strata_core::constraint::packing(m, name)? else { return Ok(None) };
        let (_, v) = m.variable(name)?;
        let attrs_single = v
            .attrs
            .iter()
            .filter(|a| a.name == "scale_factor" || a.name == "add_offset")
            .all(|a| matches!(a.value, AttrValue::F32(_)));
        Ok(Some(Unpack { scale, offset, single: attrs_single && v.dtype.size() <= 2 }))
    }

    pub fn data_type(&self) -> DataType {
        if self.single {
            DataType::Float32
        } else {
            DataType::Float64
        }
    }

    /// Stored values (NULL where missing) -> physical values, NULL kept.
    pub fn apply(&self, stored: &ArrayRef) -> Result<ArrayRef> {
        let wide = cast(stored, &self.data_type()).map_err(|e| Error::InvalidArgument(format!("unpacking: {e}")))?;
        Ok(if self.single {
            let (s, o) = (self.scale as f32, self.offset as f32);
            Arc::new(wide.as_primitive::<Float32Type>().unary::<_, Float32Type>(|x| x * s + o))
        } else {
            let (s, o) = (self.scale, self.offset);
            Arc::new(wide.as_primitive::<Float64Type>().unary::<_, Float64Type>(|x| x * s + o))
        })
    }

    /// `physical op value` as comparisons on stored values, ANDed, that hold wherever it
    /// does (one stored unit wider; an equality a range); None for `!=`, which DataFusion
    /// keeps.
    pub fn stored_bounds(&self, op: CmpOp, value: f64) -> Option<Vec<(CmpOp, f64)>> {
        let (op, b) = strata_core::constraint::compared_stored(self.scale, self.offset, op, value);
        let margin = 1.0f64.max(b.abs() * 1e-6);
        match op {
            CmpOp::Gt | CmpOp::Ge => Some(vec![(CmpOp::Ge, b - margin)]),
            CmpOp::Lt | CmpOp::Le => Some(vec![(CmpOp::Le, b + margin)]),
            CmpOp::Eq => Some(vec![(CmpOp::Ge, b - margin), (CmpOp::Le, b + margin)]),
            CmpOp::Ne => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_hold_every_stored_value_whose_physical_value_passes() {
        let u = Unpack { scale: 0.01, offset: 0.0, single: true };
        for x in -2000i32..2000 {
            let p = x as f32 * 0.01f32;
            for v in [-10.0, -0.005, 0.0, 3.33, 9.99, 10.0, 10.01] {
                for op in [CmpOp::Gt, CmpOp::Ge, CmpOp::Lt, CmpOp::Le, CmpOp::Eq] {
                    if op.test(p as f64, v) {
                        let bounds = u.stored_bounds(op, v).unwrap_or_else(|| panic!("{op:?}"));
                        assert!(bounds.iter().all(|(sop, b)| sop.test(x as f64, *b)), "{x} {op:?} {v}");
                    }
                }
            }
        }
        let neg = Unpack { scale: -0.5, offset: 3.0, single: false };
        let bounds = neg.stored_bounds(CmpOp::Gt, 1.0).unwrap_or_default();
        assert_eq!(bounds.len(), 1);
        assert_eq!(bounds[0].0, CmpOp::Le);
        assert!(bounds[0].0.test(3.0, bounds[0].1), "stored 3 is physical 1.5 > 1");
        assert!(u.stored_bounds(CmpOp::Ne, 1.0).is_none());
    }
}
