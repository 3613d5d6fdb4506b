//! Measuring the cost model's constants on this machine (`strata calibrate`).
//!
//! Both methods are timed on generated stores over a sweep of selectivities and outputs,
//! each query planned under unit constants so that its plan holds the work each method
//! would do. Each method's constants are then fitted apart by non-negative least squares on
//! relative error (a decoded element or a fetched segment does not cost the same inside the
//! two methods' loops, and every timing should weigh the same whatever its duration).
//!
//! Three stores: V-S, V-S with land (a fill value over about 40% of the grid, whose
//! segments cost next to nothing to decode) and S. With one kind of store the time per
//! segment and per element cannot be told apart, and a store of many small or fill-only
//! segments is misjudged (ERSST x4, a third of it land, scanned in 0.45-0.6x the estimate).

use crate::cftime;
use crate::error::{Error, Result};
use crate::manifest::{AttrValue, Attribute, Dim};
use crate::planner::{Coefficients, CostModel, COST_MODEL_VERSION};
use crate::query::{CmpOp, Method, Predicate};
use crate::sampling::SplitMix;
use crate::session::{Output, Query, Session};
use crate::writer::{DatasetSchema, VariableSchema};
use crate::{DType, DimSelection, Store, StoreReader, StoreWriter, WriterOptions};
use std::path::{Path, PathBuf};

/// Selectivities swept: the fraction of valid elements above each threshold.
pub const SELECTIVITIES: [f64; 7] = [0.001, 0.01, 0.05, 0.2, 0.5, 0.9, 0.99];
/// The fill value of the store with land.
const LAND_FILL: f32 = -999.0;
/// Features of the cost model (see [`crate::planner::Work::as_array`]).
const FEATURES: usize = 7;

/// What `strata calibrate` is asked for.
#[derive(Debug, Clone, Copy)]
pub struct CalibrateOptions {
    /// Smaller stores (16 x 128 x 128 rather than 32 x 256 x 256): seconds, not tens.
    pub quick: bool,
    /// Runs per query and method; the best counts.
    pub repeats: usize,
}

impl Default for CalibrateOptions {
    fn default() -> Self {
        CalibrateOptions { quick: false, repeats: 3 }
    }
}

/// How well the fitted model explains the timings it was fitted on.
#[derive(Debug, Clone, PartialEq)]
pub struct Fit {
    /// Timings taken (two per query: index and scan).
    pub timings: usize,
    /// Median of |estimated / measured - 1| over every timing.
    pub median_relative_error: f64,
    /// Over the queries: the time of the method the model picks over the faster one's.
    pub worst_pick_slowdown: f64,
    /// Share of the queries where the pick is within 10% of the faster method.
    pub picks_within_10pct: f64,
}

/// A calibrated model and its fit.
#[derive(Debug, Clone)]
pub struct Calibration {
    pub model: CostModel,
    pub fit: Fit,
}

/// A scratch directory removed when dropped, whatever happened.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Times both methods on generated stores and fits the constants; does not store them
/// (see [`CostModel::save`]). `progress(done, total)` is called after each query and
/// stops the calibration by returning false.
pub fn calibrate(options: CalibrateOptions, progress: &mut dyn FnMut(usize, usize) -> bool) -> Result<Calibration> {
    let shape: [u64; 3] = if options.quick { [16, 128, 128] } else { [32, 256, 256] };
    let repeats = options.repeats.max(1);
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let scratch = Scratch(std::env::temp_dir().join(format!("strata-calibrate-{}-{nanos:x}", std::process::id())));
    std::fs::create_dir_all(&scratch.0).map_err(|e| Error::io(scratch.0.display().to_string(), e))?;

    let stores = [("V-S", false), ("V-S", true), ("S", false)];
    let outputs: [&[&str]; 3] = [&[], &["a"], &["a", "b"]];
    let total = stores.len() * SELECTIVITIES.len() * outputs.len();
    // Per method: (work under unit constants, best time in ns).
    let mut rows: [Vec<([f64; FEATURES], f64)>; 2] = [vec![], vec![]];
    let mut done = 0;
    for (layout, land) in stores {
        let path = scratch.0.join(format!("{layout}{}.strata", if land { "-land" } else { "" }));
        let valid = write_store(&path, layout, shape, land)?;
        let reader = StoreReader::open_with_cache(Store::local(&path.to_string_lossy()), None, 0)?;
        for q in SELECTIVITIES {
            let threshold = quantile(&valid, 1.0 - q);
            for outs in outputs {
                let query = Query {
                    predicate: Predicate::Cmp { var: "a".into(), op: CmpOp::Gt, value: threshold },
                    region: shape.iter().map(|&n| DimSelection { start: 0, stop: n, step: 1 }).collect(),
                    output: if outs.is_empty() { Output::Count } else { Output::Points },
                    variables: outs.iter().map(|s| s.to_string()).collect(),
                    level: None,
                    method: None,
                    mask: None,
                    raw: false,
                };
                for (slot, method) in [Method::Index, Method::Scan].into_iter().enumerate() {
                    // A session of its own: what these forced runs teach is not for later queries.
                    let session = Session::new(unit_model());
                    let forced = Query { method: Some(method), ..query.clone() };
                    let work = session.plan(&reader, &forced)?.work_with(method).as_array();
                    let mut best = f64::INFINITY;
                    for _ in 0..repeats {
                        best = best.min(session.run(&reader, &forced)?.seconds);
                    }
                    rows[slot].push((work, best * 1e9));
                }
                done += 1;
                if !progress(done, total) {
                    return Err(Error::InvalidArgument("calibration interrupted".into()));
                }
            }
        }
    }
    Ok(fit(rows))
}

