//! What an operator sets: where the stores are, where to listen, the limits and the tokens.
//! The command line sets the common options; `--config server.toml` sets all of them
//! (docs/server.md shows a file). Options given on the command line win over the file.

use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Bounds on what one request may cost.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Largest result, in bytes before encoding (413 beyond it).
    pub max_result_bytes: u64,
    /// Seconds a request may take until its answer starts (408 beyond it). A streamed body
    /// is bounded by `max_result_bytes` instead.
    pub query_seconds: f64,
    /// Requests one client address may have in flight, bodies included (429 beyond it).
    pub concurrent_per_client: usize,
    /// Piece size results are read and sent in: memory per response in flight is about
    /// three pieces.
    pub piece_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_result_bytes: 16 << 30, query_seconds: 60.0, concurrent_per_client: 16, piece_bytes: 4 << 20 }
    }
}

/// Per-dataset settings.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatasetConfig {
    /// When set, the dataset answers only requests carrying this token (`Authorization:
    /// Bearer TOKEN`, or HTTP Basic with the token as the password, which DAP clients send
    /// from a URL's `user:token@host`). A token opens its own dataset and no other.
    pub token: Option<String>,
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
    /// By dataset name.
    pub datasets: BTreeMap<String, DatasetConfig>,
    /// HTTPS: the certificate chain and the private key, PEM files (both, or neither).
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
}

/// What a command line gives (`strata serve`, `strata-serve`): each option set wins over
/// the config file, which wins over the defaults. Numbers come as given, unchecked: they are
/// checked here, once, for both commands.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ServeOptions {
    pub root: Option<PathBuf>,
    pub config: Option<PathBuf>,
    pub host: Option<String>,
    pub port: Option<i64>,
    pub max_requests: Option<i64>,
    pub max_seconds: Option<f64>,
    pub quiet: bool,
}

/// The longest `max_seconds` taken: a year (a timer much further out overflows).
const MAX_SECONDS: f64 = 365.0 * 86_400.0;

impl ServeOptions {
    /// The configuration these options make, or what is wrong with them.
    pub fn resolve(self) -> Result<ServerConfig, String> {
        let mut c = ServerConfig::new("", 8470);
        if let Some(file) = &self.config {
            c.load_file(file)?;
        }
        if let Some(r) = self.root {
            c.root = r;
        }
        if c.root.as_os_str().is_empty() {
            return Err("the directory to serve is missing (DIR, or root in the config file)".into());
        }
        if let Some(h) = self.host {
            c.host = h;
        }
        if let Some(p) = self.port {
            c.port = u16::try_from(p).map_err(|_| format!("port {p} is not 0-65535 (0 picks a free one)"))?;
        }
        if let Some(n) = self.max_requests {
            c.max_requests = Some(
                u64::try_from(n)
                    .ok()
                    .filter(|&n| n > 0)
                    .ok_or(format!("max requests {n}: give a count of 1 or more"))?,
            );
        }
        if let Some(s) = self.max_seconds {
            if !(s > 0.0 && s <= MAX_SECONDS) {
                return Err(format!("max seconds {s}: give a number of seconds above 0, at most a year"));
            }
            c.max_seconds = Some(s);
        }
        c.quiet = self.quiet;
        Ok(c)
    }
}

/// The file's form: every field optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    root: Option<PathBuf>,
    host: Option<String>,
    port: Option<u16>,
    #[serde(default)]
    limits: Limits,
    #[serde(default)]
    datasets: BTreeMap<String, DatasetConfig>,
    tls_cert: Option<PathBuf>,
    tls_key: Option<PathBuf>,
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
            datasets: BTreeMap::new(),
            tls_cert: None,
            tls_key: None,
        }
    }

    /// Reads a TOML file over this configuration (its `root`, relative to the file).
    pub fn load_file(&mut self, path: &Path) -> Result<(), String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        self.apply_toml(&text, path.parent().unwrap_or(Path::new("."))).map_err(|e| format!("{}: {e}", path.display()))
    }

    pub fn apply_toml(&mut self, text: &str, base: &Path) -> Result<(), String> {
        let file: FileConfig = toml::from_str(text).map_err(|e| e.to_string())?;
        if let Some(r) = file.root {
            self.root = base.join(r);
        }
        if let Some(h) = file.host {
            self.host = h;
        }
        if let Some(p) = file.port {
            self.port = p;
        }
        let l = &file.limits;
        if l.piece_bytes < 4096 || l.concurrent_per_client == 0 || l.query_seconds.is_nan() || l.query_seconds <= 0.0 {
            return Err("limits: piece_bytes must be at least 4096, concurrent_per_client at least 1 and \
                        query_seconds positive"
                .into());
        }
        self.limits = file.limits;
        for (name, d) in &file.datasets {
            if d.token.as_deref().is_some_and(|t| t.len() < 8) {
                return Err(format!("dataset '{name}': a token must have at least 8 characters"));
            }
        }
        self.datasets = file.datasets;
        if file.tls_cert.is_some() != file.tls_key.is_some() {
            return Err("TLS needs both tls_cert and tls_key".into());
        }
        self.tls_cert = file.tls_cert.map(|p| base.join(p));
        self.tls_key = file.tls_key.map(|p| base.join(p));
        Ok(())
    }

    /// The token dataset `name` requires, if any.
    pub fn token_for(&self, name: &str) -> Option<&str> {
        self.datasets.get(name).and_then(|d| d.token.as_deref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_line_numbers_are_checked_once_for_both_commands() {
        let o = |port, max_requests, max_seconds| ServeOptions {
            root: Some("stores".into()),
            port,
            max_requests,
            max_seconds,
            ..Default::default()
        };
        let c = o(Some(0), Some(3), Some(2.5)).resolve().unwrap();
        assert_eq!((c.port, c.max_requests, c.max_seconds), (0, Some(3), Some(2.5)));
        assert_eq!(o(None, None, None).resolve().unwrap().port, 8470);
        for bad in
            [o(Some(65536), None, None), o(Some(-1), None, None), o(None, Some(0), None), o(None, Some(-2), None)]
        {
            assert!(bad.resolve().is_err());
        }
        for s in [0.0, -5.0, f64::NAN, f64::INFINITY, 1e30] {
            let e = o(None, None, Some(s)).resolve().unwrap_err();
            assert!(e.contains("max seconds"), "{e}");
        }
        let e = ServeOptions::default().resolve().unwrap_err();
        assert!(e.contains("directory to serve is missing"), "{e}");
    }

    #[test]
    fn a_file_sets_limits_and_tokens() {
        let mut c = ServerConfig::new("x", 1);
        let text = "root = \"stores\"\nport = 9000\n[limits]\nmax_result_bytes = 1000\n\
                    [datasets.\"ocean/sic\"]\ntoken = \"s3cret-token\"\n";
        assert_eq!(c.apply_toml(text, Path::new("/etc/strata")), Ok(()));
        assert_eq!(c.root, PathBuf::from("/etc/strata/stores"));
        assert_eq!((c.port, c.limits.max_result_bytes, c.limits.piece_bytes), (9000, 1000, 4 << 20));
        assert_eq!(c.token_for("ocean/sic"), Some("s3cret-token"));
        assert_eq!(c.token_for("ersst"), None);
    }

    #[test]
    fn bad_files_are_refused_with_the_reason() {
        let mut c = ServerConfig::new("x", 1);
        for bad in ["port = \"x\"", "[limits]\npiece_bytes = 10", "colour = 1", "[datasets.a]\ntoken = \"short\""] {
            assert!(c.apply_toml(bad, Path::new(".")).is_err(), "{bad}");
        }
    }
}
