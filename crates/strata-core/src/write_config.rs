//! Layout by configuration (PARLO's idea): a TOML file sets how a store is laid out and
//! compressed — per store and per variable — so the program that writes it changes layout
//! with no code change. Every writer reads it: a file passed to the writer, or the one
//! `STRATA_CONFIG` names. What the program passes explicitly wins over the file.
//!
//! ```toml
//! version = 1
//! layout = "V-S"              # levels in order: S (space), V (value bins), M (precision)
//! bins = 16
//! binning = "equal-frequency"
//! codec = "auto"              # or a chain such as "shuffle+zstd:3"
//! objective = "ratio"         # for auto: ratio, speed or balanced
//! chunks = { lat = 90, lon = 180 }
//! shape_rule = "proportional" # automatic shapes: auto (default), cube, proportional or slices
//! slab_records = 24
//! index_frame_bytes = 1048576 # level V: positions beyond this go in frames read on demand
//!
//! [variables.sst]
//! codec = "auto"
//! error_bound = "abs=0.01"
//! chunks = { lat = 45 }
//! ```

use crate::chunking::ShapeRule;
use crate::error::{Error, Result};
use crate::writer::WriterOptions;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;
use strata_codecs::analyzer::Objective;
use strata_codecs::plan::CodecRequest;

/// The environment variable naming a configuration file.
pub const CONFIG_ENV: &str = "STRATA_CONFIG";
/// The version of the file's fields this reader knows.
pub const CONFIG_VERSION: u32 = 1;

/// How one variable is compressed and chunked (a chain, or `auto` with an objective and
/// an error bound).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VariableConfig {
    pub codec: Option<String>,
    pub objective: Option<Objective>,
    pub error_bound: Option<String>,
    #[serde(default)]
    pub chunks: BTreeMap<String, u64>,
    #[serde(default)]
    pub subchunks: BTreeMap<String, u64>,
}

/// A configuration file. Layout order and bins are the store's (one layout per store).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WriteConfig {
    pub version: Option<u32>,
    pub layout: Option<String>,
    pub bins: Option<u32>,
    pub binning: Option<String>,
    #[serde(default)]
    pub byte_groups: BTreeMap<String, Vec<usize>>,
    pub codec: Option<String>,
    pub objective: Option<Objective>,
    pub error_bound: Option<String>,
    #[serde(default)]
    pub chunks: BTreeMap<String, u64>,
    #[serde(default)]
    pub subchunks: BTreeMap<String, u64>,
    pub shape_rule: Option<ShapeRule>,
    pub chunk_bytes: Option<u64>,
    pub subchunk_bytes: Option<u64>,
    pub slab_bytes: Option<u64>,
    pub slab_records: Option<u64>,
    pub index_frame_bytes: Option<u64>,
    #[serde(default)]
    pub variables: BTreeMap<String, VariableConfig>,
}

/// `codec`, `objective` and `error_bound` as a request: `auto` (or an objective or bound
/// alone) asks the analyzer; anything else is a chain.
fn request_of(
    codec: Option<&str>,
    objective: Option<Objective>,
    bound: Option<&str>,
    at: &str,
) -> Result<Option<CodecRequest>> {
    match codec.map(str::trim) {
        Some("auto") | None if objective.is_some() || bound.is_some() || codec.is_some() => {
            Ok(Some(CodecRequest::Auto {
                objective: objective.unwrap_or(Objective::Balanced),
                error_bound: bound.map(str::to_string),
            }))
        }
        None => Ok(None),
        Some(chain) if objective.is_none() && bound.is_none() => Ok(Some(CodecRequest::Chain { chain: chain.into() })),
        Some(chain) => Err(Error::InvalidArgument(format!(
            "{at}: objective and error_bound go with codec = \"auto\", not with the chain '{chain}' (a lossy chain \
             carries its own bound, e.g. 'sz:abs=0.01')"
        ))),
    }
}

