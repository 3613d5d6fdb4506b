//! Fetching segments: coalesced range reads, streamed so that decoding can start on the
//! runs that have arrived, each segment's checksum checked as it is handed out.

use super::{missing_is_corruption, RunReads, StoreReader};
use crate::error::{Error, Result};
use crate::manifest::{Manifest, Slab};
use crate::segment::SegmentEntry;
use rayon::prelude::*;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Reads separated by less than this are merged into one (fewer requests, a little waste).
const COALESCE_GAP: u64 = 64 << 10;
/// A merged read never grows past this.
const COALESCE_MAX: u64 = 16 << 20;
/// Range reads in flight at once for one fetch: enough to hide a storage's latency.
pub(super) const IO_THREADS: usize = 4;

/// Which runs of a streaming fetch have arrived, and the first error; readers and the
/// consumer wait on it.
#[derive(Default)]
pub(super) struct Progress {
    state: std::sync::Mutex<ProgressState>,
    changed: std::sync::Condvar,
}

#[derive(Default)]
pub(super) struct ProgressState {
    arrived: Vec<bool>,
    /// Runs 0..contiguous have all arrived.
    contiguous: usize,
    completed: usize,
    /// The first read error.
    error: Option<Error>,
    /// The consumer gave up: readers stop.
    stopped: bool,
}

