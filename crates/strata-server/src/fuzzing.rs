//! Requests made of arbitrary bytes, answered by the whole server in process: routing, the
//! token check, every handler and the encoders, as a client on the network reaches them.
//! The cargo-fuzz target `server_request` feeds it libFuzzer's inputs; the test
//! `tests/request_mutations.rs` feeds it mutations of its seeds on every `make test`.
//!
//! An input is a request in a simple text form (bytes that are not UTF-8 are replaced):
//!
//! ```text
//! GET /dap/ocean/sst.dods?sst[0:1][0:2][0:3]
//! authorization: Bearer 0123456789
//!
//! body (for POST)
//! ```
//!
//! The server must answer every request it can be sent: any status but 500 (a panic the
//! middleware caught, or an internal error), a body that ends, and the length it announced.

use crate::{ApiError, ServerConfig};
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{header, HeaderName, HeaderValue, Method, Request, StatusCode};
use axum::Router;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use strata_core::manifest::{AttrValue, Attribute, Dim};
use strata_core::writer::{DatasetSchema, VariableSchema};
use strata_core::{DType, Session, Store, StoreWriter, WriterOptions};
use tower::ServiceExt;

/// The token of the protected dataset `private/sst`.
pub const TOKEN: &str = "fuzz-token-0123";

/// What the server answered.
#[derive(Debug)]
pub struct Answer {
    pub status: StatusCode,
    pub body: Vec<u8>,
}

/// A server over two small stores (`ocean/sst`, and `private/sst` behind [`TOKEN`]), on a
/// runtime of its own.
pub struct Harness {
    runtime: tokio::runtime::Runtime,
    app: Router,
    root: PathBuf,
}

impl std::fmt::Debug for Harness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Harness").field("root", &self.root).finish()
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

impl Harness {
    /// Writes the stores under a new directory in the system's temporary directory (and
    /// removes those that harnesses of exited processes left there).
    pub fn new() -> Result<Harness, ApiError> {
        let root = strata_sql::fuzzing::scratch_dir("strata-fuzz-server-");
        for name in ["ocean/sst", "private/sst"] {
            write_store(&root.join(name))?;
        }
        let mut config = ServerConfig::new(&root, 0);
        config.quiet = true;
        config.limits.query_seconds = 10.0;
        config.limits.max_result_bytes = 1 << 20;
        config.limits.piece_bytes = 4096;
        config.datasets.insert("private/sst".into(), crate::DatasetConfig { token: Some(TOKEN.into()) });
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .map_err(|e| ApiError::startup(e.to_string()))?;
        let app = crate::app(config, Session::default())?;
        Ok(Harness { runtime, app, root })
    }

    /// The request `data` describes, or None when no client could send it (a method or
    /// target that is not HTTP).
    pub fn request_of(data: &[u8]) -> Option<Request<Body>> {
        let text = String::from_utf8_lossy(data);
        let (head, body) = text.split_once("\n\n").unwrap_or((&text, ""));
        let mut lines = head.lines();
        let (method, target) = lines.next()?.split_once(' ')?;
        let mut req = Request::builder()
            .method(Method::from_bytes(method.as_bytes()).ok()?)
            .uri(target)
            .body(Body::from(body.to_string()))
            .ok()?;
        for line in lines {
            let Some((name, value)) = line.split_once(':') else { continue };
            if let (Ok(n), Ok(v)) =
                (HeaderName::from_bytes(name.trim().as_bytes()), HeaderValue::from_str(value.trim()))
            {
                req.headers_mut().append(n, v);
            }
        }
        req.extensions_mut().insert(ConnectInfo(SocketAddr::from(([127, 0, 0, 1], 40000))));
        Some(req)
    }

