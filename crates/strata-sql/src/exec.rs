//! Scans: the region split into pieces along the first dimension (aligned with the
//! sub-chunks, so none is decoded twice), pieces spread over DataFusion's partitions, every
//! piece run by the engine's session as one query planned once (`Session::start`, the path
//! `Dataset.query` takes) and streamed as record batches, one per piece, from a blocking
//! task that runs them a round at a time on the engine's threads. The channel holds two
//! batches: the next round is read and decoded while the consumer works on the current
//! one, and memory stays bounded whatever the result's size.
//! Dropping the stream cancels the task at the next batch.

use crate::columns::{Column, TableInner};
use datafusion::arrow::array::{
    downcast_primitive_array, Array, ArrayRef, PrimitiveArray, RecordBatch, RecordBatchOptions, UInt64Array,
};
use datafusion::arrow::buffer::{BooleanBuffer, Buffer, NullBuffer, ScalarBuffer};
use datafusion::arrow::compute::take;
use datafusion::arrow::datatypes::{
    ArrowPrimitiveType, DataType, Float32Type, Float64Type, Int16Type, Int32Type, Int64Type, Int8Type, SchemaRef,
    UInt16Type, UInt32Type, UInt64Type, UInt8Type,
};
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{DataFusionError, Result as DfResult};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_plan::metrics::MetricsSet;
use datafusion::physical_plan::stream::RecordBatchReceiverStreamBuilder;
use datafusion::physical_plan::streaming::{PartitionStream, StreamingTableExec};
use datafusion::physical_plan::{DisplayAs, DisplayFormatType, ExecutionPlan, PhysicalExpr, PlanProperties};
use std::sync::{Arc, Mutex};
use strata_core::area::Area;
use strata_core::points;
use strata_core::query::{pieces, Predicate, Scan};
use strata_core::session::{Output, Query, QueryRun};
use strata_core::{DType, DimSelection, Error, Result};

#[derive(Debug)]
pub(crate) struct ScanRequest {
    pub table: Arc<TableInner>,
    pub region: Vec<DimSelection>,
    pub predicate: Option<Predicate>,
    /// The area the rows are restricted to (auxiliary columns' filters), the region being
    /// its bounding box.
    pub area: Option<Area>,
    pub columns: Vec<Column>,
    pub schema: SchemaRef,
    pub limit: Option<usize>,
    /// The region split into pieces (see [`pieces`]).
    pub pieces: Vec<Vec<DimSelection>>,
    /// The query under way, started when its first piece starts (see [`query_run`]):
    /// planning the SQL (DataFusion may call `scan` several times, EXPLAIN runs nothing)
    /// costs no planning of the region.
    pub run: Mutex<Option<Arc<QueryRun>>>,
}

impl ScanRequest {
    pub fn new(
        table: Arc<TableInner>,
        region: Vec<DimSelection>,
        predicate: Option<Predicate>,
        area: Option<Area>,
        columns: Vec<Column>,
        schema: SchemaRef,
        limit: Option<usize>,
    ) -> Result<Self> {
        let mut request = ScanRequest {
            table,
            region,
            predicate,
            area,
            columns,
            schema,
            limit,
            pieces: vec![],
            run: Mutex::new(None),
        };
        request.pieces = pieces(&request)?;
        Ok(request)
    }

    /// The same request with no query under way, for a plan run again.
    fn again(&self) -> Self {
        ScanRequest {
            table: self.table.clone(),
            region: self.region.clone(),
            predicate: self.predicate.clone(),
            area: self.area.clone(),
            columns: self.columns.clone(),
            schema: self.schema.clone(),
            limit: self.limit,
            pieces: self.pieces.clone(),
            run: Mutex::new(None),
        }
    }
}