impl Progress {
    fn lock(&self) -> std::sync::MutexGuard<'_, ProgressState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn done(&self, i: usize) {
        let mut s = self.lock();
        if s.arrived.len() <= i {
            s.arrived.resize(i + 1, false);
        }
        s.arrived[i] = true;
        s.completed += 1;
        while s.arrived.get(s.contiguous) == Some(&true) {
            s.contiguous += 1;
        }
        drop(s);
        self.changed.notify_all();
    }

    fn fail(&self, e: Error) {
        let mut s = self.lock();
        s.error.get_or_insert(e);
        drop(s);
        self.changed.notify_all();
    }

    /// Tells waiting readers to look again. Taking the lock first means a reader between
    /// its check and its wait cannot miss the news.
    pub(super) fn wake(&self) {
        drop(self.lock());
        self.changed.notify_all();
    }

    fn stop(&self) {
        self.lock().stopped = true;
        self.changed.notify_all();
    }

    fn completed(&self) -> usize {
        self.lock().completed
    }

    /// The first error, taken (later calls see none).
    fn check(&self) -> Result<()> {
        match self.lock().error.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Waits until `ready()` or an error; false on an error (the reader should stop).
    fn wait_for(&self, ready: impl Fn() -> bool) -> bool {
        let mut s = self.lock();
        loop {
            if s.error.is_some() || s.stopped {
                return false;
            }
            if ready() {
                return true;
            }
            s = self.changed.wait(s).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Waits until runs 0..n have all arrived: false if a read failed first (the error
    /// stays for [`check`](Self::check)).
    pub(super) fn until_contiguous(&self, n: usize) -> bool {
        let mut s = self.lock();
        while s.contiguous < n {
            if s.error.is_some() {
                return false;
            }
            s = self.changed.wait(s).unwrap_or_else(|p| p.into_inner());
        }
        true
    }
}

/// Data-file bytes fetched as coalesced runs, handed out per segment with its CRC checked.
/// Runs fill in as they arrive (a streaming read hands out segments of the runs it has).
pub(crate) struct Fetched<'a> {
    manifest: &'a Manifest,
    runs: Vec<(usize, u64, u64)>,
    pub(super) bytes: Vec<std::sync::OnceLock<Vec<u8>>>,
}

impl<'a> Fetched<'a> {
    pub(super) fn new(manifest: &'a Manifest, runs: Vec<(usize, u64, u64)>) -> Self {
        let bytes = runs.iter().map(|_| std::sync::OnceLock::new()).collect();
        Self { manifest, runs, bytes }
    }

    /// The run holding the segment at `offset` of slab `slab`'s data file.
    pub(super) fn run_of(&self, slab: usize, offset: u64) -> usize {
        self.runs.partition_point(|run| (run.0, run.1) <= (slab, offset)).saturating_sub(1)
    }

    pub(crate) fn get(&self, slab: usize, e: &SegmentEntry) -> Result<&[u8]> {
        let r = self.run_of(slab, e.offset);
        let lo = (e.offset - self.runs[r].1) as usize;
        let run = self.bytes[r]
            .get()
            .ok_or_else(|| Error::Corruption(format!("segment at offset {} was not fetched", e.offset)))?;
        let bytes = &run[lo..lo + e.length as usize];
        if crc32c::crc32c(bytes) != e.checksum {
            let path = &self.manifest.slabs[slab].data;
            return Err(Error::Corruption(format!("segment at {path}:{} fails its checksum", e.offset)));
        }
        Ok(bytes)
    }
}

impl StoreReader {
    /// The coalesced range reads that fetch the given segments, in file order.
    pub(super) fn runs_of<'a>(segments: impl Iterator<Item = (usize, &'a SegmentEntry)>) -> Vec<(usize, u64, u64)> {
        let mut wanted: Vec<(usize, u64, u64)> =
            segments.map(|(slab, e)| (slab, e.offset, e.offset + e.length)).collect();
        wanted.sort_unstable();
        let mut runs: Vec<(usize, u64, u64)> = Vec::new(); // slab, start, end
        for (slab, start, end) in wanted {
            if let Some(last) = runs.last_mut() {
                if last.0 == slab && start >= last.1 && start <= last.2 + COALESCE_GAP && end - last.1 <= COALESCE_MAX {
                    last.2 = last.2.max(end);
                    continue;
                }
            }
            runs.push((slab, start, end));
        }
        runs
    }

    /// Checks a data file's header (magic, version, slab id) the first time a read needs
    /// the file: a file swapped or overwritten is found even where its segments' checksums
    /// happen to hold.
    pub(crate) fn check_data_header(&self, slab: usize) -> Result<()> {
        if self.header_checked[slab].get().is_some() {
            return Ok(());
        }
        let s = &self.manifest.slabs[slab];
        let path = s.data.as_str();
        if self.is_in_place(s) {
            self.check_in_place(path)?;
            let _ = self.header_checked[slab].set(());
            return Ok(());
        }
        let h = self
            .store
            .storage()
            .read_range(path, 0, crate::data_file::HEADER_LEN)
            .map_err(|e| missing_is_corruption(e, path))?;
        crate::data_file::check_header(&h, s.id).map_err(|why| Error::Corruption(format!("'{path}': {why}")))?;
        let _ = self.header_checked[slab].set(());
        Ok(())
    }

    /// A file indexed in place must still be the file that was indexed: the same size, and
    /// the same modification time or else (a copy) the same checksum over the whole file.
    /// Bytes that change without either (damage on disk) are found by each chunk's checksum.
    fn check_in_place(&self, path: &str) -> Result<()> {
        let Some(entry) = self.manifest.files.iter().find(|f| f.path == path) else { return Ok(()) };
        let beside = self.store.beside()?;
        let size = beside.size(path).map_err(|e| match e {
            Error::NotFound(_) => Error::Corruption(format!("'{path}', indexed in place, is missing")),
            other => other,
        })?;
        let changed = |why: String| {
            Error::Corruption(format!("'{path}' has changed since it was indexed ({why}): index it again"))
        };
        if size != entry.size {
            return Err(changed(format!("{size} bytes, the index says {}", entry.size)));
        }
        let modified = beside.modified_ns(path)?;
        if entry.modified_ns.is_some()
            && modified != entry.modified_ns
            && crate::in_place::file_crc(&**beside, path, size)? != entry.crc32c
        {
            return Err(changed("it was modified and its checksum differs".into()));
        }
        Ok(())
    }

    /// Whether `slab` lies in a file indexed in place: its segments are whole sub-chunks
    /// (the file's chunks), and under level V every bin of a sub-chunk names the whole
    /// sub-chunk, the bin's values being the sub-chunk's at the bin's positions.
    pub(crate) fn is_in_place(&self, slab: &Slab) -> bool {
        self.source.as_deref() == Some(slab.data.as_str())
    }

    /// The storage holding slab `slab`'s data file.
    pub(crate) fn data_storage(&self, slab: usize) -> Result<&Arc<dyn crate::storage::Storage>> {
        if self.is_in_place(&self.manifest.slabs[slab]) {
            self.store.beside()
        } else {
            Ok(self.store.storage())
        }
    }

    fn read_run(&self, &(slab, start, end): &(usize, u64, u64), counted: Option<&RunReads>) -> Result<Vec<u8>> {
        self.check_data_header(slab)?;
        let path = self.manifest.slabs[slab].data.as_str();
        let bytes = self
            .data_storage(slab)?
            .read_range(path, start, end - start)
            .map_err(|e| missing_is_corruption(e, path))?;
        self.counters.requests.fetch_add(1, Ordering::Relaxed);
        self.counters.bytes_read.fetch_add(end - start, Ordering::Relaxed);
        if let Some(run) = counted {
            run.add(end - start);
        }
        Ok(bytes)
    }

    /// Fetches the given segments with coalesced range reads, in file order (`parallel`:
    /// on the pool, whose threads are already awake: what small reads need), each also
    /// counted in `counted`.
    pub(crate) fn fetch<'a>(
        &'a self,
        segments: impl Iterator<Item = (usize, &'a SegmentEntry)>,
        parallel: bool,
        counted: Option<&RunReads>,
    ) -> Result<Fetched<'a>> {
        let fetched = Fetched::new(&self.manifest, Self::runs_of(segments));
        let read = |i: usize| -> Result<()> {
            let bytes = self.read_run(&fetched.runs[i], counted)?;
            let _ = fetched.bytes[i].set(bytes);
            Ok(())
        };
        if parallel {
            (0..fetched.runs.len()).into_par_iter().try_for_each(read)?;
        } else {
            (0..fetched.runs.len()).try_for_each(read)?;
        }
        Ok(fetched)
    }

    /// Like [`fetch`](Self::fetch), with [`IO_THREADS`] reads in flight on threads of their
    /// own: what large reads use, overlapped with decoding or not.
    pub(super) fn fetch_streamed<'a>(
        &'a self,
        segments: impl Iterator<Item = (usize, &'a SegmentEntry)>,
        counted: Option<&RunReads>,
    ) -> Result<Fetched<'a>> {
        let fetched = Fetched::new(&self.manifest, Self::runs_of(segments));
        self.stream(&fetched, IO_THREADS, &|_| true, counted)?;
        Ok(fetched)
    }

    /// Reads every run of `fetched`, in file order, with up to `threads` range reads in
    /// flight (on threads of their own: reads wait on storage, not the CPU, and must not
    /// hold up the decoding pool). `may_read(i)` holds a reader back from run `i` until it
    /// is true (re-checked whenever a run completes or [`Progress::wake`] is called).
    fn stream(
        &self,
        fetched: &Fetched,
        threads: usize,
        may_read: &(dyn Fn(usize) -> bool + Sync),
        counted: Option<&RunReads>,
    ) -> Result<()> {
        let progress = Progress::default();
        let n = fetched.runs.len();
        // The consumer waits for every run (a read error is reported by `stream_with`).
        self.stream_with(fetched, threads, may_read, &progress, counted, || {
            progress.until_contiguous(n);
            Ok(())
        })
    }

    /// [`stream`](Self::stream), running `consume` on the calling thread meanwhile; the
    /// first error of either stops both.
    pub(super) fn stream_with(
        &self,
        fetched: &Fetched,
        threads: usize,
        may_read: &(dyn Fn(usize) -> bool + Sync),
        progress: &Progress,
        counted: Option<&RunReads>,
        consume: impl FnOnce() -> Result<()>,
    ) -> Result<()> {
        let n = fetched.runs.len();
        let next = std::sync::atomic::AtomicUsize::new(0);
        let worker = || loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            if i >= n || !progress.wait_for(|| may_read(i)) {
                return;
            }
            match self.read_run(&fetched.runs[i], counted) {
                Ok(bytes) => {
                    let _ = fetched.bytes[i].set(bytes);
                    progress.done(i);
                }
                Err(e) => progress.fail(e),
            }
        };
        let threads = threads.clamp(1, n.max(1));
        let consumed = if threads == 1 {
            // No thread to hand out: read everything, then consume.
            worker();
            progress.check()?;
            consume()
        } else {
            std::thread::scope(|scope| {
                for _ in 0..threads {
                    scope.spawn(worker);
                }
                let r = consume();
                // Readers waiting for room must not wait for a consumer that is gone.
                progress.stop();
                r
            })
        };
        // A read error explains a consumer that stopped early: it comes first.
        progress.check()?;
        consumed?;
        if progress.completed() < n {
            return Err(Error::Corruption("a range read was lost (a reader thread panicked)".into()));
        }
        Ok(())
    }
}
