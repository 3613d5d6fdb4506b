//! Scores candidate chains on sample segments and picks one per objective (PStore's
//! sample-based selection, with a wider candidate set).

use crate::chain::CodecChain;
use crate::error::{CodecError, Result};
use crate::registry::{chain, parse_chain};
use crate::spec::{ElementContext, NumType, Speed};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Instant;

/// One sample segment: little-endian elements and their shape.
#[derive(Debug, Clone)]
pub struct Sample {
    pub bytes: Vec<u8>,
    pub shape: Vec<usize>,
}

/// How a candidate did on the samples: its ratio, measured; its speed as the codecs declare
/// it ([`Speed`], what objectives rank by) and, when timed, as measured here.
#[derive(Debug, Clone, PartialEq)]
pub struct Score {
    pub chain: String,
    pub ratio: f64,
    pub lossless: bool,
    pub nominal: Speed,
    pub measured: Option<Speed>,
}

/// What the user optimises for. Every objective ranks chains by the ratio measured on the
/// sample and the speeds the codecs declare, never by timings: the same data gets the same
/// plan on a busy machine and an idle one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", try_from = "String")]
pub enum Objective {
    /// Smallest stored size.
    Ratio,
    /// Fastest decoding among chains that compress at all (ratio at least 1.05).
    Speed,
    /// The fastest declared encoding among chains that store less than netCDF4's zlib 4 +
    /// shuffle by [`BALANCED_MARGIN`] on the same sample and decode at
    /// [`BALANCED_MIN_DECODE_MB_S`] and encode at [`BALANCED_MIN_ENCODE_MB_S`] per core or
    /// faster ([`choose_balanced`]); when none does, the smallest stored size among chains
    /// within those floors. A variable stored whole, and any with an error bound, gets the
    /// smallest among the floors' chains (`plan::plan` says why; error-bounded lossy chains
    /// are held to the encoding floor alone).
    Balanced,
}

/// Decoding floor of [`Objective::Balanced`], MB/s per core: reading stays faster than the
/// storage most users read from.
pub const BALANCED_MIN_DECODE_MB_S: f64 = 1_000.0;
/// Encoding floor of [`Objective::Balanced`], MB/s per core: import keeps up with a disk.
pub const BALANCED_MIN_ENCODE_MB_S: f64 = 150.0;
/// Encoding floor of [`Objective::Balanced`] for a variable small enough to be stored whole
/// ([`Scale::Small`]), MB/s per core: such a variable, at most 1 MiB, is encoded in 8 ms at
/// the slowest chain this admits. Set so that
/// shuffled zstd level 9 (declared at its measured 140) stays among a small variable's
/// candidates, as it was before its speed was declared as measured: it finds repeats in a
/// whole variable that blocks cannot show (WRF's base pressure: 2.4x netCDF4's size
/// without it); pcodec level 8 on 4-byte numbers (115) stays out.
pub const SMALL_MIN_ENCODE_MB_S: f64 = 125.0;

/// How much of a variable a plan is for, which sets [`Objective::Balanced`]'s encoding
/// floor: a variable streamed in blocks ([`BALANCED_MIN_ENCODE_MB_S`]), or one small enough
/// to be stored whole, planned for the smallest ([`SMALL_MIN_ENCODE_MB_S`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scale {
    #[default]
    Stream,
    Small,
}

impl Scale {
    fn min_encode_mb_s(self) -> f64 {
        match self {
            Scale::Stream => BALANCED_MIN_ENCODE_MB_S,
            Scale::Small => SMALL_MIN_ENCODE_MB_S,
        }
    }
}
/// How much less than the reference (`reference::reference_ratio`: zlib 4 + shuffle on the
/// same sample) a chain must store to be a balanced choice by speed. A few sample blocks
/// misjudge how a quick chain compares with netCDF-4's zlib on the whole variable (whose
/// chunks are not the store's blocks): with 1.03, four of the 34 variables of
/// `bench/results/import.md` came out 0.2-9% larger than netCDF4's; with 1.10, two; with
/// 1.15, none.
pub const BALANCED_MARGIN: f64 = 1.15;

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

impl TryFrom<String> for Objective {
    type Error = CodecError;
    fn try_from(s: String) -> Result<Self> {
        s.parse()
    }
}

