#![allow(clippy::unwrap_used)] // tests may panic on failure

//! SQL over a store: coordinate comparisons become index ranges, value comparisons strata
//! constraints, and every answer equals brute force, by each method.

use std::sync::Arc;
use strata_core::manifest::Dim;
use strata_core::query::Method;
use strata_core::writer::{DatasetSchema, VariableSchema};
use strata_core::{DType, Session, Store, StoreWriter, WriterOptions};
use strata_sql::datafusion::arrow::array::{Array, Int64Array};
use strata_sql::{SqlOptions, SqlSession};

const T: u64 = 8;
const Y: u64 = 12;
const X: u64 = 10;

fn value(t: u64, y: u64, x: u64) -> f32 {
    if (t * 5 + y * 3 + x).is_multiple_of(13) {
        f32::NAN
    } else {
        ((t * 11 + y * 7 + x * 3) % 50) as f32 - 10.0
    }
}

/// A store `grid.strata` with v(time, y, x), the coordinate y (degrees, ascending) and
/// a second group w(y, x).
fn store(dir: &std::path::Path) -> String {
    let path = dir.join("grid.strata").to_string_lossy().to_string();
    let var = |name: &str, dims: &[&str]| VariableSchema {
        name: name.into(),
        dtype: DType::F32,
        dims: dims.iter().map(|d| d.to_string()).collect(),
        attrs: vec![],
        inline_strings: None,
    };
    let schema = DatasetSchema {
        dims: vec![
            Dim { name: "time".into(), size: T, unlimited: true },
            Dim { name: "y".into(), size: Y, unlimited: false },
            Dim { name: "x".into(), size: X, unlimited: false },
        ],
        record_dim: Some("time".into()),
        attrs: vec![],
        variables: vec![var("v", &["time", "y", "x"]), var("y", &["y"]), var("w", &["y", "x"])],
    };
    let options = WriterOptions {
        layout: Some("V-S".into()),
        bins: Some(6),
        subchunk_bytes: Some(256),
        slab_records: Some(3),
        ..Default::default()
    };
    let mut w = StoreWriter::create(Store::local(&path), schema, &options).unwrap();
    let ys: Vec<u8> = (0..Y).flat_map(|i| (i as f32 * 5.0 - 30.0).to_le_bytes()).collect();
    w.put_static("y", &ys).unwrap();
    w.put_static("w", &vec![0u8; (Y * X * 4) as usize]).unwrap();
    for t0 in (0..T).step_by(3) {
        let n = 3.min(T - t0);
        w.begin_slab(n).unwrap();
        let data: Vec<u8> = (t0..t0 + n)
            .flat_map(|t| (0..Y).flat_map(move |y| (0..X).flat_map(move |x| value(t, y, x).to_le_bytes())))
            .collect();
        w.put_records("v", &data).unwrap();
        w.finish_slab().unwrap();
    }
    w.commit("test").unwrap();
    path
}

/// Which grid points a filter keeps, by brute force.
type Keep = Box<dyn Fn(u64, u64, u64) -> bool>;

fn count(session: &SqlSession, sql: &str) -> i64 {
    let batches: Vec<_> = session.execute(sql).unwrap().map(|b| b.unwrap()).collect();
    let col = batches[0].column(0).as_any().downcast_ref::<Int64Array>().unwrap().clone();
    assert_eq!(col.len(), 1);
    col.value(0)
}

fn brute(keep: impl Fn(u64, u64, u64) -> bool) -> i64 {
    let mut n = 0;
    for t in 0..T {
        for y in 0..Y {
            for x in 0..X {
                n += i64::from(keep(t, y, x));
            }
        }
    }
    n
}

