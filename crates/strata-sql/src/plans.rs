//! Physical plans kept per query text, so that a session asked the same query again (a
//! server's clients, a notebook's loop, a dashboard) runs it without parsing, planning
//! and optimizing it again. With DataFusion's planning crates built at opt-level 0 (for the
//! cold build), that work is 1.5-3 ms of CPU per query: as much as a selective query's own
//! reads.
//!
//! A kept plan is never run itself: each run gets a copy with fresh state from
//! DataFusion's `reset_plan_states` (the one used to run recursive queries' plans again),
//! in which every scan starts a new query of the engine's session, so the cost model plans
//! each run anew and learns from it as before.
//!
//! Only plans whose result depends on nothing but the text and the session's tables are
//! kept: not EXPLAIN (its text shows a run), not plans calling functions that are not
//! immutable (`now()` is folded to a constant while optimizing, `random()` differs per
//! call), and only plans reading strata's own tables or no table (the information schema
//! is built while planning).

use crate::exec::StrataScan;
use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::common::Result as DfResult;
use datafusion::logical_expr::{Expr, LogicalPlan, Volatility};
use datafusion::physical_plan::empty::EmptyExec;
use datafusion::physical_plan::placeholder_row::PlaceholderRowExec;
use datafusion::physical_plan::ExecutionPlan;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

/// How many plans a session keeps: the most recently used.
pub(crate) const PLANS_KEPT: usize = 64;

/// Queries longer than this are planned every time (a kept plan is about as large as its
/// text, and a server keeps its sessions).
const LONGEST_KEPT: usize = 16 * 1024;

/// The plans kept by a session, most recently used last.
#[derive(Debug, Default)]
pub(crate) struct Plans {
    kept: Mutex<VecDeque<(String, Arc<dyn ExecutionPlan>)>>,
}

impl Plans {
    /// A copy of the plan kept for `sql`, ready to run, marked most recently used.
    pub fn get(&self, sql: &str) -> DfResult<Option<Arc<dyn ExecutionPlan>>> {
        let plan = {
            let Ok(mut kept) = self.kept.lock() else { return Ok(None) };
            let Some(i) = kept.iter().position(|(text, _)| text == sql) else { return Ok(None) };
            let Some(entry) = kept.remove(i) else { return Ok(None) };
            let plan = entry.1.clone();
            kept.push_back(entry);
            plan
        };
        datafusion::physical_plan::execution_plan::reset_plan_states(plan).map(Some)
    }

    /// Keeps `plan` for `sql` when [`reusable`] says it may be, dropping the least recently
    /// used plan beyond [`PLANS_KEPT`].
    pub fn keep(&self, sql: &str, logical: &LogicalPlan, plan: &Arc<dyn ExecutionPlan>) {
        if sql.len() > LONGEST_KEPT || !reusable(logical, plan) {
            return;
        }
        let Ok(mut kept) = self.kept.lock() else { return };
        if kept.iter().any(|(text, _)| text == sql) {
            return;
        }
        if kept.len() >= PLANS_KEPT {
            kept.pop_front();
        }
        kept.push_back((sql.to_string(), plan.clone()));
    }

    /// How many plans are kept.
    pub fn len(&self) -> usize {
        self.kept.lock().map(|k| k.len()).unwrap_or(0)
    }
}

/// Whether a plan may run again for the same text: `logical` is the statement as planned
/// from the text, before the optimizer folded anything.
fn reusable(logical: &LogicalPlan, plan: &Arc<dyn ExecutionPlan>) -> bool {
    if matches!(logical, LogicalPlan::Explain(_) | LogicalPlan::Analyze(_) | LogicalPlan::DescribeTable(_)) {
        return false;
    }
    immutable(logical) && leaves_are_own(plan)
}

/// Whether every function the statement calls, in subqueries too, is immutable, and it has
/// no placeholder or variable.
fn immutable(logical: &LogicalPlan) -> bool {
    let mut ok = true;
    let visited = logical.apply_with_subqueries(|node| {
        node.apply_expressions(|e| {
            e.apply(|e| {
                let fixed = match e {
                    Expr::ScalarFunction(f) => f.func.signature().volatility == Volatility::Immutable,
                    Expr::AggregateFunction(f) => f.func.signature().volatility == Volatility::Immutable,
                    Expr::WindowFunction(_) => true,
                    Expr::Placeholder(_) | Expr::ScalarVariable(..) => false,
                    _ => true,
                };
                ok &= fixed;
                Ok(if fixed { TreeNodeRecursion::Continue } else { TreeNodeRecursion::Stop })
            })
        })
    });
    visited.is_ok() && ok
}

/// Whether every leaf of `plan` is a strata scan or produces rows without reading a table.
fn leaves_are_own(plan: &Arc<dyn ExecutionPlan>) -> bool {
    let mut ok = true;
    let visited = plan.apply(|node| {
        if node.children().is_empty() {
            ok &= node.is::<StrataScan>() || node.is::<PlaceholderRowExec>() || node.is::<EmptyExec>();
        }
        Ok(if ok { TreeNodeRecursion::Continue } else { TreeNodeRecursion::Stop })
    });
    visited.is_ok() && ok
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fuzzing::Harness;

    /// The strata scans of `plan`.
    fn scans(plan: &Arc<dyn ExecutionPlan>) -> Vec<Arc<dyn ExecutionPlan>> {
        let mut out = Vec::new();
        let _ = plan.apply(|node| {
            if node.is::<StrataScan>() {
                out.push(node.clone());
            }
            Ok(TreeNodeRecursion::Continue)
        });
        out
    }

    fn started(scan: &Arc<dyn ExecutionPlan>) -> bool {
        scan.downcast_ref::<StrataScan>().is_some_and(StrataScan::started)
    }

    #[test]
    fn a_kept_plan_runs_as_a_copy_whose_scans_start_a_new_query() {
        let harness = Harness::new().unwrap_or_else(|e| panic!("{e}"));
        let session = harness.auto_session();
        let sql = "SELECT count(*) AS n FROM t WHERE ice >= 3";
        let run = |s: &crate::SqlSession| s.execute(sql).and_then(|b| b.collect::<crate::Result<Vec<_>>>());
        run(session).unwrap_or_else(|e| panic!("{e}"));
        let kept =
            session.plans.kept.lock().ok().and_then(|k| k.iter().find(|(t, _)| t == sql).map(|(_, p)| p.clone()));
        let kept = kept.unwrap_or_else(|| panic!("no plan kept for {sql}"));
        let ran = scans(&kept);
        assert_eq!(ran.len(), 1);
        assert!(started(&ran[0]), "the first run ran the kept plan itself");
        let copy = session.runtime.block_on(async { session.plans.get(sql) }).unwrap_or_else(|e| panic!("{e}"));
        let fresh = scans(&copy.unwrap_or_else(|| panic!("no plan kept for {sql}")));
        assert_eq!(fresh.len(), 1);
        assert!(!Arc::ptr_eq(&fresh[0], &ran[0]) && !started(&fresh[0]), "a run again gets a scan not yet run");
        // The copy is what runs: the kept plan's scan keeps the first run's query.
        run(session).unwrap_or_else(|e| panic!("{e}"));
        assert!(started(&ran[0]));
    }
}
