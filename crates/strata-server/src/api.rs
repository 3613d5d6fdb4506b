//! The JSON and Arrow routes: health, catalog, schema, the engine's query and SQL.

use crate::encode::{Encoder, Format};
use crate::pieces::{boxes, streamed};
use crate::{ApiError, State};
use arrow::array::{ArrayRef, Float64Array, UInt64Array};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use axum::extract::{Path, Query as QueryParams, State as AxState};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::json;
use std::sync::Arc;
use strata_core::session::parse_method;
use strata_core::{DType, DimSelection, Output, Query, StoreReader};

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
    Json(json!({"status": "ok", "datasets": n, "server": concat!("strata/", env!("CARGO_PKG_VERSION"))}))
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
    pub level: Option<usize>,
    /// auto (default), index or scan.
    pub method: Option<String>,
    /// Compare packed variables' stored values rather than physical ones.
    pub raw: Option<bool>,
    /// arrow (default), csv or json, for positions and points.
    pub format: Option<String>,
}

pub(crate) async fn query_get(
    state: AxState<State>,
    name: Path<String>,
    QueryParams(req): QueryParams<QueryRequest>,
) -> Result<Response, ApiError> {
    run_query(state, name, req).await
}

pub(crate) async fn query_post(
    state: AxState<State>,
    name: Path<String>,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    let req: QueryRequest = serde_json::from_slice(&body)
        .map_err(|e| ApiError::bad_request(format!("the query is not valid JSON: {e}")))?;
    run_query(state, name, req).await
}

/// Region from `isel` text over `dims` of `shape`.
fn region(isel: Option<&str>, dims: &[String], shape: &[u64]) -> Result<Vec<DimSelection>, ApiError> {
    let mut sel: Vec<DimSelection> = shape.iter().map(|&n| DimSelection { start: 0, stop: n, step: 1 }).collect();
    let Some(text) = isel.filter(|t| !t.trim().is_empty()) else { return Ok(sel) };
    for item in text.split(',') {
        let (dim, range) = item.split_once('=').ok_or_else(|| {
            ApiError::bad_request(format!("isel item '{item}' is not dim=start:stop[:step] or dim=i"))
        })?;
        let dim = dim.trim();
        let d = dims.iter().position(|x| x == dim).ok_or_else(|| {
            ApiError::bad_request(format!("isel names '{dim}', not a dimension of the constrained variables {dims:?}"))
        })?;
        let n = shape[d];
        let nums: Vec<&str> = range.split(':').map(str::trim).collect();
        let parse = |s: &str, default: u64| -> Result<u64, ApiError> {
            if s.is_empty() {
                return Ok(default);
            }
            s.parse::<u64>().map_err(|_| ApiError::bad_request(format!("isel '{item}': '{s}' is not an index")))
        };
        let s = match nums[..] {
            [i] => {
                let i = parse(i, 0)?;
                DimSelection { start: i, stop: i + 1, step: 1 }
            }
            [a, b] => DimSelection { start: parse(a, 0)?, stop: parse(b, n)?.min(n), step: 1 },
            [a, b, c] => DimSelection { start: parse(a, 0)?, stop: parse(b, n)?.min(n), step: parse(c, 1)? },
            _ => return Err(ApiError::bad_request(format!("isel item '{item}' has too many parts"))),
        };
        if s.step == 0 || s.start >= n || s.start > s.stop {
            return Err(ApiError::bad_request(format!("isel '{item}' is out of range for '{dim}' of length {n}")));
        }
        sel[d] = s;
    }
    Ok(sel)
}

/// The engine's query for a request, with the dimensions and shape it ranges over.
fn engine_query(reader: &StoreReader, req: &QueryRequest) -> Result<(Query, Vec<String>, Vec<u64>), ApiError> {
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
    let query = Query {
        region: region(req.isel.as_deref(), &dims, &shape)?,
        predicate,
        output,
        variables,
        level: req.level,
        method: parse_method(req.method.as_deref().unwrap_or("auto"))?,
        mask: None,
        raw: req.raw.unwrap_or(false),
    };
    Ok((query, dims, shape))
}

