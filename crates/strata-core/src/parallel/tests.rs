//! The parallel protocol run in one thread, writers taking turns; every store is read
//! back against the values written and verified.

use super::*;
use crate::manifest::Dim;
use crate::reader::{BinStat, INDEXES_KEPT_BYTES};
use crate::store::Store;
use crate::writer::{Block, DatasetSchema, VariableSchema, WriterOptions};
use crate::{DType, DimSelection, StoreReader};
use std::collections::BTreeMap;

const T: u64 = 25;
const NY: u64 = 40;
const NX: u64 = 60;

fn schema() -> DatasetSchema {
    let dim = |name: &str, size| Dim { name: name.into(), size, unlimited: name == "t" };
    let var = |name: &str, dtype, dims: &[&str]| VariableSchema {
        name: name.into(),
        dtype,
        dims: dims.iter().map(|d| d.to_string()).collect(),
        attrs: vec![],
        inline_strings: None,
    };
    DatasetSchema {
        dims: vec![dim("t", 0), dim("y", NY), dim("x", NX)],
        record_dim: Some("t".into()),
        attrs: vec![],
        variables: vec![
            var("time", DType::F64, &["t"]),
            var("lat", DType::F32, &["y"]),
            var("mask", DType::I8, &["y", "x"]),
            var("a", DType::F32, &["t", "y", "x"]),
            var("b", DType::F64, &["t", "y"]),
        ],
    }
}

fn a(t: u64, y: u64, x: u64) -> f32 {
    ((t * 7 + y * 3 + x) % 97) as f32 * 0.5 + (y as f32).sin()
}

fn b(t: u64, y: u64) -> f64 {
    t as f64 * 100.0 + y as f64 / 3.0
}

fn le<T: Copy, const N: usize>(v: impl Iterator<Item = T>, bytes: impl Fn(T) -> [u8; N]) -> Vec<u8> {
    v.flat_map(bytes).collect()
}

fn part(token: &str, placement: Placement, blocks: Vec<Block>, rank: u32, first_record: u64) -> PartOf {
    PartOf { token: token.into(), placement, blocks, rank, first_record }
}

fn blocks() -> Vec<Block> {
    let mut out = vec![];
    for y in [[0, 20], [20, NY]] {
        for x in [[0, 30], [30, NX]] {
            out.push(Block::from([("y".to_string(), y), ("x".to_string(), x)]));
        }
    }
    out
}

/// Every writer's block of every variable it holds, for records `r0..r1`.
fn feed(w: &mut PartWriter, block: &Block, r0: u64, r1: u64) {
    let [y0, y1] = block.get("y").copied().unwrap_or([0, NY]);
    let [x0, x1] = block.get("x").copied().unwrap_or([0, NX]);
    for t in r0..r1 {
        let av = le((y0..y1).flat_map(|y| (x0..x1).map(move |x| a(t, y, x))), f32::to_le_bytes);
        w.append("a", &av).unwrap();
        if x0 == 0 {
            w.append("b", &le((y0..y1).map(|y| b(t, y)), f64::to_le_bytes)).unwrap();
        }
        if x0 == 0 && y0 == 0 {
            w.append("time", &(t as f64 * 6.0).to_le_bytes()).unwrap();
        }
    }
}

fn feed_static(w: &mut PartWriter, block: &Block) {
    let [y0, y1] = block.get("y").copied().unwrap_or([0, NY]);
    let [x0, x1] = block.get("x").copied().unwrap_or([0, NX]);
    w.put_static("mask", &(y0..y1).flat_map(|y| (x0..x1).map(move |x| ((x + y) % 3) as u8)).collect::<Vec<_>>())
        .unwrap();
    if x0 == 0 {
        w.put_static("lat", &le((y0..y1).map(|y| y as f32 - 20.0), f32::to_le_bytes)).unwrap();
    }
}

