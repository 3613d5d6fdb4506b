//! DAP2 constraint expressions as a client sends them (the query string of a /dap request):
//! any bytes give a constraint or an error, never a panic; a constraint written back as
//! text parses to the same constraint.

/// One input: what libFuzzer or the seed tests hand the target.
pub fn run(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(ce) = strata_dap::parse(text) {
        let again = strata_dap::parse(&ce.to_string());
        assert_eq!(again.as_ref(), Ok(&ce), "{text:?} -> {ce}");
    }
}
