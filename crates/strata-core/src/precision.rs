//! Level M: floats split into byte groups, most significant first, each group its own
//! segment, so a read at precision level k fetches and decodes only the first k groups.
//!
//! A group segment holds the byte planes of its bytes (plane = that byte of every element,
//! in the sub-chunk's C order), most significant plane first: it is a `u8` segment of shape
//! `[width, ...sub-chunk shape]`. A reader that keeps the top `B` bytes of an element fills
//! the rest by the rule of `fill_all`, which halves the worst error of filling zeros.

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::manifest::{Layout, Level, Variable};

/// Default groups: the top two bytes (sign, exponent, the first mantissa bits), then one
/// byte per group.
pub fn default_groups(dtype: DType) -> Option<Vec<usize>> {
    match dtype {
        DType::F32 => Some(vec![2, 1, 1]),
        DType::F64 => Some(vec![2, 1, 1, 1, 1, 1, 1]),
        _ => None,
    }
}

/// The chain byte-group segments get unless one is asked for: byte planes are not values,
/// so value-level plans do not apply to them.
pub const BYTE_GROUP_CHAIN: &str = "zstd:3";

/// Whether `layout` splits values of `dtype` into byte groups (level M, float types).
pub fn splits(layout: &Layout, dtype: DType) -> bool {
    layout.order.contains(&Level::M) && default_groups(dtype).is_some()
}

/// The byte groups of `var` under `layout`, or None when the variable is not split (no M
/// level, not a float, or not stored in segments).
pub fn byte_groups(layout: &Layout, var: &Variable) -> Result<Option<Vec<usize>>> {
    if !splits(layout, var.dtype) || var.chunking.is_none() {
        return Ok(None);
    }
    let Some(default) = default_groups(var.dtype) else { return Ok(None) };
    let key = var.dtype.name();
    let groups = match layout.byte_groups.as_ref().and_then(|g| g.get(key)) {
        None => default,
        Some(v) => serde_json::from_value::<Vec<usize>>(v.clone())
            .map_err(|e| Error::Corruption(format!("layout byte_groups for {key}: {e}")))?,
    };
    check_groups(var.dtype, &groups)?;
    Ok(Some(groups))
}

/// The element type a variable's codec chains see: `u8` for split variables (each group
/// segment is bytes), else the variable's own type.
pub fn chain_type(layout: &Layout, var: &Variable) -> Result<Option<strata_codecs::NumType>> {
    Ok(if byte_groups(layout, var)?.is_some() { Some(strata_codecs::NumType::U8) } else { var.dtype.num_type() })
}

/// Groups must be positive widths that add up to the element size.
/// The byte widths of the groups read at precision `level` (all when None): one group of
/// `element_size` bytes for a variable without level M.
pub fn widths_read(groups: Option<&[usize]>, level: Option<usize>, element_size: usize) -> Vec<usize> {
    match groups {
        Some(g) => g[..level.unwrap_or(g.len()).min(g.len())].to_vec(),
        None => vec![element_size],
    }
}

pub fn check_groups(dtype: DType, groups: &[usize]) -> Result<()> {
    let es = dtype.size();
    if groups.is_empty() || groups.contains(&0) || groups.iter().sum::<usize>() != es || groups.len() > 8 {
        return Err(Error::InvalidArgument(format!(
            "byte groups {groups:?} for {} must be positive widths adding up to {es}",
            dtype.name()
        )));
    }
    Ok(())
}

/// The elements' bytes split into group segments (planes, most significant first).
pub fn split(raw: &[u8], es: usize, groups: &[usize]) -> Vec<Vec<u8>> {
    let n = raw.len() / es;
    // One pass of the shuffle kernel into byte planes (least significant first), then
    // each group's planes copied most significant first: a strided pass per plane took
    // several times as long.
    let mut planes = vec![0u8; n * es];
    strata_codecs::byte_planes(es, &raw[..n * es], &mut planes);
    let mut top = es;
    groups
        .iter()
        .map(|&w| {
            let mut out = Vec::with_capacity(n * w);
            for b in (top - w..top).rev() {
                out.extend_from_slice(&planes[b * n..(b + 1) * n]);
            }
            top -= w;
            out
        })
        .collect()
}

