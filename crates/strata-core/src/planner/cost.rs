//! The cost model: the work a method does, counted from the index, turned into seconds by
//! constants measured on the machine (`strata calibrate`) and corrected by the times of the
//! queries it runs; where it is stored.

use crate::error::{Error, Result};
use crate::query::Method;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The work of one method, counted from the index.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Work {
    /// Stored bytes fetched.
    pub bytes: f64,
    /// Segments fetched.
    pub segments: f64,
    /// Sub-chunk reads (each has a fixed cost: index lookups, buffers, a task).
    pub calls: f64,
    /// Elements decoded.
    pub decoded: f64,
    /// Elements compared with a constant.
    pub tested: f64,
    /// Elements whose positions come from the index alone (bitmap unions).
    pub indexed: f64,
    /// Returned elements copied out of decoded sub-chunks (by either method).
    pub gathered: f64,
}

impl Work {
    pub(crate) fn add(&mut self, o: &Work) {
        self.bytes += o.bytes;
        self.segments += o.segments;
        self.calls += o.calls;
        self.decoded += o.decoded;
        self.tested += o.tested;
        self.indexed += o.indexed;
        self.gathered += o.gathered;
    }

    /// The features in the order of [`Coefficients::as_array`].
    pub fn as_array(&self) -> [f64; 7] {
        [self.bytes, self.segments, self.calls, self.decoded, self.tested, self.indexed, self.gathered]
    }
}

/// Nanoseconds per unit of each kind of work (one core's worth; the executor's parallelism
/// is folded into the measured constants).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Coefficients {
    pub byte: f64,
    pub segment: f64,
    pub call: f64,
    pub decoded: f64,
    pub tested: f64,
    pub indexed: f64,
    pub gathered: f64,
}

impl Coefficients {
    /// The constants' names, in the order of [`as_array`](Self::as_array).
    pub const NAMES: [&'static str; 7] = ["byte", "segment", "call", "decoded", "tested", "indexed", "gathered"];

    pub fn as_array(&self) -> [f64; 7] {
        [self.byte, self.segment, self.call, self.decoded, self.tested, self.indexed, self.gathered]
    }
}

/// The machine's cost constants. Stored as JSON (`strata calibrate` writes it); the
/// defaults were measured on a 2-core x86-64 build machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CostModel {
    pub version: u32,
    /// Where the constants come from ("default", or the calibration's date and machine).
    pub source: String,
    /// Costs of the index method, and of the scan when `scan_ns` is absent.
    pub ns: Coefficients,
    /// Costs of the scan, when fitted apart (`strata calibrate` fits each method on its
    /// own timings: the same feature costs differently inside each method's loops).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scan_ns: Option<Coefficients>,
    /// Observed / estimated time of the queries run so far, per method (1 when none).
    #[serde(default = "one")]
    pub index_correction: f64,
    #[serde(default = "one")]
    pub scan_correction: f64,
    /// Queries folded into each correction (index, scan) in this process: a piece of a
    /// query counts as its share of it, so a query counts once however it was cut.
    #[serde(skip)]
    pub observations: [f64; 2],
}

fn one() -> f64 {
    1.0
}

pub const COST_MODEL_VERSION: u32 = 1;

/// Estimates within this factor of each other are a close call, where the model's error
/// can exceed the difference (see [`CostModel::choose`]).
pub const CLOSE_CALL: f64 = 1.3;

/// Queries of a method after which close calls stop trying it for its correction's sake
/// (see [`CostModel::choose`]).
pub const EXPLORED: f64 = 8.0;

/// How far one query's observed/estimated ratio moves a correction (an exponential
/// moving average over queries).
const LEARNING_RATE: f64 = 0.2;

impl Default for CostModel {
    fn default() -> Self {
        CostModel {
            version: COST_MODEL_VERSION,
            source: "default".into(),
            ns: Coefficients {
                byte: 0.25,
                segment: 400.0,
                call: 6000.0,
                decoded: 1.2,
                tested: 0.8,
                indexed: 0.05,
                gathered: 12.0,
            },
            scan_ns: None,
            index_correction: 1.0,
            scan_correction: 1.0,
            observations: [0.0, 0.0],
        }
    }
}

