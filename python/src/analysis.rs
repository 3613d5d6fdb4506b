//! The codec analyzer for `strata analyze`: candidate chains scored on sample segments,
//! returned as typed objects.

use crate::to_py;
use numpy::PyReadonlyArray1;
use pyo3::prelude::*;
use std::collections::BTreeMap;
use strata_codecs::analyzer::{evaluate_each, measure, Goal, Objective, Sample};
use strata_codecs::reference::reference_ratio;
use strata_codecs::NumType;
use strata_core::Error;

/// How one chain did on a sample: its ratio, its speeds as the codecs declare them (what
/// objectives rank by) and, when timed, as measured, and its value for each objective.
#[pyclass(frozen, get_all, module = "strata._core")]
#[derive(Debug, Clone)]
pub(crate) struct ChainScore {
    chain: String,
    ratio: f64,
    lossless: bool,
    encode_mb_s: f64,
    decode_mb_s: f64,
    measured_encode_mb_s: Option<f64>,
    measured_decode_mb_s: Option<f64>,
    /// Per objective name (`ratio`, `speed`, `balanced`): higher is better.
    value: BTreeMap<String, f64>,
}

#[pymethods]
impl ChainScore {
    fn __repr__(&self) -> String {
        format!(
            "ChainScore({}, ratio={:.3}, decode {:.0} MB/s declared{})",
            self.chain,
            self.ratio,
            self.decode_mb_s,
            self.measured_decode_mb_s.map_or(String::new(), |d| format!(", {d:.0} measured"))
        )
    }
}

/// Every candidate's score, the chain each objective picks (None: no candidate), and the
/// ratio of netCDF4's zlib 4 + shuffle on the same samples (what balanced must beat).
#[pyclass(frozen, get_all, module = "strata._core")]
#[derive(Debug)]
pub(crate) struct SampleAnalysis {
    scores: Vec<ChainScore>,
    choice: BTreeMap<String, Option<String>>,
    reference: f64,
}

pub(crate) fn num_type(name: &str) -> PyResult<NumType> {
    use NumType as N;
    Ok(match name {
        "i8" => N::I8,
        "u8" | "char" => N::U8,
        "i16" => N::I16,
        "u16" => N::U16,
        "i32" => N::I32,
        "u32" => N::U32,
        "i64" => N::I64,
        "u64" => N::U64,
        "f32" => N::F32,
        "f64" => N::F64,
        other => return Err(to_py(Error::InvalidArgument(format!("no codecs for type '{other}'")))),
    })
}

/// Scores every candidate chain (or the given ones) on sample segments and picks one per
/// objective, as planning does (ratios measured, speeds as the codecs declare them); with
/// `min_seconds` the speeds are also timed here, for the table of `strata analyze`.
/// `samples` is a list of (flat uint8 array, shape).
#[pyfunction]
#[pyo3(signature = (dtype, samples, candidates=None, min_seconds=None))]
pub(crate) fn analyze_samples(
    py: Python<'_>,
    dtype: &str,
    samples: Vec<(PyReadonlyArray1<'_, u8>, Vec<usize>)>,
    candidates: Option<Vec<String>>,
    min_seconds: Option<f64>,
) -> PyResult<SampleAnalysis> {
    let t = num_type(dtype)?;
    let owned: Vec<Sample> = samples
        .iter()
        .map(|(a, shape)| Ok(Sample { bytes: a.as_slice()?.to_vec(), shape: shape.clone() }))
        .collect::<Result<_, numpy::AsSliceError>>()
        .map_err(|e| to_py(Error::InvalidArgument(format!("sample: {e}"))))?;
    let texts: Vec<String> =
        candidates.unwrap_or_else(|| strata_codecs::analyzer::candidates(t).into_iter().map(String::from).collect());
    let (scores, reference) = py.detach(|| {
        let scores = match min_seconds {
            Some(m) => texts.iter().map(|c| measure(c, t, &owned, m)).collect::<Result<Vec<_>, _>>(),
            None => evaluate_each(&texts, t, &owned).into_iter().collect(),
        };
        (scores, reference_ratio(t, &owned))
    });
    let scores = scores.map_err(|e| to_py(e.into()))?;
    // As planning chooses: lossy chains among the scores mean an error bound let them in.
    let bounded = !scores.iter().all(|s| s.lossless);
    let choice = Objective::ALL
        .iter()
        .map(|&o| {
            let goal = Goal::from(o);
            let against = goal.measures_reference(bounded).then_some(reference);
            (o.to_string(), goal.choose_with(&scores, against).map(|i| scores[i].chain.clone()))
        })
        .collect();
    let scores = scores
        .iter()
        .map(|s| ChainScore {
            chain: s.chain.clone(),
            ratio: s.ratio,
            lossless: s.lossless,
            encode_mb_s: s.nominal.encode_mb_s,
            decode_mb_s: s.nominal.decode_mb_s,
            measured_encode_mb_s: s.measured.map(|m| m.encode_mb_s),
            measured_decode_mb_s: s.measured.map(|m| m.decode_mb_s),
            value: Objective::ALL.iter().map(|&o| (o.to_string(), Goal::from(o).value(s))).collect(),
        })
        .collect();
    Ok(SampleAnalysis { scores, choice, reference })
}

/// The analyzer's candidate chains for a type: every lossless one, and with an error bound
/// (`abs=E` or `rel=E`) the lossy ones for float types.
#[pyfunction]
#[pyo3(signature = (dtype, error_bound=None))]
pub(crate) fn candidates(dtype: &str, error_bound: Option<&str>) -> PyResult<Vec<String>> {
    let t = num_type(dtype)?;
    let bound = error_bound.map(strata_codecs::plan::parse_error_bound).transpose().map_err(|e| to_py(e.into()))?;
    // The ratio objective admits every candidate: this is the analyzer's whole list.
    Goal::from(Objective::Ratio).candidates(t, bound.as_deref()).map_err(|e| to_py(e.into()))
}
