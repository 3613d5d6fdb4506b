//! The query engine's front door. A [`Session`] owns a cost model — loaded from where
//! `strata calibrate` keeps it, corrected by the queries it runs — and answers a [`Query`]:
//! it plans the query, chooses between the index and a scan (exploring close calls), runs
//! it, and folds what it took back into the model. Python's `Dataset.query` and
//! `query_batches`, SQL's pieces, the CLI's `explain` (and later the server and the C API)
//! all go through here, so they cannot drift apart.

use crate::error::{Error, Result};
use crate::joined::{Columns, Joined};
use crate::mask::Mask;
use crate::planner::{cost_model_path, human_bytes, CostModel, Planner, QueryPlan};
use crate::query::{Executor, Method, Points, Predicate, QueryStats, Scan, Selection};
use crate::reader::{DimSelection, RunReads, StoreReader};
use std::fmt;
use std::sync::Mutex;
use std::time::Instant;

/// What a query returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// How many elements satisfy the constraint.
    Count,
    /// Where: flat indices, ascending.
    Positions,
    /// Where, and the values of [`Query::variables`] there.
    Points,
}

impl Output {
    pub fn parse(text: &str) -> Result<Output> {
        match text {
            "count" => Ok(Output::Count),
            "positions" => Ok(Output::Positions),
            "points" => Ok(Output::Points),
            other => Err(Error::InvalidArgument(format!("output must be count, positions or points, not '{other}'"))),
        }
    }
}

/// A value query on one store.
#[derive(Debug, Clone, PartialEq)]
pub struct Query {
    pub predicate: Predicate,
    /// One range per dimension of the constrained variables.
    pub region: Vec<DimSelection>,
    pub output: Output,
    /// Variables returned with [`Output::Points`], read at `level`.
    pub variables: Vec<String>,
    /// Byte groups read for the returned values (None: all).
    pub level: Option<usize>,
    /// A method forced for the whole query; None lets the session choose.
    pub method: Option<Method>,
    /// Only these elements of some axes (a curvilinear or mesh area), when given.
    pub mask: Option<std::sync::Arc<Mask>>,
    /// Compare a packed variable's stored values rather than its physical ones
    /// (`scale_factor`, `add_offset` applied; see [`crate::constraint::on_stored_values`]).
    pub raw: bool,
}

impl Query {
    /// `predicate` over every element of the variables it names: the whole region, every
    /// method allowed, the constrained variables returned with [`Output::Points`].
    pub fn whole(manifest: &crate::Manifest, predicate: Predicate, output: Output) -> Result<Query> {
        let names = predicate.variable_names();
        let first = names.first().ok_or_else(|| Error::InvalidArgument("the constraint names no variable".into()))?;
        let shape = manifest.shape(manifest.variable(first)?.1);
        let variables = if output == Output::Points { names.iter().map(|s| s.to_string()).collect() } else { vec![] };
        Ok(Query {
            region: shape.iter().map(|&n| DimSelection { start: 0, stop: n, step: 1 }).collect(),
            predicate,
            output,
            variables,
            level: None,
            method: None,
            mask: None,
            raw: false,
        })
    }

    /// The shape of the grid the query runs on: its first constrained variable's.
    pub fn grid_shape(&self, manifest: &crate::Manifest) -> Result<Vec<u64>> {
        Ok(manifest.shape(manifest.variable(driver(self)?)?.1))
    }

    /// The dimensions of the constrained variables.
    pub fn grid_dims(&self, manifest: &crate::Manifest) -> Result<Vec<String>> {
        Ok(manifest.variable(driver(self)?)?.1.dims.clone())
    }

    /// What the planner prices and the executor runs for this query, returning `outputs`.
    fn scan<'a>(&'a self, outputs: &'a [&'a str]) -> Scan<'a> {
        Scan {
            predicate: &self.predicate,
            region: &self.region,
            mask: self.mask.as_deref(),
            outputs,
            level: self.level,
        }
    }

    /// The query as the reader runs it: constraints on stored values.
    fn stored(&self, reader: &StoreReader) -> Result<Query> {
        let mut q = self.clone();
        if !self.raw {
            q.predicate = crate::constraint::on_stored_values(&self.predicate, reader.manifest())?;
        }
        Ok(q)
    }
}

