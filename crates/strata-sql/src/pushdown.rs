//! Filters DataFusion offers the table: comparisons of a coordinate with a constant become
//! index ranges, comparisons of an auxiliary coordinate (2-D latitude) with a constant
//! become the engine's area mask, comparisons of variables with constants (joined by
//! AND/OR) become a value constraint strata evaluates from its index.
//!
//! A pushed filter is *exact* when strata's answer is the filter's answer: value
//! constraints and areas are (NaN and fill values are NULL, and satisfy no comparison, as
//! in SQL) unless they compare a packed variable (see `crate::unpack`), coordinate ranges
//! when the positions satisfying the comparison are contiguous (monotonic coordinates).
//! Otherwise strata's answer holds the filter's and DataFusion filters again (inexact).

use crate::columns::{Column, CoordValues, TableInner};
use datafusion::common::ScalarValue;
use datafusion::logical_expr::{Between, BinaryExpr, Expr, Operator};
use strata_core::query::{CmpOp, Predicate};

/// What one filter contributes to a scan.
#[derive(Debug, Default)]
pub(crate) struct Pushdown {
    /// Index ranges [lo, hi) along dimensions.
    pub ranges: Vec<(usize, u64, u64)>,
    /// Tests of auxiliary columns (`aux[k] op value`, on stored values) every row passes.
    pub area: Vec<(usize, CmpOp, f64)>,
    pub predicate: Option<Predicate>,
    pub exact: bool,
}

/// A literal as a number in the column's comparison domain.
#[derive(Debug, Clone, Copy)]
enum Operand {
    Num(f64),
    Micros(i64),
}

fn literal(e: &Expr) -> Option<Operand> {
    let Expr::Literal(v, _) = e else { return None };
    Some(match v {
        ScalarValue::Float64(Some(x)) => Operand::Num(*x),
        ScalarValue::Float32(Some(x)) => Operand::Num(*x as f64),
        ScalarValue::Float16(Some(x)) => Operand::Num(f64::from(*x)),
        ScalarValue::Int8(Some(x)) => Operand::Num(*x as f64),
        ScalarValue::Int16(Some(x)) => Operand::Num(*x as f64),
        ScalarValue::Int32(Some(x)) => Operand::Num(*x as f64),
        ScalarValue::Int64(Some(x)) if x.unsigned_abs() <= 1 << 53 => Operand::Num(*x as f64),
        ScalarValue::UInt8(Some(x)) => Operand::Num(*x as f64),
        ScalarValue::UInt16(Some(x)) => Operand::Num(*x as f64),
        ScalarValue::UInt32(Some(x)) => Operand::Num(*x as f64),
        ScalarValue::UInt64(Some(x)) if *x <= 1 << 53 => Operand::Num(*x as f64),
        ScalarValue::TimestampSecond(Some(x), None) => Operand::Micros(x.checked_mul(1_000_000)?),
        ScalarValue::TimestampMillisecond(Some(x), None) => Operand::Micros(x.checked_mul(1000)?),
        ScalarValue::TimestampMicrosecond(Some(x), None) => Operand::Micros(*x),
        ScalarValue::TimestampNanosecond(Some(x), None) => Operand::Micros(x.div_euclid(1000)),
        ScalarValue::Date32(Some(d)) => Operand::Micros(*d as i64 * 86_400_000_000),
        _ => return None,
    })
}

/// The table column an expression reads, looking through numeric casts (which do not
/// change the order of values: f32 -> f64, integers -> wider types or f64).
fn column<'a>(t: &'a TableInner, e: &Expr) -> Option<&'a Column> {
    match e {
        Expr::Column(c) => {
            let i = t.schema.index_of(&c.name).ok()?;
            t.columns.get(i)
        }
        Expr::Cast(c) => {
            let to = c.field.data_type();
            let inner = column(t, &c.expr)?;
            let from = t.schema.field(t.columns.iter().position(|x| x == inner)?).data_type();
            let widening = (from.is_floating() && to == &datafusion::arrow::datatypes::DataType::Float64)
                || (from.is_integer() && (to.is_floating() || to.is_integer()) && width(to) >= width(from))
                || from == to;
            widening.then_some(inner)
        }
        _ => None,
    }
}

fn width(t: &datafusion::arrow::datatypes::DataType) -> usize {
    t.primitive_width().unwrap_or(0) * if t.is_floating() { 2 } else { 1 }
}

fn cmp_op(op: Operator) -> Option<CmpOp> {
    Some(match op {
        Operator::Eq => CmpOp::Eq,
        Operator::NotEq => CmpOp::Ne,
        Operator::Lt => CmpOp::Lt,
        Operator::LtEq => CmpOp::Le,
        Operator::Gt => CmpOp::Gt,
        Operator::GtEq => CmpOp::Ge,
        _ => return None,
    })
}