/// The model the work is counted under while calibrating: any model counts the same work,
/// and unit constants make the plan's seconds the work itself.
fn unit_model() -> CostModel {
    let one =
        Coefficients { byte: 1.0, segment: 1.0, call: 1.0, decoded: 1.0, tested: 1.0, indexed: 1.0, gathered: 1.0 };
    CostModel { source: "calibration".into(), ns: one, scan_ns: None, ..CostModel::default() }
}

fn fit(rows: [Vec<([f64; FEATURES], f64)>; 2]) -> Calibration {
    // Relative error: each row divided by its time, fitted to ones.
    let coefficients = rows.clone().map(|r| {
        let a: Vec<[f64; FEATURES]> = r.iter().map(|(w, t)| w.map(|x| x / t)).collect();
        nnls(&a, &vec![1.0; a.len()])
    });
    let predict = |slot: usize, w: &[f64; FEATURES]| w.iter().zip(&coefficients[slot]).map(|(a, b)| a * b).sum::<f64>();
    let mut rel = Vec::new();
    for (slot, r) in rows.iter().enumerate() {
        rel.extend(r.iter().map(|(w, t)| (predict(slot, w) / t - 1.0).abs()));
    }
    let picks: Vec<f64> = rows[0]
        .iter()
        .zip(&rows[1])
        .map(|((wi, ti), (ws, ts))| {
            let pick = if predict(0, wi) <= predict(1, ws) { ti } else { ts };
            pick / ti.min(*ts)
        })
        .collect();
    let timings = rows[0].len() + rows[1].len();
    let as_coefficients = |c: &[f64; FEATURES]| Coefficients {
        byte: c[0],
        segment: c[1],
        call: c[2],
        decoded: c[3],
        tested: c[4],
        indexed: c[5],
        gathered: c[6],
    };
    let model = CostModel {
        version: COST_MODEL_VERSION,
        source: format!(
            "calibrated {} on {} ({} cores, {timings} timings)",
            today(),
            host_name(),
            std::thread::available_parallelism().map_or(1, |n| n.get())
        ),
        ns: as_coefficients(&coefficients[0]),
        scan_ns: Some(as_coefficients(&coefficients[1])),
        index_correction: 1.0,
        scan_correction: 1.0,
        observations: [0.0, 0.0],
    };
    let fit = Fit {
        timings,
        median_relative_error: median(&mut rel),
        worst_pick_slowdown: picks.iter().copied().fold(1.0, f64::max),
        picks_within_10pct: picks.iter().filter(|&&p| p <= 1.10).count() as f64 / picks.len().max(1) as f64,
    };
    Calibration { model, fit }
}