/// A column of `dtype` from little-endian bytes; NULL where the value is NaN or one of
/// `missing` (None: no value can be, so none is tested). The bytes become the column's
/// buffer without a copy where they can; the test of every value runs in the engine
/// (`DType::validity`).
pub fn column_array(dtype: DType, raw: Vec<u8>, missing: Option<&[f64]>) -> Result<ArrayRef> {
    fn build<T: ArrowPrimitiveType>(
        dtype: DType,
        raw: Vec<u8>,
        missing: Option<&[f64]>,
        from: impl Fn(&[u8]) -> T::Native,
    ) -> ArrayRef {
        let w = std::mem::size_of::<T::Native>();
        let len = raw.len() / w;
        let float = matches!(T::DATA_TYPE, DataType::Float32 | DataType::Float64);
        let nulls = match missing {
            None => None,
            Some(missing) if missing.is_empty() && !float => None,
            Some(missing) => dtype.validity(&raw, missing).map(|(bits, invalid)| {
                let valid = BooleanBuffer::new(Buffer::from_vec(bits), 0, len);
                // SAFETY: `validity` counts the bits it leaves unset.
                unsafe { NullBuffer::new_unchecked(valid, invalid) }
            }),
        };
        let buffer = Buffer::from_vec(raw);
        // Arrow holds values in native order: little-endian bytes are taken as they are on
        // a little-endian target when aligned, and converted otherwise.
        let values: ScalarBuffer<T::Native> =
            if cfg!(target_endian = "little") && buffer.as_ptr().align_offset(std::mem::align_of::<T::Native>()) == 0 {
                ScalarBuffer::new(buffer, 0, len)
            } else {
                buffer.as_slice().chunks_exact(w).map(from).collect()
            };
        Arc::new(PrimitiveArray::<T>::new(values, nulls))
    }
    macro_rules! le {
        ($t:ty) => {
            |b: &[u8]| <$t>::from_le_bytes(b.try_into().unwrap_or_default())
        };
    }
    Ok(match dtype {
        DType::I8 => build::<Int8Type>(dtype, raw, missing, le!(i8)),
        DType::U8 => build::<UInt8Type>(dtype, raw, missing, le!(u8)),
        DType::I16 => build::<Int16Type>(dtype, raw, missing, le!(i16)),
        DType::U16 => build::<UInt16Type>(dtype, raw, missing, le!(u16)),
        DType::I32 => build::<Int32Type>(dtype, raw, missing, le!(i32)),
        DType::U32 => build::<UInt32Type>(dtype, raw, missing, le!(u32)),
        DType::I64 => build::<Int64Type>(dtype, raw, missing, le!(i64)),
        DType::U64 => build::<UInt64Type>(dtype, raw, missing, le!(u64)),
        DType::F32 => build::<Float32Type>(dtype, raw, missing, le!(f32)),
        DType::F64 => build::<Float64Type>(dtype, raw, missing, le!(f64)),
        DType::Char | DType::String => {
            return Err(Error::InvalidArgument(format!("{} variables are not SQL columns", dtype.name())))
        }
    })
}

/// The coordinate column of dimension `d` at flat indices `flat` into a grid of `shape`.
/// Coordinates without NULLs are picked straight from their values; others through `take`.
fn coord_column(coord: &ArrayRef, d: usize, shape: &[u64], flat: &[u64]) -> Result<ArrayRef> {
    if coord.null_count() == 0 && coord.len() as u64 >= shape[d] {
        let picked: Option<ArrayRef> = downcast_primitive_array!(
            coord => picked(coord, d, shape, flat),
            _ => None
        );
        if let Some(a) = picked {
            return Ok(a);
        }
    }
    let idx = UInt64Array::from(points::axis_indices(d, shape, flat));
    take(coord, &idx, None).map_err(arrow_error)
}