#[test]
fn pushed_down_filters_answer_as_brute_force_by_every_method() {
    let dir = tempfile::tempdir().unwrap();
    let path = store(dir.path());
    let lat = |y: u64| y as f32 * 5.0 - 30.0;
    let cases: Vec<(&str, Keep)> = vec![
        ("v > 20", Box::new(|t, y, x| value(t, y, x) > 20.0)),
        ("v >= 0 AND v < 5", Box::new(|t, y, x| (0.0..5.0).contains(&value(t, y, x)))),
        ("v < -5 OR v > 35", Box::new(|t, y, x| value(t, y, x) < -5.0 || value(t, y, x) > 35.0)),
        (
            "y >= 0 AND y < 20 AND v > 10",
            Box::new(move |t, y, x| (0.0..20.0).contains(&lat(y)) && value(t, y, x) > 10.0),
        ),
        ("5 < v", Box::new(|t, y, x| value(t, y, x) > 5.0)),
        ("v BETWEEN 1 AND 3", Box::new(|t, y, x| (1.0..=3.0).contains(&value(t, y, x)))),
        ("y > 7 AND v IS NOT NULL", Box::new(move |t, y, x| lat(y) > 7.0 && !value(t, y, x).is_nan())),
    ];
    for force in [None, Some(Method::Index), Some(Method::Scan)] {
        let engine = Arc::new(Session::default());
        let options = SqlOptions {
            session: engine.clone(),
            force,
            target_partitions: Some(2),
            cache_bytes: Some(0),
            caches: None,
        };
        let session = SqlSession::open(&[(path.clone(), None)], options).unwrap();
        for (filter, keep) in &cases {
            let got = count(&session, &format!("SELECT count(*) FROM grid WHERE {filter}"));
            assert_eq!(got, brute(keep), "{filter} with {force:?}");
        }
        // Value constraints ran through the engine's session, by the forced method if any.
        let runs = session.pieces_run(0);
        assert!(!runs.is_empty());
        if let Some(m) = force {
            assert!(runs.iter().all(|r| r.method == m));
        }
        assert_eq!(engine.runs().len(), runs.len(), "the SQL pieces are the session's runs");
    }
}

#[test]
fn tables_are_named_by_their_data_and_a_wrong_table_is_named_in_the_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = store(dir.path());
    let session = SqlSession::open(&[(path, None)], SqlOptions::default()).unwrap();
    let tables = session.tables();
    let names: Vec<&str> = tables.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["grid", "grid_time_y_x", "grid_y_x"]);
    let e = session.execute("SELECT count(*) FROM grid WHERE w > 1").unwrap_err();
    assert!(e.to_string().contains("'w' is a column of table grid_y_x"), "{e}");
    // A dimension's column too (NCEP's `lev1`, a dimension of OMEGA's table alone).
    let e = session.execute("SELECT count(*) FROM grid_y_x WHERE time > 0").unwrap_err();
    assert!(e.to_string().contains("'time' is a column of table grid, grid_time_y_x"), "{e}");
    // A variable named as the table: the error gives the query to write.
    let e = session.execute("SELECT count(*) FROM w WHERE w > 1").unwrap_err();
    assert!(e.to_string().contains("'w' is a column of table grid_y_x: SELECT w FROM grid_y_x"), "{e}");
    // A name that is neither: the error lists the tables.
    let e = session.execute("SELECT * FROM \"no such\"").unwrap_err();
    assert!(e.to_string().contains("the tables are grid, grid_time_y_x, grid_y_x"), "{e}");
}

const CY: u64 = 9;
const CX: u64 = 11;

/// A 2-D latitude with fill values (-999 at a few points), f32.
fn lat2(y: u64, x: u64) -> f32 {
    if (y * 11 + x).is_multiple_of(17) {
        -999.0
    } else {
        y as f32 * 5.0 - 20.0 + x as f32 * 0.5
    }
}

/// A 2-D longitude stored transposed, lon(x, y), f64.
fn lon2(y: u64, x: u64) -> f64 {
    x as f64 * 30.0 - 150.0 + y as f64
}

