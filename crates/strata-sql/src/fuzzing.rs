//! SQL over a store checked against DataFusion over the same rows in memory. Bytes choose
//! a query — a projection, a count, aggregates or a GROUP BY, under a WHERE clause of
//! comparisons on coordinates (CF times, a descending latitude, a 2-D auxiliary latitude
//! with a fill value and a NaN), on variables (a float with a fill value and NaNs, an
//! integer with a fill value), literals on either side,
//! BETWEEN, IN, IS NULL, arithmetic, column against column, nested AND/OR/NOT — and the
//! method (auto, index or scan). strata answers it with its pushdown: coordinate ranges,
//! areas of the auxiliary coordinate, value constraints, NULLs dropped where a comparison
//! holds. DataFusion answers it over a
//! `MemTable` built here from the values written, with no strata code on its path. The
//! answers must be equal, row for row and bit for bit; strata must not refuse a query
//! DataFusion answers.
//!
//! The cargo-fuzz target `sql_query` feeds it libFuzzer's inputs; the test
//! `tests/differential.rs` feeds it seeded random bytes on every `make test`.

use crate::{from_df, SqlOptions, SqlSession};
use datafusion::arrow::array::{
    Array, ArrayRef, Float32Array, Float64Array, Int16Array, RecordBatch, TimestampMicrosecondArray,
};
use datafusion::arrow::compute::concat_batches;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::datasource::MemTable;
use datafusion::prelude::SessionContext;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use strata_core::manifest::{AttrValue, Attribute, Dim};
use strata_core::planner::CostModel;
use strata_core::query::Method;
use strata_core::writer::{DatasetSchema, VariableSchema};
use strata_core::{DType, Error, Result, Session, Store, StoreWriter, WriterOptions};

const T: usize = 6;
const Y: usize = 5;
const X: usize = 8;
const SST_FILL: f32 = -999.0;
const ICE_FILL: i16 = -1;
const ULAT_FILL: f32 = -999.0;
const PK_FILL: i16 = -32767;
/// `pk`'s packing: physical = stored * PK_SCALE + PK_OFFSET, in float32 (as xarray decodes).
const PK_SCALE: f32 = 0.05;
const PK_OFFSET: f32 = 10.0;

/// Latitudes, descending (a coordinate range must be found on either order).
fn lat(i: usize) -> f64 {
    60.0 - 30.0 * i as f64
}

fn lon(i: usize) -> f64 {
    45.0 * i as f64
}

/// The 2-D auxiliary latitude ulat(lat, lon) (sst's and ice's CF `coordinates`): tenths
/// (most not exact in binary), two fill values and a NaN.
fn ulat(y: usize, x: usize) -> f32 {
    match (y, x) {
        (1, 3) | (4, 0) => ULAT_FILL,
        (2, 5) => f32::NAN,
        _ => (60.0 - 30.0 * y as f64 + 0.7 * x as f64) as f32,
    }
}

/// Days since 2000-01-01 (standard calendar): timestamps in SQL.
fn day(t: usize) -> f64 {
    (t * 3) as f64 + if t == 4 { 0.5 } else { 0.0 }
}

/// sst at flat index `i`: tenths (most not exact in binary), a fill and NaNs.
fn sst(i: usize) -> f32 {
    match i {
        7 | 100 => SST_FILL,
        _ if i % 29 == 3 => f32::NAN,
        _ => ((i * 37) % 101) as f32 * 0.1 - 2.0,
    }
}

/// pk, a packed variable, as stored at flat index `i`: a fill, and values either side of 0.
fn pk(i: usize) -> i16 {
    if i % 19 == 7 {
        PK_FILL
    } else {
        ((i * 11) % 41) as i16 - 20
    }
}

/// pk's physical value at `i` (None at the fill), computed as xarray does: the stored value
/// made float32, times the scale, plus the offset.
fn pk_physical(i: usize) -> Option<f32> {
    let x = pk(i);
    (x != PK_FILL).then_some(x as f32 * PK_SCALE + PK_OFFSET)
}

