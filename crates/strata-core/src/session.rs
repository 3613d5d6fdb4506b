//! The query engine's front door. A [`Session`] owns a cost model — loaded from where
//! `strata calibrate` keeps it, corrected by the queries it runs — and answers a [`Query`]:
//! it plans the query, chooses between the index and a scan (exploring close calls), runs
//! it, and folds what it took back into the model. Python's `Dataset.query` and
//! `query_batches`, SQL's pieces, the CLI's `explain` (and later the server and the C API)
//! all go through here, so they cannot drift apart.

use crate::error::{Error, Result};
use crate::mask::Mask;
use crate::planner::{CostModel, QueryPlan, Work};
use crate::query::{Method, Points, Predicate, QueryStats, Selection};
use crate::reader::{DimSelection, StoreReader};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;

/// Where the cost model is stored: `$STRATA_COST_MODEL`, else
/// `$XDG_CONFIG_HOME/strata/cost_model.json`, else `~/.config/strata/cost_model.json`.
pub fn cost_model_path() -> PathBuf {
    if let Some(p) = std::env::var_os("STRATA_COST_MODEL").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))
        .unwrap_or_else(|| PathBuf::from(".config"));
    base.join("strata").join("cost_model.json")
}

impl CostModel {
    /// The model stored at `path`; None when there is no file (the built-in defaults apply).
    pub fn load(path: &Path) -> Result<Option<CostModel>> {
        match std::fs::read_to_string(path) {
            Ok(text) => CostModel::from_json(&text)
                .map(Some)
                .map_err(|e| Error::InvalidArgument(format!("cost model {}: {e}", path.display()))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io(path.display().to_string(), e)),
        }
    }

    /// Writes the model to `path` (a temporary file renamed over it, so a reader never sees
    /// half a model).
    pub fn save(&self, path: &Path) -> Result<()> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| Error::io(dir.display().to_string(), e))?;
        }
        let tmp = path.with_extension("json.tmp");
        std::fs::write(&tmp, self.to_json()).map_err(|e| Error::io(tmp.display().to_string(), e))?;
        std::fs::rename(&tmp, path).map_err(|e| Error::io(path.display().to_string(), e))
    }
}

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

/// What the session made of every piece of a query planned together (SQL's pieces): the
/// method all of them run, and each piece's estimate before the model's correction.
#[derive(Debug, Clone)]
pub struct PiecePlans {
    pub method: Method,
    uncorrected: Vec<f64>,
    /// The sum of `uncorrected`: each piece teaches the model its share of one query.
    total: f64,
}

/// A cost model and the queries it learned from. Shared by reference between threads:
/// planning takes a snapshot of the model, observing folds one run in.
#[derive(Debug)]
pub struct Session {
    model: Mutex<CostModel>,
    source: String,
    runs: Mutex<Vec<Run>>,
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
            model: Mutex::new(model),
            source,
            runs: Mutex::new(Vec::new()),
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