impl WriteConfig {
    /// Reads a configuration's text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Self> {
        let config: WriteConfig =
            toml::from_str(text).map_err(|e| Error::InvalidArgument(format!("configuration {origin}: {e}")))?;
        if let Some(v) = config.version.filter(|&v| v != CONFIG_VERSION) {
            return Err(Error::InvalidArgument(format!(
                "configuration {origin} is version {v}; this strata reads version {CONFIG_VERSION}"
            )));
        }
        // Resolved once here so that a bad entry is reported with the file's name.
        request_of(config.codec.as_deref(), config.objective, config.error_bound.as_deref(), origin)?;
        for (name, v) in &config.variables {
            request_of(
                v.codec.as_deref(),
                v.objective,
                v.error_bound.as_deref(),
                &format!("{origin} [variables.{name}]"),
            )?;
        }
        Ok(config)
    }

    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::InvalidArgument(format!("configuration {}: {e}", path.display())))?;
        Self::parse(&text, &path.display().to_string())
    }

    /// The file `STRATA_CONFIG` names, if it is set (and not empty).
    pub fn from_env() -> Result<Option<Self>> {
        match std::env::var_os(CONFIG_ENV) {
            Some(p) if !p.is_empty() => Self::load(Path::new(&p)).map(Some),
            _ => Ok(None),
        }
    }

    /// Fills what `options` leaves unset from this file; what is set stays.
    pub fn apply(&self, options: &mut WriterOptions) -> Result<()> {
        fn fill<T: Clone>(slot: &mut Option<T>, value: &Option<T>) {
            if slot.is_none() {
                *slot = value.clone();
            }
        }
        fn merge(into: &mut BTreeMap<String, u64>, from: &BTreeMap<String, u64>) {
            for (k, v) in from {
                into.entry(k.clone()).or_insert(*v);
            }
        }
        fill(&mut options.layout, &self.layout);
        fill(&mut options.bins, &self.bins);
        fill(&mut options.binning, &self.binning);
        fill(&mut options.shape_rule, &self.shape_rule);
        fill(&mut options.chunk_bytes, &self.chunk_bytes);
        fill(&mut options.subchunk_bytes, &self.subchunk_bytes);
        fill(&mut options.slab_bytes, &self.slab_bytes);
        fill(&mut options.slab_records, &self.slab_records);
        fill(&mut options.index_frame_bytes, &self.index_frame_bytes);
        for (k, v) in &self.byte_groups {
            options.byte_groups.entry(k.clone()).or_insert_with(|| v.clone());
        }
        merge(&mut options.chunks, &self.chunks);
        merge(&mut options.subchunks, &self.subchunks);
        if options.codec.is_none() && options.request.is_none() {
            options.request = request_of(self.codec.as_deref(), self.objective, self.error_bound.as_deref(), "")?;
        }
        for (name, v) in &self.variables {
            if !options.variable_codecs.contains_key(name) && !options.variable_requests.contains_key(name) {
                if let Some(r) = request_of(v.codec.as_deref(), v.objective, v.error_bound.as_deref(), name)? {
                    options.variable_requests.insert(name.clone(), r);
                }
            }
            for (key, from) in
                [(&mut options.variable_chunks, &v.chunks), (&mut options.variable_subchunks, &v.subchunks)]
            {
                if !from.is_empty() {
                    merge(key.entry(name.clone()).or_default(), from);
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_fills_what_the_program_left_unset() {
        let config = WriteConfig::parse(
            r#"
            version = 1
            layout = "V-S"
            bins = 8
            codec = "auto"
            objective = "ratio"
            chunks = { lat = 10, lon = 20 }
            shape_rule = "proportional"
            [variables.sst]
            codec = "sz:abs=0.01"
            chunks = { lat = 5 }
            [variables.ice]
            error_bound = "rel=1e-3"
            "#,
            "test.toml",
        )
        .unwrap();
        let mut options = WriterOptions { layout: Some("S".into()), ..Default::default() };
        options.chunks.insert("lon".into(), 7);
        config.apply(&mut options).unwrap();
        assert_eq!(options.layout.as_deref(), Some("S"));
        assert_eq!(options.bins, Some(8));
        assert_eq!(options.chunks["lon"], 7);
        assert_eq!(options.chunks["lat"], 10);
        assert_eq!(options.shape_rule, Some(ShapeRule::Proportional));
        assert_eq!(options.request, Some(CodecRequest::Auto { objective: Objective::Ratio, error_bound: None }));
        assert_eq!(options.variable_requests["sst"], CodecRequest::Chain { chain: "sz:abs=0.01".into() });
        assert_eq!(
            options.variable_requests["ice"],
            CodecRequest::Auto { objective: Objective::Balanced, error_bound: Some("rel=1e-3".into()) }
        );
        assert_eq!(options.variable_chunks["sst"]["lat"], 5);
    }

    #[test]
    fn bad_files_name_themselves_and_the_fault() {
        for (text, needle) in [
            ("layuot = 'S'", "unknown field `layuot`"),
            ("version = 2", "version 2"),
            ("codec = 'zstd:3'\nobjective = 'ratio'", "go with codec = \"auto\""),
            ("[variables.x]\nchunks = { lat = 'a' }", "invalid type"),
            ("bins = ", "test.toml"),
            ("shape_rule = 'cubic'", "unknown variant `cubic`"),
        ] {
            let err = WriteConfig::parse(text, "test.toml").unwrap_err().to_string();
            assert!(err.contains("test.toml") && err.contains(needle), "{text}: {err}");
        }
    }
}