/// A store `curv.strata` with v(time, y, x) on a curvilinear grid: its CF `coordinates`
/// name lat(y, x) and lon(x, y).
fn curvilinear(dir: &std::path::Path) -> String {
    use strata_core::manifest::{AttrValue, Attribute};
    let path = dir.join("curv.strata").to_string_lossy().to_string();
    let attr = |name: &str, value: AttrValue| Attribute { name: name.into(), value };
    let var = |name: &str, dtype, dims: &[&str], attrs| VariableSchema {
        name: name.into(),
        dtype,
        dims: dims.iter().map(|d| d.to_string()).collect(),
        attrs,
        inline_strings: None,
    };
    let schema = DatasetSchema {
        dims: vec![
            Dim { name: "time".into(), size: T, unlimited: true },
            Dim { name: "y".into(), size: CY, unlimited: false },
            Dim { name: "x".into(), size: CX, unlimited: false },
        ],
        record_dim: Some("time".into()),
        attrs: vec![],
        variables: vec![
            var("v", DType::F32, &["time", "y", "x"], vec![attr("coordinates", AttrValue::String("lat lon".into()))]),
            var("lat", DType::F32, &["y", "x"], vec![attr("_FillValue", AttrValue::F32(vec![-999.0]))]),
            var("lon", DType::F64, &["x", "y"], vec![attr("units", AttrValue::String("degrees_east".into()))]),
        ],
    };
    let options = WriterOptions {
        layout: Some("V-S".into()),
        bins: Some(6),
        subchunk_bytes: Some(128),
        slab_records: Some(3),
        ..Default::default()
    };
    let mut w = StoreWriter::create(Store::local(&path), schema, &options).unwrap();
    let lat: Vec<u8> = (0..CY).flat_map(|y| (0..CX).flat_map(move |x| lat2(y, x).to_le_bytes())).collect();
    let lon: Vec<u8> = (0..CX).flat_map(|x| (0..CY).flat_map(move |y| lon2(y, x).to_le_bytes())).collect();
    w.put_static("lat", &lat).unwrap();
    w.put_static("lon", &lon).unwrap();
    for t0 in (0..T).step_by(3) {
        let n = 3.min(T - t0);
        w.begin_slab(n).unwrap();
        let data: Vec<u8> = (t0..t0 + n)
            .flat_map(|t| (0..CY).flat_map(move |y| (0..CX).flat_map(move |x| value(t, y, x).to_le_bytes())))
            .collect();
        w.put_records("v", &data).unwrap();
        w.finish_slab().unwrap();
    }
    w.commit("test").unwrap();
    path
}

/// The one value of a one-row, one-column answer, as f64 (NULL: NaN).
fn scalar(session: &SqlSession, sql: &str) -> f64 {
    use strata_sql::datafusion::arrow::array::Float64Array;
    use strata_sql::datafusion::arrow::compute::cast;
    use strata_sql::datafusion::arrow::datatypes::DataType;
    let batches: Vec<_> = session.execute(sql).unwrap().map(|b| b.unwrap()).collect();
    let col = cast(batches[0].column(0), &DataType::Float64).unwrap();
    let col = col.as_any().downcast_ref::<Float64Array>().unwrap();
    assert_eq!(col.len(), 1, "{sql}");
    if col.is_null(0) {
        f64::NAN
    } else {
        col.value(0)
    }
}

