#![allow(clippy::unwrap_used)] // tests may panic on failure

use proptest::prelude::*;
use strata_codecs::registry::{chain, default_chain, parse_chain};
use strata_codecs::{CodecError, CodecSpec, ElementContext, ErrorBound, NumType};

const LOSSLESS: &[&str] = &[
    "shuffle+zstd:3",
    "raw",
    "zstd:1",
    "shuffle+raw",
    "shuffle+zstd:19",
    "lz4",
    "shuffle+lz4",
    "delta+shuffle+zstd:1",
    "delta:0+lz4",
    "xor:0+shuffle+zstd:3",
    "xor:-2+shuffle+lz4",
    "pco",
    "pco:0",
    "delta:1+pco:4",
    "delta+pco:6",
    "xor:-1+delta:0+pco",
    "bytecols:3",
    "xor:0+bytecols:1",
    "fpc",
    "fpc:0",
    "fpc:1",
];

const TYPES: &[NumType] = &[
    NumType::I8,
    NumType::U8,
    NumType::I16,
    NumType::U16,
    NumType::I32,
    NumType::U32,
    NumType::I64,
    NumType::U64,
    NumType::F32,
    NumType::F64,
];

fn shapes(n: usize) -> Vec<Vec<usize>> {
    let mut out = vec![vec![n]];
    for a in [2, 3, 5] {
        if n.is_multiple_of(a) && n > 0 {
            out.push(vec![a, n / a]);
            if (n / a).is_multiple_of(2) {
                out.push(vec![a, 2, n / a / 2]);
            }
        }
    }
    out
}

