//! Nothing to build: the script exists so that its dependencies pin host features.
fn main() {}
