//! A slab larger than memory should hold: its encoded segments (and level V's positions)
//! wait in a spill file, in the order they were encoded, until the slab is complete; the
//! data file is then written from it in the layout's order, a batch at a time, and the
//! index's positions a frame at a time.
//!
//! Record slabs never need this (their length bounds them); the static slab holds every
//! variable without the record dimension, whatever their size, and its layout order is
//! known only once all of them are encoded.

use crate::error::Result;
use crate::storage::Storage;
use crate::store::random_suffix;
use crate::writer::{PendingBitmap, PendingSegment};

/// What a spill takes out of memory: encoded bytes, and where they went.
pub(crate) trait Spillable {
    fn parts(&mut self) -> (&mut Vec<u8>, &mut Option<Spilled>);
}

impl Spillable for PendingSegment {
    fn parts(&mut self) -> (&mut Vec<u8>, &mut Option<Spilled>) {
        (&mut self.bytes, &mut self.spilled)
    }
}

impl Spillable for PendingBitmap {
    fn parts(&mut self) -> (&mut Vec<u8>, &mut Option<Spilled>) {
        (&mut self.packed.bytes, &mut self.spilled)
    }
}

/// Encoded bytes a slab keeps in memory before they go to its spill file.
pub(crate) const SPILL_AT_BYTES: u64 = 64 << 20;
/// Bytes gathered before each write of the data file built from a spill.
const WRITE_BATCH_BYTES: usize = 16 << 20;

/// Where a spilled segment's bytes are.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Spilled {
    pub(crate) at: u64,
    pub(crate) length: u64,
    pub(crate) checksum: u32,
}

/// Writes a slab's data file at `path`: `header`, then `segments` in their order, read back
/// from `spill` a batch at a time when the slab spilled; else as they are in memory (no copy
/// into one buffer), after one pass of the hardware CRC (combining per-segment CRCs costs
/// more when segments are many and small). Returns the file's CRC-32C.
pub(crate) fn write_data_file(
    storage: &dyn Storage,
    path: &str,
    header: &[u8],
    segments: &[PendingSegment],
    spill: Option<&Spill>,
) -> Result<u32> {
    if let Some(spill) = spill {
        return spill.write_data_file(storage, path, header, segments);
    }
    let mut parts: Vec<&[u8]> = Vec::with_capacity(segments.len() + 1);
    parts.push(header);
    parts.extend(segments.iter().map(|s| s.bytes.as_slice()));
    let crc = parts.iter().fold(0, |c, p| crc32c::crc32c_append(c, p));
    storage.write_new_parts(path, &parts)?;
    Ok(crc)
}

/// A slab's spill file, named as a write's temporary file (`.NAME.tmp-*`): one a writer
/// leaves behind when it stops is a leftover `gc` removes.
#[derive(Debug)]
pub(crate) struct Spill {
    path: String,
    len: u64,
}

impl Spill {
    pub(crate) fn new(slab_id: u64) -> Self {
        Spill { path: format!("data/.s{slab_id:06}.spill.tmp-{}", random_suffix()), len: 0 }
    }

    /// Moves the bytes of every item (segment or positions) still in memory to the file.
    pub(crate) fn take<T: Spillable>(&mut self, storage: &dyn Storage, items: &mut [T]) -> Result<()> {
        let mut batch: Vec<u8> = Vec::new();
        let mut batch_at = self.len;
        for item in items.iter_mut() {
            let (bytes, spilled) = item.parts();
            if spilled.is_some() {
                continue;
            }
            let bytes = std::mem::take(bytes);
            *spilled = Some(Spilled { at: self.len, length: bytes.len() as u64, checksum: crc32c::crc32c(&bytes) });
            self.len += bytes.len() as u64;
            batch.extend_from_slice(&bytes);
            if batch.len() >= WRITE_BATCH_BYTES {
                storage.write_at(&self.path, batch_at, &batch)?;
                batch_at += batch.len() as u64;
                batch.clear();
            }
        }
        if !batch.is_empty() {
            storage.write_at(&self.path, batch_at, &batch)?;
        }
        Ok(())
    }

    /// The bytes of one spilled item, checked against the CRC taken as it spilled.
    pub(crate) fn read(&self, storage: &dyn Storage, p: Spilled) -> Result<Vec<u8>> {
        let bytes = storage.read_range(&self.path, p.at, p.length)?;
        if crc32c::crc32c(&bytes) != p.checksum {
            return Err(crate::Error::Corruption(format!("spill file {}: bytes at {} changed", self.path, p.at)));
        }
        Ok(bytes)
    }

