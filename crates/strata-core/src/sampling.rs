//! The sample rule of codec planning: which blocks of a variable's data the analyzer sees.
//!
//! Up to `count` blocks of the variable's sub-chunk shape (the unit segments are compressed
//! in), spread evenly along the leading (usually time) dimension and placed at seeded
//! pseudo-random positions along the others, so the sample covers the whole period and
//! different regions. The seed comes from the variable's name: the same data always gives
//! the same sample, whatever else the store holds.

use crate::grid::{copy_block, unravel};
use strata_codecs::analyzer::Sample;

/// Blocks sampled for a plan (at most), and for the ratio objective's second look.
pub const PLAN_SAMPLES: usize = 4;
pub const REFINE_SAMPLES: usize = 16;
/// A plan's sample holds at most this fraction of the data it comes from (and at least two
/// blocks): every candidate compresses the whole sample, so on a small variable a fixed
/// number of blocks would cost more than writing the variable.
pub const SAMPLE_SHARE: u64 = 16;

/// How many blocks of `block_bytes` to sample from `data_bytes` of data.
pub fn plan_samples(data_bytes: u64, block_bytes: u64) -> usize {
    share(data_bytes, block_bytes, 2)
}

/// How many regions of `region_bytes` the second look of a variable in cube-like blocks cuts
/// both ways (`chunking::auto_alternative`): the plan's share of `data_bytes`, at least one.
/// Each region costs two compressions of itself, more than the first look's blocks.
pub fn shape_regions(data_bytes: u64, region_bytes: u64) -> usize {
    share(data_bytes, region_bytes, 1)
}

/// Units of `unit_bytes` in [`SAMPLE_SHARE`]'s fraction of `data_bytes`, from `at_least` to
/// [`PLAN_SAMPLES`].
fn share(data_bytes: u64, unit_bytes: u64, at_least: u64) -> usize {
    (data_bytes / (SAMPLE_SHARE * unit_bytes.max(1))).clamp(at_least, PLAN_SAMPLES as u64) as usize
}

/// A seed from a name (FNV-1a), so samples do not depend on the order variables come in.
pub fn seed_of(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ b as u64).wrapping_mul(0x0100_0000_01b3))
}

/// splitmix64: small, fast and fixed forever (a sample must not change with a crate update;
/// nor must the calibration stores, which draw their noise from it).
pub(crate) struct SplitMix(pub(crate) u64);

impl SplitMix {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        if n <= 1 {
            0
        } else {
            self.next() % n
        }
    }
}

/// The start of each sampled block of shape `block` (clamped to `extent`) inside `extent`.
pub fn block_starts(extent: &[u64], block: &[u64], count: usize, seed: u64) -> Vec<Vec<u64>> {
    if extent.is_empty() {
        return vec![vec![]];
    }
    let block: Vec<u64> = block.iter().zip(extent).map(|(&b, &e)| b.clamp(1, e.max(1))).collect();
    let positions: Vec<u64> = extent.iter().zip(&block).map(|(&e, &b)| (e + 1).saturating_sub(b).max(1)).collect();
    let total = positions.iter().fold(1u64, |a, &p| a.saturating_mul(p));
    let count = (count as u64).clamp(1, total) as usize;
    let mut rng = SplitMix(seed);
    (0..count)
        .map(|i| {
            let lead = if count > 1 {
                (i as u64 * (positions[0] - 1) + (count as u64 - 1) / 2) / (count as u64 - 1)
            } else {
                0
            };
            std::iter::once(lead).chain(positions[1..].iter().map(|&p| rng.below(p))).collect()
        })
        .collect()
}

/// The sampled blocks of `data` (C order, `extent`, `es`-byte elements) as analyzer samples.
pub fn samples(data: &[u8], extent: &[u64], block: &[u64], es: usize, count: usize, seed: u64) -> Vec<Sample> {
    let block: Vec<u64> = block.iter().zip(extent).map(|(&b, &e)| b.clamp(1, e.max(1))).collect();
    let ones = vec![1u64; extent.len()];
    let zeros = vec![0u64; extent.len()];
    block_starts(extent, &block, count, seed)
        .into_iter()
        .map(|start| {
            let mut bytes = vec![0u8; block.iter().product::<u64>() as usize * es];
            copy_block(data, extent, &start, &ones, &mut bytes, &block, &zeros, &block, es);
            Sample { bytes, shape: block.iter().map(|&b| b as usize).collect() }
        })
        .collect()
}

