//! Areas: selections through auxiliary coordinates (2-D curvilinear latitude/longitude, the
//! 1-D coordinates of an unstructured mesh). They are not dimensions, so a range of their
//! values is not a range of positions: it is a [`Mask`] over the axes they span, and the
//! query is narrowed to the mask's bounding box. Python's `sel={"latitude": (60, None)}` and
//! SQL's `WHERE latitude >= 60` both build their masks here.

use crate::decoding::Decoding;
use crate::error::{Error, Result};
use crate::grid::{for_each_flat, position_in, row_major_strides};
use crate::manifest::{Manifest, Variable};
use crate::mask::Mask;
use crate::query::CmpOp;
use crate::reader::{DimSelection, StoreReader};
use std::sync::Arc;

/// Whether `name` is an auxiliary coordinate of variables on `dims`: a variable that is not
/// one of those dimensions and spans only (some of) them.
pub fn is_auxiliary(manifest: &Manifest, dims: &[String], name: &str) -> bool {
    if dims.iter().any(|d| d == name) {
        return false;
    }
    manifest.variable(name).is_ok_and(|(_, v)| !v.dims.is_empty() && v.dims.iter().all(|d| dims.contains(d)))
}

fn units_of(var: &Variable) -> String {
    var.string_attr("units").unwrap_or("").trim().to_ascii_lowercase()
}

/// Whether `var` is a latitude: CF's `standard_name`, or units of degrees north.
pub fn is_latitude(var: &Variable) -> bool {
    var.string_attr("standard_name") == Some("latitude")
        || matches!(units_of(var).as_str(), "degrees_north" | "degree_north" | "degrees_n" | "degree_n")
}

/// A longitude's whole turn in its units (360 degrees, or 2π radians); None when `var` is
/// no longitude (CF's `standard_name`, or units of degrees east).
pub fn longitude_turn(var: &Variable) -> Option<f64> {
    let units = units_of(var);
    let east = matches!(units.as_str(), "degrees_east" | "degree_east" | "degrees_e" | "degree_e");
    match (east || var.string_attr("standard_name") == Some("longitude"), units.as_str()) {
        (false, _) => None,
        (true, "radian" | "radians" | "rad") => Some(std::f64::consts::TAU),
        (true, _) => Some(360.0),
    }
}

/// The auxiliary coordinates (see [`is_auxiliary`]) a variable's CF `coordinates`
/// attribute names, in its order: 2-D lat/lon, a mesh's coordinates.
pub fn auxiliary_coordinates(manifest: &Manifest, var: &Variable) -> Vec<String> {
    let Some(text) = var.string_attr("coordinates") else { return vec![] };
    text.split_whitespace().filter(|n| is_auxiliary(manifest, &var.dims, n)).map(String::from).collect()
}

/// Checks that `name` is an auxiliary coordinate of variables on `dims` whose stored
/// bytes number `bytes`: its variable, its shape, and the variables' axis each of its
/// dimensions is.
fn spanned<'m>(
    manifest: &'m Manifest,
    dims: &[String],
    name: &str,
    bytes: usize,
) -> Result<(&'m Variable, Vec<u64>, Vec<usize>)> {
    let (_, var) = manifest.variable(name)?;
    let shape = manifest.shape(var);
    if !is_auxiliary(manifest, dims, name) || bytes as u64 != shape.iter().product::<u64>() * var.dtype.size() as u64 {
        return Err(Error::InvalidArgument(format!(
            "'{name}' is not a coordinate on some of the dimensions {dims:?} with {bytes} bytes"
        )));
    }
    let axes = var.dims.iter().map(|d| dims.iter().position(|x| x == d).unwrap_or(0)).collect();
    Ok((var, shape, axes))
}

/// The flat index into a coordinate of shape `own` spanning the variables' `axes` at
/// each of the points `flat` (flat indices into the variables' `shape`).
fn spanned_indices(name: &str, axes: &[usize], own: &[u64], shape: &[u64], flat: &[u64]) -> Result<Vec<u64>> {
    let mut out = vec![0u64; flat.len()];
    let mut stride = 1u64;
    for (&axis, &len) in axes.iter().zip(own).rev() {
        crate::points::check_axis(axis, shape)?;
        if shape[axis] != len {
            return Err(Error::InvalidArgument(format!(
                "'{name}' has shape {own:?}, which does not match the queried variables' {shape:?}"
            )));
        }
        for (o, i) in out.iter_mut().zip(crate::points::axis_indices(axis, shape, flat)) {
            *o += i * stride;
        }
        stride *= len;
    }
    Ok(out)
}

