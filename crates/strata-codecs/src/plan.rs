//! Codec plans: what the user asks for (a [`CodecRequest`]) resolved on sample segments
//! into what is stored (a chain and its [`PlanRecord`]). One rule for every writer: the
//! importer, `write_arrays`, and writers to come get the same plan from the same data.

use crate::analyzer::{
    evaluate, evaluate_each, locked, meets_reference, Evaluation, Goal, Objective, Sample, Scale, Score, RATIO_TIE,
};
use crate::error::{CodecError, Result};
use crate::reference::reference_ratio;
use crate::registry::{chain, parse_chain};
use crate::spec::{ElementContext, NumType};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

/// What the user asks for a variable's codec.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum CodecRequest {
    /// Let the analyzer choose for `objective`; with an error bound (`abs=E` or `rel=E`,
    /// relative to the value range) the error-bounded lossy codecs compete too.
    Auto {
        objective: Objective,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error_bound: Option<String>,
    },
    /// This chain, e.g. `shuffle+zstd:3`.
    Chain { chain: String },
}

/// New slabs switch chains on a later check when another is at least this much better
/// for the plan's objective (the drift threshold).
pub const DRIFT_THRESHOLD: f64 = 1.10;
/// How many of the best chains a plan compares again on a larger sample (see [`plan`]).
pub const REFINE_TOP: usize = 3;
/// How many of the first look's best chains the second look tries cut the other way (see
/// [`plan`]): each costs one more compression of what it looks at.
pub const UNIT_TOP: usize = 2;
/// Variables smaller than this get the default chain without sampling. Planning compresses
/// a small variable whole once per candidate, a few milliseconds at 16 KiB; unplanned, 32 KiB
/// fields took up to 7% more than netCDF4's zlib (`bench/results/small.md`).
pub const PLAN_MIN_BYTES: u64 = 16 << 10;
/// Version of [`PlanRecord`]'s fields (3 added `unit`, 4 `shape`, 5 `reference`, 6 `scale`).
pub const PLAN_RECORD_VERSION: u32 = 6;

/// Checks an error bound given as `abs=E` or `rel=E` (E > 0, finite); returns it normalised.
pub fn parse_error_bound(text: &str) -> Result<String> {
    let (kind, value) = text.split_once('=').unwrap_or((text, ""));
    let number: f64 = value.trim().parse().unwrap_or(f64::NAN);
    let kind = kind.trim();
    if !(matches!(kind, "abs" | "rel") && number > 0.0 && number.is_finite()) {
        return Err(CodecError::InvalidSpec(format!(
            "error bound '{text}' is not abs=E or rel=E with E > 0 (e.g. abs=0.01, rel=1e-4)"
        )));
    }
    Ok(format!("{kind}={number}"))
}

/// One candidate's figures as a plan keeps them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScoreRecord {
    pub chain: String,
    pub ratio: f64,
    /// Declared speeds (MB/s per core), what the objectives rank by.
    pub encode_mb_s: f64,
    pub decode_mb_s: f64,
}

/// A figure as a plan record keeps it: four decimals.
fn recorded(x: f64) -> f64 {
    (x * 1e4).round() / 1e4
}

impl From<&Score> for ScoreRecord {
    fn from(s: &Score) -> Self {
        Self {
            chain: s.chain.clone(),
            ratio: recorded(s.ratio),
            encode_mb_s: recorded(s.nominal.encode_mb_s),
            decode_mb_s: recorded(s.nominal.decode_mb_s),
        }
    }
}

/// The second look of the ratio objective: its best chains on a larger sample.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Refinement {
    pub sample_bytes: u64,
    pub ratio: BTreeMap<String, f64>,
}

/// The same data cut two ways, for the second look of [`plan`]: `ranked` in the blocks the
/// first look's samples had, `other` in the other way the writer could store the variable.
#[derive(Debug, Clone, Copy)]
pub enum SecondLook<'a> {
    /// A variable small enough to be compressed whole: all its blocks, and itself as one unit.
    Whole { blocks: &'a [Sample], whole: &'a Sample },
    /// A variable of one chunk stored in cube-like blocks (`strata_core::chunking`): a few
    /// regions of it cut in those blocks, and the same regions cut in blocks of the array's
    /// proportions, `shape`.
    Shape { ranked: &'a [Sample], other: &'a [Sample], shape: &'a [u64] },
}

