//! The JSON and Arrow routes: health, catalog, schema, the engine's query and SQL.

use crate::encode::{Encoder, Format};
use crate::estimate::{self, FetchEstimate};
use crate::pieces::{boxes, streamed, streamed_encoded, Encoding};
use crate::{ApiError, AppState, State};
use arrow::array::{ArrayRef, UInt64Array};
use arrow::datatypes::{Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use axum::extract::{Path, Query as QueryParams, State as AxState};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::json;
use std::sync::Arc;
use strata_core::area;
use strata_core::labels::{LabelIndex, Method};
use strata_core::session::parse_method;
use strata_core::{DType, DimSelection, Output, Query, StoreReader};
use strata_sql::table::AuxValues;

/// URL parameters, with a malformed one answered as our JSON error (axum's own rejection is
/// plain text).
pub(crate) struct Params<T>(pub T);

impl<T, S> axum::extract::FromRequestParts<S> for Params<T>
where
    T: serde::de::DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut axum::http::request::Parts, state: &S) -> Result<Self, ApiError> {
        match QueryParams::<T>::from_request_parts(parts, state).await {
            Ok(QueryParams(v)) => Ok(Params(v)),
            Err(e) => Err(ApiError::bad_request(e.body_text())),
        }
    }
}

/// A request's fields: URL parameters on GET, a JSON body on POST.
pub(crate) struct Ask<T>(pub T);

impl<T, S> axum::extract::FromRequest<S> for Ask<T>
where
    T: serde::de::DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: axum::extract::Request, state: &S) -> Result<Self, ApiError> {
        if req.method() == axum::http::Method::POST {
            let body =
                axum::body::Bytes::from_request(req, state).await.map_err(|e| ApiError::bad_request(e.body_text()))?;
            return serde_json::from_slice(&body)
                .map(Ask)
                .map_err(|e| ApiError::bad_request(format!("the request body is not this route's JSON: {e}")));
        }
        let (mut parts, _) = req.into_parts();
        let Params(v) =
            <Params<T> as axum::extract::FromRequestParts<S>>::from_request_parts(&mut parts, state).await?;
        Ok(Ask(v))
    }
}

/// Runs blocking engine work off the async threads.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T, ApiError> + Send + 'static) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(f).await.map_err(ApiError::internal)?
}

pub(crate) async fn health(AxState(state): AxState<State>) -> Response {
    let n = blocking({
        let state = state.clone();
        move || Ok(state.catalog.names().len())
    })
    .await
    .unwrap_or(0);
    let (indexes, positions) = state.catalog.cache_bytes();
    Json(json!({
        "status": "ok",
        "datasets": n,
        "server": concat!("strata/", env!("CARGO_PKG_VERSION")),
        // What the readers of every dataset hold together (one budget each, shared).
        "cache_bytes": {"indexes": indexes, "positions": positions},
    }))
    .into_response()
}

pub(crate) async fn not_found() -> Response {
    ApiError::not_found(
        "no such route: see GET /api/datasets, /api/schema/NAME, /api/query/NAME, /api/sql/NAME, /dap/NAME.dds",
    )
    .into_response()
}

pub(crate) async fn datasets(AxState(state): AxState<State>) -> Result<Response, ApiError> {
    let list = blocking(move || {
        let mut out = Vec::new();
        for name in state.catalog.names() {
            // A protected dataset is listed by name only: its token opens the rest.
            if state.config.token_for(&name).is_some() {
                out.push(json!({"name": name, "protected": true}));
                continue;
            }
            let entry = match state.catalog.reader(&name) {
                Ok(r) => {
                    let m = r.manifest();
                    json!({
                        "name": name,
                        "version": m.version,
                        "dims": m.dims.iter().map(|d| json!({"name": d.name, "size": d.size})).collect::<Vec<_>>(),
                        "variables": m.variables.iter().map(|v| v.name.clone()).collect::<Vec<_>>(),
                        "stored_bytes": m.files.iter().map(|f| f.size).sum::<u64>(),
                        "schema": format!("/api/schema/{name}"),
                        "dap": format!("/dap/{name}"),
                    })
                }
                // A damaged store is listed with its error, not hidden (nor fatal).
                Err(e) => json!({"name": name, "error": {"kind": e.kind, "message": e.message}}),
            };
            out.push(entry);
        }
        Ok(out)
    })
    .await?;
    Ok(Json(json!({"datasets": list})).into_response())
}