/// The engine's coordinate values at the points, in a column of `a`'s type (a timestamp
/// keeps its unit and zone); None for a width the engine does not pick.
fn picked<T: ArrowPrimitiveType>(a: &PrimitiveArray<T>, d: usize, shape: &[u64], flat: &[u64]) -> Option<ArrayRef> {
    let values = a.values().inner();
    // The values' buffer is aligned for T, so for the unsigned type of T's width too.
    let out = match std::mem::size_of::<T::Native>() {
        1 => Buffer::from_vec(points::pick_u8(values.typed_data(), d, shape, flat)),
        2 => Buffer::from_vec(points::pick_u16(values.typed_data(), d, shape, flat)),
        4 => Buffer::from_vec(points::pick_u32(values.typed_data(), d, shape, flat)),
        8 => Buffer::from_vec(points::pick_u64(values.typed_data(), d, shape, flat)),
        _ => return None,
    };
    let values = ScalarBuffer::<T::Native>::new(out, 0, flat.len());
    Some(Arc::new(PrimitiveArray::<T>::new(values, None).with_data_type(a.data_type().clone())))
}

/// Splits the region into pieces along the first dimension by the engine's rule (the
/// session's, which `Session::start` cuts by too), at the sub-chunks of the first variable
/// constrained or read.
fn pieces(req: &ScanRequest) -> Result<Vec<Vec<DimSelection>>> {
    if req.region.is_empty() {
        return Ok(vec![]);
    }
    let driver = req
        .predicate
        .as_ref()
        .and_then(|p| p.variable_names().first().map(|s| s.to_string()))
        .or_else(|| req.table.group.variables.first().cloned());
    match driver {
        Some(name) => req.table.planning.session.pieces(&req.table.reader, &name, &req.region),
        None => Ok(pieces::split(&req.region, &[0], req.table.planning.session.piece_elements())),
    }
}

/// The rows of piece number `piece`, as one batch (None when it has none). A piece is
/// bounded already (the engine's piece size), and it is computed whole: slicing it into
/// DataFusion's batch size (8,192 rows) only added costs per batch downstream — a
/// hand-over between threads and an export through the C stream each, 800 of them for
/// 6.5 million rows, a fifth of a points query's time at 90% selectivity on ERSST.
fn run_piece(req: &ScanRequest, piece: usize) -> Result<Option<RecordBatch>> {
    let sel = req.pieces[piece].as_slice();
    let t = &req.table;
    let reader = &t.reader;
    let shape = &t.group.shape;
    let vars = returned(req);
    let elements: u64 = sel.iter().map(|s| s.stop - s.start).product();
    let mask = req.area.as_ref().map(|a| a.mask().as_ref());
    // The box's elements in the area: their flat indices and their places in a read of it.
    let inside = req.area.as_ref().filter(|_| req.predicate.is_none()).map(|a| a.positions_in(shape, sel));
    // (flat indices, raw columns); flat is None when the piece is the whole box.
    let (flat, raws, rows): (Option<Vec<u64>>, Vec<Vec<u8>>, usize) = match &req.predicate {
        None => {
            let mut raws = Vec::with_capacity(vars.len());
            for name in &vars {
                let (_, v) = reader.manifest().variable(name)?;
                let mut raw = vec![0u8; elements as usize * v.dtype.size()];
                reader.read_into(name, sel, &mut raw)?;
                raws.push(match &inside {
                    Some((_, local)) => points::elements_at(&raw, v.dtype.size(), local)?,
                    None => raw,
                });
            }
            match inside {
                Some((flat, _)) => {
                    let n = flat.len();
                    (Some(flat), raws, n)
                }
                None => (None, raws, elements as usize),
            }
        }
        Some(pred) if req.columns.is_empty() => {
            let (_, count, _) = observed(req, pred, piece, |run, sel, plan| {
                run.executor(reader).select_with(pred, sel, mask, true, plan.method())
            })?;
            (Some(vec![]), vec![], count as usize)
        }
        Some(pred) => {
            let (points, _) = observed(req, pred, piece, |run, sel, plan| {
                run.executor(reader)
                    .points(&Scan { predicate: pred, region: sel, mask, outputs: &vars, level: None }, &|slab| {
                        plan.method_for(slab)
                    })
            })?;
            let n = points.flat.len();
            (Some(points.flat), points.columns, n)
        }
    };
    if rows == 0 {
        return Ok(None);
    }
    let flat = match flat {
        Some(f) => f,
        // Every element of the box, row-major.
        None if req.columns.iter().any(|c| matches!(c, Column::Coord(_) | Column::Aux(_))) => {
            strata_core::grid::flat_indices(shape, sel)
        }
        None => vec![],
    };
    let mut arrays: Vec<ArrayRef> = Vec::with_capacity(req.columns.len());
    let mut raws = raws.into_iter();
    for c in &req.columns {
        match c {
            Column::Coord(d) => arrays.push(coord_column(&t.coords[*d].array, *d, shape, &flat)?),
            Column::Aux(k) => arrays.push(t.aux_values(*k)?.at(shape, &flat)?),
            Column::Var(name) => {
                let (_, v) = reader.manifest().variable(name)?;
                let raw = raws.next().ok_or_else(|| Error::InvalidArgument(format!("no values read for '{name}'")))?;
                // A variable the constraint compares is never NULL where it holds (NULL
                // satisfies no comparison): its values need no test.
                let missing = v.missing_values();
                let nulls =
                    (!req.predicate.as_ref().is_some_and(|p| never_null(p, name))).then_some(missing.as_slice());
                let stored = column_array(v.dtype, raw, nulls)?;
                arrays.push(match t.packed.get(name) {
                    Some(u) => u.apply(&stored)?,
                    None => stored,
                });
            }
        }
    }
    let options = RecordBatchOptions::new().with_row_count(Some(rows));
    let batch = RecordBatch::try_new_with_options(req.schema.clone(), arrays, &options).map_err(arrow_error)?;
    Ok(Some(batch))
}