impl std::fmt::Display for Objective {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Objective::Ratio => "ratio",
            Objective::Speed => "speed",
            Objective::Balanced => "balanced",
        })
    }
}

impl Objective {
    pub const ALL: [Objective; 3] = [Objective::Ratio, Objective::Speed, Objective::Balanced];
}

/// What a plan is made for: the user's objective, at the scale of the variable (which sets
/// balanced's encoding floor). Candidates, values and the choice all read both from here,
/// so a plan and the check on appended data cannot disagree on either.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Goal {
    pub objective: Objective,
    pub scale: Scale,
}

/// An objective alone is a goal for a variable streamed in blocks.
impl From<Objective> for Goal {
    fn from(objective: Objective) -> Self {
        Goal { objective, scale: Scale::Stream }
    }
}

impl Goal {
    pub fn new(objective: Objective, scale: Scale) -> Self {
        Goal { objective, scale }
    }

    /// Whether a chain of this speed can be this goal's choice at all.
    pub fn admits(self, nominal: Speed, lossless: bool) -> bool {
        match self.objective {
            Objective::Balanced => {
                nominal.encode_mb_s >= self.scale.min_encode_mb_s()
                    && (!lossless || nominal.decode_mb_s >= BALANCED_MIN_DECODE_MB_S)
            }
            Objective::Ratio | Objective::Speed => true,
        }
    }

    /// The candidates this goal can choose among for `dtype` (lossy ones only with a
    /// bound): chains its speed floors rule out are not even tried, which keeps planning
    /// quick.
    pub fn candidates(self, dtype: NumType, bound: Option<&str>) -> Result<Vec<String>> {
        let mut all: Vec<String> = candidates(dtype).into_iter().map(String::from).collect();
        if let Some(b) = bound {
            all.extend(lossy_candidates(dtype, b));
        }
        let mut kept = Vec::new();
        for text in all {
            let c = chain(&parse_chain(&text)?, ElementContext::new(dtype))?;
            if self.admits(c.speed(), c.capabilities().lossless) {
                kept.push(text);
            }
        }
        Ok(kept)
    }

    /// How good a score is; higher is better and values are comparable as ratios ("10%
    /// better"): the compression ratio; the declared decode MB/s (chains that do not
    /// compress count a millionth); for balanced, the ratio (a millionth of it for chains
    /// below its speed floors).
    pub fn value(self, s: &Score) -> f64 {
        let penalised = |ok: bool, v: f64| if ok { v } else { v * 1e-6 };
        match self.objective {
            Objective::Ratio => s.ratio,
            Objective::Speed => penalised(s.ratio >= 1.05, s.nominal.decode_mb_s),
            Objective::Balanced => penalised(self.admits(s.nominal, s.lossless), s.ratio),
        }
    }

    /// The index of the best score (None for an empty list). Near-ties (see [`RATIO_TIE`],
    /// [`SPEED_TIE`]) go, for balanced, to the faster declared encode, then as for ratio:
    /// the chain with the fewest stages, then the faster declared decode; for speed, to
    /// the better ratio.
    pub fn choose(self, scores: &[Score]) -> Option<usize> {
        let key = |i: usize| self.value(&scores[i]);
        let best = (0..scores.len()).max_by(|&a, &b| key(a).total_cmp(&key(b)))?;
        let speed = self.objective == Objective::Speed;
        let floor = key(best) * (1.0 - if speed { SPEED_TIE } else { RATIO_TIE });
        let tied = (0..scores.len()).filter(|&i| key(i) >= floor);
        if speed {
            return tied.max_by(|&a, &b| scores[a].ratio.total_cmp(&scores[b].ratio));
        }
        let stages = |i: usize| scores[i].chain.split('+').count();
        // Balanced settles a tie for the writer's time first: between pco:6 and pco:8 the
        // one that encodes twice as fast, between pcodec alone and after a difference (its
        // delta search off) the latter (on a 1 MB variable, encoding is most of an import's
        // time); every chain it ranks already decodes above its floor.
        let balanced = self.objective == Objective::Balanced;
        let encode = |i: usize| if balanced { scores[i].nominal.encode_mb_s } else { 0.0 };
        tied.min_by(|&a, &b| {
            encode(b)
                .total_cmp(&encode(a))
                .then(stages(a).cmp(&stages(b)))
                .then(scores[b].nominal.decode_mb_s.total_cmp(&scores[a].nominal.decode_mb_s))
                .then(key(b).total_cmp(&key(a)))
        })
    }

