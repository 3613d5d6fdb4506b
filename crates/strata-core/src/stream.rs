//! Records as a simulation produces them: a time step (or a few) of each variable at a
//! time, gathered into slabs. A slab is laid out (bins, byte groups, Hilbert order) and
//! compressed in memory and written once it is full, so nothing is written twice.
//!
//! A full slab is laid out, compressed and written on a thread of the writer's own while
//! the caller goes on producing the next one (the simulation computes while the last step's
//! slab is compressed, as ADIOS2's asynchronous engines do). At most one slab is in that
//! thread's hands: memory holds about three slabs per variable, and a caller faster than
//! the compression waits for it.

use crate::error::{Error, Result};
use crate::writer::StoreWriter;
use std::collections::BTreeMap;
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;

/// A variable's records not yet in a slab.
#[derive(Debug, Default)]
struct Pending {
    bytes: Vec<u8>,
    records: u64,
}

/// Records waiting for their slab, per record variable a writer holds; shared by the
/// stream writer and the parallel writers.
#[derive(Debug)]
pub(crate) struct RecordBuffers {
    /// By record variable name: bytes per record, what waits.
    pending: BTreeMap<String, (usize, Pending)>,
    /// How many records one variable may wait for the others beyond a slab (None: no bound).
    ahead: Option<u64>,
}

impl RecordBuffers {
    pub(crate) fn new(writer: &StoreWriter) -> Self {
        let m = writer.manifest();
        let pending = (0..m.variables.len())
            .filter_map(|i| Some((m.variables[i].name.clone(), (writer.held_record_bytes(i)?, Pending::default()))))
            .collect();
        Self { pending, ahead: Some(0) }
    }

    /// Records every variable has waiting.
    pub(crate) fn complete(&self) -> u64 {
        self.pending.values().map(|(_, p)| p.records).min().unwrap_or(0)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.pending.values().all(|(_, p)| p.records == 0)
    }

