//! CF time coordinates ("days since 1800-01-01 00:00:00") as timestamps.
//!
//! Only the calendars a timestamp can hold are decoded — standard, gregorian and
//! proleptic_gregorian (read as proleptic Gregorian) — with units from microseconds to
//! days. Months and years are not fixed lengths, so such coordinates stay numeric.

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

/// Days from 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The reference time of "UNIT since DATE[ TIME][ ZONE]" in microseconds since the epoch.
fn parse_reference(text: &str) -> Option<i64> {
    let text = text.trim().replace('T', " ");
    let mut parts = text.split_whitespace();
    let date = parts.next()?;
    let mut ymd = date.splitn(3, '-');
    let y: i64 = ymd.next()?.parse().ok()?;
    let m: i64 = ymd.next().map_or(Some(1), |v| v.parse().ok())?;
    let d: i64 = ymd.next().map_or(Some(1), |v| v.parse().ok())?;
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return None;
    }
    let mut micros = days_from_civil(y, m, d) * 86_400_000_000;
    if let Some(time) = parts.next() {
        let time = time.trim_end_matches('Z');
        let mut hms = time.splitn(3, ':');
        let h: f64 = hms.next()?.parse().ok()?;
        let mi: f64 = hms.next().map_or(Some(0.0), |v| v.parse().ok())?;
        let s: f64 = hms.next().map_or(Some(0.0), |v| v.parse().ok())?;
        micros += ((h * 3600.0 + mi * 60.0 + s) * 1e6).round() as i64;
    }
    // A zone offset other than UTC is not supported: such units stay numeric.
    match parts.next() {
        None | Some("UTC") | Some("utc") | Some("Z") | Some("+00:00") | Some("00:00") | Some("+0000") => Some(micros),
        Some(_) => None,
    }
}

/// The scale (microseconds per unit) and epoch offset of CF time units, when decodable.
pub fn time_units(units: &str, calendar: Option<&str>) -> Option<(f64, i64)> {
    let cal = calendar.unwrap_or("standard").to_ascii_lowercase();
    if !matches!(cal.as_str(), "standard" | "gregorian" | "proleptic_gregorian") {
        return None;
    }
    let (unit, reference) = units.split_once(" since ")?;
    Some((unit_micros(unit.trim())?, parse_reference(reference)?))
}

/// A coordinate value in `units` -> microseconds since 1970-01-01T00:00:00.
pub fn to_micros(value: f64, scale: f64, offset: i64) -> i64 {
    offset + (value * scale).round() as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_common_units() {
        let (s, o) = time_units("days since 1800-01-01 00:00:00", None).unwrap_or_default();
        assert_eq!(s, 86_400e6);
        assert_eq!(o, -5_364_662_400_000_000);
        assert_eq!(to_micros(1.0, s, o), -5_364_662_400_000_000 + 86_400_000_000);
        let (s, o) = time_units("hours since 1970-01-01T06:00:00Z", Some("gregorian")).unwrap_or_default();
        assert_eq!((s, o), (3600e6, 6 * 3_600_000_000));
        assert_eq!(time_units("seconds since 2000-1-1", None), Some((1e6, 946_684_800_000_000)));
        assert_eq!(time_units("months since 2000-01-01", None), None);
        assert_eq!(time_units("days since 2000-01-01", Some("noleap")), None);
        assert_eq!(time_units("degrees_north", None), None);
    }
}
