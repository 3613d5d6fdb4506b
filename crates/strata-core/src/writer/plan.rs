//! Codec plans in the write path: a variable's plan is made from the first data it
//! receives (`strata_codecs::plan` decides), with the other block shape it may be stored in.

use super::{build_chain, gcd, push_chain, StoreWriter};
use crate::error::{Error, Result};
use crate::manifest::RawJson;
use crate::sampling::{self, REFINE_SAMPLES};
use serde::Deserialize;
use strata_codecs::analyzer::{Goal, Objective, Sample, Scale};
use strata_codecs::plan::{self as codec_plan, PLAN_MIN_BYTES};
use strata_codecs::registry;
use strata_codecs::{Backend, ElementContext, RawBackend};

/// A plan still to make, from the first data a variable receives in this writer.
#[derive(Debug, Clone)]
pub(super) enum PendingPlan {
    Plan {
        objective: Objective,
        error_bound: Option<String>,
    },
    /// `auto` for a variable without the record dimension too small to plan
    /// ([`PLAN_MIN_BYTES`]): the default chain, or raw if that does not make it smaller.
    Unplanned,
    Recheck {
        goal: Goal,
        error_bound: Option<String>,
        current: String,
    },
}

/// The part of a stored plan record a later check needs (older records have more fields).
#[derive(Debug, Deserialize)]
pub(super) struct PlanHead {
    pub(super) objective: Option<Objective>,
    #[serde(default)]
    pub(super) error_bound: Option<String>,
    #[serde(default)]
    scale: Option<Scale>,
    #[serde(default)]
    unit: Option<serde::de::IgnoredAny>,
}

impl PlanHead {
    /// The scale the plan was made at; records before version 6 say it by their whole look.
    pub(super) fn scale(&self) -> Scale {
        self.scale.unwrap_or(if self.unit.is_some() { Scale::Small } else { Scale::Stream })
    }
}

/// The smallest block that blocks of `a` and of `b` both tile (each axis their least common
/// multiple), no larger than `extent`.
fn common_region(a: &[u64], b: &[u64], extent: &[u64]) -> Vec<u64> {
    a.iter()
        .zip(b)
        .zip(extent)
        .map(|((&x, &y), &e)| (x / gcd(x, y).max(1)).saturating_mul(y).clamp(1, e.max(1)))
        .collect()
}

/// Another sub-chunk shape a planned variable could be stored in; its plan measures both on
/// its first data and keeps the smaller (`strata_codecs::plan::SecondLook`).
#[derive(Debug, Clone)]
pub(super) enum Alternative {
    /// The variable is compressed whole (`chunking::WHOLE_VARIABLE_BYTES`); these are the
    /// blocks it would otherwise get, which its plan samples.
    Blocks(Vec<u64>),
    /// The variable is one chunk in cube-like blocks; these are blocks of its proportions
    /// (`chunking::auto_alternative`).
    Shape(Vec<u64>),
}

