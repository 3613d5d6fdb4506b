//! A quick look at a 2-D slice: a PNG with a colour scale, rendered at the server (the web
//! page's picture) and by `strata quicklook`. Values are read strided so the picture is at
//! most about 1,024 pixels a side whatever the variable's size; missing values are grey;
//! the first axis is drawn north up when its coordinate increases, or the latitude the
//! variable's `coordinates` name (a curvilinear grid such as WRF's) increases along it.

use crate::ApiError;
use strata_core::manifest::Variable;
use strata_core::{DimSelection, StoreReader};

const MAX_SIDE: u64 = 1024;
const MIN_WIDTH: usize = 480;
const BAR: usize = 14;
const MARGIN: usize = 6;
/// Steps of the colour scale a picture uses.
const LEVELS: usize = 4096;

/// The PNG of variable `name` under `sel` (every dimension but two selects one index).
pub fn render(reader: &StoreReader, name: &str, sel: &[DimSelection]) -> Result<Vec<u8>, ApiError> {
    let m = reader.manifest();
    let (_, var) = m.variable(name)?;
    reader.check_selection(name, sel)?;
    let wide: Vec<usize> = (0..sel.len()).filter(|&d| sel[d].count() > 1).collect();
    if wide.len() != 2 {
        return Err(ApiError::bad_request(format!(
            "a quick look shows two dimensions: select one index on every other dimension of '{name}' {:?} \
             (e.g. isel=time=0)",
            var.dims
        )));
    }
    // Stride the two wide dimensions down to at most MAX_SIDE elements each.
    let mut sel = sel.to_vec();
    for &d in &wide {
        let s = &mut sel[d];
        let factor = s.count().div_ceil(MAX_SIDE);
        s.step *= factor;
    }
    let (ny, nx) = (sel[wide[0]].count() as usize, sel[wide[1]].count() as usize);
    let mut raw = vec![0u8; ny * nx * var.dtype.size()];
    reader.read_into(name, &sel, &mut raw)?;
    let missing = var.missing_values();
    let decoding = strata_core::decoding::Decoding::of(m, name)?;
    let values: Vec<f64> = var
        .dtype
        .to_f64s(&raw)
        .into_iter()
        .map(|v| if v.is_nan() || missing.contains(&v) { f64::NAN } else { decoding.physical(v) })
        .collect();
    let (lo, hi) = values
        .iter()
        .filter(|v| v.is_finite())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &v| (a.min(v), b.max(v)));
    // North up: flip when the first wide axis has an increasing 1-D coordinate, or has none
    // and the variable's 2-D latitude increases along it.
    let flip = match increasing(reader, &var.dims[wide[0]]) {
        Some(up) => up,
        None => latitude_increases(reader, var, &sel, wide[0], wide[1]),
    };
    let scale = MIN_WIDTH.div_ceil(nx).max(1);
    let (w, h_img) = (nx * scale, ny * scale);
    let h = h_img + MARGIN + BAR + MARGIN + 5 * 2 + MARGIN;
    let mut img = vec![255u8; w * h * 3];
    let scale_of = ColourScale::new(lo, hi);
    for y in 0..h_img {
        let row = if flip { ny - 1 - y / scale } else { y / scale };
        for x in 0..w {
            let c = scale_of.pixel(values[row * nx + x / scale]);
            img[(y * w + x) * 3..(y * w + x) * 3 + 3].copy_from_slice(&c);
        }
    }
    let bar_top = h_img + MARGIN;
    for y in bar_top..bar_top + BAR {
        for x in 0..w {
            let c = colour(x as f64 / (w.max(2) - 1) as f64);
            img[(y * w + x) * 3..(y * w + x) * 3 + 3].copy_from_slice(&c);
        }
    }
    if lo.is_finite() {
        let text_y = bar_top + BAR + MARGIN;
        let span = hi - lo;
        draw_text(&mut img, w, 2, text_y, &label(lo, span));
        let mid = label((lo + hi) / 2.0, span);
        draw_text(&mut img, w, w / 2 - text_width(&mid) / 2, text_y, &mid);
        let top = label(hi, span);
        draw_text(&mut img, w, w.saturating_sub(text_width(&top) + 2), text_y, &top);
    }
    Ok(png(w, h, &img))
}

/// Whether the 1-D coordinate of `dim` increases; None when it has none.
fn increasing(reader: &StoreReader, dim: &str) -> Option<bool> {
    let m = reader.manifest();
    let (_, c) = m.variable(dim).ok()?;
    if c.dims.len() != 1 || c.chunking.is_none() || c.dtype.num_type().is_none() {
        return None;
    }
    let n = m.shape(c)[0];
    if n < 2 {
        return Some(false);
    }
    let mut buf = vec![0u8; 2 * c.dtype.size()];
    let sel = [DimSelection { start: 0, stop: n, step: n - 1 }];
    Some(
        reader.read_into(dim, &sel, &mut buf).is_ok() && {
            let v = c.dtype.to_f64s(&buf);
            v[1] > v[0]
        },
    )
}

