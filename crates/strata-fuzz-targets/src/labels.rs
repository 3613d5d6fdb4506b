//! Label selection: arbitrary coordinate values, units, calendars and selection text build an
//! index and select, or fail cleanly; what is selected is inside the coordinate, and on a
//! monotonic number axis a range's positions hold exactly the values between its labels.

use strata_core::labels::{Label, LabelIndex, Method, Pick, Selection};

/// One input: what libFuzzer or the seed tests hand the target.
pub fn run(data: &[u8]) {
    let Some((&n, rest)) = data.split_first() else { return };
    let n = usize::from(n % 24);
    if rest.len() < n * 8 {
        return;
    }
    let values: Vec<f64> =
        rest[..n * 8].chunks_exact(8).map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes"))).collect();
    let text = String::from_utf8_lossy(&rest[n * 8..]);
    let mut parts = text.splitn(3, '|');
    let (units, calendar, selection) = (parts.next(), parts.next(), parts.next().unwrap_or(""));
    let units = units.filter(|u| !u.is_empty());
    let Ok(index) = LabelIndex::new("x", values.clone(), units, calendar) else { return };
    for method in [Method::Exact, Method::Nearest, Method::Pad, Method::Backfill] {
        match index.select_text(selection, method) {
            Ok(Pick::At(i)) => assert!((i as usize) < n),
            Ok(Pick::Range { start, stop }) => assert!(start <= stop && stop as usize <= n),
            Err(_) => {}
        }
    }
    // A range of numbers on a monotonic axis holds the values between its ends, and no other.
    if index.is_time() {
        return;
    }
    let Ok(Selection::Range(lo, hi)) = index.parse(selection) else { return };
    let Ok((start, stop)) = index.range(lo.as_ref(), hi.as_ref()) else { return };
    let number = |l: &Option<Label>| match l {
        Some(Label::Text(t)) => t.trim().parse::<f64>().ok(),
        Some(Label::Number(x)) => Some(*x),
        None => None,
    };
    let (lo, hi) = (number(&lo), number(&hi));
    let increasing = values.windows(2).all(|w| w[0] <= w[1]);
    let inside = |v: f64| {
        if increasing {
            lo.is_none_or(|l| v >= l) && hi.is_none_or(|h| v <= h)
        } else {
            lo.is_none_or(|l| v <= l) && hi.is_none_or(|h| v >= h)
        }
    };
    for (i, &v) in values.iter().enumerate() {
        let picked = (start as usize..stop as usize).contains(&i);
        assert_eq!(picked, inside(v), "value {v} at {i} of {values:?}, range {lo:?}..{hi:?} picked {start}..{stop}");
    }
}
