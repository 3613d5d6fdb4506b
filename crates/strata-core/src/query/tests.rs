use super::evaluate::*;
use super::order::*;
use super::*;
use crate::dtype::DType;

#[test]
fn coordinates_unravel_flat_indices() {
    for shape in [vec![5u64, 7, 9], vec![4, 1, 6], vec![3, 1 << 20, 1 << 13], vec![70_000]] {
        let total: u64 = shape.iter().product();
        let flat: Vec<u64> = (0..200_000u64).map(|i| (i * 2_654_435_761) % total).collect();
        let sel = Selection { shape: shape.clone(), flat: flat.clone() };
        let coords = sel.coordinates();
        for (i, &f) in flat.iter().enumerate() {
            let mut rest = f;
            for d in (0..shape.len()).rev() {
                assert_eq!(coords[d][i] as u64, rest % shape[d], "{shape:?} {f}");
                rest /= shape[d];
            }
        }
    }
}

#[test]
fn bands_join_in_flat_order() {
    // A 2-D grid of rows of 10: two boxes per band (side by side along the last axis),
    // given out of order.
    let parts: Vec<(Vec<u64>, Vec<u64>)> = vec![
        (vec![4, 0], vec![40, 42, 50]),
        (vec![0, 5], vec![6, 8, 16]),
        (vec![4, 5], vec![45, 47, 55]),
        (vec![0, 0], vec![1, 3, 11]),
    ];
    let got = sorted_by_bands(parts.iter().map(|(s, f)| (s.as_slice(), f.clone())), &[8, 10]);
    assert_eq!(got, vec![1, 3, 6, 8, 11, 16, 40, 42, 45, 47, 50, 55]);
}

#[test]
fn bands_sort_any_tiling_and_unordered_boxes() {
    // A 12x7x9 grid tiled by 4x3x4 boxes (edge boxes shorter), a pseudo-random subset
    // of each box, some boxes' indices reversed (several bins), boxes in any order.
    let shape = [12u64, 7, 9];
    let sub = [4u64, 3, 4];
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut rand = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut parts: Vec<(Vec<u64>, Vec<u64>)> = Vec::new();
    for t in (0..shape[0]).step_by(sub[0] as usize) {
        for y in (0..shape[1]).step_by(sub[1] as usize) {
            for x in (0..shape[2]).step_by(sub[2] as usize) {
                let mut flat = Vec::new();
                for a in t..(t + sub[0]).min(shape[0]) {
                    for b in y..(y + sub[1]).min(shape[1]) {
                        for c in x..(x + sub[2]).min(shape[2]) {
                            if rand() % 3 == 0 {
                                flat.push((a * shape[1] + b) * shape[2] + c);
                            }
                        }
                    }
                }
                if rand() % 2 == 0 {
                    flat.reverse();
                }
                parts.push((vec![t, y, x], flat));
            }
        }
    }
    for i in (1..parts.len()).rev() {
        parts.swap(i, (rand() % (i as u64 + 1)) as usize);
    }
    let mut want: Vec<u64> = parts.iter().flat_map(|p| p.1.iter().copied()).collect();
    want.sort_unstable();
    let got = sorted_by_bands(parts.iter().map(|(s, f)| (s.as_slice(), f.clone())), &shape);
    assert_eq!(got, want);
}

#[test]
fn flat_indices_of_a_box() {
    let shape = [5u64, 7, 9];
    let b =
        QueryBox { slab: 0, id: (0, 0, 0), start: vec![1, 2, 3], len: vec![3, 4, 5], region: None, region_bits: None };
    let local: Vec<u32> = (0..60).collect();
    let got = flat_of(&b, &shape, local.iter().copied());
    let mut want = vec![];
    for t in 1..4u64 {
        for y in 2..6u64 {
            for x in 3..8u64 {
                want.push((t * 7 + y) * 9 + x);
            }
        }
    }
    assert_eq!(got, want);
}