    /// Sends `req` and reads the whole answer. Err: the server broke a promise (a 500, a
    /// body that fails or does not end, a length other than announced).
    pub fn answer(&self, req: Request<Body>) -> Result<Answer, String> {
        let what = format!("{} {}", req.method(), req.uri());
        self.runtime.block_on(async {
            let response = tokio::time::timeout(Duration::from_secs(30), self.app.clone().oneshot(req))
                .await
                .map_err(|_| format!("{what}: no answer within 30 s"))?
                .unwrap_or_else(|never| match never {});
            let status = response.status();
            let announced = response
                .headers()
                .get(header::CONTENT_LENGTH)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse::<usize>().ok());
            let body =
                tokio::time::timeout(Duration::from_secs(30), axum::body::to_bytes(response.into_body(), 64 << 20))
                    .await
                    .map_err(|_| format!("{what}: the body did not end within 30 s"))?
                    .map_err(|e| format!("{what}: the body failed: {e}"))?;
            if status == StatusCode::INTERNAL_SERVER_ERROR {
                return Err(format!("{what}: 500 {}", String::from_utf8_lossy(&body)));
            }
            if announced.is_some_and(|n| n != body.len()) {
                return Err(format!("{what}: announced {announced:?} bytes, sent {}", body.len()));
            }
            Ok(Answer { status, body: body.to_vec() })
        })
    }

    /// [`request_of`](Self::request_of) then [`answer`](Self::answer): None for bytes that
    /// are not a request.
    pub fn run(&self, data: &[u8]) -> Option<Result<Answer, String>> {
        Self::request_of(data).map(|req| self.answer(req))
    }
}

/// A store of `sst(time, lat, lon)` (f32, V-S with 4 bins, two slabs, one missing value)
/// with CF coordinates, the shape of the stores the server is tested on.
fn write_store(path: &Path) -> Result<(), ApiError> {
    const T: u64 = 4;
    const Y: u64 = 6;
    const X: u64 = 8;
    let text = |name: &str, v: &str| Attribute { name: name.into(), value: AttrValue::String(v.into()) };
    let var = |name: &str, dtype, dims: &[&str], attrs| VariableSchema {
        name: name.into(),
        dtype,
        dims: dims.iter().map(|d| d.to_string()).collect(),
        attrs,
        inline_strings: None,
    };
    let schema = DatasetSchema {
        dims: vec![
            Dim { name: "time".into(), size: T, unlimited: true },
            Dim { name: "lat".into(), size: Y, unlimited: false },
            Dim { name: "lon".into(), size: X, unlimited: false },
        ],
        record_dim: Some("time".into()),
        attrs: vec![text("title", "strata fuzzing")],
        variables: vec![
            var(
                "sst",
                DType::F32,
                &["time", "lat", "lon"],
                vec![
                    text("units", "degC"),
                    Attribute { name: "_FillValue".into(), value: AttrValue::F32(vec![-999.0]) },
                    text("coordinates", "ulat"),
                ],
            ),
            // A 2-D auxiliary latitude, for areas (`area=ulat=0:`, SQL's `WHERE ulat > 0`).
            var("ulat", DType::F32, &["lat", "lon"], vec![text("units", "degrees_north")]),
            var(
                "time",
                DType::F64,
                &["time"],
                vec![text("units", "days since 2000-01-01"), text("calendar", "noleap")],
            ),
            var("lat", DType::F64, &["lat"], vec![text("units", "degrees_north")]),
            var("lon", DType::F64, &["lon"], vec![text("units", "degrees_east")]),
        ],
    };
    let failed = |e: strata_core::Error| ApiError::startup(format!("the fuzzing store: {e}"));
    std::fs::create_dir_all(path.parent().unwrap_or(Path::new("."))).map_err(|e| ApiError::startup(e.to_string()))?;
    let store = Store::local(&path.to_string_lossy());
    let options =
        WriterOptions { slab_records: Some(2), layout: Some("V-S".into()), bins: Some(4), ..Default::default() };
    let mut w = StoreWriter::create(store, schema, &options).map_err(failed)?;
    let f64s = |v: Vec<f64>| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    w.put_static("lat", &f64s((0..Y).map(|i| -75.0 + 30.0 * i as f64).collect())).map_err(failed)?;
    w.put_static("lon", &f64s((0..X).map(|i| 45.0 * i as f64).collect())).map_err(failed)?;
    let ulat: Vec<u8> =
        (0..Y * X).flat_map(|i| (-75.0 + 30.0 * (i / X) as f32 + 0.5 * (i % X) as f32).to_le_bytes()).collect();
    w.put_static("ulat", &ulat).map_err(failed)?;
    let sst: Vec<u8> = (0..T * Y * X)
        .map(|i| if i == 7 { -999.0f32 } else { (i * 37 % 101) as f32 * 0.25 - 2.0 })
        .flat_map(|x| x.to_le_bytes())
        .collect();
    let per = (2 * Y * X * 4) as usize;
    for s in 0..2usize {
        w.begin_slab(2).map_err(failed)?;
        w.put_records("sst", &sst[s * per..(s + 1) * per]).map_err(failed)?;
        w.put_records("time", &f64s(vec![(2 * s) as f64, (2 * s + 1) as f64])).map_err(failed)?;
        w.finish_slab().map_err(failed)?;
    }
    w.commit("fuzzing store").map_err(failed)?;
    Ok(())
}