/// The second look of a variable small enough to be compressed whole: the first look's
/// choice measured on all its blocks, its best chains on the variable whole, and which way
/// it is stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UnitChoice {
    pub whole: BTreeMap<String, f64>,
    pub blocks: BTreeMap<String, f64>,
    pub stored_whole: bool,
}

/// The second look of a variable of one chunk in cube-like blocks: the first look's choice
/// on regions cut in those blocks and on the same regions cut in `shape`, and whether
/// `shape` is what is stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShapeChoice {
    pub shape: Vec<u64>,
    pub ranked: BTreeMap<String, f64>,
    pub other: BTreeMap<String, f64>,
    pub stored_other: bool,
}

/// What the manifest keeps of a plan (a variable's `plan`): the objective, the choice, and
/// the scores it was made from; after a later check switched chains, the chain it replaced
/// and by how much the new one was better.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanRecord {
    #[serde(default)]
    pub version: u32,
    pub objective: Objective,
    /// Which floors the choice was held to: `small` for a variable stored whole, whose
    /// later checks hold it to the same (records before version 6: `unit` says it).
    #[serde(default)]
    pub scale: Scale,
    pub chosen: String,
    pub sample_bytes: u64,
    pub scores: Vec<ScoreRecord>,
    /// The balanced objective's reference on the same sample: the ratio of zlib 4 + shuffle
    /// (`reference::reference_ratio`), which its choice by speed beats.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_bound: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refined: Option<Refinement>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<UnitChoice>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shape: Option<ShapeChoice>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gain: Option<f64>,
}

fn sample_bytes(samples: &[Sample]) -> u64 {
    samples.iter().map(|s| s.bytes.len() as u64).sum()
}

/// Every candidate on the samples, in parallel; a candidate that fails on this data (a
/// lossy chain that cannot hold the bound, say) is left out.
fn evaluate_all(texts: &[String], dtype: NumType, samples: &[Sample]) -> Vec<Score> {
    evaluate_each(texts, dtype, samples).into_iter().filter_map(Result::ok).collect()
}

/// Balanced planning without an error bound: the reference on `samples`, and the
/// candidates scored fastest declared encoder first until the fastest that beats the
/// reference is known; when none does, all of them. Every thread takes the next job from
/// one queue (the reference first, on one core, then the candidates in order), so no
/// thread waits for a slow chain at a round's end, and a thread stops taking chains once a
/// chain that beats the reference is known to be quicker than the next. The scores kept
/// are those the rule depends on, every candidate at least as fast as the choice (or all),
/// in the queue's order: every chain that quick was taken before any thread stopped, so the
/// plan does not depend on threads or timing.
fn evaluate_balanced(texts: &[String], dtype: NumType, samples: &[Sample]) -> Result<(Vec<Score>, f64)> {
    let mut order = texts
        .iter()
        .map(|t| Ok((chain(&parse_chain(t)?, ElementContext::new(dtype))?.speed().encode_mb_s, t.as_str())))
        .collect::<Result<Vec<(f64, &str)>>>()?;
    // Stable: chains declared equally fast keep the candidates' order.
    order.sort_by(|a, b| b.0.total_cmp(&a.0));
    let fastest = |scores: &[(usize, Score)], reference: f64| {
        scores
            .iter()
            .filter(|(_, s)| meets_reference(s, reference))
            .map(|(_, s)| s.nominal.encode_mb_s)
            .max_by(f64::total_cmp)
    };
    let evaluation = Evaluation::new(dtype, samples);
    let (reference, scores, next) = (OnceLock::new(), Mutex::new(Vec::new()), AtomicUsize::new(0));
    let work = || loop {
        // Job 0 is the reference, job k the k-th quickest candidate.
        let job = next.fetch_add(1, Ordering::Relaxed);
        if job == 0 {
            let _ = reference.set(reference_ratio(dtype, samples));
            continue;
        }
        let Some(&(speed, text)) = order.get(job - 1) else { break };
        if reference.get().is_some_and(|&r| fastest(&locked(&scores), r).is_some_and(|f| speed < f)) {
            break;
        }
        if let Ok(score) = evaluation.one(text) {
            locked(&scores).push((job, score));
        }
    };
    rayon::scope(|s| {
        for _ in 1..rayon::current_num_threads() {
            s.spawn(|_| work());
        }
        work();
    });
    let reference = *reference.get().expect("the first job computes the reference");
    let mut scores = scores.into_inner().unwrap_or_else(|p| p.into_inner());
    scores.sort_by_key(|(job, _)| *job);
    if let Some(speed) = fastest(&scores, reference) {
        scores.retain(|(_, s)| s.nominal.encode_mb_s >= speed);
    }
    Ok((scores.into_iter().map(|(_, s)| s).collect(), reference))
}

