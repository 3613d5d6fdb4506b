#![allow(clippy::unwrap_used)] // tests may panic on failure

//! The engine's session: the same answers by every method and output, constraints on packed
//! variables compared in physical units, and the cost model learning from what runs.

use std::sync::Arc;
use strata_core::constraint::parse;
use strata_core::manifest::{AttrValue, Attribute, Dim};
use strata_core::query::Method;
use strata_core::session::{Output, Query, Session, Track};
use strata_core::storage::MemoryStorage;
use strata_core::writer::{DatasetSchema, VariableSchema};
use strata_core::{DType, DimSelection, Store, StoreReader, StoreWriter, WriterOptions};

const T: u64 = 6;
const Y: u64 = 20;
const X: u64 = 30;

fn temp(t: u64, y: u64, x: u64) -> f32 {
    if (t * 7 + y * 3 + x).is_multiple_of(23) {
        f32::NAN
    } else {
        ((t * 13 + y * 7 + x * 3) % 97) as f32 * 0.5 - 10.0
    }
}

/// A packed field: physical = stored * -0.01 + 5 (a negative scale flips comparisons).
fn packed(t: u64, y: u64, x: u64) -> i16 {
    ((t * 31 + y * 17 + x * 5) % 1000) as i16 - 500
}

fn physical(s: i16) -> f64 {
    s as f64 * -0.01 + 5.0
}

fn store(layout: &str) -> StoreReader {
    let dims = vec!["time".to_string(), "y".into(), "x".into()];
    let schema = DatasetSchema {
        dims: vec![
            Dim { name: "time".into(), size: T, unlimited: true },
            Dim { name: "y".into(), size: Y, unlimited: false },
            Dim { name: "x".into(), size: X, unlimited: false },
        ],
        record_dim: Some("time".into()),
        attrs: vec![],
        variables: vec![
            VariableSchema {
                name: "temp".into(),
                dtype: DType::F32,
                dims: dims.clone(),
                attrs: vec![],
                inline_strings: None,
            },
            VariableSchema {
                name: "p q".into(),
                dtype: DType::I16,
                dims,
                attrs: vec![
                    Attribute { name: "scale_factor".into(), value: AttrValue::F64(vec![-0.01]) },
                    Attribute { name: "add_offset".into(), value: AttrValue::F64(vec![5.0]) },
                ],
                inline_strings: None,
            },
        ],
    };
    let options = WriterOptions {
        layout: Some(layout.into()),
        bins: layout.contains('V').then_some(8),
        binning: layout.contains('V').then(|| "equal-frequency".into()),
        chunk_bytes: Some(2048),
        subchunk_bytes: Some(512),
        slab_records: Some(2),
        ..Default::default()
    };
    let s = Store::new(Arc::new(MemoryStorage::new()), "mem");
    let mut w = StoreWriter::create(s.clone(), schema, &options).unwrap();
    for t0 in (0..T).step_by(2) {
        w.begin_slab(2).unwrap();
        let mut a = Vec::new();
        let mut b = Vec::new();
        for t in t0..t0 + 2 {
            for y in 0..Y {
                for x in 0..X {
                    a.extend_from_slice(&temp(t, y, x).to_le_bytes());
                    b.extend_from_slice(&packed(t, y, x).to_le_bytes());
                }
            }
        }
        w.put_records("temp", &a).unwrap();
        w.put_records("p q", &b).unwrap();
        w.finish_slab().unwrap();
    }
    w.commit("test").unwrap();
    StoreReader::open(s, None).unwrap()
}

/// Which grid points a constraint keeps, by brute force.
type Keep = Box<dyn Fn(u64, u64, u64) -> bool>;

fn region(t: (u64, u64), y: (u64, u64, u64)) -> Vec<DimSelection> {
    vec![
        DimSelection { start: t.0, stop: t.1, step: 1 },
        DimSelection { start: y.0, stop: y.1, step: y.2 },
        DimSelection { start: 0, stop: X, step: 1 },
    ]
}

