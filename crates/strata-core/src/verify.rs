//! `strata verify`: every file of a version against the manifest's size and checksum,
//! every index against the format's bounds, every segment against its checksum (and, deep,
//! decoded to its raw length), each damage listed by file, slab, variable and segment.

use crate::error::Result;
use crate::reader::{DimSelection, StoreReader};
use crate::store::Store;

/// One thing found wrong.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    pub file: String,
    pub slab: Option<u64>,
    pub variable: Option<String>,
    /// The segment's key (variable, chunk, sub-chunk, bin, byte group) as text.
    pub segment: Option<String>,
    pub what: String,
}

/// What a verification looked at and found.
#[derive(Debug, Clone, Default)]
pub struct VerifyReport {
    pub version: u64,
    pub files: u64,
    pub bytes: u64,
    pub segments: u64,
    pub problems: Vec<Problem>,
}

impl VerifyReport {
    pub fn is_clean(&self) -> bool {
        self.problems.is_empty()
    }
}

/// Data files up to this size are checked in one read; larger ones (files indexed in
/// place) piece by piece.
const WHOLE_FILE_LIMIT: u64 = 256 << 20;

fn problem(file: &str, slab: Option<u64>, what: impl Into<String>) -> Problem {
    Problem { file: file.to_string(), slab, variable: None, segment: None, what: what.into() }
}

/// Verifies version `version` (the newest when None) of `store`. A manifest that cannot be
/// read is an error; anything else found wrong is listed in the report.
pub fn verify(store: Store, version: Option<u64>, deep: bool) -> Result<VerifyReport> {
    let reader = StoreReader::open_with_cache(store.clone(), version, 0)?;
    let manifest = reader.manifest().clone();
    let mut report = VerifyReport { version: manifest.version, ..Default::default() };
    let storage = store.storage();
    // Whole files against the manifest: missing, resized or rewritten files.
    let mut bad_files = std::collections::BTreeSet::new();
    for f in &manifest.files {
        report.files += 1;
        let read = if f.external {
            let beside = store.beside()?;
            beside.size(&f.path).and_then(|n| Ok((n, crate::in_place::file_crc(&**beside, &f.path, n)?)))
        } else {
            storage.read(&f.path).map(|b| (b.len() as u64, crc32c::crc32c(&b)))
        };
        match read {
            Err(e) => {
                report.problems.push(problem(&f.path, None, format!("cannot be read: {e}")));
                bad_files.insert(f.path.clone());
            }
            Ok((size, crc)) => {
                report.bytes += size;
                if size != f.size {
                    report.problems.push(problem(&f.path, None, format!("{size} bytes, the manifest says {}", f.size)));
                    bad_files.insert(f.path.clone());
                } else if crc != f.crc32c {
                    report.problems.push(problem(&f.path, None, "does not match its checksum in the manifest"));
                    bad_files.insert(f.path.clone());
                }
            }
        }
    }
    // Each slab: its index within the format's bounds, its data file's header, and every
    // segment against its own checksum, so damage is placed by variable and segment.
    for (pos, slab) in manifest.slabs.iter().enumerate() {
        let index = match reader.slab_index(slab) {
            Ok(ix) => ix,
            Err(e) => {
                report.problems.push(problem(&slab.index, Some(slab.id), e.to_string()));
                continue;
            }
        };
        if let Err(e) = reader.check_data_header(pos) {
            report.problems.push(problem(&slab.data, Some(slab.id), e.to_string()));
            continue;
        }
        if !bad_files.contains(&slab.data) {
            report.segments += index.segments.len() as u64;
            continue; // the whole file's checksum holds: so do its segments'
        }
        // A file indexed in place may be large: its segments are read one by one.
        let data = if reader.data_storage(pos)?.size(&slab.data).is_ok_and(|n| n > WHOLE_FILE_LIMIT) {
            None
        } else {
            match reader.data_storage(pos)?.read(&slab.data) {
                Ok(d) => Some(d),
                Err(_) => continue, // reported above
            }
        };
        let mut entries: Vec<_> = index.segments.values().collect();
        entries.sort_by_key(|e| e.offset);
        for e in entries {
            report.segments += 1;
            let var = manifest.variables.get(e.key.var as usize).map(|v| v.name.clone());
            let place = |what: String| Problem {
                file: slab.data.clone(),
                slab: Some(slab.id),
                variable: var.clone(),
                segment: Some(format!(
                    "chunk {} sub-chunk {} bin {} group {} at {}+{}",
                    e.key.chunk, e.key.subchunk, e.key.bin, e.key.group, e.offset, e.length
                )),
                what,
            };
            let end = (e.offset + e.length) as usize;
            let bytes = match &data {
                Some(d) => d.get(e.offset as usize..end).map(<[u8]>::to_vec),
                None => reader.data_storage(pos)?.read_range(&slab.data, e.offset, e.length).ok(),
            };
            let Some(bytes) = bytes else {
                report.problems.push(place("lies past the end of the file".into()));
                continue;
            };
            if crc32c::crc32c(&bytes) != e.checksum {
                report.problems.push(place("does not match its checksum".into()));
            }
        }
    }
    if deep {
        decode_everything(&reader, &mut report);
    }
    Ok(report)
}

/// Reads every variable back, slab by slab (memory bounded by a slab): every segment is
/// decoded, through the same code as any read.
fn decode_everything(reader: &StoreReader, report: &mut VerifyReport) {
    let manifest = reader.manifest();
    for var in manifest.variables.iter().filter(|v| v.chunking.is_some()) {
        let shape = manifest.shape(var);
        let record = manifest.is_record_var(var);
        let slabs: Vec<_> = manifest.slabs.iter().filter(|s| s.records.is_some() == record).collect();
        for slab in slabs {
            let mut sel: Vec<DimSelection> =
                shape.iter().map(|&n| DimSelection { start: 0, stop: n, step: 1 }).collect();
            if let (true, Some([start, count])) = (record, slab.records) {
                sel[0] = DimSelection { start, stop: start + count, step: 1 };
            }
            let n: u64 = sel.iter().map(|s| s.count()).product();
            let mut out = vec![0u8; n as usize * var.dtype.size()];
            if let Err(e) = reader.read_into(&var.name, &sel, &mut out) {
                report.problems.push(Problem {
                    file: slab.data.clone(),
                    slab: Some(slab.id),
                    variable: Some(var.name.clone()),
                    segment: None,
                    what: format!("does not read back: {e}"),
                });
            }
        }
    }
}
