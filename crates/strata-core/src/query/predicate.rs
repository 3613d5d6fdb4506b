//! Comparisons and constraints: what a value query tests, on summaries and on values.

use crate::dtype::DType;
use crate::error::{Error, Result};
use serde::Deserialize;
use std::collections::HashMap;

/// A comparison of a variable's values with a constant. Invalid elements (NaN and the
/// variable's fill values) satisfy no comparison, `!=` included (SQL's NULL semantics).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum CmpOp {
    #[serde(rename = "<")]
    Lt,
    #[serde(rename = "<=")]
    Le,
    #[serde(rename = ">")]
    Gt,
    #[serde(rename = ">=")]
    Ge,
    #[serde(rename = "==")]
    Eq,
    #[serde(rename = "!=")]
    Ne,
}

/// How much of a segment a comparison selects, judged from its summary alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Coverage {
    Empty,
    Full,
    Boundary,
}

impl CmpOp {
    /// The comparison with its sides swapped: `v op x` is `x op.flipped() v`.
    pub fn flipped(self) -> CmpOp {
        match self {
            CmpOp::Lt => CmpOp::Gt,
            CmpOp::Le => CmpOp::Ge,
            CmpOp::Gt => CmpOp::Lt,
            CmpOp::Ge => CmpOp::Le,
            CmpOp::Eq | CmpOp::Ne => self,
        }
    }

    /// `x op v` for any ordered type (floats, and the microseconds of time coordinates).
    pub fn test<T: PartialOrd>(self, x: T, v: T) -> bool {
        match self {
            CmpOp::Lt => x < v,
            CmpOp::Le => x <= v,
            CmpOp::Gt => x > v,
            CmpOp::Ge => x >= v,
            CmpOp::Eq => x == v,
            CmpOp::Ne => x != v,
        }
    }

    /// Which of `values` satisfy `x op v`, NaN and the `missing` values never. One loop per
    /// operator, so each compiles to a vectorized comparison (boundary segments of every
    /// value query go through here).
    pub fn matches(self, values: &[f64], v: f64, missing: &[f64]) -> Vec<bool> {
        self.matches_each(values.iter().copied(), v, missing)
    }

    /// [`matches`](Self::matches) on little-endian elements of `dtype`, floats compared as
    /// they are read (no f64 copy of the segment).
    pub fn matches_raw(self, dtype: DType, bytes: &[u8], v: f64, missing: &[f64]) -> Vec<bool> {
        fn read<const N: usize>(c: &[u8]) -> [u8; N] {
            let mut a = [0u8; N];
            a.copy_from_slice(c);
            a
        }
        match dtype {
            DType::F32 => {
                self.matches_each(bytes.chunks_exact(4).map(|c| f32::from_le_bytes(read(c)) as f64), v, missing)
            }
            DType::F64 => self.matches_each(bytes.chunks_exact(8).map(|c| f64::from_le_bytes(read(c))), v, missing),
            _ => self.matches(&dtype.to_f64s(bytes), v, missing),
        }
    }

    fn matches_each<I: Iterator<Item = f64> + Clone>(self, values: I, v: f64, missing: &[f64]) -> Vec<bool> {
        let mut keep: Vec<bool> = match self {
            CmpOp::Lt => values.clone().map(|x| x < v).collect(),
            CmpOp::Le => values.clone().map(|x| x <= v).collect(),
            CmpOp::Gt => values.clone().map(|x| x > v).collect(),
            CmpOp::Ge => values.clone().map(|x| x >= v).collect(),
            CmpOp::Eq => values.clone().map(|x| x == v).collect(),
            // NaN fails every other comparison by itself.
            CmpOp::Ne => values.clone().map(|x| x != v && !x.is_nan()).collect(),
        };
        // Missing values need a second look only when one of them would pass.
        if missing.iter().any(|&m| self.test(m, v)) {
            for (k, x) in keep.iter_mut().zip(values) {
                if missing.contains(&x) {
                    *k = false;
                }
            }
        }
        keep
    }

    /// From the valid elements' minimum and maximum; `all_valid` when the segment has no
    /// invalid element (otherwise it is never full).
    pub(crate) fn coverage(self, count: u64, min: f64, max: f64, all_valid: bool, v: f64) -> Coverage {
        if count == 0 {
            return Coverage::Empty;
        }
        let (full, empty) = match self {
            CmpOp::Lt => (max < v, min >= v),
            CmpOp::Le => (max <= v, min > v),
            CmpOp::Gt => (min > v, max <= v),
            CmpOp::Ge => (min >= v, max < v),
            CmpOp::Eq => (min == v && max == v, v < min || v > max),
            CmpOp::Ne => (v < min || v > max, min == v && max == v),
        };
        if empty {
            Coverage::Empty
        } else if full && all_valid {
            Coverage::Full
        } else {
            Coverage::Boundary
        }
    }
}