/// Every block of `data` (C order, `extent`, `es`-byte elements) on the regular grid of
/// `block`, row-major, those at the far edges cut short: the variable as blocks would store it.
pub fn tiles(data: &[u8], extent: &[u64], block: &[u64], es: usize) -> Vec<Sample> {
    let grid = Grid::new(extent, block);
    (0..grid.len()).map(|i| grid.cut(data, i, es)).collect()
}

/// `count` blocks of the regular grid of `block` (as [`tiles`] cuts it), spread evenly over
/// the grid in row-major order, each at a seeded place within its share: blocks as they are
/// stored, where [`samples`] may place a block anywhere.
pub fn grid_samples(data: &[u8], extent: &[u64], block: &[u64], es: usize, count: usize, seed: u64) -> Vec<Sample> {
    let grid = Grid::new(extent, block);
    let total = grid.len();
    let count = (count as u64).clamp(1, total);
    let mut rng = SplitMix(seed);
    (0..count).map(|i| grid.cut(data, i * total / count + rng.below(total / count), es)).collect()
}

/// The regular grid of a block shape over an array, the blocks at the far edges cut short.
struct Grid<'a> {
    extent: &'a [u64],
    block: Vec<u64>,
    counts: Vec<u64>,
}

impl<'a> Grid<'a> {
    fn new(extent: &'a [u64], block: &[u64]) -> Self {
        let block: Vec<u64> = block.iter().zip(extent).map(|(&b, &e)| b.clamp(1, e.max(1))).collect();
        let counts = extent.iter().zip(&block).map(|(&e, &b)| e.max(1).div_ceil(b)).collect();
        Grid { extent, block, counts }
    }

    fn len(&self) -> u64 {
        self.counts.iter().product()
    }