/// An auxiliary coordinate's stored values, to give as a column of a points result: its
/// value at each point (see [`crate::joined`]).
#[derive(Debug, Clone)]
pub struct AuxPick {
    name: String,
    axes: Vec<usize>,
    shape: Vec<u64>,
    /// The stored bytes, whole, row-major over the coordinate's own shape.
    raw: Vec<u8>,
    itemsize: usize,
}

impl AuxPick {
    /// `name`, an auxiliary coordinate of variables on `dims`, from its stored bytes
    /// (`raw`, whole, as [`AuxCoord::read_raw`] gives).
    pub fn new(manifest: &Manifest, dims: &[String], name: &str, raw: Vec<u8>) -> Result<AuxPick> {
        let (var, shape, axes) = spanned(manifest, dims, name, raw.len())?;
        Ok(AuxPick { name: name.to_string(), axes, shape, itemsize: var.dtype.size(), raw })
    }

    /// Bytes per value.
    pub fn itemsize(&self) -> usize {
        self.itemsize
    }

    /// Writes the value at each of the points `flat` (into the variables' `shape`) into
    /// `out`, `itemsize` bytes per point: every byte of `out` is written.
    pub(crate) fn pick_into(&self, shape: &[u64], flat: &[u64], out: &mut [std::mem::MaybeUninit<u8>]) -> Result<()> {
        let at = spanned_indices(&self.name, &self.axes, &self.shape, shape, flat)?;
        let es = self.itemsize;
        if out.len() != at.len() * es {
            return Err(Error::InvalidArgument(format!(
                "{} bytes for {} values of '{}'",
                out.len(),
                at.len(),
                self.name
            )));
        }
        match es {
            1 => put_at::<1>(&self.raw, &at, out),
            2 => put_at::<2>(&self.raw, &at, out),
            4 => put_at::<4>(&self.raw, &at, out),
            8 => put_at::<8>(&self.raw, &at, out),
            _ => {
                for (o, &i) in out.chunks_exact_mut(es).zip(&at) {
                    crate::points::write_all(o, &self.raw[i as usize * es..(i as usize + 1) * es]);
                }
            }
        }
        Ok(())
    }
}

/// Element `at[k]` of `raw` (elements of N bytes) into slot k of `out`: a fixed-size store
/// per point, where slices of a run-time length took a call to memmove each.
fn put_at<const N: usize>(raw: &[u8], at: &[u64], out: &mut [std::mem::MaybeUninit<u8>]) {
    let (values, _) = raw.as_chunks::<N>();
    let (slots, _) = out.as_chunks_mut::<N>();
    for (o, &i) in slots.iter_mut().zip(at) {
        *o = values[i as usize].map(std::mem::MaybeUninit::new);
    }
}

/// What an element's coordinate value must satisfy to be in an area.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum CoordTest {
    /// The physical value (unpacked by `scale_factor`/`add_offset`) within `lo..=hi`, either
    /// end open. On a longitude with both ends given the range is an arc of the circle, from
    /// `lo` eastward to `hi`, whichever convention the values use (0..360 or -180..180):
    /// `lo > hi` crosses the dateline; on another coordinate it is an error.
    Range { lo: Option<f64>, hi: Option<f64> },
    /// The stored value compared with a constant, as SQL compares its columns.
    Stored(CmpOp, f64),
}

/// An auxiliary coordinate's values, read once and tested by every area through it. Fill
/// and missing values, and NaN, are in no area.
#[derive(Debug, Clone)]
pub struct AuxCoord {
    name: String,
    /// For each of the coordinate's own dimensions, the queried variables' axis it is.
    axes: Vec<usize>,
    shape: Vec<u64>,
    /// The stored values as f64, missing values as NaN.
    values: Vec<f64>,
    decoding: std::result::Result<Decoding, String>,
    /// A longitude's turn in its units (360 degrees, or 2π radians); None for another
    /// coordinate.
    turn: Option<f64>,
}

