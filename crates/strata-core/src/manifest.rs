//! Format v1 manifests: plain serde structs, one JSON file per store version.

use crate::dtype::DType;
use crate::error::{Error, Result};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::HashSet;
use strata_codecs::CodecSpec;

pub const FORMAT_NAME: &str = "strata";
pub const FORMAT_VERSION: u32 = 1;

/// The manifest field holding `crc32c:XXXXXXXX` of the rest of the manifest.
pub const CHECKSUM_KEY: &str = "checksum";

/// The checksum of a manifest's JSON value without its checksum field: CRC-32C of the
/// value's compact serialisation (a reader parsing the stored text gets the same value).
fn checksum_text(value: &serde_json::Value) -> String {
    let mut out = Vec::new();
    canonical(value, &mut out);
    checksum_of(&out)
}

/// The checksum field's text for the covered (canonical) bytes.
fn checksum_of(covered: &[u8]) -> String {
    format!("crc32c:{:08x}", crc32c::crc32c(covered))
}

/// Compact JSON with object keys sorted, whatever order a JSON map keeps its keys in.
fn canonical(value: &serde_json::Value, out: &mut Vec<u8>) {
    use serde_json::Value;
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push(b'{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                out.extend(serde_json::to_vec(k).unwrap_or_default());
                out.push(b':');
                canonical(&map[k], out);
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                canonical(item, out);
            }
            out.push(b']');
        }
        scalar => out.extend(serde_json::to_vec(scalar).unwrap_or_default()),
    }
}

/// One immutable version of a store: schema, layout, codecs and the files holding the data.
// A top-level key the format does not define is damage: one flipped bit in the checksum's
// own key would otherwise turn the check off unnoticed (an optional field gone missing).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub format: String,
    pub format_version: u32,
    pub version: u64,
    pub parent: Option<u64>,
    pub created_ms: u64,
    pub message: String,
    pub dims: Vec<Dim>,
    /// The dimension along which data is cut into slabs and appended.
    pub record_dim: Option<String>,
    /// Records per slab for new slabs (the last slab of an append may hold fewer).
    pub slab_records: u64,
    pub attrs: Vec<Attribute>,
    pub variables: Vec<Variable>,
    pub layout: Layout,
    pub slabs: Vec<Slab>,
    pub files: Vec<FileEntry>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Dim {
    pub name: String,
    pub size: u64,
    #[serde(default)]
    pub unlimited: bool,
}

/// An attribute, kept losslessly: its NetCDF type and its values.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Attribute {
    pub name: String,
    #[serde(flatten)]
    pub value: AttrValue,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", content = "value", rename_all = "lowercase")]
