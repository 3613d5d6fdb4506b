//! A dataset's three descriptors (SDQuery's): physical (files, layout, codec plans,
//! versions), logical (dimensions, coordinates, variables, attributes) and value
//! distribution (histogram, minimum, maximum, valid count per variable, from the index).

use serde_json::{json, Value};
use strata_core::manifest::{AttrValue, Attribute};
use strata_core::StoreReader;

/// 1-D coordinate variables longer than this are described without their values.
const MAX_COORD_VALUES: u64 = 100_000;
const HISTOGRAM_BINS: usize = 32;

fn attr_json(a: &Attribute) -> Value {
    match &a.value {
        AttrValue::String(s) => json!(s),
        AttrValue::Strings(v) => json!(v),
        other => {
            let v = other.as_f64s();
            let nums: Vec<Value> = v.iter().map(|&x| num(x)).collect();
            if nums.len() == 1 {
                nums[0].clone()
            } else {
                Value::Array(nums)
            }
        }
    }
}

/// JSON has no NaN or infinity: they become strings.
fn num(x: f64) -> Value {
    if x.is_finite() {
        json!(x)
    } else {
        json!(x.to_string())
    }
}

fn attrs_json(attrs: &[Attribute]) -> Value {
    Value::Object(attrs.iter().map(|a| (a.name.clone(), attr_json(a))).collect())
}

pub(crate) fn describe(name: &str, reader: &StoreReader) -> strata_core::Result<Value> {
    let m = reader.manifest();
    let stats = reader.variable_stats()?;
    let versions = reader.store().versions()?;
    let physical_vars: Vec<Value> = m
        .variables
        .iter()
        .zip(&stats)
        .map(|(v, s)| {
            json!({
                "name": v.name,
                "codecs": v.codecs.iter().map(|c| strata_codecs::registry::chain_text(c)).collect::<Vec<_>>(),
                "chunk": v.chunking.as_ref().map(|c| c.chunk.clone()),
                "subchunk": v.chunking.as_ref().map(|c| c.subchunk.clone()),
                "raw_bytes": s.raw_bytes,
                "stored_bytes": s.stored_bytes,
                "segments": s.segments,
                "plan": v.plan,
            })
        })
        .collect();
    let mut coordinates = serde_json::Map::new();
    for v in &m.variables {
        if v.is_coordinate() && v.chunking.is_some() && v.dtype.num_type().is_some() {
            let n = m.shape(v)[0];
            let values = if n <= MAX_COORD_VALUES {
                Value::Array(v.dtype.to_f64s(&reader.read_whole(&v.name)?).into_iter().map(num).collect())
            } else {
                Value::Null
            };
            coordinates.insert(v.name.clone(), json!({"size": n, "values": values, "attrs": attrs_json(&v.attrs)}));
        } else if let (true, Some(labels)) = (v.is_coordinate(), &v.inline_strings) {
            // Text labels (a CCSM ensemble's members), flagged: a client indexes them as text.
            let values = if labels.len() as u64 <= MAX_COORD_VALUES { json!(labels) } else { Value::Null };
            let entry = json!({"size": labels.len(), "values": values, "attrs": attrs_json(&v.attrs), "text": true});
            coordinates.insert(v.name.clone(), entry);
        }
    }
    let logical_vars: Vec<Value> = m
        .variables
        .iter()
        .map(|v| {
            json!({
                "name": v.name,
                "dtype": v.dtype.name(),
                "dims": v.dims,
                "shape": m.shape(v),
                "attrs": attrs_json(&v.attrs),
            })
        })
        .collect();
    let mut values = serde_json::Map::new();
    for v in &m.variables {
        if v.chunking.is_none() || v.dtype.num_type().is_none() {
            continue;
        }
        let h = reader.histogram(&v.name, HISTOGRAM_BINS)?;
        values.insert(
            v.name.clone(),
            json!({
                "min": num(h.min),
                "max": num(h.max),
                "valid": h.valid,
                "missing": h.missing,
                "histogram": {"edges": h.edges.iter().map(|&x| num(x)).collect::<Vec<_>>(), "counts": h.counts},
            }),
        );
    }
    Ok(json!({
        "name": name,
        "sql_table": crate::catalog::sql_table(name),
        "physical": {
            "version": m.version,
            "versions": versions,
            "created_ms": m.created_ms,
            "layout": m.layout.describe(),
            "bins": m.layout.bins,
            "byte_groups": m.layout.byte_groups,
            "record_dim": m.record_dim,
            "slab_records": m.slab_records,
            "slabs": m.slabs.len(),
            "files": m.files.len(),
            "stored_bytes": m.files.iter().map(|f| f.size).sum::<u64>(),
            "variables": physical_vars,
        },
        "logical": {
            "dims": m.dims.iter().map(|d| json!({"name": d.name, "size": d.size, "unlimited": d.unlimited})).collect::<Vec<_>>(),
            "attrs": attrs_json(&m.attrs),
            "coordinates": coordinates,
            "variables": logical_vars,
        },
        "values": values,
    }))
}
