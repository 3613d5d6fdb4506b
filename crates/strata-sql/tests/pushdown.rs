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
        let options = SqlOptions { session: engine.clone(), force, target_partitions: Some(2), cache_bytes: Some(0) };
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
    let names: Vec<&str> = session.tables().iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["grid", "grid_time_y_x", "grid_y_x"]);
    let e = session.execute("SELECT count(*) FROM grid WHERE w > 1").unwrap_err();
    assert!(e.to_string().contains("'w' is a column of table grid_y_x"), "{e}");
}
