//! Selection by coordinate value along one dimension (xarray's `sel`): the positions a label,
//! or a range of labels, picks on the dimension's 1-D coordinate. Python's `sel`, the CLI's
//! `--sel`, the remote client and the server's `sel` parameter all select here.
//!
//! The rules are xarray's (pandas' and `CFTimeIndex`'s):
//! - a range includes both ends and follows the coordinate's own order (on a decreasing
//!   latitude, `60:30` is the band between them); it needs a monotonic coordinate. Where
//!   xarray answers a range written the other way round (`30:60` there) with nothing, this
//!   is an error that says so;
//! - a date may be partial (`2000`, `2000-01`, `2000-01-15T06`) and then covers its whole
//!   period, in the coordinate's CF calendar (`2000-02-30` is a date of the 360-day one);
//! - a single label must match a value exactly unless a [`Method`] is given; a date coarser
//!   than the coordinate's own resolution picks its period (`2000-01` on daily times).
//!
//! One difference from pandas: a decreasing time axis takes partial dates too, as xarray's
//! `CFTimeIndex` does (pandas 3 refuses them).

use crate::cftime::{self, TimeUnits, DAY_MICROS};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::reader::{DimSelection, StoreReader};

/// A range's end as the user wrote it.
fn label_text(label: Option<&Label>) -> String {
    match label {
        Some(Label::Number(x)) => x.to_string(),
        Some(Label::Text(t)) => t.trim().to_string(),
        None => String::new(),
    }
}

/// A coordinate value as a user writes it.
#[derive(Debug, Clone, PartialEq)]
pub enum Label {
    Number(f64),
    /// A number, or on a time axis an ISO 8601 date, possibly partial.
    Text(String),
}

/// How a single label that is not a value of the coordinate is resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// It must be a value (or, on a time axis, a period holding values).
    Exact,
    /// The nearest value; between two at equal distance, the larger.
    Nearest,
    /// The last value before it in the coordinate's order (`ffill`).
    Pad,
    /// The first value after it in the coordinate's order (`bfill`).
    Backfill,
}

impl Method {
    /// The method a name gives (None: [`Method::Exact`]).
    pub fn parse(name: Option<&str>) -> Result<Method> {
        Ok(match name.map(str::to_ascii_lowercase).as_deref() {
            None | Some("exact") => Method::Exact,
            Some("nearest") => Method::Nearest,
            Some("pad" | "ffill") => Method::Pad,
            Some("backfill" | "bfill") => Method::Backfill,
            Some(other) => {
                return Err(Error::InvalidArgument(format!(
                    "unknown selection method '{other}' (nearest, pad/ffill, backfill/bfill)"
                )))
            }
        })
    }
}

/// The positions a selection picks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pick {
    /// One position: the dimension is dropped, as xarray drops it.
    At(u64),
    /// Positions `start..stop` (never `stop < start`).
    Range { start: u64, stop: u64 },
}

impl Pick {
    /// As a region's selection along the dimension.
    pub fn selection(self) -> DimSelection {
        let (start, stop) = match self {
            Pick::At(i) => (i, i + 1),
            Pick::Range { start, stop } => (start, stop),
        };
        DimSelection { start, stop, step: 1 }
    }
}

/// A selection as text: one label, or a range `LO:HI` with either end open.
#[derive(Debug, Clone, PartialEq)]
pub enum Selection {
    One(Label),
    Range(Option<Label>, Option<Label>),
}

/// How finely a date is given, coarsest last (pandas' resolutions).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Resolution {
    Micro,
    Milli,
    Second,
    Minute,
    Hour,
    Day,
    Month,
    Year,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Order {
    Increasing,
    Decreasing,
    Neither,
}

#[derive(Debug, Clone)]
enum Values {
    Numbers(Vec<f64>),
    /// Text values (a station's name), compared as strings.
    Texts(Vec<String>),
    /// Instants (see [`cftime::instant`]); the finest resolution they need.
    Times {
        units: TimeUnits,
        at: Vec<i128>,
        resolution: Resolution,
    },
}

