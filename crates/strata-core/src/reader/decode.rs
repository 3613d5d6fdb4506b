//! Decoding: the sub-chunks a read touches decoded in parallel (overlapping the next
//! batch's fetch on large reads) and their selected elements placed in the output.

use super::fetch::{Progress, IO_THREADS};
use super::{BinRead, Fetched, RunReads, SlabIndex, StoreReader, SubchunkId};
use crate::bins;
use crate::error::{Error, Result};
use crate::grid::{copy_block_raw, AxisBlock};
use crate::precision;
use rayon::prelude::*;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Reads decoding at most this many bytes run on the calling thread.
const SEQUENTIAL_BYTES: u64 = 256 << 10;
/// Raw bytes of sub-chunks per batch when a read overlaps fetching with decoding: the
/// first batch's fetch and the last one's decode are not overlapped, so batches are small
/// against a large read, and large enough that each fetch coalesces its ranges.
const OVERLAP_BATCH_BYTES: u64 = 2 << 20;
/// How many batches the reads may run ahead of decoding (bounds the bytes held).
const PREFETCH_BATCHES: usize = 2;

/// One sub-chunk to decode (one segment, or one per byte group read) and where its
/// selected elements go.
pub(super) struct Task {
    pub(super) slab: usize,
    pub(super) index: Arc<SlabIndex>,
    pub(super) id: SubchunkId,
    pub(super) reads: Vec<BinRead>,
    pub(super) blocks: Vec<AxisBlock>,
}

pub(crate) struct SendPtr(*mut u8);
// SAFETY: tasks write disjoint parts of the output buffer (each output element belongs to
// exactly one sub-chunk), and the buffer outlives the parallel loop.
unsafe impl Send for SendPtr {}
unsafe impl Sync for SendPtr {}

impl SendPtr {
    pub(crate) fn new(p: *mut u8) -> Self {
        Self(p)
    }

    // A method, so closures capture the whole wrapper rather than its raw-pointer field.
    pub(crate) fn get(&self) -> *mut u8 {
        self.0
    }
}

impl StoreReader {
    /// Decodes the bins of one sub-chunk of `shape` into its raw bytes (C order). Without
    /// level V the one read is the whole sub-chunk and its decoded bytes are returned as
    /// they are; with it, each bin's values go to its positions, and elements of bins not
    /// read are zero. `split`: the variable's byte groups and how many of them were read.
    pub(crate) fn decode_subchunk(
        &self,
        (slab, index, id): (usize, &SlabIndex, SubchunkId),
        reads: &[BinRead],
        shape: &[usize],
        split: Option<&(Vec<usize>, usize)>,
        fetched: &Fetched,
    ) -> Result<Vec<u8>> {
        let bins = index.bins_of(id)?;
        if bins.is_none() || self.is_in_place(&self.manifest.slabs[slab]) {
            // One segment holds the whole sub-chunk (in place: every bin names it).
            if let Some(r) = reads.first() {
                return self.decode_bin((slab, id), r, shape, split, fetched);
            }
        }
        let es = self.manifest.variables[id.0 as usize].dtype.size();
        let mut out = vec![0u8; shape.iter().product::<usize>() * es];
        for r in reads {
            let bins = bins
                .as_ref()
                .ok_or_else(|| Error::Corruption(format!("sub-chunk {id:?} has several segments but no bins")))?;
            let p = bins.positions(r.bin)?;
            let values = self.decode_bin((slab, id), r, &[p.len() as usize], split, fetched)?;
            bins::scatter(&values, p, es, &mut out);
        }
        Ok(out)
    }

    /// Decodes one bin's segments (one per byte group read) into its values, in position
    /// order; `shape` is the segment's shape (`[n]` for a bin, the sub-chunk's without V).
    pub(crate) fn decode_bin(
        &self,
        (slab, id): (usize, SubchunkId),
        r: &BinRead,
        shape: &[usize],
        split: Option<&(Vec<usize>, usize)>,
        fetched: &Fetched,
    ) -> Result<Vec<u8>> {
        let var_idx = id.0 as usize;
        let dtype = self.manifest.variables[var_idx].dtype;
        let chains = &self.chains[var_idx];
        let n = shape.iter().product::<usize>();
        self.counters.segments_decoded.fetch_add(r.entries.len() as u64, Ordering::Relaxed);
        match split {
            None => {
                let e = &r.entries[0];
                Ok(chains[e.codec as usize].decode(fetched.get(slab, e)?, e.raw_length as usize, shape)?)
            }
            Some((groups, _)) => {
                let mut parts = Vec::with_capacity(r.entries.len());
                for (e, &w) in r.entries.iter().zip(groups) {
                    let group_shape = [vec![w], shape.to_vec()].concat();
                    parts.push(chains[e.codec as usize].decode(
                        fetched.get(slab, e)?,
                        e.raw_length as usize,
                        &group_shape,
                    )?);
                }
                let refs: Vec<&[u8]> = parts.iter().map(|p| &p[..]).collect();
                let mut values = vec![0u8; n * dtype.size()];
                precision::assemble(&refs, n, dtype, groups, &mut values);
                Ok(values)
            }
        }
    }