/// Whether `name` holds a value (not NaN, not a fill) wherever `pred` holds.
fn never_null(pred: &Predicate, name: &str) -> bool {
    match pred {
        Predicate::Cmp { var, .. } => var == name,
        Predicate::And { args } => args.iter().any(|a| never_null(a, name)),
        Predicate::Or { args } => !args.is_empty() && args.iter().all(|a| never_null(a, name)),
    }
}

fn arrow_error(e: datafusion::arrow::error::ArrowError) -> Error {
    Error::InvalidArgument(format!("building a result batch: {e}"))
}

/// The variables a request returns.
fn returned(req: &ScanRequest) -> Vec<&str> {
    req.columns
        .iter()
        .filter_map(|c| match c {
            Column::Var(n) => Some(n.as_str()),
            Column::Coord(_) | Column::Aux(_) => None,
        })
        .collect()
}

/// The query under way, started once by the first piece to run: the engine's session
/// plans it whole (a method per slab, decided for the query) and cuts it into the same
/// pieces as [`pieces`].
fn query_run(req: &ScanRequest, pred: &Predicate) -> Result<Arc<QueryRun>> {
    let mut slot = req.run.lock().map_err(|_| Error::InvalidArgument("scan plan lock poisoned".into()))?;
    if let Some(r) = slot.as_ref() {
        return Ok(r.clone());
    }
    let planning = &req.table.planning;
    let run = Arc::new(planning.session.start(&req.table.reader, &engine_query(req, pred))?);
    if run.pieces() != req.pieces.as_slice() {
        return Err(Error::InvalidArgument("the scan's pieces differ from the engine's".into()));
    }
    *slot = Some(run.clone());
    Ok(run)
}

/// The query a scan with constraint `pred` asks the engine.
fn engine_query(req: &ScanRequest, pred: &Predicate) -> Query {
    Query {
        predicate: pred.clone(),
        region: req.region.clone(),
        output: if req.columns.is_empty() { Output::Count } else { Output::Points },
        variables: returned(req).into_iter().map(String::from).collect(),
        level: None,
        method: req.table.planning.force,
        mask: req.area.as_ref().map(|a| a.mask().clone()),
        // SQL compares the values as stored (its columns are the stored values).
        raw: true,
    }
}

/// Runs piece number `piece` by the query's plan; the session learns from its time.
fn observed<T>(
    req: &ScanRequest,
    pred: &Predicate,
    piece: usize,
    body: impl FnOnce(&QueryRun, &[DimSelection], &strata_core::planner::QueryPlan) -> Result<T>,
) -> Result<T> {
    let run = query_run(req, pred)?;
    let planning = &req.table.planning;
    let (out, records) = planning.session.run_piece(&run, piece, |sel, plan| body(&run, sel, plan))?;
    if let Ok(mut log) = planning.log.lock() {
        log.extend(records);
    }
    Ok(out)
}

