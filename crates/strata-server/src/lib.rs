//! `strata serve`: every store under a directory, subset at the server.
//!
//! The server carries no planner of its own: each request becomes the engine's
//! [`strata_core::Query`] or a hyperslab read on a [`strata_core::StoreReader`], run by one
//! [`strata_core::Session`] (one cost model for the whole server). Results stream: the
//! engine reads a piece of bounded size on a blocking thread while the previous piece is
//! encoded and sent (see the `pieces` module), so memory does not grow with the result.
//!
//! Routes (docs/server.md has examples):
//! - `GET /`: a web page (catalog, schema, histograms, a quick look, a query form).
//! - `GET /health`: liveness and the number of datasets.
//! - `GET /api/datasets`: the catalog. `GET /api/schema/{name}`: physical, logical and value
//!   descriptors of one dataset.
//! - `GET|POST /api/query/{name}`: a value query (count, positions or points as JSON, Arrow
//!   IPC or CSV).
//! - `GET /api/subset/{name}`: a dense subset as a NetCDF file, with byte ranges (`Range`,
//!   or `parts=N&part=i`) so several connections fetch one file.
//! - `GET /api/quicklook/{name}?var=V&isel=time=0`: a PNG of a 2-D slice with a colour scale.
//! - `GET /dap/{name}.dds|.das|.dods|.ascii`: OPeNDAP DAP2 with constraint expressions.

mod api;
mod areas;
mod catalog;
mod config;
mod dap;
mod encode;
mod error;
mod estimate;
#[doc(hidden)]
pub mod fuzzing;
pub mod log;
mod netcdf;
mod pieces;
mod quicklook;
mod request;
mod schema;
mod tls;

pub use config::{DatasetConfig, Limits, ServeOptions, ServerConfig};
pub use error::ApiError;
pub use estimate::fetch_seconds;

use axum::routing::get;
use axum::Router;
use catalog::Catalog;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use strata_core::Session;

/// What every handler shares.
#[derive(Debug)]
pub(crate) struct AppState {
    pub catalog: Catalog,
    pub session: Arc<Session>,
    pub config: ServerConfig,
    /// Requests answered so far (the bound `--max-requests` counts against).
    pub served: AtomicU64,
    pub started: Instant,
    pub stop: tokio::sync::Notify,
    /// Requests in flight per client address.
    pub in_flight: std::sync::Mutex<std::collections::HashMap<std::net::IpAddr, usize>>,
    /// Areas of auxiliary coordinates built for queries.
    pub areas: areas::Areas,
    /// Auxiliary coordinates' values, which points carry.
    pub aux_coords: areas::AuxCoords,
}

pub(crate) type State = Arc<AppState>;

impl AppState {
    /// The SQL session of dataset `name` (one per dataset, on the server's cost model).
    pub fn sql_session(&self, name: &str) -> Result<Arc<strata_sql::SqlSession>, ApiError> {
        self.catalog.sql(name, self.session.clone())
    }
}

fn router(state: State) -> Router {
    Router::new()
        .route("/", get(api::page))
        .route("/health", get(api::health))
        .route("/api/datasets", get(api::datasets))
        .route("/api/schema/{*name}", get(api::schema))
        .route("/api/query/{*name}", get(api::query).post(api::query))
        .route("/api/sql/{*name}", get(api::sql).post(api::sql))
        .route("/api/subset/{*name}", get(api::subset))
        .route("/api/quicklook/{*name}", get(api::quicklook))
        .route("/dap/{*path}", get(dap::handle))
        .fallback(api::not_found)
        .layer(axum::middleware::from_fn_with_state(state.clone(), request::account))
        .with_state(state)
}

/// A server bound to its address, not yet answering: lets the caller learn the port
/// (with `port = 0`) before serving.
pub struct Bound {
    listener: tokio::net::TcpListener,
    state: State,
    tls: Option<tokio_rustls::TlsAcceptor>,
}

impl std::fmt::Debug for Bound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bound").field("listener", &self.listener).field("tls", &self.tls.is_some()).finish()
    }
}

impl Bound {
    pub fn local_addr(&self) -> std::io::Result<std::net::SocketAddr> {
        self.listener.local_addr()
    }