fn check(path: &str) {
    let r = StoreReader::open(Store::local(path), None).unwrap();
    assert_eq!(r.manifest().dim("t").unwrap().size, T);
    let all = |n: u64| DimSelection { start: 0, stop: n, step: 1 };
    let mut got = vec![0u8; (T * NY * NX * 4) as usize];
    r.read_into("a", &[all(T), all(NY), all(NX)], &mut got).unwrap();
    let want = le((0..T).flat_map(|t| (0..NY).flat_map(move |y| (0..NX).map(move |x| a(t, y, x)))), f32::to_le_bytes);
    assert!(got == want, "a differs");
    let mut got = vec![0u8; (T * NY * 8) as usize];
    r.read_into("b", &[all(T), all(NY)], &mut got).unwrap();
    assert_eq!(got, le((0..T).flat_map(|t| (0..NY).map(move |y| b(t, y))), f64::to_le_bytes));
    let mut got = vec![0u8; (NY * NX) as usize];
    r.read_into("mask", &[all(NY), all(NX)], &mut got).unwrap();
    assert_eq!(got, (0..NY).flat_map(|y| (0..NX).map(move |x| ((x + y) % 3) as u8)).collect::<Vec<_>>());
    let mut got = vec![0u8; (T * 8) as usize];
    r.read_into("time", &[all(T)], &mut got).unwrap();
    assert_eq!(got, le((0..T).map(|t| t as f64 * 6.0), f64::to_le_bytes));
    let report = crate::verify::verify(Store::local(path), None, true).unwrap();
    assert!(report.is_clean(), "{report:?}");
}

fn options(layout: &str, codec: Option<&str>) -> WriterOptions {
    let mut o = WriterOptions {
        slab_records: Some(10),
        layout: Some(layout.into()),
        codec: codec.map(str::to_string),
        decomposition: BTreeMap::from([("y".into(), vec![20]), ("x".into(), vec![30])]),
        ..Default::default()
    };
    if layout.contains('V') {
        o.binning = Some("2,10,20,40".into());
    }
    o
}

/// The protocol run in one thread, writers taking turns (the Python drivers run it on
/// threads, Dask or MPI).
fn write_blocks(path: &str, placement: Placement, options: &WriterOptions) {
    write_blocks_with(path, placement, options, |_| options.clone())
}

fn write_blocks_with(path: &str, placement: Placement, options: &WriterOptions, own: impl Fn(u32) -> WriterOptions) {
    let store = || Store::local(path);
    let blocks = blocks();
    let mut coord = Coordinator::create(store(), schema(), options, 4, placement).unwrap();
    let token = coord.token().to_string();
    let mut writers: Vec<PartWriter> = (0..4)
        .map(|r| PartWriter::new(store(), schema(), &own(r), part(&token, placement, blocks.clone(), r, 0)).unwrap())
        .collect();
    let mut round = |writers: &mut Vec<PartWriter>, last: bool| {
        let tables: Vec<PartTable> = writers
            .iter_mut()
            .map(|w| w.encode(last).unwrap())
            .map(|t| PartTable::from_bytes(&t.unwrap().to_bytes()).unwrap())
            .collect();
        let placements = coord.place(tables).unwrap();
        for (w, p) in writers.iter_mut().zip(placements) {
            w.write(&PartPlacement::from_bytes(&p.to_bytes()).unwrap()).unwrap();
        }
    };
    for (w, block) in writers.iter_mut().zip(&blocks) {
        feed_static(w, block);
    }
    round(&mut writers, false); // the static slab
    for t in 0..T {
        for (w, block) in writers.iter_mut().zip(&blocks) {
            feed(w, block, t, t + 1);
        }
        if writers[0].ready() {
            round(&mut writers, false);
        }
    }
    round(&mut writers, true);
    coord.commit("parallel").unwrap();
}