fn ice(i: usize) -> i16 {
    if i % 23 == 5 {
        ICE_FILL
    } else {
        ((i * 13) % 17) as i16 - 4
    }
}

/// A new directory's path in the system's temporary directory for a harness of this
/// process: `prefix`, the process's id, a dash and a time. Directories of the same `prefix`
/// whose process has exited are removed first: a harness kept in a static (the server's
/// shared one) is never dropped, so each test run and each fuzzing run left one behind.
/// Only where `/proc` tells which processes live.
pub fn scratch_dir(prefix: &str) -> PathBuf {
    let tmp = std::env::temp_dir();
    remove_stale(&tmp, prefix);
    tmp.join(format!(
        "{prefix}{}-{:x}",
        std::process::id(),
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos())
    ))
}

/// Removes the directories `prefix<pid>-...` under `tmp` whose process has exited.
fn remove_stale(tmp: &Path, prefix: &str) {
    if !Path::new("/proc/self").exists() {
        return;
    }
    let Ok(entries) = std::fs::read_dir(tmp) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let pid = name.to_str().and_then(|n| n.strip_prefix(prefix)).and_then(|rest| rest.split_once('-'));
        let Some(pid) = pid.and_then(|(pid, _)| pid.parse::<u32>().ok()) else { continue };
        if pid != std::process::id() && !Path::new("/proc").join(pid.to_string()).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// strata and DataFusion over the same small store, with one SQL session per method.
pub struct Harness {
    sessions: Vec<(Option<Method>, SqlSession)>,
    reference: SessionContext,
    runtime: tokio::runtime::Runtime,
    root: PathBuf,
}

impl std::fmt::Debug for Harness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Harness").field("root", &self.root).finish()
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

impl Harness {
    /// Writes the store under a new directory in the system's temporary directory (and
    /// removes those that harnesses of exited processes left there).
    pub fn new() -> Result<Harness> {
        let root = scratch_dir("strata-fuzz-sql-");
        let path = root.join("t.strata");
        write_store(&path)?;
        let path = path.to_string_lossy().to_string();
        let mut sessions = Vec::new();
        for force in [None, Some(Method::Index), Some(Method::Scan)] {
            // Pieces of a few rows, so a query is cut into many and spread over partitions.
            let options = SqlOptions {
                session: Arc::new(Session::new(CostModel::default()).with_piece_elements(37)),
                force,
                target_partitions: Some(3),
                cache_bytes: Some(0),
                caches: None,
            };
            sessions.push((force, SqlSession::open(&[(path.clone(), Some("t".into()))], options)?));
        }
        let schema = sessions[0].1.execute("SELECT * FROM t LIMIT 0")?.schema();
        let runtime =
            tokio::runtime::Builder::new_current_thread().build().map_err(|e| Error::io("tokio runtime", e))?;
        // The reference gets strata's rule for signed zeros too (see `crate::zeros`): without
        // it DataFusion's own answer depends on the order of the conjuncts.
        let reference = SessionContext::new();
        reference.add_analyzer_rule(Arc::new(crate::zeros::SignedZeros));
        let table = MemTable::try_new(schema.clone(), vec![vec![rows(&schema)?]]).map_err(from_df)?;
        reference.register_table("t", Arc::new(table)).map_err(from_df)?;
        Ok(Harness { sessions, reference, runtime, root })
    }

    /// The SQL session that runs by the cost model's choice.
    #[cfg(test)]
    pub(crate) fn auto_session(&self) -> &SqlSession {
        &self.sessions[0].1
    }

    /// The query `data` chooses, answered by strata (with the method it chooses) and by
    /// DataFusion. Err: the answers differ, or strata refused what DataFusion answered.
    pub fn run(&self, data: &[u8]) -> std::result::Result<(), String> {
        let mut b = Bytes { data, at: 0 };
        let session = b.below(self.sessions.len());
        let sql = query(&mut b);
        self.run_sql(session, &sql)
    }

    /// The first value of `sql`'s answer by strata through session `session` (a count).
    pub fn count(&self, session: usize, sql: &str) -> std::result::Result<i64, String> {
        let session = &self.sessions[session % self.sessions.len()].1;
        let batches =
            session.execute(sql).and_then(|s| s.collect::<Result<Vec<_>>>()).map_err(|e| format!("{sql}: {e}"))?;
        let first = batches.iter().find(|b| b.num_rows() > 0).ok_or_else(|| format!("{sql}: no rows"))?;
        first
            .column(0)
            .as_any()
            .downcast_ref::<datafusion::arrow::array::Int64Array>()
            .map(|a| a.value(0))
            .ok_or_else(|| format!("{sql}: not a count"))
    }

    /// `sql` answered by strata through session `session` (0: the method it chooses, 1:
    /// the index, 2: a scan) and by DataFusion; Err as for [`run`](Self::run).
    pub fn run_sql(&self, session: usize, sql: &str) -> std::result::Result<(), String> {
        let session = &self.sessions[session % self.sessions.len()];
        let want = self.runtime.block_on(async {
            let df = self.reference.sql(sql).await?;
            let schema: SchemaRef = Arc::new(df.schema().as_arrow().clone());
            let batches = df.collect().await?;
            concat_batches(&schema, &batches)
                .map_err(|e| datafusion::error::DataFusionError::ArrowError(Box::new(e), None))
        });
        // A query DataFusion cannot answer (a type it will not compare) says nothing here.
        let Ok(want) = want else { return Ok(()) };
        let method = session.0.map_or("auto", |m| m.name());
        let got = session
            .1
            .execute(sql)
            .and_then(|s| {
                let schema = s.schema();
                let batches = s.collect::<Result<Vec<_>>>()?;
                concat_batches(&schema, &batches).map_err(|e| Error::InvalidArgument(e.to_string()))
            })
            .map_err(|e| format!("{sql} ({method}): strata refused what DataFusion answers: {e}"))?;
        if got.num_rows() != want.num_rows() || got.num_columns() != want.num_columns() {
            return Err(format!(
                "{sql} ({method}): {} rows x {} columns, DataFusion {} x {}",
                got.num_rows(),
                got.num_columns(),
                want.num_rows(),
                want.num_columns()
            ));
        }
        for (i, (g, w)) in got.columns().iter().zip(want.columns()).enumerate() {
            if g.to_data() != w.to_data() {
                return Err(format!("{sql} ({method}): column {i} differs:\n  strata {g:?}\n  DataFusion {w:?}"));
            }
        }
        Ok(())
    }
}

/// The rows of the store as written: a row per grid point, in the table's schema, NULL
/// where a value is NaN or a fill.
fn rows(schema: &SchemaRef) -> Result<RecordBatch> {
    let n = T * Y * X;
    let at = |i: usize| (i / (Y * X), i / X % Y, i % X);
    // 2000-01-01 is day 10,957 of the Unix epoch.
    let micros = |t: usize| ((10_957.0 + day(t)) * 86_400e6) as i64;
    let columns: Vec<ArrayRef> = vec![
        Arc::new(TimestampMicrosecondArray::from_iter_values((0..n).map(|i| micros(at(i).0)))),
        Arc::new(Float64Array::from_iter_values((0..n).map(|i| lat(at(i).1)))),
        Arc::new(Float64Array::from_iter_values((0..n).map(|i| lon(at(i).2)))),
        Arc::new(Float32Array::from_iter((0..n).map(|i| Some(sst(i)).filter(|v| !v.is_nan() && *v != SST_FILL)))),
        Arc::new(Int16Array::from_iter((0..n).map(|i| Some(ice(i)).filter(|v| *v != ICE_FILL)))),
        Arc::new(Float32Array::from_iter((0..n).map(pk_physical))),
        Arc::new(Float32Array::from_iter((0..n).map(|i| {
            let (_, y, x) = at(i);
            Some(ulat(y, x)).filter(|v| !v.is_nan() && *v != ULAT_FILL)
        }))),
    ];
    // The table must be what this module thinks it is (else every answer would differ).
    for (f, c) in schema.fields().iter().zip(&columns) {
        if f.data_type() != c.data_type() {
            return Err(Error::InvalidArgument(format!(
                "column {} is {}, not {}",
                f.name(),
                f.data_type(),
                c.data_type()
            )));
        }
    }
    RecordBatch::try_new(schema.clone(), columns).map_err(|e| Error::InvalidArgument(e.to_string()))
}

/// The store: sst(time, lat, lon) f32, ice(time, lat, lon) i16 and pk, an i16 packed by scale and
/// offset (its column physical float32), with fill values, in
/// slabs of two records, small sub-chunks and four bins (many segments, some judged by
/// the index alone), with CF coordinates and a 2-D auxiliary latitude.
fn write_store(path: &Path) -> Result<()> {
    let text = |name: &str, v: &str| Attribute { name: name.into(), value: AttrValue::String(v.into()) };
    let var = |name: &str, dtype, dims: &[&str], attrs| VariableSchema {
        name: name.into(),
        dtype,
        dims: dims.iter().map(|d| d.to_string()).collect(),
        attrs,
        inline_strings: None,
    };
    let grid = ["time", "lat", "lon"];
    let schema = DatasetSchema {
        dims: vec![
            Dim { name: "time".into(), size: T as u64, unlimited: true },
            Dim { name: "lat".into(), size: Y as u64, unlimited: false },
            Dim { name: "lon".into(), size: X as u64, unlimited: false },
        ],
        record_dim: Some("time".into()),
        attrs: vec![],
        variables: vec![
            var(
                "sst",
                DType::F32,
                &grid,
                vec![
                    Attribute { name: "_FillValue".into(), value: AttrValue::F32(vec![SST_FILL]) },
                    text("coordinates", "ulat"),
                ],
            ),
            var(
                "ice",
                DType::I16,
                &grid,
                vec![
                    Attribute { name: "_FillValue".into(), value: AttrValue::I16(vec![ICE_FILL.into()]) },
                    text("coordinates", "ulat"),
                ],
            ),
            var(
                "pk",
                DType::I16,
                &grid,
                vec![
                    Attribute { name: "_FillValue".into(), value: AttrValue::I16(vec![PK_FILL.into()]) },
                    Attribute { name: "scale_factor".into(), value: AttrValue::F32(vec![PK_SCALE]) },
                    Attribute { name: "add_offset".into(), value: AttrValue::F32(vec![PK_OFFSET]) },
                ],
            ),
            var(
                "ulat",
                DType::F32,
                &["lat", "lon"],
                vec![Attribute { name: "_FillValue".into(), value: AttrValue::F32(vec![ULAT_FILL]) }],
            ),
            var("time", DType::F64, &["time"], vec![text("units", "days since 2000-01-01")]),
            var("lat", DType::F64, &["lat"], vec![]),
            var("lon", DType::F64, &["lon"], vec![]),
        ],
    };
    std::fs::create_dir_all(path.parent().unwrap_or(Path::new(".")))
        .map_err(|e| Error::io(path.to_string_lossy(), e))?;
    let options = WriterOptions {
        slab_records: Some(2),
        layout: Some("V-S".into()),
        bins: Some(4),
        subchunk_bytes: Some(64),
        ..Default::default()
    };
    let mut w = StoreWriter::create(Store::local(&path.to_string_lossy()), schema, &options)?;
    let f64s = |v: Vec<f64>| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    w.put_static("lat", &f64s((0..Y).map(lat).collect()))?;
    w.put_static("lon", &f64s((0..X).map(lon).collect()))?;
    let ulats: Vec<u8> = (0..Y * X).flat_map(|i| ulat(i / X, i % X).to_le_bytes()).collect();
    w.put_static("ulat", &ulats)?;
    let per = 2 * Y * X;
    for t0 in (0..T).step_by(2) {
        w.begin_slab(2)?;
        let cells = t0 * Y * X..t0 * Y * X + per;
        w.put_records("sst", &cells.clone().flat_map(|i| sst(i).to_le_bytes()).collect::<Vec<u8>>())?;
        w.put_records("ice", &cells.clone().flat_map(|i| ice(i).to_le_bytes()).collect::<Vec<u8>>())?;
        w.put_records("pk", &cells.flat_map(|i| pk(i).to_le_bytes()).collect::<Vec<u8>>())?;
        w.put_records("time", &f64s(vec![day(t0), day(t0 + 1)]))?;
        w.finish_slab()?;
    }
    w.commit("sql fuzzing store")?;
    Ok(())
}

/// Choices read from the input; zeros once it runs out.
struct Bytes<'a> {
    data: &'a [u8],
    at: usize,
}

