//! Bytes choose a SQL query over a small store (see `strata_sql::fuzzing`): strata's answer,
//! through its pushdown and either method, must equal DataFusion's over the same rows in
//! memory — never a panic, never a refusal of what DataFusion answers.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(wrong) = strata_sql::fuzzing::shared().run(data) {
        panic!("{wrong}");
    }
});