pub(crate) async fn schema(AxState(state): AxState<State>, Path(name): Path<String>) -> Result<Response, ApiError> {
    let value = blocking(move || {
        let reader = state.catalog.reader(&name)?;
        Ok(crate::schema::describe(&name, &reader)?)
    })
    .await?;
    Ok(Json(value).into_response())
}

/// Variables as a JSON list or a comma-separated string (the form a URL carries).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub(crate) enum Names {
    List(Vec<String>),
    Text(String),
}

impl Names {
    fn into_vec(self) -> Vec<String> {
        match self {
            Names::List(v) => v,
            Names::Text(t) => t.split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect(),
        }
    }
}

/// The engine's query as a request carries it (JSON body, or URL parameters).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct QueryRequest {
    /// The constraint, in the engine's grammar (`sst > 25 and lat > 0`).
    #[serde(rename = "where")]
    pub where_: String,
    /// count (default), positions or points.
    pub output: Option<String>,
    /// Variables returned with points (default: the constrained ones).
    pub variables: Option<Names>,
    /// Index ranges: `time=0:12,lat=10:20:2,lon=5`.
    pub isel: Option<String>,
    /// Labels on 1-D coordinates: `time=2000-01:2000-06,lat=-10:10` (see [`selection_items`]).
    pub sel: Option<String>,
    /// Ranges of auxiliary coordinates (2-D latitude/longitude, a mesh's coordinates), both
    /// ends included, either open: `latitude=60:,longitude=300:60` (a longitude range
    /// across the dateline). The engine's area mask.
    pub area: Option<String>,
    pub level: Option<usize>,
    /// auto (default), index or scan.
    pub method: Option<String>,
    /// Compare packed variables' stored values rather than physical ones.
    pub raw: Option<bool>,
    /// arrow (default), csv or json, for positions and points.
    pub format: Option<String>,
    /// At most this many rows of positions or points (a preview).
    pub limit: Option<u64>,
    /// Answer part `part` (from 0) of `parts`: the region cut along its first dimension into
    /// parts of about equal estimated result size, for fetching over several connections.
    pub parts: Option<u64>,
    pub part: Option<u64>,
    /// Answer a [`FetchEstimate`] (JSON) of the whole result, in `format` and the encoding
    /// the request accepts, instead of the result (positions and points).
    pub estimate: Option<bool>,
}

/// One `isel` item: an index or a range along a named dimension.
#[derive(Debug, Clone)]
struct IselItem {
    dim: String,
    start: Option<u64>,
    stop: Option<u64>,
    step: u64,
    text: String,
    /// Picked by labels (`sel`): an empty range is no error, only an empty answer.
    by_label: bool,
}

/// `isel` items and `sel` items as one list: `sel` text is labels on 1-D coordinates
/// (`time=2000-01:2000-06,lat=-10:10`, partial dates, both ends included), whose positions
/// the engine picks (`strata_core::labels`), as `Variable.sel` and `--sel` do.
fn selection_items(reader: &StoreReader, isel: Option<&str>, sel: Option<&str>) -> Result<Vec<IselItem>, ApiError> {
    let mut items = isel_items(isel)?;
    let Some(text) = sel.filter(|t| !t.trim().is_empty()) else { return Ok(items) };
    for item in text.split(',') {
        let (dim, labels) = item
            .split_once('=')
            .ok_or_else(|| ApiError::bad_request(format!("sel item '{item}' is not dim=label or dim=lo:hi")))?;
        let dim = dim.trim().to_string();
        if items.iter().any(|x| x.dim == dim) {
            return Err(ApiError::bad_request(format!("'{dim}' is selected twice (in isel or sel)")));
        }
        let s = LabelIndex::read(reader, &dim)?.select_text(labels, Method::Exact)?.selection();
        items.push(IselItem {
            dim,
            start: Some(s.start),
            stop: Some(s.stop),
            step: 1,
            text: item.to_string(),
            by_label: true,
        });
    }
    Ok(items)
}