/// The best `n` chains of `scores` for `goal`.
fn top_chains(goal: Goal, scores: &[Score], n: usize) -> Vec<String> {
    let mut order: Vec<&Score> = scores.iter().collect();
    order.sort_by(|a, b| goal.value(b).total_cmp(&goal.value(a)));
    order.iter().take(n).map(|s| s.chain.clone()).collect()
}

fn ratios(scores: &[Score]) -> BTreeMap<String, f64> {
    scores.iter().map(|s| (s.chain.clone(), recorded(s.ratio))).collect()
}

/// Chooses a chain for `objective` on `samples`, then looks again: chains within a few
/// percent of each other often swap places between a small sample and the whole variable.
/// - With a [`SecondLook`], the choice is measured on the data cut as the first look's
///   blocks were, and the best [`UNIT_TOP`] (whole) or the choice alone (shape) on the same
///   data cut the other way; the other way is stored only when it is better by more than
///   [`RATIO_TIE`]. Whole: one unit keeps
///   long-range repeats that blocks lose (zstd's matches, a delta along a whole axis), while
///   pcodec's bins fit small blocks better. Shape: cubes cut a row of a level-by-level field
///   every few dozen elements, and a predictor along the rows starts again at each cut
///   (a 17-level grid: 3-5% smaller in blocks of the array's proportions). Not for the speed
///   objective, which ranks by declared speeds: its variables keep the first look's blocks.
/// - Else the ratio objective compares its best [`REFINE_TOP`] on `refine`, a larger sample.
///
/// Balanced without an error bound measures the reference (zlib 4 + shuffle) on the same
/// samples and chooses by [`Goal::choose_with`], trying the quickest chains first (see
/// `evaluate_balanced`), but for a variable stored whole, planned for the smallest within
/// the floors of [`Scale::Small`].
pub fn plan(
    dtype: NumType,
    samples: &[Sample],
    refine: &[Sample],
    second: Option<SecondLook<'_>>,
    objective: Objective,
    error_bound: Option<&str>,
) -> Result<PlanRecord> {
    let bound = error_bound.map(parse_error_bound).transpose()?;
    // A variable small enough to be stored whole is planned for the smallest, with a lower
    // encoding floor (`Scale::Small`): netCDF-4 compresses it whole too, and finds repeats
    // longer than a block, which the sample's reference cannot show (a 1-D cell area: zlib
    // 1.3 on two blocks, 6.0 on the whole, where lz4 reached 1.7 on the blocks).
    let whole = matches!(second, Some(SecondLook::Whole { .. }));
    let goal = Goal::new(objective, if whole { Scale::Small } else { Scale::Stream });
    let texts = goal.candidates(dtype, bound.as_deref())?;
    let (scores, reference) = if goal.measures_reference(bound.is_some()) {
        let (scores, reference) = evaluate_balanced(&texts, dtype, samples)?;
        (scores, Some(reference))
    } else {
        (evaluate_all(&texts, dtype, samples), None)
    };
    let best = goal
        .choose_with(&scores, reference)
        .ok_or_else(|| CodecError::InvalidSpec(format!("no candidate chain works for {dtype:?} data")))?;
    // A choice by speed is looked at again alone: the second look's other chains would be
    // the smallest, which the reference already showed are not needed.
    let by_speed = reference.is_some_and(|r| meets_reference(&scores[best], r));
    let mut chosen = scores[best].chain.clone();
    let (mut refined, mut unit, mut shape) = (None, None, None);
    if let Some(look) = second.filter(|_| objective != Objective::Speed) {
        // Cut as the first look's blocks were, its choice alone; cut the other way, its best
        // few, since the first look ranks chains by what its blocks show.
        let (ranked, other, tries) = match look {
            SecondLook::Whole { blocks, whole } => (blocks, std::slice::from_ref(whole), UNIT_TOP),
            // One chain each way: the regions are larger than the first look's blocks, and
            // the best chain in cubes was the best in the other blocks on every real field.
            SecondLook::Shape { ranked, other, .. } => (ranked, other, 1),
        };
        // All at once: each is a compression of a large part of the variable.
        let others = if by_speed { vec![chosen.clone()] } else { top_chains(goal, &scores, tries) };
        let jobs: Vec<(String, &[Sample])> =
            others.into_iter().map(|c| (c, other)).chain(std::iter::once((chosen.clone(), ranked))).collect();
        let mut measured: Vec<Option<Score>> = jobs.par_iter().map(|(c, cut)| evaluate(c, dtype, cut).ok()).collect();
        let here: Vec<Score> = measured.pop().flatten().into_iter().collect();
        let there: Vec<Score> = measured.into_iter().flatten().collect();
        if let (Some(t), Some(h)) = (goal.choose(&there), goal.choose(&here)) {
            let moves = goal.value(&there[t]) > goal.value(&here[h]) * (1.0 + RATIO_TIE);
            chosen = if moves { there[t].chain.clone() } else { here[h].chain.clone() };
            match look {
                SecondLook::Whole { .. } => {
                    unit = Some(UnitChoice { whole: ratios(&there), blocks: ratios(&here), stored_whole: moves })
                }
                SecondLook::Shape { shape: s, .. } => {
                    shape = Some(ShapeChoice {
                        shape: s.to_vec(),
                        ranked: ratios(&here),
                        other: ratios(&there),
                        stored_other: moves,
                    })
                }
            }
        }
    }
    if objective == Objective::Ratio && unit.is_none() && shape.is_none() && !refine.is_empty() {
        let top = top_chains(goal, &scores, REFINE_TOP);
        let second = evaluate_all(&top, dtype, refine);
        if let Some(i) = goal.choose(&second) {
            chosen = second[i].chain.clone();
            refined = Some(Refinement { sample_bytes: sample_bytes(refine), ratio: ratios(&second) });
        }
    }
    Ok(PlanRecord {
        version: PLAN_RECORD_VERSION,
        objective,
        scale: goal.scale,
        chosen,
        sample_bytes: sample_bytes(samples),
        scores: scores.iter().map(ScoreRecord::from).collect(),
        reference: reference.map(recorded),
        error_bound: bound.filter(|_| dtype.is_float()),
        refined,
        unit,
        shape,
        previous: None,
        gain: None,
    })
}

