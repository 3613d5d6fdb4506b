use serde::{Deserialize, Serialize};

/// A codec as named in a manifest: `{"name": "zstd", "configuration": {"level": 3}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CodecSpec {
    pub name: String,
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub configuration: serde_json::Map<String, serde_json::Value>,
}

impl CodecSpec {
    pub fn new(name: &str) -> Self {
        Self { name: name.to_string(), configuration: serde_json::Map::new() }
    }

    pub fn with(mut self, key: &str, value: impl Into<serde_json::Value>) -> Self {
        self.configuration.insert(key.to_string(), value.into());
        self
    }
}

/// The error a lossy codec promises for every finite element `x` decoded as `y`.
/// Non-finite elements (NaN with its payload, ±inf) are always kept exactly.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ErrorBound {
    /// `|x - y| <= e`.
    Absolute(f64),
    /// `|x - y| <= e * (max - min)`, the range taken over the finite values of each
    /// segment, hence also `<= e` times the range of the whole variable.
    RangeRelative(f64),
    /// `|x - y| <= e * max(|x|, smallest normal)` (bit rounding).
    PointwiseRelative(f64),
}

impl ErrorBound {
    /// The absolute bound for one element `x` of a segment whose finite values span `range`.
    pub fn absolute_for(&self, x: f64, range: f64, smallest_normal: f64) -> f64 {
        match *self {
            ErrorBound::Absolute(e) => e,
            ErrorBound::RangeRelative(e) => e * range,
            ErrorBound::PointwiseRelative(e) => e * x.abs().max(smallest_normal),
        }
    }

    /// Short text as used in chain descriptions: `abs=0.01`, `rel=0.0001`, `pointwise=0.0002`.
    pub fn describe(&self) -> String {
        match *self {
            ErrorBound::Absolute(e) => format!("abs={e}"),
            ErrorBound::RangeRelative(e) => format!("rel={e}"),
            ErrorBound::PointwiseRelative(e) => format!("pointwise={e}"),
        }
    }
}

/// What a codec promises. Readers use it to decide, e.g., whether a partial decode is
/// possible; writers refuse lossy codecs unless the user asked for a bound.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Capabilities {
    /// Decoding returns exactly the encoded bytes.
    pub lossless: bool,
    /// A prefix of the output can be decoded without decoding the rest.
    pub partial_decode: bool,
    /// For lossy codecs: the error every finite element is guaranteed to hold.
    pub error_bound: Option<ErrorBound>,
}

impl Capabilities {
    pub const LOSSLESS: Self = Self { lossless: true, partial_decode: false, error_bound: None };
}

/// A codec's nominal throughput per core, in MB/s of decoded data, on smooth float fields.
///
/// The planner ranks chains by these declared figures, not by timings taken while it
/// runs: a plan must not change with the machine's load (the same field imported on a busy
/// and an idle machine got different chains when timings decided). The figures are medians
/// of `strata analyze` on the real datasets of `../shared/data` on the reference machine
/// (2-core AMD EPYC, 2026-11); docs/codecs.md lists them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Speed {
    pub encode_mb_s: f64,
    pub decode_mb_s: f64,
}

impl Speed {
    pub const fn new(encode_mb_s: f64, decode_mb_s: f64) -> Self {
        Self { encode_mb_s, decode_mb_s }
    }

    /// Stages run one after another: their times per byte add up.
    pub fn then(self, next: Speed) -> Speed {
        Speed {
            encode_mb_s: 1.0 / (1.0 / self.encode_mb_s + 1.0 / next.encode_mb_s),
            decode_mb_s: 1.0 / (1.0 / self.decode_mb_s + 1.0 / next.decode_mb_s),
        }
    }
}

/// Element types a chain can see (NetCDF `char` is `U8`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NumType {
    I8,
    U8,
    I16,
    U16,
    I32,
    U32,
    I64,
    U64,
    F32,
    F64,
}

impl NumType {
    pub fn size(self) -> usize {
        match self {
            NumType::I8 | NumType::U8 => 1,
            NumType::I16 | NumType::U16 => 2,
            NumType::I32 | NumType::U32 | NumType::F32 => 4,
            NumType::I64 | NumType::U64 | NumType::F64 => 8,
        }
    }

    pub fn is_float(self) -> bool {
        matches!(self, NumType::F32 | NumType::F64)
    }
}

/// Facts about the elements a chain will see; fixed per variable. The shape of each
/// segment is given to every encode and decode call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ElementContext {
    pub dtype: NumType,
}

impl ElementContext {
    pub fn new(dtype: NumType) -> Self {
        Self { dtype }
    }

    pub fn element_size(&self) -> usize {
        self.dtype.size()
    }
}