/// `time=0:12,lat=10:20:2,lon=5`.
fn isel_items(text: Option<&str>) -> Result<Vec<IselItem>, ApiError> {
    let Some(text) = text.filter(|t| !t.trim().is_empty()) else { return Ok(vec![]) };
    let mut out: Vec<IselItem> = Vec::new();
    for item in text.split(',') {
        let (dim, range) = item.split_once('=').ok_or_else(|| {
            ApiError::bad_request(format!("isel item '{item}' is not dim=start:stop[:step] or dim=i"))
        })?;
        let num = |s: &str| -> Result<Option<u64>, ApiError> {
            let s = s.trim();
            if s.is_empty() {
                return Ok(None);
            }
            s.parse::<u64>()
                .map(Some)
                .map_err(|_| ApiError::bad_request(format!("isel '{item}': '{s}' is not an index")))
        };
        let nums: Vec<&str> = range.split(':').collect();
        let (start, stop, step) = match nums[..] {
            [i] => {
                let i = num(i)?.ok_or_else(|| ApiError::bad_request(format!("isel '{item}' has no index")))?;
                (Some(i), Some(i + 1), 1)
            }
            [a, b] => (num(a)?, num(b)?, 1),
            [a, b, c] => (num(a)?, num(b)?, num(c)?.unwrap_or(1)),
            _ => return Err(ApiError::bad_request(format!("isel item '{item}' has too many parts"))),
        };
        if step == 0 {
            return Err(ApiError::bad_request(format!("isel '{item}': the step must be at least 1")));
        }
        let dim = dim.trim().to_string();
        if out.iter().any(|x| x.dim == dim) {
            return Err(ApiError::bad_request(format!("isel selects '{dim}' twice")));
        }
        out.push(IselItem { dim, start, stop, step, text: item.to_string(), by_label: false });
    }
    Ok(out)
}

/// The selection of an array on `dims` of `shape` under `items` (dimensions not named: all).
fn apply_isel(items: &[IselItem], dims: &[String], shape: &[u64]) -> Result<Vec<DimSelection>, ApiError> {
    let mut sel = Vec::with_capacity(dims.len());
    for (d, &n) in dims.iter().zip(shape) {
        let s = match items.iter().find(|x| x.dim == *d) {
            None => DimSelection { start: 0, stop: n, step: 1 },
            Some(x) => {
                let start = x.start.unwrap_or(0);
                let stop = x.stop.unwrap_or(n).min(n);
                if (start >= n && !(x.by_label && start == stop)) || start > stop {
                    return Err(ApiError::bad_request(format!(
                        "isel '{}' is out of range for '{d}' of length {n}",
                        x.text
                    )));
                }
                DimSelection { start, stop, step: x.step }
            }
        };
        sel.push(s);
    }
    Ok(sel)
}

/// Region from `isel` and `sel` text over `dims` of `shape` (every named dimension must be
/// one of them).
fn region(
    reader: &StoreReader,
    isel: Option<&str>,
    sel: Option<&str>,
    dims: &[String],
    shape: &[u64],
) -> Result<Vec<DimSelection>, ApiError> {
    let items = selection_items(reader, isel, sel)?;
    if let Some(x) = items.iter().find(|x| !dims.contains(&x.dim)) {
        return Err(ApiError::bad_request(format!(
            "'{}' is not a dimension of the constrained variables {dims:?} (a 2-D coordinate's range goes in area)",
            x.dim
        )));
    }
    apply_isel(&items, dims, shape)
}