/// A method as users name it: `auto` (None), `index` or `scan`.
pub fn parse_method(text: &str) -> Result<Option<Method>> {
    match text {
        "auto" => Ok(None),
        "index" => Ok(Some(Method::Index)),
        "scan" => Ok(Some(Method::Scan)),
        other => Err(Error::InvalidArgument(format!("method must be auto, index or scan, not '{other}'"))),
    }
}

/// A query's result, with what it did: the plan (with the method each slab ran), the work
/// counted as it ran, and time and bytes.
#[derive(Debug, Clone)]
pub struct Answer {
    pub count: u64,
    /// Flat indices of the selected elements (empty for [`Output::Count`]).
    pub selection: Selection,
    /// One column of little-endian values per returned variable, in `selection` order.
    pub columns: Vec<Vec<u8>>,
    pub stats: QueryStats,
    pub plan: QueryPlan,
    /// The methods that ran, index before scan.
    pub methods: Vec<Method>,
    /// Estimated seconds of what ran, under the model's correction when it was planned.
    pub estimated_s: f64,
    pub seconds: f64,
    /// Data bytes fetched and requests sent while the query ran (the reader's counters:
    /// concurrent queries on the same reader are counted too).
    pub bytes_read: u64,
    pub requests: u64,
}

impl fmt::Display for Answer {
    /// The actuals line of EXPLAIN.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "actual: {} selected, {} read in {} requests, {:.2} ms (estimated {:.2} ms); {} segments from the \
             index, {} read, {} sub-chunks scanned",
            self.count,
            human_bytes(self.bytes_read as f64),
            self.requests,
            self.seconds * 1e3,
            self.estimated_s * 1e3,
            self.stats.full,
            self.stats.boundary,
            self.stats.scanned
        )
    }
}

/// One run observed by the session: a whole query, or a piece of one.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Run {
    pub method: Method,
    pub estimated_s: f64,
    pub observed_s: f64,
}

/// Runs kept by a [`RunLog`]: a long-running process (the server) runs queries without end,
/// and the log is for looking back at recent ones.
pub const RUNS_KEPT: usize = 10_000;

/// The most recent runs observed (at most [`RUNS_KEPT`]) and how many there were in all.
#[derive(Debug, Default)]
pub struct RunLog {
    recent: std::collections::VecDeque<Run>,
    total: u64,
}

impl RunLog {
    pub fn push(&mut self, run: Run) {
        if self.recent.len() == RUNS_KEPT {
            self.recent.pop_front();
        }
        self.recent.push_back(run);
        self.total += 1;
    }

    /// Runs observed so far, kept or not.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// The kept runs among those after the first `mark` (a [`total`](Self::total) taken
    /// earlier).
    pub fn since(&self, mark: u64) -> Vec<Run> {
        let first_kept = self.total - self.recent.len() as u64;
        let skip = mark.saturating_sub(first_kept).min(self.recent.len() as u64) as usize;
        self.recent.iter().skip(skip).copied().collect()
    }
}

impl Extend<Run> for RunLog {
    fn extend<I: IntoIterator<Item = Run>>(&mut self, runs: I) {
        runs.into_iter().for_each(|r| self.push(r));
    }
}

/// A query under way a piece at a time (see [`Session::start`]): planned once, its region
/// cut into pieces that any thread runs (see [`Session::run_piece`]), each observed as it
/// ends. Python's points queries and SQL's scans both run this way, so they plan, choose
/// and learn alike.
#[derive(Debug)]
pub struct QueryRun {
    /// The query as stored (constraints on stored values).
    query: Query,
    plan: QueryPlan,
    pieces: Vec<Vec<DimSelection>>,
    /// Each piece's part of the query (its elements over the region's; they sum to 1).
    shares: Vec<f64>,
    /// Per method the plan runs: its estimate without the correction it was planned
    /// under, and its part of the plan's estimate (see [`Session::run_piece`]).
    methods: Vec<(Method, f64, f64)>,
    /// The corrections it plans under and teaches.
    track: Track,
    started: Instant,
    /// What its pieces read (see [`executor`](Self::executor)).
    reads: RunReads,
}

impl QueryRun {
    /// The elements the plan expects the query to select.
    pub fn estimated_rows(&self) -> f64 {
        self.plan.slabs.iter().map(|s| s.selected).sum()
    }

    /// The pieces, in the order of the region.
    pub fn pieces(&self) -> &[Vec<DimSelection>] {
        &self.pieces
    }

    pub fn plan(&self) -> &QueryPlan {
        &self.plan
    }