impl AuxCoord {
    /// Reads `name`, an auxiliary coordinate of variables on `dims`.
    pub fn read(reader: &StoreReader, dims: &[String], name: &str) -> Result<AuxCoord> {
        AuxCoord::from_raw(reader.manifest(), dims, name, &AuxCoord::read_raw(reader, dims, name)?)
    }

    /// The stored bytes of `name`, an auxiliary coordinate of variables on `dims`, whole.
    pub fn read_raw(reader: &StoreReader, dims: &[String], name: &str) -> Result<Vec<u8>> {
        let m = reader.manifest();
        let (_, var) = m.variable(name)?;
        if !is_auxiliary(m, dims, name) {
            return Err(Error::InvalidArgument(format!(
                "'{name}' (dimensions {:?}) is not a coordinate on some of the dimensions {dims:?}",
                var.dims
            )));
        }
        reader.read_whole(name)
    }

    /// `name`'s values from its stored bytes (`raw`, whole, as [`AuxCoord::read_raw`] gives).
    pub fn from_raw(manifest: &Manifest, dims: &[String], name: &str, raw: &[u8]) -> Result<AuxCoord> {
        let (var, shape, axes) = spanned(manifest, dims, name, raw.len())?;
        let mut values = var.dtype.to_f64s(raw);
        let missing = var.missing_values();
        if !missing.is_empty() {
            for v in values.iter_mut().filter(|v| missing.contains(v)) {
                *v = f64::NAN;
            }
        }
        let turn = longitude_turn(var);
        Ok(AuxCoord {
            name: name.to_string(),
            axes,
            shape,
            values,
            // A packing that cannot be applied fails the tests on physical values only.
            decoding: Decoding::of(manifest, name).map_err(|e| e.to_string()),
            turn,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The queried variables' axes the coordinate spans, in its own dimensions' order.
    pub fn axes(&self) -> &[usize] {
        &self.axes
    }

    /// The coordinate's own flat index at each of the points `flat` (flat indices into the
    /// queried variables' `shape`): where to read its value for them.
    pub fn indices(&self, shape: &[u64], flat: &[u64]) -> Result<Vec<u64>> {
        spanned_indices(&self.name, &self.axes, &self.shape, shape, flat)
    }

    /// Whether each value (row-major over the coordinate's own shape) passes `test`.
    fn passes(&self, test: CoordTest) -> Result<Vec<bool>> {
        Ok(match test {
            CoordTest::Stored(op, v) => self.values.iter().map(|&x| !x.is_nan() && op.test(x, v)).collect(),
            CoordTest::Range { lo, hi } => {
                let decoding = self.decoding.clone().map_err(Error::InvalidArgument)?;
                let physical = |x: f64| decoding.physical(x);
                match (lo, hi, self.turn) {
                    (Some(lo), Some(hi), Some(turn)) => {
                        // On the circle: a user's -170 is a 0..360 grid's 190, so comparing
                        // numbers alone selected half the globe for `170:-170` there.
                        let arc = if hi - lo >= turn { turn } else { (hi - lo).rem_euclid(turn) };
                        self.values
                            .iter()
                            .map(|&x| {
                                let p = physical(x);
                                p.is_finite() && (arc >= turn || (p - lo).rem_euclid(turn) <= arc)
                            })
                            .collect()
                    }
                    (Some(lo), Some(hi), None) if lo > hi => {
                        return Err(Error::InvalidArgument(format!(
                            "'{}' range ({lo}, {hi}) is empty: its lower bound is above the upper",
                            self.name
                        )));
                    }
                    _ => self
                        .values
                        .iter()
                        .map(|&x| {
                            let p = physical(x);
                            !p.is_nan() && lo.is_none_or(|lo| p >= lo) && hi.is_none_or(|hi| p <= hi)
                        })
                        .collect(),
                }
            }
        })
    }
}

/// The elements selected through auxiliary coordinates: a mask over the axes they span, and
/// its bounding box.
#[derive(Debug, Clone)]
pub struct Area {
    mask: Arc<Mask>,
    /// Per axis of the mask, the first and one past the last index holding a selected
    /// element (None: none does).
    extent: Vec<Option<(u64, u64)>>,
}

impl Area {
    /// The elements of variables of shape `shape` whose coordinates pass all `tests`.
    pub fn new(shape: &[u64], tests: &[(&AuxCoord, CoordTest)]) -> Result<Area> {
        let mut axes: Vec<usize> = tests.iter().flat_map(|(c, _)| c.axes.iter().copied()).collect();
        axes.sort_unstable();
        axes.dedup();
        if axes.is_empty() || axes.iter().any(|&a| a >= shape.len()) {
            return Err(Error::InvalidArgument(format!(
                "an area needs coordinates on the queried variables' axes (shape {shape:?})"
            )));
        }
        let mshape: Vec<u64> = axes.iter().map(|&a| shape[a]).collect();
        let n = mshape.iter().product::<u64>() as usize;
        let mut bits = vec![true; n];
        for (coord, test) in tests {
            if coord.axes.iter().zip(&coord.shape).any(|(&a, &len)| shape[a] != len) {
                return Err(Error::InvalidArgument(format!(
                    "'{}' has shape {:?}, which does not match the queried variables' {shape:?}",
                    coord.name, coord.shape
                )));
            }
            let passes = coord.passes(*test)?;
            // The coordinate's stride along each of the mask's axes (0 where it does not span it).
            let own_strides = row_major_strides(&coord.shape);
            let strides: Vec<u64> =
                axes.iter().map(|a| coord.axes.iter().position(|x| x == a).map_or(0, |k| own_strides[k])).collect();
            for_each_flat(&mshape, &whole(&mshape), |idx, m| {
                let at: u64 = idx.iter().zip(&strides).map(|(i, s)| i * s).sum();
                bits[m as usize] &= passes[at as usize];
                true
            });
        }
        let extent = extent(&mshape, &bits);
        Ok(Area { mask: Arc::new(Mask::new(axes, mshape, bits)?), extent })
    }

    /// Reads the coordinates and builds the area of variables on `dims` (of `shape`).
    pub fn build(reader: &StoreReader, dims: &[String], shape: &[u64], tests: &[(String, CoordTest)]) -> Result<Area> {
        let coords: Vec<AuxCoord> =
            tests.iter().map(|(name, _)| AuxCoord::read(reader, dims, name)).collect::<Result<_>>()?;
        let pairs: Vec<(&AuxCoord, CoordTest)> = coords.iter().zip(tests).map(|(c, (_, t))| (c, *t)).collect();
        Area::new(shape, &pairs)
    }

    pub fn mask(&self) -> &Arc<Mask> {
        &self.mask
    }

    /// Shrinks `region` to the mask's bounding box along its axes (keeping each axis's
    /// stride), and tells whether the mask is still needed: false when every element the
    /// region picks is in the area.
    pub fn narrow(&self, region: &mut [DimSelection]) -> Result<bool> {
        for (&axis, hit) in self.mask.axes().iter().zip(&self.extent) {
            let Some(r) = region.get_mut(axis) else {
                return Err(Error::InvalidArgument(format!(
                    "the area spans axis {axis}; the region has {} dimensions",
                    region.len()
                )));
            };
            let Some((lo, hi)) = *hit else {
                r.stop = r.start;
                continue;
            };
            if lo > r.start {
                // The first selected index at or after lo, on the region's stride.
                let step = r.step.max(1);
                r.start += (lo - r.start).div_ceil(step) * step;
            }
            r.stop = r.start.max(r.stop.min(hi));
        }
        Ok(!self.covers(region))
    }

    /// Whether every element `region` picks along the mask's axes is in the area.
    fn covers(&self, region: &[DimSelection]) -> bool {
        let axes = self.mask.axes();
        let sel: Vec<DimSelection> = axes.iter().map(|&a| region[a]).collect();
        let mut all = true;
        for_each_flat(self.mask.shape(), &sel, |_, flat| {
            all &= self.mask.bits()[flat as usize];
            all
        });
        all
    }

    /// The elements of `region` in the area, ascending: their flat indices (row-major over
    /// `shape`, the queried variables'), and their positions among the elements the region
    /// picks (row-major over its counts: where they are in a read of the region).
    pub fn positions_in(&self, shape: &[u64], region: &[DimSelection]) -> (Vec<u64>, Vec<u64>) {
        let axes = self.mask.axes();
        let mshape = self.mask.shape();
        let mstrides = row_major_strides(mshape);
        let (mut flat, mut local) = (Vec::new(), Vec::new());
        for_each_flat(shape, region, |idx, f| {
            let m: u64 = axes.iter().zip(&mstrides).map(|(&a, s)| idx[a] * s).sum();
            if self.mask.bits()[m as usize] {
                flat.push(f);
                local.push(position_in(region, idx.iter().copied()));
            }
            true
        });
        (flat, local)
    }
}

/// Per axis, the first and one past the last index holding a set bit (None: no bit is set).
fn extent(shape: &[u64], bits: &[bool]) -> Vec<Option<(u64, u64)>> {
    let mut ext: Vec<Option<(u64, u64)>> = vec![None; shape.len()];
    for_each_flat(shape, &whole(shape), |idx, flat| {
        if bits[flat as usize] {
            for (e, &i) in ext.iter_mut().zip(idx) {
                *e = Some(e.map_or((i, i + 1), |(lo, hi)| (lo.min(i), hi.max(i + 1))));
            }
        }
        true
    });
    ext
}

/// Every element of a grid of `shape`.
fn whole(shape: &[u64]) -> Vec<DimSelection> {
    shape.iter().map(|&n| DimSelection { start: 0, stop: n, step: 1 }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn coord(name: &str, axes: Vec<usize>, shape: Vec<u64>, values: Vec<f64>) -> AuxCoord {
        AuxCoord {
            name: name.into(),
            axes,
            shape,
            values,
            decoding: Ok(Decoding { sign: None, packing: None }),
            turn: name.starts_with("lon").then_some(360.0),
        }
    }

    fn sel(start: u64, stop: u64, step: u64) -> DimSelection {
        DimSelection { start, stop, step }
    }

    /// Variables of shape (time 3, y 4, x 5); lat(y, x) = 10 * y + x; lon(x, y) (transposed)
    /// = 90 * x - 180 + y.
    fn grid() -> (AuxCoord, AuxCoord) {
        let lat = (0..20).map(|i| (10 * (i / 5) + i % 5) as f64).collect();
        let lon = (0..20).map(|i| (90 * (i / 4) - 180 + i % 4) as f64).collect();
        (coord("lat", vec![1, 2], vec![4, 5], lat), coord("lon", vec![2, 1], vec![5, 4], lon))
    }

    fn brute(inside: impl Fn(u64, u64) -> bool) -> Vec<bool> {
        (0..20u64).map(|i| inside(i / 5, i % 5)).collect()
    }

    #[test]
    fn an_area_is_the_elements_whose_coordinates_pass_every_test() {
        let (lat, lon) = grid();
        let shape = [3u64, 4, 5];
        let r = |lo, hi| CoordTest::Range { lo, hi };
        let a = Area::new(&shape, &[(&lat, r(Some(12.0), None))]).unwrap();
        assert_eq!(a.mask().axes(), &[1, 2]);
        assert_eq!(a.mask().bits(), brute(|y, x| 10 * y + x >= 12));
        // A transposed coordinate, and a longitude range across the dateline.
        let lon_at = |y: u64, x: u64| 90 * x as i64 - 180 + y as i64;
        let a = Area::new(&shape, &[(&lat, r(None, Some(33.0))), (&lon, r(Some(170.0), Some(-90.0)))]).unwrap();
        assert_eq!(a.mask().bits(), brute(|y, x| 10 * y + x <= 33 && (lon_at(y, x) >= 170 || lon_at(y, x) <= -90)));
        // The same arcs asked in the other convention (0..360) select the same elements.
        let a2 = Area::new(&shape, &[(&lat, r(None, Some(33.0))), (&lon, r(Some(170.0), Some(270.0)))]).unwrap();
        assert_eq!(a2.mask().bits(), a.mask().bits());
        let west = |y: u64, x: u64| (-90..=-85).contains(&lon_at(y, x));
        for (lo, hi) in [(-90.0, -85.0), (270.0, 275.0), (-450.0, -445.0)] {
            assert_eq!(Area::new(&shape, &[(&lon, r(Some(lo), Some(hi)))]).unwrap().mask().bits(), brute(west));
        }
        // A whole turn or more holds every finite longitude.
        let all = Area::new(&shape, &[(&lon, r(Some(-180.0), Some(180.0)))]).unwrap();
        assert!(all.mask().bits().iter().all(|&b| b));
        // In radians, the turn is 2π: the same western arc, from -π/2 (270°) to 275°.
        let mut rad = lon.clone();
        rad.values.iter_mut().for_each(|v| *v = v.to_radians());
        rad.turn = Some(std::f64::consts::TAU);
        let (lo, hi) = ((270f64).to_radians(), (275f64).to_radians());
        assert_eq!(Area::new(&shape, &[(&rad, r(Some(lo), Some(hi)))]).unwrap().mask().bits(), brute(west));
        assert!(Area::new(&shape, &[(&lat, r(Some(30.0), Some(10.0)))]).is_err());
        // Stored values compared as SQL does; a mask over one axis.
        let stored = Area::new(&shape, &[(&lat, CoordTest::Stored(CmpOp::Lt, 21.0))]).unwrap();
        assert_eq!(stored.mask().bits(), brute(|y, x| 10 * y + x < 21));
        let x = coord("xc", vec![2], vec![5], vec![0.0, 1.0, f64::NAN, 3.0, 4.0]);
        let a = Area::new(&shape, &[(&x, r(Some(1.0), None))]).unwrap();
        assert_eq!((a.mask().axes(), a.mask().bits()), (&[2usize][..], &[false, true, false, true, true][..]));
        assert!(Area::new(&[3, 4, 6], &[(&x, r(None, None))]).is_err());
    }

    #[test]
    fn packed_coordinates_are_compared_unpacked() {
        let mut lat = coord("lat", vec![0], vec![4], vec![0.0, 100.0, 200.0, 300.0]);
        lat.decoding = Ok(Decoding { sign: None, packing: Some((0.1, -10.0)) }); // physical: -10, 0, 10, 20
        let a = Area::new(&[4], &[(&lat, CoordTest::Range { lo: Some(0.0), hi: Some(10.0) })]).unwrap();
        assert_eq!(a.mask().bits(), &[false, true, true, false]);
        let a = Area::new(&[4], &[(&lat, CoordTest::Stored(CmpOp::Ge, 200.0))]).unwrap();
        assert_eq!(a.mask().bits(), &[false, false, true, true]);
    }

    #[test]
    fn a_region_narrows_to_the_area_and_its_elements_are_listed() {
        let (lat, _) = grid();
        let shape = [3u64, 4, 5];
        // lat in 12..=23: rows 1 and 2, columns 0..5 (row 1 from x = 2, row 2 to x = 3).
        let a = Area::new(&shape, &[(&lat, CoordTest::Range { lo: Some(12.0), hi: Some(23.0) })]).unwrap();
        let mut region = vec![sel(0, 3, 1), sel(0, 4, 1), sel(1, 5, 2)];
        assert!(a.narrow(&mut region).unwrap());
        assert_eq!(region, vec![sel(0, 3, 1), sel(1, 3, 1), sel(1, 5, 2)]);
        let want: Vec<u64> = (0..60u64)
            .filter(|f| {
                let (t, y, x) = (f / 20, f / 5 % 4, f % 5);
                let _ = t;
                (1..3).contains(&y) && x % 2 == 1 && (12..=23).contains(&(10 * y + x))
            })
            .collect();
        let (flat, local) = a.positions_in(&shape, &region);
        assert_eq!(flat, want);
        // Positions in a read of the region (3 x 2 x 2, row-major).
        let at = |f: &u64| (f / 20) * 4 + (f / 5 % 4 - 1) * 2 + (f % 5) / 2;
        assert_eq!(local, want.iter().map(at).collect::<Vec<_>>());
        // The transposed lon(x, y) at each point: its own flat index x * 4 + y.
        let (_, lon) = grid();
        let own: Vec<u64> = want.iter().map(|f| (f % 5) * 4 + f / 5 % 4).collect();
        assert_eq!(lon.indices(&shape, &want).unwrap(), own);
        // A region inside the area needs no mask; one outside it is emptied.
        let mut inside = vec![sel(0, 3, 1), sel(1, 2, 1), sel(2, 5, 1)];
        assert!(!a.narrow(&mut inside).unwrap());
        let none = Area::new(&shape, &[(&lat, CoordTest::Range { lo: Some(99.0), hi: None })]).unwrap();
        let mut region = vec![sel(0, 3, 1), sel(0, 4, 1), sel(0, 5, 1)];
        none.narrow(&mut region).unwrap();
        assert_eq!((region[1].count(), region[2].count()), (0, 0));
        assert!(none.positions_in(&shape, &region).0.is_empty());
        assert!(a.narrow(&mut [sel(0, 3, 1)]).is_err());
    }
}
