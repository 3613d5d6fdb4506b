//! Around every request: a log line, the request bound, and a panic turned into a 500 (a
//! failing request never takes the server down).

use crate::{ApiError, State};
use axum::extract::{Request, State as AxState};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::FutureExt;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::Ordering;
use std::time::Instant;

pub(crate) async fn account(AxState(state): AxState<State>, req: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = req.method().clone();
    let uri = req.uri().clone();
    let response = match AssertUnwindSafe(next.run(req)).catch_unwind().await {
        Ok(r) => r,
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic".into());
            ApiError::internal(format!("{method} {uri}: {what}")).into_response()
        }
    };
    if !state.config.quiet {
        eprintln!("{method} {uri} {} {:.1} ms", response.status().as_u16(), started.elapsed().as_secs_f64() * 1e3);
    }
    let served = state.served.fetch_add(1, Ordering::Relaxed) + 1;
    if state.config.max_requests.is_some_and(|n| served >= n) {
        state.stop.notify_one();
    }
    response
}
