//! Deterministic mutations of seed inputs: a short stand-in for a fuzzer where a test must
//! run on the stable toolchain in seconds, the same inputs on every run.

/// A small, seeded generator (xorshift): the same mutations on every run.
#[derive(Debug, Clone)]
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }
}

const EXTREMES: [&str; 8] = ["-1", "0", "4294967296", "18446744073709551615", "1e308", "NaN", "-0", ":"];

/// `seed` with one or two edits: a bit flipped, the tail cut, a run duplicated, the tail
/// replaced by another seed's, a decimal number made extreme, or a delimiter inserted.
/// Never empty (an empty result becomes `G`: the server's harness reads the start of a request).
pub fn mutate(rng: &mut Rng, seed: &[u8], other: &[u8]) -> Vec<u8> {
    let mut b = seed.to_vec();
    if b.is_empty() {
        b.push(b'G');
    }
    for _ in 0..1 + rng.below(2) {
        let at = rng.below(b.len());
        match rng.below(6) {
            0 => b[at] ^= 1 << rng.below(8),
            1 => b.truncate(at.max(1)),
            2 => {
                let n = rng.below(8).min(b.len() - at);
                let piece = b[at..at + n].to_vec();
                b.splice(at..at, piece);
            }
            3 => {
                let from = rng.below(other.len());
                b.splice(at.., other.get(from..).unwrap_or_default().iter().copied());
            }
            4 => {
                if let Some(i) = b.iter().skip(at).position(|c| c.is_ascii_digit()).map(|i| i + at) {
                    let end = b[i..].iter().position(|c| !c.is_ascii_digit()).map_or(b.len(), |e| e + i);
                    let x = EXTREMES[rng.below(EXTREMES.len())].as_bytes();
                    b.splice(i..end, x.iter().copied());
                }
            }
            _ => {
                let c = b"[]:,;&=%?/.<>*()'\"\\ \n-"[rng.below(22)];
                b.insert(at, c);
            }
        }
        if b.is_empty() {
            b.push(b'G');
        }
    }
    b
}
