//! Whether a download of part of a dataset, or of the whole of it, comes sooner: the
//! answer of `estimate=true` on the subset and query routes (`strata fetch` prints it).
//! A dense subset's time is the cost model's alone (`Session::read_seconds`); a points
//! answer's is calibrated on a sample of its own pieces ([`calibrated`]).

use crate::encode::{Encoder, Format};
use crate::pieces::{boxes, Encoding};
use crate::ApiError;
use arrow::record_batch::RecordBatch;
use std::time::Instant;
use strata_core::{Output, Query, Session, StoreReader};

/// How many of an answer's pieces are made to learn its time (and a points answer's bytes
/// per row), spread evenly from the first to the last, so an answer whose density changes
/// along its first dimension is seen at both ends.
pub(crate) const SAMPLE_PIECES: usize = 5;

/// Whether to fetch a subset or the whole dataset: the subset's bytes, the whole
/// dataset's, and the server's time to cut the subset.
///
/// The server sends each piece of the subset while it cuts the next, so on a link of B
/// bytes per second the subset takes about `max(S, T) + min(S, T) / pieces`, with S the
/// server's seconds and T = `subset_bytes / B` (one piece: S + T, nothing overlaps; many:
/// the slower of the two), and the whole dataset `dataset_bytes / B`. The difference
/// shrinks as B grows, so the whole is sooner above one link speed, [`break_even`] —
/// always, when it is no larger than the subset (reading it locally is left out).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub(crate) struct FetchEstimate {
    pub version: u32,
    pub subset_bytes: u64,
    /// Whether `subset_bytes` is the answer's exact size (a dense subset) or an estimate
    /// (points of a value query: the exact count times the bytes per row of a sample).
    pub subset_exact: bool,
    /// What downloading the whole dataset moves: the files it indexes in place, else the
    /// store's own files.
    pub dataset_bytes: u64,
    pub server_seconds: f64,
    /// The pieces the subset is cut and sent in.
    pub pieces: u64,
    /// Link speed (bits per second) above which the whole dataset comes sooner: 0 when it
    /// is always sooner, None when never (the server takes no time to cut the subset).
    pub whole_sooner_above_bits_per_s: Option<f64>,
}

impl FetchEstimate {
    /// 2 added `subset_exact` and `pieces`, and the overlap of cutting and sending.
    pub const VERSION: u32 = 2;

    pub fn new(subset_bytes: u64, subset_exact: bool, dataset_bytes: u64, server_seconds: f64, pieces: u64) -> Self {
        let pieces = pieces.max(1);
        FetchEstimate {
            version: Self::VERSION,
            subset_bytes,
            subset_exact,
            dataset_bytes,
            server_seconds,
            pieces,
            whole_sooner_above_bits_per_s: break_even(subset_bytes, dataset_bytes, server_seconds, pieces),
        }
    }
}

/// Seconds to download the subset and the whole dataset on a link of `bits_per_s`: the
/// subset `max(S, T) + min(S, T) / pieces` (see `FetchEstimate`), the whole its bytes over
/// the link. Every display of an estimate's times (the CLI's advice, the benchmark) is this.
pub fn fetch_seconds(
    subset_bytes: u64,
    dataset_bytes: u64,
    server_seconds: f64,
    pieces: u64,
    bits_per_s: f64,
) -> (f64, f64) {
    let bytes_per_s = bits_per_s / 8.0;
    let send = subset_bytes as f64 / bytes_per_s;
    let subset = server_seconds.max(send) + server_seconds.min(send) / pieces.max(1) as f64;
    (subset, dataset_bytes as f64 / bytes_per_s)
}

/// The link speed (bits/s) above which `dataset` bytes come sooner than `subset` bytes cut
/// in `seconds` and sent in `pieces` (see [`FetchEstimate`]). In t = 1/B the difference
/// `max(S, U t) + min(S, U t) / n - D t` falls linearly on each side of U t = S, so its one
/// root is on the side where it is consistent.
fn break_even(subset: u64, dataset: u64, seconds: f64, pieces: u64) -> Option<f64> {
    if dataset <= subset {
        return Some(0.0);
    }
    if seconds <= 0.0 {
        return None;
    }
    let (u, d, n) = (subset as f64, dataset as f64, pieces as f64);
    // Sending the smaller part: S + U t / n = D t.
    let t = seconds / (d - u / n);
    let t = if u * t < seconds { t } else { seconds / n / (d - u) };
    Some(8.0 / t)
}

/// The pieces a sample runs: [`SAMPLE_PIECES`] of `n`, spread evenly from the first to the
/// last.
fn sample_pieces(n: usize) -> Vec<usize> {
    let last = n.saturating_sub(1);
    let mut picked: Vec<usize> = (0..SAMPLE_PIECES).map(|k| k * last / (SAMPLE_PIECES - 1)).collect();
    picked.dedup();
    picked.retain(|&i| i < n);
    picked
}

/// An answer's time: the cost model's estimate of each of its pieces (`modelled`), scaled by
/// what a sample of them took when `run` (made as the route makes them) over the model's
/// estimate of that sample. The model prices reading, decoding and selecting, not a piece's
/// fixed cost nor making and encoding what it sends: on ERSST sampled point pieces took
/// 1.3-4x their estimate. Where the work lies, and so which pieces cost more, is still the
/// model's to say. (Dense subsets keep the model's time: sampled, they measured what the
/// segment cache happened to hold, 3x apart between two calls.)
fn calibrated(modelled: &[f64], mut run: impl FnMut(usize) -> Result<(), ApiError>) -> Result<f64, ApiError> {
    let picked = sample_pieces(modelled.len());
    let mut measured = 0f64;
    for &i in &picked {
        let t = Instant::now();
        run(i)?;
        measured += t.elapsed().as_secs_f64();
    }
    let sampled_model: f64 = picked.iter().map(|&i| modelled[i]).sum();
    Ok(if sampled_model > 0.0 {
        modelled.iter().sum::<f64>() * measured / sampled_model
    } else {
        measured / picked.len().max(1) as f64 * modelled.len() as f64
    })
}