#[test]
fn filters_on_a_2d_latitude_go_through_the_area_and_answer_as_brute_force() {
    let dir = tempfile::tempdir().unwrap();
    let path = curvilinear(dir.path());
    let ok = |y: u64, x: u64| lat2(y, x) != -999.0;
    let lat = move |y: u64, x: u64| if ok(y, x) { lat2(y, x) as f64 } else { f64::NAN };
    // (SQL, brute force: the sum of `f` over the kept points, or their count)
    type Sum = Box<dyn Fn(u64, u64, u64) -> Option<f64>>;
    let v = |t: u64, y: u64, x: u64| value(t, y, x) as f64;
    let cases: Vec<(&str, Sum)> = vec![
        (
            "SELECT count(*) FROM curv WHERE lat >= 10 AND v > 5",
            Box::new(move |t, y, x| (lat(y, x) >= 10.0 && v(t, y, x) > 5.0).then_some(1.0)),
        ),
        (
            "SELECT count(*) FROM curv WHERE lat BETWEEN 0 AND 20",
            Box::new(move |_, y, x| (0.0..=20.0).contains(&lat(y, x)).then_some(1.0)),
        ),
        (
            "SELECT count(*) FROM curv WHERE lat > 10 AND lon < 0 AND v > 0",
            Box::new(move |t, y, x| (lat(y, x) > 10.0 && lon2(y, x) < 0.0 && v(t, y, x) > 0.0).then_some(1.0)),
        ),
        ("SELECT count(*) FROM curv WHERE lat IS NULL", Box::new(move |_, y, x| (!ok(y, x)).then_some(1.0))),
        // The auxiliary columns' values at the rows, with a constraint and without one.
        (
            "SELECT sum(lat) FROM curv WHERE lat > 5 AND v > 0",
            Box::new(move |t, y, x| (lat(y, x) > 5.0 && v(t, y, x) > 0.0).then_some(lat(y, x))),
        ),
        ("SELECT sum(lon) FROM curv WHERE lat < 0", Box::new(move |_, y, x| (lat(y, x) < 0.0).then_some(lon2(y, x)))),
        (
            "SELECT sum(v) FROM curv WHERE 12.5 <= lat AND x >= 3",
            Box::new(move |t, y, x| (lat(y, x) >= 12.5 && x >= 3 && !v(t, y, x).is_nan()).then_some(v(t, y, x))),
        ),
    ];
    for force in [None, Some(Method::Index), Some(Method::Scan)] {
        let options = SqlOptions { force, target_partitions: Some(2), cache_bytes: Some(0), ..SqlOptions::default() };
        let session = SqlSession::open(&[(path.clone(), None)], options).unwrap();
        for (sql, keep) in &cases {
            let mut want = 0.0;
            for t in 0..T {
                for y in 0..CY {
                    for x in 0..CX {
                        want += keep(t, y, x).unwrap_or(0.0);
                    }
                }
            }
            assert_eq!(scalar(&session, sql), want, "{sql} with {force:?}");
        }
    }
    // The area is the scan's, exactly: DataFusion filters nothing again.
    let session = SqlSession::open(&[(path, None)], SqlOptions::default()).unwrap();
    let plan: Vec<_> = session
        .execute("EXPLAIN SELECT count(*) FROM curv WHERE lat >= 10 AND lon > -100 AND v > 5")
        .unwrap()
        .map(|b| b.unwrap())
        .collect();
    let text = strata_sql::datafusion::arrow::util::pretty::pretty_format_batches(&plan).unwrap().to_string();
    assert!(!text.contains("FilterExec"), "{text}");
}

/// The plans EXPLAIN shows, one text.
fn explain(session: &SqlSession, sql: &str) -> String {
    use strata_sql::datafusion::arrow::array::StringArray;
    let mut text = String::new();
    for batch in session.execute(&format!("EXPLAIN {sql}")).unwrap() {
        let batch = batch.unwrap();
        let plans = batch.column(1).as_any().downcast_ref::<StringArray>().unwrap().clone();
        plans.iter().flatten().for_each(|p| text.push_str(p));
    }
    text
}

#[test]
fn explain_shows_what_the_engine_is_asked_and_its_plan() {
    let dir = tempfile::tempdir().unwrap();
    let session = SqlSession::open(&[(store(dir.path()), None)], SqlOptions::default()).unwrap();
    // y >= 0 is rows 6..12 of the ascending coordinate; the value comparison goes to the
    // engine, which plans it before anything runs.
    let text = explain(&session, "SELECT count(*) FROM grid WHERE y >= 0 AND v > 20");
    assert!(text.contains("StrataScan: region=[time 0:8, y 6:12, x 0:10], where=v > 20.0"), "{text}");
    assert!(text.contains("plan: ") && text.contains("estimated"), "{text}");
    // No constraint: nothing to plan; a LIMIT reaches the scan.
    let text = explain(&session, "SELECT * FROM grid LIMIT 3");
    assert!(text.contains("StrataScan: region=[time 0:8, y 0:12, x 0:10], pieces="), "{text}");
    assert!(text.contains("fetch=3") && !text.contains("plan: "), "{text}");
    // EXPLAIN ANALYZE runs it: the plan it ran under, and what it fetched.
    let text = explain(&session, "ANALYZE SELECT count(*) FROM grid WHERE y >= 0 AND v > 20");
    assert!(text.contains("where=v > 20.0") && text.contains(", actual: ") && text.contains(" requests"), "{text}");
    // The answer is unchanged by the scan's new face.
    let want = brute(|t, y, x| y >= 6 && value(t, y, x) > 20.0);
    assert_eq!(count(&session, "SELECT count(*) FROM grid WHERE y >= 0 AND v > 20"), want);
}