    /// The query as the reader runs it.
    pub fn query(&self) -> &Query {
        &self.query
    }

    /// The executor that runs this run's pieces on `reader`: its reads are counted as the
    /// run's own, apart from those of other queries on the same reader at the same time.
    pub fn executor<'r>(&'r self, reader: &'r StoreReader) -> Executor<'r> {
        Executor::counting(reader, &self.reads)
    }

    /// What its pieces have fetched so far, as EXPLAIN's actuals say it (`12.3 MiB read in
    /// 40 requests`).
    pub fn reads_so_far(&self) -> String {
        let (bytes, requests) = self.reads.get();
        format!("{} read in {requests} requests", human_bytes(bytes as f64))
    }
}

/// What a query does with what it selects, which its time is learned under: the cost
/// model's error differs between the two. On ERSST x4 the index's counts took 0.4x their
/// estimate and its points 2x: with one correction for both, each count pulled the
/// correction down, the next points query ran the index at 1.5-2.5x the scan's time, and
/// the two kinds of query kept undoing each other's learning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Track {
    /// Counts and positions (and points with no values returned).
    Select,
    /// Points with values returned.
    Values,
}

impl Track {
    pub fn of(query: &Query) -> Track {
        if query.output == Output::Points && !query.variables.is_empty() {
            Track::Values
        } else {
            Track::Select
        }
    }

    fn slot(self) -> usize {
        self as usize
    }
}

/// A cost model and the queries it learned from, a copy per [`Track`] (the constants are
/// shared; the corrections learn apart). Shared by reference between threads: planning
/// takes a snapshot of the model, observing folds one run in.
#[derive(Debug)]
pub struct Session {
    models: Mutex<[CostModel; 2]>,
    source: String,
    runs: Mutex<RunLog>,
    /// Elements per piece of a points query or a SQL scan (see [`crate::query::pieces`]).
    piece_elements: u64,
}

impl Default for Session {
    fn default() -> Self {
        Session::new(CostModel::default())
    }
}

impl Session {
    pub fn new(model: CostModel) -> Session {
        let source = model.source.clone();
        Session {
            models: Mutex::new([model.clone(), model]),
            source,
            runs: Mutex::new(RunLog::default()),
            piece_elements: crate::query::pieces::PIECE_ELEMENTS,
        }
    }

    /// The session cutting queries into pieces of about `n` elements rather than
    /// [`PIECE_ELEMENTS`](crate::query::pieces::PIECE_ELEMENTS) (fewer bounds memory
    /// tighter and costs more per-piece setup).
    pub fn with_piece_elements(mut self, n: u64) -> Session {
        self.piece_elements = n.max(1);
        self
    }

    /// Elements per piece of the queries this session cuts.
    pub fn piece_elements(&self) -> u64 {
        self.piece_elements
    }

    /// A session on the stored cost model ([`cost_model_path`]), or the built-in defaults
    /// when there is none.
    pub fn open_default() -> Result<Session> {
        let path = cost_model_path();
        Ok(match CostModel::load(&path)? {
            Some(m) => Session::new(m),
            None => Session::new(CostModel {
                source: format!("built-in defaults (no {}; run `strata calibrate`)", path.display()),
                ..CostModel::default()
            }),
        })
    }

    /// Where the model's constants come from.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The model as it stands for points with values, corrections included (see
    /// [`model_for`](Self::model_for)).
    pub fn model(&self) -> CostModel {
        self.model_for(Track::Values)
    }

    /// Estimated seconds to read `sel` of `name` densely, at full precision: the index's
    /// count of the work ([`StoreReader::read_work`]) at the scan's constants, uncorrected.
    pub fn read_seconds(&self, reader: &StoreReader, name: &str, sel: &[DimSelection]) -> Result<f64> {
        let work = reader.read_work(name, sel)?;
        Ok(self.model_for(Track::Select).uncorrected_seconds(Method::Scan, &work))
    }

    /// The model as it stands for queries of `track`.
    pub fn model_for(&self, track: Track) -> CostModel {
        self.models.lock().unwrap_or_else(|p| p.into_inner())[track.slot()].clone()
    }

    /// The runs observed so far, the most recent [`RUNS_KEPT`] of them.
    pub fn runs(&self) -> Vec<Run> {
        self.runs_since(0)
    }