/// One partition: a run of pieces.
#[derive(Debug)]
struct Partition {
    request: Arc<ScanRequest>,
    /// Numbers of the request's pieces this partition runs.
    pieces: std::ops::Range<usize>,
}

impl PartitionStream for Partition {
    fn schema(&self) -> &SchemaRef {
        &self.request.schema
    }

    fn execute(&self, _ctx: Arc<TaskContext>) -> SendableRecordBatchStream {
        let mut builder = RecordBatchReceiverStreamBuilder::new(self.request.schema.clone(), 2);
        let tx = builder.tx();
        let request = self.request.clone();
        let range = self.pieces.clone();
        builder.spawn_blocking(move || {
            // Pieces run a round at a time on the engine's threads, as `Dataset.query`'s do;
            // under a LIMIT one at a time: the rows wanted may all come from the first.
            let window = if request.limit.is_some() { 1 } else { pieces::round_len() };
            let numbers: Vec<usize> = range.collect();
            let mut sent = 0usize;
            for round in numbers.chunks(window) {
                if request.limit.is_some_and(|l| sent >= l) {
                    break;
                }
                for batch in pieces::run_round(round, |piece| run_piece(&request, piece)) {
                    let Some(batch) = batch.map_err(crate::to_df)? else { continue };
                    sent += batch.num_rows();
                    if tx.blocking_send(Ok(batch)).is_err() {
                        return Ok(()); // the consumer is gone: cancelled
                    }
                }
            }
            Ok(())
        });
        builder.build()
    }
}

/// The execution plan of a scan: the partitions' streams run by DataFusion's
/// `StreamingTableExec`, shown in EXPLAIN as what the engine was asked (the region, the
/// constraint, the area) and how it plans to answer.
#[derive(Debug)]
pub(crate) struct StrataScan {
    streams: Arc<StreamingTableExec>,
    request: Arc<ScanRequest>,
    /// The partitions asked for (DataFusion's target).
    partitions: usize,
}

impl StrataScan {
    pub fn try_new(request: ScanRequest, partitions: usize) -> Result<Self> {
        let n = request.pieces.len();
        let schema = request.schema.clone();
        let limit = request.limit;
        let request = Arc::new(request);
        let per = n.div_ceil(partitions.max(1)).max(1);
        let mut parts: Vec<Arc<dyn PartitionStream>> = (0..n)
            .step_by(per)
            .map(|a| {
                Arc::new(Partition { request: request.clone(), pieces: a..(a + per).min(n) })
                    as Arc<dyn PartitionStream>
            })
            .collect();
        if parts.is_empty() {
            parts.push(Arc::new(Partition { request: request.clone(), pieces: 0..0 }));
        }
        let streams = StreamingTableExec::try_new(schema, parts, None, Vec::new(), false, limit)
            .map_err(|e| Error::InvalidArgument(format!("planning the scan: {e}")))?;
        Ok(StrataScan { streams: Arc::new(streams), request, partitions })
    }

    /// About the bytes this scan holds for as long as a plan holding it is kept: its
    /// pieces, and its area's mask.
    pub(crate) fn held_bytes(&self) -> usize {
        let req = &self.request;
        let pieces = req.pieces.len() * req.region.len() * std::mem::size_of::<DimSelection>();
        pieces + req.area.as_ref().map_or(0, |a| a.mask().heap_bytes())
    }

    /// Whether a run of this scan started the engine's query.
    #[cfg(test)]
    pub(crate) fn started(&self) -> bool {
        self.request.run.lock().is_ok_and(|r| r.is_some())
    }