impl CostModel {
    pub fn from_json(text: &str) -> Result<Self> {
        let m: CostModel =
            serde_json::from_str(text).map_err(|e| Error::InvalidArgument(format!("bad cost model: {e}")))?;
        if m.version != COST_MODEL_VERSION {
            return Err(Error::Compatibility(format!(
                "cost model version {} (this build reads {COST_MODEL_VERSION}): run `strata calibrate` again",
                m.version
            )));
        }
        let mut c = m.ns.as_array().to_vec();
        c.extend(m.scan_ns.map(|s| s.as_array()).unwrap_or_default());
        if c.iter().chain([&m.index_correction, &m.scan_correction]).any(|x| !x.is_finite() || *x < 0.0) {
            return Err(Error::InvalidArgument("cost model constants must be finite and non-negative".into()));
        }
        Ok(m)
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// Estimated seconds of `work` done by `method`.
    pub fn seconds(&self, method: Method, work: &Work) -> f64 {
        self.uncorrected_seconds(method, work) * self.correction(method)
    }

    /// Seconds of `work` by the machine's constants alone, without the correction learned
    /// from queries (work of another kind, such as a dense read, does not share their errors).
    pub fn uncorrected_seconds(&self, method: Method, work: &Work) -> f64 {
        let ns = match (method, &self.scan_ns) {
            (Method::Scan, Some(s)) => s,
            _ => &self.ns,
        };
        ns.as_array().iter().zip(work.as_array()).map(|(c, w)| c * w).sum::<f64>() * 1e-9
    }

    /// Queries folded into `method`'s correction so far (pieces count as their share).
    pub fn observed(&self, method: Method) -> f64 {
        self.observations[Self::slot(method)]
    }

    fn slot(method: Method) -> usize {
        match method {
            Method::Index => 0,
            Method::Scan => 1,
        }
    }

    /// The correction applied to `method`. A method not yet observed in this process
    /// borrows the other's when that one has been: what slows one down here (a loaded
    /// machine, concurrent pieces, a store unlike the calibration's) most likely slows
    /// both, and correcting only the method that runs would tip the choice to the other.
    pub fn correction(&self, method: Method) -> f64 {
        let own = match method {
            Method::Index => self.index_correction,
            Method::Scan => self.scan_correction,
        };
        let other = match method {
            Method::Index => (self.scan_correction, self.observations[1]),
            Method::Scan => (self.index_correction, self.observations[0]),
        };
        if self.observations[Self::slot(method)] == 0.0 && other.1 > 0.0 {
            other.0
        } else {
            own
        }
    }

    /// The method for a query estimated at `index_s` and `scan_s` seconds. On a close call
    /// (estimates within [`CLOSE_CALL`]) the method estimated slower still runs until it
    /// has been observed a quarter as often as the other, and in at most [`EXPLORED`]
    /// queries (however many pieces each was cut into), so the
    /// corrections learn both methods on the store being queried and the choice follows
    /// what they measure (with one method observed, both share its correction and the
    /// calibrated constants decide).
    ///
    /// While the other method has never run, its estimate rests on the calibrated constants
    /// alone, and the method that did run shows how far off they are here: a correction of
    /// 2 (or 0.5) widens the close call by that factor, so a model wrong by 2x on this store
    /// tries the other method once rather than never. Its first observation then replaces
    /// the borrowed correction (see [`observe`](Self::observe)).
    pub fn choose(&self, index_s: f64, scan_s: f64) -> Method {
        let (best, other, best_s, other_s) = if scan_s < index_s {
            (Method::Scan, Method::Index, scan_s, index_s)
        } else {
            (Method::Index, Method::Scan, index_s, scan_s)
        };
        let window = if self.observed(other) == 0.0 && self.observed(best) > 0.0 {
            let c = self.correction(best);
            CLOSE_CALL * c.max(1.0 / c)
        } else {
            CLOSE_CALL
        };
        let close = other_s <= window * best_s;
        // Bounded by EXPLORED, not only by a quarter of the best's count: a method observed
        // hundreds of times (pieces of earlier queries) would otherwise hand every close
        // call to the other until it had been observed a quarter as often.
        let owed = self.observed(other) < EXPLORED && self.observed(other) * 4.0 < self.observed(best);
        if close && owed {
            other
        } else {
            best
        }
    }

    /// Folds an observed time into the method's correction (a moving average of the
    /// observed/estimated ratio, kept within [0.1, 10]). `estimated_s` is what
    /// [`seconds`](Self::seconds) said for the work observed. A method's first observation
    /// after the other's replaces the correction it borrowed: that was a guess, this is
    /// a measurement.
    pub fn observe(&mut self, method: Method, estimated_s: f64, observed_s: f64) {
        self.observe_uncorrected(method, estimated_s / self.correction(method), observed_s, 1.0);
    }

    /// [`observe`](Self::observe) for an estimate without the correction: work planned
    /// before earlier observations moved the correction (the pieces of one query, planned
    /// together) is judged by the uncorrected estimate. Dividing an estimate made under an
    /// older correction by the current one compounds every change.
    ///
    /// `share` is the part of one query this observation is (a piece's share of its
    /// query's estimate; 1 for a whole query): a query moves the correction as far as one
    /// observation does however many pieces it was cut into. Counted per piece, one slow
    /// query of 40 pieces (the first at a new result size pays its page faults, about 2x)
    /// replaced the correction outright, and the method it slowed was not tried again.
    pub fn observe_uncorrected(&mut self, method: Method, uncorrected_s: f64, observed_s: f64, share: f64) {
        if !uncorrected_s.is_finite() || uncorrected_s <= 0.0 || !observed_s.is_finite() || observed_s <= 0.0 {
            return;
        }
        let slot = Self::slot(method);
        let borrowed = self.observations[slot] == 0.0 && self.observations[1 - slot] > 0.0;
        let current = self.correction(method);
        let ratio = observed_s / uncorrected_s;
        let weight = LEARNING_RATE * share.clamp(0.0, 1.0);
        let next = if borrowed { ratio } else { (1.0 - weight) * current + weight * ratio }.clamp(0.1, 10.0);
        match method {
            Method::Index => self.index_correction = next,
            Method::Scan => self.scan_correction = next,
        }
        self.observations[slot] += share.clamp(0.0, 1.0);
    }
}

/// Where the cost model is stored: `$STRATA_COST_MODEL`, else
/// `$XDG_CONFIG_HOME/strata/cost_model.json`, else `~/.config/strata/cost_model.json`.
pub fn cost_model_path() -> PathBuf {
    if let Some(p) = std::env::var_os("STRATA_COST_MODEL").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))
        .unwrap_or_else(|| PathBuf::from(".config"));
    base.join("strata").join("cost_model.json")
}