    /// Takes whole records of `name`; `writer` is asked only to explain a refusal (a
    /// stream's writer may be busy writing the last slab meanwhile).
    pub(crate) fn push<'w>(
        &mut self,
        slab: u64,
        writer: impl FnOnce() -> WriterRef<'w>,
        name: &str,
        data: &[u8],
    ) -> Result<()> {
        let floor = self.complete();
        let Some((per_record, pending)) = self.pending.get_mut(name) else {
            let writer = writer();
            let writer: &StoreWriter = &writer;
            let known = writer.manifest().variable(name)?.1;
            let why = if known.chunking.is_none() {
                "is a string variable"
            } else if !writer.manifest().is_record_var(known) {
                "does not have the record dimension"
            } else {
                "lies outside this writer's block"
            };
            return Err(Error::InvalidArgument(format!("'{name}' {why}: it is not appended here")));
        };
        let per_record = *per_record;
        if per_record == 0 || !data.len().is_multiple_of(per_record) {
            return Err(Error::InvalidArgument(format!(
                "'{name}' takes whole records of {per_record} bytes; got {} bytes",
                data.len()
            )));
        }
        let records = (data.len() / per_record) as u64;
        // Bounded memory: one variable may run at most a slab ahead of the slowest.
        if let Some(extra) = self.ahead {
            let most = slab.max(records) + extra;
            if pending.records + records > floor + most {
                return Err(Error::InvalidArgument(format!(
                    "'{name}' would be {} records ahead of another record variable (at most {most}): append \
                     every record variable for each step",
                    pending.records + records - floor,
                )));
            }
        }
        if pending.bytes.capacity() == 0 {
            pending.bytes = crate::large::with_capacity(slab.max(records) as usize * per_record);
        }
        pending.bytes.extend_from_slice(data);
        pending.records += records;
        Ok(())
    }

    /// How many records the next slab takes: a full slab when every variable has one, or
    /// with `all` whatever waits (the variables must then agree on the count); None: none yet.
    pub(crate) fn next_slab(&self, slab: u64, all: bool) -> Result<Option<u64>> {
        let counts: Vec<u64> = self.pending.values().map(|(_, p)| p.records).collect();
        let (Some(&lo), Some(&hi)) = (counts.iter().min(), counts.iter().max()) else { return Ok(None) };
        if all && lo != hi {
            let listed: Vec<String> = self.pending.iter().map(|(n, (_, p))| format!("{n}: {}", p.records)).collect();
            return Err(Error::InvalidArgument(format!(
                "record variables have different numbers of records waiting ({}): append the missing ones before \
                 committing",
                listed.join(", ")
            )));
        }
        Ok(if lo >= slab {
            Some(slab)
        } else if all && lo > 0 {
            Some(lo)
        } else {
            None
        })
    }

    /// Puts the first `n` waiting records of every variable into `writer`'s open slab.
    pub(crate) fn cut(&mut self, writer: &mut StoreWriter, n: u64) -> Result<()> {
        writer.begin_slab(n)?;
        for (name, (per_record, p)) in self.pending.iter_mut() {
            let cut = n as usize * *per_record;
            writer.put_records(name, &p.bytes[..cut])?;
            p.bytes.drain(..cut);
            p.records -= n;
        }
        Ok(())
    }

    /// Takes the first `n` waiting records of every variable out, as one slab's parts.
    pub(crate) fn take(&mut self, n: u64) -> Vec<(String, Vec<u8>)> {
        self.pending
            .iter_mut()
            .map(|(name, (per_record, p))| {
                // The next slab's buffer is made whole at once, on huge pages: grown a step
                // at a time, it was copied at each doubling and page-faulted 4 KiB at a time
                // (over half the page faults of a V-S write).
                let cut = n as usize * *per_record;
                let mut rest = crate::large::with_capacity(cut.max(p.bytes.len() - cut));
                rest.extend_from_slice(&p.bytes[cut..]);
                p.bytes.truncate(cut);
                p.records -= n;
                (name.clone(), std::mem::replace(&mut p.bytes, rest))
            })
            .collect()
    }
}

/// One slab's records, per variable.
type SlabParts = (u64, Vec<(String, Vec<u8>)>);

/// The thread that lays out, compresses and writes full slabs.
#[derive(Debug)]
struct Background {
    jobs: SyncSender<SlabParts>,
    thread: JoinHandle<()>,
    /// The first error the thread met; it stops there.
    failed: Arc<Mutex<Option<Error>>>,
}

fn write_slab(writer: &mut StoreWriter, n: u64, parts: &[(String, Vec<u8>)]) -> Result<()> {
    writer.begin_slab(n)?;
    for (name, data) in parts {
        writer.put_records(name, data)?;
    }
    writer.finish_slab()
}

fn lock(writer: &Mutex<StoreWriter>) -> MutexGuard<'_, StoreWriter> {
    writer.lock().unwrap_or_else(|p| p.into_inner())
}

/// A writer to explain a refusal with: borrowed, or locked from a stream.
pub(crate) enum WriterRef<'a> {
    Guard(MutexGuard<'a, StoreWriter>),
    Borrowed(&'a StoreWriter),
}

impl std::ops::Deref for WriterRef<'_> {
    type Target = StoreWriter;
    fn deref(&self) -> &StoreWriter {
        match self {
            WriterRef::Guard(g) => g,
            WriterRef::Borrowed(w) => w,
        }
    }
}

/// Wraps a [`StoreWriter`]: [`append`](Self::append) takes whole records of one variable in
/// any count; slabs are cut at the store's slab length as soon as every record variable has
/// that many records waiting, and written by a thread of their own.
#[derive(Debug)]
pub struct StreamWriter {
    writer: Arc<Mutex<StoreWriter>>,
    buffers: RecordBuffers,
    slab_records: u64,
    /// Records in the store before this writer, and records handed to slabs since.
    base: u64,
    cut: u64,
    background: Option<Background>,
    /// Whether full slabs go to the background thread (false: written in the caller's).
    overlap: bool,
    /// Why an earlier slab could not be written: nothing more is taken, nothing committed.
    broken: Option<String>,
}