impl Bytes<'_> {
    fn byte(&mut self) -> u8 {
        let b = self.data.get(self.at).copied().unwrap_or(0);
        self.at += 1;
        b
    }

    fn below(&mut self, n: usize) -> usize {
        self.byte() as usize % n.max(1)
    }

    fn pick<'s>(&mut self, items: &[&'s str]) -> &'s str {
        items[self.below(items.len())]
    }
}

const COLUMNS: [&str; 7] = ["time", "lat", "lon", "sst", "ice", "pk", "ulat"];
const OPS: [&str; 7] = ["<", "<=", ">", ">=", "=", "<>", "!="];

/// A whole query.
fn query(b: &mut Bytes) -> String {
    let filter = match b.below(8) {
        0 => String::new(),
        _ => format!(" WHERE {}", predicate(b, 0)),
    };
    match b.below(6) {
        0 => format!("SELECT count(*) AS n FROM t{filter}"),
        1 => format!("SELECT count(sst), min(sst), max(sst), sum(ice), count(ice) FROM t{filter}"),
        2 => format!("SELECT time, count(*), max(ice) FROM t{filter} GROUP BY time ORDER BY time"),
        _ => {
            let mask = b.byte() as usize % 127 + 1;
            let cols: Vec<&str> =
                COLUMNS.iter().enumerate().filter(|(i, _)| mask >> i & 1 == 1).map(|(_, c)| *c).collect();
            let limit = match b.below(4) {
                0 => format!(" LIMIT {}", b.below(50)),
                _ => String::new(),
            };
            format!("SELECT {} FROM t{filter} ORDER BY time, lat, lon{limit}", cols.join(", "))
        }
    }
}