    /// How many runs were observed so far (a mark for [`runs_since`](Self::runs_since)).
    pub fn run_count(&self) -> u64 {
        self.runs.lock().unwrap_or_else(|p| p.into_inner()).total()
    }

    /// The runs observed after the first `mark` (see [`RunLog::since`]).
    pub fn runs_since(&self, mark: u64) -> Vec<Run> {
        self.runs.lock().unwrap_or_else(|p| p.into_inner()).since(mark)
    }

    /// The plan of `query` under the model as it stands: both methods' work and time per
    /// slab, and the method each slab would run.
    pub fn plan(&self, reader: &StoreReader, query: &Query) -> Result<QueryPlan> {
        check(reader, query)?;
        let model = self.model_for(Track::of(query));
        self.plan_with(reader, &query.stored(reader)?, &model)
    }

    fn plan_with(&self, reader: &StoreReader, query: &Query, model: &CostModel) -> Result<QueryPlan> {
        let outputs = returned(query);
        let mut plan = Planner::new(reader, model).plan(&query.scan(&outputs))?;
        if let Some(m) = query.method {
            plan.slabs.iter_mut().for_each(|s| s.choice = m);
            plan.forced = Some(m);
        } else {
            // The query-level choice explores close calls; when it departs from the cheaper
            // total, every slab runs it (a mixed plan would learn nothing of the other).
            let (index_s, scan_s) = (plan.seconds_with(Method::Index), plan.seconds_with(Method::Scan));
            let pick = model.choose(index_s, scan_s);
            let cheaper = if scan_s < index_s { Method::Scan } else { Method::Index };
            // A selection without returned values runs one method throughout.
            if pick != cheaper || query.output != Output::Points {
                plan.slabs.iter_mut().for_each(|s| s.choice = pick);
            }
        }
        Ok(plan)
    }

    /// Plans, runs and observes `query`. A points query's flat indices and columns are
    /// joined from its pieces (see [`run_joined`](Self::run_joined)).
    pub fn run(&self, reader: &StoreReader, query: &Query) -> Result<Answer> {
        if query.output == Output::Points {
            let shape = query.grid_shape(reader.manifest())?;
            let nd = shape.len();
            let columns = Columns { coordinates: vec![None; nd], indices: vec![false; nd], flat: true, aux: vec![] };
            let (joined, mut answer) = self.run_joined(reader, query, columns)?;
            answer.selection = Selection { shape, flat: joined.flat };
            answer.columns = joined.values;
            return Ok(answer);
        }
        // Counts and positions run whole: one piece, one method for the whole selection.
        let run = self.start_with(reader, query, false)?;
        let q = &run.query;
        let ((selection, count, stats), _) = self.run_piece(&run, 0, |sel, plan| {
            run.executor(reader).select_with(
                &q.predicate,
                sel,
                q.mask.as_deref(),
                q.output == Output::Count,
                plan.method(),
            )
        })?;
        let mut answer = self.finish(run, count, stats);
        answer.selection = selection;
        Ok(answer)
    }

    /// Plans, runs and observes a points query, its result joined into whole columns as
    /// it runs (see [`crate::joined`]): the returned variables' values and what `columns`
    /// asks for besides.
    pub fn run_joined(&self, reader: &StoreReader, query: &Query, columns: Columns) -> Result<(Joined, Answer)> {
        let grid = query.grid_shape(reader.manifest())?;
        let widths = query
            .variables
            .iter()
            .map(|v| reader.manifest().variable(v).map(|(_, var)| var.dtype.size()))
            .collect::<Result<_>>()?;
        let mut joined = Joined::new(grid, columns, widths)?;
        let answer = self.run_points(reader, query, |run, round| {
            if joined.is_empty() {
                // Room for the estimate and a margin: growing a column copies it.
                joined.reserve((run.estimated_rows() * 1.25) as usize);
            }
            joined.add(round)
        })?;
        Ok((joined, answer))
    }