/// Seed requests, one per route and feature (the mutation test starts from these; the fuzz
/// corpus can too).
pub fn seeds() -> Vec<String> {
    let auth = format!("authorization: Bearer {TOKEN}");
    [
        "GET /".to_string(),
        "GET /health".into(),
        "GET /api/datasets".into(),
        "GET /api/schema/ocean/sst".into(),
        "GET /api/query/ocean/sst?where=sst%20%3E%2010&output=count".into(),
        "GET /api/query/ocean/sst?where=sst%20%3E%2010&format=csv&isel=time=0:2".into(),
        "GET /api/query/ocean/sst?where=sst%20%3C%205%20and%20sst%20%3E%201&output=positions&format=json".into(),
        "GET /api/query/ocean/sst?where=sst%20%3E%200&output=points&format=arrow&isel=lat=1:5&limit=7".into(),
        "GET /api/query/ocean/sst?where=sst%20%3E%200&output=points&format=parquet&method=scan".into(),
        "GET /api/query/ocean/sst?where=sst%20%3E%201&output=points&format=csv&area=ulat=-40:20.5".into(),
        "GET /api/sql/ocean/sst?q=SELECT%20lat,%20ulat,%20sst%20FROM%20sst%20WHERE%20ulat%20%3E%200%20AND%20sst%20%3E%201"
            .into(),
        "POST /api/query/ocean/sst\ncontent-type: application/json\n\n{\"where\": \"sst > 3\", \"output\": \"points\"}"
            .into(),
        "GET /api/sql/ocean/sst?q=SELECT%20count(*)%20FROM%20sst%20WHERE%20sst%20%3E%205".into(),
        "POST /api/sql/ocean/sst\ncontent-type: application/json\n\n{\"q\": \"SELECT time, avg(sst) FROM sst GROUP BY time ORDER BY time\", \"format\": \"json\"}".into(),
        "GET /api/subset/ocean/sst?vars=sst&isel=time=1:3,lat=0:4:2".into(),
        "GET /api/subset/ocean/sst?vars=sst&parts=3&part=1".into(),
        "GET /api/subset/ocean/sst\nrange: bytes=10-200".into(),
        "GET /api/quicklook/ocean/sst?var=sst&isel=time=0".into(),
        "GET /dap/ocean/sst.dds".into(),
        "GET /dap/ocean/sst.das".into(),
        "GET /dap/ocean/sst.dods?sst%5B0:1%5D%5B1:2:5%5D%5B0:7%5D".into(),
        "GET /dap/ocean/sst.ascii?sst%5B1%5D%5B0%5D%5B0:3%5D,lat&sst%3E3".into(),
        "GET /dap/ocean/sst.dods?time,lon%5B2:4%5D".into(),
        // A selection on the 2-D auxiliary latitude: an area over every array it spans.
        "GET /dap/ocean/sst.dods?sst%5B0:1%5D%5B0:5%5D%5B0:7%5D,ulat&ulat%3E=0&sst%3C4".into(),
        "GET /dap/ocean/sst.ascii?sst&ulat%3C10".into(),
        format!("GET /dap/private/sst.dods?sst%5B0%5D%5B0%5D%5B0%5D\n{auth}"),
        format!("GET /api/query/private/sst?where=sst%3E1&output=count\n{auth}"),
        "GET /api/schema/private/sst\nauthorization: Basic dXNlcjpmdXp6LXRva2VuLTAxMjM=".into(),
        "GET /api/query/ocean/sst?where=sst%20%3E%2010\nte: trailers".into(),
    ]
    .into_iter()
    .collect()
}

/// A harness shared by the callers of one process.
pub fn shared() -> Arc<Harness> {
    static HARNESS: std::sync::OnceLock<Arc<Harness>> = std::sync::OnceLock::new();
    HARNESS
        .get_or_init(|| match Harness::new() {
            Ok(h) => Arc::new(h),
            Err(e) => panic!("the fuzzing server does not start: {e}"),
        })
        .clone()
}