/// The engine's query for a request, with the dimensions and shape it ranges over.
fn engine_query(
    state: &AppState,
    name: &str,
    reader: &StoreReader,
    req: &QueryRequest,
) -> Result<(Query, Vec<String>, Vec<u64>), ApiError> {
    let predicate = strata_core::constraint::parse(&req.where_)?;
    let m = reader.manifest();
    let names = predicate.variable_names();
    let first = names.first().ok_or_else(|| ApiError::bad_request("the constraint names no variable"))?;
    let (_, var) = m.variable(first)?;
    let dims = var.dims.clone();
    let shape = m.shape(var);
    let output = Output::parse(req.output.as_deref().unwrap_or("count"))?;
    let variables = match req.variables.clone().map(Names::into_vec) {
        Some(v) => v,
        None if output == Output::Points => names.iter().map(|s| s.to_string()).collect(),
        None => vec![],
    };
    for v in &variables {
        let (_, var) = m.variable(v)?;
        if var.dims != dims {
            return Err(ApiError::bad_request(format!(
                "'{v}' {:?} is not on the constraint's dimensions {dims:?}",
                var.dims
            )));
        }
    }
    let mut region = region(reader, req.isel.as_deref(), req.sel.as_deref(), &dims, &shape)?;
    let mask = match req.area.as_deref() {
        None => None,
        Some(text) => {
            let area = state.areas.get(name, reader, &dims, &shape, &crate::areas::items(text)?)?;
            area.narrow(&mut region)?.then(|| area.mask().clone())
        }
    };
    let query = Query {
        region,
        predicate,
        output,
        variables,
        level: req.level,
        method: parse_method(req.method.as_deref().unwrap_or("auto"))?,
        mask,
        raw: req.raw.unwrap_or(false),
    };
    Ok((query, dims, shape))
}

/// The engine's query (GET with URL parameters, or POST with a JSON body).
pub(crate) async fn query(
    AxState(state): AxState<State>,
    Path(name): Path<String>,
    headers: HeaderMap,
    Ask(req): Ask<QueryRequest>,
) -> Result<Response, ApiError> {
    let encoding = Encoding::negotiate(&headers);
    let format = Format::parse(req.format.as_deref())?;
    let limit = req.limit;
    let wants_estimate = req.estimate == Some(true);
    let split = match (req.parts, req.part) {
        (None, None) => None,
        (Some(n), Some(i)) if n > 0 && i < n => Some((n, i)),
        _ => return Err(ApiError::bad_request("parts=N&part=i needs both, with 0 <= i < N")),
    };
    let (reader, query, dims, shape) = blocking({
        let (state, name) = (state.clone(), name.clone());
        move || {
            let reader = state.catalog.reader(&name)?;
            let (query, dims, shape) = engine_query(&state, &name, &reader, &req)?;
            Ok((reader, query, dims, shape))
        }
    })
    .await?;
    if query.output == Output::Count {
        if wants_estimate {
            return Err(ApiError::bad_request(
                "estimate=true prices a download of positions or points; a count is answered as it is",
            ));
        }
        let answer = blocking(move || Ok(state.session.run(&reader, &query)?)).await?;
        return Ok(Json(json!({
            "count": answer.count,
            "seconds": answer.seconds,
            "methods": answer.methods.iter().map(|m| m.name()).collect::<Vec<_>>(),
            "bytes_read": answer.bytes_read,
            "explain": format!("{}\n{}", answer.plan, answer),
        }))
        .into_response());
    }
    // Both read from the store: off the async threads.
    let (columns, query, selected) = blocking({
        let (state, reader) = (state.clone(), reader.clone());
        move || {
            let columns = Columns::new(&state, &name, &reader, &query, &dims, &shape)?;
            let plan = state.session.plan(&reader, &query)?;
            let Some((n, i)) = split else { return Ok((columns, query.clone(), plan.selected())) };
            let (region, share) = part_region(reader.manifest(), &plan, &dims, &query.region, n, i);
            Ok((columns, Query { region, ..query }, plan.selected() * share))
        }
    })
    .await?;
    let target = state.config.limits.piece_bytes;
    if wants_estimate {
        // Before the size limit: a result too large to answer can still be priced.
        let e = blocking(move || {
            let batch = |a: &strata_core::Answer| columns.batch(a);
            estimate::points(&state.session, &reader, &query, columns.row_bytes, target, format, encoding, limit, batch)
        })
        .await?;
        return Ok(Json(e).into_response());
    }
    let bytes = selected.min(limit.map_or(f64::INFINITY, |l| l as f64)) * columns.row_bytes as f64;
    if bytes > state.config.limits.max_result_bytes as f64 {
        return Err(ApiError::too_large(format!(
            "the query selects about {selected:.0} elements ({bytes:.0} bytes); this server answers at most {} bytes \
             (narrow the region or the constraint, or ask for the count)",
            state.config.limits.max_result_bytes
        )));
    }
    let body = streamed_encoded(encoding, crate::pieces::wants_trailers(&headers), move |send| {
        let mut enc = Encoder::new(format, &columns.schema)?;
        let mut sent_any = false;
        let mut left = limit.unwrap_or(u64::MAX);
        for b in boxes(&query.region, columns.row_bytes, target) {
            if left == 0 {
                break;
            }
            let q = Query { region: b, ..query.clone() };
            let answer = state.session.run(&reader, &q)?;
            if answer.count == 0 && sent_any {
                continue;
            }
            let mut batch = columns.batch(&answer)?;
            if batch.num_rows() as u64 > left {
                batch = batch.slice(0, left as usize);
            }
            left -= batch.num_rows() as u64;
            sent_any = true;
            if !send(enc.write(&batch)?) {
                return Ok(());
            }
        }
        send(enc.finish()?);
        Ok(())
    });
    let mut r = Response::new(body);
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(format.content_type()));
    encoding.label(&mut r);
    Ok(r)
}

