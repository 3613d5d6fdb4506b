//! Scores candidate chains on sample segments and picks one per objective (PStore's
//! sample-based selection, with a wider candidate set).

use crate::error::{CodecError, Result};
use crate::registry::{chain, parse_chain};
use crate::spec::{ElementContext, NumType};
use std::time::Instant;

/// One sample segment: little-endian elements and their shape.
#[derive(Debug, Clone)]
pub struct Sample {
    pub bytes: Vec<u8>,
    pub shape: Vec<usize>,
}

/// How a candidate did on the samples.
#[derive(Debug, Clone, PartialEq)]
pub struct Score {
    pub chain: String,
    pub ratio: f64,
    pub encode_mb_s: f64,
    pub decode_mb_s: f64,
}

/// What the user optimises for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Objective {
    /// Smallest stored size.
    Ratio,
    /// Fastest decoding among chains that compress at all (ratio at least 1.05).
    Speed,
    /// Fastest delivery of data read from storage at [`BALANCED_STORAGE_MB_S`] and
    /// decoded, with writing counted at [`BALANCED_WRITE_WEIGHT`] (data is written once and
    /// read many times): minimises 1/(ratio·B) + 1/decode_speed + w/encode_speed.
    Balanced,
}

/// Storage bandwidth assumed by [`Objective::Balanced`]: a sustained disk, NFS or
/// object-store stream per reader.
pub const BALANCED_STORAGE_MB_S: f64 = 200.0;
/// Weight of encoding time in [`Objective::Balanced`].
pub const BALANCED_WRITE_WEIGHT: f64 = 0.1;

impl std::str::FromStr for Objective {
    type Err = CodecError;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "ratio" => Ok(Objective::Ratio),
            "speed" => Ok(Objective::Speed),
            "balanced" => Ok(Objective::Balanced),
            other => Err(CodecError::InvalidSpec(format!("unknown objective '{other}' (ratio, speed, balanced)"))),
        }
    }
}

/// The lossless candidates tried for a type (shuffle is pointless for bytes).
pub fn candidates(dtype: NumType) -> Vec<&'static str> {
    // delta:0 is the previous element along the first axis: the previous time step for
    // record variables, which pays off most on time series. Deltas along two or three
    // axes in a row are a Lorenzo predictor (x - x[i-1] - x[j-1] + x[i-1,j-1], ...): on
    // smooth fields pcodec then sees residuals near zero.
    let mut c = vec![
        "zstd:3",
        "lz4",
        "pco:8",
        "pco:12",
        "delta+pco:8",
        "delta:0+pco:8",
        "delta:0+pco:12",
        "delta:-2+pco:12",
        "delta:-1+delta:-2+pco:12",
        "delta:0+delta:-1+delta:-2+pco:12",
    ];
    if dtype.size() > 1 {
        c.extend([
            "shuffle+zstd:1",
            "shuffle+zstd:3",
            "shuffle+zstd:9",
            "shuffle+zstd:19",
            "shuffle+lz4",
            "xor:0+shuffle+zstd:3",
            "xor:-1+shuffle+zstd:3",
            "delta:-1+shuffle+zstd:3",
            "delta:-1+shuffle+zstd:19",
            "delta:0+shuffle+zstd:9",
            "bytecols:3",
            "bytecols:19",
            "delta:0+bytecols:19",
            "xor:0+bytecols:3",
            "xor:0+shuffle+lz4",
        ]);
    }
    c
}

/// Compresses every sample with `text`, timing encode and decode (each repeated until it
/// has run for at least `min_seconds`), and checks that decoding gives the samples back
/// (within the chain's error bound, for lossy chains).
pub fn score(text: &str, dtype: NumType, samples: &[Sample], min_seconds: f64) -> Result<Score> {
    let c = chain(&parse_chain(text)?, ElementContext::new(dtype))?;
    let raw: usize = samples.iter().map(|s| s.bytes.len()).sum();
    let timed = |f: &mut dyn FnMut() -> Result<()>| -> Result<f64> {
        let (mut runs, start) = (0u32, Instant::now());
        while runs == 0 || (start.elapsed().as_secs_f64() < min_seconds && runs < 1000) {
            f()?;
            runs += 1;
        }
        Ok(start.elapsed().as_secs_f64() / runs as f64)
    };
    let mut encoded = Vec::new();
    let encode_s = timed(&mut || {
        encoded = samples.iter().map(|s| c.encode(&s.bytes, &s.shape)).collect::<Result<Vec<_>>>()?;
        Ok(())
    })?;
    let bound = c.capabilities().error_bound;
    let decode_s = timed(&mut || {
        for (s, e) in samples.iter().zip(&encoded) {
            let d = c.decode(e, s.bytes.len(), &s.shape)?;
            if !crate::lossy::holds_bound(bound, dtype, &s.bytes, &d) {
                return Err(CodecError::Encode { codec: "analyzer", detail: format!("{text} did not round-trip") });
            }
        }
        Ok(())
    })?;
    let stored: usize = encoded.iter().map(Vec::len).sum();
    let mb = raw as f64 / 1e6;
    Ok(Score {
        chain: text.to_string(),
        ratio: raw as f64 / stored.max(1) as f64,
        encode_mb_s: mb / encode_s.max(1e-9),
        decode_mb_s: mb / decode_s.max(1e-9),
    })
}