#[test]
fn dense_and_hybrid_blocks_read_back_and_verify() {
    let hybrid = |fraction, padding| Placement::Hybrid { fraction, padding };
    // Slots too small for anything, large enough for everything, and in between.
    for placement in [Placement::Dense, hybrid(0.01, 0.0), hybrid(2.0, 0.0), hybrid(0.3, 0.1)] {
        let cases =
            [("S", None, None), ("V-S", Some("shuffle+zstd:1"), None), ("V-S", None, Some(64)), ("M-S", None, None)];
        for (layout, codec, frames) in cases {
            let dir = tempfile::tempdir().unwrap();
            let path = format!("{}/s", dir.path().display());
            write_blocks(&path, placement, &WriterOptions { index_frame_bytes: frames, ..options(layout, codec) });
            check(&path);
            let m = Store::local(&path).manifest(None).unwrap();
            // The coordinator writes the merged positions in frames as a single writer would.
            let framed = m.slabs.iter().filter(|s| {
                let size = m.files.iter().find(|f| f.path == s.index).unwrap().size;
                crate::index_frames::open(Store::local(&path).storage().as_ref(), &s.index, size, "t")
                    .unwrap()
                    .is_some()
            });
            assert_eq!(framed.count(), if frames.is_some() { m.slabs.len() } else { 0 }, "{placement:?} {layout}");
            assert_eq!(m.slabs.len(), 4, "{placement:?} {layout}"); // static + 10 + 10 + 5
                                                                    // Chunks cut to fit the blocks, which meet at y = 20 and x = 30.
            let chunk = &m.variables[3].chunking.as_ref().unwrap().chunk;
            assert!(20 % chunk[1] == 0 && 30 % chunk[2] == 0, "{chunk:?}");
        }
    }
}

/// A store of the blocks in `layout` (with level V), positions in frames of
/// `frame_bytes` (None: the default, each slab's whole), opened.
fn binned_store(layout: &str, frame_bytes: Option<u64>) -> (tempfile::TempDir, StoreReader) {
    let dir = tempfile::tempdir().unwrap();
    let path = format!("{}/s", dir.path().display());
    write_blocks(&path, Placement::Dense, &WriterOptions { index_frame_bytes: frame_bytes, ..options(layout, None) });
    let reader = StoreReader::open(Store::local(&path), None).unwrap();
    (dir, reader)
}

/// A positions query through every slab of a V-S store (three record slabs and the
/// static one), by index, checked against the values written.
fn positions_query_through_every_slab(reader: &StoreReader) -> crate::Result<u64> {
    use crate::query::{CmpOp, Method, Predicate};
    use crate::{Output, Query, Session};
    let all = |n: u64| DimSelection { start: 0, stop: n, step: 1 };
    let query = Query {
        predicate: Predicate::Cmp { var: "a".into(), op: CmpOp::Gt, value: 15.0 },
        region: vec![all(T), all(NY), all(NX)],
        output: Output::Positions,
        variables: vec!["a".into()],
        level: None,
        method: Some(Method::Index),
        mask: None,
        raw: false,
    };
    Session::default().run(reader, &query).map(|got| got.count)
}

fn a_gt_15() -> u64 {
    (0..T).flat_map(|t| (0..NY).flat_map(move |y| (0..NX).map(move |x| a(t, y, x)))).filter(|&v| v > 15.0).count()
        as u64
}