/// A query's rows, as text in the order given (the query orders them).
fn rows(session: &SqlSession, sql: &str) -> String {
    let batches: Vec<_> = session.execute(sql).unwrap().map(|b| b.unwrap()).collect();
    strata_sql::datafusion::arrow::util::pretty::pretty_format_batches(&batches).unwrap().to_string()
}

#[test]
fn a_query_run_again_runs_its_kept_plan_and_answers_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let engine = Arc::new(Session::default());
    let options =
        SqlOptions { session: engine, force: None, target_partitions: Some(2), cache_bytes: Some(0), caches: None };
    let session = SqlSession::open(&[(store(dir.path()), None)], options).unwrap();
    let want = brute(|t, y, x| y >= 6 && value(t, y, x) > 20.0);
    let sql = "SELECT count(*) FROM grid WHERE y >= 0 AND v > 20";
    assert_eq!(count(&session, sql), want);
    assert_eq!(session.plans_kept(), 1);
    let pieces = session.pieces_run_count();
    assert!(pieces > 0);
    // The kept plan's scans run again: the engine plans them and learns from them anew.
    assert_eq!(count(&session, sql), want);
    assert_eq!(session.plans_kept(), 1);
    assert_eq!(session.pieces_run_count(), 2 * pieces);
    // Operators with state of their own — a TopK, an aggregate, a join's hash table, a
    // repartition — start afresh in every run.
    for sql in [
        "SELECT time, y, x, v FROM grid WHERE v > 20 ORDER BY v DESC, time, y, x LIMIT 7",
        "SELECT max(v), min(v), count(*) FROM grid WHERE v > 10 AND v * 2 < 70",
        "SELECT a.time, count(*) AS n FROM grid a JOIN grid b ON a.time = b.time AND a.y = b.y AND a.x = b.x \
         WHERE a.v > 25 AND b.v > 30 GROUP BY a.time ORDER BY a.time",
        "SELECT y, avg(v) AS m FROM grid WHERE v > 5 GROUP BY y ORDER BY y",
    ] {
        let first = rows(&session, sql);
        for _ in 0..3 {
            assert_eq!(rows(&session, sql), first, "{sql}");
        }
    }
    assert_eq!(session.plans_kept(), 5);
}

#[test]
fn plans_that_depend_on_more_than_their_text_are_not_kept() {
    let dir = tempfile::tempdir().unwrap();
    let session = SqlSession::open(&[(store(dir.path()), None)], SqlOptions::default()).unwrap();
    for sql in [
        // now() is folded to the time of planning, random() differs per row and run.
        "SELECT count(*) FROM grid WHERE v > 20 AND now() > TIMESTAMP '2000-01-01T00:00:00'",
        "SELECT count(*) FROM grid WHERE v > random() * 40",
        // The information schema is read while planning; EXPLAIN ANALYZE shows a run.
        "SELECT count(*) FROM information_schema.tables",
        "EXPLAIN ANALYZE SELECT count(*) FROM grid WHERE v > 20",
    ] {
        session.execute(sql).unwrap().for_each(|b| drop(b.unwrap()));
        assert_eq!(session.plans_kept(), 0, "{sql}");
    }
    // A session keeps a bounded number of plans, the most recently used.
    for i in 0..70 {
        assert_eq!(
            count(&session, &format!("SELECT count(*) FROM grid WHERE v > {i}")),
            brute(|t, y, x| { value(t, y, x) > i as f32 })
        );
    }
    assert_eq!(session.plans_kept(), 64);
}