impl CostModel {
    /// The model stored at `path`; None when there is no file (the built-in defaults apply).
    pub fn load(path: &Path) -> Result<Option<CostModel>> {
        match std::fs::read_to_string(path) {
            Ok(text) => CostModel::from_json(&text)
                .map(Some)
                .map_err(|e| Error::InvalidArgument(format!("cost model {}: {e}", path.display()))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io(path.display().to_string(), e)),
        }
    }

    /// Writes the model to `path` (a temporary file renamed over it, so a reader never sees
    /// half a model).
    pub fn save(&self, path: &Path) -> Result<()> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| Error::io(dir.display().to_string(), e))?;
        }
        let tmp = path.with_extension("json.tmp");
        std::fs::write(&tmp, self.to_json()).map_err(|e| Error::io(tmp.display().to_string(), e))?;
        std::fs::rename(&tmp, path).map_err(|e| Error::io(path.display().to_string(), e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cost_model_round_trips_and_rejects_bad_constants() {
        let m = CostModel::default();
        assert_eq!(CostModel::from_json(&m.to_json()).ok(), Some(m.clone()));
        let bad = m.to_json().replace("\"version\": 1", "\"version\": 99");
        assert!(matches!(CostModel::from_json(&bad), Err(Error::Compatibility(_))));
        let neg = m.to_json().replace("\"byte\": 0.25", "\"byte\": -1.0");
        assert!(matches!(CostModel::from_json(&neg), Err(Error::InvalidArgument(_))));
        assert!(CostModel::from_json("{").is_err());
    }

    #[test]
    fn observed_times_move_the_correction() {
        let mut m = CostModel::default();
        let w = Work { bytes: 1e6, ..Work::default() };
        let est = m.seconds(Method::Scan, &w);
        for _ in 0..40 {
            let e = m.seconds(Method::Scan, &w);
            m.observe(Method::Scan, e, 2.0 * est);
        }
        assert!((m.scan_correction - 2.0).abs() < 0.05, "{}", m.scan_correction);
        assert_eq!(m.index_correction, 1.0);
        // The unobserved index method borrows the scan's correction, so the choice between
        // them still follows the calibrated constants.
        assert_eq!(m.correction(Method::Index), m.scan_correction);
        let wi = Work { segments: 10.0, ..Work::default() };
        let before = m.seconds(Method::Index, &wi);
        m.observe(Method::Index, before, before / 2.0);
        assert_eq!(m.observations, [1.0, 40.0]);
        assert!(m.correction(Method::Index) < m.scan_correction);
    }

    #[test]
    fn close_calls_explore_until_both_methods_are_observed() {
        let mut m = CostModel::default();
        // Clear winners and fresh models: the cheaper estimate.
        assert_eq!(m.choose(1.0, 2.0), Method::Index);
        assert_eq!(m.choose(2.0, 1.0), Method::Scan);
        assert_eq!(m.choose(1.0, 1.1), Method::Index);
        for _ in 0..8 {
            m.observe(Method::Index, 1.0, 1.0);
        }
        // A close call with the scan never observed: the scan runs ...
        assert_eq!(m.choose(1.0, 1.1), Method::Scan);
        // ... but not when the index is clearly cheaper.
        assert_eq!(m.choose(1.0, 1.5), Method::Index);
        m.observe(Method::Scan, 1.0, 1.0);
        m.observe(Method::Scan, 1.0, 1.0);
        // Observed a quarter as often: back to the estimate.
        assert_eq!(m.choose(1.0, 1.1), Method::Index);
        // A method observed hundreds of times does not hand the next close calls to the
        // other until it catches up: a few observations learn its correction.
        for _ in 0..400 {
            m.observe(Method::Index, 1.0, 1.0);
        }
        let mut tried = 0;
        for _ in 0..100 {
            if m.choose(1.0, 1.1) == Method::Scan {
                m.observe(Method::Scan, 1.1, 1.1);
                tried += 1;
            }
        }
        assert_eq!(m.observed(Method::Scan) as usize, 2 + tried);
        assert_eq!(m.observed(Method::Scan), EXPLORED);
    }

    #[test]
    fn pieces_planned_together_correct_the_model_without_compounding() {
        // A query of 8 pieces, each estimated at 1 s uncorrected, planned before any runs;
        // each takes 0.5 s. Over queries the correction settles at 0.5 and stays there.
        let mut m = CostModel::default();
        for _ in 0..40 {
            for _ in 0..8 {
                m.observe_uncorrected(Method::Index, 1.0, 0.5, 1.0 / 8.0);
            }
            let c = m.correction(Method::Index);
            assert!((0.5..=1.0).contains(&c), "correction {c} left [0.5, 1]");
        }
        assert!((m.correction(Method::Index) - 0.5).abs() < 1e-3);
    }

    #[test]
    fn one_slow_query_cut_in_many_pieces_moves_the_correction_as_one_query() {
        // Both methods settled at their estimates; then one query of 40 pieces by the scan
        // runs 2.5x slow (its first run at a new result size pays page faults). The scan
        // stays the choice on the next query, where it is 2x cheaper than the index.
        let mut m = CostModel::default();
        for _ in 0..20 {
            m.observe(Method::Index, 1.0, 1.0);
            m.observe(Method::Scan, 1.0, 1.0);
        }
        for _ in 0..40 {
            m.observe_uncorrected(Method::Scan, 0.5 / 40.0, 2.5 * 0.5 / 40.0, 1.0 / 40.0);
        }
        let c = m.correction(Method::Scan);
        assert!((1.25..=1.35).contains(&c), "one query moved the correction to {c}");
        assert_eq!(m.choose(1.0 * m.correction(Method::Index), 0.5 * c), Method::Scan);
    }

    #[test]
    fn a_model_shown_wrong_tries_the_other_method_once() {
        // Calibrated constants say the index takes 1 s and the scan 2 s; on this store the
        // index takes 2.5 s and the scan 1.5 s.
        let (index_est, scan_est) = (1.0, 2.0);
        let (index_real, scan_real) = (2.5, 1.5);
        let mut m = CostModel::default();
        let mut runs = [0u32; 2];
        for _ in 0..40 {
            let (i, s) = (index_est * m.correction(Method::Index), scan_est * m.correction(Method::Scan));
            let method = m.choose(i, s);
            let (est, real) = match method {
                Method::Index => (i, index_real),
                Method::Scan => (s, scan_real),
            };
            m.observe(method, est, real);
            runs[CostModel::slot(method)] += 1;
        }
        // The index ran until its correction showed the model off by 2x or more, the scan
        // was tried, measured faster, and ran from then on.
        assert!(runs[0] <= 8 && runs[1] >= 32, "{runs:?}");
        assert!((m.correction(Method::Scan) * scan_est - scan_real).abs() < 0.01);
        // A model that is right keeps to its choice: the close call stays 1.3.
        let mut right = CostModel::default();
        for _ in 0..10 {
            right.observe(Method::Index, 1.0, 1.0);
        }
        assert_eq!(right.choose(1.0, 2.0), Method::Index);
        assert_eq!(right.observed(Method::Scan), 0.0);
    }

    #[test]
    fn scan_constants_apply_to_the_scan_only() {
        let mut m = CostModel::default();
        let w = Work { decoded: 1e6, ..Work::default() };
        let index = m.seconds(Method::Index, &w);
        m.scan_ns = Some(Coefficients { decoded: m.ns.decoded * 2.0, ..m.ns });
        assert_eq!(m.seconds(Method::Index, &w), index);
        assert!((m.seconds(Method::Scan, &w) - 2.0 * index).abs() < 1e-12);
        let text = m.to_json();
        assert!(text.contains("scan_ns"));
        assert_eq!(CostModel::from_json(&text).ok(), Some(m));
        assert!(!CostModel::default().to_json().contains("scan_ns"), "absent when not fitted apart");
    }
}
