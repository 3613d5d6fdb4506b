//! OPeNDAP DAP2 constraint expressions, `proj1,proj2&sel1&sel2`, as strata's server takes
//! them. Kept apart from the server so they are fuzzed on their own.
//!
//! A projection names a variable, optionally with one hyperslab per dimension: `[i]`,
//! `[start:stop]` or `[start:stride:stop]`, `stop` inclusive. `grid.array` is accepted as
//! `array` (clients written for THREDDS' grids send it). A selection compares a variable
//! with a number (`sst>25`, `25<sst`, `=`, `!=`, `<`, `<=`, `>`, `>=`); selections are
//! ANDed. strata applies them to arrays (docs/server.md says how).

#[derive(Debug, Clone, PartialEq)]
pub struct Hyperslab {
    pub start: u64,
    pub stride: u64,
    /// Inclusive, as DAP2 writes it.
    pub stop: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Projection {
    pub name: String,
    pub slabs: Vec<Hyperslab>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Clause {
    pub name: String,
    /// Operator with the variable on the left (`25<sst` becomes `sst>25`).
    pub op: &'static str,
    pub value: f64,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Constraint {
    pub projections: Vec<Projection>,
    pub selections: Vec<Clause>,
}

/// Why an expression is not one: a message for the person who wrote it.
pub type Error = String;

fn bad(msg: impl Into<String>) -> Error {
    format!("constraint expression: {}", msg.into())
}

pub fn parse(raw_query: &str) -> Result<Constraint, Error> {
    let text = percent_decode(raw_query).map_err(bad)?;
    if text.len() > 64 * 1024 {
        return Err(bad("longer than 64 KiB"));
    }
    let mut ce = Constraint::default();
    let mut parts = text.split('&');
    let mut head = parts.next().unwrap_or("").trim();
    // netCDF's client, asked for `proj&sel`, sends the DDS request as `?sel` alone: a first
    // clause with a comparison is a selection, not a projection.
    if head.contains(['<', '>', '=']) {
        ce.selections.push(clause(head)?);
        head = "";
    }
    if !head.is_empty() {
        for item in head.split(',') {
            ce.projections.push(projection(item.trim())?);
        }
    }
    for sel in parts {
        let sel = sel.trim();
        if !sel.is_empty() {
            ce.selections.push(clause(sel)?);
        }
    }
    Ok(ce)
}

fn valid_name(name: &str) -> bool {
    !name.is_empty() && !name.chars().any(|c| "[]{}()<>=!&,\"~".contains(c) || c.is_whitespace())
}

/// `a.b` addresses field `b` of grid `a`; strata serves arrays, so `a.a` (what a grid-aware
/// client asks for) means `a`.
fn plain_name(name: &str) -> Result<String, Error> {
    let plain = match name.rsplit_once('.') {
        Some((parent, field)) if !field.is_empty() && parent.rsplit('.').next() == Some(field) => field,
        _ => name,
    };
    if plain.trim_matches('.').is_empty() {
        return Err(bad(format!("'{name}' is not a variable name")));
    }
    Ok(plain.to_string())
}

fn projection(item: &str) -> Result<Projection, Error> {
    let (name, mut rest) = match item.find('[') {
        Some(i) => (&item[..i], &item[i..]),
        None => (item, ""),
    };
    if !valid_name(name) {
        if name.contains('(') {
            return Err(bad(format!("'{item}': server functions are not supported")));
        }
        return Err(bad(format!("'{item}' is not a variable name with hyperslabs")));
    }
    let mut slabs = Vec::new();
    while !rest.is_empty() {
        let end =
            rest.find(']').filter(|_| rest.starts_with('[')).ok_or_else(|| bad(format!("'{item}': unclosed '['")))?;
        let inner = &rest[1..end];
        let nums: Vec<u64> = inner
            .split(':')
            .map(|n| n.trim().parse::<u64>())
            .collect::<Result<_, _>>()
            .map_err(|_| bad(format!("'[{inner}]' in '{item}' is not [i], [start:stop] or [start:stride:stop]")))?;
        let slab = match nums[..] {
            [i] => Hyperslab { start: i, stride: 1, stop: i },
            [a, b] => Hyperslab { start: a, stride: 1, stop: b },
            [a, s, b] => Hyperslab { start: a, stride: s, stop: b },
            _ => return Err(bad(format!("'[{inner}]' has too many parts"))),
        };
        if slab.stride == 0 {
            return Err(bad(format!("'[{inner}]': the stride must be at least 1")));
        }
        if slab.stop < slab.start {
            return Err(bad(format!("'[{inner}]': stop is before start")));
        }
        slabs.push(slab);
        rest = &rest[end + 1..];
    }
    Ok(Projection { name: plain_name(name)?, slabs })
}

fn clause(text: &str) -> Result<Clause, Error> {
    const OPS: [&str; 7] = ["!=", "<=", ">=", "=~", "=", "<", ">"];
    let (at, op) = OPS
        .iter()
        .filter_map(|op| text.find(op).map(|i| (i, *op)))
        .min_by_key(|(i, op)| (*i, usize::MAX - op.len()))
        .ok_or_else(|| bad(format!("selection '{text}' has no comparison")))?;
    if op == "=~" {
        return Err(bad("regular-expression selections (=~) are not supported"));
    }
    let (left, right) = (text[..at].trim(), text[at + op.len()..].trim());
    let number = |s: &str| s.trim_matches('"').parse::<f64>().ok().filter(|v| !v.is_nan());
    let (name, value, op) = match (number(left), number(right)) {
        (None, Some(v)) => (left, v, op),
        (Some(v), None) => (right, v, flip(op)),
        _ => return Err(bad(format!("selection '{text}' must compare one variable with one number"))),
    };
    if !valid_name(name) {
        return Err(bad(format!("'{name}' in selection '{text}' is not a variable name")));
    }
    let name = plain_name(name)?;
    // A name that reads as a number (`x.0.0` is field `0` of `x.0`) would compare two
    // numbers once written back.
    if number(&name).is_some() {
        return Err(bad(format!("selection '{text}' must compare one variable with one number")));
    }
    Ok(Clause { name, op, value })
}

fn flip(op: &'static str) -> &'static str {
    match op {
        "<" => ">",
        ">" => "<",
        "<=" => ">=",
        ">=" => "<=",
        other => other,
    }
}

/// A name as a constraint carries it: bytes other than letters, digits, `_` and `-`
/// `%XX`-escaped, so that [`parse`] reads it back whatever it holds.
pub fn escape_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || b == b'_' || b == b'-' {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

impl std::fmt::Display for Constraint {
    /// The expression in DAP2's syntax; [`parse`] reads it back to an equal constraint.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, p) in self.projections.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            f.write_str(&escape_name(&p.name))?;
            for h in &p.slabs {
                write!(f, "[{}:{}:{}]", h.start, h.stride, h.stop)?;
            }
        }
        for c in &self.selections {
            write!(f, "&{}{}{:?}", escape_name(&c.name), c.op, c.value)?;
        }
        Ok(())
    }
}

impl Clause {
    /// The clause in the engine's constraint grammar (`strata_core::constraint`).
    pub fn engine_text(&self) -> String {
        let name = self.name.replace('"', "\"\"");
        let op = if self.op == "=" { "==" } else { self.op };
        format!("\"{name}\" {op} {:?}", self.value)
    }
}

/// `%XX` escapes decoded.
pub fn percent_decode(s: &str) -> Result<String, String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = b.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok());
            match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                Some(v) => {
                    out.push(v);
                    i += 3;
                    continue;
                }
                None => return Err("a '%' not followed by two hex digits".into()),
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8(out).map_err(|_| "not UTF-8 once decoded".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn projections_with_hyperslabs() {
        let ce = parse("sst%5B0:1:2%5D%5B3%5D[4:5],lat,sst.sst[1]").unwrap_or_default();
        assert_eq!(ce.projections.len(), 3);
        assert_eq!(
            ce.projections[0].slabs,
            vec![
                Hyperslab { start: 0, stride: 1, stop: 2 },
                Hyperslab { start: 3, stride: 1, stop: 3 },
                Hyperslab { start: 4, stride: 1, stop: 5 }
            ]
        );
        assert_eq!(ce.projections[1].name, "lat");
        assert_eq!(ce.projections[2].name, "sst");
    }

    #[test]
    fn selections_put_the_variable_left() {
        let ce = parse("sst&sst>25&10.5%3C=sst&sst!=3").unwrap_or_default();
        let got: Vec<(&str, &str, f64)> = ce.selections.iter().map(|c| (c.name.as_str(), c.op, c.value)).collect();
        assert_eq!(got, vec![("sst", ">", 25.0), ("sst", ">=", 10.5), ("sst", "!=", 3.0)]);
        let alone = parse("sst%3E25&sst%3C=28").unwrap_or_default();
        assert!(alone.projections.is_empty());
        assert_eq!(alone.selections.len(), 2);
    }

    #[test]
    fn a_constraint_reads_back_from_its_text() {
        for text in ["sst[0:1:2][3][4:5],lat&sst>25&10.5<=sst", "a%20b[1]&a%20b!=-0.5", "x.x[2]&y=1e300", "&t<3"] {
            let ce = parse(text).unwrap_or_default();
            assert_eq!(parse(&ce.to_string()), Ok(ce.clone()), "{text} -> {ce}");
        }
    }

    #[test]
    fn malformed_expressions_are_errors() {
        for bad in [
            ".",
            "..&x>1",
            "sst[1",
            "sst[a]",
            "sst[3:1]",
            "sst[0:0:4]",
            "f(x)",
            "sst&sst",
            "sst&a>b",
            "sst&x=~\"a\"",
            "%zz",
        ] {
            assert!(parse(bad).is_err(), "{bad} accepted");
        }
    }
}
