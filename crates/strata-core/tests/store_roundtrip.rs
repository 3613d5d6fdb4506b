#![allow(clippy::unwrap_used)] // tests may panic on failure

use std::sync::Arc;
use strata_core::manifest::{AttrValue, Attribute, Dim};
use strata_core::storage::{conformance, LocalStorage, MemoryStorage, Storage};
use strata_core::writer::{DatasetSchema, VariableSchema};
use strata_core::{DType, DimSelection, ErrorKind, Store, StoreReader, StoreWriter, WriterOptions};

#[test]
fn local_storage_conforms() {
    let dir = tempfile::tempdir().unwrap();
    conformance::run(&LocalStorage::new(dir.path()));
}

#[test]
fn memory_storage_conforms() {
    conformance::run(&MemoryStorage::new());
}

/// time(n) x lat(37) x lon(53) f32 field with NaNs, plus a static lat coordinate.
fn schema(records: u64) -> DatasetSchema {
    DatasetSchema {
        dims: vec![
            Dim { name: "time".into(), size: records, unlimited: true },
            Dim { name: "lat".into(), size: 37, unlimited: false },
            Dim { name: "lon".into(), size: 53, unlimited: false },
        ],
        record_dim: Some("time".into()),
        attrs: vec![Attribute { name: "title".into(), value: AttrValue::String("test".into()) }],
        variables: vec![
            VariableSchema {
                name: "temp".into(),
                dtype: DType::F32,
                dims: vec!["time".into(), "lat".into(), "lon".into()],
                attrs: vec![Attribute { name: "_FillValue".into(), value: AttrValue::F32(vec![f32::NAN]) }],
                inline_strings: None,
            },
            VariableSchema {
                name: "lat".into(),
                dtype: DType::F64,
                dims: vec!["lat".into()],
                attrs: vec![],
                inline_strings: None,
            },
        ],
    }
}

fn value(t: u64, y: u64, x: u64) -> f32 {
    if (t + y * 3 + x).is_multiple_of(17) {
        f32::NAN
    } else {
        (t as f32) * 100.0 + (y as f32).sin() * 10.0 + x as f32 * 0.25
    }
}

fn field(t0: u64, n: u64) -> Vec<u8> {
    let mut v = Vec::new();
    for t in t0..t0 + n {
        for y in 0..37 {
            for x in 0..53 {
                v.extend_from_slice(&value(t, y, x).to_le_bytes());
            }
        }
    }
    v
}

fn options() -> WriterOptions {
    WriterOptions { chunk_bytes: Some(4096), subchunk_bytes: Some(512), slab_records: Some(4), ..Default::default() }
}

fn write(store: &Store, records: u64) -> u64 {
    let mut w = StoreWriter::create(store.clone(), schema(records), &options()).unwrap();
    let lat: Vec<u8> = (0..37).flat_map(|i| (i as f64 * 5.0 - 90.0).to_le_bytes()).collect();
    w.put_static("lat", &lat).unwrap();
    append(&mut w, records);
    w.commit("create").unwrap()
}

fn append(w: &mut StoreWriter, records: u64) {
    let mut done = 0;
    while done < records {
        let n = (records - done).min(w.slab_records());
        let start = w.record_count();
        w.begin_slab(n).unwrap();
        w.put_records("temp", &field(start, n)).unwrap();
        w.finish_slab().unwrap();
        done += n;
    }
}