impl StreamWriter {
    pub fn new(writer: StoreWriter) -> Self {
        let buffers = RecordBuffers::new(&writer);
        let (slab_records, base) = (writer.slab_records(), writer.record_count());
        Self {
            writer: Arc::new(Mutex::new(writer)),
            buffers,
            slab_records,
            base,
            cut: 0,
            background: None,
            overlap: true,
            broken: None,
        }
    }

    /// Lets variables run ahead of the others by `records` more than a slab (None: any
    /// number, held in memory: for programs that write one variable whole, then the next).
    pub fn allow_ahead(&mut self, records: Option<u64>) {
        self.buffers.ahead = records;
    }

    /// Whether full slabs are written on the writer's own thread while the caller goes on
    /// (the default), or in the caller's thread.
    pub fn set_overlap(&mut self, on: bool) {
        self.overlap = on;
    }

    /// Waits for the background thread and reports its error, if any.
    fn settle(&mut self) -> Result<()> {
        let Some(Background { jobs, thread, failed }) = self.background.take() else { return Ok(()) };
        drop(jobs);
        let outcome = if thread.join().is_err() {
            Err(Error::io("the writer's slab thread", std::io::Error::other("it panicked (a bug in strata)")))
        } else {
            failed.lock().unwrap_or_else(|p| p.into_inner()).take().map_or(Ok(()), Err)
        };
        self.note(outcome)
    }

    /// Remembers a failure: a writer that lost a slab takes nothing more.
    fn note<T>(&mut self, outcome: Result<T>) -> Result<T> {
        if let Err(e) = &outcome {
            self.broken.get_or_insert_with(|| e.to_string());
        }
        outcome
    }

    fn check(&self) -> Result<()> {
        match &self.broken {
            Some(why) => Err(Error::InvalidArgument(format!(
                "an earlier slab could not be written ({why}): this writer takes nothing more and commits nothing"
            ))),
            None => Ok(()),
        }
    }

    /// The writer underneath, for whole slabs written directly (an importer's way); refused
    /// while appended records wait, as they come first.
    pub fn direct(&mut self) -> Result<&mut StoreWriter> {
        self.check()?;
        if !self.buffers.is_empty() {
            return Err(Error::InvalidArgument("appended records wait for their slab: commit them first".into()));
        }
        self.settle()?;
        let writer = Arc::get_mut(&mut self.writer)
            .ok_or_else(|| Error::InvalidArgument("the writer is busy on another thread".into()))?;
        Ok(writer.get_mut().unwrap_or_else(|p| p.into_inner()))
    }

    /// Sets store or variable attributes (see [`StoreWriter::set_attributes`]).
    pub fn set_attributes(&mut self, var: Option<&str>, attrs: Vec<crate::manifest::Attribute>) -> Result<()> {
        lock(&self.writer).set_attributes(var, attrs)
    }

    /// Calls `f` with the writer underneath (after the slab being written, if any).
    pub fn with_writer<T>(&self, f: impl FnOnce(&StoreWriter) -> T) -> T {
        f(&lock(&self.writer))
    }

    pub fn slab_records(&self) -> u64 {
        self.slab_records
    }

    /// Writes a variable without the record dimension, whole (see [`StoreWriter::put_static`]).
    pub fn put_static(&mut self, name: &str, data: &[u8]) -> Result<()> {
        lock(&self.writer).put_static(name, data)
    }

    /// Writes a block of a variable without the record dimension (see
    /// [`StoreWriter::put_static_block`]).
    pub fn put_static_block(&mut self, name: &str, origin: &[u64], shape: &[u64], data: &[u8]) -> Result<()> {
        lock(&self.writer).put_static_block(name, origin, shape, data)
    }