async fn run_query(
    AxState(state): AxState<State>,
    Path(name): Path<String>,
    req: QueryRequest,
) -> Result<Response, ApiError> {
    let format = Format::parse(req.format.as_deref())?;
    let (reader, query, dims, shape) = blocking({
        let state = state.clone();
        move || {
            let reader = state.catalog.reader(&name)?;
            let (query, dims, shape) = engine_query(&reader, &req)?;
            Ok((reader, query, dims, shape))
        }
    })
    .await?;
    if query.output == Output::Count {
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
    let columns = Columns::new(&reader, &query, &dims, &shape)?;
    let estimate = blocking({
        let (state, reader, query) = (state.clone(), reader.clone(), query.clone());
        move || Ok(state.session.plan(&reader, &query)?.selected())
    })
    .await?;
    let bytes = estimate * columns.row_bytes as f64;
    if bytes > state.config.limits.max_result_bytes as f64 {
        return Err(ApiError::too_large(format!(
            "the query selects about {estimate:.0} elements ({bytes:.0} bytes); this server answers at most {} bytes \
             (narrow the region or the constraint, or ask for the count)",
            state.config.limits.max_result_bytes
        )));
    }
    let target = state.config.limits.piece_bytes;
    let body = streamed(move |send| {
        let mut enc = Encoder::new(format, &columns.schema)?;
        let mut sent_any = false;
        for b in boxes(&query.region, columns.row_bytes, target) {
            let q = Query { region: b, ..query.clone() };
            let answer = state.session.run(&reader, &q)?;
            if answer.count == 0 && sent_any {
                continue;
            }
            let batch = columns.batch(&answer)?;
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
    Ok(r)
}

/// How the rows of a positions or points answer become columns: one per dimension (the
/// 1-D coordinate's value when there is one, else the index), then the returned variables.
struct Columns {
    schema: SchemaRef,
    shape: Vec<u64>,
    coords: Vec<Option<Vec<f64>>>,
    variables: Vec<(DType, Vec<f64>)>,
    row_bytes: usize,
}

impl Columns {
    fn new(reader: &StoreReader, query: &Query, dims: &[String], shape: &[u64]) -> Result<Columns, ApiError> {
        let m = reader.manifest();
        let mut fields = Vec::new();
        let mut coords = Vec::new();
        for (d, dim) in dims.iter().enumerate() {
            let coord = m.variable(dim).ok().map(|(_, v)| v).filter(|v| {
                v.dims.len() == 1 && v.dims[0] == *dim && v.chunking.is_some() && v.dtype.num_type().is_some()
            });
            match coord {
                Some(v) => {
                    let mut buf = vec![0u8; shape[d] as usize * v.dtype.size()];
                    reader.read_into(dim, &[DimSelection { start: 0, stop: shape[d], step: 1 }], &mut buf)?;
                    coords.push(Some(v.dtype.to_f64s(&buf)));
                    fields.push(Field::new(dim, DataType::Float64, false));
                }
                None => {
                    coords.push(None);
                    fields.push(Field::new(dim, DataType::UInt64, false));
                }
            }
        }
        let mut variables = Vec::new();
        let mut row_bytes = 8 * dims.len();
        for name in &query.variables {
            let (_, v) = m.variable(name)?;
            let t = strata_sql::table::arrow_type(v.dtype)
                .ok_or_else(|| ApiError::bad_request(format!("'{name}' is text: points carry numbers only")))?;
            fields.push(Field::new(name, t, true));
            variables.push((v.dtype, v.missing_values()));
            row_bytes += v.dtype.size();
        }
        Ok(Columns { schema: Arc::new(Schema::new(fields)), shape: shape.to_vec(), coords, variables, row_bytes })
    }

    fn batch(&self, answer: &strata_core::Answer) -> Result<RecordBatch, ApiError> {
        let flat = &answer.selection.flat;
        let mut arrays: Vec<ArrayRef> = Vec::new();
        for (d, coord) in self.coords.iter().enumerate() {
            arrays.push(match coord {
                Some(values) => Arc::new(Float64Array::from(strata_core::points::pick(values, d, &self.shape, flat))),
                None => Arc::new(UInt64Array::from(strata_core::points::axis_indices(d, &self.shape, flat))),
            });
        }
        for ((dtype, missing), raw) in self.variables.iter().zip(&answer.columns) {
            arrays.push(strata_sql::column_array(*dtype, raw.clone(), missing)?);
        }
        RecordBatch::try_new(self.schema.clone(), arrays)
            .map_err(|e| ApiError::internal(format!("a result batch: {e}")))
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

pub(crate) async fn sql_get(
    state: AxState<State>,
    name: Path<String>,
    QueryParams(req): QueryParams<SqlRequest>,
) -> Result<Response, ApiError> {
    run_sql(state, name, req).await
}

pub(crate) async fn sql_post(
    state: AxState<State>,
    name: Path<String>,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    let req: SqlRequest = serde_json::from_slice(&body)
        .map_err(|e| ApiError::bad_request(format!("expected {{\"q\": \"SELECT ...\"}}: {e}")))?;
    run_sql(state, name, req).await
}

async fn run_sql(
    AxState(state): AxState<State>,
    Path(name): Path<String>,
    req: SqlRequest,
) -> Result<Response, ApiError> {
    let format = Format::parse(req.format.as_deref())?;
    let stream = blocking({
        let state = state.clone();
        move || {
            let session = state.sql_session(&name)?;
            Ok(session.execute(&req.q)?)
        }
    })
    .await?;
    let schema = stream.schema();
    let body = streamed(move |send| {
        let mut enc = Encoder::new(format, &schema)?;
        for batch in stream {
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
    *r.status_mut() = StatusCode::OK;
    Ok(r)
}
