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

/// Runs `queries` queries chosen by bytes from the generator seeded with `seed`, each
/// `times` times in a row, and fails with the first few that differ from DataFusion's.
fn seeded(seed: u64, queries: usize, times: usize) {
    let harness = shared();
    let mut rng = Rng(seed);
    let mut failures = Vec::new();
    for _ in 0..queries {
        let input: Vec<u8> = (0..24).map(|_| rng.next() as u8).collect();
        for _ in 0..times {
            if let Err(e) = harness.run(&input) {
                failures.push(e);
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} runs differ; the first:\n{}",
        failures.len(),
        queries * times,
        failures[..failures.len().min(3)].join("\n\n")
    );
}

#[test]
fn answers_equal_datafusion_over_the_rows_in_memory() {
    seeded(0x0005_eed0_f5a1, 2000, 1);
}

/// Queries the fuzzer found answers to differ on, kept so they stay fixed (as SQL: the bytes
/// that chose them choose others once the generator changes). Both were DataFusion's
/// simplifier telling -0.0 from +0.0 (see `strata_sql`'s `zeros`): the first counted 48 rows
/// against DataFusion's 0, the second 25 rows against 0.
const FOUND: &[&str] = &[
    "SELECT count(*) AS n FROM t WHERE (lat = 0 AND lat IN (-0.0, -0.0))",
    "SELECT time, ice, ulat FROM t WHERE (NOT (0 != lat) AND ((ice >= 3 AND ulat <> -55.1) AND lat != -0.0)) \
     ORDER BY time, lat, lon",
];

#[test]
fn queries_the_fuzzer_found_answer_as_datafusion_does() {
    let harness = shared();
    for sql in FOUND {
        for session in 0..3 {
            if let Err(e) = harness.run_sql(session, sql) {
                panic!("{e}");
            }
        }
    }
}

/// Comparisons with a zero of either sign, on coordinates, values and areas, by every
/// method: strata's answer is DataFusion's.
#[test]
fn signed_zero_literals_answer_as_datafusion_does() {
    let harness = shared();
    for col in ["lat", "lon", "sst", "ice", "ulat"] {
        for zero in ["0", "0.0", "-0.0"] {
            // An IN list is where DataFusion folds `-0.0` into a literal before offering it.
            let mut filters: Vec<String> = ["=", "!=", "<", "<=", ">", ">="]
                .iter()
                .flat_map(|op| [format!("{col} {op} {zero}"), format!("({col} {op} 0 AND {col} IN ({zero}, {zero}))")])
                .collect();
            filters.push(format!("{col} IN ({zero}, {zero})"));
            filters.push(format!("{col} BETWEEN {zero} AND 1 OR {col} IN ({zero}, 2)"));
            for filter in filters {
                for session in 0..3 {
                    let sql = format!("SELECT count(*) AS n FROM t WHERE {filter}");
                    if let Err(e) = harness.run_sql(session, &sql) {
                        panic!("{e}");
                    }
                }
            }
        }
    }
}

/// The two zeros are equal wherever they stand (IEEE 754, as NumPy, DuckDB and PostgreSQL
/// compare): a contradiction is empty in any order of its conjuncts, and a hashed IN list
/// with -0.0 finds the +0.0 values. DataFusion alone answers 28 and 0 to the first two.
#[test]
fn signed_zeros_are_equal_in_any_order() {
    let harness = shared();
    for session in 0..3 {
        let count = |w: &str| harness.count(session, &format!("SELECT count(*) FROM t WHERE {w}")).unwrap();
        assert_eq!(count("lat = 0 AND lat != -0.0 AND ice >= 3"), 0);
        assert_eq!(count("lat = 0 AND ice >= 3 AND lat != -0.0"), 0);
        assert_eq!(count("lat = -0.0"), count("lat = 0"));
        // A zero negated in the query, once and twice.
        assert_eq!(count("lat = 0 AND ice >= 3 AND lat != -(0.0)"), 0);
        assert_eq!(count("lat = 0 AND ice >= 3 AND lat != -(-(0.0))"), 0);
        assert_eq!(count("lat = -(0.0)"), count("lat = 0"));
        assert!(count("lat = 0") > 0, "the table has zero latitudes");
        for col in ["lat", "sst"] {
            let with_zero = count(&format!("{col} IN (-0.0, 1, 2, 3, 4, 5, 6, 7)"));
            let apart = count(&format!("{col} = 0 OR {col} IN (1, 2, 3, 4, 5, 6, 7)"));
            assert_eq!(with_zero, apart, "{col}");
        }
    }
}

#[test]
fn queries_run_again_from_kept_plans_answer_as_datafusion_does() {
    // The second run of a text runs a copy of the plan its first run kept.
    seeded(0x00a9_a1e5_0f7e, 300, 2);
}