    /// Whether plans for this goal measure the reference (zlib 4 + shuffle) on their sample
    /// and choose by it ([`choose_balanced`]): balanced, for a variable streamed in blocks,
    /// with no error bound (a bounded plan may choose lossy chains, which the reference
    /// does not compare with).
    pub fn measures_reference(self, bounded: bool) -> bool {
        self.objective == Objective::Balanced && self.scale == Scale::Stream && !bounded
    }

    /// The choice given the reference ratio measured on the same sample, if any
    /// ([`measures_reference`](Self::measures_reference)): [`choose_balanced`] for
    /// balanced, else [`choose`](Self::choose).
    pub fn choose_with(self, scores: &[Score], reference: Option<f64>) -> Option<usize> {
        match (self.objective, reference) {
            (Objective::Balanced, Some(r)) => choose_balanced(scores, r),
            _ => self.choose(scores),
        }
    }
}

/// The lossless candidates tried for a type (shuffle is pointless for bytes).
pub fn candidates(dtype: NumType) -> Vec<&'static str> {
    // delta:0 is the previous element along the first axis: the previous time step for
    // record variables, which pays off most on time series. Deltas along two or three
    // axes in a row are a Lorenzo predictor (x - x[i-1] - x[j-1] + x[i-1,j-1], ...): on
    // smooth fields pcodec then sees residuals near zero. The pco:6 forms are the ones
    // fast enough to encode for the balanced objective (on CESM TREFHT: 2.8% less ratio
    // than pco:8 at twice the speed); pco:12 gains the last percent slowly.
    let mut c = vec![
        "zstd:3",
        "lz4",
        "pco:6",
        "pco:8",
        "pco:12",
        "delta+pco:6",
        "delta:0+pco:6",
        "delta:0+pco:12",
        "delta:-2+pco:6",
        "delta:-2+pco:12",
        "delta:-1+delta:-2+pco:6",
        "delta:-1+delta:-2+pco:12",
        "delta:0+delta:-1+delta:-2+pco:6",
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
            "delta:0+shuffle+zstd:3",
            "delta:-1+shuffle+zstd:3",
            "delta:-1+shuffle+zstd:19",
            "delta:0+shuffle+zstd:9",
            "bytecols:3",
            "bytecols:19",
            "delta:0+bytecols:3",
            "delta:0+bytecols:19",
            "xor:0+bytecols:3",
            // Along the rows: on ocean-model integers and level-by-level fields each byte
            // plane of the residual compresses better alone than shuffled into one stream
            // (whole-variable ratio +1-10% on NorKyst, Nordic-4km and a 17-level grid).
            "xor:-1+bytecols:3",
            "delta:-1+bytecols:3",
            // The Lorenzo predictor before byte columns: on smooth float fields whose low
            // mantissa bytes still compress (a 17-level temperature grid: 4% smaller).
            "delta:-1+delta:-2+bytecols:3",
            // Level 4 inside the columns: the 17-level grid's temperature 2.7% smaller (no
            // longer larger than netCDF4's zlib), encoded there at 156 MB/s against level
            // 3's 350; level 5 gains 0.5% more at 119, under balanced's floor. Offered for
            // this chain alone: on the ocean models' int16 fields level 4 stores 0.2-1% more
            // than level 3 in all three row-wise chains.
            "delta:-1+delta:-2+bytecols:4",
            "xor:0+shuffle+lz4",
        ]);
    }
    c
}

/// The error-bounded lossy candidates for `bound` (`abs=E` or `rel=E`); none for integers.
pub fn lossy_candidates(dtype: NumType, bound: &str) -> Vec<String> {
    if !dtype.is_float() {
        return vec![];
    }
    ["sz", "zfp"].iter().map(|b| format!("{b}:{bound}")).collect()
}

/// Compresses every sample with `text` once: the ratio, and the declared speed. A lossy
/// chain's samples are also decoded and must hold its bound. What planning uses.
pub fn evaluate(text: &str, dtype: NumType, samples: &[Sample]) -> Result<Score> {
    score(text, dtype, samples, None)
}

