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
/// possible; the planner will use it to refuse lossy codecs where exactness is required.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Capabilities {
    /// Decoding returns exactly the encoded bytes.
    pub lossless: bool,
    /// A prefix of the output can be decoded without decoding the rest.
    pub partial_decode: bool,
}

/// Facts about the elements a chain will see, needed by element-aware transforms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ElementContext {
    /// Size of one element in bytes (1 for chars and bytes).
    pub element_size: usize,
}
