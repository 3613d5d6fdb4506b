//! OPeNDAP DAP2: `.dds`, `.das`, `.dods` and `.ascii` of every dataset, with constraint
//! expressions, so netCDF's DAP client (netCDF4-python, `ncdump`), pydap and other DAP2
//! clients subset at the server.
//!
//! Every variable is served as a DAP2 array with named dimensions (not as a grid):
//! coordinate variables are arrays of their own, as in the NetCDF data model; text
//! variables are `String` arrays (`strings.rs`).
//!
//! A value selection (`?sst&sst>25`) applies to every projected array on the same
//! dimensions as the compared variables: the response keeps the projected hyperslab and
//! writes the variable's `_FillValue` (else `missing_value`, else NaN for floats) where the
//! selection does not hold. Arrays on other dimensions are returned whole: netCDF's client
//! fetches each variable on its own with the selection appended, coordinates included.
//! Which elements hold is answered by the engine's query (from the value index where it
//! can), piece by piece.
//!
//! A comparison of an auxiliary coordinate (a 2-D latitude that a variable's CF
//! `coordinates` names: `?siconc&latitude>=60`) is an area instead: it applies to every
//! projected array that coordinate spans some dimensions of — the engine's area mask, as
//! `area=` at the query API and `sel` locally — and to the coordinate itself.

pub(crate) mod strings;
mod text;
mod types;

use crate::pieces::{boxes, produced_now, streamed, LIGHT_DECODE_BYTES, SMALL_ANSWER_BYTES};
use crate::{ApiError, State};
use axum::body::Body;
use axum::extract::{Path, RawQuery, State as AxState};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use std::sync::Arc;
use strata_core::area::{self, Area, CoordTest};
use strata_core::grid::position_in;
use strata_core::{DType, DimSelection, Manifest, Output, Query, StoreReader};
use strings::Text;
use text::Shape;
use types::DapType;

/// One array of a response: what is read and how it is described.
#[derive(Debug, Clone)]
struct Part {
    name: String,
    dtype: DType,
    sel: Vec<DimSelection>,
    shape: Shape,
    /// The selection's constraint and the fill written where it does not hold.
    filter: Option<(Arc<strata_core::query::Predicate>, Vec<u8>)>,
    /// The area the selection's auxiliary coordinates pick, with the fill written outside it.
    area: Option<(Arc<Area>, Vec<u8>)>,
    /// A text variable's strings (`sel` covers a char variable's characters whole).
    text: Option<Text>,
    /// The most bytes its values take on the wire.
    wire_bound: u64,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Dds,
    Das,
    Dods,
    Ascii,
    Html,
}

/// The line between a `.dods` response's DDS and its data. The DAP 2.0 standard (ESE-RFC-004
/// 1.2, section 7.2.3) has `Data:` and a line feed, and pydap's client splits on exactly
/// that. netCDF's DAP2 library (oc: netCDF4-python, `ncdump`) accepts it, and the form the
/// standard's earlier versions gave, with a carriage return, too; but it looks for that one
/// first, through the whole response: on a 4 MB answer the failed search took a third of
/// the client's time. Its requests name it (`User-Agent: oc4.10.1`) and get the form it finds
/// at once.
#[derive(Debug, Clone, Copy, PartialEq)]
enum DataMark {
    Lf,
    CrLf,
}

impl DataMark {
    fn for_client(headers: &HeaderMap) -> Self {
        let agent = headers.get(header::USER_AGENT).and_then(|v| v.to_str().ok()).unwrap_or("");
        let oc = agent.strip_prefix("oc").is_some_and(|v| v.starts_with(|c: char| c.is_ascii_digit()));
        if oc {
            Self::CrLf
        } else {
            Self::Lf
        }
    }

    fn bytes(self) -> &'static [u8] {
        match self {
            Self::Lf => b"Data:\n",
            Self::CrLf => b"Data:\r\n",
        }
    }
}

