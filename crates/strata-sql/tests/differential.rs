//! SQL answers equal DataFusion's over the same rows in memory — a short, deterministic
//! stand-in for the `sql_query` fuzz target (`make fuzz-server` runs the real one,
//! coverage-guided): thousands of queries chosen by seeded random bytes, by every method.
//! A difference fails the test with the query that caused it.

use strata_sql::fuzzing::shared;

/// A small, seeded generator (xorshift): the same queries on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[test]
fn answers_equal_datafusion_over_the_rows_in_memory() {
    let harness = shared();
    let mut rng = Rng(0x0005_eed0_f5a1);
    let mut failures = Vec::new();
    for _ in 0..2000 {
        let input: Vec<u8> = (0..24).map(|_| rng.next() as u8).collect();
        if let Err(e) = harness.run(&input) {
            failures.push(e);
        }
    }
    assert!(
        failures.is_empty(),
        "{} of 2000 queries differ; the first:\n{}",
        failures.len(),
        failures[..failures.len().min(3)].join("\n\n")
    );
}