/// How good a score is for an objective; higher is better and values are comparable as
/// ratios ("10% better"): the compression ratio, the decode MB/s (chains that do not
/// compress count a millionth), or the effective MB/s of reading from storage and decoding.
pub fn objective_value(s: &Score, objective: Objective) -> f64 {
    match objective {
        Objective::Ratio => s.ratio,
        Objective::Speed => {
            if s.ratio >= 1.05 {
                s.decode_mb_s
            } else {
                s.decode_mb_s * 1e-6
            }
        }
        Objective::Balanced => {
            1.0 / (1.0 / (s.ratio * BALANCED_STORAGE_MB_S)
                + 1.0 / s.decode_mb_s
                + BALANCED_WRITE_WEIGHT / s.encode_mb_s)
        }
    }
}

/// Ratios within this fraction of the best are a tie for [`Objective::Ratio`]: a sample's
/// ratio estimates the whole variable's to about this much, so a longer chain that wins by
/// less is as likely to lose on the whole variable.
pub const RATIO_TIE: f64 = 0.005;

/// The index of the best score for `objective` (None for an empty list). For `Ratio`, the
/// chain with the fewest stages among those tied with the best ratio (see [`RATIO_TIE`]),
/// then the higher ratio.
pub fn choose(scores: &[Score], objective: Objective) -> Option<usize> {
    let key = |i: usize| objective_value(&scores[i], objective);
    let best = (0..scores.len()).max_by(|&a, &b| key(a).total_cmp(&key(b)))?;
    if objective != Objective::Ratio {
        return Some(best);
    }
    let floor = scores[best].ratio * (1.0 - RATIO_TIE);
    let stages = |i: usize| scores[i].chain.split('+').count();
    (0..scores.len())
        .filter(|&i| scores[i].ratio >= floor)
        .min_by(|&a, &b| stages(a).cmp(&stages(b)).then(scores[b].ratio.total_cmp(&scores[a].ratio)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(chain: &str, ratio: f64, decode: f64) -> Score {
        Score { chain: chain.into(), ratio, encode_mb_s: 100.0, decode_mb_s: decode }
    }

    #[test]
    fn objectives_pick_what_they_promise() {
        let scores = [s("small-slow", 3.0, 100.0), s("big-fast", 1.5, 3000.0), s("raw", 1.0, 20000.0)];
        assert_eq!(choose(&scores, Objective::Ratio), Some(0));
        assert_eq!(choose(&scores, Objective::Speed), Some(1), "raw does not compress: not a speed pick");
        // 1/(3*200)+1/100+0.1/100 = 0.0127 vs 1/(1.5*200)+1/3000+0.1/100 = 0.0047
        assert_eq!(choose(&scores, Objective::Balanced), Some(1));
        // A chain that encodes very slowly loses balanced even with the best ratio and decode.
        let slow_writer = Score { chain: "slow".into(), ratio: 4.0, encode_mb_s: 2.0, decode_mb_s: 5000.0 };
        assert_eq!(choose(&[slow_writer, s("ok", 2.0, 2000.0)], Objective::Balanced), Some(1));
        assert_eq!(choose(&[], Objective::Ratio), None);
        // A longer chain must win the ratio by more than the tie margin.
        let close = [s("delta:-1+pco:12", 2.005, 300.0), s("pco:12", 2.0, 300.0), s("zstd:3", 1.5, 900.0)];
        assert_eq!(choose(&close, Objective::Ratio), Some(1));
        let clear = [s("delta:-1+pco:12", 2.2, 300.0), s("pco:12", 2.0, 300.0)];
        assert_eq!(choose(&clear, Objective::Ratio), Some(0));
    }

    #[test]
    fn scoring_round_trips_and_measures() {
        let bytes: Vec<u8> = (0..4096u32).flat_map(|i| (i as f32 * 0.01).sin().to_le_bytes()).collect();
        let samples = [Sample { bytes, shape: vec![64, 64] }];
        for text in candidates(NumType::F32) {
            let sc = score(text, NumType::F32, &samples, 0.0).unwrap();
            assert!(sc.ratio > 0.5 && sc.encode_mb_s > 0.0 && sc.decode_mb_s > 0.0, "{sc:?}");
        }
    }
}
