//! What an operator sets: where the stores are, where to listen, and the limits.

use std::path::PathBuf;

/// Bounds on what one request may cost.
#[derive(Debug, Clone, PartialEq)]
pub struct Limits {
    /// Largest response body, in bytes, before encoding (413 beyond it).
    pub max_result_bytes: u64,
    /// Piece size results are read and sent in: memory per response in flight is about
    /// two pieces.
    pub piece_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_result_bytes: 16 << 30, piece_bytes: 4 << 20 }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ServerConfig {
    /// Every store under this directory is served, named by its path relative to it.
    pub root: PathBuf,
    pub host: String,
    pub port: u16,
    /// Stop after answering this many requests (tests and benchmarks bound their servers).
    pub max_requests: Option<u64>,
    /// Stop after this many seconds.
    pub max_seconds: Option<f64>,
    /// No request log on stderr.
    pub quiet: bool,
    pub limits: Limits,
}

impl ServerConfig {
    /// Serves `root` on 127.0.0.1 at `port` with default limits.
    pub fn new(root: impl Into<PathBuf>, port: u16) -> Self {
        ServerConfig {
            root: root.into(),
            host: "127.0.0.1".into(),
            port,
            max_requests: None,
            max_seconds: None,
            quiet: false,
            limits: Limits::default(),
        }
    }
}
