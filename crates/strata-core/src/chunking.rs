//! The documented rules that pick chunk and sub-chunk shapes (docs/format.md, "Chunk shapes").

use serde::{Deserialize, Serialize};

/// Target raw size of a chunk, the unit of I/O.
pub const DEFAULT_CHUNK_BYTES: u64 = 4 << 20;
/// Target raw size of a sub-chunk, the unit of compression.
pub const DEFAULT_SUBCHUNK_BYTES: u64 = 64 << 10;
/// Sub-chunk target under level V: bins cut each sub-chunk into many segments, so larger
/// sub-chunks keep segments (and index entries) from getting tiny.
pub const DEFAULT_BINNED_SUBCHUNK_BYTES: u64 = 256 << 10;
/// Target raw size of the largest variable's slab, the unit of files and of ingest memory.
pub const DEFAULT_SLAB_BYTES: u64 = 64 << 20;
/// A variable of at most this many raw bytes may be compressed whole, as one sub-chunk: the
/// writer makes it one, and its codec plan goes back to blocks unless whole is smaller
/// (`strata_codecs::plan::Units`; an explicit chain, not planned, keeps it whole). In
/// 64 KiB blocks such variables lost what compresses them best: a cell-area field of an
/// icosahedral grid repeats its few thousand values across the whole array (zstd: 4.3x
/// larger in 8192-element blocks than whole), a base state is the same at three of four
/// times. Decoding one whole costs about 1 ms at the
/// balanced objective's 1 GB/s floor; netCDF-C and Zarr keep such variables in one chunk.
pub const WHOLE_VARIABLE_BYTES: u64 = 1 << 20;

/// The sub-chunk target of a variable of `whole` raw bytes (None while unknown, as for a
/// stream of records): the variable itself when it is at most [`WHOLE_VARIABLE_BYTES`],
/// else `default`.
pub fn subchunk_target(default: u64, whole: Option<u64>) -> u64 {
    match whole {
        Some(w) if w <= WHOLE_VARIABLE_BYTES => w.max(default),
        _ => default,
    }
}

/// How automatic shapes are cut down to their target size: which axis is halved next.
/// Each rule halves (rounding up) until the block fits; the shapes are stored, so a store
/// reads the same whichever rule wrote it. Chosen by name (`shape_rule` in the writer's
/// options and in layout files).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ShapeRule {
    /// `cube`, unless its block would keep whole an axis at most half as long as the
    /// block's longest edge (a few levels, months or ensemble members): then
    /// `proportional`, which cuts such axes too, so a map at one level or a box does not
    /// decode every level. Arrays without short axes (long time series) keep cubes.
    #[default]
    Auto,
    /// The longest axis (the leading one on ties): blocks near a cube, so maps and
    /// series at a point read about as much. Short axes (a few levels, months or ensemble
    /// members) stay whole.
    Cube,
    /// The axis cut least so far relative to its length (the leading one on ties): blocks
    /// keep the array's proportions, so a box that takes the same share of every axis
    /// decodes the least; short axes are cut too, and series get longer blocks.
    Proportional,
    /// The leading axis not yet cut to 1, as netCDF-C and python-blosc2 cut: blocks are
    /// slices of the last axes, so a map at one time and level decodes the least, and a
    /// series at a point the most.
    Slices,
}

impl ShapeRule {
    pub const ALL: [ShapeRule; 4] = [ShapeRule::Auto, ShapeRule::Cube, ShapeRule::Proportional, ShapeRule::Slices];

    /// Cuts `shape` (axes of length 0 count as 1) until a block of `elem_size`-byte
    /// elements fits `target_bytes`. The result never exceeds `shape`.
    pub fn shape(self, shape: &[u64], elem_size: u64, target_bytes: u64) -> Vec<u64> {
        if self == ShapeRule::Auto {
            let cube = ShapeRule::Cube.shape(shape, elem_size, target_bytes);
            return if keeps_short_axes(&cube, shape) {
                ShapeRule::Proportional.shape(shape, elem_size, target_bytes)
            } else {
                cube
            };
        }
        let whole: Vec<u64> = shape.iter().map(|&s| s.max(1)).collect();
        let mut c = whole.clone();
        let bytes = |c: &[u64]| c.iter().product::<u64>().saturating_mul(elem_size.max(1));
        while bytes(&c) > target_bytes {
            let cuttable = (0..c.len()).filter(|&i| c[i] > 1);
            // The first of the axes that rank highest (max_by keeps the last of equals).
            let next = match self {
                // Auto is answered above, by one of the others.
                ShapeRule::Cube | ShapeRule::Auto => cuttable.rev().max_by_key(|&i| c[i]),
                // c[a] / whole[a] against c[b] / whole[b], without rounding.
                ShapeRule::Proportional => cuttable
                    .rev()
                    .max_by(|&a, &b| (c[a] as u128 * whole[b] as u128).cmp(&(c[b] as u128 * whole[a] as u128))),
                ShapeRule::Slices => cuttable.min(),
            };
            let Some(i) = next else { break };
            c[i] = c[i].div_ceil(2);
        }
        c
    }
}

