//! Division by a fixed divisor, fast.

/// Division by a fixed extent. Dividends known to fit in 32 bits use a precomputed
/// reciprocal (Lemire's fastdiv): a multiplication instead of a 64-bit division, which
/// dominated turning flat indices into rows and coordinates.
#[derive(Debug, Clone, Copy)]
pub struct FastDiv {
    /// The divisor (at least 1).
    pub d: u64,
    /// ceil(2^64 / d) when dividends fit in 32 bits and d > 1; 0 otherwise.
    magic: u64,
}

impl FastDiv {
    /// Division by `d` (0 counts as 1); `small_dividends`: every dividend fits in 32 bits.
    pub fn new(d: u64, small_dividends: bool) -> Self {
        let d = d.max(1);
        let magic = if small_dividends && d > 1 { u64::MAX / d + 1 } else { 0 };
        FastDiv { d, magic }
    }

    /// `x / d`.
    #[inline]
    pub fn quotient(self, x: u64) -> u64 {
        if self.magic != 0 {
            ((u128::from(self.magic) * u128::from(x)) >> 64) as u64
        } else {
            x / self.d
        }
    }
}

#[cfg(test)]
mod tests {
    use super::FastDiv;

    #[test]
    fn matches_division_for_32_bit_dividends() {
        for d in [1u64, 2, 3, 7, 89, 180, 16020, 65_537, u64::from(u32::MAX)] {
            let f = FastDiv::new(d, true);
            let g = FastDiv::new(d, false);
            for x in [0u64, 1, d - 1, d, d + 1, 12_345_678, u64::from(u32::MAX) - 1, u64::from(u32::MAX)] {
                assert_eq!(f.quotient(x), x / d, "{x} / {d}");
                assert_eq!(g.quotient(x), x / d);
            }
        }
        assert_eq!(FastDiv::new(0, true).quotient(5), 5);
    }
}
