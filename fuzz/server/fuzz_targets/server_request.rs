//! Any bytes as an HTTP request to the whole server (routing, tokens, every handler and
//! encoder; see `strata_server::fuzzing`): answered with any status but 500, a body that
//! ends, and the length announced — never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some(Err(broken)) = strata_server::fuzzing::shared().run(data) {
        panic!("{broken}");
    }
});