/// A WHERE clause, nested at most three deep.
fn predicate(b: &mut Bytes, depth: usize) -> String {
    let kinds = if depth >= 3 { 2 } else { 6 };
    match b.below(kinds) {
        0 => comparison(b),
        1 => special(b),
        2 => format!("({} AND {})", predicate(b, depth + 1), predicate(b, depth + 1)),
        3 => format!("({} OR {})", predicate(b, depth + 1), predicate(b, depth + 1)),
        4 => format!("NOT ({})", predicate(b, depth + 1)),
        _ => comparison(b),
    }
}

/// A literal of column `c`'s domain: a value it holds (exactly as written), one between
/// them, or one outside.
fn literal(b: &mut Bytes, c: &str) -> String {
    let k = b.byte() as usize;
    match c {
        "time" => {
            let when = [
                "2000-01-01",
                "2000-01-04",
                "2000-01-07T00:00:00",
                "2000-01-13T12:00:00",
                "2000-01-13",
                "1999-12-31",
                "2000-02-01",
                "2000-01-05T06:00:00",
            ];
            format!("TIMESTAMP '{}'", when[k % when.len()])
        }
        "lat" => ["60", "30.0", "0", "-30", "-60.0", "45", "-61", "90", "-0.0"][k % 9].to_string(),
        "lon" => ["0", "45", "90.0", "315", "314.9", "-1", "360", "180"][k % 8].to_string(),
        "ice" => ["-4", "-1", "0", "3", "12", "13", "-5", "2.5"][k % 8].to_string(),
        "pk" => match k % 3 {
            // A physical value held, as a user copies it from xarray; or one between or outside.
            0 => pk_physical(k * 5 % (T * Y * X)).map_or("10".into(), |v| format!("{v}")),
            1 => ["9", "10", "10.025", "8.95", "11", "-1638.35", "0", "1e10"][k / 3 % 8].to_string(),
            _ => format!("{}", 10.0 + (k as f64 - 128.0) / 100.0),
        },
        "ulat" => match k % 3 {
            // A value held, written the shortest way; or one between or outside them.
            0 => Some(ulat(k / 3 % Y, k / 15 % X)).filter(|v| !v.is_nan()).map_or("0.5".into(), |v| format!("{v}")),
            1 => ["-999", "0", "30.7", "-60", "61", "-55.1", "1e10"][k / 3 % 7].to_string(),
            _ => format!("{}", (k as f64 - 128.0) / 2.0),
        },
        _ => match k % 4 {
            // A value held: its f32 written the shortest way, as a user would copy it.
            0 | 1 => {
                let v = sst(k * 7 % (T * Y * X));
                if v.is_nan() {
                    "0.5".into()
                } else {
                    format!("{v}")
                }
            }
            2 => ["-999", "-2", "0", "8.1", "1e10", "-1e10", "0.1"][k / 4 % 7].to_string(),
            _ => format!("{}", (k as f64 - 128.0) / 16.0),
        },
    }
}