/// Whether the latitude among `var`'s auxiliary coordinates increases along axis `rows`
/// of the slice `sel`: compared at the first and last row, in the middle column.
fn latitude_increases(reader: &StoreReader, var: &Variable, sel: &[DimSelection], rows: usize, cols: usize) -> bool {
    let m = reader.manifest();
    let Some(lat) = strata_core::area::auxiliary_coordinates(m, var)
        .into_iter()
        .filter_map(|n| m.variable(&n).ok().map(|(_, c)| c))
        .find(|c| strata_core::area::is_latitude(c) && c.chunking.is_some() && c.dims.contains(&var.dims[rows]))
    else {
        return false;
    };
    // The latitude's own axes at the slice's first and last row.
    let at = |row: u64| -> Vec<DimSelection> {
        lat.dims
            .iter()
            .map(|d| {
                let k = var.dims.iter().position(|x| x == d).unwrap_or(0);
                let i = if k == rows {
                    row
                } else if k == cols {
                    sel[k].start + sel[k].count() / 2 * sel[k].step
                } else {
                    sel[k].start
                };
                DimSelection { start: i, stop: i + 1, step: 1 }
            })
            .collect()
    };
    let last = sel[rows].start + (sel[rows].count() - 1) * sel[rows].step;
    let Ok(decoding) = strata_core::decoding::Decoding::of(m, &lat.name) else { return false };
    let value = |row: u64| -> Option<f64> {
        let mut buf = vec![0u8; lat.dtype.size()];
        reader.read_into(&lat.name, &at(row), &mut buf).ok()?;
        lat.dtype.to_f64s(&buf).first().map(|&v| decoding.physical(v))
    };
    matches!((value(sel[rows].start), value(last)), (Some(a), Some(b)) if b > a)
}

/// A colour-scale label with as many decimals as the scale's `span` needs to tell its
/// three labels apart (300.35, 301.88, 303.41 K, not 300, 302, 303).
fn label(v: f64, span: f64) -> String {
    let a = v.abs();
    if a != 0.0 && !(1e-3..1e5).contains(&a) {
        return format!("{v:.2e}");
    }
    let decimals =
        if span > 0.0 && span.is_finite() { (2.0 - span.log10().floor()).clamp(0.0, 6.0) as usize } else { 2 };
    format!("{v:.decimals$}")
}

/// [`colour`] over the values `lo..=hi` in [`LEVELS`] steps, each computed once: a pixel is
/// a look-up, not the interpolation. A step moves a colour byte by 0.16 at most, so a pixel
/// is at most one unit of one byte from the exact scale.
struct ColourScale {
    colours: Vec<[u8; 3]>,
    lo: f64,
    /// Steps per unit of value (0 when all values are equal: the middle colour).
    step: f64,
    middle: f64,
}

impl ColourScale {
    fn new(lo: f64, hi: f64) -> Self {
        let colours = (0..LEVELS).map(|i| colour(i as f64 / (LEVELS - 1) as f64)).collect();
        let spread = hi > lo;
        let step = if spread { (LEVELS - 1) as f64 / (hi - lo) } else { 0.0 };
        ColourScale { colours, lo, step, middle: if spread { 0.0 } else { (LEVELS / 2) as f64 } }
    }

    /// The colour of `v`; grey when it is missing (NaN).
    fn pixel(&self, v: f64) -> [u8; 3] {
        if !v.is_finite() {
            return [160, 160, 160];
        }
        self.colours[(((v - self.lo) * self.step + self.middle).round().max(0.0) as usize).min(LEVELS - 1)]
    }
}

/// A perceptually ordered scale (dark blue, teal, green, yellow), interpolated.
fn colour(t: f64) -> [u8; 3] {
    const STOPS: [[f64; 3]; 5] =
        [[68.0, 1.0, 84.0], [59.0, 82.0, 139.0], [33.0, 145.0, 140.0], [94.0, 201.0, 98.0], [253.0, 231.0, 37.0]];
    let t = t.clamp(0.0, 1.0) * (STOPS.len() - 1) as f64;
    let i = (t.floor() as usize).min(STOPS.len() - 2);
    let f = t - i as f64;
    let mix = |k: usize| (STOPS[i][k] + (STOPS[i + 1][k] - STOPS[i][k]) * f).round() as u8;
    [mix(0), mix(1), mix(2)]
}