    /// `split`: the variable's byte groups and how many of them the tasks read.
    pub(super) fn execute(
        &self,
        var_idx: usize,
        tasks: &[Task],
        split: Option<&(Vec<usize>, usize)>,
        out_shape: &[u64],
        out: &mut [u8],
        counted: Option<&RunReads>,
    ) -> Result<()> {
        let dtype = self.manifest.variables[var_idx].dtype;
        let es = dtype.size();
        let out_len = out.len();
        let out_ptr = SendPtr(out.as_mut_ptr());
        let scatter = |t: &Task, raw: &[u8]| {
            let src_shape: Vec<u64> = t.blocks.iter().map(|b| b.len).collect();
            let src_start: Vec<u64> = t.blocks.iter().map(|b| b.first).collect();
            let count: Vec<u64> = t.blocks.iter().map(|b| b.count).collect();
            let dst_start: Vec<u64> = t.blocks.iter().map(|b| b.out).collect();
            let steps: Vec<u64> = t.blocks.iter().map(|b| b.step).collect();
            // SAFETY: see `SendPtr`: the buffer is `out_len` bytes and this task's elements
            // are written by no other task.
            unsafe {
                copy_block_raw(
                    raw,
                    &src_shape,
                    &src_start,
                    &steps,
                    out_ptr.get(),
                    out_len,
                    out_shape,
                    &dst_start,
                    &count,
                    es,
                )
            };
        };
        let level = split.map_or(0, |(_, k)| *k as u8);
        let segment_id = |t: &Task| (self.key, self.manifest.slabs[t.slab].id, t.id, level);
        // Sub-chunks already decoded are served from the cache; only the rest are read.
        let mut pending = Vec::with_capacity(tasks.len());
        for (i, t) in tasks.iter().enumerate() {
            match self.caches.segments.get(segment_id(t)) {
                Some(raw) => {
                    self.counters.cache_hits.fetch_add(1, Ordering::Relaxed);
                    scatter(t, &raw);
                }
                None => pending.push(i),
            }
        }
        // Handing work to the thread pool costs tens of microseconds of wake-up: small reads
        // run on the caller's thread, larger ones fan out.
        let entries = || {
            pending.iter().flat_map(|&i| {
                tasks[i].reads.iter().flat_map(move |r| r.entries.iter().map(move |e| (tasks[i].slab, e)))
            })
        };
        let raw_total: u64 = entries().map(|(_, e)| e.raw_length).sum();
        let parallel = raw_total > SEQUENTIAL_BYTES;
        let decode = |i: usize, fetched: &Fetched| -> Result<()> {
            let t = &tasks[i];
            let shape: Vec<usize> = t.blocks.iter().map(|b| b.len as usize).collect();
            let raw = self.decode_subchunk((t.slab, &t.index, t.id), &t.reads, &shape, split, fetched)?;
            scatter(t, &raw);
            if self.caches.segments.capacity() > 0 {
                self.caches.segments.insert(segment_id(t), Arc::new(raw));
            }
            Ok(())
        };
        let decode_all = |batch: &[usize], fetched: &Fetched| -> Result<()> {
            if parallel {
                batch.par_iter().try_for_each(|&i| decode(i, fetched))
            } else {
                batch.iter().try_for_each(|&i| decode(i, fetched))
            }
        };
        if raw_total < 2 * OVERLAP_BATCH_BYTES {
            let fetched = self.fetch(entries(), parallel, counted)?;
            return decode_all(&pending, &fetched);
        }
        if !self.overlap.load(Ordering::Relaxed) {
            let fetched = self.fetch_streamed(entries(), counted)?;
            return decode_all(&pending, &fetched);
        }
        // PStore's prefetch: the range reads stream in file order on I/O threads, at most
        // PREFETCH_BATCHES batches ahead, while the pool decodes each batch as soon as its
        // runs are in; a slow read path then costs about max(read, decode), not their sum.
        let mut batches: Vec<&[usize]> = Vec::new();
        let (mut from, mut bytes) = (0, 0u64);
        for (k, &i) in pending.iter().enumerate() {
            bytes += tasks[i].reads.iter().flat_map(|r| &r.entries).map(|e| e.raw_length).sum::<u64>();
            if bytes >= OVERLAP_BATCH_BYTES || k + 1 == pending.len() {
                batches.push(&pending[from..=k]);
                (from, bytes) = (k + 1, 0);
            }
        }
        let fetched = Fetched::new(&self.manifest, Self::runs_of(entries()));
        // The last run each batch needs (a running maximum: runs arrive in order).
        let mut need = Vec::with_capacity(batches.len());
        for b in &batches {
            let last = b
                .iter()
                .flat_map(|&i| {
                    tasks[i].reads.iter().flat_map(move |r| r.entries.iter().map(move |e| (tasks[i].slab, e)))
                })
                .map(|(slab, e)| fetched.run_of(slab, e.offset))
                .max()
                .unwrap_or(0);
            need.push(need.last().map_or(last, |&m: &usize| m.max(last)));
        }
        let decoding = std::sync::atomic::AtomicUsize::new(0);
        let may_read = |run: usize| {
            let k = decoding.load(Ordering::Relaxed);
            run <= need[(k + PREFETCH_BATCHES).min(need.len() - 1)]
        };
        let progress = Progress::default();
        self.stream_with(&fetched, IO_THREADS, &may_read, &progress, counted, || {
            for (k, batch) in batches.iter().enumerate() {
                if !progress.until_contiguous(need[k] + 1) {
                    return Ok(()); // the read error is reported by `stream_with`
                }
                decode_all(batch, &fetched)?;
                decoding.store(k + 1, Ordering::Relaxed);
                progress.wake();
            }
            Ok(())
        })
    }
}