/// The flat indices in `sel` where `keep` holds, by brute force.
fn expected(sel: &[DimSelection], keep: impl Fn(u64, u64, u64) -> bool) -> Vec<u64> {
    let mut out = Vec::new();
    for t in (sel[0].start..sel[0].stop).step_by(sel[0].step as usize) {
        for y in (sel[1].start..sel[1].stop).step_by(sel[1].step as usize) {
            for x in (sel[2].start..sel[2].stop).step_by(sel[2].step as usize) {
                if keep(t, y, x) {
                    out.push((t * Y + y) * X + x);
                }
            }
        }
    }
    out
}

fn query(text: &str, sel: Vec<DimSelection>, output: Output, method: Option<Method>) -> Query {
    Query {
        predicate: parse(text).unwrap(),
        region: sel,
        output,
        variables: vec!["temp".into()],
        level: None,
        method,
        mask: None,
        raw: false,
    }
}

#[test]
fn every_method_and_output_gives_the_brute_force_answer() {
    for layout in ["S", "V-S", "V-M-S"] {
        let reader = store(layout);
        // Pieces of a few rows: a points query joins many of them, run side by side.
        let session = Session::default().with_piece_elements(70);
        let sel = region((1, 5), (2, 19, 3));
        let starts = strata_core::query::pieces::starts(&reader, "temp").unwrap();
        // Slabs of 2 records restart the chunk grid: each starts a sub-chunk.
        assert!(starts.windows(2).all(|w| w[0] < w[1]) && starts.iter().all(|&s| s < T), "{starts:?}");
        assert!([0, 2, 4].iter().all(|s| starts.contains(s)), "{starts:?}");
        assert!(strata_core::query::pieces::split(&sel, &starts, 70).len() > 1, "{layout}: one piece");
        let cases: Vec<(&str, Keep)> = vec![
            ("temp > 12.5", Box::new(|t, y, x| temp(t, y, x) > 12.5)),
            // Most bins selected whole, their positions counted inside the strided region.
            ("temp > -9", Box::new(|t, y, x| temp(t, y, x) > -9.0)),
            ("not temp > 12.5", Box::new(|t, y, x| temp(t, y, x) <= 12.5)),
            ("temp >= 0 and not (temp > 20 or temp < 5)", Box::new(|t, y, x| (5.0..=20.0).contains(&temp(t, y, x)))),
        ];
        for (text, keep) in &cases {
            let want = expected(&sel, keep);
            for method in [None, Some(Method::Index), Some(Method::Scan)] {
                let count = session.run(&reader, &query(text, sel.clone(), Output::Count, method)).unwrap();
                assert_eq!(count.count, want.len() as u64, "{layout} {text} {method:?}");
                let pos = session.run(&reader, &query(text, sel.clone(), Output::Positions, method)).unwrap();
                assert_eq!(pos.selection.flat, want, "{layout} {text} {method:?}");
                let pts = session.run(&reader, &query(text, sel.clone(), Output::Points, method)).unwrap();
                assert_eq!(pts.selection.flat, want);
                let values: Vec<f32> =
                    pts.columns[0].chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
                let truth: Vec<f32> = want.iter().map(|&f| temp(f / (Y * X), f / X % Y, f % X)).collect();
                assert_eq!(values, truth);
                if let Some(m) = method {
                    assert_eq!(pts.methods, vec![m], "a forced method runs everywhere");
                }
            }
        }
    }
}

#[test]
fn packed_variables_compare_physical_values_unless_raw() {
    let reader = store("V-S");
    let session = Session::default();
    let sel = region((0, T), (0, Y, 1));
    // Physical values above 7.5: stored values below -250 (the scale is negative).
    let mut q = query("\"p q\" > 7.5", sel.clone(), Output::Positions, None);
    let got = session.run(&reader, &q).unwrap();
    assert_eq!(got.selection.flat, expected(&sel, |t, y, x| physical(packed(t, y, x)) > 7.5));
    assert!(!got.selection.flat.is_empty());
    q.raw = true;
    let got = session.run(&reader, &q).unwrap();
    assert_eq!(got.selection.flat, expected(&sel, |t, y, x| f64::from(packed(t, y, x)) > 7.5));
}