fn read(reader: &StoreReader, sel: [DimSelection; 3]) -> Vec<u32> {
    let shape = reader.check_selection("temp", &sel).unwrap();
    let mut out = vec![0u8; shape.iter().product::<u64>() as usize * 4];
    reader.read_into("temp", &sel, &mut out).unwrap();
    out.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

fn expected(sel: [DimSelection; 3]) -> Vec<u32> {
    let mut v = Vec::new();
    for t in (sel[0].start..sel[0].stop).step_by(sel[0].step as usize) {
        for y in (sel[1].start..sel[1].stop).step_by(sel[1].step as usize) {
            for x in (sel[2].start..sel[2].stop).step_by(sel[2].step as usize) {
                v.push(value(t, y, x).to_bits());
            }
        }
    }
    v
}

fn s(start: u64, stop: u64, step: u64) -> DimSelection {
    DimSelection { start, stop, step }
}

#[test]
fn selections_read_back_exactly() {
    let store = Store::new(Arc::new(MemoryStorage::new()), "mem");
    write(&store, 10);
    let reader = StoreReader::open(store, None).unwrap();
    assert_eq!(reader.manifest().slabs.len(), 4, "one static slab and three record slabs");
    for sel in [
        [s(0, 10, 1), s(0, 37, 1), s(0, 53, 1)],
        [s(3, 9, 2), s(5, 36, 3), s(1, 52, 7)],
        [s(9, 10, 1), s(36, 37, 1), s(52, 53, 1)],
        [s(0, 10, 9), s(0, 37, 36), s(0, 53, 52)],
        [s(4, 4, 1), s(0, 37, 1), s(0, 53, 1)],
        [s(2, 7, 1), s(10, 20, 1), s(40, 53, 1)],
    ] {
        assert_eq!(read(&reader, sel), expected(sel), "{sel:?}");
    }
    let mut lat = vec![0u8; 8 * 3];
    reader.read_into("lat", &[s(0, 37, 18)], &mut lat).unwrap();
    let lat: Vec<f64> = lat.chunks_exact(8).map(|c| f64::from_le_bytes(c.try_into().unwrap())).collect();
    assert_eq!(lat, vec![-90.0, 0.0, 90.0]);
}

#[test]
fn out_of_range_selections_are_invalid_arguments() {
    let store = Store::new(Arc::new(MemoryStorage::new()), "mem");
    write(&store, 5);
    let reader = StoreReader::open(store, None).unwrap();
    for sel in
        [vec![s(0, 6, 1), s(0, 37, 1), s(0, 53, 1)], vec![s(0, 5, 0), s(0, 37, 1), s(0, 53, 1)], vec![s(0, 5, 1)]]
    {
        let e = reader.check_selection("temp", &sel).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{sel:?}");
    }
    let e = reader.read_into("nope", &[], &mut []).unwrap_err();
    assert!(e.to_string().contains("no variable 'nope'"));
}

#[test]
fn append_makes_a_new_version_and_old_versions_stay_readable() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::local(dir.path().to_str().unwrap());
    assert_eq!(write(&store, 6), 1);
    let mut w = StoreWriter::open_append(store.clone()).unwrap();
    append(&mut w, 5);
    assert_eq!(w.commit("append").unwrap(), 2);
    assert_eq!(store.versions().unwrap(), vec![1, 2]);
    let old = StoreReader::open(store.clone(), Some(1)).unwrap();
    let new = StoreReader::open(store, None).unwrap();
    assert_eq!(old.manifest().dim("time").unwrap().size, 6);
    assert_eq!(new.manifest().dim("time").unwrap().size, 11);
    let all = [s(0, 11, 1), s(0, 37, 1), s(0, 53, 1)];
    assert_eq!(read(&new, all), expected(all));
    let old_all = [s(0, 6, 1), s(0, 37, 1), s(0, 53, 1)];
    assert_eq!(read(&old, old_all), expected(old_all));
}

#[test]
fn concurrent_commits_conflict_and_leave_the_store_intact() {
    let store = Store::new(Arc::new(MemoryStorage::new()), "mem");
    write(&store, 4);
    let mut a = StoreWriter::open_append(store.clone()).unwrap();
    let mut b = StoreWriter::open_append(store.clone()).unwrap();
    append(&mut a, 2);
    append(&mut b, 3);
    assert_eq!(a.commit("a").unwrap(), 2);
    assert_eq!(b.commit("b").unwrap_err().kind(), ErrorKind::Conflict);
    let r = StoreReader::open(store, None).unwrap();
    assert_eq!(r.manifest().dim("time").unwrap().size, 6);
}

#[test]
fn uncommitted_writes_are_invisible() {
    let store = Store::new(Arc::new(MemoryStorage::new()), "mem");
    write(&store, 4);
    let mut w = StoreWriter::open_append(store.clone()).unwrap();
    append(&mut w, 4);
    drop(w); // the writer dies before committing
    let r = StoreReader::open(store, None).unwrap();
    assert_eq!(r.manifest().version, 1);
    assert_eq!(r.manifest().dim("time").unwrap().size, 4);
}

