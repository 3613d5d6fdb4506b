//! The server answers every request a client can send — a short, deterministic stand-in
//! for the `server_request` fuzz target (`make fuzz` runs the real one, coverage-guided):
//! each seed as written, then thousands of mutations of the seeds (bytes flipped, cut,
//! duplicated, spliced with another seed, numbers made extreme). Any 500, failed or endless
//! body, or wrong Content-Length fails the test with the request that caused it.

use strata_fuzz_targets::mutate::{mutate, Rng};
use strata_server::fuzzing::{seeds, shared};

#[test]
fn every_seed_is_answered_as_promised() {
    let h = shared();
    // `make fuzz-server` starts libFuzzer's corpus from these seeds (an absolute path: tests
    // run in the crate's directory).
    if let Some(dir) = std::env::var_os("STRATA_SEEDS_OUT") {
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{dir:?}: {e}"));
        for (i, seed) in seeds().iter().enumerate() {
            let path = std::path::Path::new(&dir).join(format!("seed-{i:02}"));
            std::fs::write(&path, seed).unwrap_or_else(|e| panic!("{path:?}: {e}"));
        }
    }
    for seed in seeds() {
        let answer = h.run(seed.as_bytes()).unwrap_or_else(|| panic!("not a request: {seed}"));
        let answer = answer.unwrap_or_else(|e| panic!("{e}"));
        // The seeds are valid requests: each succeeds (a mutation may not).
        assert!(answer.status.is_success(), "{seed}: {} {}", answer.status, String::from_utf8_lossy(&answer.body));
    }
    // Found by `make fuzz-server`: more parts than the file has bytes made an empty part,
    // whose Content-Range ("bytes lo-(hi-1)") underflowed. Now a 416.
    let empty = h.run(b"GET /api/subset/ocean/sst?vars=sst&parts=000000000010187974340714983878&part=1");
    assert_eq!(empty.and_then(Result::ok).map(|a| a.status.as_u16()), Some(416));
    // Found by `make fuzz-server`: a query failing as it executes (division by zero) sent a
    // 200 whose body broke off. Its first batch is computed before the status: now a 400.
    let failing = h.run(b"GET /api/sql/ocean/sst?q=SELECT%20count(*)%250%20FROM%20sst");
    let failing = failing.map(|a| a.map(|a| (a.status.as_u16(), String::from_utf8_lossy(&a.body).into_owned())));
    assert!(matches!(&failing, Some(Ok((400, body))) if body.contains("zero")), "{failing:?}");
    // Found by `make fuzz-server`: a constraint joining a 1-D coordinate with a 3-D variable
    // was planned, answered 200, and failed as it ran. The plan checks it: now a 400.
    let mixed =
        h.run(b"GET /api/query/ocean/sst?where=lat%20%3C%208%20and%20sst%20%3E%200&output=positions&format=json");
    let mixed = mixed.map(|a| a.map(|a| (a.status.as_u16(), String::from_utf8_lossy(&a.body).into_owned())));
    assert!(matches!(&mixed, Some(Ok((400, body))) if body.contains("same dimensions")), "{mixed:?}");
    // Without its token, the protected dataset is refused, not served.
    let denied = h.run(b"GET /dap/private/sst.dds").and_then(Result::ok).map(|a| a.status.as_u16());
    assert_eq!(denied, Some(401));
}

#[test]
fn mutated_requests_never_break_the_server() {
    let h = shared();
    let seeds: Vec<Vec<u8>> = seeds().into_iter().map(String::into_bytes).collect();
    let mut rng = Rng(0x5eed_1234_abcd_ef01);
    let (mut sent, mut failures) = (0, Vec::new());
    let mut statuses = std::collections::BTreeMap::new();
    for _ in 0..3000 {
        let seed = &seeds[rng.below(seeds.len())];
        let other = &seeds[rng.below(seeds.len())];
        let input = mutate(&mut rng, seed, other);
        if let Some(result) = h.run(&input) {
            sent += 1;
            match result {
                Ok(a) => *statuses.entry(a.status.as_u16()).or_insert(0) += 1,
                Err(e) => failures.push(format!("{:?}: {e}", String::from_utf8_lossy(&input))),
            }
        }
    }
    eprintln!("{sent} requests, by status: {statuses:?}");
    assert!(sent > 1500, "only {sent} of the mutations were requests");
    // Mutations reach the handlers, not only the router's 404: many still succeed.
    assert!(statuses.get(&200).copied().unwrap_or(0) > sent / 10, "{statuses:?}");
    assert!(failures.is_empty(), "{} failures, first: {}", failures.len(), failures[0]);
}