/// Part `i` of `n` of `region`: a range of its first dimension holding about 1/n of the
/// estimated result. Along the record dimension each slab's estimate (the planner's) is
/// spread over its records; elsewhere every index weighs the same. Returns the region and
/// the part's share of the estimate.
fn part_region(
    m: &strata_core::Manifest,
    plan: &strata_core::planner::QueryPlan,
    dims: &[String],
    region: &[DimSelection],
    n: u64,
    i: u64,
) -> (Vec<DimSelection>, f64) {
    let Some(&s0) = region.first() else { return (region.to_vec(), 1.0) };
    let count = s0.count() as usize;
    let mut weight = vec![0f64; count];
    if m.record_dim.as_deref() == dims.first().map(String::as_str) {
        for sp in &plan.slabs {
            let Some([start, len]) = m.slabs.get(sp.slab).and_then(|s| s.records) else { continue };
            let ks: Vec<usize> =
                (0..count).filter(|&k| (start..start + len).contains(&(s0.start + k as u64 * s0.step))).collect();
            for &k in &ks {
                weight[k] += sp.selected / ks.len() as f64;
            }
        }
    }
    if weight.iter().sum::<f64>() <= 0.0 {
        weight.iter_mut().for_each(|w| *w = 1.0);
    }
    let mut prefix = vec![0f64; count + 1];
    for k in 0..count {
        prefix[k + 1] = prefix[k] + weight[k];
    }
    let total = prefix[count];
    let cut = |j: u64| -> usize {
        if j == 0 {
            0
        } else if j >= n {
            count
        } else {
            prefix.iter().position(|&p| p >= total * j as f64 / n as f64).unwrap_or(count).min(count)
        }
    };
    let (lo, hi) = (cut(i), cut(i + 1).max(cut(i)));
    let mut out = region.to_vec();
    let start = s0.start + lo as u64 * s0.step;
    out[0] = DimSelection {
        start,
        stop: if hi > lo { s0.start + (hi as u64 - 1) * s0.step + 1 } else { start },
        step: s0.step,
    };
    (out, if total > 0.0 { (prefix[hi] - prefix[lo]) / total } else { 0.0 })
}

/// How the rows of a positions or points answer become columns: one per dimension (the
/// 1-D coordinate's value when there is one, else the index), then, for points, the
/// auxiliary coordinates the constrained variable's CF `coordinates` names (2-D lat/lon, as
/// local points and SQL carry them), then the returned variables.
struct Columns {
    schema: SchemaRef,
    shape: Vec<u64>,
    /// Each dimension's column along it (SQL's: coordinates, CF times as timestamps, or
    /// the index), picked per point.
    coords: Vec<ArrayRef>,
    /// Each auxiliary coordinate and its stored values (NULL where missing).
    aux: Vec<Arc<AuxValues>>,
    variables: Vec<(DType, Vec<f64>)>,
    row_bytes: usize,
}