/// A dimension's 1-D coordinate, ready to select by label.
#[derive(Debug, Clone)]
pub struct LabelIndex {
    dim: String,
    values: Values,
    order: Order,
    /// A longitude (a range written the other way round may mean the arc across its ends).
    longitude: bool,
}

/// A label's bounds on the coordinate's scale: the period it covers (one value for numbers).
#[derive(Debug, Clone)]
struct Bounds<T> {
    lower: T,
    upper: T,
    resolution: Resolution,
}

impl LabelIndex {
    /// The coordinate of `dim` from its values and its `units` and `calendar` attributes:
    /// CF time when the units are "UNIT since DATE".
    pub fn new(dim: &str, values: Vec<f64>, units: Option<&str>, calendar: Option<&str>) -> Result<LabelIndex> {
        let values = match units.filter(|u| u.contains(" since ")) {
            None => Values::Numbers(values),
            Some(units) => {
                let units = TimeUnits::parse(units, calendar).map_err(|e| {
                    Error::InvalidArgument(format!("cannot select '{dim}' by date: {e}; select by position (isel)"))
                })?;
                // A value that is no date (NaN, out of range) is in no selection.
                let at: Vec<i128> = values.iter().map(|&v| units.instant(v).unwrap_or(i128::MIN)).collect();
                let resolution = finest(&at);
                Values::Times { units, at, resolution }
            }
        };
        let order = match &values {
            Values::Numbers(v) => order_of(v),
            Values::Texts(v) => order_of(v),
            Values::Times { at, .. } if at.contains(&i128::MIN) => Order::Neither,
            Values::Times { at, .. } => order_of(at),
        };
        Ok(LabelIndex { dim: dim.to_string(), values, order, longitude: false })
    }

    /// A coordinate of text values (station names), compared as strings.
    pub fn texts(dim: &str, values: Vec<String>) -> LabelIndex {
        let order = order_of(&values);
        LabelIndex { dim: dim.to_string(), values: Values::Texts(values), order, longitude: false }
    }