/// A smooth seasonal field with noise in `a`, a noisier companion `b`, over `shape`
/// (t, y, x); with `land`, a fill value in `a` over about 40% of the grid. Written with the
/// default chain and 16 bins under level V. Returns the valid values of `a`.
fn write_store(path: &Path, layout: &str, shape: [u64; 3], land: bool) -> Result<Vec<f32>> {
    let [nt, ny, nx] = shape.map(|n| n as usize);
    let axis = |n: usize, i: usize| if n > 1 { i as f64 / (n - 1) as f64 } else { 0.0 };
    let mut noise = Normal::new(7);
    let mut a = Vec::with_capacity(nt * ny * nx);
    let mut b = Vec::with_capacity(nt * ny * nx);
    for it in 0..nt {
        let t = axis(nt, it);
        for iy in 0..ny {
            let y = axis(ny, iy);
            for ix in 0..nx {
                let x = axis(nx, ix);
                let field = 20.0 + 8.0 * (6.0 * x + 3.0 * t).sin() * (4.0 * y).cos() + 0.3 * noise.next();
                b.push((field * 0.5 + noise.next()) as f32);
                let coast = (9.0 * x).sin() * (7.0 * y).cos() > 0.25 || y > 0.85;
                a.push(if land && coast { LAND_FILL } else { field as f32 });
            }
        }
    }
    let var = |name: &str, attrs| VariableSchema {
        name: name.into(),
        dtype: DType::F32,
        dims: ["t", "y", "x"].map(String::from).to_vec(),
        attrs,
        inline_strings: None,
    };
    let fill = if land {
        vec![Attribute { name: "_FillValue".into(), value: AttrValue::F32(vec![LAND_FILL]) }]
    } else {
        vec![]
    };
    let schema = DatasetSchema {
        dims: vec![
            Dim { name: "t".into(), size: shape[0], unlimited: true },
            Dim { name: "y".into(), size: shape[1], unlimited: false },
            Dim { name: "x".into(), size: shape[2], unlimited: false },
        ],
        record_dim: Some("t".into()),
        attrs: vec![],
        variables: vec![var("a", fill), var("b", vec![])],
    };
    let options =
        WriterOptions { layout: Some(layout.into()), bins: layout.contains('V').then_some(16), ..Default::default() };
    let mut w = StoreWriter::create(Store::local(&path.to_string_lossy()), schema, &options)?;
    let per_record = ny * nx;
    let slab = w.slab_records().max(1) as usize;
    let bytes = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    for t0 in (0..nt).step_by(slab) {
        let n = slab.min(nt - t0);
        let cells = t0 * per_record..(t0 + n) * per_record;
        w.begin_slab(n as u64)?;
        w.put_records("a", &bytes(&a[cells.clone()]))?;
        w.put_records("b", &bytes(&b[cells]))?;
        w.finish_slab()?;
    }
    w.commit("strata calibrate")?;
    a.retain(|&v| v != LAND_FILL);
    Ok(a)
}

/// The `q` quantile of `values` with linear interpolation between order statistics (NumPy's
/// default rule).
fn quantile(values: &[f32], q: f64) -> f64 {
    let mut sorted: Vec<f32> = values.to_vec();
    sorted.sort_unstable_by(f32::total_cmp);
    if sorted.is_empty() {
        return 0.0;
    }
    let pos = q.clamp(0.0, 1.0) * (sorted.len() - 1) as f64;
    let (lo, frac) = (pos.floor() as usize, pos - pos.floor());
    let hi = (lo + 1).min(sorted.len() - 1);
    sorted[lo] as f64 + frac * (sorted[hi] as f64 - sorted[lo] as f64)
}

fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_unstable_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}

/// Standard normal samples: the sample rule's splitmix64 uniforms through Box-Muller, fixed
/// forever so that calibration stores do not change with a crate update.
struct Normal {
    rng: SplitMix,
    spare: Option<f64>,
}

impl Normal {
    fn new(seed: u64) -> Self {
        Normal { rng: SplitMix(seed), spare: None }
    }

    fn uniform(&mut self) -> f64 {
        // 53 random bits in (0, 1]: the logarithm below never sees 0.
        ((self.rng.next() >> 11) + 1) as f64 / (1u64 << 53) as f64
    }

    fn next(&mut self) -> f64 {
        if let Some(s) = self.spare.take() {
            return s;
        }
        let (u, v) = (self.uniform(), self.uniform());
        let r = (-2.0 * u.ln()).sqrt();
        let theta = 2.0 * std::f64::consts::PI * v;
        self.spare = Some(r * theta.sin());
        r * theta.cos()
    }
}