    /// The block shape of [`put_static_block`](Self::put_static_block) (empty: write it whole).
    pub fn static_piece(&self, name: &str) -> Result<Vec<u64>> {
        lock(&self.writer).static_piece(name)
    }

    /// Records committed so far plus those handed to slabs and those waiting (what the
    /// record dimension will have).
    pub fn record_count(&self) -> u64 {
        self.base + self.cut + self.buffers.complete()
    }

    /// Takes `data`, whole records of record variable `name` (C order, little-endian), and
    /// hands every slab that is complete to the writer's thread.
    pub fn append(&mut self, name: &str, data: &[u8]) -> Result<()> {
        self.check()?;
        let writer = &self.writer;
        self.buffers.push(self.slab_records, || WriterRef::Guard(lock(writer)), name, data)?;
        self.write_ready(false)
    }

    fn write_ready(&mut self, all: bool) -> Result<()> {
        while let Some(n) = self.buffers.next_slab(self.slab_records, all)? {
            let parts = self.buffers.take(n);
            self.cut += n;
            if !self.overlap {
                let outcome = write_slab(&mut lock(&self.writer), n, &parts);
                self.note(outcome)?;
                continue;
            }
            if self.background.as_ref().is_some_and(|b| b.failed.lock().is_ok_and(|f| f.is_some())) {
                return self.settle();
            }
            let background = match self.background.take() {
                Some(b) => b,
                None => self.start(),
            };
            let sent = background.jobs.send((n, parts));
            self.background = Some(background);
            if sent.is_err() {
                return self.settle();
            }
        }
        Ok(())
    }

    fn start(&self) -> Background {
        // A rendezvous: the thread takes a slab only when it is done with the last one, so
        // at most one slab is in its hands.
        let (jobs, slabs) = sync_channel::<SlabParts>(0);
        let failed = Arc::new(Mutex::new(None));
        let (writer, report) = (self.writer.clone(), failed.clone());
        let thread = std::thread::spawn(move || {
            for (n, parts) in slabs {
                if let Err(e) = write_slab(&mut lock(&writer), n, &parts) {
                    *report.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
                    return;
                }
            }
        });
        Background { jobs, thread, failed }
    }