/// `column op literal`, the literal on either side.
fn comparison(b: &mut Bytes) -> String {
    let c = b.pick(&COLUMNS);
    let op = b.pick(&OPS);
    let v = literal(b, c);
    if b.below(4) == 0 {
        format!("{v} {op} {c}")
    } else {
        format!("{c} {op} {v}")
    }
}

/// Forms the pushdown must leave alone or take apart correctly.
fn special(b: &mut Bytes) -> String {
    let c = b.pick(&COLUMNS);
    match b.below(9) {
        0 => format!("{c} IS NULL"),
        1 => format!("{c} IS NOT NULL"),
        2 => {
            let (lo, hi) = (literal(b, c), literal(b, c));
            format!("{c} BETWEEN {lo} AND {hi}")
        }
        3 => {
            let (p, q) = (literal(b, c), literal(b, c));
            format!("{c} IN ({p}, {q})")
        }
        4 => format!("sst {} {}", b.pick(&OPS), b.pick(&["lat", "ulat"])),
        5 => format!("sst + 1 {} {}", b.pick(&OPS), literal(b, "sst")),
        6 => format!("abs(sst) {} {}", b.pick(&OPS), literal(b, "sst")),
        7 => format!("ice % 3 {} 0", b.pick(&OPS)),
        _ => format!("CAST(sst AS INT) {} {}", b.pick(&OPS), literal(b, "ice")),
    }
}