    /// Writes the data file at `path`: `header`, then `segments` in their order, the spilled
    /// ones read back from the file. Returns the file's CRC-32C.
    fn write_data_file(
        &self,
        storage: &dyn Storage,
        path: &str,
        header: &[u8],
        segments: &[PendingSegment],
    ) -> Result<u32> {
        let mut batch: Vec<u8> = Vec::with_capacity(WRITE_BATCH_BYTES + header.len());
        batch.extend_from_slice(header);
        let (mut written, mut crc) = (0u64, 0u32);
        for s in segments {
            let read;
            let bytes = match s.spilled {
                Some(p) => {
                    read = storage.read_range(&self.path, p.at, p.length)?;
                    &read
                }
                None => &s.bytes,
            };
            batch.extend_from_slice(bytes);
            if batch.len() >= WRITE_BATCH_BYTES {
                crc = crc32c::crc32c_append(crc, &batch);
                storage.write_at(path, written, &batch)?;
                written += batch.len() as u64;
                batch.clear();
            }
        }
        crc = crc32c::crc32c_append(crc, &batch);
        storage.write_at(path, written, &batch)?;
        written += batch.len() as u64;
        storage.sync(path, written)?;
        Ok(crc)
    }

    /// Removes the file, once the data file and the index are written from it. (A spill
    /// left behind is only disk space, which `gc` gives back.)
    pub(crate) fn remove(&self, storage: &dyn Storage) {
        let _ = storage.delete(&self.path);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use crate::error::ErrorKind;
    use crate::manifest::Dim;
    use crate::storage::MemoryStorage;
    use crate::writer::{DatasetSchema, StoreWriter, VariableSchema, WriterOptions};
    use crate::{DType, Store, StoreReader};
    use std::sync::Arc;

    const M: u64 = 7;

    fn schema() -> DatasetSchema {
        let dim = |name: &str, size| Dim { name: name.into(), size, unlimited: false };
        let var = |name: &str, dtype, dims: &[&str]| VariableSchema {
            name: name.into(),
            dtype,
            dims: dims.iter().map(|d| d.to_string()).collect(),
            attrs: vec![],
            inline_strings: None,
        };
        DatasetSchema {
            dims: vec![dim("m", M), dim("y", 40), dim("x", 60)],
            record_dim: None,
            attrs: vec![],
            variables: vec![
                var("f", DType::F32, &["m", "y", "x"]),
                var("lat", DType::F64, &["y"]),
                var("s", DType::F64, &[]),
            ],
        }
    }

    fn field() -> Vec<u8> {
        (0..M * 40 * 60).flat_map(|i| ((i as f32 * 0.37).sin() * 30.0 + (i % 7) as f32).to_le_bytes()).collect()
    }

    fn options(layout: &str) -> WriterOptions {
        let mut o = WriterOptions {
            codec: Some("shuffle+zstd:3".into()),
            chunks: [("m".to_string(), 2), ("y".to_string(), 20), ("x".to_string(), 60)].into(),
            subchunk_bytes: Some(2048),
            layout: Some(layout.into()),
            ..Default::default()
        };
        if layout.contains('V') {
            o.binning = Some("-10,0,10,20".into());
        }
        o
    }

    /// The block of `f` at `origin` of `shape`, as bytes.
    fn block(origin: [u64; 3], shape: [u64; 3]) -> Vec<u8> {
        let f = field();
        let mut out = Vec::new();
        for m in origin[0]..origin[0] + shape[0] {
            for y in origin[1]..origin[1] + shape[1] {
                let at = ((m * 40 + y) * 60 * 4) as usize;
                out.extend_from_slice(&f[at..at + 240]);
            }
        }
        out
    }

    /// A store whose `f` is written whole, or in blocks of 2 x 20 x 60 from the last, every
    /// block spilled; level V's positions in frames of `frames` bytes if given.
    fn write(layout: &str, blocks: bool, frames: Option<u64>) -> Store {
        let store = Store::new(Arc::new(MemoryStorage::new()), "mem");
        let o = WriterOptions { index_frame_bytes: frames, ..options(layout) };
        let mut w = StoreWriter::create(store.clone(), schema(), &o).unwrap();
        w.spill_at = 1;
        if blocks {
            for m in [6, 4, 2, 0] {
                for y in [20, 0] {
                    let shape = [2.min(M - m), 20, 60];
                    w.put_static_block("f", &[m, y, 0], &shape, &block([m, y, 0], shape)).unwrap();
                }
            }
        } else {
            w.put_static("f", &field()).unwrap();
        }
        w.put_static("lat", &(0..40).flat_map(|i| (i as f64).to_le_bytes()).collect::<Vec<u8>>()).unwrap();
        w.put_static("s", &1.5f64.to_le_bytes()).unwrap();
        w.commit("test").unwrap();
        store
    }

    #[test]
    fn blocks_and_spills_write_the_files_a_whole_variable_would() {
        for (layout, frames) in [("S", None), ("M-S", None), ("V-S", None), ("V-S", Some(256))] {
            let whole = write(layout, false, frames);
            let blocks = write(layout, true, frames);
            let files = |s: &Store| {
                let m = s.manifest(None).unwrap();
                let slab = &m.slabs[0];
                (s.storage().read(&slab.data).unwrap(), s.storage().read(&slab.index).unwrap())
            };
            let (a, b) = (files(&whole), files(&blocks));
            assert!(a.0 == b.0, "{layout}: data files differ");
            assert!(a.1 == b.1, "{layout}: index files differ");
            let reader = StoreReader::open(blocks.clone(), None).unwrap();
            assert!(reader.read_whole("f").unwrap() == field(), "{layout}");
            assert!(crate::verify::verify(blocks.clone(), None, true).unwrap().problems.is_empty());
            // The spill file is gone once the data file is written.
            assert!(!blocks.storage().list("data/").unwrap().iter().any(|p| p.contains(".spill")));
        }
    }

    /// Level V's positions in frames (`index_frame_bytes`) answer every query as positions
    /// read whole: the same values, counts, points, by index or by scan.
    #[test]
    fn positions_in_frames_answer_as_positions_read_whole() {
        use crate::query::{CmpOp, Method, Predicate};
        use crate::{DimSelection, Output, Query, Session};
        let write = |frame: Option<u64>| {
            let store = Store::new(Arc::new(MemoryStorage::new()), "mem");
            let o = WriterOptions { index_frame_bytes: frame, ..options("V-S") };
            let mut w = StoreWriter::create(store.clone(), schema(), &o).unwrap();
            w.put_static("f", &field()).unwrap();
            w.put_static("lat", &[0; 320]).unwrap();
            w.put_static("s", &[0; 8]).unwrap();
            w.commit("test").unwrap();
            store
        };
        let (whole, framed) = (write(None), write(Some(512)));
        let framed_of = |s: &Store| {
            let m = s.manifest(None).unwrap();
            let (slab, size) = (&m.slabs[0], m.files.iter().find(|f| f.path == m.slabs[0].index).unwrap().size);
            crate::index_frames::open(s.storage().as_ref(), &slab.index, size, "t").unwrap().map(|o| o.frames)
        };
        assert!(framed_of(&whole).is_none());
        assert!(framed_of(&framed).is_some_and(|f| f.frames.len() > 10));
        let problems = crate::verify::verify(framed.clone(), None, true).unwrap().problems;
        assert!(problems.is_empty(), "{problems:?}");
        let readers = [whole, framed].map(|s| StoreReader::open(s, None).unwrap());
        assert!(readers[1].read_whole("f").unwrap() == field());
        for (value, method, output) in [
            (5.0, Method::Index, Output::Points),
            (5.0, Method::Scan, Output::Points),
            (-20.0, Method::Index, Output::Count),
            (25.0, Method::Index, Output::Positions),
        ] {
            let query = Query {
                predicate: Predicate::Cmp { var: "f".into(), op: CmpOp::Gt, value },
                region: [(1, 6), (3, 37), (0, 60)].map(|(start, stop)| DimSelection { start, stop, step: 1 }).to_vec(),
                output,
                variables: vec!["f".into()],
                level: None,
                method: Some(method),
                mask: None,
                raw: false,
            };
            let [a, b] = readers.each_ref().map(|r| Session::default().run(r, &query).unwrap());
            assert!(a.count > 0 && a.count == b.count, "{value} {method:?}");
            assert_eq!(a.selection, b.selection);
            assert!(a.columns == b.columns);
        }
    }

    #[test]
    fn blocks_off_the_chunks_or_written_twice_are_refused() {
        let store = Store::new(Arc::new(MemoryStorage::new()), "mem");
        let mut w = StoreWriter::create(store, schema(), &options("S")).unwrap();
        assert_eq!(w.static_piece("f").unwrap(), vec![M, 40, 60]);
        assert!(w.static_piece("s").unwrap().is_empty());
        let refused = |e: crate::Error| assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
        let put = |w: &mut StoreWriter, origin: [u64; 3], shape: [u64; 3]| {
            w.put_static_block("f", &origin, &shape, &block(origin, shape))
        };
        refused(put(&mut w, [1, 0, 0], [2, 20, 60]).unwrap_err()); // not on a chunk boundary
        refused(put(&mut w, [0, 0, 0], [3, 20, 60]).unwrap_err()); // ends inside a chunk
        refused(put(&mut w, [0, 0, 0], [2, 20, 30]).unwrap_err());
        refused(w.put_static_block("f", &[6, 0, 0], &[2, 20, 60], &[0; 19200]).unwrap_err()); // beyond the edge
        put(&mut w, [6, 0, 0], [1, 40, 60]).unwrap(); // the ragged edge chunk
        put(&mut w, [0, 0, 0], [2, 20, 60]).unwrap();
        refused(put(&mut w, [0, 0, 0], [4, 20, 60]).unwrap_err()); // half written already
        refused(w.put_static_block("f", &[0, 20, 0], &[2, 20, 60], &[0; 16]).unwrap_err()); // wrong length
        refused(w.put_static_block("s", &[], &[], &[0; 8]).unwrap_err()); // a scalar
        refused(w.put_static("f", &field()).unwrap_err()); // begun in blocks
        w.put_static_block("f", &[0, 20, 0], &[6, 20, 60], &block([0, 20, 0], [6, 20, 60])).unwrap();
        w.put_static_block("f", &[2, 0, 0], &[4, 20, 60], &block([2, 0, 0], [4, 20, 60])).unwrap();
        refused(w.put_static_block("f", &[0, 0, 0], &[2, 20, 60], &block([0, 0, 0], [2, 20, 60])).unwrap_err());
        w.put_static("lat", &[0; 320]).unwrap();
        w.put_static("s", &[0; 8]).unwrap();
        w.commit("test").unwrap();
    }

    #[test]
    fn a_variable_left_unfinished_is_not_committed() {
        let store = Store::new(Arc::new(MemoryStorage::new()), "mem");
        let mut w = StoreWriter::create(store.clone(), schema(), &options("S")).unwrap();
        w.put_static_block("f", &[0, 0, 0], &[2, 20, 60], &block([0, 0, 0], [2, 20, 60])).unwrap();
        w.put_static("lat", &[0; 320]).unwrap();
        w.put_static("s", &[0; 8]).unwrap();
        let e = w.commit("test").unwrap_err();
        assert!(e.to_string().contains("f (1 chunks written)"), "{e}");
        assert!(store.versions().unwrap_or_default().is_empty());
    }

    #[test]
    fn large_variables_are_cut_into_blocks_of_about_a_slab() {
        let store = Store::new(Arc::new(MemoryStorage::new()), "mem");
        let mut s = schema();
        s.dims = vec![
            Dim { name: "m".into(), size: 4, unlimited: false },
            Dim { name: "y".into(), size: 4000, unlimited: false },
            Dim { name: "x".into(), size: 3600, unlimited: false },
        ];
        let o = WriterOptions { chunks: [("m".to_string(), 1), ("y".to_string(), 250)].into(), ..options("S") };
        let w = StoreWriter::create(store, s, &o).unwrap();
        // One member is 57.6 MB; two would pass a slab's 64 MiB.
        assert_eq!(w.static_piece("f").unwrap(), vec![1, 4000, 3600]);
        let o = WriterOptions { chunks: [("m".to_string(), 1), ("y".to_string(), 250)].into(), ..options("S") };
        let mut s = schema();
        s.dims[1].size = 40_000;
        s.dims[2].size = 3600;
        let w = StoreWriter::create(Store::new(Arc::new(MemoryStorage::new()), "mem"), s, &o).unwrap();
        // One member is 576 MB: cut along y too, in whole chunks of 250 rows (3.6 MB).
        assert_eq!(w.static_piece("f").unwrap(), vec![1, 4500, 3600]);
    }
}