    /// Plans, runs and observes a points query a piece at a time (see [`start`](Self::start)):
    /// pieces run side by side, a round of a few at a time, and each round is handed to
    /// `consume` in order (with the run, for its plan) while the next one runs. Memory
    /// holds two rounds and what `consume` keeps. The answer carries the count and what
    /// the query did, not the points.
    pub fn run_points(
        &self,
        reader: &StoreReader,
        query: &Query,
        mut consume: impl FnMut(&QueryRun, &[Points]) -> Result<()>,
    ) -> Result<Answer> {
        use crate::query::pieces::{round_len, run_round};
        if query.output != Output::Points {
            return Err(Error::InvalidArgument("run_points runs a points query".into()));
        }
        let run = self.start(reader, query)?;
        let outputs = returned(&run.query);
        let q = &run.query;
        let (mut count, mut stats) = (0u64, QueryStats::default());
        let run_piece = |i: usize| -> Result<(Points, QueryStats)> {
            let ((points, st), _) = self.run_piece(&run, i, |sel, plan| {
                run.executor(reader).points(&Scan { region: sel, ..q.scan(&outputs) }, &|slab| plan.method_for(slab))
            })?;
            Ok((points, st))
        };
        let numbers: Vec<usize> = (0..run.pieces.len()).collect();
        std::thread::scope(|scope| -> Result<()> {
            let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<Result<(Points, QueryStats)>>>(0);
            let (numbers, run_piece) = (&numbers, &run_piece);
            scope.spawn(move || {
                for round in numbers.chunks(round_len()) {
                    let done = run_round(round, run_piece);
                    let failed = done.iter().any(|r| r.is_err());
                    // The receiver is gone when consuming failed: stop.
                    if tx.send(done).is_err() || failed {
                        return;
                    }
                }
            });
            for done in rx {
                let mut round = Vec::with_capacity(done.len());
                for piece in done {
                    let (points, st) = piece?;
                    count += points.flat.len() as u64;
                    stats.add(&st);
                    round.push(points);
                }
                consume(&run, &round)?;
            }
            Ok(())
        })?;
        Ok(self.finish(run, count, stats))
    }

    /// Checks and plans `query`, and cuts its region into pieces (see
    /// [`crate::query::pieces`]) to run with [`run_piece`](Self::run_piece): the plan is
    /// the one [`plan`](Self::plan) shows, a method per slab (one throughout unless the
    /// output is points), decided once for the whole query.
    pub fn start(&self, reader: &StoreReader, query: &Query) -> Result<QueryRun> {
        self.start_with(reader, query, true)
    }

    /// [`start`](Self::start), the region cut into pieces or kept whole.
    fn start_with(&self, reader: &StoreReader, query: &Query, cut: bool) -> Result<QueryRun> {
        check(reader, query)?;
        let query = query.stored(reader)?;
        let track = Track::of(&query);
        let model = self.model_for(track);
        let plan = self.plan_with(reader, &query, &model)?;
        let mut pieces = if cut { self.pieces(reader, driver(&query)?, &query.region)? } else { vec![] };
        if pieces.is_empty() {
            // Nothing selected: one empty piece still checks the query's arguments.
            pieces.push(query.region.clone());
        }
        let elements: Vec<f64> = pieces.iter().map(|p| p.iter().map(|s| s.count() as f64).product()).collect();
        let total: f64 = elements.iter().sum();
        let shares =
            elements.iter().map(|&e| if total > 0.0 { e / total } else { 1.0 / pieces.len() as f64 }).collect();
        let estimated = plan.seconds();
        let methods = plan
            .methods()
            .into_iter()
            .filter(|_| estimated > 0.0)
            .map(|m| {
                let s: f64 = plan.slabs.iter().filter(|p| p.choice == m).map(|p| p.seconds(m)).sum();
                (m, s / model.correction(m), s / estimated)
            })
            .collect();
        Ok(QueryRun {
            query,
            plan,
            pieces,
            shares,
            methods,
            track,
            started: Instant::now(),
            reads: RunReads::default(),
        })
    }

    /// `region` of a query on `driver`'s grid cut into pieces of about
    /// [`piece_elements`](Self::piece_elements), at the sub-chunk starts of `driver` (along
    /// its first dimension, and the next where one index of it is too large a piece).
    pub fn pieces(
        &self,
        reader: &StoreReader,
        driver: &str,
        region: &[DimSelection],
    ) -> Result<Vec<Vec<DimSelection>>> {
        Ok(crate::query::pieces::split_nd(
            region,
            &crate::query::pieces::starts_nd(reader, driver)?,
            self.piece_elements,
        ))
    }

