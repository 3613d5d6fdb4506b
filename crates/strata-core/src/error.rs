use thiserror::Error;

/// What kind of failure an [`enum@Error`] is: the part a caller can act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// Reading or writing the underlying storage failed.
    Io,
    /// Stored bytes are not what the format or the checksums say they must be.
    Corruption,
    /// The caller asked for something impossible (bad selection, unknown variable, bad option).
    InvalidArgument,
    /// The store was written by an incompatible format version, or data does not fit the schema.
    Compatibility,
    /// A store, version or file does not exist.
    NotFound,
    /// Another writer committed first; nothing of this writer was made visible.
    Conflict,
}

#[derive(Debug, Error)]
pub enum Error {
    #[error("I/O error on '{path}': {source}")]
    Io { path: String, source: std::io::Error },
    #[error("corrupt store: {0}")]
    Corruption(String),
    #[error("{0}")]
    InvalidArgument(String),
    #[error("incompatible: {0}")]
    Compatibility(String),
    #[error("not found: {0}")]
    NotFound(String),
    #[error("commit conflict: {0}")]
    Conflict(String),
}

impl Error {
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Io { .. } => ErrorKind::Io,
            Error::Corruption(_) => ErrorKind::Corruption,
            Error::InvalidArgument(_) => ErrorKind::InvalidArgument,
            Error::Compatibility(_) => ErrorKind::Compatibility,
            Error::NotFound(_) => ErrorKind::NotFound,
            Error::Conflict(_) => ErrorKind::Conflict,
        }
    }

    pub fn io(path: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io { path: path.into(), source }
    }
}

impl From<strata_codecs::CodecError> for Error {
    fn from(e: strata_codecs::CodecError) -> Self {
        match e {
            strata_codecs::CodecError::Corrupt { .. } => Error::Corruption(e.to_string()),
            strata_codecs::CodecError::InvalidSpec(_) => Error::InvalidArgument(e.to_string()),
            strata_codecs::CodecError::Encode { .. } => {
                Error::Io { path: String::new(), source: std::io::Error::other(e.to_string()) }
            }
        }
    }
}

pub type Result<T> = std::result::Result<T, Error>;