#[test]
fn the_session_learns_from_every_run_and_explains_it() {
    let reader = store("V-S");
    let session = Session::default();
    let sel = region((0, T), (0, Y, 1));
    for i in 0..5 {
        let a = session.run(&reader, &query("temp > 30", sel.clone(), Output::Count, None)).unwrap();
        assert_eq!(session.runs().len(), i + 1);
        assert!(a.seconds > 0.0 && a.estimated_s > 0.0);
    }
    // Counts learn apart from points with values (see `Track`).
    let model = session.model_for(Track::Select);
    assert_eq!(model.observed(Method::Index) + model.observed(Method::Scan), 5.0);
    assert_eq!(session.model().observed(Method::Index) + session.model().observed(Method::Scan), 0.0);
    let a = session.run(&reader, &query("temp > 30", sel.clone(), Output::Points, Some(Method::Scan))).unwrap();
    let text = format!("{}\n{a}", a.plan);
    assert!(text.contains("scan (forced)"), "{text}");
    assert!(text.contains("actual:"), "{text}");
    // A query naming no variable of the store is refused before anything runs.
    let e = session.run(&reader, &query("nope > 1", sel, Output::Count, None)).unwrap_err();
    assert!(e.to_string().contains("'nope'"), "{e}");
}

#[test]
fn a_query_cut_into_pieces_teaches_the_model_one_query() {
    // Pieces of one row of the record axis: a points query runs several, each observed,
    // and together they count as one query (SQL's scans run their pieces the same way).
    let reader = store("V-S");
    let session = Session::default().with_piece_elements(Y * X);
    let sel = region((0, T), (0, Y, 1));
    let q = query("temp > 5", sel.clone(), Output::Points, Some(Method::Scan));
    let run = session.start(&reader, &q).unwrap();
    let pieces = run.pieces().len();
    assert!(pieces >= 3, "{pieces} pieces");
    drop(run);
    let a = session.run(&reader, &q).unwrap();
    assert_eq!(a.selection.flat, expected(&sel, |t, y, x| temp(t, y, x) > 5.0));
    assert_eq!(session.runs().len(), pieces, "one run per piece");
    let m = session.model();
    assert!((m.observed(Method::Scan) - 1.0).abs() < 1e-9, "{}", m.observed(Method::Scan));
    // A piece that is not in the query is refused, not run.
    let run = session.start(&reader, &q).unwrap();
    let e = session.run_piece(&run, pieces, |_, _| Ok(())).unwrap_err();
    assert!(e.to_string().contains("no piece"), "{e}");
}

/// A run's reads (EXPLAIN's actuals, an answer's `bytes_read`) are its own: another query
/// on the same reader while it is under way adds nothing to them.
#[test]
fn a_run_counts_only_its_own_reads() {
    for method in [Method::Scan, Method::Index] {
        let session = Session::default().with_piece_elements(70);
        let q = query("temp > 3", region((0, T), (0, Y, 1)), Output::Count, Some(method));
        let other = query("\"p q\" > 0", region((0, T), (0, Y, 1)), Output::Count, Some(Method::Scan));
        // The query a piece at a time on a reader of its own; with `interleaved`, another
        // query on another variable runs on that reader before each piece.
        let piecewise = |interleaved: bool| {
            let reader = store("V-S");
            let run = session.start(&reader, &q).unwrap();
            assert!(run.pieces().len() > 1);
            let (mut count, mut stats, mut others) = (0, Default::default(), 0);
            for i in 0..run.pieces().len() {
                if interleaved {
                    others += session.run(&reader, &other).unwrap().bytes_read;
                }
                let ((_, n, st), _) = session
                    .run_piece(&run, i, |sel, plan| {
                        run.executor(&reader).select_with(&run.query().predicate, sel, None, true, plan.method())
                    })
                    .unwrap();
                count += n;
                stats = st;
            }
            (session.finish(run, count, stats), others)
        };
        let (alone, _) = piecewise(false);
        let (amid, others) = piecewise(true);
        assert!(alone.bytes_read > 0 && others > 0, "{method:?}");
        assert_eq!(amid.count, alone.count, "{method:?}");
        assert_eq!((amid.bytes_read, amid.requests), (alone.bytes_read, alone.requests), "{method:?}");
    }
}
