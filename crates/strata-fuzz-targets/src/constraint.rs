//! The constraint parser must return an error, never panic or overflow the stack, on any
//! text; a constraint it accepts prints to text that parses back to the same constraint.

/// One input: what libFuzzer or the seed tests hand the target.
pub fn run(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(p) = strata_core::constraint::parse(text) {
        let again = strata_core::constraint::parse(&p.to_string()).expect("printed constraint parses");
        assert_eq!(again.to_string(), p.to_string());
    }
}