    /// Runs piece number `piece` of `run` by `body` (given the piece's region and the
    /// plan), and folds its time into the model: each method the plan runs is credited its
    /// part of the time by estimate, and learns the piece as its share of one query (see
    /// [`CostModel::observe_uncorrected`]), so the pieces of a query together move the
    /// model as one query would, whichever threads ran them and in whatever order. Returns
    /// what `body` returned and the runs observed.
    pub fn run_piece<T>(
        &self,
        run: &QueryRun,
        piece: usize,
        body: impl FnOnce(&[DimSelection], &QueryPlan) -> Result<T>,
    ) -> Result<(T, Vec<Run>)> {
        let (sel, share) = run
            .pieces
            .get(piece)
            .zip(run.shares.get(piece))
            .ok_or_else(|| Error::InvalidArgument(format!("no piece {piece} in this query")))?;
        let started = Instant::now();
        let out = body(sel, &run.plan)?;
        let observed_s = started.elapsed().as_secs_f64();
        let mut models = self.models.lock().unwrap_or_else(|p| p.into_inner());
        let m = &mut models[run.track.slot()];
        let mut records = Vec::with_capacity(run.methods.len());
        for &(method, uncorrected, part) in &run.methods {
            let (uncorrected, observed) = (uncorrected * share, observed_s * part);
            let estimated_s = uncorrected * m.correction(method);
            m.observe_uncorrected(method, uncorrected, observed, *share);
            records.push(Run { method, estimated_s, observed_s: observed });
        }
        drop(models);
        self.runs.lock().unwrap_or_else(|p| p.into_inner()).extend(records.iter().copied());
        Ok((out, records))
    }

    /// What `run` did, once its pieces ran: `count` and `stats` summed over them.
    pub fn finish(&self, run: QueryRun, count: u64, stats: QueryStats) -> Answer {
        let (bytes_read, requests) = run.reads.get();
        Answer {
            count,
            selection: Selection::default(),
            columns: vec![],
            stats,
            methods: run.plan.methods(),
            estimated_s: run.plan.seconds(),
            seconds: run.started.elapsed().as_secs_f64(),
            bytes_read,
            requests,
            plan: run.plan,
        }
    }

    /// Folds a run of `method` estimated at `estimated_s` (under the current correction)
    /// into the model [`model`](Self::model) shows, for runs made outside [`run`](Self::run).
    pub fn observe(&self, method: Method, estimated_s: f64, observed_s: f64) {
        self.models.lock().unwrap_or_else(|p| p.into_inner())[Track::Values.slot()].observe(
            method,
            estimated_s,
            observed_s,
        );
        self.runs.lock().unwrap_or_else(|p| p.into_inner()).push(Run { method, estimated_s, observed_s });
    }
}

/// The first variable the constraint names: the query's dimensions are its dimensions.
fn driver(query: &Query) -> Result<&str> {
    query
        .predicate
        .variable_names()
        .first()
        .copied()
        .ok_or_else(|| Error::InvalidArgument("a value constraint needs at least one comparison".into()))
}

fn returned(query: &Query) -> Vec<&str> {
    match query.output {
        Output::Points => query.variables.iter().map(String::as_str).collect(),
        Output::Count | Output::Positions => vec![],
    }
}

fn check(reader: &StoreReader, query: &Query) -> Result<()> {
    let m = reader.manifest();
    for name in query.predicate.variable_names() {
        if m.variable(name).is_err() {
            return Err(Error::InvalidArgument(format!(
                "the constraint names '{name}', which is not a variable of this store"
            )));
        }
    }
    // What running would refuse (variables on other dimensions, strings, an empty AND),
    // refused before a plan: the server plans before it sends its status.
    Executor::new(reader).query_vars(&query.predicate)?;
    if query.level == Some(0) {
        return Err(Error::InvalidArgument("precision level must be at least 1".into()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_run_log_keeps_the_latest_and_counts_them_all() {
        let run = |i: usize| Run { method: Method::Scan, estimated_s: i as f64, observed_s: 1.0 };
        let mut log = RunLog::default();
        log.extend((0..3).map(run));
        assert_eq!(log.since(1).iter().map(|r| r.estimated_s).collect::<Vec<_>>(), [1.0, 2.0]);
        log.extend((3..RUNS_KEPT + 5).map(run));
        assert_eq!(log.total(), RUNS_KEPT as u64 + 5);
        let kept = log.since(0);
        assert_eq!(kept.len(), RUNS_KEPT);
        assert_eq!(kept[0].estimated_s, 5.0, "the oldest went first");
        assert_eq!(log.since(RUNS_KEPT as u64 + 3).len(), 2);
        assert!(log.since(RUNS_KEPT as u64 + 9).is_empty());
    }
}
