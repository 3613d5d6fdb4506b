//! CF time units and values: arbitrary `units` and `calendar` text parses or fails cleanly;
//! every decoded value is a date of its calendar, whose day number gives the date back,
//! and a timestamp agrees with the date.

use strata_core::cftime::{date_of, day_number, TimeUnits};

/// One input: what libFuzzer or the seed tests hand the target.
pub fn run(data: &[u8]) {
    if data.len() < 9 {
        return;
    }
    let value = f64::from_le_bytes(data[..8].try_into().expect("8 bytes"));
    let text = String::from_utf8_lossy(&data[8..]);
    let (units, calendar) = match text.split_once('|') {
        Some((u, c)) => (u, Some(c)),
        None => (text.as_ref(), None),
    };
    let Ok(t) = TimeUnits::parse(units, calendar) else {
        return;
    };
    let Some(d) = t.date(value) else {
        return;
    };
    assert!((0..86_400_000_000).contains(&d.micros));
    let n = day_number(t.calendar, d.year, d.month, d.day).expect("a decoded date exists in its calendar");
    assert_eq!(date_of(t.calendar, n), (d.year, d.month, d.day));
    if let Some(us) = t.unix_micros(value) {
        assert_eq!(us.rem_euclid(86_400_000_000), d.micros);
    }
}