pub enum AttrValue {
    String(String),
    Strings(Vec<String>),
    I8(Vec<i64>),
    U8(Vec<u64>),
    I16(Vec<i64>),
    U16(Vec<u64>),
    I32(Vec<i64>),
    U32(Vec<u64>),
    I64(Vec<i64>),
    U64(Vec<u64>),
    F32(#[serde(with = "f32_values")] Vec<f32>),
    F64(#[serde(with = "f64_values")] Vec<f64>),
}

/// JSON has no NaN or infinity: such values are written as strings. A NaN keeps its
/// exact bit pattern (`"NaN:0x7fc00000"`), so attributes like `_FillValue = NaN` round-trip.
macro_rules! float_values {
    ($module:ident, $t:ty, $bits:ty, $width:literal) => {
        mod $module {
            use super::*;

            #[derive(Serialize, Deserialize)]
            #[serde(untagged)]
            enum Repr {
                Num($t),
                Text(String),
            }

            pub fn serialize<S: Serializer>(v: &[$t], s: S) -> std::result::Result<S::Ok, S::Error> {
                let reprs: Vec<Repr> = v
                    .iter()
                    .map(|&x| {
                        if x.is_finite() {
                            Repr::Num(x)
                        } else if x.is_nan() {
                            Repr::Text(format!("NaN:0x{:0w$x}", x.to_bits(), w = $width))
                        } else if x > 0.0 {
                            Repr::Text("Infinity".into())
                        } else {
                            Repr::Text("-Infinity".into())
                        }
                    })
                    .collect();
                reprs.serialize(s)
            }

            pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Vec<$t>, D::Error> {
                let reprs = Vec::<Repr>::deserialize(d)?;
                reprs
                    .into_iter()
                    .map(|r| match r {
                        Repr::Num(x) => Ok(x),
                        Repr::Text(t) => match t.as_str() {
                            "Infinity" => Ok(<$t>::INFINITY),
                            "-Infinity" => Ok(<$t>::NEG_INFINITY),
                            "NaN" => Ok(<$t>::NAN),
                            other => other
                                .strip_prefix("NaN:0x")
                                .and_then(|h| <$bits>::from_str_radix(h, 16).ok())
                                .map(<$t>::from_bits)
                                .filter(|x| x.is_nan())
                                .ok_or_else(|| serde::de::Error::custom(format!("bad float value '{other}'"))),
                        },
                    })
                    .collect()
            }
        }
    };
}
impl AttrValue {
    /// The type as the manifest names it (`string`, `strings`, `i8` ... `f64`).
    pub fn type_name(&self) -> &'static str {
        match self {
            AttrValue::String(_) => "string",
            AttrValue::Strings(_) => "strings",
            AttrValue::I8(_) => "i8",
            AttrValue::U8(_) => "u8",
            AttrValue::I16(_) => "i16",
            AttrValue::U16(_) => "u16",
            AttrValue::I32(_) => "i32",
            AttrValue::U32(_) => "u32",
            AttrValue::I64(_) => "i64",
            AttrValue::U64(_) => "u64",
            AttrValue::F32(_) => "f32",
            AttrValue::F64(_) => "f64",
        }
    }
}

float_values!(f32_values, f32, u32, 8);
float_values!(f64_values, f64, u64, 16);

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Variable {
    pub name: String,
    pub dtype: DType,
    pub dims: Vec<String>,
    pub attrs: Vec<Attribute>,
    /// Chunk and sub-chunk shapes; absent for inline string variables.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunking: Option<Chunking>,
    /// Codec chains used by this variable's segments; a segment names one by position.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub codecs: Vec<Vec<CodecSpec>>,
    /// Values of a `string` variable, row-major (strings never go to segments).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inline_strings: Option<Vec<String>>,
    /// How the codec was chosen: the analyzer's objective, sample scores and choice.
    /// Informational; readers never need it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<RawJson>,
}

/// A JSON value kept as its text: read and written whole, parsed only when looked at. A
/// plan record is most of a manifest's text (2.4 of 3.4 KB on one planned variable), and
/// building it as a value was three quarters of reading the manifest.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RawJson(Box<serde_json::value::RawValue>);

impl RawJson {
    pub fn new(value: &serde_json::Value) -> Self {
        // A value's own text is valid JSON.
        RawJson(serde_json::value::to_raw_value(value).unwrap_or_else(|_| Self::null()))
    }

    fn null() -> Box<serde_json::value::RawValue> {
        serde_json::value::RawValue::from_string("null".into()).unwrap_or_default()
    }

    /// The value, parsed.
    pub fn value(&self) -> serde_json::Value {
        serde_json::from_str(self.0.get()).unwrap_or_default()
    }

