//! The text parts of DAP2: the DDS (structure), the DAS (attributes) and error bodies.

use super::strings::Text;
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

/// An attribute's name in a DAS: as [`ident`], but a colon after the first character stays
/// (`iridl:hasSemantics`, `NCO:...`). netCDF's DAP client takes colons in DAS words (its
/// lexer keeps them "for historical reasons") and pydap splits on spaces only, so both then
/// name the attribute as the file does; escaped, both showed `iridl%3AhasSemantics`.
pub(crate) fn attribute_ident(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for (i, part) in name.split(':').enumerate() {
        if i > 0 {
            out.push_str(if out.is_empty() { "%3A" } else { ":" });
        }
        out.push_str(&ident(part));
    }
    out
}

pub(crate) fn quoted(s: &str) -> String {
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

/// One attribute line. `bytes`: the variable is served as `Byte` though stored as signed
/// bytes, so its signed-byte attributes (a `_FillValue`) go as the same bits in `Byte`.
fn attribute(a: &Attribute, bytes: bool) -> String {
    let join = |xs: Vec<String>| xs.join(", ");
    let (ty, values) = match &a.value {
        AttrValue::String(s) => ("String", quoted(s)),
        AttrValue::Strings(v) => ("String", join(v.iter().map(|s| quoted(s)).collect())),
        AttrValue::U8(v) => ("Byte", join(v.iter().map(|x| x.to_string()).collect())),
        AttrValue::I8(v) if bytes => ("Byte", join(v.iter().map(|&x| (x as u8).to_string()).collect())),
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
    format!("{ty} {} {values};", attribute_ident(&a.name))
}

/// Attributes of the variables served, the globals as `NC_GLOBAL`, and the unlimited
/// dimension in `DODS_EXTRA` (where netCDF's DAP client looks for it).
pub(crate) fn das(m: &Manifest, served: &[String]) -> String {
    let mut s = String::from("Attributes {\n");
    for name in served {
        let Ok((_, var)) = m.variable(name) else { continue };
        let _ = writeln!(s, "    {} {{", ident(name));
        let bytes = DapType::of_variable(var) == DapType::Byte;
        for a in &var.attrs {
            // A fill of another type that the variable's cannot hold (a ROMS file's float
            // 1e37 on shorts): netCDF's client turns it into some short and masks the valid
            // values equal to that; read locally it is ignored, so it is left out here.
            let unfit = a.name == "_FillValue"
                && !var.dtype.is_float()
                && var.dtype.num_type().is_some()
                && a.value.as_f64s().iter().any(|&v| super::types::element(var.dtype, v).is_none());
            if !unfit {
                let _ = writeln!(s, "        {}", attribute(a, bytes && var.dtype == strata_core::DType::I8));
            }
        }
        // DAP2's Byte, UInt16 and UInt32 are unsigned, but netCDF's client reads them as
        // signed (the classic model's byte, short and int) unless told, as THREDDS tells it:
        // 60000 read as -5536.
        let unsigned = matches!(DapType::of_variable(var), DapType::Byte | DapType::UInt16 | DapType::UInt32);
        if unsigned && !var.attrs.iter().any(|a| a.name == "_Unsigned") {
            s.push_str("        String _Unsigned \"true\";\n");
        }
        // The string dimension a `String` array stands for: netCDF's client makes it the
        // last dimension of a char variable (else one of its own, `maxStrlen64`). Dotted
        // names in the variable's own table: a nested `DODS { strlen ...}` table, as
        // THREDDS writes it, is merged into the globals by netCDF 4.9's client.
        if let Some(text) = Text::of(m, var) {
            let _ = writeln!(s, "        Int32 DODS.strlen {};", text.max_len(var).max(1));
            if let (Text::Chars { has_dim: true, .. }, Some(d)) = (text, var.dims.last()) {
                let _ = writeln!(s, "        String DODS.dimName {};", quoted(d));
            }
            // NetCDF-4 strings are text, which the client's characters stand for: netCDF4
            // and xarray then give strings back, as from the file, not bytes.
            if text == Text::Inline && !var.attrs.iter().any(|a| a.name == "_Encoding") {
                s.push_str("        String _Encoding \"utf-8\";\n");
            }
        }
        s.push_str("    }\n");
    }
    s.push_str("    NC_GLOBAL {\n");
    for a in &m.attrs {
        let _ = writeln!(s, "        {}", attribute(a, false));
    }
    s.push_str("    }\n");
    if let Some(d) = m.record_dim.as_ref().and_then(|r| m.dim(r)).filter(|d| d.unlimited) {
        let _ = writeln!(s, "    DODS_EXTRA {{\n        String Unlimited_Dimension {};\n    }}", quoted(&d.name));
    }
    s.push_str("}\n");
    s
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// DAP2's `.html` form: the variables with their dimensions, a hyperslab box per
/// dimension and a value selection box; it builds the constraint and opens the `.ascii` or
/// `.dods` answer.
pub(crate) fn html_form(dataset: &str, m: &Manifest, served: &[String]) -> String {
    let mut rows = String::new();
    for name in served {
        let Ok((_, v)) = m.variable(name) else { continue };
        let shape = m.shape(v);
        let rank = Text::of(m, v).map_or(shape.len(), |t| t.dap_rank(shape.len()));
        let mut boxes = String::new();
        for (d, n) in v.dims.iter().zip(&shape).take(rank) {
            let _ = write!(
                boxes,
                "[<input size=10 data-dim=\"{}\" value=\"0:1:{}\" title=\"{} (0..{})\">]",
                html_escape(d),
                n.saturating_sub(1),
                html_escape(d),
                n.saturating_sub(1)
            );
        }
        let long = v.attrs.iter().find(|a| a.name == "long_name").and_then(|a| match &a.value {
            AttrValue::String(s) => Some(s.clone()),
            _ => None,
        });
        let _ = writeln!(
            rows,
            "<tr><td><label><input type=checkbox data-var=\"{}\"> <code>{}</code></label></td><td>{}</td>\
             <td>{}</td></tr>",
            html_escape(&ident(name)),
            html_escape(name),
            boxes,
            html_escape(&long.unwrap_or_default())
        );
    }
    format!(
        "<!doctype html><html><head><meta charset=utf-8><title>{title} (DAP2)</title>\
         <style>body{{font:14px system-ui,sans-serif;margin:20px}}td{{padding:2px 8px}}code,input{{font-family:monospace}}</style>\
         </head><body><h2>{title}</h2><p>OPeNDAP DAP2 access: choose variables and hyperslabs \
         (<code>start:stride:stop</code>, stop included), optionally a value selection \
         (<code>sst&gt;25</code>: elements where it does not hold come back as the fill value).</p>\
         <table>{rows}</table><p>selection <input id=sel size=30 placeholder=\"sst>25\"></p>\
         <p><code id=ce></code></p><button id=ascii>get ASCII</button> <button id=dods>get binary (.dods)</button>\
         <script>\
         function ce(){{const p=[];document.querySelectorAll('input[data-var]').forEach(c=>{{if(!c.checked)return;\
         const r=c.closest('tr');let s=c.dataset.var;r.querySelectorAll('input[data-dim]').forEach(i=>s+='['+i.value+']');p.push(s)}});\
         const sel=document.getElementById('sel').value.trim();return p.join(',')+(sel?'&'+sel:'')}}\
         document.querySelectorAll('input').forEach(i=>i.oninput=()=>document.getElementById('ce').textContent='?'+ce());\
         document.getElementById('ascii').onclick=()=>location.href='{base}.ascii?'+encodeURIComponent(ce()).replace(/%2C/g,',').replace(/%5B/g,'[').replace(/%5D/g,']').replace(/%3A/g,':');\
         document.getElementById('dods').onclick=()=>location.href='{base}.dods?'+encodeURIComponent(ce());\
         </script></body></html>",
        title = html_escape(dataset),
        rows = rows,
        base = html_escape(&ident(dataset)),
    )
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
        assert_eq!(attribute_ident("iridl:x+y"), "iridl:x%2By");
        assert_eq!(attribute_ident(":lead"), "%3Alead");
        assert_eq!(attribute_ident("::a:"), "%3A:a:");
        assert_eq!(quoted("say \"hi\" \\o/"), "\"say \\\"hi\\\" \\\\o/\"");
    }

    #[test]
    fn dds_lists_named_dimensions() {
        let v = Shape { name: "sst".into(), dap: DapType::Float32, dims: vec![("time".into(), 1), ("lat".into(), 89)] };
        assert_eq!(dds("ersst", &[v]), "Dataset {\n    Float32 sst[time = 1][lat = 89];\n} ersst;\n");
    }
}