/// The check on later data: a new plan when another chain is at least [`DRIFT_THRESHOLD`]
/// times better than `current` for `goal` on `samples`, else None. For balanced without a
/// bound, a chain that still beats the reference stays; one that no longer does gives way
/// to the balanced choice when that beats the reference or is [`DRIFT_THRESHOLD`] times
/// smaller. The goal's scale is the one the plan was made at: a variable stored whole is
/// checked as [`plan`] chose for it, for the smallest within its floors.
pub fn recheck(
    dtype: NumType,
    samples: &[Sample],
    current: &str,
    goal: Goal,
    error_bound: Option<&str>,
) -> Result<Option<PlanRecord>> {
    let bound = error_bound.map(parse_error_bound).transpose()?;
    let mut texts = goal.candidates(dtype, bound.as_deref())?;
    if !texts.iter().any(|t| t == current) {
        texts.push(current.to_string());
    }
    let against = goal.measures_reference(bound.is_some());
    let (reference, scores) =
        rayon::join(|| against.then(|| reference_ratio(dtype, samples)), || evaluate_all(&texts, dtype, samples));
    let now = scores.iter().find(|s| s.chain == current);
    if let (Some(r), Some(s)) = (reference, now) {
        if meets_reference(s, r) {
            return Ok(None);
        }
    }
    let Some(best) = goal.choose_with(&scores, reference) else { return Ok(None) };
    let gain = match now.map(|s| goal.value(s)) {
        Some(v) if v > 0.0 => goal.value(&scores[best]) / v,
        _ => f64::INFINITY,
    };
    let fixes = reference.is_some_and(|r| meets_reference(&scores[best], r));
    if scores[best].chain == current || (gain < DRIFT_THRESHOLD && !fixes) {
        return Ok(None);
    }
    Ok(Some(PlanRecord {
        version: PLAN_RECORD_VERSION,
        objective: goal.objective,
        scale: goal.scale,
        chosen: scores[best].chain.clone(),
        sample_bytes: sample_bytes(samples),
        scores: scores.iter().map(ScoreRecord::from).collect(),
        reference: reference.map(recorded),
        error_bound: bound.filter(|_| dtype.is_float()),
        refined: None,
        unit: None,
        shape: None,
        previous: Some(current.to_string()),
        gain: Some((gain * 1e3).round() / 1e3),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn smooth(n: usize, phase: f32) -> Sample {
        let bytes = (0..n * n)
            .flat_map(|i| (((i / n) as f32 * 0.05 + phase).sin() * ((i % n) as f32 * 0.03).cos() * 20.0).to_le_bytes())
            .collect();
        Sample { bytes, shape: vec![n, n] }
    }

    #[test]
    fn plans_are_reproducible_and_meet_the_objective() {
        let samples: Vec<Sample> = (0..4).map(|k| smooth(64, k as f32)).collect();
        let a = plan(NumType::F32, &samples, &samples, None, Objective::Balanced, None).unwrap();
        let b = plan(NumType::F32, &samples, &samples, None, Objective::Balanced, None).unwrap();
        assert_eq!(a, b, "the same data must give the same plan");
        let chosen = a.scores.iter().find(|s| s.chain == a.chosen).unwrap();
        assert!(chosen.decode_mb_s >= crate::analyzer::BALANCED_MIN_DECODE_MB_S);
        // Smaller than zlib by the margin, or else the smallest.
        let reference = a.reference.unwrap();
        let best = a.scores.iter().map(|s| s.ratio).fold(0.0, f64::max);
        assert!(
            chosen.ratio >= reference * crate::analyzer::BALANCED_MARGIN
                || chosen.ratio >= best * (1.0 - crate::analyzer::RATIO_TIE),
            "{a:?}"
        );
        let r = plan(NumType::F32, &samples, &samples, None, Objective::Ratio, None).unwrap();
        assert!(r.refined.is_some() && r.scores.len() > a.scores.len());
        // The record survives the manifest's JSON.
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(serde_json::from_value::<PlanRecord>(json).unwrap(), r);
    }

    /// Samples of `n` x `n` f32 with `f` of the row and column.
    fn grid(n: usize, f: impl Fn(usize, usize) -> f32) -> Sample {
        let bytes = (0..n * n).flat_map(|i| f(i / n, i % n).to_le_bytes()).collect();
        Sample { bytes, shape: vec![n, n] }
    }

    #[test]
    fn balanced_planning_that_stops_early_chooses_as_if_it_tried_every_candidate() {
        // Every bit of the mantissa random: nothing compresses it much better than zlib.
        let noise = |i: usize, j: usize| {
            let mut z = ((i * 4096 + j) as u64).wrapping_add(1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            f32::from_bits(0x3f80_0000 | ((z ^ (z >> 31)) as u32 & 0x007f_ffff))
        };
        let cases: Vec<(&str, Vec<Sample>)> = vec![
            ("smooth", (0..4).map(|k| smooth(64, k as f32)).collect()),
            ("mostly zero", (0..2).map(|k| grid(64, |i, j| if (i + j + k) % 17 == 0 { 1.5 } else { 0.0 })).collect()),
            ("noise", (0..2).map(|k| grid(64, |i, j| noise(i + 64 * k, j))).collect()),
            ("levels", (0..2).map(|k| grid(64, |i, _| (i / 8 + k) as f32 * 0.25)).collect()),
        ];
        let mut quick = 0;
        for (what, samples) in &cases {
            let all = Goal::from(Objective::Balanced).candidates(NumType::F32, None).unwrap();
            let p = plan(NumType::F32, samples, &[], None, Objective::Balanced, None).unwrap();
            let reference = reference_ratio(NumType::F32, samples);
            assert_eq!(p.reference, Some(recorded(reference)), "{what}");
            let every = evaluate_all(&all, NumType::F32, samples);
            let expected = &every[Goal::from(Objective::Balanced).choose_with(&every, Some(reference)).unwrap()];
            assert_eq!(p.chosen, expected.chain, "{what}: {p:?}");
            // The same data, the same plan, whatever the threads.
            for threads in [1, 3, 8] {
                let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
                let again = pool.install(|| plan(NumType::F32, samples, &[], None, Objective::Balanced, None).unwrap());
                assert_eq!(again, p, "{what} on {threads} threads");
            }
            if meets_reference(expected, reference) {
                quick += 1;
                assert!(p.scores.len() < all.len(), "{what}: a quick choice should not try every chain");
            } else {
                assert_eq!(p.scores.len(), every.len(), "{what}: none beats zlib, so every chain is tried");
            }
        }
        assert!((1..cases.len()).contains(&quick), "both ways must be exercised ({quick} quick)");
    }

    #[test]
    fn a_small_variable_is_stored_whole_only_when_that_is_clearly_better() {
        let blocks: Vec<Sample> = (0..4).map(|k| smooth(64, k as f32)).collect();
        // The same blocks four times over: a whole unit finds the repeats.
        let mut bytes = Vec::new();
        for _ in 0..4 {
            bytes.extend(blocks.iter().flat_map(|b| b.bytes.clone()));
        }
        let whole = Sample { bytes, shape: vec![1024, 64] };
        let tiles: Vec<Sample> = (0..4).flat_map(|_| blocks.clone()).collect();
        let units = SecondLook::Whole { whole: &whole, blocks: &tiles };
        let p = plan(NumType::F32, &blocks, &[], Some(units), Objective::Balanced, None).unwrap();
        let u = p.unit.clone().unwrap();
        assert!(u.stored_whole, "{p:?}");
        assert!(u.whole[&p.chosen] > u.blocks.values().copied().fold(0.0, f64::max) * 1.5, "{u:?}");
        assert_eq!(p.version, PLAN_RECORD_VERSION);
        // One block, seen whole or as itself: a tie, and blocks read faster.
        let one = SecondLook::Whole { whole: &blocks[0], blocks: &blocks[..1] };
        let p = plan(NumType::F32, &blocks, &[], Some(one), Objective::Balanced, None).unwrap();
        assert!(!p.unit.unwrap().stored_whole);
        // The speed objective ranks by declared speeds: no second look, blocks.
        let p = plan(NumType::F32, &blocks, &[], Some(units), Objective::Speed, None).unwrap();
        assert!(p.unit.is_none());
        let json = serde_json::to_value(&p).unwrap();
        assert_eq!(serde_json::from_value::<PlanRecord>(json).unwrap(), p);
    }

    #[test]
    fn another_block_shape_is_stored_only_when_clearly_smaller() {
        let blocks: Vec<Sample> = (0..4).map(|k| smooth(64, k as f32)).collect();
        // The same regions cut the same way: a tie, and the first look's blocks stay.
        let same = SecondLook::Shape { ranked: &blocks, other: &blocks, shape: &[64, 64] };
        let p = plan(NumType::F32, &blocks, &[], Some(same), Objective::Balanced, None).unwrap();
        let s = p.shape.clone().unwrap();
        assert!(!s.stored_other && s.shape == [64, 64] && p.unit.is_none(), "{p:?}");
        // Cut the other way, the regions compress far better (here: they are constant).
        let flat: Vec<Sample> =
            blocks.iter().map(|b| Sample { bytes: vec![0; b.bytes.len()], shape: b.shape.clone() }).collect();
        let better = SecondLook::Shape { ranked: &blocks, other: &flat, shape: &[16, 256] };
        let p = plan(NumType::F32, &blocks, &[], Some(better), Objective::Ratio, None).unwrap();
        let s = p.shape.clone().unwrap();
        assert!(s.stored_other && s.other[&p.chosen] > 10.0 * s.ranked.values().copied().fold(0.0, f64::max), "{s:?}");
        assert!(p.refined.is_none(), "the second look replaces the ratio objective's refinement");
        assert_eq!(serde_json::from_value::<PlanRecord>(serde_json::to_value(&p).unwrap()).unwrap(), p);
        // The speed objective keeps the first look's blocks without measuring.
        let p = plan(NumType::F32, &blocks, &[], Some(better), Objective::Speed, None).unwrap();
        assert!(p.shape.is_none());
    }

    #[test]
    fn recheck_switches_only_on_a_clear_gain() {
        let samples: Vec<Sample> = (0..4).map(|k| smooth(64, k as f32)).collect();
        let p = plan(NumType::F32, &samples, &[], None, Objective::Balanced, None).unwrap();
        let goal = Goal::from(Objective::Balanced);
        assert_eq!(recheck(NumType::F32, &samples, &p.chosen, goal, None).unwrap(), None);
        let switched = recheck(NumType::F32, &samples, "lz4", goal, None).unwrap().unwrap();
        assert_eq!(switched.previous.as_deref(), Some("lz4"));
        assert!(switched.gain.unwrap() >= DRIFT_THRESHOLD);
    }

    #[test]
    fn requests_and_bounds_parse() {
        let r: CodecRequest = serde_json::from_str(r#"{"kind":"auto","objective":"ratio"}"#).unwrap();
        assert_eq!(r, CodecRequest::Auto { objective: Objective::Ratio, error_bound: None });
        assert!(serde_json::from_str::<CodecRequest>(r#"{"kind":"auto","objective":"smallest"}"#).is_err());
        assert_eq!(parse_error_bound(" rel = 1e-4").unwrap(), "rel=0.0001");
        for bad in ["abs", "abs=0", "abs=-1", "abs=inf", "max=1", "rel=x"] {
            assert!(parse_error_bound(bad).is_err(), "{bad}");
        }
    }
}
