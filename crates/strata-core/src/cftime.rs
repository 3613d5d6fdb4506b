//! CF time coordinates ("days since 1800-01-01 00:00:00") decoded to dates, in every CF
//! calendar: `standard`/`gregorian` (Julian before 1582-10-15, Gregorian from then on),
//! `proleptic_gregorian`, `julian`, `noleap`/`365_day`, `all_leap`/`366_day` and `360_day`.
//! Units are fixed lengths from microseconds to days, and months of 30 days in the 360-day
//! calendar (months and years are refused elsewhere: their length varies). Python's coordinate selection and SQL's timestamp columns both decode here.

use crate::error::{Error, Result};

/// A CF calendar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Calendar {
    /// Julian before 1582-10-15, Gregorian from then on (CF's default).
    Standard,
    ProlepticGregorian,
    Julian,
    NoLeap,
    AllLeap,
    Day360,
}

impl Calendar {
    /// The calendar a `calendar` attribute names (None: the CF default, `standard`).
    pub fn parse(name: Option<&str>) -> Result<Calendar> {
        let name = name.unwrap_or("standard").trim().to_ascii_lowercase();
        Ok(match name.as_str() {
            "standard" | "gregorian" | "" => Calendar::Standard,
            "proleptic_gregorian" => Calendar::ProlepticGregorian,
            "julian" => Calendar::Julian,
            "noleap" | "365_day" => Calendar::NoLeap,
            "all_leap" | "366_day" => Calendar::AllLeap,
            "360_day" => Calendar::Day360,
            other => return Err(Error::InvalidArgument(format!("unknown CF calendar '{other}'"))),
        })
    }

    /// Whether its dates are those of a timestamp (proleptic Gregorian), for the dates
    /// `days` (counted as [`day_number`]) holds.
    pub fn is_gregorian_at(self, day: i64) -> bool {
        match self {
            Calendar::ProlepticGregorian => true,
            Calendar::Standard => day >= GREGORIAN_START,
            _ => false,
        }
    }

    fn is_leap(self, y: i64) -> bool {
        match self {
            Calendar::ProlepticGregorian => y.rem_euclid(4) == 0 && (y.rem_euclid(100) != 0 || y.rem_euclid(400) == 0),
            Calendar::Julian => y.rem_euclid(4) == 0,
            Calendar::NoLeap | Calendar::Day360 => false,
            Calendar::AllLeap => true,
            // Not used: the standard calendar is one of the two above by date.
            Calendar::Standard => false,
        }
    }
}

/// A date and time of day in some calendar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CfDate {
    pub year: i64,
    pub month: u32,
    pub day: u32,
    /// Microseconds into the day.
    pub micros: i64,
}

pub const DAY_MICROS: i64 = 86_400_000_000;

/// Years beyond this (either side of year 0) are refused: they mean nothing as dates, and
/// the day counts stay far from i64's limits (found by the cf_time fuzz target: a reference
/// year of 18 digits overflowed).
pub const MAX_YEAR: i64 = 10_000_000;

/// Julian Day Number of 1582-10-15, the first Gregorian day of the standard calendar.
const GREGORIAN_START: i64 = 2_299_161;

/// Days before each month in a year of 365 days.
const CUMULATIVE: [i64; 12] = [0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334];

/// The day of `date` as a count in its calendar: the Julian Day Number for the Gregorian and
/// Julian ones (so the standard calendar switches between them by date), days since year 0
/// for the others. Dates that do not exist in the calendar are refused.
pub fn day_number(cal: Calendar, y: i64, m: u32, d: u32) -> Result<i64> {
    let bad = || Error::InvalidArgument(format!("{y:04}-{m:02}-{d:02} is not a date of the {cal:?} calendar"));
    if y.abs() > MAX_YEAR || !(1..=12).contains(&m) || d < 1 || d > days_in_month(cal, y, m) {
        return Err(bad());
    }
    let (m, d) = (i64::from(m), i64::from(d));
    Ok(match cal {
        Calendar::ProlepticGregorian => gregorian_jdn(y, m, d),
        Calendar::Julian => julian_jdn(y, m, d),
        Calendar::Standard => {
            let g = gregorian_jdn(y, m, d);
            if g >= GREGORIAN_START {
                g
            } else {
                let j = julian_jdn(y, m, d);
                // 1582-10-05 ... 1582-10-14 were skipped.
                if j >= GREGORIAN_START {
                    return Err(bad());
                }
                j
            }
        }
        Calendar::NoLeap => y * 365 + CUMULATIVE[(m - 1) as usize] + d - 1,
        Calendar::AllLeap => y * 366 + CUMULATIVE[(m - 1) as usize] + i64::from(m > 2) + d - 1,
        Calendar::Day360 => y * 360 + (m - 1) * 30 + d - 1,
    })
}

