//! N-dimensional Hilbert curve (John Skilling, "Programming the Hilbert curve", 2004).
//!
//! Chunks of a slab are written in Hilbert order so that chunks close in space are close
//! in the file: a region query then reads few, long runs instead of many scattered ones.

/// Hilbert index of `coords` on a curve filling `[0, 2^bits)^n`. Needs `n * bits <= 128`.
pub fn index(coords: &[u64], bits: u32) -> u128 {
    let n = coords.len();
    if n == 0 || bits == 0 {
        return 0;
    }
    debug_assert!(n as u32 * bits <= 128);
    let mut x: Vec<u64> = coords.to_vec();
    axes_to_transpose(&mut x, bits);
    // Interleave: the top bit of x[0], then of x[1], ... forms the most significant bits.
    let mut h: u128 = 0;
    for b in (0..bits).rev() {
        for xi in &x {
            h = (h << 1) | ((xi >> b) & 1) as u128;
        }
    }
    h
}

/// Inverse of [`index`] (the tests check the curve with it).
#[cfg(test)]
pub fn coords(mut h: u128, n: usize, bits: u32) -> Vec<u64> {
    let mut x = vec![0u64; n];
    if n == 0 || bits == 0 {
        return x;
    }
    for b in 0..bits {
        for i in (0..n).rev() {
            x[i] |= ((h & 1) as u64) << b;
            h >>= 1;
        }
    }
    transpose_to_axes(&mut x, bits);
    x
}

fn axes_to_transpose(x: &mut [u64], bits: u32) {
    let n = x.len();
    let m: u64 = 1 << (bits - 1);
    // Inverse undo.
    let mut q = m;
    while q > 1 {
        let p = q - 1;
        for i in 0..n {
            if x[i] & q != 0 {
                x[0] ^= p;
            } else {
                let t = (x[0] ^ x[i]) & p;
                x[0] ^= t;
                x[i] ^= t;
            }
        }
        q >>= 1;
    }
    // Gray encode.
    for i in 1..n {
        x[i] ^= x[i - 1];
    }
    let mut t = 0;
    let mut q = m;
    while q > 1 {
        if x[n - 1] & q != 0 {
            t ^= q - 1;
        }
        q >>= 1;
    }
    for xi in x.iter_mut() {
        *xi ^= t;
    }
}

#[cfg(test)]
fn transpose_to_axes(x: &mut [u64], bits: u32) {
    let n = x.len();
    let big: u64 = 2 << (bits - 1);
    // Gray decode.
    let t = x[n - 1] >> 1;
    for i in (1..n).rev() {
        x[i] ^= x[i - 1];
    }
    x[0] ^= t;
    // Undo excess work.
    let mut q = 2;
    while q != big {
        let p = q - 1;
        for i in (0..n).rev() {
            if x[i] & q != 0 {
                x[0] ^= p;
            } else {
                let t = (x[0] ^ x[i]) & p;
                x[0] ^= t;
                x[i] ^= t;
            }
        }
        q <<= 1;
    }
}

/// Bits needed so that `[0, 2^bits)` covers `0..extent`.
pub fn bits_for(extent: u64) -> u32 {
    if extent <= 1 {
        0
    } else {
        64 - (extent - 1).leading_zeros()
    }
}

/// The chunks of a grid (row-major ids) sorted along the Hilbert curve of the enclosing
/// power-of-two cube. Grids with more than 128 bits of Hilbert index fall back to row-major.
pub fn order(grid: &[u64]) -> Vec<u64> {
    let total: u64 = grid.iter().product();
    let bits = grid.iter().map(|&g| bits_for(g)).max().unwrap_or(0);
    if bits as usize * grid.len() > 128 {
        return (0..total).collect();
    }
    let mut keyed: Vec<(u128, u64)> = (0..total).map(|id| (index(&crate::grid::unravel(id, grid), bits), id)).collect();
    keyed.sort_unstable();
    keyed.into_iter().map(|(_, id)| id).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_visits_every_cell_once() {
        for (n, bits) in [(1, 5), (2, 4), (3, 3), (4, 2), (5, 2)] {
            let cells = 1u128 << (n as u32 * bits);
            let mut seen = std::collections::HashSet::new();
            for h in 0..cells {
                let c = coords(h, n, bits);
                assert!(c.iter().all(|&v| v < (1 << bits)));
                assert_eq!(index(&c, bits), h, "n={n} bits={bits} h={h}");
                assert!(seen.insert(c));
            }
        }
    }

    #[test]
    fn consecutive_cells_are_neighbours() {
        // The defining locality property: each step moves by one along one axis.
        for (n, bits) in [(2, 5), (3, 4), (4, 3)] {
            let cells = 1u128 << (n as u32 * bits);
            let mut prev = coords(0, n, bits);
            for h in 1..cells {
                let c = coords(h, n, bits);
                let dist: u64 = c.iter().zip(&prev).map(|(a, b)| a.abs_diff(*b)).sum();
                assert_eq!(dist, 1, "n={n} bits={bits} step {h}");
                prev = c;
            }
        }
    }

    #[test]
    fn ordering_of_a_ragged_grid_beats_row_major_locality() {
        let grid = [7u64, 13, 10];
        let ord = order(&grid);
        let mut sorted = ord.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..grid.iter().product()).collect::<Vec<_>>());
        let mean_jump = |ids: &[u64]| {
            let total: u64 = ids
                .windows(2)
                .map(|w| {
                    let a = crate::grid::unravel(w[0], &grid);
                    let b = crate::grid::unravel(w[1], &grid);
                    a.iter().zip(&b).map(|(x, y)| x.abs_diff(*y)).sum::<u64>()
                })
                .sum();
            total as f64 / (ids.len() - 1) as f64
        };
        let row_major: Vec<u64> = (0..grid.iter().product()).collect();
        assert!(mean_jump(&ord) < 0.8 * mean_jump(&row_major), "{} vs {}", mean_jump(&ord), mean_jump(&row_major));
        // Mean size of the bounding box of 8 consecutive chunks: Hilbert keeps them compact.
        let spread = |ids: &[u64]| {
            ids.chunks(8)
                .map(|w| {
                    (0..3)
                        .map(|d| {
                            let v: Vec<u64> = w.iter().map(|&id| crate::grid::unravel(id, &grid)[d]).collect();
                            v.iter().max().unwrap() - v.iter().min().unwrap() + 1
                        })
                        .product::<u64>()
                })
                .sum::<u64>() as f64
                / (ids.len() / 8) as f64
        };
        assert!(spread(&ord) < spread(&row_major), "{} vs {}", spread(&ord), spread(&row_major));
    }
}