    /// The 1-D coordinate variable of `dim` (the variable named after it), read whole.
    pub fn read(reader: &StoreReader, dim: &str) -> Result<LabelIndex> {
        let var = reader.manifest().coordinate(dim).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "dimension '{dim}' has no 1-D coordinate to select by label: select by position (isel)"
            ))
        })?;
        if var.dtype == DType::String {
            return Ok(LabelIndex::texts(dim, var.inline_strings.clone().unwrap_or_default()));
        }
        let raw = reader.read_whole(dim)?;
        let mut index =
            LabelIndex::new(dim, var.dtype.to_f64s(&raw), var.string_attr("units"), var.string_attr("calendar"))?;
        index.longitude = crate::area::longitude_turn(var).is_some();
        Ok(index)
    }

    pub fn len(&self) -> usize {
        match &self.values {
            Values::Numbers(v) => v.len(),
            Values::Texts(v) => v.len(),
            Values::Times { at, .. } => at.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the coordinate is CF time (labels are dates).
    pub fn is_time(&self) -> bool {
        matches!(self.values, Values::Times { .. })
    }

    /// The positions `start..stop` from label `start` to label `stop`, both included, in
    /// the coordinate's order; either end open.
    pub fn range(&self, start: Option<&Label>, stop: Option<&Label>) -> Result<(u64, u64)> {
        if self.order == Order::Neither {
            return Err(self.error("is not monotonic: select a range by position (isel)"));
        }
        let (a, b) = self.search_labels(start, stop)?;
        if b <= a && start.is_some() && stop.is_some() {
            // Empty only because its ends are the other way round (ERA5's latitude decreases:
            // `50:55` selects nothing there, `55:50` the band): say so rather than answer
            // nothing, where xarray answers nothing.
            let (c, d) = self.search_labels(stop, start)?;
            if d > c {
                let (first, last) = (self.shown(0), self.shown(self.len() - 1));
                let (lo, hi) = (label_text(start), label_text(stop));
                let fix = if self.longitude {
                    format!("the arc across its ends is two selections, {lo}: and :{hi} (or {hi}:{lo}, the other arc)")
                } else {
                    format!("write {hi}:{lo}")
                };
                return Err(self.error(&format!(
                    "runs from {first} to {last}: a range follows its order, so {lo}:{hi} selects nothing; {fix}"
                )));
            }
        }
        Ok((a as u64, b.max(a) as u64))
    }

    fn search_labels(&self, start: Option<&Label>, stop: Option<&Label>) -> Result<(usize, usize)> {
        Ok(match &self.values {
            Values::Numbers(v) => {
                let (lo, hi) = (self.bounds_num(start)?, self.bounds_num(stop)?);
                self.search(v, lo.as_ref(), hi.as_ref())
            }
            Values::Texts(v) => {
                let (lo, hi) = (self.bounds_text(start)?, self.bounds_text(stop)?);
                self.search(v, lo.as_ref(), hi.as_ref())
            }
            Values::Times { at, .. } => {
                let (lo, hi) = (self.bounds_time(start)?, self.bounds_time(stop)?);
                self.search(at, lo.as_ref(), hi.as_ref())
            }
        })
    }

    /// The position(s) one label picks.
    pub fn locate(&self, label: &Label, method: Method) -> Result<Pick> {
        match &self.values {
            Values::Numbers(v) => {
                let b = self.bounds_num(Some(label))?.expect("a label");
                self.locate_in(v, &b, method, label, Some(|a: &f64, b: &f64| (a - b).abs()))
            }
            Values::Texts(v) => {
                let b = self.bounds_text(Some(label))?.expect("a label");
                self.locate_in(v, &b, method, label, None::<fn(&String, &String) -> f64>)
            }
            Values::Times { at, resolution, .. } => {
                let b = self.bounds_time(Some(label))?.expect("a label");
                if method == Method::Exact && b.resolution > *resolution {
                    // Coarser than the values: the period's positions (pandas' partial dates).
                    let (start, stop) = match self.order {
                        Order::Neither => bounding(at.iter().map(|&t| t >= b.lower && t <= b.upper)),
                        _ => self.search(at, Some(&b), Some(&b)),
                    };
                    if stop <= start {
                        return Err(self.missing(label));
                    }
                    return Ok(Pick::Range { start: start as u64, stop: stop as u64 });
                }
                self.locate_in(at, &b, method, label, Some(|a: &i128, b: &i128| (a - b).abs() as f64))
            }
        }
    }

    /// What a selection in text picks: see [`LabelIndex::parse`].
    pub fn select_text(&self, text: &str, method: Method) -> Result<Pick> {
        match self.parse(text)? {
            Selection::One(label) => self.locate(&label, method),
            Selection::Range(lo, hi) => {
                let (start, stop) = self.range(lo.as_ref(), hi.as_ref())?;
                Ok(Pick::Range { start, stop })
            }
        }
    }

    /// A selection as a user types it: `LABEL` or `LO:HI`, either end empty. On a time axis
    /// the colons of a time of day are not separators (`2019-03-01T06:00:2019-03-02`).
    pub fn parse(&self, text: &str) -> Result<Selection> {
        let text = text.trim();
        let is_label = |t: &str| match &self.values {
            Values::Times { .. } => parse_date(t).is_some(),
            Values::Numbers(_) => t.parse::<f64>().is_ok(),
            // A value, or any text that is not split at a colon.
            Values::Texts(v) => v.iter().any(|x| x == t) || !t.contains(':'),
        };
        let label = |t: &str| (!t.trim().is_empty()).then(|| Label::Text(t.trim().to_string()));
        if is_label(text) {
            return Ok(Selection::One(Label::Text(text.to_string())));
        }
        let splits: Vec<usize> = text.match_indices(':').map(|(i, _)| i).collect();
        let fits = |t: &str| t.trim().is_empty() || is_label(t.trim());
        let found: Vec<usize> = splits.into_iter().filter(|&i| fits(&text[..i]) && fits(&text[i + 1..])).collect();
        match found[..] {
            [i] => Ok(Selection::Range(label(&text[..i]), label(&text[i + 1..]))),
            _ => Err(Error::InvalidArgument(match self.values {
                Values::Times { .. } => format!(
                    "'{text}' on '{}' is not a date or a range of dates \
                     (YYYY[-MM[-DD[THH[:MM[:SS[.ffffff]]]]]], LO:HI)",
                    self.dim
                ),
                Values::Numbers(_) => {
                    format!("'{text}' on '{}' is not a number or a range of numbers (LO:HI)", self.dim)
                }
                Values::Texts(_) => format!("'{text}' on '{}' is not a value or a range LO:HI", self.dim),
            })),
        }
    }

    /// Value `i` as a person reads it (a time as its date).
    fn shown(&self, i: usize) -> String {
        match &self.values {
            Values::Numbers(v) => v[i].to_string(),
            Values::Texts(v) => format!("'{}'", v[i]),
            Values::Times { units, at, .. } => {
                let day = at[i].div_euclid(i128::from(DAY_MICROS)) as i64;
                let (y, m, d) = cftime::date_of(units.calendar, day);
                format!("{y:04}-{m:02}-{d:02}")
            }
        }
    }

    fn error(&self, why: &str) -> Error {
        Error::InvalidArgument(format!("coordinate '{}' {why}", self.dim))
    }

    fn missing(&self, label: &Label) -> Error {
        let shown = match label {
            Label::Number(x) => x.to_string(),
            Label::Text(t) => format!("'{t}'"),
        };
        Error::InvalidArgument(format!(
            "{shown} is not a value of coordinate '{}' (select a range, or a method such as nearest)",
            self.dim
        ))
    }

    fn bounds_num(&self, label: Option<&Label>) -> Result<Option<Bounds<f64>>> {
        let x = match label {
            None => return Ok(None),
            Some(Label::Number(x)) => *x,
            Some(Label::Text(t)) => {
                t.trim().parse::<f64>().map_err(|_| self.error(&format!("holds numbers: '{t}' is not one")))?
            }
        };
        if x.is_nan() {
            return Err(self.error("cannot be selected at NaN"));
        }
        Ok(Some(Bounds { lower: x, upper: x, resolution: Resolution::Micro }))
    }

    fn bounds_text(&self, label: Option<&Label>) -> Result<Option<Bounds<String>>> {
        match label {
            None => Ok(None),
            Some(Label::Text(t)) => {
                Ok(Some(Bounds { lower: t.clone(), upper: t.clone(), resolution: Resolution::Micro }))
            }
            Some(Label::Number(x)) => Err(self.error(&format!("holds text: select it with a string, not {x}"))),
        }
    }

    fn bounds_time(&self, label: Option<&Label>) -> Result<Option<Bounds<i128>>> {
        let Values::Times { units, .. } = &self.values else { unreachable!("a time axis") };
        let text = match label {
            None => return Ok(None),
            Some(Label::Text(t)) => t,
            Some(Label::Number(x)) => {
                return Err(self.error(&format!("holds dates: select it with a date string, not {x}")))
            }
        };
        let date = parse_date(text).ok_or_else(|| {
            self.error(&format!("holds dates: '{text}' is not one (YYYY[-MM[-DD[THH[:MM[:SS[.ffffff]]]]]])"))
        })?;
        date.bounds(units.calendar).map(Some)
    }

    /// Positions from the first at or after `lo` to the last at or before `hi`, in the
    /// coordinate's order (monotonic).
    fn search<T: PartialOrd>(&self, v: &[T], lo: Option<&Bounds<T>>, hi: Option<&Bounds<T>>) -> (usize, usize) {
        if self.order == Order::Decreasing {
            let a = lo.map_or(0, |b| v.partition_point(|x| *x > b.upper));
            let z = hi.map_or(v.len(), |b| v.partition_point(|x| *x >= b.lower));
            (a, z)
        } else {
            let a = lo.map_or(0, |b| v.partition_point(|x| *x < b.lower));
            let z = hi.map_or(v.len(), |b| v.partition_point(|x| *x <= b.upper));
            (a, z)
        }
    }

    /// `distance`: None where values have none (text): no nearest.
    fn locate_in<T: PartialOrd>(
        &self,
        v: &[T],
        b: &Bounds<T>,
        method: Method,
        label: &Label,
        distance: Option<impl Fn(&T, &T) -> f64>,
    ) -> Result<Pick> {
        let x = &b.lower;
        let (start, stop) = bounding(v.iter().map(|y| y == x));
        if stop > start {
            return Ok(if stop - start == 1 {
                Pick::At(start as u64)
            } else {
                Pick::Range { start: start as u64, stop: stop as u64 }
            });
        }
        if method == Method::Exact {
            return Err(self.missing(label));
        }
        if self.order == Order::Neither {
            return Err(self.error("is not monotonic: a method (nearest, pad, backfill) needs it sorted"));
        }
        // Positions before (pad) and after (backfill) the label in the coordinate's order.
        let after = match self.order {
            Order::Decreasing => v.partition_point(|y| y > x),
            _ => v.partition_point(|y| y < x),
        };
        let pad = after.checked_sub(1);
        let backfill = (after < v.len()).then_some(after);
        let pick = match method {
            Method::Pad => pad,
            Method::Backfill => backfill,
            _ => match (pad, backfill) {
                (Some(p), Some(q)) => {
                    let Some(distance) = distance else {
                        return Err(self.error("holds text: nearest needs numbers or dates (pad, backfill work)"));
                    };
                    let (dp, dq) = (distance(&v[p], x), distance(&v[q], x));
                    let larger = if v[p] > v[q] { p } else { q };
                    Some(if dp < dq {
                        p
                    } else if dq < dp {
                        q
                    } else {
                        larger
                    })
                }
                (p, q) => p.or(q),
            },
        };
        pick.map(|i| Pick::At(i as u64)).ok_or_else(|| self.missing(label))
    }
}

/// The bounding range of the true flags (empty when none).
fn bounding(hits: impl Iterator<Item = bool>) -> (usize, usize) {
    let (mut first, mut last) = (usize::MAX, 0);
    for (i, h) in hits.enumerate() {
        if h {
            first = first.min(i);
            last = i + 1;
        }
    }
    if first == usize::MAX {
        (0, 0)
    } else {
        (first, last)
    }
}

fn order_of<T: PartialOrd>(v: &[T]) -> Order {
    // NaN compares false both ways (with itself too): neither order, even alone.
    #[allow(clippy::eq_op)]
    if v.iter().any(|x| x != x) {
        return Order::Neither;
    }
    if v.windows(2).all(|w| w[0] <= w[1]) {
        Order::Increasing
    } else if v.windows(2).all(|w| w[0] >= w[1]) {
        Order::Decreasing
    } else {
        Order::Neither
    }
}

/// The coarsest resolution that represents every instant (pandas' index resolution).
fn finest(at: &[i128]) -> Resolution {
    let steps = [
        (DAY_MICROS, Resolution::Day),
        (3_600_000_000, Resolution::Hour),
        (60_000_000, Resolution::Minute),
        (1_000_000, Resolution::Second),
        (1_000, Resolution::Milli),
    ];
    let valid = || at.iter().filter(|&&t| t != i128::MIN);
    for (unit, resolution) in steps {
        if valid().all(|&t| t.rem_euclid(i128::from(unit)) == 0) {
            return resolution;
        }
    }
    Resolution::Micro
}

/// A date as written: the fields given, and how many.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Date {
    year: i64,
    month: u32,
    day: u32,
    /// Microseconds into the day.
    micros: i64,
    resolution: Resolution,
}