    /// The last line of the engine's EXPLAIN: the methods, the bytes and time estimated. The
    /// plan of the query under way once it runs (EXPLAIN ANALYZE), with what it fetched;
    /// else planned here: EXPLAIN alone runs nothing, and a scan is planned when its first
    /// piece starts.
    fn plan_summary(&self, pred: &Predicate) -> Option<String> {
        let req = &self.request;
        let run = req.run.lock().ok().and_then(|r| r.clone());
        let Some(run) = run else {
            let plan = req.table.planning.session.plan(&req.table.reader, &engine_query(req, pred)).ok()?;
            return plan.to_string().lines().last().map(str::to_string);
        };
        let plan = run.plan().to_string();
        Some(format!("{}, actual: {}", plan.lines().last()?, run.reads_so_far()))
    }
}

impl DisplayAs for StrataScan {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        let req = &self.request;
        let region: Vec<String> =
            req.table.group.dims.iter().zip(&req.region).map(|(d, s)| format!("{d} {}:{}", s.start, s.stop)).collect();
        write!(f, "StrataScan: region=[{}]", region.join(", "))?;
        if req.area.is_some() {
            write!(f, ", area=mask")?;
        }
        if let Some(p) = &req.predicate {
            write!(f, ", where={p}")?;
        }
        write!(f, ", pieces={}", req.pieces.len())?;
        if let Some(summary) = req.predicate.as_ref().and_then(|p| self.plan_summary(p)) {
            write!(f, ", {summary}")?;
        }
        // The streams' own: partitions, projection, fetch.
        let streams = datafusion::physical_plan::displayable(self.streams.as_ref()).one_line().to_string();
        write!(f, ", {}", streams.trim_end().trim_start_matches("StreamingTableExec: "))
    }
}

impl ExecutionPlan for StrataScan {
    fn name(&self) -> &str {
        "StrataScan"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        self.streams.properties()
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![]
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> DfResult<TreeNodeRecursion>,
    ) -> DfResult<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn with_new_children(self: Arc<Self>, children: Vec<Arc<dyn ExecutionPlan>>) -> DfResult<Arc<dyn ExecutionPlan>> {
        if children.is_empty() {
            Ok(self)
        } else {
            Err(DataFusionError::Internal("a scan has no children".into()))
        }
    }

    /// A plan run again (see `plans`) starts a new query of the engine's session: the
    /// query under way is this scan's state.
    fn reset_state(self: Arc<Self>) -> DfResult<Arc<dyn ExecutionPlan>> {
        let scan = StrataScan::try_new(self.request.again(), self.partitions).map_err(crate::to_df)?;
        Ok(Arc::new(scan))
    }

    fn execute(&self, partition: usize, ctx: Arc<TaskContext>) -> DfResult<SendableRecordBatchStream> {
        self.streams.execute(partition, ctx)
    }

    fn metrics(&self) -> Option<MetricsSet> {
        self.streams.metrics()
    }

    fn fetch(&self) -> Option<usize> {
        self.streams.fetch()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strata_core::constraint::parse;

    #[test]
    fn a_variable_is_never_null_where_every_branch_compares_it() {
        let p = |t: &str| parse(t).unwrap_or_else(|e| panic!("{t}: {e}"));
        assert!(never_null(&p("sst > 1"), "sst"));
        assert!(!never_null(&p("sst > 1"), "ice"));
        assert!(never_null(&p("sst > 1 and ice < 2"), "ice"));
        assert!(never_null(&p("sst > 1 or sst < -1"), "sst"));
        // Where ice holds alone, sst may be missing.
        assert!(!never_null(&p("sst > 1 or ice < 2"), "sst"));
        assert!(never_null(&p("(sst > 1 or ice < 2) and sst < 30"), "sst"));
    }

    #[test]
    fn columns_test_for_nulls_unless_told_none_can_be() {
        let raw: Vec<u8> = [1.0f32, f32::NAN, -999.0].iter().flat_map(|x| x.to_le_bytes()).collect();
        let tested = column_array(DType::F32, raw.clone(), Some(&[-999.0])).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(tested.null_count(), 2);
        let trusted = column_array(DType::F32, raw, None).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(trusted.null_count(), 0);
    }
}