/// Rebuilds `n` elements from the first `parts.len()` groups; missing bytes are filled
/// (see `fill_all`).
pub fn assemble(parts: &[&[u8]], n: usize, dtype: DType, groups: &[usize], out: &mut [u8]) {
    let es = dtype.size();
    // Byte planes, most significant byte first: plane j holds byte es-1-j of every element.
    let mut planes: Vec<&[u8]> = Vec::with_capacity(es);
    for (part, &w) in parts.iter().zip(groups) {
        planes.extend((0..w).map(|p| &part[p * n..(p + 1) * n]));
    }
    // One pass writing each element once (a pass per plane and another to fill rewrote the
    // whole output several times: reads at reduced precision were bound by that traffic).
    macro_rules! dispatch {
        ($($es:literal, $k:literal);*) => {
            match (es, planes.len()) {
                $(($es, $k) => assemble_fixed::<$es, $k>(&planes, out),)*
                _ => assemble_planes(&planes, es, dtype, out),
            }
        };
    }
    dispatch!(4, 1; 4, 2; 4, 3; 4, 4; 8, 1; 8, 2; 8, 3; 8, 4; 8, 5; 8, 6; 8, 7; 8, 8);
}

/// Elements of `ES` bytes from their `K` most significant byte planes, the rest filled by
/// the rule of `fill_all`.
fn assemble_fixed<const ES: usize, const K: usize>(planes: &[&[u8]], out: &mut [u8]) {
    let n = out.len() / ES;
    let p: [&[u8]; K] = std::array::from_fn(|j| &planes[j][..n]);
    let missing = ES - K;
    let (sign, exponent): (u64, u64) = if ES == 4 { (1 << 31, 0x7f80_0000) } else { (1 << 63, 0x7ff0_0000_0000_0000) };
    let half: u64 = if missing > 0 { 1 << (8 * missing - 1) } else { 0 };
    for (i, e) in out.chunks_exact_mut(ES).enumerate() {
        let mut known = 0u64;
        for (j, plane) in p.iter().enumerate() {
            known |= (plane[i] as u64) << (8 * (ES - 1 - j));
        }
        let special = known & !sign == 0 || known & exponent == exponent;
        let word = if missing == 0 || special { known } else { known | half };
        e.copy_from_slice(&word.to_le_bytes()[..ES]);
    }
}

/// The general case of [`assemble`]: a pass per plane, then the fill.
fn assemble_planes(planes: &[&[u8]], es: usize, dtype: DType, out: &mut [u8]) {
    for (j, plane) in planes.iter().enumerate() {
        let b = es - 1 - j;
        for (e, &v) in out.chunks_exact_mut(es).zip(plane.iter()) {
            e[b] = v;
        }
    }
    if planes.len() < es {
        fill_all(out, es - planes.len(), dtype);
    }
}

/// Fills the low `missing` bytes of every little-endian float in `out`, whose high bytes
/// are known.
///
/// Rule: when the known bits say zero (exponent and known mantissa all zero), infinity or
/// NaN (exponent all ones), the missing bytes are zero, so ±0 and ±inf come back exactly
/// and a NaN stays NaN whenever its known mantissa bits are not all zero (quiet NaNs).
/// Otherwise the missing bits become `100…0`, the middle of the interval of values that
/// share the known bits, which halves the worst error of truncation.
fn fill_all(out: &mut [u8], missing: usize, dtype: DType) {
    // One loop per element width, so the compiler knows it.
    macro_rules! fill {
        ($word:ty, $exponent:expr) => {{
            const SIZE: usize = std::mem::size_of::<$word>();
            let (known_mask, half) = (<$word>::MAX << (8 * missing), (1 as $word) << (8 * missing - 1));
            let sign = (1 as $word) << (8 * SIZE - 1);
            for e in out.chunks_exact_mut(SIZE) {
                let mut word = [0u8; SIZE];
                word.copy_from_slice(e);
                let known = <$word>::from_le_bytes(word) & known_mask;
                let special = known & !sign == 0 || known & $exponent == $exponent;
                e.copy_from_slice(&(if special { known } else { known | half }).to_le_bytes());
            }
        }};
    }
    match dtype {
        DType::F32 => fill!(u32, 0x7f80_0000u32),
        _ => fill!(u64, 0x7ff0_0000_0000_0000u64),
    }
}

