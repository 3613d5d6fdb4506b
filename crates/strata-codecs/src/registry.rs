//! Builds codecs from their [`CodecSpec`] by name.

use crate::backend::{Backend, RawBackend, ZstdBackend};
use crate::chain::CodecChain;
use crate::error::{CodecError, Result};
use crate::spec::{CodecSpec, ElementContext};
use crate::transform::{ShuffleTransform, Transform};

/// Every codec name this build can read, with its kind.
pub const KNOWN: &[(&str, &str)] = &[("shuffle", "transform"), ("zstd", "backend"), ("raw", "backend")];

fn reject_unknown_keys(spec: &CodecSpec, allowed: &[&str]) -> Result<()> {
    for key in spec.configuration.keys() {
        if !allowed.contains(&key.as_str()) {
            return Err(CodecError::InvalidSpec(format!(
                "codec '{}' has no option '{key}' (options: {allowed:?})",
                spec.name
            )));
        }
    }
    Ok(())
}

pub fn transform(spec: &CodecSpec, ctx: ElementContext) -> Result<Box<dyn Transform>> {
    match spec.name.as_str() {
        "shuffle" => {
            reject_unknown_keys(spec, &[])?;
            Ok(Box::new(ShuffleTransform { element_size: ctx.element_size }))
        }
        other => Err(unknown(other, "transform")),
    }
}

pub fn backend(spec: &CodecSpec) -> Result<Box<dyn Backend>> {
    match spec.name.as_str() {
        "raw" => {
            reject_unknown_keys(spec, &[])?;
            Ok(Box::new(RawBackend))
        }
        "zstd" => {
            reject_unknown_keys(spec, &["level"])?;
            let level = match spec.configuration.get("level") {
                None => ZstdBackend::DEFAULT_LEVEL,
                Some(v) => v.as_i64().filter(|l| (-7..=22).contains(l)).ok_or_else(|| {
                    CodecError::InvalidSpec(format!("zstd level must be an integer in -7..=22, got {v}"))
                })? as i32,
            };
            Ok(Box::new(ZstdBackend { level }))
        }
        other => Err(unknown(other, "backend")),
    }
}

fn unknown(name: &str, kind: &str) -> CodecError {
    let names: Vec<&str> = KNOWN.iter().filter(|(_, k)| *k == kind).map(|(n, _)| *n).collect();
    CodecError::InvalidSpec(format!("unknown {kind} codec '{name}' (known: {})", names.join(", ")))
}

/// Builds a chain: every spec but the last is a transform, the last is the backend.
pub fn chain(specs: &[CodecSpec], ctx: ElementContext) -> Result<CodecChain> {
    let (last, init) =
        specs.split_last().ok_or_else(|| CodecError::InvalidSpec("a codec chain needs at least a backend".into()))?;
    let transforms = init.iter().map(|s| transform(s, ctx)).collect::<Result<Vec<_>>>()?;
    Ok(CodecChain::new(transforms, backend(last)?))
}

/// Parses a short chain description such as `shuffle+zstd:5` or `raw`.
pub fn parse_chain(text: &str) -> Result<Vec<CodecSpec>> {
    text.split('+')
        .map(|part| {
            let part = part.trim();
            let (name, arg) = match part.split_once(':') {
                Some((n, a)) => (n, Some(a)),
                None => (part, None),
            };
            if name.is_empty() {
                return Err(CodecError::InvalidSpec(format!("empty codec name in '{text}'")));
            }
            let mut spec = CodecSpec::new(name);
            if let Some(arg) = arg {
                let level: i64 =
                    arg.parse().map_err(|_| CodecError::InvalidSpec(format!("'{arg}' is not a level in '{text}'")))?;
                spec = spec.with("level", level);
            }
            Ok(spec)
        })
        .collect()
}

/// The chain format v1 uses when nothing else is asked for: byte shuffle, then zstd.
pub fn default_chain() -> Vec<CodecSpec> {
    vec![CodecSpec::new("shuffle"), CodecSpec::new("zstd").with("level", ZstdBackend::DEFAULT_LEVEL)]
}
