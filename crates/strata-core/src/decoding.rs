//! How a variable's stored numbers become the physical values users see in xarray and
//! compare in constraints (CF decoding, in xarray's order): `_Unsigned` first, reading the
//! integers with the other sign, then `scale_factor`/`add_offset`. One rule for every
//! front end: Python's queries, SQL, the server's query API and DAP2 selections, quick-looks.

use crate::error::{Error, Result};
use crate::manifest::{AttrValue, Manifest, Variable};
use crate::query::{CmpOp, Predicate};
use crate::DType;

/// Integers read with the other signedness than stored, by CF's `_Unsigned`: `"true"` on a
/// signed type (NetCDF-3 has no unsigned types, so unsigned bytes are kept as signed ones),
/// `"false"` on an unsigned one. The type's width in bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignView {
    /// Signed storage read as unsigned: a negative stored `s` means `s + 2^bits`.
    Unsigned(u32),
    /// Unsigned storage read as signed: a stored `u` of `2^(bits-1)` or more means `u - 2^bits`.
    Signed(u32),
}

impl SignView {
    /// The sign view `var`'s `_Unsigned` asks for, if it changes anything.
    pub fn of(var: &Variable) -> Option<SignView> {
        let flag = var.attrs.iter().find(|a| a.name == "_Unsigned").and_then(|a| match &a.value {
            AttrValue::String(s) => Some(s.trim().to_ascii_lowercase()),
            _ => None,
        })?;
        let bits = 8 * var.dtype.size() as u32;
        match (var.dtype, flag.as_str()) {
            (DType::I8 | DType::I16 | DType::I32 | DType::I64, "true") => Some(SignView::Unsigned(bits)),
            (DType::U8 | DType::U16 | DType::U32 | DType::U64, "false") => Some(SignView::Signed(bits)),
            _ => None,
        }
    }

    /// A stored value (as f64) read this way.
    pub fn read(self, stored: f64) -> f64 {
        match self {
            SignView::Unsigned(bits) if stored < 0.0 => stored + 2f64.powi(bits as i32),
            SignView::Signed(bits) if stored >= 2f64.powi(bits as i32 - 1) => stored - 2f64.powi(bits as i32),
            _ => stored,
        }
    }

    /// `read(stored) op value` as a predicate on the stored values of `var`: the stored
    /// values read as they are, and those read shifted by 2^bits, each against its own
    /// constant. Exact.
    fn on_stored(self, var: &str, op: CmpOp, value: f64) -> Predicate {
        let cmp = |op, value| Predicate::Cmp { var: var.to_string(), op, value };
        // Stored values below `split` are compared with `low`, the others with `high`: the
        // constant as stored, or shifted where the stored values are read shifted.
        let (split, low, high) = match self {
            SignView::Unsigned(bits) => (0.0, value - 2f64.powi(bits as i32), value),
            SignView::Signed(bits) => (2f64.powi(bits as i32 - 1), value, value + 2f64.powi(bits as i32)),
        };
        Predicate::Or {
            args: vec![
                Predicate::And { args: vec![cmp(CmpOp::Lt, split), cmp(op, low)] },
                Predicate::And { args: vec![cmp(CmpOp::Ge, split), cmp(op, high)] },
            ],
        }
    }
}

/// A variable's packing (`value = stored * scale_factor + add_offset`, CF), when it has one.
pub fn packing(manifest: &Manifest, var: &str) -> Result<Option<(f64, f64)>> {
    let (_, v) = manifest.variable(var)?;
    let attr = |name: &str| v.attrs.iter().find(|a| a.name == name).and_then(|a| a.value.as_f64s().first().copied());
    let (scale, offset) = (attr("scale_factor"), attr("add_offset"));
    if scale.is_none() && offset.is_none() {
        return Ok(None);
    }
    let (scale, offset) = (scale.unwrap_or(1.0), offset.unwrap_or(0.0));
    if scale == 0.0 || !scale.is_finite() || !offset.is_finite() {
        return Err(Error::InvalidArgument(format!(
            "'{var}' has scale_factor {scale} and add_offset {offset}: its physical values cannot be compared; \
             compare stored values instead"
        )));
    }
    Ok(Some((scale, offset)))
}

/// `physical op value` on a variable packed with (`scale`, `offset`) as the same comparison
/// on its stored values: the constant unpacked, the operator flipped when the scale is
/// negative. Exact in real numbers; SQL widens it for float rounding (`strata_sql::unpack`).
pub fn compared_stored(scale: f64, offset: f64, op: CmpOp, value: f64) -> (CmpOp, f64) {
    (if scale < 0.0 { op.flipped() } else { op }, (value - offset) / scale)
}

/// The whole decoding of one variable.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Decoding {
    pub sign: Option<SignView>,
    /// (`scale_factor`, `add_offset`).
    pub packing: Option<(f64, f64)>,
}

impl Decoding {
    pub fn of(manifest: &Manifest, var: &str) -> Result<Decoding> {
        let (_, v) = manifest.variable(var)?;
        Ok(Decoding { sign: SignView::of(v), packing: packing(manifest, var)? })
    }

    /// Whether physical values are the stored ones.
    pub fn is_identity(&self) -> bool {
        self.sign.is_none() && self.packing.is_none()
    }

    /// One stored value's physical value (NaN stays NaN).
    pub fn physical(&self, stored: f64) -> f64 {
        let v = self.sign.map_or(stored, |s| s.read(stored));
        self.packing.map_or(v, |(scale, offset)| v * scale + offset)
    }