    /// Answers requests until Ctrl-C / SIGTERM, or the configured bounds on requests or
    /// time are reached; requests in flight finish first.
    pub async fn serve(self) -> std::io::Result<()> {
        let state = self.state.clone();
        let app = router(self.state);
        if let Some(acceptor) = self.tls {
            return tls::serve(self.listener, app, acceptor, shutdown(state.clone()), state).await;
        }
        let app = app.into_make_service_with_connect_info::<std::net::SocketAddr>();
        // Without TCP_NODELAY a response written as headers then body waits for the
        // client's delayed ACK (40 ms on Linux): a small DAP2 request took 85 ms, not 2.
        let listener = axum::serve::ListenerExt::tap_io(self.listener, |tcp| {
            let _ = tcp.set_nodelay(true);
        });
        axum::serve(listener, app).with_graceful_shutdown(shutdown(state)).await
    }
}

fn state(config: ServerConfig, session: Session) -> Result<State, ApiError> {
    Ok(Arc::new(AppState {
        catalog: Catalog::new(&config.root)?,
        session: Arc::new(session),
        config,
        served: AtomicU64::new(0),
        started: Instant::now(),
        stop: tokio::sync::Notify::new(),
        in_flight: Default::default(),
        areas: Default::default(),
        aux_coords: Default::default(),
    }))
}

/// Opens the catalog and the session, and binds the listener.
pub async fn bind(config: ServerConfig) -> Result<Bound, ApiError> {
    let tls = match (&config.tls_cert, &config.tls_key) {
        (Some(c), Some(k)) => Some(tls::acceptor(c, k)?),
        (None, None) => None,
        _ => return Err(ApiError::startup("TLS needs both tls_cert and tls_key")),
    };
    let session = Session::open_default().map_err(ApiError::from)?;
    let addr = format!("{}:{}", config.host, config.port);
    let state = state(config, session)?;
    let listener = tokio::net::TcpListener::bind(&addr)
        .await
        .map_err(|e| ApiError::startup(format!("cannot listen on {addr}: {e}")))?;
    Ok(Bound { listener, state, tls })
}

/// The server's routes over `config.root` as an [`axum::Router`], without a listener (to
/// mount in another server, or to drive request by request). Requests need the client's
/// address as an `axum::extract::ConnectInfo<SocketAddr>` extension, which
/// `into_make_service_with_connect_info` adds. `session` plans and learns for every
/// dataset ([`Session::open_default`] is the one `strata serve` uses).
pub fn app(config: ServerConfig, session: Session) -> Result<Router, ApiError> {
    Ok(router(state(config, session)?))
}

/// Binds and serves on a runtime of its own (the command-line entry point). `ready` is told
/// the server's base URL (`http://127.0.0.1:PORT/`, or `https://...`) once it listens.
pub fn run(config: ServerConfig, ready: impl FnOnce(String)) -> Result<(), ApiError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("strata-serve")
        .build()
        .map_err(|e| ApiError::startup(format!("cannot start the runtime: {e}")))?;
    runtime.block_on(async move {
        let bound = bind(config).await?;
        let addr = bound.local_addr().map_err(|e| ApiError::startup(e.to_string()))?;
        ready(format!("{}://{addr}/", if bound.tls.is_some() { "https" } else { "http" }));
        bound.serve().await.map_err(|e| ApiError::startup(format!("server stopped: {e}")))
    })
}

/// The quick look of `var` in the store at `path` (a PNG), as the server draws it:
/// `isel` selects one index on every dimension but two (`time=0`).
pub fn quicklook(path: &str, var: &str, isel: Option<&str>) -> Result<Vec<u8>, ApiError> {
    let reader = strata_core::StoreReader::open(strata_core::Store::local(path), None)?;
    api::quicklook_png(&reader, var, isel)
}

/// Resolves on a signal, on the request bound, or when the time bound passes.
async fn shutdown(state: State) {
    let time_bound = async {
        match state.config.max_seconds {
            // Checked by `ServeOptions`; a library caller's infinity waits forever, not panics.
            Some(s) => tokio::time::sleep(Duration::try_from_secs_f64(s.max(0.0)).unwrap_or(Duration::MAX)).await,
            None => std::future::pending().await,
        }
    };
    let terminate = async {
        #[cfg(unix)]
        if let Ok(mut s) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            s.recv().await;
            return;
        }
        std::future::pending::<()>().await
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {},
        _ = terminate => {},
        _ = time_bound => {},
        _ = state.stop.notified() => {},
    }
    if !state.config.quiet {
        crate::log!(
            "strata serve: stopping after {} requests, {:.1} s",
            state.served.load(Ordering::Relaxed),
            state.started.elapsed().as_secs_f64()
        );
    }
}
