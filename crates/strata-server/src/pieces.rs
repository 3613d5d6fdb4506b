//! Results in pieces: a hyperslab cut into boxes of bounded size, read in order on a
//! blocking thread and sent through a bounded channel, so reading the next piece overlaps
//! encoding and sending this one, and memory stays at a few pieces whatever the result.

use axum::body::Body;
use bytes::Bytes;
use strata_core::DimSelection;

/// Cuts `sel` (one range per dimension) into boxes of at most about `target` bytes
/// (`elem` bytes per element), in C order: their concatenation is the whole selection.
/// A box is never smaller than one element.
pub(crate) fn boxes(sel: &[DimSelection], elem: usize, target: usize) -> Vec<Vec<DimSelection>> {
    let counts: Vec<u64> = sel.iter().map(|s| s.count()).collect();
    if counts.contains(&0) {
        return vec![];
    }
    if sel.is_empty() {
        return vec![vec![]];
    }
    // The outermost dimension d whose trailing block (dims after d) fits the target.
    let mut d = sel.len() - 1;
    let mut inner = elem as u64;
    for k in (0..sel.len()).rev() {
        d = k;
        let tail: u64 = counts[k + 1..].iter().product::<u64>() * elem as u64;
        inner = tail;
        if k == 0 || tail * counts[k] > target as u64 {
            break;
        }
    }
    // Rows of dimension d per box.
    let rows = (target as u64 / inner.max(1)).clamp(1, counts[d]);
    let outer: u64 = counts[..d].iter().product();
    let mut out = Vec::new();
    for o in 0..outer {
        // The single index of each dimension before d.
        let mut rest = o;
        let mut fixed = vec![0u64; d];
        for k in (0..d).rev() {
            fixed[k] = rest % counts[k];
            rest /= counts[k];
        }
        let mut r = 0;
        while r < counts[d] {
            let n = rows.min(counts[d] - r);
            let mut b: Vec<DimSelection> = Vec::with_capacity(sel.len());
            for (k, &i) in fixed.iter().enumerate() {
                let s = sel[k];
                let at = s.start + i * s.step;
                b.push(DimSelection { start: at, stop: at + 1, step: 1 });
            }
            let s = sel[d];
            let first = s.start + r * s.step;
            b.push(DimSelection { start: first, stop: first + (n - 1) * s.step + 1, step: s.step });
            b.extend_from_slice(&sel[d + 1..]);
            out.push(b);
            r += n;
        }
    }
    out
}

/// A response body fed by `produce` on a blocking thread: each call of `send` hands one
/// chunk over, waiting while two are queued; it returns false once the client has gone, and
/// the producer should stop. An error after the first byte can only cut the response short
/// (the status is already sent): it is logged, and the body ends early, without its trailer.
///
/// With `digest` (the client asked for trailers, `TE: trailers`: see [`wants_trailers`]), a
/// complete body ends with the trailer `x-strata-crc32c`, the CRC-32C of every byte sent
/// (as sent, after any content encoding), so the client checks what it received. Without,
/// no CRC is computed: HTTP/1.1 drops trailers a client did not ask for.
pub(crate) fn streamed<F>(digest: bool, produce: F) -> Body
where
    F: FnOnce(&mut dyn FnMut(Bytes) -> bool) -> Result<(), crate::ApiError> + Send + 'static,
{
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(2);
    tokio::task::spawn_blocking(move || {
        let mut send = |b: Bytes| tx.blocking_send(Ok(b)).is_ok();
        if let Err(e) = produce(&mut send) {
            crate::log!("strata serve: response cut short: {e}");
            let _ = tx.blocking_send(Err(std::io::Error::other(e.message)));
        }
    });
    Body::new(Digested::new(rx, digest))
}

/// Answers at most this large are produced whole before they are sent (see [`produced_now`]).
pub(crate) const SMALL_ANSWER_BYTES: u64 = 1 << 20;

/// Small answers whose reading decodes at most this much are produced on the request's
/// thread as it is (see [`produced_now`]): about a millisecond of decoding at most (1 GB/s).
pub(crate) const LIGHT_DECODE_BYTES: u64 = 1 << 20;