/// A points or positions answer as the query route would send it, priced before it is cut:
/// - its rows: the exact count (from the index, cheap beside the points), at most `limit`
///   (the time then shrinks in proportion, as the route stops at the limit);
/// - its bytes: those rows times the bytes per row of the [`calibrated`] sample's pieces,
///   made into batches and encoded in `format` and `encoding` as the route does
///   (compression ratios of coordinates and values differ too much between datasets to
///   assume one);
/// - its time: [`calibrated`] over its pieces.
///
/// `batch` makes the route's batch of an answer; `target` is the route's piece size.
#[allow(clippy::too_many_arguments)]
pub(crate) fn points(
    session: &Session,
    reader: &StoreReader,
    query: &Query,
    row_bytes: usize,
    target: usize,
    format: Format,
    encoding: Encoding,
    limit: Option<u64>,
    batch: impl Fn(&strata_core::Answer) -> Result<RecordBatch, ApiError>,
) -> Result<FetchEstimate, ApiError> {
    let count = Query { output: Output::Count, variables: vec![], ..query.clone() };
    let all_rows = session.run(reader, &count)?.count;
    let rows = all_rows.min(limit.unwrap_or(u64::MAX));
    let pieces: Vec<Query> =
        boxes(&query.region, row_bytes, target).into_iter().map(|region| Query { region, ..query.clone() }).collect();
    let modelled =
        pieces.iter().map(|p| Ok(session.plan(reader, p)?.seconds())).collect::<Result<Vec<f64>, ApiError>>()?;
    let (mut sample_rows, mut sample_bytes) = (0u64, 0usize);
    let seconds = calibrated(&modelled, |i| {
        let answer = session.run(reader, &pieces[i])?;
        if answer.count > 0 {
            let b = batch(&answer)?;
            let mut enc = Encoder::new(format, &b.schema())?;
            let mut bytes = enc.write(&b)?.to_vec();
            bytes.extend_from_slice(&enc.finish()?);
            sample_bytes += encoding.compressed_len(&bytes)?;
            sample_rows += answer.count;
        }
        Ok(())
    })?;
    let per_row = if sample_rows > 0 { sample_bytes as f64 / sample_rows as f64 } else { row_bytes as f64 };
    let bytes = (rows as f64 * per_row).ceil() as u64;
    // A limit stops the route once it has its rows: about that share of the work.
    let seconds = if rows < all_rows { seconds * rows as f64 / all_rows as f64 } else { seconds };
    Ok(FetchEstimate::new(bytes, false, reader.manifest().download_bytes(), seconds, pieces.len() as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The subset's time on a link of `bits` per second, as [`FetchEstimate`] models it.
    fn subset_seconds(e: &FetchEstimate, bits: f64) -> f64 {
        fetch_seconds(e.subset_bytes, e.dataset_bytes, e.server_seconds, e.pieces, bits).0
    }

    #[test]
    fn samples_span_the_pieces_once_each() {
        assert_eq!(sample_pieces(0), Vec::<usize>::new());
        assert_eq!(sample_pieces(1), vec![0]);
        assert_eq!(sample_pieces(3), vec![0, 1, 2]);
        assert_eq!(sample_pieces(76), vec![0, 18, 37, 56, 75]);
        // The model's time of every piece, scaled by the sample's measured over modelled.
        let modelled = [1.0, 2.0, 3.0];
        let t = calibrated(&modelled, |_| Ok(())).unwrap();
        assert!((0.0..0.01).contains(&t), "{t}");
        assert_eq!(calibrated(&[], |_| Ok(())).unwrap(), 0.0);
        assert!(calibrated(&modelled, |_| Err(ApiError::bad_request("x"))).is_err());
    }

    #[test]
    fn the_break_even_is_where_both_downloads_take_as_long() {
        for (u, d, s, n) in [(10e6, 50e6, 0.5, 1), (10e6, 50e6, 0.5, 40), (40e6, 50e6, 0.05, 4), (1e3, 50e6, 2.0, 3)] {
            let e = FetchEstimate::new(u as u64, true, d as u64, s, n);
            let b = e.whole_sooner_above_bits_per_s.unwrap();
            let whole = d * 8.0 / b;
            assert!((subset_seconds(&e, b) - whole).abs() < 1e-9 * whole.max(1.0), "{e:?}");
            // Faster links favour the whole, slower ones the subset.
            assert!(subset_seconds(&e, b * 1.1) > d * 8.0 / (b * 1.1));
            assert!(subset_seconds(&e, b * 0.9) < d * 8.0 / (b * 0.9));
        }
        // One piece: nothing overlaps, the break-even of S + U/B = D/B.
        let e = FetchEstimate::new(10_000_000, true, 50_000_000, 0.5, 1);
        assert_eq!(e.whole_sooner_above_bits_per_s, Some(40_000_000.0 * 8.0 / 0.5));
        assert_eq!(FetchEstimate::new(60, false, 50, 0.5, 3).whole_sooner_above_bits_per_s, Some(0.0));
        assert_eq!(FetchEstimate::new(10, true, 50, 0.0, 3).whole_sooner_above_bits_per_s, None);
    }
}
