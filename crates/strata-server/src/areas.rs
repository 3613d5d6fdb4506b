//! Areas of auxiliary coordinates (`area=latitude=60:` on a query), kept per dataset version:
//! building one reads its coordinates (3–5 ms on CanESM5's 291 x 360 grid), which is several
//! times what a count through it takes once built.

use crate::ApiError;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use strata_core::area::{Area, CoordTest};
use strata_core::StoreReader;

/// At most this many areas are kept; the next one clears them (requests rebuild theirs).
const KEPT: usize = 256;

/// (dataset, its version, the queried variables' dimensions, the request's area text)
type Key = (String, u64, Vec<String>, String);

#[derive(Debug, Default)]
pub(crate) struct Areas {
    kept: Mutex<HashMap<Key, Arc<Area>>>,
}

impl Areas {
    /// The area `text` selects for variables on `dims` (of `shape`) of dataset `name`.
    pub fn get(
        &self,
        name: &str,
        reader: &StoreReader,
        dims: &[String],
        shape: &[u64],
        text: &str,
    ) -> Result<Arc<Area>, ApiError> {
        let key = (name.to_string(), reader.manifest().version, dims.to_vec(), text.to_string());
        if let Some(a) = self.kept.lock().ok().and_then(|k| k.get(&key).cloned()) {
            return Ok(a);
        }
        let area = Arc::new(Area::build(reader, dims, shape, &items(text)?)?);
        if let Ok(mut kept) = self.kept.lock() {
            if kept.len() >= KEPT {
                kept.clear();
            }
            kept.insert(key, area.clone());
        }
        Ok(area)
    }
}

/// `area` text: `name=lo:hi` items, comma-separated, either end empty (open).
fn items(text: &str) -> Result<Vec<(String, CoordTest)>, ApiError> {
    let mut items: Vec<(String, CoordTest)> = Vec::new();
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let bad = || ApiError::bad_request(format!("area item '{item}' is not name=lo:hi (either end may be empty)"));
        let (name, range) = item.split_once('=').ok_or_else(bad)?;
        let (lo, hi) = range.split_once(':').ok_or_else(bad)?;
        let bound = |b: &str| -> Result<Option<f64>, ApiError> {
            let b = b.trim();
            if b.is_empty() {
                return Ok(None);
            }
            match b.parse::<f64>() {
                Ok(v) if v.is_finite() => Ok(Some(v)),
                _ => Err(ApiError::bad_request(format!("area '{item}': '{b}' is not a number"))),
            }
        };
        let name = name.trim().to_string();
        if items.iter().any(|(n, _)| *n == name) {
            return Err(ApiError::bad_request(format!("area names '{name}' twice")));
        }
        items.push((name, CoordTest::Range { lo: bound(lo)?, hi: bound(hi)? }));
    }
    if items.is_empty() {
        return Err(ApiError::bad_request("area is empty: give name=lo:hi items"));
    }
    Ok(items)
}