/// The date of day number `n` (see [`day_number`]).
pub fn date_of(cal: Calendar, n: i64) -> (i64, u32, u32) {
    match cal {
        Calendar::ProlepticGregorian => gregorian_from_jdn(n),
        Calendar::Julian => julian_from_jdn(n),
        Calendar::Standard if n >= GREGORIAN_START => gregorian_from_jdn(n),
        Calendar::Standard => julian_from_jdn(n),
        Calendar::NoLeap | Calendar::AllLeap => {
            let len = if cal == Calendar::NoLeap { 365 } else { 366 };
            let (y, mut doy) = (n.div_euclid(len), n.rem_euclid(len));
            let mut m = 1;
            while m < 12 && doy >= days_in_month(cal, y, m) as i64 {
                doy -= days_in_month(cal, y, m) as i64;
                m += 1;
            }
            (y, m, doy as u32 + 1)
        }
        Calendar::Day360 => {
            let (y, doy) = (n.div_euclid(360), n.rem_euclid(360));
            (y, (doy / 30) as u32 + 1, (doy % 30) as u32 + 1)
        }
    }
}

fn days_in_month(cal: Calendar, y: i64, m: u32) -> u32 {
    match m {
        _ if cal == Calendar::Day360 => 30,
        2 => {
            let leap = match cal {
                // A day of February in the standard calendar: Julian before 1582.
                Calendar::Standard if y < 1582 => Calendar::Julian.is_leap(y),
                Calendar::Standard => Calendar::ProlepticGregorian.is_leap(y),
                c => c.is_leap(y),
            };
            28 + u32::from(leap)
        }
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

fn gregorian_jdn(y: i64, m: i64, d: i64) -> i64 {
    let a = (14 - m) / 12;
    let (y, m) = (y + 4800 - a, m + 12 * a - 3);
    d + (153 * m + 2) / 5 + 365 * y + y.div_euclid(4) - y.div_euclid(100) + y.div_euclid(400) - 32045
}

fn julian_jdn(y: i64, m: i64, d: i64) -> i64 {
    let a = (14 - m) / 12;
    let (y, m) = (y + 4800 - a, m + 12 * a - 3);
    d + (153 * m + 2) / 5 + 365 * y + y.div_euclid(4) - 32083
}

fn gregorian_from_jdn(n: i64) -> (i64, u32, u32) {
    let a = n + 32044;
    let b = (4 * a + 3).div_euclid(146_097);
    // Floor divisions throughout: before 4800 BC the counts are negative.
    let c = a - (146_097 * b).div_euclid(4);
    split_march_year(100 * b, c)
}

fn julian_from_jdn(n: i64) -> (i64, u32, u32) {
    split_march_year(0, n + 32082)
}

/// The date `c` days into the four-year cycles of a March-based year count, plus `base`
/// years (the shared tail of the Gregorian and Julian conversions).
fn split_march_year(base: i64, c: i64) -> (i64, u32, u32) {
    let d = (4 * c + 3).div_euclid(1461);
    let e = c - (1461 * d).div_euclid(4);
    let m = (5 * e + 2) / 153;
    let day = e - (153 * m + 2) / 5 + 1;
    let month = m + 3 - 12 * (m / 10);
    let year = base + d - 4800 + m / 10;
    (year, month as u32, day as u32)
}

/// Decoded CF time units: microseconds per unit, and the reference date's day number and
/// time of day.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TimeUnits {
    pub calendar: Calendar,
    pub unit_micros: f64,
    reference_day: i64,
    reference_micros: i64,
}

impl TimeUnits {
    /// `units` (`UNIT since DATE[ TIME][ ZONE]`) in `calendar` (the `calendar` attribute).
    pub fn parse(units: &str, calendar: Option<&str>) -> Result<TimeUnits> {
        let calendar = Calendar::parse(calendar)?;
        let bad = |why: &str| Error::InvalidArgument(format!("CF time units '{units}': {why}"));
        let (unit, reference) = units.split_once(" since ").ok_or_else(|| bad("no ' since '"))?;
        let unit = unit.trim();
        // A month of the 360-day calendar is 30 days (cftime takes months there only).
        let month = calendar == Calendar::Day360 && matches!(unit.to_ascii_lowercase().as_str(), "months" | "month");
        let unit_micros = match unit_micros(unit) {
            Some(u) => u,
            None if month => 30.0 * 86_400e6,
            None => return Err(bad("the unit is not a fixed length")),
        };
        let (y, m, d, micros) = parse_reference(reference).ok_or_else(|| bad("the reference date does not parse"))?;
        let reference_day = day_number(calendar, y, m, d)?;
        Ok(TimeUnits { calendar, unit_micros, reference_day, reference_micros: micros })
    }

    /// The date `value` units after the reference, to the microsecond (None when it is
    /// not finite or out of range).
    pub fn date(&self, value: f64) -> Option<CfDate> {
        let (day, micros) = self.day_and_micros(value)?;
        let (year, month, d) = date_of(self.calendar, day);
        // A date is within the years `day_number` takes (a reference at the limit and a
        // negative value would step past it).
        (year.abs() <= MAX_YEAR).then_some(CfDate { year, month, day: d, micros })
    }

    /// `value` as microseconds since day number 0 of the calendar (see [`day_number`]): an
    /// instant that orders and subtracts within the calendar (None as [`date`](Self::date)).
    pub fn instant(&self, value: f64) -> Option<i128> {
        let (day, micros) = self.day_and_micros(value)?;
        Some(instant(day, micros))
    }

    /// The day number (see [`day_number`]) and microseconds into the day of `value`.
    fn day_and_micros(&self, value: f64) -> Option<(i64, i64)> {
        let offset = value * self.unit_micros;
        // Beyond ±9e18 µs (285,000 years) the offset does not fit an i64 (`as` would
        // saturate to a wrong date).
        if !offset.is_finite() || offset.abs() > 9e18 {
            return None;
        }
        let total = self.reference_micros.checked_add(offset.round() as i64)?;
        let day = self.reference_day.checked_add(total.div_euclid(DAY_MICROS))?;
        Some((day, total.rem_euclid(DAY_MICROS)))
    }

    /// `value` as microseconds since 1970-01-01T00:00:00 (proleptic Gregorian), when the
    /// calendar's date there is a timestamp's (see [`Calendar::is_gregorian_at`]).
    pub fn unix_micros(&self, value: f64) -> Option<i64> {
        let (day, micros) = self.day_and_micros(value)?;
        if !self.calendar.is_gregorian_at(day) {
            return None;
        }
        (day - UNIX_EPOCH_JDN).checked_mul(DAY_MICROS)?.checked_add(micros)
    }

    /// Every value as microseconds since 1970 (see [`unix_micros`](Self::unix_micros)), or
    /// None when one of them is not a timestamp's date.
    pub fn all_unix_micros(&self, values: &[f64]) -> Option<Vec<i64>> {
        values.iter().map(|&v| self.unix_micros(v)).collect()
    }

    /// `value` as the timestamp (microseconds since 1970, proleptic Gregorian) that bears
    /// its date's label: [`unix_micros`](Self::unix_micros) where the calendar's date is a
    /// timestamp's; elsewhere the same year, month, day and time of day (1920-03-01 of
    /// `noleap` is the timestamp 1920-03-01, as xarray's `to_datetimeindex` makes it). None
    /// when the Gregorian calendar has no such day (30 February of `360_day`).
    pub fn label_micros(&self, value: f64) -> Option<i64> {
        let (day, micros) = self.day_and_micros(value)?;
        let jdn = if self.calendar.is_gregorian_at(day) {
            day
        } else {
            let (y, m, d) = date_of(self.calendar, day);
            day_number(Calendar::ProlepticGregorian, y, m, d).ok()?
        };
        (jdn - UNIX_EPOCH_JDN).checked_mul(DAY_MICROS)?.checked_add(micros)
    }

    /// Every value's [`label_micros`](Self::label_micros), or None when one of them has no
    /// Gregorian label.
    pub fn all_label_micros(&self, values: &[f64]) -> Option<Vec<i64>> {
        values.iter().map(|&v| self.label_micros(v)).collect()
    }
}

/// Microseconds since day number 0 of `day`'s calendar at `micros` into that day (an i128:
/// [`MAX_YEAR`]'s days in microseconds overflow an i64).
pub fn instant(day: i64, micros: i64) -> i128 {
    i128::from(day) * i128::from(DAY_MICROS) + i128::from(micros)
}

/// Julian Day Number of 1970-01-01.
const UNIX_EPOCH_JDN: i64 = 2_440_588;

/// Microseconds per unit of a CF time unit, or None for units that are not fixed.
fn unit_micros(unit: &str) -> Option<f64> {
    Some(match unit.to_ascii_lowercase().as_str() {
        "microseconds" | "microsecond" | "us" => 1.0,
        "milliseconds" | "millisecond" | "msec" | "ms" => 1e3,
        "seconds" | "second" | "secs" | "sec" | "s" => 1e6,
        "minutes" | "minute" | "mins" | "min" => 60e6,
        "hours" | "hour" | "hrs" | "hr" | "h" => 3600e6,
        "days" | "day" | "d" => 86_400e6,
        _ => return None,
    })
}

/// The reference "DATE[ TIME][ ZONE]" of CF units: year, month, day and microseconds into
/// the day. A zone other than UTC is refused.
fn parse_reference(text: &str) -> Option<(i64, u32, u32, i64)> {
    let text = text.trim().replacen('T', " ", 1);
    let mut parts = text.split_whitespace();
    let date = parts.next()?;
    // A leading minus is a year before 0.
    let (sign, date) = date.strip_prefix('-').map_or((1, date), |d| (-1, d));
    let mut ymd = date.splitn(3, '-');
    let y: i64 = ymd.next()?.parse::<i64>().ok()? * sign;
    let m: u32 = ymd.next().map_or(Some(1), |v| v.parse().ok())?;
    let d: u32 = ymd.next().map_or(Some(1), |v| v.parse().ok())?;
    let mut micros = 0i64;
    if let Some(time) = parts.next() {
        let time = time.trim_end_matches('Z');
        let mut hms = time.splitn(3, ':');
        let h: f64 = hms.next()?.parse().ok()?;
        let mi: f64 = hms.next().map_or(Some(0.0), |v| v.parse().ok())?;
        let s: f64 = hms.next().map_or(Some(0.0), |v| v.parse().ok())?;
        micros = ((h * 3600.0 + mi * 60.0 + s) * 1e6).round() as i64;
    }
    match parts.next() {
        None | Some("UTC" | "utc" | "Z" | "+00:00" | "00:00" | "+0000" | "+00") => Some((y, m, d, micros)),
        Some(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn day_numbers_round_trip_in_every_calendar() {
        use Calendar::*;
        // Years -200 .. 2200, and around 80,000 BC (found by the cf_time fuzz target: the
        // Julian Day Number is negative there).
        let spans = |cal| {
            let a = day_number(cal, -200, 1, 1).unwrap_or_default();
            let b = day_number(cal, -79_110, 1, 1).unwrap_or_default();
            [a..a + 365 * 2400, b..b + 365 * 20]
        };
        for cal in [Standard, ProlepticGregorian, Julian, NoLeap, AllLeap, Day360] {
            let mut last = None;
            for n in spans(cal).into_iter().flatten() {
                let (y, m, d) = date_of(cal, n);
                assert_eq!(day_number(cal, y, m, d).ok(), Some(n), "{cal:?} day {n}: {y}-{m}-{d}");
                if let Some((ln, ly, lm, ld)) = last {
                    assert!(n != ln + 1 || (y, m, d) > (ly, lm, ld), "{cal:?}: dates go forward");
                }
                last = Some((n, y, m, d));
            }
        }
    }

    #[test]
    fn calendars_agree_and_differ_where_they_should() {
        use Calendar::*;
        // The standard calendar skips 1582-10-05 .. 14: the 4th is followed by the 15th.
        let oct4 = day_number(Standard, 1582, 10, 4).unwrap_or_default();
        assert_eq!(date_of(Standard, oct4 + 1), (1582, 10, 15));
        assert!(day_number(Standard, 1582, 10, 10).is_err());
        assert_eq!(day_number(Standard, 2000, 3, 1).ok(), day_number(ProlepticGregorian, 2000, 3, 1).ok());
        assert!(day_number(NoLeap, 2000, 2, 29).is_err());
        assert!(day_number(AllLeap, 2001, 2, 29).is_ok());
        assert!(day_number(Day360, 2001, 2, 30).is_ok());
        assert!(day_number(Julian, 1900, 2, 29).is_ok() && day_number(ProlepticGregorian, 1900, 2, 29).is_err());
        assert_eq!(day_number(ProlepticGregorian, 1970, 1, 1).ok(), Some(UNIX_EPOCH_JDN));
        assert!(Calendar::parse(Some("lunar")).is_err());
        assert_eq!(Calendar::parse(Some("365_day")).ok(), Some(NoLeap));
    }

    #[test]
    fn labels_keep_the_calendar_date() {
        let noleap = TimeUnits::parse("days since 1920-01-01", Some("noleap")).unwrap();
        let at = |y, m, d| (gregorian_jdn(y, m, d) - UNIX_EPOCH_JDN) * DAY_MICROS;
        // 1920 is a Gregorian leap year: the noleap calendar's day 59 is 1 March.
        assert_eq!(noleap.label_micros(59.0), Some(at(1920, 3, 1)));
        assert_eq!(noleap.label_micros(365.25), Some(at(1921, 1, 1) + DAY_MICROS / 4));
        assert_eq!(noleap.unix_micros(59.0), None);
        let labels = noleap.all_label_micros(&(0..3650).map(f64::from).collect::<Vec<_>>()).unwrap();
        assert!(labels.windows(2).all(|w| w[0] < w[1]), "labels keep the calendar's order");
        // 360_day's 30 February has no label; its 30 January does.
        let d360 = TimeUnits::parse("days since 2000-01-01", Some("360_day")).unwrap();
        assert_eq!(d360.label_micros(29.0), Some(at(2000, 1, 30)));
        assert_eq!(d360.label_micros(59.0), None);
        assert_eq!(d360.all_label_micros(&[0.0, 59.0]), None);
        // The standard calendar's Julian days take their Julian label.
        let std = TimeUnits::parse("days since 1500-03-01", None).unwrap();
        assert_eq!(std.label_micros(0.0), Some(at(1500, 3, 1)));
        assert_eq!(std.unix_micros(0.0), None);
        let modern = TimeUnits::parse("hours since 1950-01-01", Some("gregorian")).unwrap();
        assert_eq!(modern.label_micros(36.0), modern.unix_micros(36.0));
    }

    #[test]
    fn decodes_values_in_their_calendar() {
        let u = TimeUnits::parse("days since 1800-01-01 00:00:00", None).unwrap();
        assert_eq!(u.unix_micros(0.0), Some(-5_364_662_400_000_000));
        assert_eq!(u.unix_micros(1.5), Some(-5_364_662_400_000_000 + 36 * 3_600_000_000));
        let u = TimeUnits::parse("hours since 1970-01-01T06:00:00Z", Some("gregorian")).unwrap();
        assert_eq!(u.unix_micros(1.0), Some(7 * 3_600_000_000));
        let u = TimeUnits::parse("seconds since 2000-1-1", None).unwrap();
        assert_eq!(u.unix_micros(0.0), Some(946_684_800_000_000));
        let u = TimeUnits::parse("days since 2000-01-01", Some("noleap")).unwrap();
        assert_eq!(u.unix_micros(0.0), None, "not a timestamp's calendar");
        assert_eq!(u.date(59.0), Some(CfDate { year: 2000, month: 3, day: 1, micros: 0 }));
        assert_eq!(u.date(-0.25), Some(CfDate { year: 1999, month: 12, day: 31, micros: 18 * 3_600_000_000 }));
        let u = TimeUnits::parse("days since 2000-01-01", Some("360_day")).unwrap();
        assert_eq!(u.date(59.0), Some(CfDate { year: 2000, month: 2, day: 30, micros: 0 }));
        // Before the Gregorian reform the standard calendar's dates are Julian.
        let u = TimeUnits::parse("days since 1582-10-15", None).unwrap();
        assert_eq!(u.date(-1.0).map(|d| (d.year, d.month, d.day)), Some((1582, 10, 4)));
        assert_eq!(u.unix_micros(-1.0), None);
        assert!(TimeUnits::parse("months since 2000-01-01", None).is_err());
        assert!(TimeUnits::parse("days since 333333333333333333-01-01", None).is_err());
        let edge = TimeUnits::parse("s since -10000000", None).unwrap();
        assert_eq!(edge.date(-1.0), None, "a year past the limit");
        assert!(TimeUnits::parse("degrees_north", None).is_err());
        assert!(TimeUnits::parse("days since 2000-01-01 00:00 +05:00", None).is_err());
        assert_eq!(TimeUnits::parse("days since 2000-01-01", None).unwrap().date(f64::NAN), None);
    }
}