/// A value constraint: comparisons combined with AND and OR.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum Predicate {
    Cmp {
        var: String,
        op: CmpOp,
        #[serde(deserialize_with = "number_or_infinity")]
        value: f64,
    },
    And {
        args: Vec<Predicate>,
    },
    Or {
        args: Vec<Predicate>,
    },
}

/// JSON has no infinities: they come as the strings "inf" and "-inf".
fn number_or_infinity<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<f64, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Repr {
        Num(f64),
        Text(String),
    }
    match Repr::deserialize(d)? {
        Repr::Num(x) => Ok(x),
        Repr::Text(t) => match t.to_ascii_lowercase().as_str() {
            "inf" | "+inf" | "infinity" => Ok(f64::INFINITY),
            "-inf" | "-infinity" => Ok(f64::NEG_INFINITY),
            _ => Err(serde::de::Error::custom(format!("'{t}' is not a number to compare with"))),
        },
    }
}

/// Decoded values of the constrained variables over one box, as f64, with each variable's
/// missing values (fill values; NaN is always invalid).
#[derive(Debug)]
pub struct DenseValues<'a> {
    pub len: usize,
    pub columns: HashMap<&'a str, (Vec<f64>, Vec<f64>)>,
}

impl Predicate {
    /// The variables the constraint names, first-named first.
    pub fn variable_names(&self) -> Vec<&str> {
        let mut out = Vec::new();
        self.variables(&mut out);
        out
    }

    /// Which elements of a dense box satisfy the constraint.
    pub fn test_dense(&self, values: &DenseValues<'_>) -> Result<Vec<bool>> {
        match self {
            Predicate::Cmp { var, op, value } => {
                let Some((xs, missing)) = values.columns.get(var.as_str()) else {
                    return Err(Error::InvalidArgument(format!("no values of '{var}' to test")));
                };
                Ok(op.matches(xs, *value, missing))
            }
            Predicate::And { args } => {
                let mut acc = vec![true; values.len];
                for a in args {
                    for (x, y) in acc.iter_mut().zip(a.test_dense(values)?) {
                        *x &= y;
                    }
                }
                Ok(acc)
            }
            Predicate::Or { args } => {
                let mut acc = vec![false; values.len];
                for a in args {
                    for (x, y) in acc.iter_mut().zip(a.test_dense(values)?) {
                        *x |= y;
                    }
                }
                Ok(acc)
            }
        }
    }

    /// The comparisons on `var` that every satisfying element must pass: the constraint
    /// itself, or those of an AND, nested ANDs included (an OR promises nothing).
    pub(super) fn required_on(&self, var: &str) -> Vec<(CmpOp, f64)> {
        match self {
            Predicate::Cmp { var: v, op, value } if v == var => vec![(*op, *value)],
            Predicate::And { args } => args.iter().flat_map(|a| a.required_on(var)).collect(),
            _ => vec![],
        }
    }

    pub(super) fn variables<'a>(&'a self, out: &mut Vec<&'a str>) {
        match self {
            Predicate::Cmp { var, .. } => {
                if !out.contains(&var.as_str()) {
                    out.push(var)
                }
            }
            Predicate::And { args } | Predicate::Or { args } => args.iter().for_each(|a| a.variables(out)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only comparisons every satisfying element must pass are required: ANDs (nested
    /// too) promise theirs, an OR or a NOT turned into comparisons promises nothing more.
    #[test]
    fn required_comparisons_come_from_ands_only() {
        let p = |t: &str| crate::constraint::parse(t).unwrap();
        assert_eq!(p("sst > 18").required_on("sst"), vec![(CmpOp::Gt, 18.0)]);
        assert!(p("sst > 18").required_on("ice").is_empty());
        let both = p("sst > 18 and (ice < 3 and sst <= 25)").required_on("sst");
        assert_eq!(both, vec![(CmpOp::Gt, 18.0), (CmpOp::Le, 25.0)]);
        assert!(p("sst > 18 or ice < 3").required_on("sst").is_empty());
        assert!(p("(sst > 18 or sst < 2) and ice < 3").required_on("sst").is_empty());
    }
}