#[test]
fn a_reader_keeps_a_few_frames_of_positions_over_all_its_slabs() {
    // In frames, or whole (each slab's positions one frame, read again when dropped).
    for frame_bytes in [Some(64), None] {
        let dir = tempfile::tempdir().unwrap();
        let path = format!("{}/s", dir.path().display());
        write_blocks(
            &path,
            Placement::Dense,
            &WriterOptions { index_frame_bytes: frame_bytes, ..options("V-S", None) },
        );
        let m = Store::local(&path).manifest(None).unwrap();
        let frames: usize = m
            .slabs
            .iter()
            .filter_map(|s| {
                let size = m.files.iter().find(|f| f.path == s.index).unwrap().size;
                crate::index_frames::open(Store::local(&path).storage().as_ref(), &s.index, size, "t").unwrap()
            })
            .map(|o| o.frames.frames.len())
            .sum();
        assert_eq!(frames > 6, frame_bytes.is_some(), "{frames} frames");
        let reader = StoreReader::open(Store::local(&path), None).unwrap();
        assert_eq!(positions_query_through_every_slab(&reader).unwrap(), a_gt_15());
        // The walk went through every slab's positions (frames, or the three record slabs'
        // whole) and kept the last within the unit tests' 4 KiB (kept per slab, each slab
        // held its own).
        let (kept, bytes) = reader.frames_kept();
        let walked = if frame_bytes.is_some() { frames } else { 3 };
        assert!(kept >= 1 && kept < walked && (bytes <= 4 << 10 || kept == 1), "{kept} of {walked}, {bytes} B");
        // Walked again, the dropped ones are read again.
        assert_eq!(positions_query_through_every_slab(&reader).unwrap(), a_gt_15());
    }
}

#[test]
fn counts_by_index_read_no_positions_and_equal_the_values_written() {
    use crate::query::{CmpOp, Method, Predicate};
    use crate::{Output, Query, Session};
    for (layout, frame_bytes) in [("V-S", None), ("V-M-S", Some(64)), ("M-V-S", None)] {
        let (_dir, reader) = binned_store(layout, frame_bytes);
        let sel = |n: u64, step: u64| DimSelection { start: 0, stop: n, step };
        // Whole boxes (no positions needed), then every other column (positions needed).
        for step in [1, 2] {
            for (op, value) in [(CmpOp::Gt, 15.0), (CmpOp::Le, 33.3), (CmpOp::Ge, 0.0), (CmpOp::Lt, -1.0)] {
                let query = Query {
                    predicate: Predicate::Cmp { var: "a".into(), op, value },
                    region: vec![sel(T, 1), sel(NY, 1), sel(NX, step)],
                    output: Output::Count,
                    variables: vec![],
                    level: None,
                    method: Some(Method::Index),
                    mask: None,
                    raw: false,
                };
                let got = Session::default().run(&reader, &query).unwrap().count;
                let want = (0..T)
                    .flat_map(|t| (0..NY).flat_map(move |y| (0..NX).step_by(step as usize).map(move |x| a(t, y, x))))
                    .filter(|&v| op.matches(&[f64::from(v)], value, &[])[0])
                    .count() as u64;
                assert_eq!(got, want, "{layout} {op:?} {value} step {step}");
                if step == 1 {
                    assert_eq!(reader.frames_kept().0, 0, "{layout}: a whole count read positions");
                }
            }
        }
    }
}

#[test]
fn value_queries_read_no_positions_where_no_element_or_every_element_of_a_box_holds() {
    use crate::query::{CmpOp, Method, Predicate};
    use crate::{Output, Query, Session};
    for (layout, frame_bytes) in [("V-S", Some(64)), ("V-M-S", None)] {
        let (dir, _) = binned_store(layout, frame_bytes);
        let path = format!("{}/s", dir.path().display());
        let all = |n: u64| DimSelection { start: 0, stop: n, step: 1 };
        let values: Vec<f32> =
            (0..T).flat_map(|t| (0..NY).flat_map(move |y| (0..NX).map(move |x| a(t, y, x)))).collect();
        // Above every value (no box holds), below every value (each box whole), then
        // through the bins. Points place a box's values by their bins' positions; positions
        // of whole boxes need none.
        for value in [1000.0, -5.0, 15.0] {
            for output in [Output::Positions, Output::Points] {
                let reader = StoreReader::open(Store::local(&path), None).unwrap();
                let query = Query {
                    predicate: Predicate::Cmp { var: "a".into(), op: CmpOp::Gt, value },
                    region: vec![all(T), all(NY), all(NX)],
                    output,
                    variables: vec!["a".into()],
                    level: None,
                    method: Some(Method::Index),
                    mask: None,
                    raw: false,
                };
                let got = Session::default().run(&reader, &query).unwrap();
                let want: Vec<u64> =
                    (0..values.len() as u64).filter(|&i| f64::from(values[i as usize]) > value).collect();
                assert_eq!(got.selection.flat, want, "{layout} a > {value} {output:?}");
                if output == Output::Points {
                    let kept: Vec<f32> = want.iter().map(|&i| values[i as usize]).collect();
                    assert_eq!(got.columns, vec![le(kept.into_iter(), f32::to_le_bytes)], "{layout} a > {value}");
                }
                let reads = value == 15.0 || (value == -5.0 && output == Output::Points);
                assert_eq!(reader.frames_kept().0 > 0, reads, "{layout} a > {value} {output:?}");
            }
        }
    }
}