    /// Block `i` (row-major) of `data`.
    fn cut(&self, data: &[u8], i: u64, es: usize) -> Sample {
        let at = unravel(i, &self.counts);
        let start: Vec<u64> = at.iter().zip(&self.block).map(|(&a, &b)| a * b).collect();
        let shape: Vec<u64> =
            start.iter().zip(&self.block).zip(self.extent).map(|((&s, &b), &e)| b.min(e.max(1) - s)).collect();
        let (ones, zeros) = (vec![1u64; shape.len()], vec![0u64; shape.len()]);
        let mut bytes = vec![0u8; shape.iter().product::<u64>() as usize * es];
        copy_block(data, self.extent, &start, &ones, &mut bytes, &shape, &zeros, &shape, es);
        Sample { bytes, shape: shape.iter().map(|&b| b as usize).collect() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_cover_the_period_and_stay_inside() {
        let starts = block_starts(&[100, 50, 40], &[10, 8, 8], 4, seed_of("sst"));
        assert_eq!(starts.iter().map(|s| s[0]).collect::<Vec<_>>(), vec![0, 30, 60, 90]);
        assert!(starts.iter().all(|s| s[1] + 8 <= 50 && s[2] + 8 <= 40));
        assert_eq!(starts, block_starts(&[100, 50, 40], &[10, 8, 8], 4, seed_of("sst")), "seeded");
        // Fewer positions than asked for, blocks larger than the data, no dimensions.
        assert_eq!(block_starts(&[3], &[3], 4, 1), vec![vec![0]]);
        assert_eq!(block_starts(&[2, 2], &[9, 9], 2, 1), vec![vec![0, 0]]);
        assert_eq!(block_starts(&[], &[], 4, 1), vec![Vec::<u64>::new()]);
    }

    #[test]
    fn tiles_cover_the_array_once() {
        let extent = [5u64, 7];
        let data: Vec<u8> = (0..35u8).collect();
        let t = tiles(&data, &extent, &[2, 3], 1);
        assert_eq!(
            t.iter().map(|s| s.shape.clone()).collect::<Vec<_>>(),
            [[2, 3], [2, 3], [2, 1], [2, 3], [2, 3], [2, 1], [1, 3], [1, 3], [1, 1]]
        );
        let mut seen: Vec<u8> = t.iter().flat_map(|s| s.bytes.clone()).collect();
        seen.sort();
        assert_eq!(seen, data);
        assert_eq!(t[4].bytes, vec![17, 18, 19, 24, 25, 26]);
        assert_eq!(tiles(&data, &extent, &[9, 9], 1)[0].bytes, data);
    }

    #[test]
    fn grid_samples_are_tiles_spread_over_the_grid() {
        let extent = [5u64, 7];
        let data: Vec<u8> = (0..35u8).collect();
        let all = tiles(&data, &extent, &[2, 3], 1);
        let some = grid_samples(&data, &extent, &[2, 3], 1, 3, seed_of("t"));
        assert_eq!(some.len(), 3);
        // One from each third of the nine blocks, in order.
        for (k, s) in some.iter().enumerate() {
            let i = all.iter().position(|t| t.bytes == s.bytes && t.shape == s.shape).unwrap();
            assert_eq!(i / 3, k, "{i}");
        }
        let parts = |v: Vec<Sample>| v.into_iter().map(|s| (s.bytes, s.shape)).collect::<Vec<_>>();
        assert_eq!(parts(some), parts(grid_samples(&data, &extent, &[2, 3], 1, 3, seed_of("t"))), "seeded");
        assert_eq!(parts(grid_samples(&data, &extent, &[2, 3], 1, 20, 1)), parts(all), "asked for more: every block");
    }

    proptest::proptest! {
        /// Whatever the shapes, the tiles hold every element once, each where its block
        /// puts it (the second look of a small variable measures exactly what blocks store).
        #[test]
        fn tiles_are_the_blocks_of_the_array(extent in proptest::collection::vec(1u64..9, 1..4),
                                             cut in proptest::collection::vec(1u64..12, 3)) {
            let block: Vec<u64> = extent.iter().zip(&cut).map(|(&e, &c)| c.min(e + 2)).collect();
            let n = extent.iter().product::<u64>() as usize;
            let data: Vec<u8> = (0..n * 2).map(|i| (i % 251) as u8).collect();
            let t = tiles(&data, &extent, &block, 2);
            let total: usize = t.iter().map(|s| s.bytes.len()).sum();
            proptest::prop_assert_eq!(total, data.len());
            let clamped: Vec<u64> = block.iter().zip(&extent).map(|(&b, &e)| b.min(e)).collect();
            let grid: Vec<u64> = extent.iter().zip(&clamped).map(|(&e, &b)| e.div_ceil(b)).collect();
            for (i, tile) in t.iter().enumerate() {
                let at = unravel(i as u64, &grid);
                // The tile's first element is the array's element at the block's corner.
                let corner: Vec<u64> = at.iter().zip(&clamped).map(|(&a, &b)| a * b).collect();
                let flat = corner.iter().zip(&extent).fold(0u64, |acc, (&c, &e)| acc * e + c) as usize;
                proptest::prop_assert_eq!(&tile.bytes[..2], &data[flat * 2..flat * 2 + 2]);
            }
        }
    }

    #[test]
    fn samples_hold_the_blocks_values() {
        let extent = [6u64, 5];
        let data: Vec<u8> = (0..30u8).collect();
        for s in samples(&data, &extent, &[2, 3], 1, 3, 7) {
            assert_eq!(s.shape, vec![2, 3]);
            let (r, c) = (s.bytes[0] / 5, s.bytes[0] % 5);
            assert_eq!(
                s.bytes,
                vec![
                    s.bytes[0],
                    s.bytes[0] + 1,
                    s.bytes[0] + 2,
                    (r + 1) * 5 + c,
                    (r + 1) * 5 + c + 1,
                    (r + 1) * 5 + c + 2
                ]
            );
        }
    }
}
