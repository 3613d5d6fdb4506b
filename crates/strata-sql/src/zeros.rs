//! Signed zeros in comparisons. DataFusion compares floats as IEEE 754 does (-0.0 = +0.0),
//! and so does strata's engine, but two of DataFusion's paths tell the zeros apart by their
//! bits: the expression simplifier (`x = 0 AND x != -0.0` loses its second half, so the
//! answer depends on where the conjuncts stand: the SQL fuzzer found `lat = 0 AND ice >= 3
//! AND lat != -0.0` counting 0 rows and the same with the last two swapped 28), and an IN
//! list long enough to be hashed (`x IN (-0.0, 1, 2, 3, 4, 5, 6, 7)` misses x = +0.0;
//! apache/datafusion#25186). Before the optimizer runs, this rule writes a zero compared with
//! anything as +0.0 and gives an IN list holding a zero both zeros, so every path answers as
//! IEEE 754 does (`x != -(0.0)` too: tested). Zeros computed by functions (`x = -sin(0)`),
//! which only constant folding turns into literals, are not seen.

use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{Result, ScalarValue};
use datafusion::config::ConfigOptions;
use datafusion::logical_expr::expr::InList;
use datafusion::logical_expr::{Between, BinaryExpr, Expr, LogicalPlan, Operator};
use datafusion::optimizer::AnalyzerRule;

/// The analyzer rule (see the module's text).
#[derive(Debug, Default)]
pub(crate) struct SignedZeros;

impl AnalyzerRule for SignedZeros {
    fn analyze(&self, plan: LogicalPlan, _: &ConfigOptions) -> Result<LogicalPlan> {
        plan.transform_up_with_subqueries(|p| p.map_expressions(|e| e.transform_up(rewrite))).map(|t| t.data)
    }

    fn name(&self) -> &str {
        "strata_signed_zeros"
    }
}

fn compares(op: Operator) -> bool {
    matches!(
        op,
        Operator::Eq
            | Operator::NotEq
            | Operator::Lt
            | Operator::LtEq
            | Operator::Gt
            | Operator::GtEq
            | Operator::IsDistinctFrom
            | Operator::IsNotDistinctFrom
    )
}

/// A float zero of either sign: Some(its +0.0 and its -0.0).
fn zeros(v: &ScalarValue) -> Option<(ScalarValue, ScalarValue)> {
    match v {
        ScalarValue::Float32(Some(x)) if *x == 0.0 => {
            Some((ScalarValue::Float32(Some(0.0)), ScalarValue::Float32(Some(-0.0))))
        }
        ScalarValue::Float64(Some(x)) if *x == 0.0 => {
            Some((ScalarValue::Float64(Some(0.0)), ScalarValue::Float64(Some(-0.0))))
        }
        _ => None,
    }
}

/// Whether two floats are the same bits (ScalarValue's own equality is not a promise).
fn same_bits(a: &ScalarValue, b: &ScalarValue) -> bool {
    match (a, b) {
        (ScalarValue::Float32(Some(x)), ScalarValue::Float32(Some(y))) => x.to_bits() == y.to_bits(),
        (ScalarValue::Float64(Some(x)), ScalarValue::Float64(Some(y))) => x.to_bits() == y.to_bits(),
        _ => false,
    }
}

fn is_negative_zero(e: &Expr) -> bool {
    matches!(e, Expr::Literal(v, _) if zeros(v).is_some_and(|(_, minus)| same_bits(v, &minus)))
}

/// `e` with a -0.0 literal made +0.0; whether it was one.
fn positive(e: Box<Expr>) -> (Box<Expr>, bool) {
    if !is_negative_zero(&e) {
        return (e, false);
    }
    match *e {
        Expr::Literal(v, meta) => {
            let plus = zeros(&v).map_or(v, |(p, _)| p);
            (Box::new(Expr::Literal(plus, meta)), true)
        }
        other => (Box::new(other), false),
    }
}

fn rewrite(e: Expr) -> Result<Transformed<Expr>> {
    Ok(match e {
        Expr::BinaryExpr(BinaryExpr { left, op, right }) if compares(op) => {
            let (left, l) = positive(left);
            let (right, r) = positive(right);
            let e = Expr::BinaryExpr(BinaryExpr { left, op, right });
            if l || r {
                Transformed::yes(e)
            } else {
                Transformed::no(e)
            }
        }
        Expr::Between(Between { expr, negated, low, high }) => {
            let (low, l) = positive(low);
            let (high, h) = positive(high);
            let e = Expr::Between(Between { expr, negated, low, high });
            if l || h {
                Transformed::yes(e)
            } else {
                Transformed::no(e)
            }
        }
        Expr::InList(InList { expr, mut list, negated }) => {
            let zero = list.iter().find_map(|x| match x {
                Expr::Literal(v, meta) => zeros(v).map(|z| (z, meta.clone())),
                _ => None,
            });
            let Some(((plus, minus), meta)) = zero else {
                return Ok(Transformed::no(Expr::InList(InList { expr, list, negated })));
            };
            let has = |z: &ScalarValue, list: &[Expr]| {
                list.iter().any(|x| matches!(x, Expr::Literal(v, _) if same_bits(v, z)))
            };
            let mut changed = false;
            for z in [plus, minus] {
                if !has(&z, &list) {
                    list.push(Expr::Literal(z, meta.clone()));
                    changed = true;
                }
            }
            let e = Expr::InList(InList { expr, list, negated });
            if changed {
                Transformed::yes(e)
            } else {
                Transformed::no(e)
            }
        }
        e => Transformed::no(e),
    })
}
