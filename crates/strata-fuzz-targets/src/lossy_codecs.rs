//! The error-bounded codecs: decoding arbitrary bytes fails cleanly or yields exactly the
//! asked length (zfp's C decoder included); encoding arbitrary floats then decoding them
//! holds the bound on every finite element and keeps the others bit for bit.

use strata_codecs::registry::{chain, parse_chain};
use strata_codecs::{ElementContext, NumType};

const CHAINS: &[&str] = &["sz:abs=0.01", "sz:rel=0.001", "zfp:abs=0.01", "zfp:rel=0.001", "zfp:abs=1e-30"];

fn value(t: NumType, c: &[u8]) -> f64 {
    if t == NumType::F32 {
        f32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64
    } else {
        f64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]])
    }
}

/// One input: what libFuzzer or the seed tests hand the target.
pub fn run(data: &[u8]) {
    if data.len() < 4 {
        return;
    }
    let text = CHAINS[data[0] as usize % CHAINS.len()];
    let t = if data[1].is_multiple_of(2) { NumType::F32 } else { NumType::F64 };
    let c = chain(&parse_chain(text).expect("known chain"), ElementContext::new(t)).expect("chain builds");
    let es = t.size();
    let claimed = (data[2] as usize * 3) % 700;
    let rest = &data[4..];
    // Arbitrary stream: mode byte forced to a real mode half of the time.
    let mut stream = rest.to_vec();
    if data[3].is_multiple_of(2) && !stream.is_empty() {
        stream[0] = if text.starts_with("sz") { 1 } else { 2 };
    }
    let shape = if claimed.is_multiple_of(6) && claimed > 0 { vec![2, 3, claimed / 6] } else { vec![claimed] };
    if let Ok(out) = c.decode(&stream, claimed * es, &shape) {
        assert_eq!(out.len(), claimed * es);
    }
    let body = &rest[..rest.len() / es * es];
    let n = body.len() / es;
    let encoded = c.encode(body, &[n]).expect("encode never fails on whole elements");
    let decoded = c.decode(&encoded, body.len(), &[n]).expect("round trip");
    let bound = c.capabilities().error_bound.expect("lossy");
    let values: Vec<f64> = body.chunks_exact(es).map(|x| value(t, x)).collect();
    let finite = values.iter().copied().filter(|v| v.is_finite());
    let range = finite.clone().fold(f64::NEG_INFINITY, f64::max) - finite.fold(f64::INFINITY, f64::min);
    for (i, x) in values.iter().enumerate() {
        let y = &decoded[i * es..(i + 1) * es];
        if x.is_finite() {
            assert!((value(t, y) - x).abs() <= bound.absolute_for(*x, range, 0.0), "{text}: {x} -> {}", value(t, y));
        } else {
            assert_eq!(y, &body[i * es..(i + 1) * es]);
        }
    }
}