/// Puts back the exact fill and missing values (`missing`, stored values of a float
/// `dtype`) in `out`, read at `level` of `groups`: an element that reads as a missing value
/// read at that level is that missing value. A fill of 1e20 kept to two bytes read as
/// 9.98e19, which no reader masks. A real value that shares the fill's kept bits lies within
/// the level's bound of it, so every element still holds the bound.
pub fn restore_missing(out: &mut [u8], dtype: DType, groups: &[usize], level: usize, missing: &[f64]) {
    let es = dtype.size();
    if level >= groups.len() || !dtype.is_float() {
        return;
    }
    for &m in missing.iter().filter(|m| m.is_finite()) {
        let exact = if dtype == DType::F32 { (m as f32).to_le_bytes().to_vec() } else { m.to_le_bytes().to_vec() };
        let parts = split(&exact, es, groups);
        let refs: Vec<&[u8]> = parts.iter().take(level).map(|p| &p[..]).collect();
        let mut read = vec![0u8; es];
        assemble(&refs, 1, dtype, groups, &mut read);
        if read == exact {
            continue;
        }
        for e in out.chunks_exact_mut(es).filter(|e| **e == read[..]) {
            e.copy_from_slice(&exact);
        }
    }
}

/// The worst relative error of a read at `level` groups: `2^-(m+1)` with `m` the mantissa
/// bits kept, for normal numbers (subnormals hold `2^-m` times the smallest normal);
/// 0 when every group is read.
pub fn relative_error(dtype: DType, groups: &[usize], level: usize) -> f64 {
    let kept: usize = groups.iter().take(level).sum();
    if kept >= dtype.size() {
        return 0.0;
    }
    let exponent_bits = if dtype == DType::F32 { 8 } else { 11 };
    let mantissa_kept = (8 * kept) as i32 - 1 - exponent_bits;
    2f64.powi(-(mantissa_kept + 1))
}

