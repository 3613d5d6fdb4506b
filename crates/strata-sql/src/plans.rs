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
//! A session keeps at most [`PLANS_KEPT`] plans holding about [`KEPT_BYTES`] (a plan
//! through an area holds its mask). Only plans whose result depends on nothing but the text
//! and the session's tables are kept: not EXPLAIN (its text shows a run), not plans calling functions that are not
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

/// Queries longer than this are planned every time (a server keeps its sessions, and
/// anyone may send it text).
const LONGEST_KEPT: usize = 16 * 1024;

/// The bytes the kept plans of a session may hold (see [`weight`]): a plan through an area
/// holds its mask, tens of megabytes on a fine curvilinear grid.
pub(crate) const KEPT_BYTES: usize = 64 << 20;

/// What a plan is taken to hold besides its text and scans: DataFusion's nodes, schemas and
/// expressions.
const NODES_BYTES: usize = 16 << 10;

/// The plans kept by a session, most recently used last.
#[derive(Debug)]
pub(crate) struct Plans {
    kept: Mutex<Kept>,
    /// The bytes the kept plans may hold.
    budget: usize,
}

#[derive(Debug, Default)]
struct Kept {
    /// (text, plan, its weight), most recently used last.
    plans: VecDeque<(String, Arc<dyn ExecutionPlan>, usize)>,
    /// The weights summed.
    bytes: usize,
}

impl Default for Plans {
    fn default() -> Self {
        Plans::with_budget(KEPT_BYTES)
    }
}

impl Plans {
    /// No plans, holding at most `budget` bytes once some are kept.
    pub fn with_budget(budget: usize) -> Self {
        Plans { kept: Mutex::new(Kept::default()), budget }
    }

    /// A copy of the plan kept for `sql`, ready to run, marked most recently used.
    pub fn get(&self, sql: &str) -> DfResult<Option<Arc<dyn ExecutionPlan>>> {
        let plan = {
            let Ok(mut kept) = self.kept.lock() else { return Ok(None) };
            let Some(i) = kept.plans.iter().position(|(text, ..)| text == sql) else { return Ok(None) };
            let Some(entry) = kept.plans.remove(i) else { return Ok(None) };
            let plan = entry.1.clone();
            kept.plans.push_back(entry);
            plan
        };
        datafusion::physical_plan::execution_plan::reset_plan_states(plan).map(Some)
    }

    /// Keeps `plan` for `sql` when [`reusable`] says it may be and it fits the budget alone,
    /// dropping the least recently used plans beyond [`PLANS_KEPT`] or the budget.
    pub fn keep(&self, sql: &str, logical: &LogicalPlan, plan: &Arc<dyn ExecutionPlan>) {
        if sql.len() > LONGEST_KEPT || !reusable(logical, plan) {
            return;
        }
        let weight = weight(sql, plan);
        if weight > self.budget {
            return;
        }
        let Ok(mut kept) = self.kept.lock() else { return };
        if kept.plans.iter().any(|(text, ..)| text == sql) {
            return;
        }
        while kept.plans.len() >= PLANS_KEPT || kept.bytes + weight > self.budget {
            let Some((.., w)) = kept.plans.pop_front() else { break };
            kept.bytes -= w;
        }
        kept.plans.push_back((sql.to_string(), plan.clone(), weight));
        kept.bytes += weight;
    }

    /// How many plans are kept.
    pub fn len(&self) -> usize {
        self.kept.lock().map(|k| k.plans.len()).unwrap_or(0)
    }
}

/// The bytes a kept plan is taken to hold.
fn weight(sql: &str, plan: &Arc<dyn ExecutionPlan>) -> usize {
    sql.len() + NODES_BYTES + scans(plan).iter().map(|s| s.held_bytes()).sum::<usize>()
}