/// min ||a x - b|| subject to x >= 0 (Lawson-Hanson active set). Columns are scaled to
/// unit norm first (the features differ by orders of magnitude: bytes and segments), which
/// leaves the solution's signs alone.
pub fn nnls(a: &[[f64; FEATURES]], b: &[f64]) -> [f64; FEATURES] {
    let scale: [f64; FEATURES] = std::array::from_fn(|j| {
        let norm = a.iter().map(|r| r[j] * r[j]).sum::<f64>().sqrt();
        if norm > 0.0 {
            norm
        } else {
            1.0
        }
    });
    let a: Vec<[f64; FEATURES]> = a.iter().map(|r| std::array::from_fn(|j| r[j] / scale[j])).collect();
    let residual = |x: &[f64; FEATURES]| -> Vec<f64> {
        a.iter().zip(b).map(|(r, bi)| bi - r.iter().zip(x).map(|(p, q)| p * q).sum::<f64>()).collect()
    };
    let mut x = [0.0; FEATURES];
    let mut passive = [false; FEATURES];
    for _ in 0..200 {
        let res = residual(&x);
        let w: [f64; FEATURES] = std::array::from_fn(|j| a.iter().zip(&res).map(|(r, e)| r[j] * e).sum());
        let wmax = w.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        let Some(j) = (0..FEATURES)
            .filter(|&j| !passive[j] && w[j] > 1e-12 * wmax.max(1.0))
            .max_by(|&p, &q| w[p].total_cmp(&w[q]))
        else {
            break;
        };
        passive[j] = true;
        loop {
            let z = least_squares(&a, b, &passive);
            if (0..FEATURES).filter(|&k| passive[k]).all(|k| z[k] > 0.0) {
                x = z;
                break;
            }
            // Step back towards x until the first passive coefficient reaches zero.
            let alpha = (0..FEATURES)
                .filter(|&k| passive[k] && z[k] <= 0.0)
                .map(|k| x[k] / (x[k] - z[k]))
                .fold(f64::INFINITY, f64::min);
            for k in 0..FEATURES {
                x[k] += alpha * (z[k] - x[k]);
                if passive[k] && x[k] <= 1e-15 {
                    passive[k] = false;
                    x[k] = 0.0;
                }
            }
            if !passive.iter().any(|&p| p) {
                break;
            }
        }
    }
    std::array::from_fn(|j| x[j] / scale[j])
}

/// Least squares over the `passive` columns (the rest held at 0), by Householder QR; a
/// column that depends on those before it (collinear features) is held at 0 too.
fn least_squares(a: &[[f64; FEATURES]], b: &[f64], passive: &[bool; FEATURES]) -> [f64; FEATURES] {
    let cols: Vec<usize> = (0..FEATURES).filter(|&j| passive[j]).collect();
    let m = a.len();
    let mut r: Vec<Vec<f64>> = cols.iter().map(|&j| a.iter().map(|row| row[j]).collect()).collect();
    let mut y = b.to_vec();
    let mut kept = Vec::new();
    let mut k = 0; // rows used by the reflections so far
    for c in 0..cols.len() {
        if k >= m {
            break;
        }
        let norm = r[c][k..].iter().map(|v| v * v).sum::<f64>().sqrt();
        let full = r[c].iter().map(|v| v * v).sum::<f64>().sqrt();
        if norm <= 1e-10 * full.max(1e-300) {
            continue; // nothing left of this column once the earlier ones are taken out
        }
        let alpha = if r[c][k] > 0.0 { -norm } else { norm };
        let mut v: Vec<f64> = r[c][k..].to_vec();
        v[0] -= alpha;
        let vv = v.iter().map(|x| x * x).sum::<f64>();
        if vv > 0.0 {
            let reflect = |col: &mut [f64]| {
                let d = v.iter().zip(&col[k..]).map(|(p, q)| p * q).sum::<f64>() * 2.0 / vv;
                col[k..].iter_mut().zip(&v).for_each(|(x, p)| *x -= d * p);
            };
            for col in r.iter_mut().skip(c) {
                reflect(col);
            }
            reflect(&mut y);
        }
        kept.push((c, k));
        k += 1;
    }
    // Back substitution over the kept columns (upper triangular in rows 0..k).
    let mut z = [0.0; FEATURES];
    let mut sol = vec![0.0; kept.len()];
    for i in (0..kept.len()).rev() {
        let (c, row) = kept[i];
        let mut s = y[row];
        for (j, &(c2, _)) in kept.iter().enumerate().skip(i + 1) {
            s -= r[c2][row] * sol[j];
        }
        sol[i] = s / r[c][row];
    }
    for (i, &(c, _)) in kept.iter().enumerate() {
        z[cols[c]] = sol[i];
    }
    z
}

