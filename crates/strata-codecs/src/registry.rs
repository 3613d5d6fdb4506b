//! Builds codecs from their [`CodecSpec`] by name.

use crate::backend::{Backend, ByteColumnsBackend, Lz4Backend, PcoBackend, RawBackend, ZstdBackend};
use crate::chain::CodecChain;
use crate::error::{CodecError, Result};
use crate::spec::{CodecSpec, ElementContext};
use crate::transform::{BitRoundTransform, NeighbourOp, NeighbourTransform, ShuffleTransform, Transform};

/// Every codec name this build can read: (name, kind, the option a short chain's `name:N` sets).
pub const KNOWN: &[(&str, &str, Option<&str>)] = &[
    ("shuffle", "transform", None),
    ("delta", "transform", Some("axis")),
    ("xor", "transform", Some("axis")),
    ("bitround", "transform (lossy)", Some("keepbits")),
    ("zstd", "backend", Some("level")),
    ("lz4", "backend", None),
    ("pco", "backend", Some("level")),
    ("bytecols", "backend", Some("level")),
    ("raw", "backend", None),
];

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

/// An integer option within `range`, or `default` when absent.
fn int_option(spec: &CodecSpec, key: &str, range: std::ops::RangeInclusive<i64>, default: i64) -> Result<i64> {
    match spec.configuration.get(key) {
        None => Ok(default),
        Some(v) => v.as_i64().filter(|x| range.contains(x)).ok_or_else(|| {
            CodecError::InvalidSpec(format!(
                "{} {key} must be an integer in {}..={}, got {v}",
                spec.name,
                range.start(),
                range.end()
            ))
        }),
    }
}

pub fn transform(spec: &CodecSpec, ctx: ElementContext) -> Result<Box<dyn Transform>> {
    match spec.name.as_str() {
        "shuffle" => {
            reject_unknown_keys(spec, &[])?;
            Ok(Box::new(ShuffleTransform { element_size: ctx.element_size() }))
        }
        "delta" | "xor" => {
            reject_unknown_keys(spec, &["axis"])?;
            let op = if spec.name == "delta" { NeighbourOp::Delta } else { NeighbourOp::Xor };
            let axis = int_option(spec, "axis", -32..=31, -1)?;
            Ok(Box::new(NeighbourTransform { op, axis, element_size: ctx.element_size() }))
        }
        "bitround" => {
            reject_unknown_keys(spec, &["keepbits"])?;
            // Integers pass through unchanged (one chain serves every variable of a store);
            // their keepbits is only checked against the f64 limit.
            let mantissa = BitRoundTransform::mantissa_bits(ctx.dtype).unwrap_or(52);
            if !spec.configuration.contains_key("keepbits") {
                return Err(CodecError::InvalidSpec("bitround needs an explicit keepbits (lossy)".into()));
            }
            let keepbits = int_option(spec, "keepbits", 0..=mantissa as i64, mantissa as i64)? as u32;
            Ok(Box::new(BitRoundTransform { keepbits, dtype: ctx.dtype }))
        }
        other => Err(unknown(other, "transform")),
    }
}

pub fn backend(spec: &CodecSpec, ctx: ElementContext) -> Result<Box<dyn Backend>> {
    match spec.name.as_str() {
        "raw" => {
            reject_unknown_keys(spec, &[])?;
            Ok(Box::new(RawBackend))
        }
        "zstd" => {
            reject_unknown_keys(spec, &["level"])?;
            let level = int_option(spec, "level", -7..=22, ZstdBackend::DEFAULT_LEVEL as i64)? as i32;
            Ok(Box::new(ZstdBackend { level }))
        }
        "lz4" => {
            reject_unknown_keys(spec, &[])?;
            Ok(Box::new(Lz4Backend))
        }
        "bytecols" => {
            reject_unknown_keys(spec, &["level"])?;
            let level = int_option(spec, "level", -7..=22, ZstdBackend::DEFAULT_LEVEL as i64)? as i32;
            Ok(Box::new(ByteColumnsBackend { level, element_size: ctx.element_size() }))
        }
        "pco" => {
            reject_unknown_keys(spec, &["level"])?;
            let level = int_option(spec, "level", 0..=12, PcoBackend::DEFAULT_LEVEL as i64)? as usize;
            Ok(Box::new(PcoBackend { level, dtype: ctx.dtype }))
        }
        other => Err(unknown(other, "backend")),
    }
}

fn unknown(name: &str, kind: &str) -> CodecError {
    let names: Vec<&str> = KNOWN.iter().filter(|(_, k, _)| k.starts_with(kind)).map(|(n, _, _)| *n).collect();
    CodecError::InvalidSpec(format!("unknown {kind} codec '{name}' (known: {})", names.join(", ")))
}

/// Builds a chain: every spec but the last is a transform, the last is the backend.
pub fn chain(specs: &[CodecSpec], ctx: ElementContext) -> Result<CodecChain> {
    let (last, init) =
        specs.split_last().ok_or_else(|| CodecError::InvalidSpec("a codec chain needs at least a backend".into()))?;
    let transforms = init.iter().map(|s| transform(s, ctx)).collect::<Result<Vec<_>>>()?;
    Ok(CodecChain::new(transforms, backend(last, ctx)?))
}

/// Parses a short chain description such as `shuffle+zstd:5`, `xor:0+shuffle+lz4`,
/// `bitround:12+pco` or `raw`. `name:N` sets the codec's main option (see [`KNOWN`]).
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
                let option = KNOWN.iter().find(|(n, _, _)| *n == name).and_then(|(_, _, o)| *o).ok_or_else(|| {
                    CodecError::InvalidSpec(format!("codec '{name}' takes no ':' option in '{text}'"))
                })?;
                let value: i64 = arg
                    .parse()
                    .map_err(|_| CodecError::InvalidSpec(format!("'{arg}' is not an integer in '{text}'")))?;
                spec = spec.with(option, value);
            }
            Ok(spec)
        })
        .collect()
}

/// The chain format v1 uses when nothing else is asked for: byte shuffle, then zstd.
pub fn default_chain() -> Vec<CodecSpec> {
    vec![CodecSpec::new("shuffle"), CodecSpec::new("zstd").with("level", ZstdBackend::DEFAULT_LEVEL)]
}