/// A harness shared by the callers of one process.
pub fn shared() -> Arc<Harness> {
    static HARNESS: std::sync::OnceLock<Arc<Harness>> = std::sync::OnceLock::new();
    HARNESS
        .get_or_init(|| match Harness::new() {
            Ok(h) => Arc::new(h),
            Err(e) => panic!("the SQL fuzzing store cannot be made: {e}"),
        })
        .clone()
}

#[cfg(test)]
mod scratch_tests {
    use super::*;

    #[test]
    fn directories_of_exited_harnesses_are_removed() {
        if !Path::new("/proc/self").exists() {
            return;
        }
        let tmp = std::env::temp_dir().join(format!("strata-stale-test-{}", std::process::id()));
        let prefix = "strata-fuzz-x-";
        // No process has this id: Linux's pid_max is at most 2^22.
        let gone = tmp.join(format!("{prefix}4294967295-1"));
        let mine = tmp.join(format!("{prefix}{}-2", std::process::id()));
        let other = tmp.join(format!("{prefix}not-a-pid"));
        let elses = tmp.join("strata-fuzz-y-4294967295-1");
        for d in [&gone, &mine, &other, &elses] {
            std::fs::create_dir_all(d.join("ocean")).unwrap();
        }
        remove_stale(&tmp, prefix);
        let left = (gone.exists(), mine.exists(), other.exists(), elses.exists());
        std::fs::remove_dir_all(&tmp).unwrap();
        assert_eq!(left, (false, true, true, true));
    }
}