/// Like [`evaluate`], and also decodes every sample (which must come back equal, or within
/// the bound) and times encode and decode (each repeated until it has run for at least
/// `min_seconds`): what `strata analyze` shows beside the declared speeds.
pub fn measure(text: &str, dtype: NumType, samples: &[Sample], min_seconds: f64) -> Result<Score> {
    score(text, dtype, samples, Some(min_seconds))
}

/// [`evaluate`] of every chain of `texts` on the same samples, each result in its place,
/// in parallel. Lossless chains whose transforms hand their backend the same bytes (a delta
/// along an axis one element long, a delta along the one axis of a series spelled two
/// ways) share one compression, which gives them the same output: several candidates on a
/// series or on blocks with an axis one long. Each chain is still transformed, then
/// compressed at once while its bytes are in cache; the staged bytes of each compression
/// stay until the end (candidates times the samples' bytes, a few MB), to be compared with
/// the next chains'. A chain whose twin is being compressed on another thread waits for it.
pub fn evaluate_each(texts: &[String], dtype: NumType, samples: &[Sample]) -> Vec<Result<Score>> {
    evaluate_sharing(texts, dtype, samples).0
}

/// A compression an [`Evaluation`] runs, or ran: what went in, and how many bytes came out
/// (set once, by the first chain that needed it; its twins wait for it).
struct Compressed<'a> {
    backend: String,
    staged: Vec<Cow<'a, [u8]>>,
    stored: OnceLock<Result<usize>>,
}

/// [`evaluate_each`], and how many compressions it ran.
fn evaluate_sharing(texts: &[String], dtype: NumType, samples: &[Sample]) -> (Vec<Result<Score>>, usize) {
    let e = Evaluation::new(dtype, samples);
    (e.each(texts), e.runs())
}

/// A lock's data; a thread that panicked while holding one of planning's locks left nothing
/// half-written (each holds a list that is only pushed to).
pub(crate) fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Candidates scored on the same samples, all at once ([`Evaluation::each`]) or one by one
/// from several threads ([`Evaluation::one`]), sharing compressions among them.
pub(crate) struct Evaluation<'a> {
    dtype: NumType,
    samples: &'a [Sample],
    compressions: Mutex<Vec<Arc<Compressed<'a>>>>,
}

impl<'a> Evaluation<'a> {
    pub(crate) fn new(dtype: NumType, samples: &'a [Sample]) -> Self {
        Self { dtype, samples, compressions: Mutex::new(Vec::new()) }
    }

    /// Every chain of `texts` scored, each result in its place, in parallel.
    pub(crate) fn each(&self, texts: &[String]) -> Vec<Result<Score>> {
        texts.par_iter().map(|text| self.one(text)).collect()
    }

    /// The score of the chain `text`; its compression shared with any chain that hands the
    /// backend the same bytes.
    pub(crate) fn one(&self, text: &str) -> Result<Score> {
        let (dtype, samples) = (self.dtype, self.samples);
        let c = chain(&parse_chain(text)?, ElementContext::new(dtype))?;
        if !c.capabilities().lossless {
            return score(text, dtype, samples, None);
        }
        let staged = samples.iter().map(|s| c.staged(&s.bytes, &s.shape)).collect::<Result<Vec<_>>>()?;
        let backend = c.backend_key();
        let entry = {
            let mut all = locked(&self.compressions);
            match all.iter().find(|d| d.backend == backend && d.staged == staged) {
                Some(d) => Arc::clone(d),
                None => {
                    let d = Arc::new(Compressed { backend, staged, stored: OnceLock::new() });
                    all.push(Arc::clone(&d));
                    d
                }
            }
        };
        // Codecs never call into rayon, so a thread waiting here cannot be the one that
        // would have to finish the compression it waits for.
        let stored = entry.stored.get_or_init(|| {
            entry
                .staged
                .iter()
                .zip(samples)
                .map(|(p, s)| c.encode_staged(p, &s.shape).map(|e| e.len()))
                .sum::<Result<usize>>()
        });
        let raw: usize = samples.iter().map(|s| s.bytes.len()).sum();
        stored.clone().map(|stored| lossless_score(text, &c, raw, stored))
    }

    /// How many compressions were run.
    pub(crate) fn runs(&self) -> usize {
        locked(&self.compressions).len()
    }
}