impl Columns {
    fn new(
        state: &State,
        name: &str,
        reader: &StoreReader,
        query: &Query,
        dims: &[String],
        shape: &[u64],
    ) -> Result<Columns, ApiError> {
        let m = reader.manifest();
        let mut fields = Vec::new();
        let mut coords = Vec::new();
        for (d, dim) in dims.iter().enumerate() {
            let (field, column) = strata_sql::table::coordinate_column(reader, dim, shape[d])?;
            fields.push(field.with_nullable(false));
            coords.push(column);
        }
        let mut aux = Vec::new();
        if query.output == Output::Points {
            let names = query.predicate.variable_names();
            let (_, driver) = m.variable(names.first().copied().unwrap_or_default())?;
            for coord in area::auxiliary_coordinates(m, driver) {
                let (_, v) = m.variable(&coord)?;
                let Some(t) = strata_sql::table::arrow_type(v.dtype) else { continue };
                if query.variables.contains(&coord) {
                    continue;
                }
                aux.push(state.aux_coords.get(name, reader, dims, &coord)?);
                fields.push(Field::new(&coord, t, true));
            }
        }
        let mut variables = Vec::new();
        let mut row_bytes = 8 * (dims.len() + aux.len());
        for name in &query.variables {
            let (_, v) = m.variable(name)?;
            let t = strata_sql::table::arrow_type(v.dtype)
                .ok_or_else(|| ApiError::bad_request(format!("'{name}' is text: points carry numbers only")))?;
            fields.push(Field::new(name, t, true));
            variables.push((v.dtype, v.missing_values()));
            row_bytes += v.dtype.size();
        }
        Ok(Columns { schema: Arc::new(Schema::new(fields)), shape: shape.to_vec(), coords, aux, variables, row_bytes })
    }

    fn batch(&self, answer: &strata_core::Answer) -> Result<RecordBatch, ApiError> {
        let flat = &answer.selection.flat;
        let failed = |e: arrow::error::ArrowError| ApiError::internal(format!("a result batch: {e}"));
        let mut arrays: Vec<ArrayRef> = Vec::new();
        for (d, column) in self.coords.iter().enumerate() {
            let at = UInt64Array::from(strata_core::points::axis_indices(d, &self.shape, flat));
            arrays.push(arrow::compute::take(column.as_ref(), &at, None).map_err(failed)?);
        }
        for aux in &self.aux {
            arrays.push(aux.at(&self.shape, flat)?);
        }
        for ((dtype, missing), raw) in self.variables.iter().zip(&answer.columns) {
            arrays.push(strata_sql::column_array(*dtype, raw.clone(), Some(missing))?);
        }
        RecordBatch::try_new(self.schema.clone(), arrays).map_err(failed)
    }
}

/// SQL as a request carries it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SqlRequest {
    /// One query; the dataset is the table named in GET /api/schema's `sql_table`.
    pub q: String,
    pub format: Option<String>,
}

/// Read-only SQL (GET with URL parameters, or POST with a JSON body).
pub(crate) async fn sql(
    AxState(state): AxState<State>,
    Path(name): Path<String>,
    headers: HeaderMap,
    Ask(req): Ask<SqlRequest>,
) -> Result<Response, ApiError> {
    let encoding = Encoding::negotiate(&headers);
    let format = Format::parse(req.format.as_deref())?;
    // The first batch is computed before the status is sent: an error of the query's
    // execution (`count(*) % 0`: division by zero) is then a 400, not a 200 whose body
    // breaks off (found by `make fuzz-server`). Later batches can only break off the body.
    let (first, stream) = blocking({
        let state = state.clone();
        move || {
            let session = state.sql_session(&name)?;
            let mut stream = session.execute(&req.q)?;
            let first = stream.next().transpose()?;
            Ok((first, stream))
        }
    })
    .await?;
    let schema = stream.schema();
    let body = streamed_encoded(encoding, crate::pieces::wants_trailers(&headers), move |send| {
        let mut enc = Encoder::new(format, &schema)?;
        for batch in first.into_iter().map(Ok).chain(stream) {
            let batch = batch?;
            if !send(enc.write(&batch)?) {
                return Ok(());
            }
        }
        send(enc.finish()?);
        Ok(())
    });
    let mut r = Response::new(body);
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(format.content_type()));
    encoding.label(&mut r);
    Ok(r)
}