    /// Writes what waits and publishes a new version; returns its number.
    pub fn commit(mut self, message: &str) -> Result<u64> {
        self.check()?;
        self.write_ready(true)?;
        self.settle()?;
        self.check()?;
        let writer = Arc::try_unwrap(self.writer)
            .map_err(|_| Error::InvalidArgument("the writer is busy on another thread".into()))?
            .into_inner()
            .unwrap_or_else(|p| p.into_inner());
        writer.commit(message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::Dim;
    use crate::writer::{DatasetSchema, VariableSchema, WriterOptions};
    use crate::{DType, DimSelection, Store, StoreReader};

    fn schema() -> DatasetSchema {
        let dim = |name: &str, size| Dim { name: name.into(), size, unlimited: name == "t" };
        let var = |name: &str, dims: &[&str]| VariableSchema {
            name: name.into(),
            dtype: DType::F32,
            dims: dims.iter().map(|d| d.to_string()).collect(),
            attrs: vec![],
            inline_strings: None,
        };
        DatasetSchema {
            dims: vec![dim("t", 0), dim("y", 6), dim("x", 5)],
            record_dim: Some("t".into()),
            attrs: vec![],
            variables: vec![var("a", &["t", "y", "x"]), var("b", &["t", "x"])],
        }
    }

    fn le(values: impl Iterator<Item = f32>) -> Vec<u8> {
        values.flat_map(|v| v.to_le_bytes()).collect()
    }

    #[test]
    fn steps_become_slabs_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s").to_string_lossy().into_owned();
        let options = WriterOptions { slab_records: Some(4), ..Default::default() };
        let w = StoreWriter::create(Store::local(&path), schema(), &options).unwrap();
        let mut w = StreamWriter::new(w);
        for t in 0..10u32 {
            w.append("a", &le((0..30).map(|i| (t * 100 + i) as f32))).unwrap();
            w.append("b", &le((0..5).map(|i| (t * 10 + i) as f32))).unwrap();
        }
        assert_eq!(w.record_count(), 10);
        assert_eq!(w.commit("steps").unwrap(), 1);
        let r = StoreReader::open(Store::local(&path), None).unwrap();
        let m = r.manifest();
        assert_eq!(m.slabs.len(), 3); // 4 + 4 + 2
        assert_eq!(m.dim("t").unwrap().size, 10);
        let sel: Vec<DimSelection> = [10, 6, 5].map(|n| DimSelection { start: 0, stop: n, step: 1 }).to_vec();
        let mut bytes = vec![0u8; 10 * 30 * 4];
        r.read_into("a", &sel, &mut bytes).unwrap();
        let got: Vec<f32> = bytes.chunks(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
        let want: Vec<f32> = (0..10u32).flat_map(|t| (0..30).map(move |i| (t * 100 + i) as f32)).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn a_slab_that_fails_on_the_writers_thread_fails_the_stream_and_commits_nothing() {
        for overlap in [true, false] {
            // A disk that fills up after two data files.
            let memory = std::sync::Arc::new(crate::storage::MemoryStorage::new());
            let storage = std::sync::Arc::new(
                crate::storage::Faulty::new(memory, 3, crate::storage::FaultTiming::Before)
                    .only_under("data/")
                    .staying_full(),
            );
            let store = Store::new(storage.clone(), "full");
            let options = WriterOptions { slab_records: Some(2), ..Default::default() };
            let mut w = StreamWriter::new(StoreWriter::create(store.clone(), schema(), &options).unwrap());
            w.set_overlap(overlap);
            let mut failed = None;
            for t in 0..20u32 {
                let a = w.append("a", &le((0..30).map(|i| (t * 100 + i) as f32)));
                let b = a.and_then(|_| w.append("b", &le((0..5).map(|i| i as f32))));
                if let Err(e) = b {
                    failed = Some(e.to_string());
                    break;
                }
            }
            // The third slab's data file could not be written: a later call says so (with
            // overlap, the next hand-over or the commit; without, at once).
            let message = match failed {
                Some(m) => {
                    let again = w.append("a", &le((0..30).map(|i| i as f32))).unwrap_err().to_string();
                    assert!(again.contains("takes nothing more"), "{again}");
                    let commit = w.commit("x").unwrap_err().to_string();
                    assert!(commit.contains("No space left on device"), "{commit}");
                    m
                }
                None => w.commit("x").unwrap_err().to_string(),
            };
            assert!(message.contains("No space left on device"), "{overlap}: {message}");
            assert!(!store.exists().unwrap(), "nothing was committed");
        }
    }

    #[test]
    fn wrong_sizes_and_uneven_variables_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let options = WriterOptions { slab_records: Some(2), ..Default::default() };
        let w = StoreWriter::create(Store::local(&format!("{}/s", dir.path().display())), schema(), &options).unwrap();
        let mut w = StreamWriter::new(w);
        let err = w.append("a", &[0u8; 7]).unwrap_err().to_string();
        assert!(err.contains("whole records of 120 bytes"), "{err}");
        assert!(w.append("nope", &[]).is_err());
        // Running ahead is bounded: two slabs of `a` and none of `b` is too much.
        w.append("a", &le((0..60).map(|i| i as f32))).unwrap();
        let err = w.append("a", &le((0..30).map(|i| i as f32))).unwrap_err().to_string();
        assert!(err.contains("ahead"), "{err}");
        w.append("b", &le((0..5).map(|i| i as f32))).unwrap();
        let err = w.commit("uneven").unwrap_err().to_string();
        assert!(err.contains("a: 2, b: 1"), "{err}");
        assert!(!Store::local(&format!("{}/s", dir.path().display())).exists().unwrap());
    }
}
