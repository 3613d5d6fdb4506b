//! Around every request: the dataset's token, the per-client limit on requests in flight,
//! the time limit, a log line, the request bound, and a panic turned into a 500 (a failing
//! request never takes the server down).

use crate::{ApiError, State};
use axum::body::Body;
use axum::extract::{ConnectInfo, Request, State as AxState};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::FutureExt;
use http_body::Body as _;
use std::net::{IpAddr, SocketAddr};
use std::panic::AssertUnwindSafe;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// The dataset a request path addresses, if any.
fn dataset_of(path: &str) -> Option<String> {
    let path = strata_dap::percent_decode(path).ok()?;
    for prefix in ["/api/schema/", "/api/query/", "/api/sql/", "/api/subset/", "/api/quicklook/"] {
        if let Some(name) = path.strip_prefix(prefix) {
            return Some(name.to_string());
        }
    }
    let rest = path.strip_prefix("/dap/")?;
    Some(rest.rsplit_once('.').map_or(rest, |(n, _)| n).to_string())
}

fn base64_decode(text: &str) -> Option<Vec<u8>> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' | b'-' => Some(62),
        b'/' | b'_' => Some(63),
        _ => None,
    };
    let mut out = Vec::new();
    let (mut acc, mut bits) = (0u32, 0);
    for c in text.trim_end_matches('=').bytes() {
        acc = (acc << 6) | u32::from(value(c)?);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    Some(out)
}

/// The token a request carries: a bearer token, or the password of HTTP Basic.
fn token_of(headers: &HeaderMap) -> Option<String> {
    let auth = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    if let Some(t) = auth.strip_prefix("Bearer ") {
        return Some(t.trim().to_string());
    }
    let decoded = base64_decode(auth.strip_prefix("Basic ")?.trim())?;
    let text = String::from_utf8(decoded).ok()?;
    Some(text.split_once(':').map_or(text.as_str(), |(_, p)| p).to_string())
}

/// Equal in time independent of where they first differ.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

fn authorized(state: &State, path: &str, headers: &HeaderMap) -> Result<(), Box<Response>> {
    let Some(name) = dataset_of(path) else { return Ok(()) };
    let Some(token) = state.config.token_for(&name) else { return Ok(()) };
    if token_of(headers).is_some_and(|t| same(&t, token)) {
        return Ok(());
    }
    let mut r = ApiError::new(
        StatusCode::UNAUTHORIZED,
        "unauthorized",
        format!("dataset '{name}' needs its token (Authorization: Bearer TOKEN, or user:TOKEN@host in a URL)"),
    )
    .into_response();
    r.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Basic realm=\"strata\""));
    Err(Box::new(r))
}

/// A body that holds its request's slot until it is dropped (frames, trailers included,
/// pass through unchanged).
struct Held {
    body: Body,
    _guard: InFlight,
}

impl http_body::Body for Held {
    type Data = bytes::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<bytes::Bytes>, axum::Error>>> {
        std::pin::Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// Counts a client's request in flight until the guard, moved into the response body, drops.
struct InFlight {
    state: State,
    client: IpAddr,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut m = self.state.in_flight.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = m.get_mut(&self.client) {
            *n -= 1;
            if *n == 0 {
                m.remove(&self.client);
            }
        }
    }
}

pub(crate) async fn account(
    AxState(state): AxState<State>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    req: Request,
    next: Next,
) -> Response {
    let started = Instant::now();
    let method = req.method().clone();
    let uri = req.uri().clone();
    let wants_trailers = crate::pieces::wants_trailers(req.headers());
    let response = match admit(&state, peer.ip(), &req) {
        Err(r) => *r,
        Ok(guard) => {
            let limit = Duration::from_secs_f64(state.config.limits.query_seconds);
            let run = AssertUnwindSafe(next.run(req)).catch_unwind();
            match tokio::time::timeout(limit, run).await {
                Ok(Ok(r)) => {
                    // The body streams after this returns: the client's slot is held until
                    // the body is done.
                    let (mut parts, body) = r.into_parts();
                    // Streamed bodies end with their digest (crate::pieces): announce it.
                    if wants_trailers
                        && !parts.headers.contains_key(header::CONTENT_LENGTH)
                        && body.size_hint().exact().is_none()
                    {
                        parts.headers.insert(header::TRAILER, HeaderValue::from_static(crate::pieces::DIGEST_TRAILER));
                    }
                    Response::from_parts(parts, Body::new(Held { body, _guard: guard }))
                }
                Ok(Err(panic)) => {
                    let what = panic
                        .downcast_ref::<&str>()
                        .map(|s| s.to_string())
                        .or_else(|| panic.downcast_ref::<String>().cloned())
                        .unwrap_or_else(|| "a panic".into());
                    ApiError::internal(format!("{method} {uri}: {what}")).into_response()
                }
                Err(_) => ApiError::new(
                    StatusCode::REQUEST_TIMEOUT,
                    "timeout",
                    format!(
                        "the answer did not start within {} s (this server's limit): narrow the query",
                        state.config.limits.query_seconds
                    ),
                )
                .into_response(),
            }
        }
    };
    if !state.config.quiet {
        crate::log!(
            "{} {method} {uri} {} {:.1} ms",
            peer.ip(),
            response.status().as_u16(),
            started.elapsed().as_secs_f64() * 1e3
        );
    }
    let served = state.served.fetch_add(1, Ordering::Relaxed) + 1;
    if state.config.max_requests.is_some_and(|n| served >= n) {
        state.stop.notify_one();
    }
    response
}

/// The token and the client's slot, or the refusal.
fn admit(state: &State, client: IpAddr, req: &Request) -> Result<InFlight, Box<Response>> {
    authorized(state, req.uri().path(), req.headers())?;
    let mut m = state.in_flight.lock().unwrap_or_else(|p| p.into_inner());
    let n = m.entry(client).or_insert(0);
    if *n >= state.config.limits.concurrent_per_client {
        return Err(Box::new(
            ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "too_many_requests",
                format!(
                    "{} requests of yours are in flight, this server's limit: retry when one is done",
                    state.config.limits.concurrent_per_client
                ),
            )
            .into_response(),
        ));
    }
    *n += 1;
    Ok(InFlight { state: state.clone(), client })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dataset_names_from_paths() {
        assert_eq!(dataset_of("/dap/ocean/sic.dods").as_deref(), Some("ocean/sic"));
        assert_eq!(dataset_of("/api/sql/ersst").as_deref(), Some("ersst"));
        assert_eq!(dataset_of("/api/schema/a%20b").as_deref(), Some("a b"));
        assert_eq!(dataset_of("/health"), None);
    }

    #[test]
    fn tokens_from_bearer_and_basic() {
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer abc123xyz"));
        assert_eq!(token_of(&h).as_deref(), Some("abc123xyz"));
        // base64("user:s3cret-token")
        h.insert(header::AUTHORIZATION, HeaderValue::from_static("Basic dXNlcjpzM2NyZXQtdG9rZW4="));
        assert_eq!(token_of(&h).as_deref(), Some("s3cret-token"));
        assert!(same("abc", "abc") && !same("abc", "abd") && !same("abc", "ab"));
    }
}