#[test]
fn corruption_is_reported_not_hidden() {
    let mem = Arc::new(MemoryStorage::new());
    let store = Store::new(mem.clone(), "mem");
    write(&store, 4);
    let reader = StoreReader::open(store.clone(), None).unwrap();
    let slab = reader.manifest().slabs[1].clone();
    let full = [s(0, 4, 1), s(0, 37, 1), s(0, 53, 1)];

    // Flip one byte in every segment position in turn: checksums catch each one.
    let data = mem.read(&slab.data).unwrap();
    for pos in (24..data.len()).step_by(97) {
        let mut bad = data.clone();
        bad[pos] ^= 0x40;
        mem.write_atomic(&slab.data, &bad).unwrap();
        let r = StoreReader::open(store.clone(), None).unwrap();
        let mut out = vec![0u8; 4 * 37 * 53 * 4];
        let e = r.read_into("temp", &full, &mut out).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Corruption, "byte {pos}: {e}");
    }
    // A data file header that is not this slab's file's (bad magic, another slab's file):
    // found although every segment's checksum holds.
    let other = reader.manifest().slabs[0].data.clone();
    for (bad, why) in [(b"XTRATADT".to_vec(), "bad magic"), (mem.read(&other).unwrap()[..24].to_vec(), "names slab")] {
        let mut swapped = data.clone();
        swapped[..bad.len()].copy_from_slice(&bad);
        mem.write_atomic(&slab.data, &swapped).unwrap();
        let r = StoreReader::open(store.clone(), None).unwrap();
        let mut out = vec![0u8; 4 * 37 * 53 * 4];
        let e = r.read_into("temp", &full, &mut out).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Corruption, "{e}");
        assert!(e.to_string().contains(why) && e.to_string().contains(&slab.data), "{e}");
    }
    // A truncated data file.
    mem.write_atomic(&slab.data, &data[..data.len() / 2]).unwrap();
    let r = StoreReader::open(store.clone(), None).unwrap();
    let mut out = vec![0u8; 4 * 37 * 53 * 4];
    assert_eq!(r.read_into("temp", &full, &mut out).unwrap_err().kind(), ErrorKind::Corruption);
    mem.write_atomic(&slab.data, &data).unwrap();

    // A truncated index file.
    let index = mem.read(&slab.index).unwrap();
    mem.write_atomic(&slab.index, &index[..index.len() - 3]).unwrap();
    let r = StoreReader::open(store.clone(), None).unwrap();
    assert_eq!(r.read_into("temp", &full, &mut out).unwrap_err().kind(), ErrorKind::Corruption);
    mem.write_atomic(&slab.index, &index).unwrap();

    // A truncated or garbled manifest.
    let path = strata_core::store::manifest_path(1);
    let manifest = mem.read(&path).unwrap();
    for cut in [0, 1, manifest.len() / 3, manifest.len() - 2] {
        mem.write_atomic(&path, &manifest[..cut]).unwrap();
        assert_eq!(StoreReader::open(store.clone(), None).unwrap_err().kind(), ErrorKind::Corruption, "cut {cut}");
    }
    // A flipped bit that leaves valid JSON (an attribute's text) is caught by the checksum.
    let edited = String::from_utf8(manifest.clone()).unwrap().replace("\"test\"", "\"tesT\"");
    assert_ne!(edited.as_bytes(), &manifest[..]);
    mem.write_atomic(&path, edited.as_bytes()).unwrap();
    let e = StoreReader::open(store.clone(), None).unwrap_err();
    assert!(e.kind() == ErrorKind::Corruption && e.to_string().contains("checksum"), "{e}");
    let text = String::from_utf8(manifest.clone()).unwrap().replace("\"format_version\": 1", "\"format_version\": 7");
    mem.write_atomic(&path, text.as_bytes()).unwrap();
    assert_eq!(StoreReader::open(store.clone(), None).unwrap_err().kind(), ErrorKind::Compatibility);
    mem.write_atomic(&path, &manifest).unwrap();
    assert!(StoreReader::open(store, None).is_ok());
}