#[test]
fn positions_changed_on_disk_after_their_index_was_read_are_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = format!("{}/s", dir.path().display());
    write_blocks(&path, Placement::Dense, &options("V-S", None));
    let reader = StoreReader::open(Store::local(&path), None).unwrap();
    // Indexes read (checked whole), positions left in their files.
    for index in reader.slab_indexes().unwrap() {
        index.unwrap();
    }
    assert_eq!(reader.frames_kept().0, 0);
    let m = reader.manifest();
    let last = &m.slabs.last().unwrap().index;
    let file = format!("{path}/{last}");
    let mut bytes = std::fs::read(&file).unwrap();
    let body_len = bytes.len() - crate::index_file::TRAILER_LEN;
    let head = crate::index_file::Head::parse(&bytes, body_len, "t").unwrap();
    let section = head.sections.iter().find(|s| s.kind == crate::index_file::SECTION_BIN_POSITIONS).unwrap();
    bytes[section.offset + section.len / 2] ^= 0x10;
    std::fs::write(&file, &bytes).unwrap();
    let err = positions_query_through_every_slab(&reader).unwrap_err();
    assert!(matches!(err, crate::Error::Corruption(_)), "{err}");
    assert!(err.to_string().contains("checksum mismatch"), "{err}");
}

#[test]
fn planning_sees_each_bin_from_the_segments_table_as_its_positions_tell_it() {
    // Positions read when needed (framed or whole) give planning their bins from group-0
    // segments, without reading them; the lengths must be the positions' counts, under
    // level M's byte groups too.
    for (layout, frame_bytes) in [("V-S", Some(64)), ("V-M-S", Some(64)), ("M-V-S", Some(64)), ("V-M-S", None)] {
        let (_dir, reader) = binned_store(layout, frame_bytes);
        let mut compared = 0;
        for index in reader.slab_indexes().unwrap() {
            let index = index.unwrap();
            assert!(index.stats_from_segments(), "{layout}: positions read when needed");
            for &id in index.totals.keys() {
                let from_positions =
                    index.bins_of(id).unwrap().map(|b| b.iter().map(BinStat::from).collect::<Vec<_>>());
                assert_eq!(index.bin_stats(id).unwrap().map(|s| s.to_vec()), from_positions, "{layout} {id:?}");
                compared += from_positions.is_some() as usize;
            }
        }
        assert!(compared > 20, "{layout}: {compared} binned sub-chunks");
    }
}

#[test]
fn chains_chosen_by_each_writer_are_merged() {
    // As auto plans made by each writer from its own block would differ.
    let dir = tempfile::tempdir().unwrap();
    let path = format!("{}/s", dir.path().display());
    let o = options("S", None);
    let own = |rank: u32| WriterOptions { codec: Some(["lz4", "zstd:1"][rank as usize % 2].into()), ..o.clone() };
    write_blocks_with(&path, Placement::Dense, &o, own);
    check(&path);
    let m = Store::local(&path).manifest(None).unwrap();
    let a = m.variable("a").unwrap().1;
    assert_eq!(a.codecs.len(), 2, "{:?}", a.codecs);
}