impl Date {
    /// The period the date covers, as instants in `calendar`.
    fn bounds(&self, calendar: cftime::Calendar) -> Result<Bounds<i128>> {
        let day = cftime::day_number(calendar, self.year, self.month, self.day)?;
        let lower = cftime::instant(day, self.micros);
        let next = match self.resolution {
            Resolution::Year => cftime::instant(cftime::day_number(calendar, self.year + 1, 1, 1)?, 0),
            Resolution::Month => {
                let (y, m) = if self.month == 12 { (self.year + 1, 1) } else { (self.year, self.month + 1) };
                cftime::instant(cftime::day_number(calendar, y, m, 1)?, 0)
            }
            Resolution::Day => cftime::instant(day + 1, 0),
            r => {
                let step: i64 = match r {
                    Resolution::Hour => 3_600_000_000,
                    Resolution::Minute => 60_000_000,
                    Resolution::Second => 1_000_000,
                    Resolution::Milli => 1_000,
                    _ => 1,
                };
                lower + i128::from(step)
            }
        };
        Ok(Bounds { lower, upper: next - 1, resolution: self.resolution })
    }
}

/// An ISO 8601 date in extended form, possibly partial: `[±]YYYY[-MM[-DD[(T| )HH[:MM[:SS[.f]]]]]]`
/// with an optional `Z`; the year has at least four digits. Fields are checked for range
/// (whether the day exists is the calendar's to say).
fn parse_date(text: &str) -> Option<Date> {
    let text = text.trim();
    let text = text.strip_suffix('Z').unwrap_or(text);
    let (sign, rest) = match text.as_bytes().first()? {
        b'-' => (-1, &text[1..]),
        b'+' => (1, &text[1..]),
        _ => (1, text),
    };
    let (date, time) = match rest.find(['T', ' ']) {
        Some(i) => (&rest[..i], Some(&rest[i + 1..])),
        None => (rest, None),
    };
    let digits = |s: &str, n: std::ops::RangeInclusive<usize>| {
        (n.contains(&s.len()) && s.bytes().all(|c| c.is_ascii_digit())).then(|| s.parse::<i64>().ok()).flatten()
    };
    let mut parts = date.split('-');
    let year = digits(parts.next()?, 4..=8)? * sign;
    let mut out = Date { year, month: 1, day: 1, micros: 0, resolution: Resolution::Year };
    if let Some(m) = parts.next() {
        out.month = u32::try_from(digits(m, 2..=2)?).ok().filter(|m| (1..=12).contains(m))?;
        out.resolution = Resolution::Month;
    }
    if let Some(d) = parts.next() {
        out.day = u32::try_from(digits(d, 2..=2)?).ok().filter(|d| (1..=31).contains(d))?;
        out.resolution = Resolution::Day;
    }
    if parts.next().is_some() || (time.is_some() && out.resolution != Resolution::Day) {
        return None;
    }
    let Some(time) = time else { return Some(out) };
    let mut hms = time.split(':');
    let hour = digits(hms.next()?, 2..=2).filter(|h| *h < 24)?;
    out.micros = hour * 3_600_000_000;
    out.resolution = Resolution::Hour;
    if let Some(m) = hms.next() {
        out.micros += digits(m, 2..=2).filter(|m| *m < 60)? * 60_000_000;
        out.resolution = Resolution::Minute;
    }
    if let Some(s) = hms.next() {
        let (whole, fraction) = s.split_once('.').map_or((s, None), |(w, f)| (w, Some(f)));
        out.micros += digits(whole, 2..=2).filter(|s| *s < 60)? * 1_000_000;
        out.resolution = Resolution::Second;
        if let Some(f) = fraction {
            digits(f, 1..=9)?;
            // Beyond microseconds the digits are dropped (instants are microseconds).
            let micros = format!("{:0<6}", &f[..f.len().min(6)]);
            out.micros += micros.parse::<i64>().ok()?;
            out.resolution = if f.len() <= 3 { Resolution::Milli } else { Resolution::Micro };
        }
    }
    if hms.next().is_some() {
        return None;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn numbers(v: &[f64]) -> LabelIndex {
        LabelIndex::new("x", v.to_vec(), None, None).unwrap()
    }

    fn days(v: &[f64], calendar: &str) -> LabelIndex {
        LabelIndex::new("time", v.to_vec(), Some("days since 2000-01-01"), Some(calendar)).unwrap()
    }

    fn text(t: &str) -> Label {
        Label::Text(t.into())
    }

    #[test]
    fn ranges_include_both_ends_in_the_coordinates_order() {
        let up = numbers(&[0.0, 10.0, 20.0, 30.0]);
        assert_eq!(up.range(Some(&Label::Number(10.0)), Some(&Label::Number(20.0))).unwrap(), (1, 3));
        assert_eq!(up.range(Some(&Label::Number(5.0)), None).unwrap(), (1, 4));
        let down = numbers(&[90.0, 60.0, 30.0, 0.0]);
        assert_eq!(down.range(Some(&Label::Number(60.0)), Some(&Label::Number(10.0))).unwrap(), (1, 3));
        // Ends the other way round select nothing in xarray; here they are an error that
        // says how to write the range.
        let err = down.range(Some(&Label::Number(10.0)), Some(&Label::Number(60.0))).unwrap_err();
        assert!(err.to_string().contains("runs from 90 to 0") && err.to_string().contains("write 60:10"), "{err}");
        let err = up.range(Some(&text("25")), Some(&text("5"))).unwrap_err();
        assert!(err.to_string().contains("write 5:25"), "{err}");
        // A range beside the values is empty, whichever way it is written.
        assert_eq!(up.range(Some(&Label::Number(40.0)), Some(&Label::Number(50.0))).unwrap(), (4, 4));
        assert_eq!(up.range(Some(&Label::Number(50.0)), Some(&Label::Number(40.0))).unwrap(), (4, 4));
        assert_eq!(down.range(Some(&Label::Number(100.0)), Some(&Label::Number(95.0))).unwrap(), (0, 0));
        assert_eq!(down.range(Some(&Label::Number(95.0)), Some(&Label::Number(100.0))).unwrap(), (0, 0));
        let t = days(&[30.0, 20.0, 10.0], "standard");
        let err = t.range(Some(&text("2000-01-05")), Some(&text("2000-01-25"))).unwrap_err();
        assert!(err.to_string().contains("runs from 2000-01-31 to 2000-01-11"), "{err}");
        let err = numbers(&[0.0, 2.0, 1.0]).range(None, Some(&Label::Number(1.0))).unwrap_err();
        assert!(err.to_string().contains("not monotonic"), "{err}");
    }

    #[test]
    fn partial_dates_cover_their_period_in_the_calendar() {
        // Daily from 2000-01-01 for 100 days in the 360-day calendar: February has 30 days.
        let t = days(&(0..100).map(f64::from).collect::<Vec<_>>(), "360_day");
        assert_eq!(t.range(Some(&text("2000-02")), Some(&text("2000-02"))).unwrap(), (30, 60));
        assert_eq!(t.locate(&text("2000-02-30"), Method::Exact).unwrap(), Pick::At(59));
        assert_eq!(t.locate(&text("2000-03"), Method::Exact).unwrap(), Pick::Range { start: 60, stop: 90 });
        let g = days(&(0..100).map(f64::from).collect::<Vec<_>>(), "standard");
        assert_eq!(g.range(Some(&text("2000-02")), Some(&text("2000-02"))).unwrap(), (31, 60));
        assert!(g.locate(&text("2000-02-30"), Method::Exact).is_err());
        // Reversed, the same periods.
        let rev = days(&(0..100).rev().map(f64::from).collect::<Vec<_>>(), "standard");
        assert_eq!(rev.range(Some(&text("2000-02")), Some(&text("2000-02"))).unwrap(), (40, 69));
    }

    #[test]
    fn a_date_as_fine_as_the_values_must_match_one() {
        let t = LabelIndex::new("time", vec![0.0, 6.0, 12.0, 18.0], Some("hours since 2000-01-01"), None).unwrap();
        assert_eq!(t.locate(&text("2000-01-01T06"), Method::Exact).unwrap(), Pick::At(1));
        assert_eq!(t.locate(&text("2000-01-01 12:00"), Method::Exact).unwrap(), Pick::At(2));
        assert_eq!(t.locate(&text("2000-01-01"), Method::Exact).unwrap(), Pick::Range { start: 0, stop: 4 });
        assert!(t.locate(&text("2000-01-01T07"), Method::Exact).is_err());
        assert_eq!(t.locate(&text("2000-01-01T07"), Method::Nearest).unwrap(), Pick::At(1));
        assert_eq!(t.locate(&text("2000-01-01T07"), Method::Backfill).unwrap(), Pick::At(2));
        assert!(t.locate(&Label::Number(6.0), Method::Exact).is_err());
    }

    #[test]
    fn methods_follow_the_coordinates_order_and_ties_take_the_larger() {
        let up = numbers(&[0.0, 1.0, 2.0]);
        assert_eq!(up.locate(&Label::Number(1.5), Method::Nearest).unwrap(), Pick::At(2));
        assert_eq!(up.locate(&Label::Number(5.0), Method::Pad).unwrap(), Pick::At(2));
        assert!(up.locate(&Label::Number(5.0), Method::Backfill).is_err());
        let down = numbers(&[2.0, 1.0, 0.0]);
        assert_eq!(down.locate(&Label::Number(1.5), Method::Pad).unwrap(), Pick::At(0));
        assert_eq!(down.locate(&Label::Number(1.5), Method::Backfill).unwrap(), Pick::At(1));
        assert_eq!(down.locate(&Label::Number(1.5), Method::Nearest).unwrap(), Pick::At(0));
    }

    #[test]
    fn text_splits_at_the_colon_between_labels() {
        let t = LabelIndex::new("time", vec![0.0], Some("hours since 2000-01-01"), None).unwrap();
        let one = |s: &str| Selection::One(text(s));
        assert_eq!(t.parse("2019-03-01T06:00").unwrap(), one("2019-03-01T06:00"));
        assert_eq!(
            t.parse("2019-03-01T06:00:2019-03-02").unwrap(),
            Selection::Range(Some(text("2019-03-01T06:00")), Some(text("2019-03-02")))
        );
        assert_eq!(t.parse(":2019").unwrap(), Selection::Range(None, Some(text("2019"))));
        assert!(t.parse("yesterday").is_err());
        assert!(t.parse("2019-13").is_err());
        let x = numbers(&[0.0]);
        assert_eq!(x.parse("-10:10").unwrap(), Selection::Range(Some(text("-10")), Some(text("10"))));
        assert_eq!(x.parse("5").unwrap(), one("5"));
        assert!(x.parse("a:b").is_err());
    }

    #[test]
    fn text_coordinates_select_by_their_values() {
        let names: Vec<String> = ["Bergen", "Oslo", "Tromso"].iter().map(|s| s.to_string()).collect();
        let t = LabelIndex::texts("station", names);
        assert_eq!(t.locate(&text("Oslo"), Method::Exact).unwrap(), Pick::At(1));
        assert_eq!(t.select_text("Bergen:Oslo", Method::Exact).unwrap(), Pick::Range { start: 0, stop: 2 });
        assert_eq!(t.locate(&text("Narvik"), Method::Pad).unwrap(), Pick::At(0));
        assert!(t.locate(&text("Narvik"), Method::Exact).unwrap_err().to_string().contains("not a value"));
        assert!(t.locate(&text("Narvik"), Method::Nearest).unwrap_err().to_string().contains("holds text"));
        assert!(t.locate(&Label::Number(1.0), Method::Exact).is_err());
        assert!(t.select_text("a:b:c", Method::Exact).unwrap_err().to_string().contains("not a value or a range"));
    }

    #[test]
    fn dates_parse_to_their_resolution() {
        let d = parse_date("2000-01-15T06:30:15.25").unwrap();
        assert_eq!((d.year, d.month, d.day, d.resolution), (2000, 1, 15, Resolution::Milli));
        assert_eq!(d.micros, ((6 * 60 + 30) * 60 + 15) * 1_000_000 + 250_000);
        assert_eq!(parse_date("-0100-03").unwrap().year, -100);
        for bad in ["", "99", "2000-1", "2000-01-01T", "2000T06", "2000-01-01T24", "2000-01-01T06:00:00:00", "x"] {
            assert!(parse_date(bad).is_none(), "{bad}");
        }
    }
}