/// The smallest level whose worst relative error is at most `max_rel_error`.
pub fn level_for(dtype: DType, groups: &[usize], max_rel_error: f64) -> usize {
    (1..=groups.len()).find(|&k| relative_error(dtype, groups, k) <= max_rel_error).unwrap_or(groups.len())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn roundtrip32(values: &[f32], groups: &[usize], level: usize) -> Vec<f32> {
        let raw: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let parts = split(&raw, 4, groups);
        let refs: Vec<&[u8]> = parts.iter().take(level).map(|p| &p[..]).collect();
        let mut out = vec![0u8; raw.len()];
        assemble(&refs, values.len(), DType::F32, groups, &mut out);
        out.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
    }

    #[test]
    fn one_pass_assembly_equals_the_plane_by_plane_rule() {
        let f64s: Vec<f64> = (0..3000)
            .map(|i| ((i as f64) * 0.61).cos() * 10f64.powi(i % 11 - 5))
            .chain([0.0, -0.0, f64::INFINITY, f64::NEG_INFINITY, f64::NAN, 1e-310, f64::MAX, -f64::MIN_POSITIVE])
            .collect();
        let f32s: Vec<f32> = f64s.iter().map(|&v| v as f32).collect();
        let cases: [(DType, Vec<u8>, Vec<Vec<usize>>); 2] = [
            (
                DType::F64,
                f64s.iter().flat_map(|v| v.to_le_bytes()).collect(),
                vec![vec![2, 1, 1, 1, 1, 1, 1], vec![3, 5]],
            ),
            (DType::F32, f32s.iter().flat_map(|v| v.to_le_bytes()).collect(), vec![vec![2, 1, 1], vec![1, 1, 1, 1]]),
        ];
        for (dtype, raw, configs) in cases {
            let es = dtype.size();
            let n = raw.len() / es;
            for groups in configs {
                let parts = split(&raw, es, &groups);
                for level in 1..=groups.len() {
                    let refs: Vec<&[u8]> = parts.iter().take(level).map(|p| &p[..]).collect();
                    let mut fast = vec![0xAAu8; raw.len()];
                    assemble(&refs, n, dtype, &groups, &mut fast);
                    let mut planes: Vec<&[u8]> = Vec::new();
                    for (part, &w) in refs.iter().zip(&groups) {
                        planes.extend((0..w).map(|q| &part[q * n..(q + 1) * n]));
                    }
                    let mut slow = vec![0u8; raw.len()];
                    assemble_planes(&planes, es, dtype, &mut slow);
                    assert_eq!(fast, slow, "{dtype:?} groups {groups:?} level {level}");
                    if level == groups.len() {
                        assert_eq!(fast, raw);
                    }
                }
            }
        }
    }

    #[test]
    fn fills_read_at_a_level_come_back_exact() {
        let groups = [2, 1, 1];
        let values = [1e20f32, 288.5, -9999.0, 1.0001e20];
        for level in 1..=3 {
            let mut out: Vec<u8> = roundtrip32(&values, &groups, level).iter().flat_map(|v| v.to_le_bytes()).collect();
            restore_missing(&mut out, DType::F32, &groups, level, &[1e20, -9999.0, f64::NAN]);
            let got: Vec<f32> = out.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
            assert_eq!((got[0], got[2]), (1e20, -9999.0), "level {level}");
            // Within the bound of what it stands for, whatever it became.
            let bound = relative_error(DType::F32, &groups, level) as f32;
            for (g, v) in got.iter().zip(values) {
                assert!((g - v).abs() <= bound * v.abs(), "level {level}: {g} for {v}");
            }
        }
    }

    #[test]
    fn every_level_holds_its_bound_and_full_is_exact() {
        let values: Vec<f32> = (0..2000)
            .map(|i| ((i as f32) * 0.37).sin() * 10f32.powi(i % 9 - 4))
            .chain([0.0, -0.0, f32::INFINITY, f32::NEG_INFINITY, f32::NAN, 1e-40, -3e-39, f32::MAX, f32::MIN_POSITIVE])
            .collect();
        let groups = [2, 1, 1];
        for level in 1..=3 {
            let got = roundtrip32(&values, &groups, level);
            let bound = relative_error(DType::F32, &groups, level);
            for (x, y) in values.iter().zip(&got) {
                if x.is_nan() {
                    assert!(y.is_nan());
                } else if x.is_infinite() || *x == 0.0 {
                    assert_eq!(x.to_bits(), y.to_bits());
                } else {
                    let tiny = f32::MIN_POSITIVE as f64;
                    let limit = if (x.abs() as f64) < tiny { 2.0 * bound * tiny } else { bound * x.abs() as f64 };
                    assert!(((x - y) as f64).abs() <= limit, "level {level}: {x} -> {y}");
                }
            }
        }
        let exact = roundtrip32(&values, &groups, 4);
        assert!(values.iter().zip(&exact).all(|(a, b)| a.to_bits() == b.to_bits()));
        assert_eq!(relative_error(DType::F32, &groups, 1), 2f64.powi(-8));
        assert_eq!(relative_error(DType::F64, &[2, 1, 1, 1, 1, 1, 1], 2), 2f64.powi(-13));
        assert_eq!(level_for(DType::F64, &[2, 1, 1, 1, 1, 1, 1], 1e-4), 3);
    }

    #[test]
    fn bad_groups_are_refused() {
        assert!(check_groups(DType::F32, &[2, 2, 1]).is_err());
        assert!(check_groups(DType::F64, &[0, 8]).is_err());
        assert!(check_groups(DType::F64, &[4, 4]).is_ok());
    }
}