/// 3x5 glyphs for the characters numbers are written with.
fn glyph(c: char) -> [u8; 5] {
    match c {
        '0' => [7, 5, 5, 5, 7],
        '1' => [2, 6, 2, 2, 7],
        '2' => [7, 1, 7, 4, 7],
        '3' => [7, 1, 7, 1, 7],
        '4' => [5, 5, 7, 1, 1],
        '5' => [7, 4, 7, 1, 7],
        '6' => [7, 4, 7, 5, 7],
        '7' => [7, 1, 1, 1, 1],
        '8' => [7, 5, 7, 5, 7],
        '9' => [7, 5, 7, 1, 7],
        '-' => [0, 0, 7, 0, 0],
        '+' => [0, 2, 7, 2, 0],
        '.' => [0, 0, 0, 0, 2],
        'e' => [0, 7, 7, 4, 7],
        _ => [0; 5],
    }
}

const PX: usize = 2;

fn text_width(s: &str) -> usize {
    s.chars().count() * 4 * PX
}

fn draw_text(img: &mut [u8], w: usize, x0: usize, y0: usize, s: &str) {
    let h = img.len() / 3 / w;
    for (i, c) in s.chars().enumerate() {
        let g = glyph(c);
        for (row, bits) in g.iter().enumerate() {
            for col in 0..3 {
                if bits & (4 >> col) == 0 {
                    continue;
                }
                for dy in 0..PX {
                    for dx in 0..PX {
                        let (x, y) = (x0 + (i * 4 + col) * PX + dx, y0 + row * PX + dy);
                        if x < w && y < h {
                            img[(y * w + x) * 3..(y * w + x) * 3 + 3].copy_from_slice(&[0, 0, 0]);
                        }
                    }
                }
            }
        }
    }
}

fn crc32(data: &[u8]) -> u32 {
    let mut c = flate2::Crc::new();
    c.update(data);
    c.sum()
}

/// An RGB image as PNG, its rows deflated at zlib's fastest level (a quick look's smooth
/// colour fields shrink several-fold, for the web page's download).
fn png(w: usize, h: usize, rgb: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut z = flate2::write::ZlibEncoder::new(Vec::with_capacity(rgb.len() / 4), flate2::Compression::fast());
    for row in rgb.chunks(w * 3) {
        // Filter type 0 (none) before each row; writing to a Vec cannot fail.
        let _ = z.write_all(&[0]).and_then(|()| z.write_all(row));
    }
    let z = z.finish().unwrap_or_default();
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut chunk = |kind: &[u8; 4], data: &[u8]| {
        out.extend_from_slice(&(data.len() as u32).to_be_bytes());
        let mut body = kind.to_vec();
        body.extend_from_slice(data);
        out.extend_from_slice(&body);
        out.extend_from_slice(&crc32(&body).to_be_bytes());
    };
    let mut ihdr = Vec::new();
    ihdr.extend_from_slice(&(w as u32).to_be_bytes());
    ihdr.extend_from_slice(&(h as u32).to_be_bytes());
    ihdr.extend_from_slice(&[8, 2, 0, 0, 0]);
    chunk(b"IHDR", &ihdr);
    chunk(b"IDAT", &z);
    chunk(b"IEND", &[]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc_and_colours() {
        assert_eq!(crc32(b"IEND"), 0xAE42_6082);
        assert_eq!(colour(0.0), [68, 1, 84]);
        assert_eq!(colour(1.0), [253, 231, 37]);
        assert_eq!(label(-1.8, 3.6), "-1.80");
        assert_eq!(label(123456.0, 1e5), "1.23e5");
        // Decimals enough for the span: a 3 K range around 300 K, a 2,000 m range.
        assert_eq!((label(300.348, 3.06), label(301.877, 3.06)), ("300.35".into(), "301.88".into()));
        assert_eq!(label(1234.5, 2000.0), "1234");
        assert_eq!(label(0.5, 0.0), "0.50");
    }

    #[test]
    fn the_scale_table_is_the_scale_within_one_unit() {
        let (lo, hi) = (-1.8, 35.2);
        let scale = ColourScale::new(lo, hi);
        for i in 0..=100_000 {
            let v = lo + (hi - lo) * f64::from(i) / 100_000.0;
            let (got, want) = (scale.pixel(v), colour((v - lo) / (hi - lo)));
            assert!(got.iter().zip(want).all(|(&g, w)| g.abs_diff(w) <= 1), "{v}: {got:?} against {want:?}");
        }
        assert_eq!(scale.pixel(lo), colour(0.0));
        assert_eq!(scale.pixel(hi), colour(1.0));
        assert_eq!(scale.pixel(f64::NAN), [160, 160, 160]);
        assert_eq!(ColourScale::new(3.0, 3.0).pixel(3.0), colour(0.5));
    }
}
