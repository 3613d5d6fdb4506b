#![allow(clippy::unwrap_used)] // tests may panic on failure

use proptest::prelude::*;
use strata_codecs::registry::{chain, default_chain, parse_chain};
use strata_codecs::{CodecError, CodecSpec, ElementContext};

fn chains() -> Vec<Vec<CodecSpec>> {
    vec![
        default_chain(),
        parse_chain("raw").unwrap(),
        parse_chain("zstd:1").unwrap(),
        parse_chain("shuffle+raw").unwrap(),
        parse_chain("shuffle+zstd:19").unwrap(),
    ]
}

proptest! {
    #[test]
    fn every_chain_round_trips(data in proptest::collection::vec(any::<u8>(), 0..3000), es in prop::sample::select(vec![1usize, 2, 4, 8, 3])) {
        for specs in chains() {
            let c = chain(&specs, ElementContext { element_size: es }).unwrap();
            let enc = c.encode(&data).unwrap();
            prop_assert_eq!(c.decode(&enc, data.len()).unwrap(), data.clone());
        }
    }

    #[test]
    fn garbage_never_panics(data in proptest::collection::vec(any::<u8>(), 0..500), len in 0usize..5000) {
        for specs in chains() {
            let c = chain(&specs, ElementContext { element_size: 4 }).unwrap();
            match c.decode(&data, len) {
                Ok(out) => prop_assert_eq!(out.len(), len),
                Err(e) => { let corrupt = matches!(e, CodecError::Corrupt { .. }); prop_assert!(corrupt, "unexpected error {}", e) }
            }
        }
    }
}

#[test]
fn float_edge_cases_round_trip_bit_exactly() {
    let values: Vec<f32> = vec![
        f32::NAN,
        -0.0,
        0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::MIN_POSITIVE / 2.0,
        1.5,
        f32::from_bits(0x7fc0_1234),
    ];
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    let c = chain(&default_chain(), ElementContext { element_size: 4 }).unwrap();
    let back = c.decode(&c.encode(&bytes).unwrap(), bytes.len()).unwrap();
    assert_eq!(back, bytes);
}

#[test]
fn truncated_and_wrong_length_streams_fail() {
    let data: Vec<u8> = (0..10_000u32).flat_map(|v| (v as f32).to_le_bytes()).collect();
    let c = chain(&default_chain(), ElementContext { element_size: 4 }).unwrap();
    let enc = c.encode(&data).unwrap();
    for cut in [0, 1, enc.len() / 2, enc.len() - 1] {
        assert!(c.decode(&enc[..cut], data.len()).is_err(), "cut at {cut}");
    }
    assert!(c.decode(&enc, data.len() - 1).is_err());
    assert!(c.decode(&enc, data.len() + 1).is_err());
}

#[test]
fn bad_specs_are_rejected_with_a_message() {
    let err = chain(&[CodecSpec::new("lzma")], ElementContext { element_size: 4 }).unwrap_err();
    assert!(err.to_string().contains("unknown backend codec 'lzma'"), "{err}");
    let err = chain(&[CodecSpec::new("zstd").with("level", 99)], ElementContext { element_size: 4 }).unwrap_err();
    assert!(err.to_string().contains("level"), "{err}");
    assert!(chain(&[], ElementContext { element_size: 4 }).is_err());
    assert!(parse_chain("shuffle+zstd:x").is_err());
    let err = chain(&[CodecSpec::new("zstd").with("lvl", 3)], ElementContext { element_size: 4 }).unwrap_err();
    assert!(err.to_string().contains("no option 'lvl'"), "{err}");
}