pub(crate) async fn handle(
    AxState(state): AxState<State>,
    Path(path): Path<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Response {
    let ask = Asked { mark: DataMark::for_client(&headers), trailers: crate::pieces::wants_trailers(&headers) };
    match answer(state, &path, query.as_deref().unwrap_or(""), ask).await {
        Ok(r) => r,
        Err(e) => dap_error(&e),
    }
}

fn dap_error(e: &ApiError) -> Response {
    let mut r = (e.status, text::error(e.status.as_u16(), &e.message)).into_response();
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    h.insert("content-description", HeaderValue::from_static("dods-error"));
    r
}

/// What the request's headers ask of a binary answer.
#[derive(Debug, Clone, Copy)]
struct Asked {
    mark: DataMark,
    /// `TE: trailers`: the body ends with its digest, so it goes chunked, without a length.
    trailers: bool,
}

async fn answer(state: State, path: &str, query: &str, ask: Asked) -> Result<Response, ApiError> {
    let (name, kind) = match path.rsplit_once('.') {
        Some((n, "dds")) => (n, Kind::Dds),
        Some((n, "das")) => (n, Kind::Das),
        Some((n, "dods")) => (n, Kind::Dods),
        Some((n, "ascii" | "asc")) => (n, Kind::Ascii),
        Some((n, "html")) => (n, Kind::Html),
        _ => {
            return Err(ApiError::not_found(format!(
                "'{path}': ask for NAME.dds, NAME.das, NAME.dods, NAME.ascii or NAME.html (GET /api/datasets lists \
                 the names)"
            )))
        }
    };
    let reader = match state.catalog.open_reader(name)? {
        Some(r) => r,
        None => {
            let state = state.clone();
            let name = name.to_string();
            tokio::task::spawn_blocking(move || state.catalog.reader(&name)).await.map_err(ApiError::internal)??
        }
    };
    let m = reader.manifest();
    let dataset = name.rsplit('/').next().unwrap_or(name);
    let served = served_variables(m);
    if kind == Kind::Das {
        return Ok(text_response(text::das(m, &served), "dods-das"));
    }
    if kind == Kind::Html {
        let mut r = (StatusCode::OK, text::html_form(dataset, m, &served)).into_response();
        r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8"));
        r.headers_mut().insert("content-description", HeaderValue::from_static("dods-form"));
        server_headers(&mut r);
        return Ok(r);
    }
    let ce = strata_dap::parse(query).map_err(ApiError::bad_request)?;
    // Projections alone are planned here (the manifest is in memory); selections may read
    // coordinates or data, off this thread.
    let parts = if ce.selections.is_empty() {
        plan(&state, name, &reader, &served, &ce)?
    } else {
        let reader = reader.clone();
        let (state, name) = (state.clone(), name.to_string());
        tokio::task::spawn_blocking(move || plan(&state, &name, &reader, &served, &ce))
            .await
            .map_err(ApiError::internal)??
    };
    let dds = text::dds(dataset, &parts.iter().map(|p| p.shape.clone()).collect::<Vec<_>>());
    match kind {
        Kind::Dds => Ok(text_response(dds, "dods-dds")),
        Kind::Dods | Kind::Ascii => {
            let bytes: u64 = parts.iter().map(|p| p.wire_bound).sum();
            if bytes > state.config.limits.max_result_bytes {
                return Err(ApiError::too_large(format!(
                    "the constraint selects {bytes} bytes; this server answers at most {} (select less, or ask \
                     for it in parts)",
                    state.config.limits.max_result_bytes
                )));
            }
            // Known before the first byte: sent as Content-Length, so a client sees an
            // answer cut short by a failed read as a short body (as subsets are). Strings
            // are as long as they are: an answer with some goes chunked.
            let length = dods_length(&dds, ask.mark, &parts);
            let body = if kind == Kind::Dods {
                dods(state, reader.clone(), parts, dds, ask, length)?
            } else {
                ascii(state, reader.clone(), parts, dds, ask.trailers)
            };
            let mut r = Response::new(body);
            let h = r.headers_mut();
            if kind == Kind::Dods {
                h.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/octet-stream"));
                h.insert("content-description", HeaderValue::from_static("dods-data"));
                // The body's separator depends on the client (DataMark).
                h.insert(header::VARY, HeaderValue::from_static("user-agent"));
                if let Some(length) = length.filter(|_| !ask.trailers) {
                    h.insert(header::CONTENT_LENGTH, HeaderValue::from(length));
                }
            } else {
                h.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
                h.insert("content-description", HeaderValue::from_static("dods-ascii"));
            }
            server_headers(&mut r);
            Ok(r)
        }
        Kind::Das | Kind::Html => unreachable_das(),
    }
}

fn unreachable_das() -> Result<Response, ApiError> {
    Err(ApiError::internal("DAS and HTML are answered above"))
}

fn server_headers(r: &mut Response) {
    let h = r.headers_mut();
    h.insert("xdods-server", HeaderValue::from_static(concat!("strata/", env!("CARGO_PKG_VERSION"))));
    h.insert("xopendap-server", HeaderValue::from_static(concat!("strata/", env!("CARGO_PKG_VERSION"))));
    h.insert("xdap", HeaderValue::from_static("2.0"));
}

fn text_response(body: String, description: &'static str) -> Response {
    let mut r = (StatusCode::OK, body).into_response();
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    r.headers_mut().insert("content-description", HeaderValue::from_static(description));
    server_headers(&mut r);
    r
}

/// The variables DAP2 carries (all with data), in manifest order.
fn served_variables(m: &Manifest) -> Vec<String> {
    m.variables
        .iter()
        .filter(|v| v.chunking.is_some() || Text::of(m, v) == Some(Text::Inline))
        .map(|v| v.name.clone())
        .collect()
}

/// The fill written where a selection does not hold, as one stored element.
fn fill_of(m: &Manifest, name: &str) -> Result<Vec<u8>, ApiError> {
    let (_, var) = m.variable(name)?;
    let attr = |key: &str| var.attrs.iter().find(|a| a.name == key).and_then(|a| a.value.as_f64s().first().copied());
    let fill = attr("_FillValue").or_else(|| attr("missing_value")).or(var.dtype.is_float().then_some(f64::NAN));
    fill.and_then(|f| types::element(var.dtype, f)).ok_or_else(|| {
        ApiError::bad_request(format!(
            "a selection cannot mark the elements of '{name}' where it does not hold: it is an integer variable \
             with no _FillValue or missing_value"
        ))
    })
}

/// The auxiliary coordinates of the dataset's variables (see `area::auxiliary_coordinates`).
fn auxiliary(m: &Manifest, served: &[String]) -> Vec<String> {
    let mut names: Vec<String> =
        served.iter().filter_map(|n| m.variable(n).ok()).flat_map(|(_, v)| area::auxiliary_coordinates(m, v)).collect();
    names.sort();
    names.dedup();
    names
}

/// An auxiliary coordinate's comparison as an area test on its physical values (fill
/// values and NaN are in no area); a strict bound is the next number past it.
fn coord_test(c: &strata_dap::Clause) -> Result<CoordTest, ApiError> {
    let v = c.value;
    let (lo, hi) = match c.op {
        ">=" => (Some(v), None),
        ">" => (Some(v.next_up()), None),
        "<=" => (None, Some(v)),
        "<" => (None, Some(v.next_down())),
        "=" => (Some(v), Some(v)),
        op => {
            return Err(ApiError::bad_request(format!(
                "'{}' is an auxiliary coordinate: its selection is an area, compared with <, <=, >, >= or =, not {op}",
                c.name
            )))
        }
    };
    Ok(CoordTest::Range { lo, hi })
}

fn plan(
    state: &State,
    name: &str,
    reader: &StoreReader,
    served: &[String],
    ce: &strata_dap::Constraint,
) -> Result<Vec<Part>, ApiError> {
    let m = reader.manifest();
    let aux = auxiliary(m, served);
    let (area_clauses, value_clauses): (Vec<&strata_dap::Clause>, Vec<&strata_dap::Clause>) =
        ce.selections.iter().partition(|c| aux.contains(&c.name));
    let area_tests: Vec<(String, CoordTest)> =
        area_clauses.iter().map(|c| Ok((c.name.clone(), coord_test(c)?))).collect::<Result<_, ApiError>>()?;
    let projections: Vec<strata_dap::Projection> = if ce.projections.is_empty() {
        served.iter().map(|n| strata_dap::Projection { name: n.clone(), slabs: vec![] }).collect()
    } else {
        ce.projections.clone()
    };
    let predicate = if value_clauses.is_empty() {
        None
    } else {
        let text: Vec<String> = value_clauses.iter().map(|c| c.engine_text()).collect();
        Some(Arc::new(strata_core::constraint::parse(&text.join(" and "))?))
    };
    let filter_dims = match &value_clauses.first() {
        Some(c) => {
            let (_, v) = m.variable(&c.name).map_err(|_| {
                ApiError::bad_request(format!("the selection names '{}', which this dataset does not have", c.name))
            })?;
            for other in &value_clauses {
                let (_, o) = m.variable(&other.name).map_err(|_| {
                    ApiError::bad_request(format!(
                        "the selection names '{}', which this dataset does not have",
                        other.name
                    ))
                })?;
                if Text::of(m, o).is_some() {
                    return Err(ApiError::bad_request(format!(
                        "the selection compares '{}', a text variable: selections compare numbers",
                        other.name
                    )));
                }
                if o.dims != v.dims {
                    return Err(ApiError::bad_request(format!(
                        "the selection compares '{}' {:?} and '{}' {:?}: they must have the same dimensions",
                        c.name, v.dims, other.name, o.dims
                    )));
                }
            }
            Some(v.dims.clone())
        }
        None => None,
    };
    let mut parts = Vec::new();
    for p in projections {
        if !served.contains(&p.name) {
            return Err(ApiError::not_found(format!("no variable '{}' in this dataset", p.name)));
        }
        let (_, var) = m.variable(&p.name)?;
        let shape = m.shape(var);
        let text = Text::of(m, var);
        // The dimensions a client sees, and hyperslabs for: a char variable's characters
        // are its strings, not a dimension.
        let rank = text.map_or(shape.len(), |t| t.dap_rank(shape.len()));
        if !p.slabs.is_empty() && p.slabs.len() != rank {
            return Err(ApiError::bad_request(format!(
                "'{}' has {rank} dimensions, the constraint gives {} hyperslabs",
                p.name,
                p.slabs.len()
            )));
        }
        let mut sel = Vec::with_capacity(shape.len());
        for (d, &n) in shape.iter().enumerate() {
            let s = match p.slabs.get(d) {
                Some(h) => {
                    if h.stop >= n {
                        return Err(ApiError::bad_request(format!(
                            "'{}': index {} is out of range for dimension '{}' of length {n}",
                            p.name, h.stop, var.dims[d]
                        )));
                    }
                    DimSelection { start: h.start, stop: h.stop + 1, step: h.stride }
                }
                None => DimSelection { start: 0, stop: n, step: 1 },
            };
            sel.push(s);
        }
        let dap = DapType::of_variable(var);
        let dims: Vec<(String, u64)> =
            var.dims.iter().zip(&sel).take(rank).map(|(d, s)| (d.clone(), s.count())).collect();
        let count: u64 = dims.iter().map(|(_, n)| n).product();
        let wire_bound = match (text, dap.wire_size()) {
            (Some(t), _) => t.wire_bound(var, count),
            (None, Some(w)) => count * w as u64,
            (None, None) => return Err(ApiError::internal(format!("'{}': no size on the wire", p.name))),
        };
        // Selections mark numbers with a fill; text comes back as it is.
        let filter = match (&predicate, &filter_dims) {
            (Some(pred), Some(dims)) if *dims == var.dims && text.is_none() => {
                Some((pred.clone(), fill_of(m, &p.name)?))
            }
            _ => None,
        };
        // The area's tests whose coordinate spans (some of) this array's dimensions.
        let tests: Vec<(String, CoordTest)> =
            area_tests.iter().filter(|(n, _)| area::is_auxiliary(m, &var.dims, n)).cloned().collect();
        let area = if tests.is_empty() || text.is_some() {
            None
        } else {
            Some((state.areas.get(name, reader, &var.dims, &shape, &tests)?, fill_of(m, &p.name)?))
        };
        parts.push(Part {
            name: p.name.clone(),
            dtype: var.dtype,
            sel,
            shape: Shape { name: p.name, dap, dims },
            filter,
            area,
            text,
            wire_bound,
        });
    }
    Ok(parts)
}

/// Reads one box of a part, with the selection's fill where it does not hold.
fn read_box(state: &State, reader: &StoreReader, part: &Part, b: &[DimSelection]) -> Result<Vec<u8>, ApiError> {
    let es = part.dtype.size();
    let n: u64 = b.iter().map(|s| s.count()).product();
    let mut buf = vec![0u8; n as usize * es];
    reader.read_into(&part.name, b, &mut buf)?;
    // The positions in the box where the selection holds, and the fill for the others.
    let (kept, fill): (Vec<u64>, &[u8]) = match (&part.filter, &part.area) {
        (Some((pred, fill)), area) => {
            let q = Query {
                predicate: (**pred).clone(),
                region: b.to_vec(),
                output: Output::Positions,
                variables: vec![],
                level: None,
                method: None,
                mask: area.as_ref().map(|(a, _)| a.mask().clone()),
                raw: false,
            };
            let answer = state.session.run(reader, &q)?;
            let coords = answer.selection.coordinates();
            let kept = (0..answer.selection.flat.len()).map(|i| position_in(b, coords.iter().map(|c| c[i] as u64)));
            (kept.collect(), fill)
        }
        (None, Some((area, fill))) => {
            let (_, var) = reader.manifest().variable(&part.name)?;
            (area.positions_in(&reader.manifest().shape(var), b).1, fill)
        }
        (None, None) => return Ok(buf),
    };
    let mut keep = vec![false; n as usize];
    for p in kept {
        keep[p as usize] = true;
    }
    for (k, chunk) in keep.iter().zip(buf.chunks_exact_mut(es)) {
        if !k {
            chunk.copy_from_slice(fill);
        }
    }
    Ok(buf)
}

/// The bytes [`dods`] sends: the DDS, the mark, and per array its length twice and its
/// values on the wire (bytes padded to four); None with strings, as long as they are.
fn dods_length(dds: &str, mark: DataMark, parts: &[Part]) -> Option<u64> {
    if parts.iter().any(|p| p.text.is_some()) {
        return None;
    }
    // A scalar has no length words; a scalar byte takes a whole XDR unit.
    let arrays: u64 =
        parts.iter().map(|p| if p.shape.dims.is_empty() { 0 } else { 8 } + p.wire_bound.next_multiple_of(4)).sum();
    Some((dds.len() + mark.bytes().len()) as u64 + arrays)
}

/// The boxes a part is read in, in order, cut along the dimensions a client sees: a char
/// variable's characters stay whole in each, so no string is split. `whole_rows`: every box
/// holds whole rows of the last of those dimensions (the ASCII answer prints rows).
fn part_boxes(part: &Part, target: usize, whole_rows: bool) -> Vec<Vec<DimSelection>> {
    let nd = part.shape.dims.len();
    // Bytes per element a client sees (inline strings counted as 16).
    let elem = match part.text {
        Some(Text::Chars { strlen, has_dim: true }) => strlen.max(1) as usize,
        Some(_) if part.dtype == DType::String => 16,
        _ => part.dtype.size(),
    };
    let (cut, row) =
        if whole_rows && nd >= 2 { (nd - 1, elem * part.shape.dims[nd - 1].1.max(1) as usize) } else { (nd, elem) };
    boxes(&part.sel[..cut], row, target)
        .into_iter()
        .map(|mut b| {
            b.extend_from_slice(&part.sel[cut..]);
            b
        })
        .collect()
}

/// A text part's strings in box `b`.
fn strings_of(reader: &StoreReader, part: &Part, text: Text, b: &[DimSelection]) -> Result<Vec<Vec<u8>>, ApiError> {
    let (_, var) = reader.manifest().variable(&part.name)?;
    Ok(strings::strings_in(reader, var, text, b)?)
}

/// The binary response: the DDS, `Data:` ([`DataMark`]), then each array as XDR (its length
/// twice, then the values; bytes padded to four).
fn dods(
    state: State,
    reader: Arc<StoreReader>,
    parts: Vec<Part>,
    dds: String,
    ask: Asked,
    length: Option<u64>,
) -> Result<Body, ApiError> {
    let mark = ask.mark;
    let target = state.config.limits.piece_bytes;
    let small = length.is_some_and(|l| l <= SMALL_ANSWER_BYTES);
    let light = small && is_light(&reader, &parts)?;
    let produce = move |send: &mut dyn FnMut(Bytes) -> bool| {
        let mut head = dds.into_bytes();
        head.extend_from_slice(mark.bytes());
        if !send(Bytes::from(head)) {
            return Ok(());
        }
        for part in &parts {
            let n: u64 = part.shape.dims.iter().map(|(_, n)| n).product();
            let n32 = u32::try_from(n).map_err(|_| {
                ApiError::bad_request(format!("'{}': DAP2 arrays hold at most 2^32-1 values", part.name))
            })?;
            if let Some(text) = part.text {
                // An array of strings gives its count once; a scalar string, none.
                if !part.shape.dims.is_empty() && !send(Bytes::copy_from_slice(&n32.to_be_bytes())) {
                    return Ok(());
                }
                for b in part_boxes(part, target, false) {
                    if !send(Bytes::from(strings::xdr(&strings_of(&reader, part, text, &b)?))) {
                        return Ok(());
                    }
                }
                continue;
            }
            // A scalar is its value alone: length words before a scalar made netCDF's client
            // fail every variable of a dataset holding one (its first read fetches the small
            // ones). A scalar byte fills a 4-byte XDR unit, which netCDF's client and libdap
            // read as an integer and cut to its last byte, and pydap (3.5) takes the first
            // byte of: the value goes in both.
            if part.shape.dims.is_empty() {
                let mut raw = read_box(&state, &reader, part, &part.sel)?;
                if part.shape.dap == DapType::Byte {
                    let v = raw.first().copied().unwrap_or(0);
                    raw = vec![v, 0, 0, v];
                }
                if !send(Bytes::from(types::to_wire(part.dtype, part.shape.dap, raw))) {
                    return Ok(());
                }
                continue;
            }
            let mut counts = Vec::with_capacity(8);
            counts.extend_from_slice(&n32.to_be_bytes());
            counts.extend_from_slice(&n32.to_be_bytes());
            if !send(Bytes::from(counts)) {
                return Ok(());
            }
            for b in part_boxes(part, target, false) {
                let raw = read_box(&state, &reader, part, &b)?;
                if !send(Bytes::from(types::to_wire(part.dtype, part.shape.dap, raw))) {
                    return Ok(());
                }
            }
            let pad = if part.shape.dap == DapType::Byte { (4 - n % 4) % 4 } else { 0 };
            if pad > 0 && !send(Bytes::from(vec![0u8; pad as usize])) {
                return Ok(());
            }
        }
        Ok(())
    };
    if small {
        return produced_now(ask.trailers, light, produce);
    }
    Ok(streamed(ask.trailers, produce))
}

/// Whether reading `parts` is plain reads decoding at most [`LIGHT_DECODE_BYTES`] in all,
/// from slabs whose indexes are loaded (a first read of a dataset may read index files of
/// megabytes). Selections by value or area run queries, and strings are read apart: never
/// light.
fn is_light(reader: &StoreReader, parts: &[Part]) -> Result<bool, ApiError> {
    let mut decoded = 0u64;
    for p in parts {
        if p.filter.is_some() || p.area.is_some() || p.text.is_some() {
            return Ok(false);
        }
        let weight = reader.read_weight(&p.name, &p.sel)?;
        if !weight.indexes_loaded {
            return Ok(false);
        }
        decoded = decoded.saturating_add(weight.decoded_bytes);
    }
    Ok(decoded <= LIGHT_DECODE_BYTES)
}

/// The text response: the DDS, a rule, then each array row by row (`[i][j], v, v, ...`).
fn ascii(state: State, reader: Arc<StoreReader>, parts: Vec<Part>, dds: String, digest: bool) -> Body {
    let target = state.config.limits.piece_bytes;
    streamed(digest, move |send| {
        let mut head = dds;
        head.push_str("---------------------------------------------\n");
        if !send(Bytes::from(head)) {
            return Ok(());
        }
        for part in &parts {
            let mut out = String::new();
            out.push_str(&text::ident(&part.name));
            for (_, n) in &part.shape.dims {
                out.push_str(&format!("[{n}]"));
            }
            out.push('\n');
            let counts: Vec<u64> = part.shape.dims.iter().map(|(_, n)| *n).collect();
            let nd = counts.len();
            let row = if nd >= 2 { counts[nd - 1].max(1) as usize } else { usize::MAX };
            let mut seen = 0u64;
            for (k, b) in part_boxes(part, target, true).iter().enumerate() {
                let cells: Vec<String> = match part.text {
                    Some(t) => strings_of(&reader, part, t, b)?
                        .iter()
                        .map(|s| text::quoted(&String::from_utf8_lossy(s)))
                        .collect(),
                    None => {
                        let raw = read_box(&state, &reader, part, b)?;
                        // Bytes print as the type they are served as (signed ones flagged
                        // unsigned).
                        let values = match part.shape.dap {
                            DapType::Byte => DType::U8.to_f64s(&raw),
                            _ => part.dtype.to_f64s(&raw),
                        };
                        values.iter().map(|v| format_value(part.dtype, *v)).collect()
                    }
                };
                for r in cells.chunks(row.min(cells.len().max(1))) {
                    if nd >= 2 {
                        let mut idx = Vec::with_capacity(nd - 1);
                        let mut rest = seen;
                        for &c in counts[..nd - 1].iter().rev() {
                            idx.push(rest % c);
                            rest /= c;
                        }
                        for i in idx.iter().rev() {
                            out.push_str(&format!("[{i}]"));
                        }
                        out.push_str(", ");
                    } else if k > 0 {
                        out.push_str(", ");
                    }
                    out.push_str(&r.join(", "));
                    if nd >= 2 {
                        out.push('\n');
                    }
                    seen += 1;
                }
                if !send(Bytes::from(std::mem::take(&mut out))) {
                    return Ok(());
                }
            }
            out.push('\n');
            if !send(Bytes::from(out)) {
                return Ok(());
            }
        }
        Ok(())
    })
}

fn format_value(dtype: DType, v: f64) -> String {
    if dtype.is_float() {
        if dtype == DType::F32 {
            format!("{}", v as f32)
        } else {
            format!("{v}")
        }
    } else {
        format!("{v:.0}")
    }
}

#[cfg(test)]
mod tests {
    use super::DataMark;
    use axum::http::{header, HeaderMap, HeaderValue};

    fn mark(agent: Option<&'static str>) -> DataMark {
        let mut h = HeaderMap::new();
        if let Some(a) = agent {
            h.insert(header::USER_AGENT, HeaderValue::from_static(a));
        }
        DataMark::for_client(&h)
    }

    #[test]
    fn only_netcdfs_dap_library_gets_the_carriage_return() {
        assert_eq!(mark(Some("oc4.10.1")), DataMark::CrLf);
        assert_eq!(mark(Some("oc4.9.0")), DataMark::CrLf);
        for other in [None, Some("pydap/3.5.9"), Some("Python-urllib/3.11"), Some("curl/8.5.0"), Some("ocean-bot")] {
            assert_eq!(mark(other), DataMark::Lf, "{other:?}");
        }
        assert_eq!(DataMark::Lf.bytes(), b"Data:\n");
        assert_eq!(DataMark::CrLf.bytes(), b"Data:\r\n");
    }
}