/// Like [`streamed`] for a small answer (at most [`SMALL_ANSWER_BYTES`]): produced whole
/// on the request's own thread, then sent. Handing a small answer to a blocking thread and
/// back cost more than producing it (a DAP2 client opening a file sends several small
/// requests), and an error is then the response's status, not a body cut short.
///
/// A `light` answer (decoding at most [`LIGHT_DECODE_BYTES`]) is produced as it is;
/// otherwise, on a multi-threaded runtime, the thread's other tasks move to another worker
/// meanwhile (`block_in_place`, which itself took about 30 µs of a 200 µs request).
pub(crate) fn produced_now<F>(digest: bool, light: bool, produce: F) -> Result<Body, crate::ApiError>
where
    F: FnOnce(&mut dyn FnMut(Bytes) -> bool) -> Result<(), crate::ApiError>,
{
    let mut chunks = Vec::new();
    let mut collect = |b: Bytes| {
        chunks.push(b);
        true
    };
    let multi = tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
    if multi && !light {
        tokio::task::block_in_place(|| produce(&mut collect))?;
    } else {
        produce(&mut collect)?;
    }
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(chunks.len() + 1);
    for c in chunks {
        // The channel holds them all: it was made as large.
        let _ = tx.try_send(Ok(c));
    }
    Ok(Body::new(Digested::new(rx, digest)))
}

/// The trailer naming a body's CRC-32C.
pub(crate) const DIGEST_TRAILER: &str = "x-strata-crc32c";

/// Whether a request accepts trailers (`TE: trailers`): only then are they sent.
pub(crate) fn wants_trailers(headers: &axum::http::HeaderMap) -> bool {
    headers
        .get(axum::http::header::TE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case("trailers")))
}

struct Digested {
    rx: tokio::sync::mpsc::Receiver<Result<Bytes, std::io::Error>>,
    /// The CRC-32C so far, when the body ends with it.
    crc: Option<u32>,
    done: bool,
}

impl Digested {
    fn new(rx: tokio::sync::mpsc::Receiver<Result<Bytes, std::io::Error>>, digest: bool) -> Self {
        Digested { rx, crc: digest.then_some(0), done: false }
    }
}

impl http_body::Body for Digested {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, std::io::Error>>> {
        use std::task::Poll;
        if self.done {
            return Poll::Ready(None);
        }
        match self.rx.poll_recv(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Some(Ok(b))) => {
                if let Some(crc) = self.crc {
                    self.crc = Some(crc32c::crc32c_append(crc, &b));
                }
                Poll::Ready(Some(Ok(http_body::Frame::data(b))))
            }
            Poll::Ready(Some(Err(e))) => {
                self.done = true;
                Poll::Ready(Some(Err(e)))
            }
            Poll::Ready(None) => {
                self.done = true;
                let Some(crc) = self.crc else { return Poll::Ready(None) };
                let mut trailers = axum::http::HeaderMap::new();
                if let Ok(v) = axum::http::HeaderValue::from_str(&format!("{crc:08x}")) {
                    trailers.insert(DIGEST_TRAILER, v);
                }
                Poll::Ready(Some(Ok(http_body::Frame::trailers(trailers))))
            }
        }
    }
}

/// The level of [`Encoding::Zstd`].
const ZSTD_LEVEL: i32 = 1;

/// How a response body is encoded on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Encoding {
    Identity,
    /// Zstandard frames at level [`ZSTD_LEVEL`] (several hundred MB/s per core: it pays on any link
    /// slower than that); flushed after every piece, so a piece is sent as soon as it is
    /// made.
    Zstd,
}

impl Encoding {
    /// The encoding a client accepts (`Accept-Encoding: zstd`), else identity.
    pub fn negotiate(headers: &axum::http::HeaderMap) -> Encoding {
        let accepts = headers
            .get_all(axum::http::header::ACCEPT_ENCODING)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .any(|e| {
                let mut parts = e.split(';');
                let name = parts.next().unwrap_or("").trim();
                let refused = parts.any(|p| p.trim().replace(' ', "") == "q=0");
                name.eq_ignore_ascii_case("zstd") && !refused
            });
        if accepts {
            Encoding::Zstd
        } else {
            Encoding::Identity
        }
    }

    /// The size of `bytes` once encoded (what a whole piece of them takes on the wire).
    pub fn compressed_len(self, bytes: &[u8]) -> Result<usize, crate::ApiError> {
        match self {
            Encoding::Identity => Ok(bytes.len()),
            Encoding::Zstd => zstd::bulk::compress(bytes, ZSTD_LEVEL)
                .map(|c| c.len())
                .map_err(|e| crate::ApiError::internal(format!("compressing a sample: {e}"))),
        }
    }