#[test]
fn subfile_writers_of_record_ranges() {
    let dir = tempfile::tempdir().unwrap();
    let path = format!("{}/s", dir.path().display());
    let store = || Store::local(&path);
    let mut o = options("S", None);
    o.decomposition.clear();
    let mut coord = Coordinator::create(store(), schema(), &o, 3, Placement::Subfiles).unwrap();
    let token = coord.token().to_string();
    let mut tables = vec![];
    // Writer 2 finishes first: order does not matter.
    for (rank, [r0, r1]) in [(2u32, [20, T]), (0, [0, 10]), (1, [10, 20])] {
        let mut w =
            PartWriter::new(store(), schema(), &o, part(&token, Placement::Subfiles, vec![], rank, r0)).unwrap();
        if r0 == 0 {
            feed_static(&mut w, &Block::new());
        }
        feed(&mut w, &Block::new(), r0, r1);
        while let Some(t) = w.encode(true).unwrap() {
            tables.push(PartTable::from_bytes(&t.to_bytes()).unwrap());
        }
    }
    coord.place(tables).unwrap();
    coord.commit("subfiles").unwrap();
    check(&path);
    let m = Store::local(&path).manifest(None).unwrap();
    assert!(m.slabs.iter().filter(|s| s.records.is_some()).map(|s| &s.data).any(|d| d.contains("-w2")));
}

#[test]
fn a_subfile_writers_static_slab_spills_and_streams_to_its_file() {
    // Dask's `to_strata` writes a field without a record dimension through one subfile
    // writer, a block at a time: its encoded slab goes to the spill, then to its file.
    for layout in ["S", "V-S"] {
        let dir = tempfile::tempdir().unwrap();
        let path = format!("{}/s", dir.path().display());
        let store = || Store::local(&path);
        let mut o = options(layout, None);
        o.decomposition.clear();
        let mut coord = Coordinator::create(store(), schema(), &o, 1, Placement::Subfiles).unwrap();
        let token = coord.token().to_string();
        let mut w = PartWriter::new(store(), schema(), &o, part(&token, Placement::Subfiles, vec![], 0, 0)).unwrap();
        w.spill_at(1);
        let piece = w.static_piece("mask").unwrap();
        for y0 in (0..NY).step_by(piece[0] as usize) {
            let y1 = (y0 + piece[0]).min(NY);
            let rows: Vec<u8> = (y0..y1).flat_map(|y| (0..NX).map(move |x| ((x + y) % 3) as u8)).collect();
            w.put_static_block("mask", &[y0, 0], &[y1 - y0, NX], &rows).unwrap();
        }
        w.put_static("lat", &le((0..NY).map(|y| y as f32 - 20.0), f32::to_le_bytes)).unwrap();
        feed(&mut w, &Block::new(), 0, T);
        let mut tables = vec![];
        while let Some(t) = w.encode(true).unwrap() {
            tables.push(PartTable::from_bytes(&t.to_bytes()).unwrap());
        }
        coord.place(tables).unwrap();
        coord.commit("subfile").unwrap();
        check(&path);
        let left: Vec<_> = std::fs::read_dir(format!("{path}/data")).unwrap().flatten().collect();
        assert!(left.iter().all(|e| !e.file_name().to_string_lossy().contains("spill")), "{layout}: {left:?}");
    }
}

