//! Every decoder's fuzz target on its seeds and on thousands of their mutations, on the
//! stable release build: a short, deterministic stand-in for `make fuzz` (libFuzzer,
//! coverage-guided, under AddressSanitizer), which runs the same bodies. An input that
//! panics fails the test and is printed in hex, to be replayed with
//! `cargo fuzz run TARGET FILE`.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use strata_fuzz_targets::mutate::{mutate, Rng};
use strata_fuzz_targets::seeds::seeds;
use strata_fuzz_targets::{Target, TARGETS};

/// Mutations per target; the store target reads a whole store per input, so fewer.
const MUTATIONS: usize = 20_000;
const STORE_MUTATIONS: usize = 3000;

fn golden() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/golden/v1")
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Runs one input, turning a panic into a failure that names the target and the input,
/// which is kept in a file for `cargo fuzz run TARGET FILE`.
fn check(name: &str, run: Target, input: &[u8], what: &str) {
    if catch_unwind(AssertUnwindSafe(|| run(input))).is_err() {
        let kept = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("crash-{name}"));
        let saved = std::fs::write(&kept, input).map(|()| format!("kept in {}", kept.display()));
        let head = hex(&input[..input.len().min(64)]);
        panic!(
            "{name}: {what} panicked; input of {} bytes ({}), starting {head}",
            input.len(),
            saved.unwrap_or_else(|e| e.to_string())
        );
    }
}

#[test]
fn every_target_has_seeds_and_none_panics_on_them() {
    for &(name, run) in TARGETS {
        let seeds = seeds(name, &golden());
        assert!(seeds.len() >= 3, "{name}: {} seeds", seeds.len());
        for (i, seed) in seeds.iter().enumerate() {
            check(name, run, seed, &format!("seed {i}"));
        }
    }
}

#[test]
fn no_target_panics_on_mutated_seeds_or_random_bytes() {
    for &(name, run) in TARGETS {
        let seeds = seeds(name, &golden());
        let mut rng = Rng(0x5eed_f00d_0000_0001 ^ (name.len() as u64 * 0x9e37_79b9_7f4a_7c15));
        let count = if name == "store" { STORE_MUTATIONS } else { MUTATIONS };
        for i in 0..count {
            let input = if i % 10 == 9 {
                // Now and then bytes owing nothing to a seed, of any length up to 300.
                (0..rng.below(300)).map(|_| rng.next_u64() as u8).collect()
            } else {
                let seed = &seeds[rng.below(seeds.len())];
                let other = &seeds[rng.below(seeds.len())];
                let mut input = mutate(&mut rng, seed, other);
                // Mutations stack now and then, as a fuzzer's do.
                if rng.below(4) == 0 {
                    input = mutate(&mut rng, &input, other);
                }
                input
            };
            check(name, run, &input, &format!("mutation {i}"));
        }
    }
}

/// `STRATA_SEEDS_OUT=fuzz/corpus cargo test ... write_seeds` writes every target's seeds
/// into its libFuzzer corpus (`make fuzz` does, before it runs): fuzzing starts from valid
/// inputs, not from nothing.
#[test]
fn write_seeds() {
    let Some(out) = std::env::var_os("STRATA_SEEDS_OUT") else { return };
    for &(name, _) in TARGETS {
        let dir = Path::new(&out).join(name);
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{dir:?}: {e}"));
        for (i, seed) in seeds(name, &golden()).iter().enumerate() {
            let path = dir.join(format!("seed-{i:03}"));
            std::fs::write(&path, seed).unwrap_or_else(|e| panic!("{path:?}: {e}"));
        }
    }
}

/// The targets here and fuzz/fuzz_targets (whose files the Makefile's FUZZ_TARGETS lists)
/// name the same set: a target added in one place runs in both.
#[test]
fn cargo_fuzz_and_these_tests_run_every_target() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut ours: Vec<&str> = TARGETS.iter().map(|(n, _)| *n).collect();
    ours.sort_unstable();
    let mut bins: Vec<String> = std::fs::read_dir(root.join("fuzz/fuzz_targets"))
        .expect("fuzz/fuzz_targets")
        .flatten()
        .filter_map(|e| e.path().file_stem().map(|s| s.to_string_lossy().into_owned()))
        .collect();
    bins.sort_unstable();
    assert_eq!(bins, ours, "fuzz/fuzz_targets");
}