    /// Sets `Content-Encoding` (and `Vary`) on a response whose body this encoding made.
    pub fn label(self, r: &mut axum::response::Response) {
        r.headers_mut().insert(axum::http::header::VARY, axum::http::HeaderValue::from_static("accept-encoding"));
        if self == Encoding::Zstd {
            r.headers_mut().insert(axum::http::header::CONTENT_ENCODING, axum::http::HeaderValue::from_static("zstd"));
        }
    }
}

/// Like [`streamed`], with every chunk encoded as `encoding` says.
pub(crate) fn streamed_encoded<F>(encoding: Encoding, digest: bool, produce: F) -> Body
where
    F: FnOnce(&mut dyn FnMut(Bytes) -> bool) -> Result<(), crate::ApiError> + Send + 'static,
{
    if encoding == Encoding::Identity {
        return streamed(digest, produce);
    }
    streamed(digest, move |send| {
        use std::io::Write;
        let failed = |e: std::io::Error| crate::ApiError::internal(format!("compressing a response: {e}"));
        let mut enc = zstd::stream::write::Encoder::new(Vec::new(), ZSTD_LEVEL).map_err(failed)?;
        let mut gone = false;
        let mut through = |b: Bytes| -> bool {
            if gone {
                return false;
            }
            let ok = enc.write_all(&b).and_then(|_| enc.flush());
            let out = std::mem::take(enc.get_mut());
            gone = ok.is_err() || (!out.is_empty() && !send(Bytes::from(out)));
            !gone
        };
        produce(&mut through)?;
        if !gone {
            let tail = enc.finish().map_err(failed)?;
            send(Bytes::from(tail));
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sel(v: &[(u64, u64, u64)]) -> Vec<DimSelection> {
        v.iter().map(|&(start, stop, step)| DimSelection { start, stop, step }).collect()
    }

    fn flatten(boxes: &[Vec<DimSelection>]) -> Vec<Vec<u64>> {
        let mut out = Vec::new();
        for b in boxes {
            let mut idx: Vec<Vec<u64>> = vec![vec![]];
            for s in b {
                let mut next = Vec::new();
                for p in &idx {
                    let mut i = s.start;
                    while i < s.stop {
                        let mut q = p.clone();
                        q.push(i);
                        next.push(q);
                        i += s.step;
                    }
                }
                idx = next;
            }
            out.extend(idx);
        }
        out
    }

    #[test]
    fn boxes_cover_the_selection_in_order() {
        for target in [1, 3, 7, 16, 50, 1000, 1 << 20] {
            for s in [
                sel(&[(0, 5, 1), (1, 9, 3), (0, 4, 1)]),
                sel(&[(2, 3, 1), (0, 7, 2)]),
                sel(&[(0, 10, 1)]),
                sel(&[(1, 6, 2), (0, 1, 1), (3, 11, 4)]),
            ] {
                let whole = flatten(std::slice::from_ref(&s));
                let parts = boxes(&s, 4, target);
                assert_eq!(flatten(&parts), whole, "target {target} {s:?}");
                for b in &parts {
                    let n: u64 = b.iter().map(|x| x.count()).product();
                    assert!(n * 4 <= (target as u64).max(4), "box of {n} elements over target {target}");
                }
            }
        }
    }

    #[test]
    fn zstd_is_negotiated_only_when_accepted() {
        use axum::http::{header::ACCEPT_ENCODING, HeaderMap, HeaderValue};
        let mut h = HeaderMap::new();
        assert_eq!(Encoding::negotiate(&h), Encoding::Identity);
        h.insert(ACCEPT_ENCODING, HeaderValue::from_static("gzip, zstd"));
        assert_eq!(Encoding::negotiate(&h), Encoding::Zstd);
        h.insert(ACCEPT_ENCODING, HeaderValue::from_static("zstd;q=0, gzip"));
        assert_eq!(Encoding::negotiate(&h), Encoding::Identity);
    }

    #[test]
    fn empty_selections_have_no_boxes() {
        assert!(boxes(&sel(&[(0, 0, 1), (0, 4, 1)]), 4, 64).is_empty());
    }
}
