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

/// What a codec promises. Readers use it to decide, e.g., whether a partial decode is
/// possible; writers refuse lossy codecs unless the user asked for a bound.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Capabilities {
    /// Decoding returns exactly the encoded bytes.
    pub lossless: bool,
    /// A prefix of the output can be decoded without decoding the rest.
    pub partial_decode: bool,
    /// For lossy codecs: the largest relative error of any finite element.
    pub max_relative_error: Option<f64>,
}

impl Capabilities {
    pub const LOSSLESS: Self = Self { lossless: true, partial_decode: false, max_relative_error: None };
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