#[test]
fn a_missing_writer_or_range_fails_the_write() {
    let dir = tempfile::tempdir().unwrap();
    let path = format!("{}/s", dir.path().display());
    let store = || Store::local(&path);
    let o = options("S", None);
    let mut coord = Coordinator::create(store(), schema(), &o, 4, Placement::Dense).unwrap();
    let token = coord.token().to_string();
    let mut w = PartWriter::new(store(), schema(), &o, part(&token, Placement::Dense, blocks(), 0, 0)).unwrap();
    feed_static(&mut w, &blocks()[0]);
    let err = coord.place(vec![w.encode(false).unwrap().unwrap()]).unwrap_err().to_string();
    assert!(err.contains("all 4 writers"), "{err}");
    // Blocks that overlap, or leave a gap.
    let mut overlapping = blocks();
    overlapping[1].insert("x".into(), [20, NX]);
    let err = PartWriter::new(store(), schema(), &o, part(&token, Placement::Dense, overlapping, 0, 0)).unwrap_err();
    assert!(err.to_string().contains("writers 0 and 1 overlap"), "{err}");
    let mut gap = blocks();
    gap[1].insert("x".into(), [40, NX]);
    let err = PartWriter::new(store(), schema(), &o, part(&token, Placement::Dense, gap, 0, 0)).unwrap_err();
    assert!(err.to_string().contains("must cover all"), "{err}");
    // Writers whose blocks cross a chunk: refused when the chunks were given.
    let mut bad = o.clone();
    bad.chunks.insert("x".into(), 25);
    let err = Coordinator::create(store(), schema(), &bad, 4, Placement::Dense).unwrap_err().to_string();
    assert!(err.contains("do not fit the writers' blocks"), "{err}");
    // Subfile ranges must meet.
    let mut o = options("S", None);
    o.decomposition.clear();
    let mut coord = Coordinator::create(store(), schema(), &o, 2, Placement::Subfiles).unwrap();
    let token = coord.token().to_string();
    let mut w = PartWriter::new(store(), schema(), &o, part(&token, Placement::Subfiles, vec![], 1, 10)).unwrap();
    feed(&mut w, &Block::new(), 10, 20);
    let t = w.encode(true).unwrap().unwrap();
    coord.place(vec![t]).unwrap();
    let err = coord.commit("gap").unwrap_err().to_string();
    assert!(err.contains("records 0..10 were written by no writer"), "{err}");
    assert!(!Store::local(&path).exists().unwrap());
}

#[test]
fn a_reader_keeps_slab_indexes_within_its_budget_and_reads_dropped_ones_again() {
    // Whole-read indexes (positions left aside) and framed ones (frames of 64 bytes), of
    // 4-9 KiB each here against the unit tests' budget of 12 KiB.
    for (layout, frame_bytes) in [("V-S", None), ("V-M-S", Some(64)), ("M-V-S", None)] {
        let (_dir, reader) = binned_store(layout, frame_bytes);
        let slabs = reader.manifest().slabs.len();
        for index in reader.slab_indexes().unwrap() {
            assert!(index.unwrap().heap_bytes() > 0);
        }
        let (kept, bytes) = reader.indexes_kept();
        assert!(kept >= 1 && (bytes <= INDEXES_KEPT_BYTES || kept == 1), "{layout}: {kept} kept, {bytes} B");
        assert!(kept < slabs, "{layout}: all {slabs} kept in {bytes} B of {INDEXES_KEPT_BYTES}");
        let loads = reader.stats().index_loads;
        assert_eq!(positions_query_through_every_slab(&reader).unwrap(), a_gt_15(), "{layout}");
        assert!(reader.stats().index_loads > loads, "{layout}: dropped indexes are read again");
        assert!(reader.indexes_kept().1 <= INDEXES_KEPT_BYTES || reader.indexes_kept().0 == 1);
    }
}

#[test]
fn a_read_tells_whether_the_indexes_it_needs_are_loaded() {
    let (_dir, reader) = binned_store("V-S", None);
    let all = |n: u64| DimSelection { start: 0, stop: n, step: 1 };
    let first = [DimSelection { start: 0, stop: 1, step: 1 }, all(NY), all(NX)];
    assert!(!reader.read_weight("a", &first).unwrap().indexes_loaded, "a fresh reader has none");
    let mut out = vec![0u8; (NY * NX) as usize * 4];
    reader.read_into("a", &first, &mut out).unwrap();
    assert!(reader.read_weight("a", &first).unwrap().indexes_loaded);
    // The whole field reaches slabs the first record's read did not load.
    assert!(!reader.read_weight("a", &[all(T), all(NY), all(NX)]).unwrap().indexes_loaded);
    assert!(reader.read_weight("nope", &first).is_err());
}
