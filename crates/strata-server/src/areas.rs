//! What a query builds from a dataset version and later requests reuse, kept per version:
//! areas of auxiliary coordinates (`area=latitude=60:`), whose building reads their
//! coordinates (3–5 ms on CanESM5's 291 x 360 grid, several times what a count through one
//! takes), and those coordinates' values, which points carry.

use crate::ApiError;
use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use strata_core::area::{Area, CoordTest};
use strata_core::StoreReader;
use strata_sql::table::AuxValues;

/// At most this many values are kept in each; the next one clears them (requests rebuild
/// theirs).
const KEPT: usize = 256;

/// Values built once per key. Keys name the dataset and its version: a new version builds
/// anew, and old versions' values go when the map fills.
#[derive(Debug)]
pub(crate) struct Kept<K, V> {
    kept: Mutex<HashMap<K, Arc<V>>>,
}

impl<K, V> Default for Kept<K, V> {
    fn default() -> Self {
        Kept { kept: Mutex::new(HashMap::new()) }
    }
}

impl<K: Eq + Hash, V> Kept<K, V> {
    /// The value kept for `key`, or the one `build` makes (kept for next time).
    fn get_or(&self, key: K, build: impl FnOnce() -> Result<V, ApiError>) -> Result<Arc<V>, ApiError> {
        if let Some(v) = self.kept.lock().ok().and_then(|k| k.get(&key).cloned()) {
            return Ok(v);
        }
        let value = Arc::new(build()?);
        if let Ok(mut kept) = self.kept.lock() {
            if kept.len() >= KEPT {
                kept.clear();
            }
            kept.insert(key, value.clone());
        }
        Ok(value)
    }
}

/// (dataset, its version, the queried variables' dimensions, the area's tests as text or the
/// auxiliary coordinate's name)
type Key = (String, u64, Vec<String>, String);

/// Areas, by their tests.
pub(crate) type Areas = Kept<Key, Area>;

/// Auxiliary coordinates' values, by name.
pub(crate) type AuxCoords = Kept<Key, AuxValues>;

impl Areas {
    /// The area `tests` select for variables on `dims` (of `shape`) of dataset `name`: the
    /// same however a request wrote them (`area=latitude=60:` or DAP2's `&latitude>=60`).
    pub fn get(
        &self,
        name: &str,
        reader: &StoreReader,
        dims: &[String],
        shape: &[u64],
        tests: &[(String, CoordTest)],
    ) -> Result<Arc<Area>, ApiError> {
        // Debug shows every f64 exactly, so equal texts are equal tests.
        let key = (name.to_string(), reader.manifest().version, dims.to_vec(), format!("{tests:?}"));
        self.get_or(key, || Ok(Area::build(reader, dims, shape, tests)?))
    }
}

impl AuxCoords {
    /// The values of `coord`, an auxiliary coordinate of variables on `dims` of dataset `name`.
    pub fn get(
        &self,
        name: &str,
        reader: &StoreReader,
        dims: &[String],
        coord: &str,
    ) -> Result<Arc<AuxValues>, ApiError> {
        let key = (name.to_string(), reader.manifest().version, dims.to_vec(), coord.to_string());
        self.get_or(key, || Ok(AuxValues::read(reader, dims, coord)?))
    }
}

/// `area` text: `name=lo:hi` items, comma-separated, either end empty (open).
pub(crate) fn items(text: &str) -> Result<Vec<(String, CoordTest)>, ApiError> {
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
