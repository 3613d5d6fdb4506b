//! Builds codecs from their [`CodecSpec`] by name.

use crate::backend::{Backend, ByteColumnsBackend, Lz4Backend, PcoBackend, RawBackend, ZstdBackend};
use crate::chain::CodecChain;
use crate::error::{CodecError, Result};
use crate::fpc::FpcBackend;
use crate::hdf5::{parse_hex, FillBackend, Hdf5Backend, Hdf5Filter};
use crate::lossy::BoundSpec;
use crate::spec::{CodecSpec, ElementContext};
use crate::sz::SzBackend;
use crate::transform::{BitRoundTransform, NeighbourOp, NeighbourTransform, ShuffleTransform, Transform};
use crate::zfp::ZfpBackend;

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
    ("fpc", "backend", Some("axis")),
    ("sz", "backend (lossy)", None),
    ("zfp", "backend (lossy)", None),
    ("raw", "backend", None),
    ("hdf5", "backend (decode only)", None),
    ("fill", "backend (decode only)", None),
];

/// Backends that model the values themselves: they must see the elements as they are, so
/// no transform may come before them.
const ELEMENT_BACKENDS: &[&str] = &["sz", "zfp"];
/// Stages that may lose information; a chain holds at most one.
const LOSSY: &[&str] = &["bitround", "sz", "zfp"];

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
        "pco" => Ok(Box::new(pco(spec, ctx, true)?)),
        "fpc" => {
            reject_unknown_keys(spec, &["axis"])?;
            let axis = int_option(spec, "axis", -32..=31, -1)?;
            Ok(Box::new(FpcBackend { axis, element_size: ctx.element_size() }))
        }
        "sz" => {
            reject_unknown_keys(spec, &["abs", "rel"])?;
            Ok(Box::new(SzBackend { bound: BoundSpec::from_spec(spec)?, dtype: ctx.dtype }))
        }
        "zfp" => {
            reject_unknown_keys(spec, &["abs", "rel"])?;
            Ok(Box::new(ZfpBackend { bound: BoundSpec::from_spec(spec)?, dtype: ctx.dtype }))
        }
        "hdf5" => {
            reject_unknown_keys(spec, &["filters", "chunk", "order"])?;
            hdf5_backend(spec, ctx)
        }
        "fill" => {
            reject_unknown_keys(spec, &["value"])?;
            let text = spec
                .configuration
                .get("value")
                .and_then(|v| v.as_str())
                .ok_or_else(|| CodecError::InvalidSpec("fill needs its value as hex".into()))?;
            Ok(Box::new(FillBackend { value: parse_hex(text, ctx.element_size())? }))
        }
        other => Err(unknown(other, "backend")),
    }
}

/// `hdf5`'s options: `filters` (names, pipeline order), `chunk` (the stored chunk shape),
/// `order` (`"big"` or `"little"`, the default).
fn hdf5_backend(spec: &CodecSpec, ctx: ElementContext) -> Result<Box<dyn Backend>> {
    let bad = |what: &str| CodecError::InvalidSpec(format!("hdf5 {what}"));
    let filters = match spec.configuration.get("filters") {
        None => vec![],
        Some(v) => v
            .as_array()
            .ok_or_else(|| bad("filters must be a list of names"))?
            .iter()
            .map(|f| f.as_str().ok_or_else(|| bad("filters must be a list of names")).and_then(Hdf5Filter::parse))
            .collect::<Result<Vec<_>>>()?,
    };
    let chunk = match spec.configuration.get("chunk") {
        None => None,
        Some(v) => Some(
            v.as_array()
                .ok_or_else(|| bad("chunk must be a list of lengths"))?
                .iter()
                .map(|x| {
                    x.as_u64()
                        .filter(|&n| n > 0)
                        .map(|n| n as usize)
                        .ok_or_else(|| bad("chunk lengths must be positive"))
                })
                .collect::<Result<Vec<_>>>()?,
        ),
    };
    let big_endian = match spec.configuration.get("order").map(|v| v.as_str()) {
        None | Some(Some("little")) => false,
        Some(Some("big")) => true,
        _ => return Err(bad("order must be \"big\" or \"little\"")),
    };
    Ok(Box::new(Hdf5Backend { filters, chunk, big_endian, element_size: ctx.element_size() }))
}

fn unknown(name: &str, kind: &str) -> CodecError {
    let names: Vec<&str> = KNOWN.iter().filter(|(_, k, _)| k.starts_with(kind)).map(|(n, _, _)| *n).collect();
    CodecError::InvalidSpec(format!("unknown {kind} codec '{name}' (known: {})", names.join(", ")))
}