/// A dense subset as a NetCDF file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SubsetRequest {
    /// Variables (default: every array); their 1-D coordinates come along unless
    /// `coords=false`.
    pub vars: Option<Names>,
    pub isel: Option<String>,
    /// Labels on 1-D coordinates, as the query's `sel`.
    pub sel: Option<String>,
    pub coords: Option<bool>,
    /// Cut the file into `parts` equal byte ranges and answer range `part` (from 0).
    pub parts: Option<u64>,
    pub part: Option<u64>,
    /// Answer a [`FetchEstimate`] (JSON) instead of the file.
    pub estimate: Option<bool>,
}

/// `bytes=a-b`, `bytes=a-` or `bytes=-n` of a file of `total` bytes, as `[lo, hi)`.
fn byte_range(header: &str, total: u64) -> Result<(u64, u64), ApiError> {
    let bad = || {
        ApiError::new(
            StatusCode::RANGE_NOT_SATISFIABLE,
            "range",
            format!("cannot serve range '{header}' of {total} bytes"),
        )
    };
    let spec = header.trim().strip_prefix("bytes=").ok_or_else(bad)?;
    if spec.contains(',') {
        return Err(bad());
    }
    let (a, b) = spec.split_once('-').ok_or_else(bad)?;
    let (lo, hi) = match (a.trim(), b.trim()) {
        ("", n) => {
            let n: u64 = n.parse().map_err(|_| bad())?;
            (total.saturating_sub(n), total)
        }
        (a, "") => (a.parse().map_err(|_| bad())?, total),
        (a, b) => (a.parse().map_err(|_| bad())?, b.parse::<u64>().map_err(|_| bad())?.saturating_add(1).min(total)),
    };
    if lo >= hi {
        return Err(bad());
    }
    Ok((lo, hi))
}

pub(crate) async fn subset(
    AxState(state): AxState<State>,
    Path(name): Path<String>,
    headers: HeaderMap,
    Params(req): Params<SubsetRequest>,
) -> Result<Response, ApiError> {
    let (parts, part) = (req.parts, req.part);
    let wants_trailers = crate::pieces::wants_trailers(&headers);
    let (reader, layout, estimate) = blocking({
        let state = state.clone();
        move || {
            let reader = state.catalog.reader(&name)?;
            let layout = subset_layout(&reader, &req)?;
            let mut estimate = None;
            if req.estimate == Some(true) {
                let mut seconds = 0.0;
                for v in &layout.vars {
                    seconds += state.session.read_seconds(&reader, &v.name, &v.sel)?;
                }
                let target = state.config.limits.piece_bytes as u64;
                let pieces = layout.total.div_ceil(target.max(1));
                let dataset = reader.manifest().download_bytes();
                estimate = Some(FetchEstimate::new(layout.total, true, dataset, seconds, pieces));
            }
            Ok((reader, layout, estimate))
        }
    })
    .await?;
    if let Some(e) = estimate {
        return Ok(Json(e).into_response());
    }
    let total = layout.total;
    if total > state.config.limits.max_result_bytes {
        return Err(ApiError::too_large(format!(
            "the subset is {total} bytes; this server answers at most {} (select less, or fetch it in parts: \
             parts=N&part=i or Range requests, each within the limit)",
            state.config.limits.max_result_bytes
        )));
    }
    let (lo, hi, status) = match (headers.get(header::RANGE).and_then(|h| h.to_str().ok()), parts, part) {
        (Some(r), _, _) => {
            let (lo, hi) = byte_range(r, total)?;
            (lo, hi, StatusCode::PARTIAL_CONTENT)
        }
        (None, Some(n), Some(i)) if n > 0 && i < n => {
            // In u128: total * (i + 1) overflows u64 for a large part number.
            let at = |k: u64| (u128::from(total) * u128::from(k) / u128::from(n)) as u64;
            let (lo, hi) = (at(i), at(i + 1));
            if lo >= hi {
                return Err(ApiError::new(
                    StatusCode::RANGE_NOT_SATISFIABLE,
                    "range",
                    format!("part {i} of {n} is empty: the file has {total} bytes, so use at most {total} parts"),
                ));
            }
            (lo, hi, StatusCode::PARTIAL_CONTENT)
        }
        (None, None, None) => (0, total, StatusCode::OK),
        _ => return Err(ApiError::bad_request("parts=N&part=i needs both, with 0 <= i < N")),
    };
    let target = state.config.limits.piece_bytes;
    let body = streamed(wants_trailers, move |send| layout.produce(&reader, lo, hi, target, send));
    let mut r = Response::new(body);
    *r.status_mut() = status;
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/x-netcdf"));
    h.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    // A client asking for trailers gets the digest (chunked); others get the exact length.
    if !wants_trailers {
        h.insert(header::CONTENT_LENGTH, HeaderValue::from(hi - lo));
    }
    if status == StatusCode::PARTIAL_CONTENT {
        if let Ok(v) = HeaderValue::from_str(&format!("bytes {lo}-{}/{total}", hi - 1)) {
            h.insert(header::CONTENT_RANGE, v);
        }
    }
    Ok(r)
}