    /// The model as it stands, corrections included.
    pub fn model(&self) -> CostModel {
        self.model.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Every run observed so far.
    pub fn runs(&self) -> Vec<Run> {
        self.runs.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The plan of `query` under the model as it stands: both methods' work and time per
    /// slab, and the method each slab would run.
    pub fn plan(&self, reader: &StoreReader, query: &Query) -> Result<QueryPlan> {
        check(reader, query)?;
        let model = self.model();
        self.plan_with(reader, &query.stored(reader)?, &model)
    }

    fn plan_with(&self, reader: &StoreReader, query: &Query, model: &CostModel) -> Result<QueryPlan> {
        let outputs = returned(query);
        let mut plan =
            reader.plan_query(&query.predicate, &query.region, query.mask.as_deref(), &outputs, query.level, model)?;
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
    /// joined from its pieces (see [`run_points`](Self::run_points)).
    pub fn run(&self, reader: &StoreReader, query: &Query) -> Result<Answer> {
        if query.output == Output::Points {
            let mut flat = Vec::new();
            let mut columns: Vec<Vec<u8>> = vec![Vec::new(); query.variables.len()];
            let mut answer = self.run_points(reader, query, Ok, |points| {
                flat.extend_from_slice(&points.flat);
                for (all, piece) in columns.iter_mut().zip(&points.columns) {
                    all.extend_from_slice(piece);
                }
                Ok(())
            })?;
            answer.selection = Selection { shape: query.grid_shape(reader.manifest())?, flat };
            answer.columns = columns;
            return Ok(answer);
        }
        self.observed(reader, query, |query, plan| {
            // One method for the whole selection.
            let method = plan.slabs.first().map_or(query.method.unwrap_or(Method::Index), |s| s.choice);
            let count_only = query.output == Output::Count;
            let (sel, count, stats) =
                reader.select_with(&query.predicate, &query.region, query.mask.as_deref(), count_only, method)?;
            Ok((count, sel, stats))
        })
    }

    /// Plans, runs and observes a points query a piece at a time (see
    /// [`crate::query::pieces`]): pieces run side by side, a few at a time, each shaped by
    /// `shape` on the thread that ran it, and handed to `consume` in order. Memory holds the pieces in flight and what `consume`
    /// keeps. The answer carries the count and what the query did, not the points.
    pub fn run_points<T: Send>(
        &self,
        reader: &StoreReader,
        query: &Query,
        shape: impl Fn(Points) -> Result<T> + Sync,
        mut consume: impl FnMut(T) -> Result<()>,
    ) -> Result<Answer> {
        use crate::query::pieces::split;
        use rayon::prelude::*;
        if query.output != Output::Points {
            return Err(Error::InvalidArgument("run_points runs a points query".into()));
        }
        self.observed(reader, query, |query, plan| {
            let outputs = returned(query);
            let method_for = |slab: usize| plan.method_for(slab);
            let mut pieces = split(&query.region, &reader.piece_starts(driver(query)?)?, self.piece_elements);
            if pieces.is_empty() {
                // Nothing selected: one empty piece still checks the query's arguments.
                pieces.push(query.region.clone());
            }
            // A round of two pieces per thread; a round's results are consumed on this thread
            // while the next round runs (the pieces' boxes spread over threads too, so a slow
            // piece does not leave a thread idle). Memory holds two rounds.
            let window = 2 * rayon::current_num_threads().max(1);
            let (mut count, mut stats) = (0u64, QueryStats::default());
            let run_piece = |sel: &Vec<DimSelection>| -> Result<(u64, T, QueryStats)> {
                let (points, st) =
                    reader.points(&query.predicate, sel, query.mask.as_deref(), &outputs, query.level, &method_for)?;
                let n = points.flat.len() as u64;
                Ok((n, shape(points)?, st))
            };
            std::thread::scope(|scope| -> Result<()> {
                let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<Result<(u64, T, QueryStats)>>>(0);
                let pieces = &pieces;
                let run_piece = &run_piece;
                scope.spawn(move || {
                    for round in pieces.chunks(window) {
                        let done: Vec<_> = round.par_iter().map(run_piece).collect();
                        let failed = done.iter().any(|r| r.is_err());
                        // The receiver is gone when consuming failed: stop.
                        if tx.send(done).is_err() || failed {
                            return;
                        }
                    }
                });
                for done in rx {
                    for piece in done {
                        let (n, shaped, st) = piece?;
                        count += n;
                        stats.add(&st);
                        consume(shaped)?;
                    }
                }
                Ok(())
            })?;
            Ok((count, Selection::default(), stats))
        })
    }

    /// Checks, plans and times `body` on the query as stored, and folds the time into the
    /// model. `body` returns the count, the selection (if any) and what it did.
    fn observed(
        &self,
        reader: &StoreReader,
        query: &Query,
        body: impl FnOnce(&Query, &QueryPlan) -> Result<(u64, Selection, QueryStats)>,
    ) -> Result<Answer> {
        check(reader, query)?;
        let query = &query.stored(reader)?;
        let model = self.model();
        let plan = self.plan_with(reader, query, &model)?;
        let before = reader.stats();
        let started = Instant::now();
        let (count, selection, stats) = body(query, &plan)?;
        let seconds = started.elapsed().as_secs_f64();
        let after = reader.stats();
        let estimated_s = plan.seconds();
        let methods = plan.methods();
        // One call ran every slab, so a query mixing methods has one observed time: each
        // method is credited its share by estimate, judged by the estimate without the
        // correction it was planned under (other threads may have moved it since).
        if estimated_s > 0.0 {
            let mut m = self.model.lock().unwrap_or_else(|p| p.into_inner());
            let mut runs = self.runs.lock().unwrap_or_else(|p| p.into_inner());
            for &method in &methods {
                let share: f64 = plan.slabs.iter().filter(|s| s.choice == method).map(|s| s.seconds(method)).sum();
                let observed = seconds * share / estimated_s;
                m.observe_uncorrected(method, share / model.correction(method), observed, 1.0);
                runs.push(Run { method, estimated_s: share, observed_s: observed });
            }
        }
        Ok(Answer {
            count,
            selection,
            columns: vec![],
            stats,
            plan,
            methods,
            estimated_s,
            seconds,
            bytes_read: after.bytes_read.saturating_sub(before.bytes_read),
            requests: after.requests.saturating_sub(before.requests),
        })
    }

    /// Folds a run of `method` estimated at `estimated_s` (under the current correction)
    /// into the model, for runs made outside [`run`](Self::run).
    pub fn observe(&self, method: Method, estimated_s: f64, observed_s: f64) {
        self.model.lock().unwrap_or_else(|p| p.into_inner()).observe(method, estimated_s, observed_s);
        self.runs.lock().unwrap_or_else(|p| p.into_inner()).push(Run { method, estimated_s, observed_s });
    }

    /// Plans the pieces of one query side by side. One method serves them all, chosen from
    /// the sums of their estimates (or `force`): pieces run side by side, so a piece's time
    /// depends on its neighbours, and per-piece choices let a piece slowed by a neighbour
    /// of the dearer method tip later pieces the wrong way.
    pub fn plan_pieces(
        &self,
        reader: &StoreReader,
        predicate: &Predicate,
        pieces: &[Vec<DimSelection>],
        outputs: &[&str],
        force: Option<Method>,
    ) -> Result<PiecePlans> {
        use rayon::prelude::*;
        let model = self.model();
        let each: Vec<(f64, f64)> = pieces
            .par_iter()
            .map(|sel| {
                let plan = reader.plan_query(predicate, sel, None, outputs, None, &model)?;
                Ok((plan.seconds_with(Method::Index), plan.seconds_with(Method::Scan)))
            })
            .collect::<Result<_>>()?;
        let method = force.unwrap_or_else(|| {
            let (index, scan) = each.iter().fold((0.0, 0.0), |(a, b), (i, s)| (a + i, b + s));
            model.choose(index, scan)
        });
        // Kept without the correction: earlier pieces of this query move it before later
        // ones are observed (see `CostModel::observe_uncorrected`).
        let c = model.correction(method);
        let uncorrected: Vec<f64> =
            each.into_iter().map(|(i, s)| if method == Method::Index { i / c } else { s / c }).collect();
        let total = uncorrected.iter().sum();
        Ok(PiecePlans { method, uncorrected, total })
    }

    /// Runs piece number `piece` of `plans` by their method, and folds what it took into
    /// the model.
    pub fn run_piece<T>(
        &self,
        plans: &PiecePlans,
        piece: usize,
        run: impl FnOnce(Method) -> Result<T>,
    ) -> Result<(T, Run)> {
        let uncorrected = *plans
            .uncorrected
            .get(piece)
            .ok_or_else(|| Error::InvalidArgument(format!("no piece {piece} in this plan")))?;
        let started = Instant::now();
        let out = run(plans.method)?;
        let observed_s = started.elapsed().as_secs_f64();
        let mut m = self.model.lock().unwrap_or_else(|p| p.into_inner());
        let estimated_s = uncorrected * m.correction(plans.method);
        let of_query = if plans.total > 0.0 { uncorrected / plans.total } else { 1.0 };
        m.observe_uncorrected(plans.method, uncorrected, observed_s, of_query);
        let run = Run { method: plans.method, estimated_s, observed_s };
        self.runs.lock().unwrap_or_else(|p| p.into_inner()).push(run);
        Ok((out, run))
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
    if query.level == Some(0) {
        return Err(Error::InvalidArgument("precision level must be at least 1".into()));
    }
    Ok(())
}

pub(crate) fn human_bytes(n: f64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut x = n;
    let mut u = 0;
    while x >= 1024.0 && u + 1 < UNITS.len() {
        x /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{x:.0} {}", UNITS[0])
    } else {
        format!("{x:.1} {}", UNITS[u])
    }
}

impl fmt::Display for QueryPlan {
    /// EXPLAIN: both methods' estimates per slab, the choice, and the total.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{:>5} {:>10} {:>13}  {:>14} {:>8} {:>10} {:>8}  {:>13} {:>8} {:>10} {:>8}  choice",
            "slab",
            "sub-chunks",
            "est. selected",
            "index: bytes",
            "segments",
            "decoded",
            "est. ms",
            "scan: bytes",
            "segments",
            "decoded",
            "est. ms"
        )?;
        for s in &self.slabs {
            let (i, sc) = (&s.index, &s.scan);
            writeln!(
                f,
                "{:>5} {:>10} {:>13.0}  {:>14} {:>8.0} {:>10.0} {:>8.2}  {:>13} {:>8.0} {:>10.0} {:>8.2}  {}",
                s.slab,
                s.subchunks,
                s.selected,
                human_bytes(i.bytes),
                i.segments,
                i.decoded,
                s.index_seconds * 1e3,
                human_bytes(sc.bytes),
                sc.segments,
                sc.decoded,
                s.scan_seconds * 1e3,
                s.choice.name()
            )?;
        }
        let chosen: Vec<&str> = self.methods().iter().map(|m| m.name()).collect();
        let work: Work = self.work();
        write!(
            f,
            "plan: {}{}, estimated {} read, {:.2} ms",
            if chosen.is_empty() { "nothing to read".to_string() } else { chosen.join("+") },
            if self.forced.is_some() { " (forced)" } else { "" },
            human_bytes(work.bytes),
            self.seconds() * 1e3
        )
    }
}
