use thiserror::Error;

/// Why a codec failed. Decoders never panic on bad input: they return [`CodecError::Corrupt`].
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum CodecError {
    /// The encoded bytes cannot be decoded (truncated, garbled, wrong length).
    #[error("corrupt encoded data in codec '{codec}': {detail}")]
    Corrupt { codec: &'static str, detail: String },
    /// A codec specification names an unknown codec or carries a bad configuration.
    #[error("invalid codec specification: {0}")]
    InvalidSpec(String),
    /// The codec could not encode the input (e.g. the backend library reported an error).
    #[error("codec '{codec}' failed to encode: {detail}")]
    Encode { codec: &'static str, detail: String },
}

pub type Result<T> = std::result::Result<T, CodecError>;