impl StoreWriter {
    /// Makes the plan `idx` is waiting for, from its first data (`extent`, C order).
    pub(super) fn resolve_plan(&mut self, idx: usize, extent: &[u64], data: &[u8]) -> Result<()> {
        let Some(pending) = self.pending[idx].take() else { return Ok(()) };
        if matches!(pending, PendingPlan::Unplanned) {
            return self.raw_unless_smaller(idx, extent, data);
        }
        let var = &self.draft.variables[idx];
        let (Some(t), Some(chunking)) = (var.dtype.num_type(), &var.chunking) else { return Ok(()) };
        // The variable's whole size: a record variable's first slab times the slabs the
        // schema announced (a writer that was not told sees the slab alone).
        let record_bytes = data.len() as u64 / extent.first().copied().unwrap_or(1).max(1);
        let whole = match (self.draft.is_record_var(var), self.records_hint) {
            (true, Some(n)) => record_bytes * n,
            _ => data.len() as u64,
        };
        if whole < PLAN_MIN_BYTES {
            return Ok(());
        }
        let (seed, es) = (sampling::seed_of(&var.name), var.dtype.size());
        // A variable compressed whole is sampled in the blocks it would otherwise get, so its
        // plan costs what any variable's does; then both ways are compared on all of it.
        let alternative = self.alternatives[idx].take();
        let block = match &alternative {
            Some(Alternative::Blocks(b)) => b.clone(),
            _ => chunking.subchunk.clone(),
        };
        let block_bytes = block.iter().zip(extent).map(|(&b, &e)| b.min(e)).product::<u64>() * es as u64;
        let count = sampling::plan_samples(data.len() as u64, block_bytes);
        let sample = sampling::samples(data, extent, &block, es, count, seed);
        // A parallel writer sees only its block, and keeps the shape it was given.
        let own = self.block.is_none();
        let holds_all = own && chunking.subchunk.iter().zip(extent).all(|(&s, &e)| s >= e);
        let record = match pending {
            PendingPlan::Plan { objective, error_bound } => {
                let (mut whole_unit, mut ranked, mut other) = (None, vec![], vec![]);
                match &alternative {
                    Some(Alternative::Blocks(b)) if holds_all => {
                        let shape = extent.iter().map(|&e| e as usize).collect();
                        whole_unit = Some(Sample { bytes: data.to_vec(), shape });
                        ranked = sampling::tiles(data, extent, b, es);
                    }
                    Some(Alternative::Shape(o)) if own => {
                        // Regions that both shapes tile, each cut both ways.
                        let region = common_region(&block, o, extent);
                        let bytes = region.iter().product::<u64>() * es as u64;
                        let n = sampling::shape_regions(data.len() as u64, bytes);
                        for r in sampling::grid_samples(data, extent, &region, es, n, seed.wrapping_add(2)) {
                            let at: Vec<u64> = r.shape.iter().map(|&x| x as u64).collect();
                            ranked.extend(sampling::tiles(&r.bytes, &at, &block, es));
                            other.extend(sampling::tiles(&r.bytes, &at, o, es));
                        }
                    }
                    _ => {}
                }
                let second = match (&alternative, &whole_unit) {
                    (_, Some(w)) => Some(codec_plan::SecondLook::Whole { blocks: &ranked, whole: w }),
                    (Some(Alternative::Shape(o)), None) if !other.is_empty() => {
                        Some(codec_plan::SecondLook::Shape { ranked: &ranked, other: &other, shape: o })
                    }
                    _ => None,
                };
                let refine = if objective == Objective::Ratio && second.is_none() {
                    sampling::samples(data, extent, &block, es, REFINE_SAMPLES, seed.wrapping_add(1))
                } else {
                    vec![]
                };
                codec_plan::plan(t, &sample, &refine, second, objective, error_bound.as_deref())?
            }
            PendingPlan::Unplanned => return Ok(()), // made above, before any sampling
            PendingPlan::Recheck { goal, error_bound, current } => {
                match codec_plan::recheck(t, &sample, &current, goal, error_bound.as_deref())? {
                    Some(r) => r,
                    None => return Ok(()),
                }
            }
        };
        // A variable compressed whole goes back to blocks unless whole measured smaller (the
        // speed objective does not measure: blocks read faster); one in cubes takes the other
        // shape only when that measured smaller.
        let new_shape = match alternative {
            Some(Alternative::Blocks(b)) if holds_all && !record.unit.as_ref().is_some_and(|u| u.stored_whole) => {
                Some(b)
            }
            Some(Alternative::Shape(o)) if record.shape.as_ref().is_some_and(|s| s.stored_other) => Some(o),
            _ => None,
        };
        if let Some(shape) = new_shape.filter(|_| record.previous.is_none()) {
            if let Some(c) = self.draft.variables[idx].chunking.as_mut() {
                c.subchunk = shape;
            }
        }
        let specs = registry::parse_chain(&record.chosen)?;
        let plan = serde_json::to_value(&record).map_err(|e| Error::InvalidArgument(e.to_string()))?;
        let var = &mut self.draft.variables[idx];
        if record.previous.is_some() {
            push_chain(var, specs)?;
        } else {
            // A new variable: nothing was written with its placeholder chain yet.
            var.codecs = vec![specs];
        }
        var.plan = Some(RawJson::new(&plan));
        self.chains[idx] = build_chain(&self.draft.layout, &self.draft.variables[idx])?;
        Ok(())
    }

    /// Stores variable `idx`, all of which is `data`, raw when its chain does not store it in
    /// fewer bytes: a scalar's 8 bytes took 17 in a zstd frame, where netCDF-4 stores them
    /// as they are.
    fn raw_unless_smaller(&mut self, idx: usize, extent: &[u64], data: &[u8]) -> Result<()> {
        let var = &self.draft.variables[idx];
        let (Some(t), Some(specs)) = (var.dtype.num_type(), var.codecs.last()) else { return Ok(()) };
        // A block of it (put_static_block) does not tell.
        if data.len() as u64 != self.draft.bytes(var) {
            return Ok(());
        }
        let shape: Vec<usize> = extent.iter().map(|&e| e as usize).collect();
        let chain = registry::chain(specs, ElementContext::new(t))?;
        if chain.encode(data, &shape).is_ok_and(|e| e.len() < data.len()) {
            return Ok(());
        }
        let var = &mut self.draft.variables[idx];
        var.codecs = vec![vec![RawBackend.spec()]];
        self.chains[idx] = build_chain(&self.draft.layout, &self.draft.variables[idx])?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::{common_region, PlanHead};
    use strata_codecs::analyzer::Scale;

    #[test]
    fn a_plan_says_its_scale_or_its_whole_look_does() {
        let head = |json: &str| serde_json::from_str::<PlanHead>(json).unwrap().scale();
        assert_eq!(head(r#"{"version":6,"objective":"balanced","scale":"small","chosen":"lz4"}"#), Scale::Small);
        assert_eq!(head(r#"{"version":6,"objective":"balanced","scale":"stream","chosen":"lz4"}"#), Scale::Stream);
        // Version 5 and before: a plan with a whole look was made for a variable stored whole.
        let whole = r#"{"version":5,"objective":"balanced","unit":{"whole":{},"blocks":{},"stored_whole":true}}"#;
        assert_eq!(head(whole), Scale::Small);
        assert_eq!(head(r#"{"version":5,"objective":"balanced","chosen":"lz4"}"#), Scale::Stream);
        assert_eq!(head(r#"{"objective":"ratio"}"#), Scale::Stream);
    }

    #[test]
    fn common_regions_are_tiled_by_both_shapes() {
        assert_eq!(common_region(&[1, 17, 24, 24], &[1, 5, 24, 96], &[1, 17, 96, 192]), vec![1, 17, 24, 96]);
        assert_eq!(common_region(&[16, 32, 32], &[16, 16, 64], &[64, 64, 128]), vec![16, 32, 64]);
        // Never beyond the array, even when the multiple is far larger or overflows.
        assert_eq!(common_region(&[23, 1 << 40], &[24, (1 << 40) - 1], &[100, 7]), vec![100, 7]);
        assert_eq!(common_region(&[0], &[5], &[0]), vec![1]);
    }
}
