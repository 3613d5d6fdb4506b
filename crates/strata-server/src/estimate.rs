//! Whether a download of part of a dataset, or of the whole of it, comes sooner: the
//! answer of `estimate=true` on the subset and query routes (`strata fetch` prints it).

use crate::encode::{Encoder, Format};
use crate::pieces::{boxes, Encoding};
use crate::ApiError;
use arrow::record_batch::RecordBatch;
use std::time::Instant;
use strata_core::{Output, Query, Session, StoreReader};

/// How many of a result's pieces are encoded to learn its bytes per row: the first, the
/// middle and the last, so a result whose density changes along its first dimension is
/// seen at both ends.
pub(crate) const SAMPLE_PIECES: usize = 3;

/// Whether to fetch a subset or the whole dataset: the subset's bytes, the whole
/// dataset's, and the server's time to cut the subset. Fetching the subset takes about
/// `server_seconds + subset_bytes / B` on a link of B bytes per second, the whole dataset
/// `dataset_bytes / B`: the whole is sooner on links faster than
/// `(dataset_bytes - subset_bytes) / server_seconds` — always, when it is no larger than
/// the subset (reading it locally is left out).
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
    /// Link speed (bits per second) above which the whole dataset comes sooner: 0 when it
    /// is always sooner, None when never (the server takes no time to cut the subset).
    pub whole_sooner_above_bits_per_s: Option<f64>,
}

impl FetchEstimate {
    /// 2 added `subset_exact`.
    pub const VERSION: u32 = 2;

    pub fn new(subset_bytes: u64, subset_exact: bool, dataset_bytes: u64, server_seconds: f64) -> Self {
        let above = if dataset_bytes <= subset_bytes {
            Some(0.0)
        } else if server_seconds > 0.0 {
            Some((dataset_bytes - subset_bytes) as f64 * 8.0 / server_seconds)
        } else {
            None
        };
        FetchEstimate {
            version: Self::VERSION,
            subset_bytes,
            subset_exact,
            dataset_bytes,
            server_seconds,
            whole_sooner_above_bits_per_s: above,
        }
    }
}

/// A points or positions answer as the query route would send it, priced before it is cut:
/// - its rows: the exact count (from the index, cheap beside the points), at most `limit`;
/// - its bytes: those rows times the bytes per row of [`SAMPLE_PIECES`] of its pieces, made
///   into batches and encoded in `format` and `encoding` as the route does (compression
///   ratios of coordinates and values differ too much between datasets to assume one);
/// - its time: the cost model's estimate of each of its pieces, scaled by what the sampled
///   pieces took (run, batches, encoding) over the model's estimate of them. The model
///   prices reading and selecting, not a piece's fixed cost nor making and encoding its
///   rows: on ERSST the sampled pieces took 3-4x their estimate. Where the selected
///   elements lie, and so which pieces cost more, is still the model's to say.
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
    let rows = session.run(reader, &count)?.count.min(limit.unwrap_or(u64::MAX));
    let pieces: Vec<Query> =
        boxes(&query.region, row_bytes, target).into_iter().map(|region| Query { region, ..query.clone() }).collect();
    let modelled =
        pieces.iter().map(|p| Ok(session.plan(reader, p)?.seconds())).collect::<Result<Vec<f64>, ApiError>>()?;
    let mut picked: Vec<usize> = (0..SAMPLE_PIECES).map(|k| k * pieces.len().saturating_sub(1) / 2).collect();
    picked.dedup();
    picked.retain(|&i| i < pieces.len());
    let (mut sample_rows, mut sample_bytes, mut measured) = (0u64, 0usize, 0f64);
    for &i in &picked {
        let t = Instant::now();
        let answer = session.run(reader, &pieces[i])?;
        if answer.count > 0 {
            let b = batch(&answer)?;
            let mut enc = Encoder::new(format, &b.schema())?;
            let mut bytes = enc.write(&b)?.to_vec();
            bytes.extend_from_slice(&enc.finish()?);
            sample_bytes += encoding.compressed_len(&bytes)?;
            sample_rows += answer.count;
        }
        measured += t.elapsed().as_secs_f64();
    }
    let per_row = if sample_rows > 0 { sample_bytes as f64 / sample_rows as f64 } else { row_bytes as f64 };
    let bytes = (rows as f64 * per_row).ceil() as u64;
    let sampled_model: f64 = picked.iter().map(|&i| modelled[i]).sum();
    let seconds = if sampled_model > 0.0 {
        modelled.iter().sum::<f64>() * measured / sampled_model
    } else {
        measured / picked.len().max(1) as f64 * pieces.len() as f64
    };
    Ok(FetchEstimate::new(bytes, false, reader.manifest().download_bytes(), seconds))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_break_even_follows_the_sizes_and_the_time() {
        let e = FetchEstimate::new(10_000_000, true, 50_000_000, 0.5);
        assert_eq!(e.whole_sooner_above_bits_per_s, Some(40_000_000.0 * 8.0 / 0.5));
        assert_eq!(FetchEstimate::new(60, false, 50, 0.5).whole_sooner_above_bits_per_s, Some(0.0));
        assert_eq!(FetchEstimate::new(10, true, 50, 0.0).whole_sooner_above_bits_per_s, None);
    }
}