/// A lossless chain's planning score: the ratio measured, the speed declared.
fn lossless_score(text: &str, c: &CodecChain, raw: usize, stored: usize) -> Score {
    Score {
        chain: text.to_string(),
        ratio: raw as f64 / stored.max(1) as f64,
        lossless: true,
        nominal: c.speed(),
        measured: None,
    }
}

fn score(text: &str, dtype: NumType, samples: &[Sample], min_seconds: Option<f64>) -> Result<Score> {
    let c = chain(&parse_chain(text)?, ElementContext::new(dtype))?;
    let raw: usize = samples.iter().map(|s| s.bytes.len()).sum();
    let timed = |f: &mut dyn FnMut() -> Result<()>| -> Result<f64> {
        let (mut runs, start) = (0u32, Instant::now());
        while runs == 0 || (start.elapsed().as_secs_f64() < min_seconds.unwrap_or(0.0) && runs < 1000) {
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
    let caps = c.capabilities();
    if min_seconds.is_none() && caps.lossless {
        // Planning: a lossless chain's round trip is the codecs' own tested promise, and
        // decoding every candidate would cost a third of the planning time.
        return Ok(lossless_score(text, &c, raw, encoded.iter().map(Vec::len).sum()));
    }
    for (s, e) in samples.iter().zip(&encoded) {
        let d = c.decode(e, s.bytes.len(), &s.shape)?;
        if !crate::lossy::holds_bound(caps.error_bound, dtype, &s.bytes, &d) {
            return Err(CodecError::Encode { codec: "analyzer", detail: format!("{text} did not round-trip") });
        }
    }
    // Timed apart from the check above, which is no part of reading (a lossy chain's bound
    // test converts every element to f64).
    let decode_s = timed(&mut || {
        for (s, e) in samples.iter().zip(&encoded) {
            std::hint::black_box(c.decode(e, s.bytes.len(), &s.shape)?);
        }
        Ok(())
    })?;
    let stored: usize = encoded.iter().map(Vec::len).sum();
    let mb = raw as f64 / 1e6;
    Ok(Score {
        chain: text.to_string(),
        ratio: raw as f64 / stored.max(1) as f64,
        lossless: caps.lossless,
        nominal: c.speed(),
        measured: min_seconds.map(|_| Speed::new(mb / encode_s.max(1e-9), mb / decode_s.max(1e-9))),
    })
}

/// Ratios within this fraction of the best are a tie for [`Objective::Ratio`] and
/// [`Objective::Balanced`]: a sample's ratio estimates the whole variable's to about this
/// much, so a longer chain that wins by less is as likely to lose on the whole variable.
pub const RATIO_TIE: f64 = 0.005;
/// Declared decode speeds within this fraction of the fastest are a tie for
/// [`Objective::Speed`]; the better ratio wins it.
pub const SPEED_TIE: f64 = 0.10;

/// [`Objective::Balanced`]'s choice given the reference ratio on the same sample: among
/// chains within its speed floors that store less than the reference by [`BALANCED_MARGIN`],
/// the fastest declared encoder (ties: the better ratio, then fewer stages); when none
/// does, [`Goal::choose`]'s smallest. A person converting from netCDF-4 never sees the archive
/// grow, and gets it written as quickly as that allows.
pub fn choose_balanced(scores: &[Score], reference: f64) -> Option<usize> {
    let stages = |i: usize| scores[i].chain.split('+').count();
    (0..scores.len())
        .filter(|&i| meets_reference(&scores[i], reference))
        .max_by(|&a, &b| {
            let (x, y) = (&scores[a], &scores[b]);
            x.nominal
                .encode_mb_s
                .total_cmp(&y.nominal.encode_mb_s)
                .then(x.ratio.total_cmp(&y.ratio))
                .then(stages(b).cmp(&stages(a)))
        })
        .or_else(|| Goal::from(Objective::Balanced).choose(scores))
}

/// Whether `score` is fast and small enough to be [`choose_balanced`]'s pick by speed.
pub fn meets_reference(score: &Score, reference: f64) -> bool {
    score.lossless
        && Goal::from(Objective::Balanced).admits(score.nominal, true)
        && score.ratio >= reference * BALANCED_MARGIN
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(chain: &str, ratio: f64, encode: f64, decode: f64) -> Score {
        Score { chain: chain.into(), ratio, lossless: true, nominal: Speed::new(encode, decode), measured: None }
    }

    #[test]
    fn objectives_pick_what_they_promise() {
        let scores = [
            s("small-slow", 3.0, 50.0, 1300.0),
            s("mid", 2.0, 700.0, 2000.0),
            s("big-fast", 1.5, 2500.0, 5000.0),
            s("raw", 1.0, 50000.0, 50000.0),
        ];
        assert_eq!(Goal::from(Objective::Ratio).choose(&scores), Some(0));
        assert_eq!(Goal::from(Objective::Speed).choose(&scores), Some(2), "raw does not compress: not a speed pick");
        // small-slow encodes below the floor: the best ratio among the rest.
        assert_eq!(Goal::from(Objective::Balanced).choose(&scores), Some(1));
        // A slow decoder is out of balanced too, unless it is lossy (a bound was asked for).
        let mut lossy = s("sz:abs=0.1", 8.0, 180.0, 260.0);
        assert_eq!(Goal::from(Objective::Balanced).choose(&[lossy.clone(), s("ok", 2.0, 700.0, 2000.0)]), Some(1));
        lossy.lossless = false;
        assert_eq!(Goal::from(Objective::Balanced).choose(&[lossy, s("ok", 2.0, 700.0, 2000.0)]), Some(0));
        assert_eq!(Goal::from(Objective::Ratio).choose(&[]), None);
        // A longer chain must win the ratio by more than the tie margin.
        let close = [s("delta:-1+pco:12", 2.005, 45.0, 1300.0), s("pco:12", 2.0, 45.0, 1300.0)];
        assert_eq!(Goal::from(Objective::Ratio).choose(&close), Some(1));
        let clear = [s("delta:-1+pco:12", 2.2, 45.0, 1300.0), s("pco:12", 2.0, 45.0, 1300.0)];
        assert_eq!(Goal::from(Objective::Ratio).choose(&clear), Some(0));
        // Balanced: a tie goes to the faster encoder; ratio keeps the better ratio.
        let levels = [s("pco:8", 1.362, 230.0, 2600.0), s("pco:6", 1.360, 400.0, 2600.0)];
        assert_eq!(Goal::from(Objective::Balanced).choose(&levels), Some(1));
        assert_eq!(Goal::from(Objective::Ratio).choose(&levels), Some(0));
        // Even against a shorter chain: PRECC's pcodec alone (its delta search on) and after
        // a difference along the last axis (off), as declared; ratio keeps the shorter one.
        let off = |text: &str| chain(&parse_chain(text).unwrap(), ElementContext::new(NumType::F32)).unwrap().speed();
        let (alone, after) = (off("pco:6"), off("delta+pco:6"));
        assert!(after.encode_mb_s > 1.2 * alone.encode_mb_s, "{alone:?} {after:?}");
        let precc = [
            s("pco:6", 1.379, alone.encode_mb_s, alone.decode_mb_s),
            s("delta+pco:6", 1.378, after.encode_mb_s, after.decode_mb_s),
        ];
        assert_eq!(Goal::from(Objective::Balanced).choose(&precc), Some(1));
        assert_eq!(Goal::from(Objective::Ratio).choose(&precc), Some(0));
        // Near-equal decoders: the better ratio is the speed pick.
        let fast = [s("lz4", 1.2, 2500.0, 5000.0), s("shuffle+lz4", 1.6, 2000.0, 4600.0)];
        assert_eq!(Goal::from(Objective::Speed).choose(&fast), Some(1));
    }

    #[test]
    fn balanced_beats_the_reference_as_quickly_as_it_can() {
        let scores = [
            s("pco:6", 3.0, 400.0, 2600.0),
            s("shuffle+zstd:3", 2.4, 636.0, 1875.0),
            s("bytecols:3", 2.5, 490.0, 3000.0),
            s("lz4", 1.5, 2500.0, 5000.0),
            s("shuffle+zstd:1", 2.3, 797.0, 1875.0),
        ];
        // zlib reached 2.0: 2.3 is enough (>= 2.0 x 1.15), and zstd:1 writes fastest.
        assert_eq!(choose_balanced(&scores, 2.0), Some(4));
        // zlib reached 2.05: 2.3 is not enough (< 2.3575); the quickest of those that are.
        assert_eq!(choose_balanced(&scores, 2.05), Some(1));
        assert_eq!(choose_balanced(&scores, 2.1), Some(2));
        // Nothing beats zlib by the margin: the smallest, as `choose` would.
        assert_eq!(choose_balanced(&scores, 2.9), Goal::from(Objective::Balanced).choose(&scores));
        assert_eq!(choose_balanced(&scores, 2.9), Some(0));
        // Declared equally fast: the better ratio.
        let twins = [s("xor:0+shuffle+zstd:3", 2.4, 614.0, 1714.0), s("delta:0+shuffle+zstd:3", 2.6, 614.0, 1714.0)];
        assert_eq!(choose_balanced(&twins, 2.0), Some(1));
        // A lossy chain is never a choice by speed (the reference is lossless), nor one
        // below the floors.
        let mut lossy = s("sz:abs=0.1", 9.0, 900.0, 1200.0);
        lossy.lossless = false;
        assert!(!meets_reference(&lossy, 1.0));
        assert!(!meets_reference(&s("slow", 9.0, 100.0, 2000.0), 1.0));
        assert_eq!(choose_balanced(&[], 1.0), None);
    }

    #[test]
    fn balanced_candidates_meet_its_floors() {
        for t in [NumType::F32, NumType::F64, NumType::I16, NumType::U8] {
            let kept = Goal::from(Objective::Balanced).candidates(t, None).unwrap();
            assert!(!kept.iter().any(|c| c.contains("zstd:19")), "{kept:?}");
            for text in &kept {
                let c = chain(&parse_chain(text).unwrap(), ElementContext::new(t)).unwrap();
                assert!(c.speed().decode_mb_s >= BALANCED_MIN_DECODE_MB_S, "{text}");
                assert!(c.speed().encode_mb_s >= BALANCED_MIN_ENCODE_MB_S, "{text}");
            }
        }
        // pcodec's pco:6 encodes fast enough for 4- and 8-byte floats, pco:8 for neither,
        // and neither level decodes 2-byte integers fast enough.
        let f32s = Goal::from(Objective::Balanced).candidates(NumType::F32, None).unwrap();
        assert!(f32s.contains(&"pco:6".to_string()) && !f32s.contains(&"pco:8".to_string()), "{f32s:?}");
        let f64s = Goal::from(Objective::Balanced).candidates(NumType::F64, None).unwrap();
        assert!(f64s.contains(&"delta:0+delta:-1+delta:-2+pco:6".to_string()) && !f64s.contains(&"pco:8".to_string()));
        assert!(!Goal::from(Objective::Balanced)
            .candidates(NumType::I16, None)
            .unwrap()
            .iter()
            .any(|c| c.contains("pco")));
        let lossy = Goal::from(Objective::Balanced).candidates(NumType::F32, Some("abs=0.01")).unwrap();
        assert!(lossy.contains(&"sz:abs=0.01".to_string()), "{lossy:?}");
    }

    #[test]
    fn a_small_variable_admits_zstd_level_9_and_nothing_else_more() {
        // Level 9 encodes under balanced's floor: streamed, no plan tries it; a variable
        // small enough to be stored whole tries it on top of the streamed candidates, and
        // may choose it.
        for t in [NumType::F32, NumType::F64, NumType::I16, NumType::U8] {
            let stream = Goal::from(Objective::Balanced).candidates(t, None).unwrap();
            let small = Goal::new(Objective::Balanced, Scale::Small).candidates(t, None).unwrap();
            assert!(!stream.iter().any(|c| c.contains("zstd:9")), "{stream:?}");
            let more: Vec<&String> = small.iter().filter(|c| !stream.contains(c)).collect();
            let expected: &[&str] = if t.size() > 1 { &["shuffle+zstd:9", "delta:0+shuffle+zstd:9"] } else { &[] };
            assert_eq!(more, expected, "{t:?}");
            assert!(stream.iter().all(|c| small.contains(c)), "{t:?}");
        }
        let level9 = s("shuffle+zstd:9", 3.0, 137.0, 1875.0);
        let level3 = s("shuffle+zstd:3", 2.9, 636.0, 1875.0);
        let scores = [level3, level9];
        assert_eq!(Goal::from(Objective::Balanced).choose(&scores), Some(0), "streamed: under the floor");
        assert_eq!(Goal::new(Objective::Balanced, Scale::Small).choose(&scores), Some(1), "small: the smallest");
        // The other objectives have no floor to lower.
        for o in [Objective::Ratio, Objective::Speed] {
            assert_eq!(Goal::new(o, Scale::Small).choose(&scores), Goal::from(o).choose(&scores));
        }
    }

    fn texts(dtype: NumType, bound: Option<&str>) -> Vec<String> {
        let mut t: Vec<String> = candidates(dtype).into_iter().map(String::from).collect();
        t.extend(bound.map(|b| lossy_candidates(dtype, b)).unwrap_or_default());
        t.push("nosuch:3".into());
        t
    }

    fn field(shape: &[usize], f: impl Fn(usize) -> f64) -> Sample {
        let n: usize = shape.iter().product();
        Sample { bytes: (0..n).flat_map(|i| (f(i) as f32).to_le_bytes()).collect(), shape: shape.to_vec() }
    }

    #[test]
    fn chains_that_share_a_compression_score_as_each_alone() {
        let wave = |i: usize| ((i as f64) * 0.013).sin() * 40.0 + (i % 7) as f64 * 0.01;
        let cases = [
            vec![field(&[4096], wave), field(&[4096], |i| wave(i + 999))],
            vec![field(&[1, 48, 64], wave)],
            vec![field(&[12, 14, 16], wave)],
            vec![field(&[8, 8, 8], |_| 273.15)],
        ];
        for samples in &cases {
            let texts = texts(NumType::F32, Some("abs=0.01"));
            let each = evaluate_each(&texts, NumType::F32, samples);
            assert_eq!(each.len(), texts.len());
            for (text, got) in texts.iter().zip(each) {
                assert_eq!(got, evaluate(text, NumType::F32, samples), "{text} on {:?}", samples[0].shape);
            }
        }
        // Integers and doubles too, with bytes that repeat along the leading axis.
        for t in [NumType::I16, NumType::F64] {
            let n = 2 * 40 * 50;
            let bytes: Vec<u8> = (0..n * t.size()).map(|i| ((i / t.size()) % 2000 / 7) as u8).collect();
            let samples = [Sample { bytes, shape: vec![2, 40, 50] }];
            let texts = texts(t, None);
            for (text, got) in texts.iter().zip(evaluate_each(&texts, t, &samples)) {
                assert_eq!(got, evaluate(text, t, &samples), "{text} ({t:?})");
            }
        }
    }

    #[test]
    fn transforms_that_change_nothing_share_their_backend() {
        let texts: Vec<String> =
            ["delta+pco:6", "delta:0+pco:6", "delta:-1+pco:6", "pco:6", "delta:-2+pco:6", "delta+zstd:3", "pco:8"]
                .map(String::from)
                .to_vec();
        let wave = |i: usize| ((i as f64) * 0.02).cos() * 9.0;
        // On one thread, so that no two chains of a group are compressed side by side.
        let one = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
        let runs = |samples: &[Sample]| one.install(|| evaluate_sharing(&texts, NumType::F32, samples).1);
        // A series: `delta` is `delta:-1`, and no second-last axis: delta:-2 changes
        // nothing. delta:0 is not delta there: pcodec searches for its own delta when no
        // delta ran along the last axis, so the backends differ.
        assert_eq!(runs(&[field(&[2048], wave)]), 5);
        // A block whose every axis is long: `delta` and `delta:-1` alone are the same.
        assert_eq!(runs(&[field(&[16, 16, 16], wave)]), 6);
    }

    #[test]
    fn scoring_round_trips_and_measures() {
        let bytes: Vec<u8> = (0..4096u32).flat_map(|i| (i as f32 * 0.01).sin().to_le_bytes()).collect();
        let samples = [Sample { bytes, shape: vec![64, 64] }];
        for text in candidates(NumType::F32) {
            let sc = measure(text, NumType::F32, &samples, 0.0).unwrap();
            let m = sc.measured.unwrap();
            assert!(sc.ratio > 0.5 && m.encode_mb_s > 0.0 && m.decode_mb_s > 0.0, "{sc:?}");
            let plain = evaluate(text, NumType::F32, &samples).unwrap();
            assert_eq!((plain.ratio, plain.measured), (sc.ratio, None));
        }
    }
}