/// The blocks of the array's proportions ([`ShapeRule::Proportional`]) where the default
/// rule chose cube-like ones that differ from them; None where it chose proportional blocks
/// already (cubes would keep a short axis whole) or both are the same. The writer measures
/// both on a variable of one chunk and keeps the smaller (`strata_codecs::plan::SecondLook`).
pub fn auto_alternative(shape: &[u64], elem_size: u64, target_bytes: u64) -> Option<Vec<u64>> {
    let cube = ShapeRule::Cube.shape(shape, elem_size, target_bytes);
    if keeps_short_axes(&cube, shape) {
        return None; // the default rule took the proportional blocks already
    }
    let proportional = ShapeRule::Proportional.shape(shape, elem_size, target_bytes);
    (proportional != cube).then_some(proportional)
}

/// Whether `cube` keeps whole an axis of `shape` at most half as long as its longest edge:
/// then [`ShapeRule::Auto`] takes the proportional blocks instead.
fn keeps_short_axes(cube: &[u64], shape: &[u64]) -> bool {
    let longest = cube.iter().copied().max().unwrap_or(1);
    cube.iter().zip(shape).any(|(&c, &w)| c == w && w > 1 && 2 * w <= longest)
}

/// The box a large array is moved in, block by block, with about `target_bytes` in memory:
/// whole chunks of `chunk`, the whole array where it fits, else cut along the leading
/// dimensions first (one member of an ensemble, then some of its times). Writing a static
/// variable and exporting one take blocks of this shape.
pub fn piece_shape(extent: &[u64], chunk: &[u64], elem_size: u64, target_bytes: u64) -> Vec<u64> {
    let mut piece = extent.to_vec();
    let mut bytes = extent.iter().product::<u64>() * elem_size;
    for (n, &c) in piece.iter_mut().zip(chunk) {
        if bytes <= target_bytes || *n == 0 {
            break;
        }
        let per = bytes / *n;
        let c = c.max(1);
        *n = (c * (target_bytes / (per * c).max(1))).max(c).min(*n);
        bytes = per * *n;
    }
    piece
}