    /// The text as stored.
    pub fn text(&self) -> &str {
        self.0.get()
    }
}

impl PartialEq for RawJson {
    fn eq(&self, other: &Self) -> bool {
        self.value() == other.value()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Chunking {
    pub chunk: Vec<u64>,
    pub subchunk: Vec<u64>,
}

/// Layout levels; format v1 defines all three, this build writes `S` only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Level {
    /// Space: chunks in Hilbert order, then sub-chunks.
    S,
    /// Value bins.
    V,
    /// Precision byte groups.
    M,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Layout {
    /// Priority order of the levels: the sort key of segments in a data file.
    pub order: Vec<Level>,
    /// Byte groups per float type (level M), e.g. `{"f64": [2,1,1,1,1,1,1]}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub byte_groups: Option<serde_json::Value>,
    /// Binning rule (level V).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bins: Option<serde_json::Value>,
}

impl Layout {
    pub fn space_only() -> Self {
        Self { order: vec![Level::S], byte_groups: None, bins: None }
    }

    pub fn describe(&self) -> String {
        self.order.iter().map(|l| format!("{l:?}")).collect::<Vec<_>>().join("-")
    }

    /// The order with its binning rule and byte groups, as `strata info` prints it:
    /// `V-M-S, 16 equal-frequency bins, byte groups f32=2,1,1`.
    pub fn summary(&self) -> String {
        let mut text = self.describe();
        match self.bins.as_ref().map(crate::bins::BinRule::deserialize) {
            Some(Ok(crate::bins::BinRule::EqualWidth { count })) => text += &format!(", {count} equal-width bins"),
            Some(Ok(crate::bins::BinRule::EqualFrequency { count })) => {
                text += &format!(", {count} equal-frequency bins")
            }
            Some(Ok(crate::bins::BinRule::Edges { edges })) => text += &format!(", {} bins by edges", edges.len() + 1),
            Some(Err(_)) => text += ", bins by an unknown rule",
            None => {}
        }
        if let Some(serde_json::Value::Object(groups)) = &self.byte_groups {
            let parts: Vec<String> = groups
                .iter()
                .map(|(t, g)| {
                    let sizes = g.as_array().map(|a| a.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(","));
                    format!("{t}={}", sizes.unwrap_or_else(|| g.to_string()))
                })
                .collect();
            if !parts.is_empty() {
                text += &format!(", byte groups {}", parts.join(" "));
            }
        }
        text
    }
}

/// A slab: the records `[start, start+count)` of every record variable (or, with
/// `records: None`, every variable without the record dimension), in one data file and one
/// index file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Slab {
    pub id: u64,
    pub records: Option<[u64; 2]>,
    pub data: String,
    pub index: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileEntry {
    pub path: String,
    pub size: u64,
    pub crc32c: u32,
    /// A file indexed in place (`strata index`): another program's file, beside the store
    /// (its path is relative to the directory holding the store), whose chunks are the
    /// segments of the slabs that name it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub external: bool,
    /// For a file indexed in place: its modification time when indexed (nanoseconds since
    /// the Unix epoch), where the storage knows it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modified_ns: Option<u64>,
}

impl FileEntry {
    pub fn new(path: impl Into<String>, bytes: &[u8]) -> Self {
        Self {
            path: path.into(),
            size: bytes.len() as u64,
            crc32c: crc32c::crc32c(bytes),
            external: false,
            modified_ns: None,
        }
    }
}

impl AttrValue {
    /// Numeric values as f64 (empty for strings).
    pub fn as_f64s(&self) -> Vec<f64> {
        match self {
            AttrValue::String(_) | AttrValue::Strings(_) => vec![],
            AttrValue::I8(v) | AttrValue::I16(v) | AttrValue::I32(v) | AttrValue::I64(v) => {
                v.iter().map(|&x| x as f64).collect()
            }
            AttrValue::U8(v) | AttrValue::U16(v) | AttrValue::U32(v) | AttrValue::U64(v) => {
                v.iter().map(|&x| x as f64).collect()
            }
            AttrValue::F32(v) => v.iter().map(|&x| x as f64).collect(),
            AttrValue::F64(v) => v.clone(),
        }
    }
}

impl Variable {
    /// Whether it is the coordinate variable of its one dimension (named after it).
    pub fn is_coordinate(&self) -> bool {
        self.dims.len() == 1 && self.dims[0] == self.name
    }

    /// The text of attribute `name`, when it is a single string.
    pub fn string_attr(&self, name: &str) -> Option<&str> {
        self.attrs.iter().find(|a| a.name == name).and_then(|a| match &a.value {
            AttrValue::String(s) => Some(s.as_str()),
            _ => None,
        })
    }

    /// The values CF marks as missing (`_FillValue`, `missing_value`), as f64.
    pub fn missing_values(&self) -> Vec<f64> {
        self.attrs
            .iter()
            .filter(|a| a.name == "_FillValue" || a.name == "missing_value")
            .flat_map(|a| a.value.as_f64s())
            .filter(|v| !v.is_nan())
            .collect()
    }
}

/// The text a stored manifest's checksum covers, taken from the stored text itself when it
/// is in the writer's own form (keys sorted, serde_json's numbers, any whitespace): compact,
/// the top-level checksum member cut out; with the checksum it states. None otherwise (keys
/// out of order, no checksum, not JSON): the full check decides. Equal to what
/// [`canonical`] makes of the parsed value for every manifest strata writes, without
/// building that value (most of the time of opening a store).
fn stated_and_covered(bytes: &[u8]) -> Option<(Vec<u8>, Vec<u8>)> {
    let mut out = Vec::with_capacity(bytes.len());
    let (mut in_string, mut escaped, mut depth) = (false, false, 0usize);
    // Where each top-level key starts in `out`.
    let mut keys = Vec::new();
    for &b in bytes {
        if in_string {
            out.push(b);
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
            continue;
        }
        match b {
            b' ' | b'\n' | b'\r' | b'\t' => continue,
            b'"' => {
                in_string = true;
                if depth == 1 && matches!(out.last(), Some(b'{' | b',')) {
                    keys.push(out.len());
                }
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => depth = depth.checked_sub(1)?,
            _ => {}
        }
        out.push(b);
    }
    if in_string || depth != 0 {
        return None;
    }
    const KEY: &[u8] = b"\"checksum\":\"";
    let start = *keys.iter().find(|&&k| out[k..].starts_with(KEY))?;
    let value = start + KEY.len();
    let close = value + out[value..].iter().position(|&b| b == b'"' || b == b'\\')?;
    if out[close] != b'"' {
        return None;
    }
    let stated = out[value..close].to_vec();
    // The member and one comma beside it (after it, or before it when it comes last).
    let (cut_from, cut_to) = match out.get(close + 1) {
        Some(b',') => (start, close + 2),
        Some(b'}') if out[start - 1] == b',' => (start - 1, close + 1),
        Some(b'}') => (start, close + 1),
        _ => return None,
    };
    out.drain(cut_from..cut_to);
    Some((stated, out))
}

impl Manifest {
    pub fn from_json(bytes: &[u8], what: &str) -> Result<Self> {
        // The quick way for a manifest in the writer's form: its covered text checked
        // against the stated checksum, then read as the struct it is. Anything else, and
        // every error, goes the full way below, which says what is wrong.
        if let Some((stated, covered)) = stated_and_covered(bytes) {
            if stated == checksum_of(&covered).as_bytes() {
                if let Ok(m) = serde_json::from_slice::<Manifest>(&covered) {
                    if m.format == FORMAT_NAME && m.format_version == FORMAT_VERSION && m.validate().is_ok() {
                        return Ok(m);
                    }
                }
            }
        }
        let value: serde_json::Value =
            serde_json::from_slice(bytes).map_err(|e| Error::Corruption(format!("{what} is not valid JSON: {e}")))?;
        let version = value.get("format_version").and_then(|v| v.as_u64());
        if value.get("format").and_then(|v| v.as_str()) != Some(FORMAT_NAME) {
            return Err(Error::Corruption(format!("{what} is not a strata manifest")));
        }
        match version {
            Some(v) if v == FORMAT_VERSION as u64 => {}
            Some(v) => {
                return Err(Error::Compatibility(format!(
                    "{what} uses format version {v}; this build of strata reads version {FORMAT_VERSION}"
                )))
            }
            None => return Err(Error::Corruption(format!("{what} has no format_version"))),
        }
        let mut value = value;
        // Manifests carry a checksum of their content (older ones may not): a flipped bit
        // in an attribute or a name must not read as different metadata.
        if let Some(stated) = value.as_object_mut().and_then(|o| o.remove(CHECKSUM_KEY)) {
            if stated.as_str() != Some(checksum_text(&value).as_str()) {
                return Err(Error::Corruption(format!("{what} does not match its checksum")));
            }
        }
        // Read from text, as a value cannot give the plan's text back (RawJson).
        let m: Manifest = serde_json::from_str(&value.to_string())
            .map_err(|e| Error::Corruption(format!("{what} does not match format v1: {e}")))?;
        m.validate().map_err(|e| match e {
            Error::InvalidArgument(msg) => Error::Corruption(format!("{what}: {msg}")),
            other => other,
        })?;
        Ok(m)
    }

    /// The manifest as stored: pretty JSON with a checksum of its content.
    pub fn to_json(&self) -> Vec<u8> {
        // Serialising plain structs cannot fail.
        let mut value = serde_json::to_value(self).unwrap_or_default();
        let sum = checksum_text(&value);
        if let Some(o) = value.as_object_mut() {
            o.insert(CHECKSUM_KEY.into(), sum.into());
        }
        serde_json::to_vec_pretty(&value).unwrap_or_default()
    }

    pub fn dim(&self, name: &str) -> Option<&Dim> {
        self.dims.iter().find(|d| d.name == name)
    }

    /// The coordinate variable of dimension `dim`: 1-D, named after it (NetCDF's rule).
    pub fn coordinate(&self, dim: &str) -> Option<&Variable> {
        self.variables.iter().find(|v| v.name == dim && v.is_coordinate())
    }

    /// The bytes a download of the whole dataset moves: the files it indexes in place, or
    /// else the store's own files.
    pub fn download_bytes(&self) -> u64 {
        let external: u64 = self.files.iter().filter(|f| f.external).map(|f| f.size).sum();
        if external > 0 {
            external
        } else {
            self.files.iter().map(|f| f.size).sum()
        }
    }

    pub fn variable(&self, name: &str) -> Result<(usize, &Variable)> {
        self.variables.iter().enumerate().find(|(_, v)| v.name == name).ok_or_else(|| {
            let names: Vec<&str> = self.variables.iter().map(|v| v.name.as_str()).collect();
            Error::InvalidArgument(format!("no variable '{name}' (variables: {})", names.join(", ")))
        })
    }

    pub fn shape(&self, var: &Variable) -> Vec<u64> {
        var.dims.iter().map(|d| self.dim(d).map_or(0, |d| d.size)).collect()
    }

    /// The file this store indexes in place, if it is such a store.
    pub fn source(&self) -> Option<&FileEntry> {
        self.files.iter().find(|f| f.external)
    }

    /// The bytes of `var`'s values at its current shape.
    pub fn bytes(&self, var: &Variable) -> u64 {
        self.shape(var).iter().product::<u64>() * var.dtype.size() as u64
    }

    pub fn is_record_var(&self, var: &Variable) -> bool {
        self.record_dim.as_ref().is_some_and(|r| var.dims.first() == Some(r))
    }

    /// Checks every rule of format v1 that JSON parsing alone does not.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(Error::InvalidArgument(m));
        let mut names = HashSet::new();
        for d in &self.dims {
            if !names.insert(&d.name) {
                return bad(format!("dimension '{}' is defined twice", d.name));
            }
        }
        if let Some(r) = &self.record_dim {
            if self.dim(r).is_none() {
                return bad(format!("record dimension '{r}' is not a dimension"));
            }
            if self.slab_records == 0 {
                return bad("slab_records must be at least 1".into());
            }
        }
        if self.layout.order.is_empty() || !self.layout.order.contains(&Level::S) {
            return bad(format!("layout order '{}' must contain S", self.layout.describe()));
        }
        let mut vnames = HashSet::new();
        for v in &self.variables {
            if !vnames.insert(&v.name) {
                return bad(format!("variable '{}' is defined twice", v.name));
            }
            for (i, d) in v.dims.iter().enumerate() {
                if self.dim(d).is_none() {
                    return bad(format!("variable '{}' uses unknown dimension '{d}'", v.name));
                }
                if i > 0 && self.record_dim.as_deref() == Some(d.as_str()) {
                    return bad(format!("variable '{}' has the record dimension '{d}' but not first", v.name));
                }
            }
            let shape = self.shape(v);
            let elements: u64 = shape.iter().product();
            match (v.dtype, &v.chunking, &v.inline_strings) {
                (DType::String, None, Some(values)) => {
                    if self.is_record_var(v) {
                        return bad(format!("string variable '{}' cannot use the record dimension", v.name));
                    }
                    if values.len() as u64 != elements {
                        return bad(format!(
                            "string variable '{}' has {} values for shape {shape:?}",
                            v.name,
                            values.len()
                        ));
                    }
                }
                (DType::String, _, _) => return bad(format!("string variable '{}' must be inline", v.name)),
                (_, Some(c), None) => {
                    let n = v.dims.len();
                    if c.chunk.len() != n || c.subchunk.len() != n {
                        return bad(format!("variable '{}': chunk shapes must have {n} dimensions", v.name));
                    }
                    if c.chunk.iter().chain(&c.subchunk).any(|&x| x == 0)
                        || c.subchunk.iter().zip(&c.chunk).any(|(s, c)| s > c)
                    {
                        return bad(format!(
                            "variable '{}': bad chunk {:?} / sub-chunk {:?}",
                            v.name, c.chunk, c.subchunk
                        ));
                    }
                    if self.is_record_var(v) && c.chunk[0] > self.slab_records {
                        return bad(format!("variable '{}': chunk exceeds slab_records", v.name));
                    }
                    if v.codecs.is_empty() || v.codecs.len() > 255 {
                        return bad(format!("variable '{}' needs 1 to 255 codec chains", v.name));
                    }
                }
                _ => return bad(format!("variable '{}' must have chunking (and no inline values)", v.name)),
            }
        }
        let files: HashSet<&str> = self.files.iter().map(|f| f.path.as_str()).collect();
        for f in self.files.iter().filter(|f| f.external) {
            crate::storage::check_key(&f.path)?;
            if self.slabs.iter().any(|s| s.index == f.path) {
                return bad(format!("file '{}' indexed in place cannot be an index file", f.path));
            }
        }
        let mut next_record = 0;
        let mut slab_ids = HashSet::new();
        for s in &self.slabs {
            if !slab_ids.insert(s.id) {
                return bad(format!("slab id {} is used twice", s.id));
            }
            if !files.contains(s.data.as_str()) || !files.contains(s.index.as_str()) {
                return bad(format!("slab {} names files missing from the file list", s.id));
            }
            if let Some([start, count]) = s.records {
                if start != next_record || count == 0 {
                    return bad(format!(
                        "slab {} covers records {start}+{count}, expected to start at {next_record}",
                        s.id
                    ));
                }
                next_record += count;
            }
        }
        if let Some(r) = &self.record_dim {
            let size = self.dim(r).map_or(0, |d| d.size);
            if size != next_record {
                return bad(format!("record dimension '{r}' has size {size} but slabs hold {next_record} records"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_summary_names_order_bins_and_groups() {
        assert_eq!(Layout::space_only().summary(), "S");
        let edges = Layout {
            order: vec![Level::V, Level::S],
            byte_groups: None,
            bins: Some(serde_json::json!({"method": "edges", "edges": [0.0, 10.0]})),
        };
        assert_eq!(edges.summary(), "V-S, 3 bins by edges");
        let groups = Layout {
            order: vec![Level::M, Level::S],
            byte_groups: Some(serde_json::json!({"f32": [2, 1, 1]})),
            bins: Some(serde_json::json!({"method": "equal-width", "count": 4})),
        };
        assert_eq!(groups.summary(), "M-S, 4 equal-width bins, byte groups f32=2,1,1");
    }

    #[test]
    fn a_checksum_key_damaged_is_corruption_and_one_never_written_is_not() {
        let m = Manifest {
            format: FORMAT_NAME.into(),
            format_version: FORMAT_VERSION,
            version: 1,
            parent: None,
            created_ms: 0,
            message: "test".into(),
            dims: vec![],
            record_dim: None,
            slab_records: 1,
            attrs: vec![],
            variables: vec![],
            layout: Layout::space_only(),
            slabs: vec![],
            files: vec![],
        };
        let text = String::from_utf8(m.to_json()).unwrap();
        assert_eq!(Manifest::from_json(text.as_bytes(), "v1").unwrap(), m);
        // One bit flipped in the key: the check would be skipped as if the field were absent.
        let renamed = text.replace("\"checksum\"", "\"bhecksum\"");
        let err = Manifest::from_json(renamed.as_bytes(), "v1").unwrap_err();
        assert_eq!(err.kind(), crate::ErrorKind::Corruption, "{err}");
        // Manifests written before checksums existed still read.
        let mut value: serde_json::Value = serde_json::from_str(&text).unwrap();
        value.as_object_mut().unwrap().remove(CHECKSUM_KEY);
        assert_eq!(Manifest::from_json(&serde_json::to_vec(&value).unwrap(), "v1").unwrap(), m);
    }
}

#[cfg(test)]
mod quick_check {
    use super::*;

    /// The stored manifests of every golden store (every codec and layout level).
    fn golden() -> Vec<(String, Vec<u8>)> {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/golden/v1");
        let mut found = Vec::new();
        let mut dirs = vec![root];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    dirs.push(path);
                } else if path.parent().is_some_and(|p| p.ends_with("manifests")) {
                    found.push((path.display().to_string(), std::fs::read(&path).unwrap()));
                }
            }
        }
        assert!(found.len() >= 15, "golden manifests: {}", found.len());
        found
    }

    /// The covered text taken from the stored text is what the full check computes, and
    /// both ways read the same manifest: on every golden manifest as today's writer
    /// writes it (most golden ones predate checksums, and read the full way as stored).
    #[test]
    fn the_quick_check_covers_what_the_full_check_covers() {
        for (path, stored) in golden() {
            let m = Manifest::from_json(&stored, &path).unwrap();
            let bytes = m.to_json();
            let (stated, covered) = stated_and_covered(&bytes).unwrap_or_else(|| panic!("{path}"));
            let mut value: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
            let full_stated = value.as_object_mut().unwrap().remove(CHECKSUM_KEY).unwrap();
            let mut full = Vec::new();
            canonical(&value, &mut full);
            assert_eq!(covered, full, "{path}");
            assert_eq!(stated, full_stated.as_str().unwrap().as_bytes(), "{path}");
            // Compared as written (NaN attributes make the structs unequal to themselves).
            assert_eq!(Manifest::from_json(&bytes, &path).unwrap().to_json(), bytes, "{path}");
        }
    }

    /// Texts not in the writer's form take the full way: reformatted or reordered ones
    /// still read, damaged ones are still corruption.
    #[test]
    fn other_forms_take_the_full_check() {
        let (path, stored) = golden().swap_remove(0);
        let bytes = Manifest::from_json(&stored, &path).unwrap().to_json();
        let value: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        // Compact, or with the checksum member moved last.
        let compact = serde_json::to_vec(&value).unwrap();
        assert!(stated_and_covered(&compact).is_some());
        assert_eq!(Manifest::from_json(&compact, "compact").unwrap().to_json(), bytes);
        let text = String::from_utf8(compact).unwrap();
        let sum = value[CHECKSUM_KEY].as_str().unwrap();
        let member = format!("\"checksum\":\"{sum}\",");
        let moved = text.replacen(&member, "", 1);
        let last = format!("{},\"checksum\":\"{sum}\"}}", &moved[..moved.len() - 1]);
        // Last, the member is cut with the comma before it: the same covered text.
        assert_eq!(stated_and_covered(last.as_bytes()), stated_and_covered(text.as_bytes()));
        assert_eq!(Manifest::from_json(last.as_bytes(), "last").unwrap().to_json(), bytes);
        // A flipped digit anywhere is corruption, whichever way it is read.
        for at in [30, text.len() / 2, text.len() - 20] {
            let mut damaged = text.clone().into_bytes();
            if damaged[at].is_ascii_digit() {
                damaged[at] = if damaged[at] == b'1' { b'2' } else { b'1' };
            } else {
                damaged[at] ^= 0x20;
            }
            assert!(Manifest::from_json(&damaged, "damaged").is_err(), "byte {at}");
        }
        for bad in [&b"{"[..], b"{\"checksum\":\"x\"", b"", b"[]", b"{\"a\":\"\\"] {
            assert!(stated_and_covered(bad).is_none() || Manifest::from_json(bad, "bad").is_err());
            assert!(Manifest::from_json(bad, "bad").is_err());
        }
    }
}