/// Builds a chain: every spec but the last is a transform, the last is the backend.
pub fn chain(specs: &[CodecSpec], ctx: ElementContext) -> Result<CodecChain> {
    let (last, init) =
        specs.split_last().ok_or_else(|| CodecError::InvalidSpec("a codec chain needs at least a backend".into()))?;
    if ELEMENT_BACKENDS.contains(&last.name.as_str()) && !init.is_empty() {
        return Err(CodecError::InvalidSpec(format!(
            "'{}' works on the values themselves: it must be alone",
            last.name
        )));
    }
    if specs.iter().filter(|s| LOSSY.contains(&s.name.as_str())).count() > 1 {
        return Err(CodecError::InvalidSpec("a chain may hold at most one lossy stage".into()));
    }
    let transforms = init.iter().map(|s| transform(s, ctx)).collect::<Result<Vec<_>>>()?;
    let backend = if last.name == "pco" && init.iter().any(along_last_axis) {
        Box::new(pco(last, ctx, false)?)
    } else {
        backend(last, ctx)?
    };
    Ok(CodecChain::new(transforms, backend))
}

/// The pcodec stage of `spec`; `delta_search` as [`PcoBackend`] says.
fn pco(spec: &CodecSpec, ctx: ElementContext, delta_search: bool) -> Result<PcoBackend> {
    reject_unknown_keys(spec, &["level"])?;
    let level = int_option(spec, "level", 0..=12, PcoBackend::DEFAULT_LEVEL as i64)? as usize;
    Ok(PcoBackend { level, dtype: ctx.dtype, delta_search })
}

/// A delta or xor along the last axis (the order pcodec sees its numbers in).
fn along_last_axis(spec: &CodecSpec) -> bool {
    matches!(spec.name.as_str(), "delta" | "xor") && int_option(spec, "axis", -32..=31, -1).is_ok_and(|a| a == -1)
}

/// Parses a short chain description such as `shuffle+zstd:5`, `xor:0+shuffle+lz4`,
/// `bitround:12+pco`, `sz:abs=0.01` or `raw`. `name:N` sets the codec's main option (see
/// [`KNOWN`]); `name:key=value,key=value` sets named options.
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
            if let Some(arg) = arg.filter(|a| a.contains('=')) {
                for pair in arg.split(',') {
                    let (key, value) = pair
                        .split_once('=')
                        .ok_or_else(|| CodecError::InvalidSpec(format!("'{pair}' is not key=value in '{text}'")))?;
                    let value: serde_json::Value = if let Ok(i) = value.trim().parse::<i64>() {
                        i.into()
                    } else {
                        let f: f64 = value
                            .trim()
                            .parse()
                            .map_err(|_| CodecError::InvalidSpec(format!("'{value}' is not a number in '{text}'")))?;
                        serde_json::Number::from_f64(f)
                            .ok_or_else(|| CodecError::InvalidSpec(format!("'{value}' is not finite in '{text}'")))?
                            .into()
                    };
                    spec = spec.with(key.trim(), value);
                }
            } else if let Some(arg) = arg {
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

/// The short form of a chain (`shuffle+zstd:3`, `sz:abs=0.01`): what [`parse_chain`] reads.
pub fn chain_text(specs: &[CodecSpec]) -> String {
    let value = |v: &serde_json::Value| match v.as_i64() {
        Some(i) => i.to_string(),
        None => v.as_f64().map_or_else(|| v.to_string(), |f| f.to_string()),
    };
    specs
        .iter()
        .map(|spec| {
            let main = KNOWN.iter().find(|(n, _, _)| *n == spec.name).and_then(|(_, _, o)| *o);
            let config = &spec.configuration;
            match (main, config.len()) {
                (_, 0) => spec.name.clone(),
                (Some(m), 1) if config.contains_key(m) && config[m].is_i64() => {
                    format!("{}:{}", spec.name, value(&config[m]))
                }
                _ => {
                    let pairs: Vec<String> = config.iter().map(|(k, v)| format!("{k}={}", value(v))).collect();
                    format!("{}:{}", spec.name, pairs.join(","))
                }
            }
        })
        .collect::<Vec<_>>()
        .join("+")
}

/// The chain format v1 uses when nothing else is asked for: byte shuffle, then zstd.
pub fn default_chain() -> Vec<CodecSpec> {
    vec![CodecSpec::new("shuffle"), CodecSpec::new("zstd").with("level", ZstdBackend::DEFAULT_LEVEL)]
}
