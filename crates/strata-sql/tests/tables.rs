#![allow(clippy::unwrap_used)] // tests may panic on failure

//! Which group of variables is the table named after the store, and the names of the
//! others as a user types them.

use strata_core::manifest::Dim;
use strata_core::writer::{DatasetSchema, VariableSchema};
use strata_core::{DType, Store, StoreWriter, WriterOptions};
use strata_sql::{SqlOptions, SqlSession};

const Y: u64 = 6;
const X: u64 = 5;

fn var(name: &str, dims: &[&str]) -> VariableSchema {
    VariableSchema {
        name: name.into(),
        dtype: DType::F32,
        dims: dims.iter().map(|d| d.to_string()).collect(),
        attrs: vec![],
        inline_strings: None,
    }
}

/// A store at `dir/name`: with records, a model's output (three scalar series along `Time`,
/// one field on `Time, y, x`, four grid metrics on `y, x`); without, four metrics on `y, x`
/// and one field on `z, y, x`.
fn store(dir: &std::path::Path, name: &str, records: bool) -> String {
    let path = dir.join(name).to_string_lossy().to_string();
    let dim = |name: &str, size, unlimited| Dim { name: name.into(), size, unlimited };
    let metrics = ["angle", "f", "h", "pm"].map(|n| var(n, &["y", "x"]));
    let schema = if records {
        let mut variables = vec![var("co2", &["Time"]), var("date", &["Time"]), var("step", &["Time"])];
        variables.push(var("temp", &["Time", "y", "x"]));
        variables.extend(metrics);
        let dims = vec![dim("Time", 0, true), dim("y", Y, false), dim("x", X, false)];
        DatasetSchema { dims, record_dim: Some("Time".into()), attrs: vec![], variables }
    } else {
        let mut variables = metrics.to_vec();
        variables.push(var("rho", &["z", "y", "x"]));
        let dims = vec![dim("z", 8, false), dim("y", Y, false), dim("x", X, false)];
        DatasetSchema { dims, record_dim: None, attrs: vec![], variables }
    };
    let statics: Vec<(String, u64)> = schema
        .variables
        .iter()
        .filter(|v| v.dims.first().map(String::as_str) != Some("Time"))
        .map(|v| (v.name.clone(), if v.dims.len() == 3 { 8 * Y * X } else { Y * X }))
        .collect();
    let mut w = StoreWriter::create(Store::local(&path), schema, &WriterOptions::default()).unwrap();
    for (name, n) in statics {
        w.put_static(&name, &vec![0u8; n as usize * 4]).unwrap();
    }
    if records {
        w.begin_slab(2).unwrap();
        for v in ["co2", "date", "step"] {
            w.put_records(v, &[0u8; 8]).unwrap();
        }
        w.put_records("temp", &vec![0u8; (2 * Y * X * 4) as usize]).unwrap();
        w.finish_slab().unwrap();
    }
    w.commit("test").unwrap();
    path
}

fn tables(path: &str) -> Vec<(String, String)> {
    SqlSession::open(&[(path.to_string(), None)], SqlOptions::default()).unwrap().tables()
}

#[test]
fn the_table_named_after_the_store_holds_the_most_data() {
    let dir = tempfile::tempdir().unwrap();
    // A model's field, not its scalar series (more variables) or its grid (more elements).
    let model = tables(&store(dir.path(), "model.strata", true));
    assert_eq!(model[0], ("model".to_string(), "temp".to_string()));
    // Without records: the most variables times elements.
    let grid = tables(&store(dir.path(), "grid.strata", false));
    assert_eq!(grid[0], ("grid".to_string(), "rho".to_string()));
}

#[test]
fn group_tables_are_named_as_sql_folds_a_name_typed_unquoted() {
    let dir = tempfile::tempdir().unwrap();
    let path = store(dir.path(), "model.strata", true);
    let names: Vec<String> = tables(&path).into_iter().map(|(n, _)| n).collect();
    assert!(names.contains(&"model_time_y_x".to_string()), "{names:?}");
    assert!(names.contains(&"model_time".to_string()), "{names:?}");
    let session = SqlSession::open(&[(path, None)], SqlOptions::default()).unwrap();
    for sql in
        ["SELECT count(*) FROM model_time", "SELECT count(*) FROM Model_Time", "SELECT count(*) FROM \"model_time\""]
    {
        let rows: usize = session.execute(sql).unwrap().map(|b| b.unwrap().num_rows()).sum();
        assert_eq!(rows, 1, "{sql}");
    }
}