fn subset_layout(reader: &StoreReader, req: &SubsetRequest) -> Result<crate::netcdf::Layout, ApiError> {
    let m = reader.manifest();
    let items = selection_items(reader, req.isel.as_deref(), req.sel.as_deref())?;
    if let Some(x) = items.iter().find(|x| m.dim(&x.dim).is_none()) {
        return Err(ApiError::bad_request(format!("isel names '{}', which is not a dimension of this dataset", x.dim)));
    }
    let arrays = |v: &&strata_core::manifest::Variable| v.chunking.is_some() || v.inline_strings.is_some();
    let mut names: Vec<String> = match req.vars.clone().map(Names::into_vec) {
        Some(v) if !v.is_empty() => v,
        _ => m.variables.iter().filter(arrays).map(|v| v.name.clone()).collect(),
    };
    if req.coords.unwrap_or(true) {
        let mut extra = Vec::new();
        for n in &names {
            let (_, v) = m.variable(n)?;
            for d in &v.dims {
                if m.coordinate(d).is_some() && !names.contains(d) && !extra.contains(d) {
                    extra.push(d.clone());
                }
            }
        }
        names.extend(extra);
    }
    let mut picked = Vec::new();
    for n in names {
        let (_, v) = m.variable(&n)?;
        let sel = apply_isel(&items, &v.dims, &m.shape(v))?;
        picked.push((n, sel));
    }
    crate::netcdf::Layout::new(m, picked)
}

/// The web page: catalog, schema, histograms, a quick look and a query form.
pub(crate) async fn page() -> Response {
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], include_str!("page.html")).into_response()
}

/// A quick look at a 2-D slice.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct QuicklookRequest {
    pub var: String,
    /// One index on every dimension but two: `time=0` (the others whole, strided to fit).
    pub isel: Option<String>,
}

pub(crate) async fn quicklook(
    AxState(state): AxState<State>,
    Path(name): Path<String>,
    Params(req): Params<QuicklookRequest>,
) -> Result<Response, ApiError> {
    let png = blocking(move || {
        let reader = state.catalog.reader(&name)?;
        quicklook_png(&reader, &req.var, req.isel.as_deref())
    })
    .await?;
    Ok(([(header::CONTENT_TYPE, "image/png")], png).into_response())
}

/// The quick look of `var` under `isel` text (the server's route and `strata quicklook`).
pub(crate) fn quicklook_png(reader: &StoreReader, var: &str, isel: Option<&str>) -> Result<Vec<u8>, ApiError> {
    let m = reader.manifest();
    let (_, v) = m.variable(var)?;
    let items = isel_items(isel)?;
    if let Some(x) = items.iter().find(|x| !v.dims.contains(&x.dim)) {
        return Err(ApiError::bad_request(format!("isel names '{}', not a dimension of '{var}' {:?}", x.dim, v.dims)));
    }
    let sel = apply_isel(&items, &v.dims, &m.shape(v))?;
    crate::quicklook::render(reader, var, &sel)
}