#[test]
fn matches_agrees_with_test_and_drops_nan_and_missing() {
    let values = [-999.0, f64::NAN, -1.0, 0.0, 2.5, 3.0, f64::INFINITY];
    let missing = [-999.0];
    for op in [CmpOp::Lt, CmpOp::Le, CmpOp::Gt, CmpOp::Ge, CmpOp::Eq, CmpOp::Ne] {
        for v in [-1000.0, -999.0, 0.0, 3.0] {
            let want: Vec<bool> =
                values.iter().map(|&x| !x.is_nan() && !missing.contains(&x) && op.test(x, v)).collect();
            assert_eq!(op.matches(&values, v, &missing), want, "{op:?} {v}");
            let f64s: Vec<u8> = values.iter().flat_map(|x| x.to_le_bytes()).collect();
            assert_eq!(op.matches_raw(DType::F64, &f64s, v, &missing), want, "{op:?} {v} f64");
            let f32s: Vec<u8> = values.iter().flat_map(|&x| (x as f32).to_le_bytes()).collect();
            assert_eq!(op.matches_raw(DType::F32, &f32s, v, &missing), want, "{op:?} {v} f32");
            let i32s: Vec<u8> = [-999i32, 0, -1, 0, 2, 3, i32::MAX].iter().flat_map(|x| x.to_le_bytes()).collect();
            let ints = [-999.0, 0.0, -1.0, 0.0, 2.0, 3.0, i32::MAX as f64];
            assert_eq!(
                op.matches_raw(DType::I32, &i32s, v, &missing),
                op.matches(&ints, v, &missing),
                "{op:?} {v} i32"
            );
        }
    }
    // Runs and single positions, and fewer flags than positions.
    let runs: RoaringBitmap = (10u32..20).chain(30..33).chain([50]).collect();
    let keep: Vec<bool> = (0..14).map(|i| i % 3 == 0).collect();
    let want: Vec<u32> = runs.iter().zip(&keep).filter(|(_, &k)| k).map(|(p, _)| p).collect();
    assert_eq!(kept_positions(Some(&runs), &keep), want);
    assert_eq!(kept_positions(Some(&runs), &keep[..11]), want[..want.len() - 1].to_vec());
    assert_eq!(kept_positions(None, &[false, true, true]), vec![1, 2]);
    let p: RoaringBitmap = [3u32, 9, 70_000].into_iter().collect();
    assert_eq!(kept_positions(Some(&p), &[true, false, true]), vec![3, 70_000]);
    assert_eq!(kept_positions(Some(&p), &[true]), vec![3], "missing flags count as not kept");
}

#[test]
fn coverage_follows_the_summary() {
    use Coverage::*;
    assert_eq!(CmpOp::Gt.coverage(5, 26.0, 30.0, true, 25.0), Full);
    assert_eq!(CmpOp::Gt.coverage(5, 26.0, 30.0, false, 25.0), Boundary);
    assert_eq!(CmpOp::Gt.coverage(5, 20.0, 25.0, true, 25.0), Empty);
    assert_eq!(CmpOp::Ge.coverage(5, 20.0, 25.0, true, 25.0), Boundary);
    assert_eq!(CmpOp::Eq.coverage(5, 1.0, 1.0, true, 1.0), Full);
    assert_eq!(CmpOp::Ne.coverage(5, 1.0, 1.0, true, 1.0), Empty);
    assert_eq!(CmpOp::Ne.coverage(5, 1.0, 3.0, true, 5.0), Full);
    assert_eq!(CmpOp::Lt.coverage(0, f64::NAN, f64::NAN, false, 5.0), Empty);
}

#[test]
fn region_bitmaps_list_the_selected_elements() {
    let b = |first, count, len, step| AxisBlock { chunk: 0, sub: 0, len, first, count, out: 0, step };
    assert_eq!(local_region(&[b(0, 4, 4, 1), b(0, 5, 5, 1)]), None);
    let r = crate::bitset::bitmap_of(&local_region(&[b(1, 2, 4, 1), b(1, 2, 5, 2)]).unwrap_or_default());
    assert_eq!(r.iter().collect::<Vec<_>>(), vec![6, 8, 11, 13]);
    // Three axes with strides on the outer ones, rows crossing 64-bit words, and one axis.
    let blocks = [b(1, 3, 7, 2), b(2, 5, 9, 1), b(3, 60, 70, 1)];
    let mut want = Vec::new();
    for t in 0..3u32 {
        for y in 0..5u32 {
            for x in 0..60u32 {
                want.push(((1 + 2 * t) * 9 + 2 + y) * 70 + 3 + x);
            }
        }
    }
    assert_eq!(crate::bitset::bitmap_of(&local_region(&blocks).unwrap_or_default()).iter().collect::<Vec<_>>(), want);
    let r = crate::bitset::bitmap_of(&local_region(&[b(5, 40, 200, 3)]).unwrap_or_default());
    assert_eq!(r.iter().collect::<Vec<_>>(), (0..40u32).map(|i| 5 + 3 * i).collect::<Vec<_>>());
}
