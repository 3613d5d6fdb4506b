//! The text parts of DAP2: the DDS (structure), the DAS (attributes) and error bodies.

use super::types::DapType;
use std::fmt::Write;
use strata_core::manifest::{AttrValue, Attribute};
use strata_core::Manifest;

/// A variable as a response describes it: its DAP type and its dimensions with the sizes
/// the constraint leaves.
#[derive(Debug, Clone)]
pub(crate) struct Shape {
    pub name: String,
    pub dap: DapType,
    pub dims: Vec<(String, u64)>,
}

/// A name as DAP2 identifiers allow: letters, digits and `_!~*'-./` pass, every other byte
/// is `%XX`-escaped (THREDDS' set, less the double quote).
pub(crate) fn ident(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || b"_!~*'-./".contains(&b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

fn quoted(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

pub(crate) fn dds(dataset: &str, vars: &[Shape]) -> String {
    let mut s = String::from("Dataset {\n");
    for v in vars {
        let _ = write!(s, "    {} {}", v.dap.name(), ident(&v.name));
        for (d, n) in &v.dims {
            let _ = write!(s, "[{} = {n}]", ident(d));
        }
        s.push_str(";\n");
    }
    let _ = writeln!(s, "}} {};", ident(dataset));
    s
}

fn float_text(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "Inf" } else { "-Inf" }.into()
    } else {
        format!("{v:?}")
    }
}

/// One attribute line, or None for a type DAP2 cannot carry.
fn attribute(a: &Attribute) -> String {
    let join = |xs: Vec<String>| xs.join(", ");
    let (ty, values) = match &a.value {
        AttrValue::String(s) => ("String", quoted(s)),
        AttrValue::Strings(v) => ("String", join(v.iter().map(|s| quoted(s)).collect())),
        AttrValue::U8(v) => ("Byte", join(v.iter().map(|x| x.to_string()).collect())),
        AttrValue::I8(v) | AttrValue::I16(v) => ("Int16", join(v.iter().map(|x| x.to_string()).collect())),
        AttrValue::U16(v) => ("UInt16", join(v.iter().map(|x| x.to_string()).collect())),
        AttrValue::I32(v) => ("Int32", join(v.iter().map(|x| x.to_string()).collect())),
        AttrValue::U32(v) => ("UInt32", join(v.iter().map(|x| x.to_string()).collect())),
        AttrValue::I64(v) => ("Float64", join(v.iter().map(|&x| float_text(x as f64)).collect())),
        AttrValue::U64(v) => ("Float64", join(v.iter().map(|&x| float_text(x as f64)).collect())),
        AttrValue::F32(v) => ("Float32", join(v.iter().map(|&x| float_text(f64::from(x))).collect())),
        AttrValue::F64(v) => ("Float64", join(v.iter().map(|&x| float_text(x)).collect())),
    };
    let values = if values.is_empty() { "\"\"".to_string() } else { values };
    let ty = if values == "\"\"" { "String" } else { ty };
    format!("{ty} {} {values};", ident(&a.name))
}

/// Attributes of the variables served, the globals as `NC_GLOBAL`, and the unlimited
/// dimension in `DODS_EXTRA` (where netCDF's DAP client looks for it).
pub(crate) fn das(m: &Manifest, served: &[String]) -> String {
    let mut s = String::from("Attributes {\n");
    for name in served {
        let Ok((_, var)) = m.variable(name) else { continue };
        let _ = writeln!(s, "    {} {{", ident(name));
        for a in &var.attrs {
            let _ = writeln!(s, "        {}", attribute(a));
        }
        s.push_str("    }\n");
    }
    s.push_str("    NC_GLOBAL {\n");
    for a in &m.attrs {
        let _ = writeln!(s, "        {}", attribute(a));
    }
    s.push_str("    }\n");
    if let Some(d) = m.record_dim.as_ref().and_then(|r| m.dim(r)).filter(|d| d.unlimited) {
        let _ = writeln!(s, "    DODS_EXTRA {{\n        String Unlimited_Dimension {};\n    }}", quoted(&d.name));
    }
    s.push_str("}\n");
    s
}

pub(crate) fn error(code: u16, message: &str) -> String {
    format!("Error {{\n    code = {code};\n    message = {};\n}};\n", quoted(message))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_and_strings_are_escaped() {
        assert_eq!(ident("sea ice"), "sea%20ice");
        assert_eq!(ident("iridl:x+y"), "iridl%3Ax%2By");
        assert_eq!(quoted("say \"hi\" \\o/"), "\"say \\\"hi\\\" \\\\o/\"");
    }

    #[test]
    fn dds_lists_named_dimensions() {
        let v = Shape { name: "sst".into(), dap: DapType::Float32, dims: vec![("time".into(), 1), ("lat".into(), 89)] };
        assert_eq!(dds("ersst", &[v]), "Dataset {\n    Float32 sst[time = 1][lat = 89];\n} ersst;\n");
    }
}