#[test]
fn a_consistent_looking_index_pointing_outside_the_data_file_is_corruption() {
    use strata_core::index_file::{decode, encode};
    let mem = Arc::new(MemoryStorage::new());
    let store = Store::new(mem.clone(), "mem");
    write(&store, 4);
    let slab = StoreReader::open(store.clone(), None).unwrap().manifest().slabs[1].clone();
    let original = mem.read(&slab.index).unwrap();
    for (offset, length) in [(u64::MAX - 3, 10), (0, 10), (10_000_000, 5)] {
        let mut data = decode(&original, "t").unwrap();
        data.segments[0].offset = offset;
        data.segments[0].length = length;
        // Re-encoded, so the CRC is valid: only the consistency checks can catch it.
        let bytes = encode(&data);
        mem.write_atomic(&slab.index, &bytes).unwrap();
        // The manifest's recorded size would catch a different length; keep the size equal.
        assert_eq!(bytes.len(), original.len());
        let r = StoreReader::open(store.clone(), None).unwrap();
        let mut out = vec![0u8; 4 * 37 * 53 * 4];
        let full = [s(0, 4, 1), s(0, 37, 1), s(0, 53, 1)];
        let e = r.read_into("temp", &full, &mut out).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Corruption, "{e}");
        assert!(e.to_string().contains("outside data file"), "{e}");
    }
}

#[test]
fn writer_rejects_bad_input() {
    let store = Store::new(Arc::new(MemoryStorage::new()), "mem");
    let mut w = StoreWriter::create(store.clone(), schema(4), &options()).unwrap();
    assert_eq!(w.put_static("lat", &[0u8; 3]).unwrap_err().kind(), ErrorKind::InvalidArgument);
    assert_eq!(w.put_records("temp", &[]).unwrap_err().kind(), ErrorKind::InvalidArgument);
    assert_eq!(w.begin_slab(99).unwrap_err().kind(), ErrorKind::InvalidArgument);
    w.begin_slab(2).unwrap();
    assert_eq!(w.finish_slab().unwrap_err().kind(), ErrorKind::InvalidArgument);
    let bad_bins = WriterOptions { layout: Some("V-S".into()), binning: Some("3,1".into()), ..Default::default() };
    let e = StoreWriter::create(store.clone(), schema(1), &bad_bins).unwrap_err();
    assert!(e.to_string().contains("strictly increasing"), "{e}");
    let bins_without_v = WriterOptions { bins: Some(8), ..Default::default() };
    let e = StoreWriter::create(store, schema(1), &bins_without_v).unwrap_err();
    assert!(e.to_string().contains("need level V"), "{e}");
}

#[test]
fn readers_of_two_stores_share_caches_without_mixing_them() {
    // The same shape, chunking and slab ids, other values: a cache keyed by slab and
    // sub-chunk alone would hand the second store the first one's decoded segments.
    let shift = 1000;
    let a = Store::new(Arc::new(MemoryStorage::new()), "a");
    write(&a, 10);
    let b = Store::new(Arc::new(MemoryStorage::new()), "b");
    let mut w = StoreWriter::create(b.clone(), schema(10), &options()).unwrap();
    w.put_static("lat", &(0..37).flat_map(|i| (i as f64).to_le_bytes()).collect::<Vec<u8>>()).unwrap();
    for t0 in (0..10).step_by(4) {
        let n = (10 - t0).min(4);
        w.begin_slab(n).unwrap();
        w.put_records("temp", &field(t0 + shift, n)).unwrap();
        w.finish_slab().unwrap();
    }
    w.commit("shifted").unwrap();
    let caches = strata_core::ReaderCaches::new(1 << 20);
    let ra = StoreReader::open_sharing(a, None, caches.clone()).unwrap();
    let rb = StoreReader::open_sharing(b, None, caches.clone()).unwrap();
    let all = [s(0, 10, 1), s(0, 37, 1), s(0, 53, 1)];
    let shifted = |sel: [DimSelection; 3]| {
        let moved = [s(sel[0].start + shift, sel[0].stop + shift, sel[0].step), sel[1], sel[2]];
        expected(moved)
    };
    for _ in 0..2 {
        assert_eq!(read(&ra, all), expected(all));
        assert_eq!(read(&rb, all), shifted(all));
    }
    let (segments, indexes, _) = caches.bytes();
    assert!(segments > 0 && segments <= 1 << 20 && indexes > 0, "{segments} {indexes}");
    assert!(rb.stats().cache_hits > 0, "the second read of each store is served from the shared cache");
}