proptest! {
    #[test]
    fn every_lossless_chain_round_trips_every_type_and_shape(
        words in proptest::collection::vec(any::<u64>(), 0..300),
        t in prop::sample::select(TYPES.to_vec()),
    ) {
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        let n = bytes.len() / t.size();
        for text in LOSSLESS {
            let c = chain(&parse_chain(text).unwrap(), ElementContext::new(t)).unwrap();
            for shape in shapes(n) {
                let enc = c.encode(&bytes, &shape).unwrap();
                prop_assert_eq!(&c.decode(&enc, bytes.len(), &shape).unwrap(), &bytes, "{} {:?} {:?}", text, t, shape);
            }
        }
    }

    #[test]
    fn garbage_never_panics(data in proptest::collection::vec(any::<u8>(), 0..500), len in 0usize..5000) {
        for text in LOSSLESS {
            let c = chain(&parse_chain(text).unwrap(), ElementContext::new(NumType::F32)).unwrap();
            let len = len / 4 * 4;
            match c.decode(&data, len, &[len / 4]) {
                Ok(out) => prop_assert_eq!(out.len(), len),
                Err(e) => { let corrupt = matches!(e, CodecError::Corrupt { .. }); prop_assert!(corrupt, "unexpected error {}", e) }
            }
        }
    }

    #[test]
    fn bitround_holds_its_bound(values in proptest::collection::vec(any::<f64>(), 1..200), keep in 0u32..52) {
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let spec = parse_chain(&format!("bitround:{keep}+zstd:1")).unwrap();
        let c = chain(&spec, ElementContext::new(NumType::F64)).unwrap();
        let Some(ErrorBound::PointwiseRelative(bound)) = c.capabilities().error_bound else { panic!("no bound") };
        prop_assert!(!c.capabilities().lossless);
        let out = c.decode(&c.encode(&bytes, &[values.len()]).unwrap(), bytes.len(), &[values.len()]).unwrap();
        for (v, o) in values.iter().zip(out.chunks_exact(8)) {
            let o = f64::from_le_bytes(o.try_into().unwrap());
            if v.is_finite() {
                // Relative for normal numbers; below the smallest normal, absolute.
                let scale = v.abs().max(f64::MIN_POSITIVE);
                prop_assert!((o - v).abs() <= bound * scale, "{} -> {} (keep {})", v, o, keep);
            } else {
                prop_assert_eq!(o.to_bits(), v.to_bits());
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
        f32::MAX,
    ];
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    for text in LOSSLESS {
        let c = chain(&parse_chain(text).unwrap(), ElementContext::new(NumType::F32)).unwrap();
        for shape in [vec![9], vec![3, 3]] {
            let back = c.decode(&c.encode(&bytes, &shape).unwrap(), bytes.len(), &shape).unwrap();
            assert_eq!(back, bytes, "{text} {shape:?}");
        }
    }
    // Bit rounding keeps NaN, infinities and the largest finite value exactly.
    let c = chain(&parse_chain("bitround:3+raw").unwrap(), ElementContext::new(NumType::F32)).unwrap();
    let back = c.decode(&c.encode(&bytes, &[9]).unwrap(), bytes.len(), &[9]).unwrap();
    for i in [0, 3, 4, 7, 8] {
        assert_eq!(back[i * 4..i * 4 + 4], bytes[i * 4..i * 4 + 4], "element {i}");
    }
}

#[test]
fn constant_empty_and_single_element_inputs() {
    for t in TYPES {
        for text in LOSSLESS {
            let c = chain(&parse_chain(text).unwrap(), ElementContext::new(*t)).unwrap();
            for n in [0usize, 1, 7, 1000] {
                let bytes = vec![0x5au8; n * t.size()];
                let enc = c.encode(&bytes, &[n]).unwrap();
                assert_eq!(c.decode(&enc, bytes.len(), &[n]).unwrap(), bytes, "{text} {t:?} n={n}");
            }
        }
    }
}

#[test]
fn xor_along_an_axis_makes_slowly_varying_fields_compress_better() {
    // A field that changes slowly along axis 0 (time): consecutive rows share sign,
    // exponent and high mantissa bits, which XOR along axis 0 turns into zeros.
    let bytes: Vec<u8> = (0..20)
        .flat_map(|t| (0..500).map(move |i| (i as f32 * 0.37).sin() * 100.0 + t as f32 * 1e-3))
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let size = |text: &str| {
        let c = chain(&parse_chain(text).unwrap(), ElementContext::new(NumType::F32)).unwrap();
        c.encode(&bytes, &[20, 500]).unwrap().len()
    };
    let (with_xor, without) = (size("xor:0+shuffle+zstd:3"), size("shuffle+zstd:3"));
    assert!(with_xor * 10 < without * 8, "{with_xor} vs {without}");
}

#[test]
fn bytecols_stores_random_columns_raw_and_smooth_ones_compressed() {
    // High bytes constant, low bytes pseudo-random: columns 2-3 compress, 0-1 do not.
    let mut x = 12345u32;
    let bytes: Vec<u8> = (0..20_000)
        .flat_map(|_| {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            (0x4120_0000u32 | (x >> 16)).to_le_bytes()
        })
        .collect();
    let c = chain(&parse_chain("bytecols:3").unwrap(), ElementContext::new(NumType::F32)).unwrap();
    let enc = c.encode(&bytes, &[20_000]).unwrap();
    let modes: Vec<u8> = (0..4).map(|col| enc[1 + 5 * col]).collect();
    assert_eq!(modes, vec![0, 0, 1, 1], "low columns raw, high columns compressed");
    assert!(enc.len() < bytes.len() / 2 + 1000);
    assert_eq!(c.decode(&enc, bytes.len(), &[20_000]).unwrap(), bytes);
}

#[test]
fn truncated_and_wrong_length_streams_fail() {
    let data: Vec<u8> = (0..10_000u32).flat_map(|v| (v as f32).to_le_bytes()).collect();
    for text in LOSSLESS.iter().filter(|t| !t.contains("raw")) {
        let c = chain(&parse_chain(text).unwrap(), ElementContext::new(NumType::F32)).unwrap();
        let enc = c.encode(&data, &[10_000]).unwrap();
        for cut in [0, 1, enc.len() / 2, enc.len() - 1] {
            assert!(c.decode(&enc[..cut], data.len(), &[10_000]).is_err(), "{text} cut at {cut}");
        }
        assert!(c.decode(&enc, data.len() - 4, &[9_999]).is_err(), "{text} shorter");
        assert!(c.decode(&enc, data.len() + 4, &[10_001]).is_err(), "{text} longer");
    }
}

#[test]
fn bad_specs_are_rejected_with_a_message() {
    let f32_ctx = ElementContext::new(NumType::F32);
    let err = chain(&[CodecSpec::new("lzma")], f32_ctx).unwrap_err();
    assert!(err.to_string().contains("unknown backend codec 'lzma'"), "{err}");
    let err = chain(&[CodecSpec::new("zstd").with("level", 99)], f32_ctx).unwrap_err();
    assert!(err.to_string().contains("level"), "{err}");
    assert!(chain(&[], f32_ctx).is_err());
    assert!(parse_chain("shuffle+zstd:x").is_err());
    assert!(parse_chain("shuffle:3+zstd").unwrap_err().to_string().contains("takes no ':' option"));
    let err = chain(&[CodecSpec::new("zstd").with("lvl", 3)], f32_ctx).unwrap_err();
    assert!(err.to_string().contains("no option 'lvl'"), "{err}");
    let err = chain(&parse_chain("bitround+zstd").unwrap(), f32_ctx).unwrap_err();
    assert!(err.to_string().contains("explicit keepbits"), "{err}");
    // On integers bit rounding is the identity, and lossless.
    let ints = chain(&parse_chain("bitround:4+raw").unwrap(), ElementContext::new(NumType::I32)).unwrap();
    let data: Vec<u8> = (0..40).collect();
    assert_eq!(ints.encode(&data, &[10]).unwrap(), data);
    assert!(ints.capabilities().lossless);
    let err = chain(&parse_chain("bitround:30+zstd").unwrap(), f32_ctx).unwrap_err();
    assert!(err.to_string().contains("0..=23"), "{err}");
    // An axis the segment does not have leaves it unchanged.
    let c = chain(&parse_chain("xor:3+raw").unwrap(), f32_ctx).unwrap();
    let data: Vec<u8> = (0..16).collect();
    assert_eq!(c.encode(&data, &[4]).unwrap(), data);
    assert_eq!(chain(&default_chain(), f32_ctx).unwrap().specs(), default_chain());
}

/// pcodec's own delta search is off exactly when the chain already takes differences
/// along the last axis, and the streams round-trip either way.
#[test]
fn pco_skips_its_delta_search_after_a_last_axis_delta() {
    let ctx = ElementContext::new(NumType::F32);
    for (text, search) in [
        ("pco:6", true),
        ("delta:0+pco:6", true),
        ("delta+pco:6", false),
        ("delta:-1+delta:-2+pco:6", false),
        ("xor:-1+pco", false),
        ("delta:-2+pco:6", true),
    ] {
        let c = chain(&parse_chain(text).unwrap(), ctx).unwrap();
        assert!(format!("{c:?}").contains(&format!("delta_search: {search}")), "{text}: {c:?}");
        let values: Vec<f32> = (0..600).map(|i| ((i % 40) as f32 * 0.3).sin() * 10.0 + (i / 40) as f32).collect();
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let shape = [15, 40];
        assert_eq!(c.decode(&c.encode(&bytes, &shape).unwrap(), bytes.len(), &shape).unwrap(), bytes, "{text}");
    }
}