    /// [`physical`](Self::physical) of every little-endian element of `bytes`, of type
    /// `stored`. Columns of physical values (SQL's) are built here, at the engine's
    /// optimization.
    pub fn physical_f64s(&self, stored: DType, bytes: &[u8]) -> Vec<f64> {
        let mut out = Vec::with_capacity(bytes.len() / stored.size().max(1));
        stored.for_each_f64_block(bytes, |block| out.extend(block.iter().map(|&v| self.physical(v))));
        out
    }

    /// [`physical_f64s`](Self::physical_f64s) in f32 arithmetic, as xarray unpacks
    /// integers of 16 bits or fewer packed with float32 attributes: the value read as f32,
    /// then `* scale + offset` in f32.
    pub fn physical_f32s(&self, stored: DType, bytes: &[u8]) -> Vec<f32> {
        let (scale, offset) = self.packing.unwrap_or((1.0, 0.0));
        let (scale, offset) = (scale as f32, offset as f32);
        let mut out = Vec::with_capacity(bytes.len() / stored.size().max(1));
        stored.for_each_f64_block(bytes, |block| {
            out.extend(block.iter().map(|&v| self.sign.map_or(v, |s| s.read(v)) as f32 * scale + offset))
        });
        out
    }

    /// `physical op value` on `var` as a predicate on its stored values: the constant
    /// unpacked (the operator flipped for a negative scale), then split where the sign is
    /// read differently. Exact in real numbers.
    pub fn on_stored(&self, var: &str, op: CmpOp, value: f64) -> Predicate {
        let (op, value) = self.packing.map_or((op, value), |(s, o)| compared_stored(s, o, op, value));
        match self.sign {
            Some(sign) => sign.on_stored(var, op, value),
            None => Predicate::Cmp { var: var.to_string(), op, value },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::Attribute;

    fn var(dtype: DType, unsigned: Option<&str>) -> Variable {
        let mut attrs = vec![];
        if let Some(u) = unsigned {
            attrs.push(Attribute { name: "_Unsigned".into(), value: AttrValue::String(u.into()) });
        }
        Variable {
            name: "q".into(),
            dtype,
            dims: vec![],
            attrs,
            chunking: None,
            codecs: vec![],
            inline_strings: None,
            plan: None,
        }
    }

    /// Whether `p`, a predicate on `q` alone, holds for the stored value `s`.
    fn holds(p: &Predicate, s: f64) -> bool {
        match p {
            Predicate::Cmp { op, value, .. } => op.test(s, *value),
            Predicate::And { args } => args.iter().all(|a| holds(a, s)),
            Predicate::Or { args } => args.iter().any(|a| holds(a, s)),
        }
    }

    const OPS: [CmpOp; 6] = [CmpOp::Lt, CmpOp::Le, CmpOp::Gt, CmpOp::Ge, CmpOp::Eq, CmpOp::Ne];

    #[test]
    fn unsigned_flags_follow_xarray() {
        assert_eq!(SignView::of(&var(DType::I8, Some("true"))), Some(SignView::Unsigned(8)));
        assert_eq!(SignView::of(&var(DType::I16, Some(" True "))), Some(SignView::Unsigned(16)));
        assert_eq!(SignView::of(&var(DType::U8, Some("false"))), Some(SignView::Signed(8)));
        // Flags that change nothing, and floats, are no sign view.
        for (t, u) in
            [(DType::I8, Some("false")), (DType::U8, Some("true")), (DType::F32, Some("true")), (DType::I8, None)]
        {
            assert_eq!(SignView::of(&var(t, u)), None, "{t:?} {u:?}");
        }
        assert_eq!(SignView::Unsigned(8).read(-1.0), 255.0);
        assert_eq!(SignView::Unsigned(8).read(127.0), 127.0);
        assert_eq!(SignView::Signed(8).read(128.0), -128.0);
        assert_eq!(SignView::Signed(16).read(65535.0), -1.0);
    }

    #[test]
    fn comparisons_on_stored_values_select_what_the_physical_ones_do() {
        let decodings = [
            Decoding { sign: Some(SignView::Unsigned(8)), packing: None },
            Decoding { sign: Some(SignView::Signed(8)), packing: None },
            Decoding { sign: Some(SignView::Unsigned(8)), packing: Some((0.5, -10.0)) },
            Decoding { sign: Some(SignView::Unsigned(8)), packing: Some((-2.0, 100.0)) },
            Decoding { sign: None, packing: Some((0.25, 1.0)) },
        ];
        for d in decodings {
            let stored: Vec<f64> = match d.sign {
                Some(SignView::Signed(_)) => (0..256).map(f64::from).collect(),
                _ => (-128..128).map(f64::from).collect(),
            };
            let physical: Vec<f64> = stored.iter().map(|&s| d.physical(s)).collect();
            let mut thresholds: Vec<f64> = physical.clone();
            thresholds.extend([-1e9, 1e9, 0.3, 127.5, 128.0, 200.25]);
            for &t in &thresholds {
                for op in OPS {
                    let p = d.on_stored("q", op, t);
                    for (&s, &v) in stored.iter().zip(&physical) {
                        assert_eq!(holds(&p, s), op.test(v, t), "{d:?}: stored {s} (physical {v}) {op:?} {t}");
                    }
                }
            }
        }
    }
}