/// The default rule's shape ([`ShapeRule::Auto`]).
pub fn auto_shape(shape: &[u64], elem_size: u64, target_bytes: u64) -> Vec<u64> {
    ShapeRule::Auto.shape(shape, elem_size, target_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_fit_their_target_and_split_long_axes_first() {
        let cube = ShapeRule::Cube;
        let c = cube.shape(&[684, 89, 180], 4, DEFAULT_CHUNK_BYTES);
        assert!(c.iter().product::<u64>() * 4 <= DEFAULT_CHUNK_BYTES);
        assert_eq!(c, vec![86, 89, 90]);
        assert_eq!(cube.shape(&[10], 8, 1 << 20), vec![10]);
        assert_eq!(cube.shape(&[], 8, 1), Vec::<u64>::new());
        assert_eq!(cube.shape(&[0, 5], 4, 1 << 20), vec![1, 5]);
        // Short axes stay whole under the cube rule.
        assert_eq!(cube.shape(&[3, 12, 251, 401], 2, DEFAULT_SUBCHUNK_BYTES), vec![3, 12, 32, 26]);
    }

    #[test]
    fn the_default_rule_cuts_short_axes_that_cubes_keep_whole() {
        // No short axis: the cube's block, both for chunks and for sub-chunks (an axis about
        // as long as the block's edge, as ERSST's 89 latitudes against 90, is not short).
        assert_eq!(auto_shape(&[684, 89, 180], 4, DEFAULT_CHUNK_BYTES), vec![86, 89, 90]);
        assert_eq!(auto_shape(&[684, 89, 180], 4, DEFAULT_SUBCHUNK_BYTES), vec![22, 23, 23]);
        assert_eq!(auto_shape(&[64, 64, 128], 4, DEFAULT_SUBCHUNK_BYTES), vec![16, 32, 32]);
        assert_eq!(auto_shape(&[1, 17, 96, 192], 4, DEFAULT_SUBCHUNK_BYTES), vec![1, 17, 24, 24]);
        // A few times and depths, months or corners: the proportional block.
        let prop = ShapeRule::Proportional;
        for (shape, es) in [(vec![3u64, 12, 251, 401], 2), (vec![12, 48602], 4), (vec![291, 360, 4], 8)] {
            assert_eq!(
                auto_shape(&shape, es, DEFAULT_SUBCHUNK_BYTES),
                prop.shape(&shape, es, DEFAULT_SUBCHUNK_BYTES),
                "{shape:?}"
            );
        }
        assert_eq!(auto_shape(&[3, 12, 251, 401], 2, DEFAULT_SUBCHUNK_BYTES), vec![1, 3, 63, 101]);
        // What fits is left alone.
        assert_eq!(auto_shape(&[3, 10], 4, 1 << 20), vec![3, 10]);
        assert_eq!(auto_shape(&[], 8, 1), Vec::<u64>::new());
    }

    #[test]
    fn the_alternative_to_cubes_is_proportional_blocks() {
        let sub = DEFAULT_SUBCHUNK_BYTES;
        assert_eq!(auto_alternative(&[1, 17, 96, 192], 4, sub), Some(vec![1, 5, 24, 96]));
        assert_eq!(auto_alternative(&[64, 64, 128], 4, sub), Some(vec![16, 16, 64]));
        // Already proportional (cubes would keep the 3 times whole), or nothing to choose.
        assert_eq!(auto_alternative(&[3, 12, 251, 401], 2, sub), None);
        assert_eq!(auto_alternative(&[163842], 8, sub), None);
        assert_eq!(auto_alternative(&[3, 10], 4, sub), None);
    }

    #[test]
    fn proportional_shapes_keep_the_arrays_proportions() {
        let p = ShapeRule::Proportional;
        assert_eq!(p.shape(&[3, 12, 251, 401], 2, DEFAULT_SUBCHUNK_BYTES), vec![1, 3, 63, 101]);
        assert_eq!(p.shape(&[12, 48602], 4, DEFAULT_SUBCHUNK_BYTES), vec![2, 6076]);
        // On a cube both rules cut alike; what fits is left alone.
        assert_eq!(p.shape(&[64, 64, 64], 4, DEFAULT_SUBCHUNK_BYTES), vec![16, 32, 32]);
        assert_eq!(auto_shape(&[64, 64, 64], 4, DEFAULT_SUBCHUNK_BYTES), vec![16, 32, 32]);
        assert_eq!(p.shape(&[10, 10], 8, 1 << 20), vec![10, 10]);
        assert_eq!(p.shape(&[], 8, 1), Vec::<u64>::new());
        assert_eq!(p.shape(&[0, 5], 4, 4), vec![1, 1]);
        // Cannot get under the target: stops at single elements.
        assert_eq!(p.shape(&[7, 3], 8, 1), vec![1, 1]);
        for shape in [vec![684u64, 89, 180], vec![1, 17, 96, 192], vec![5, 1, 1000]] {
            for rule in ShapeRule::ALL {
                let c = rule.shape(&shape, 4, 1 << 14);
                assert!(c.iter().product::<u64>() * 4 <= 1 << 14, "{rule:?} {shape:?} {c:?}");
                assert!(c.iter().zip(&shape).all(|(&c, &s)| (1..=s).contains(&c)));
            }
        }
    }

    #[test]
    fn slices_cut_the_leading_axes_first() {
        let s = ShapeRule::Slices;
        assert_eq!(s.shape(&[3, 12, 251, 401], 2, DEFAULT_SUBCHUNK_BYTES), vec![1, 1, 63, 401]);
        assert_eq!(s.shape(&[684, 89, 180], 4, DEFAULT_SUBCHUNK_BYTES), vec![1, 89, 180]);
        assert_eq!(s.shape(&[10, 10], 8, 1 << 20), vec![10, 10]);
    }

    #[test]
    fn small_variables_are_one_subchunk() {
        assert_eq!(subchunk_target(DEFAULT_SUBCHUNK_BYTES, None), DEFAULT_SUBCHUNK_BYTES);
        assert_eq!(subchunk_target(DEFAULT_SUBCHUNK_BYTES, Some(1000)), DEFAULT_SUBCHUNK_BYTES);
        assert_eq!(subchunk_target(DEFAULT_SUBCHUNK_BYTES, Some(WHOLE_VARIABLE_BYTES)), WHOLE_VARIABLE_BYTES);
        assert_eq!(subchunk_target(DEFAULT_SUBCHUNK_BYTES, Some(WHOLE_VARIABLE_BYTES + 1)), DEFAULT_SUBCHUNK_BYTES);
        // WRF's base-state pressure, (time 4, level 14, 48, 48) float32: one block.
        let shape = [4u64, 14, 48, 48];
        let whole = shape.iter().product::<u64>() * 4;
        for rule in ShapeRule::ALL {
            assert_eq!(rule.shape(&shape, 4, subchunk_target(DEFAULT_SUBCHUNK_BYTES, Some(whole))), shape);
        }
    }

    #[test]
    fn rules_go_by_name() {
        let names: Vec<String> = ShapeRule::ALL.iter().map(|r| serde_json::to_string(r).unwrap()).collect();
        assert_eq!(names, ["\"auto\"", "\"cube\"", "\"proportional\"", "\"slices\""]);
        let r: ShapeRule = serde_json::from_str("\"proportional\"").unwrap();
        assert_eq!(r, ShapeRule::Proportional);
        let err = serde_json::from_str::<ShapeRule>("\"cubic\"").unwrap_err().to_string();
        assert!(err.contains("expected one of `auto`, `cube`, `proportional`, `slices`"), "{err}");
    }
}