/// The strata scans in `plan`.
fn scans(plan: &Arc<dyn ExecutionPlan>) -> Vec<&StrataScan> {
    let mut out = Vec::new();
    // The visit cannot fail: every call returns Continue.
    let _ = plan.apply(|node| {
        out.extend(node.downcast_ref::<StrataScan>());
        Ok(TreeNodeRecursion::Continue)
    });
    out
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

    /// The plan kept for `sql`, itself (not a copy).
    fn kept(plans: &Plans, sql: &str) -> Option<Arc<dyn ExecutionPlan>> {
        let kept = plans.kept.lock().ok()?;
        kept.plans.iter().find(|(t, ..)| t == sql).map(|(_, p, _)| p.clone())
    }

    #[test]
    fn a_kept_plan_runs_as_a_copy_whose_scans_start_a_new_query() {
        let harness = Harness::new().unwrap_or_else(|e| panic!("{e}"));
        let session = harness.auto_session();
        let sql = "SELECT count(*) AS n FROM t WHERE ice >= 3";
        let run = |s: &crate::SqlSession| s.execute(sql).and_then(|b| b.collect::<crate::Result<Vec<_>>>());
        run(session).unwrap_or_else(|e| panic!("{e}"));
        let kept = kept(&session.plans, sql).unwrap_or_else(|| panic!("no plan kept for {sql}"));
        let ran = scans(&kept);
        assert_eq!(ran.len(), 1);
        assert!(ran[0].started(), "the first run ran the kept plan itself");
        let copy = session.runtime.block_on(async { session.plans.get(sql) }).unwrap_or_else(|e| panic!("{e}"));
        let copy = copy.unwrap_or_else(|| panic!("no plan kept for {sql}"));
        let fresh = scans(&copy);
        assert_eq!(fresh.len(), 1);
        assert!(!std::ptr::eq(fresh[0], ran[0]) && !fresh[0].started(), "a run again gets a scan not yet run");
        // The copy is what runs: the kept plan's scan keeps the first run's query.
        run(session).unwrap_or_else(|e| panic!("{e}"));
        assert!(ran[0].started());
    }

    #[test]
    fn kept_plans_hold_at_most_the_budget_a_mask_counted() {
        let harness = Harness::new().unwrap_or_else(|e| panic!("{e}"));
        let session = harness.auto_session();
        let planned = |sql: &str| {
            session.runtime.block_on(async {
                let df = session.ctx.sql(sql).await.unwrap_or_else(|e| panic!("{e}"));
                let logical = df.logical_plan().clone();
                (logical, df.create_physical_plan().await.unwrap_or_else(|e| panic!("{e}")))
            })
        };
        // Through the 2-D latitude: the scan holds the area's mask.
        let area = "SELECT count(*) AS n FROM t WHERE ulat > 10";
        let (area_logical, area_plan) = planned(area);
        let masked = scans(&area_plan).iter().map(|s| s.held_bytes()).sum::<usize>();
        let values: Vec<String> = (0..3).map(|i| format!("SELECT count(*) AS n FROM t WHERE ice >= {i}")).collect();
        let plain: Vec<_> = values.iter().map(|v| planned(v)).collect();
        let unmasked = scans(&plain[0].1).iter().map(|s| s.held_bytes()).sum::<usize>();
        assert!(masked > unmasked, "{masked} <= {unmasked}");
        // Room for a plan without a mask, not for the one with it.
        let plans = Plans::with_budget(weight(area, &area_plan) - 1);
        assert!(weight(&values[0], &plain[0].1) <= plans.budget);
        plans.keep(area, &area_logical, &area_plan);
        assert_eq!(plans.len(), 0);
        for (sql, (logical, plan)) in values.iter().zip(&plain) {
            plans.keep(sql, logical, plan);
        }
        // Each pushed the one before, least recently used, out of the budget.
        assert_eq!(plans.len(), 1);
        assert!(kept(&plans, &values[2]).is_some());
        let bytes = plans.kept.lock().map(|k| k.bytes).unwrap_or_default();
        assert_eq!(bytes, weight(&values[2], &plain[2].1));
    }
}