/// `column op literal` in either order, as (column, op, literal).
fn comparison<'a>(t: &'a TableInner, e: &Expr) -> Option<Vec<(&'a Column, CmpOp, Operand)>> {
    match e {
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => {
            let op = cmp_op(*op)?;
            if let (Some(c), Some(v)) = (column(t, left), literal(right)) {
                return Some(vec![(c, op, v)]);
            }
            if let (Some(v), Some(c)) = (literal(left), column(t, right)) {
                return Some(vec![(c, op.flipped(), v)]);
            }
            None
        }
        Expr::Between(Between { expr, negated: false, low, high }) => {
            let c = column(t, expr)?;
            Some(vec![(c, CmpOp::Ge, literal(low)?), (c, CmpOp::Le, literal(high)?)])
        }
        _ => None,
    }
}

/// The positions along a dimension where `coord op v` holds: their bounding range and
/// whether they fill it.
fn coord_range(values: &CoordValues, len: u64, op: CmpOp, v: Operand) -> Option<(u64, u64, bool)> {
    let hits: Vec<bool> = match (values, v) {
        (CoordValues::Numeric(xs), Operand::Num(v)) => xs.iter().map(|&x| !x.is_nan() && op.test(x, v)).collect(),
        (CoordValues::Index, Operand::Num(v)) => (0..len).map(|i| op.test(i as f64, v)).collect(),
        (CoordValues::Time(ts), Operand::Micros(v)) => ts.iter().map(|&x| op.test(x, v)).collect(),
        _ => return None,
    };
    let first = hits.iter().position(|&h| h);
    let last = hits.iter().rposition(|&h| h);
    Some(match (first, last) {
        (Some(a), Some(b)) => (a as u64, b as u64 + 1, hits[a..=b].iter().all(|&h| h)),
        _ => (0, 0, true),
    })
}

/// A value constraint from comparisons of variables joined by AND/OR, and whether it is
/// exact: a packed variable's comparisons run on stored values widened (see
/// [`crate::unpack`]) and are not, and widening one side of an AND or OR widens the whole.
fn value_predicate(t: &TableInner, e: &Expr) -> Option<(Predicate, bool)> {
    match e {
        Expr::BinaryExpr(BinaryExpr { left, op: op @ (Operator::And | Operator::Or), right }) => {
            let (l, l_exact) = value_predicate(t, left)?;
            let (r, r_exact) = value_predicate(t, right)?;
            let args = vec![l, r];
            let p = if *op == Operator::And { Predicate::And { args } } else { Predicate::Or { args } };
            Some((p, l_exact && r_exact))
        }
        _ => {
            let parts = comparison(t, e)?;
            let mut args = Vec::new();
            let mut exact = true;
            for (c, op, v) in parts {
                let (Column::Var(name), Operand::Num(value)) = (c, v) else { return None };
                match t.packed.get(name) {
                    None => args.push(Predicate::Cmp { var: name.clone(), op, value }),
                    Some(u) => {
                        let (p, p_exact) = u.on_stored(name, op, value)?;
                        args.push(p);
                        exact &= p_exact;
                    }
                }
            }
            let p = if args.len() == 1 { args.pop()? } else { Predicate::And { args } };
            Some((p, exact))
        }
    }
}

/// What strata can do with one filter; None when nothing.
pub(crate) fn classify(t: &TableInner, e: &Expr) -> Option<Pushdown> {
    if let Some(parts) = comparison(t, e) {
        if parts.iter().all(|(c, _, _)| matches!(c, Column::Coord(_))) {
            let mut out = Pushdown { exact: true, ..Pushdown::default() };
            for (c, op, v) in parts {
                let Column::Coord(d) = c else { return None };
                let (lo, hi, exact) = coord_range(&t.coords[*d].values, t.group.shape[*d], op, v)?;
                out.ranges.push((*d, lo, hi));
                out.exact &= exact;
            }
            return Some(out);
        }
        if parts.iter().all(|(c, _, _)| matches!(c, Column::Aux(_))) {
            let mut out = Pushdown { exact: true, ..Pushdown::default() };
            for (c, op, v) in parts {
                let (Column::Aux(k), Operand::Num(v)) = (c, v) else { return None };
                out.area.push((*k, op, v));
            }
            return Some(out);
        }
    }
    let (predicate, exact) = value_predicate(t, e)?;
    Some(Pushdown { predicate: Some(predicate), exact, ..Pushdown::default() })
}