/// Today's date (UTC) as YYYY-MM-DD.
fn today() -> String {
    let days = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() / 86_400);
    // 1970-01-01 is Julian Day 2,440,588.
    let (year, month, day) = cftime::date_of(cftime::Calendar::ProlepticGregorian, 2_440_588 + days as i64);
    format!("{year:04}-{month:02}-{day:02}")
}

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "this machine".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nnls_recovers_nonnegative_coefficients_and_clamps_negative_ones() {
        // b = 2 x0 + 0 x1 + 3 x2, with x1 pulling the other way when free.
        let a: Vec<[f64; FEATURES]> = (0..20)
            .map(|i| {
                let f = i as f64;
                [f + 1.0, (f * 0.7).sin() * 1e6, (f * f) % 7.0 + 0.5, 0.0, 0.0, 0.0, 0.0]
            })
            .collect();
        let b: Vec<f64> = a.iter().map(|r| 2.0 * r[0] + 3.0 * r[2]).collect();
        let x = nnls(&a, &b);
        assert!((x[0] - 2.0).abs() < 1e-6 && (x[2] - 3.0).abs() < 1e-6 && x[1].abs() < 1e-9, "{x:?}");
        // Nonnegative features and a negative target: every coefficient held at zero.
        let a: Vec<[f64; FEATURES]> = a.iter().map(|r| r.map(f64::abs)).collect();
        let b: Vec<f64> = a.iter().map(|r| -r[0]).collect();
        assert!(nnls(&a, &b).iter().all(|&v| v == 0.0));
    }

    #[test]
    fn collinear_columns_do_not_blow_up() {
        let a: Vec<[f64; FEATURES]> =
            (0..10).map(|i| [i as f64 + 1.0, 2.0 * (i as f64 + 1.0), 1.0, 0.0, 0.0, 0.0, 0.0]).collect();
        let b: Vec<f64> = a.iter().map(|r| 3.0 * r[0] + 1.0).collect();
        let x = nnls(&a, &b);
        assert!(x.iter().all(|v| v.is_finite() && *v >= 0.0), "{x:?}");
        let fitted: Vec<f64> = a.iter().map(|r| r.iter().zip(&x).map(|(p, q)| p * q).sum()).collect();
        assert!(fitted.iter().zip(&b).all(|(f, t)| (f - t).abs() < 1e-6 * t.abs()), "{x:?}");
    }

    #[test]
    fn quantile_interpolates_like_numpy() {
        let v = [4.0f32, 1.0, 3.0, 2.0];
        assert_eq!(quantile(&v, 0.0), 1.0);
        assert_eq!(quantile(&v, 1.0), 4.0);
        assert!((quantile(&v, 0.5) - 2.5).abs() < 1e-12);
        assert!((quantile(&v, 0.9) - 3.7).abs() < 1e-9);
    }

    #[test]
    fn today_is_a_date() {
        let d = today();
        assert_eq!(d.len(), 10);
        assert!(d.starts_with("20") && d.as_bytes()[4] == b'-' && d.as_bytes()[7] == b'-');
    }

    #[test]
    fn quick_calibration_fits_every_timing_and_can_be_stopped() {
        let mut seen = 0;
        let c = calibrate(CalibrateOptions { quick: true, repeats: 1 }, &mut |done, total| {
            seen = done;
            assert!(done <= total);
            true
        })
        .expect("calibrate");
        assert_eq!(seen, 63);
        assert_eq!(c.fit.timings, 126);
        let scan = c.model.scan_ns.expect("scan constants");
        assert!(c.model.ns.as_array().iter().chain(scan.as_array().iter()).all(|v| v.is_finite() && *v >= 0.0));
        assert!(c.model.source.starts_with("calibrated "));
        // The round trip through the file format holds.
        assert_eq!(CostModel::from_json(&c.model.to_json()).expect("json").ns, c.model.ns);
        let stopped = calibrate(CalibrateOptions { quick: true, repeats: 1 }, &mut |done, _| done < 2);
        assert!(stopped.is_err());
    }
}
