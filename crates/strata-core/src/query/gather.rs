//! The values of variables at given positions: only the sub-chunks (and bins) holding
//! them are read.

use super::*;
use crate::error::{Error, Result};
use crate::grid::{chunk_grid, subchunk_grid};
use crate::reader::{BinRead, SubchunkId};
use rayon::prelude::*;
use roaring::RoaringBitmap;
use std::collections::HashMap;

impl Executor<'_> {
    /// Fetches and decodes some bins of one sub-chunk into a sub-chunk buffer (elements of
    /// other bins are zero). `groups`: the variable's byte groups, if split; the reads say
    /// how many are read.
    pub(super) fn decode_reads(
        &self,
        slab: usize,
        index: &crate::reader::SlabIndex,
        id: SubchunkId,
        reads: &[BinRead],
        len: &[u64],
        groups: Option<Vec<usize>>,
    ) -> Result<Vec<u8>> {
        let shape: Vec<usize> = len.iter().map(|&l| l as usize).collect();
        let fetched = self.reader.fetch(
            reads.iter().flat_map(|r| r.entries.iter().map(move |e| (slab, e))),
            false,
            self.counted,
        )?;
        let k = reads.first().map_or(0, |r| r.entries.len());
        let split = groups.map(|g| (g, k));
        self.reader.decode_subchunk((slab, index, id), reads, &shape, split.as_ref(), &fetched)
    }

    /// The values of `name` at the local positions `hits` of the driver's sub-chunk `b`
    /// (`name` is chunked like the driver), at precision `level`: only the bins holding
    /// them are read. `hits` are where `pred` holds.
    pub(super) fn gather_box(
        &self,
        name: &str,
        b: &QueryBox,
        hits: &RoaringBitmap,
        pred: &Predicate,
        level: Option<usize>,
    ) -> Result<Vec<u8>> {
        let (var_idx, var) = self.reader.manifest().variable(name)?;
        let es = var.dtype.size();
        if hits.is_empty() {
            return Ok(Vec::new());
        }
        let groups = crate::precision::byte_groups(&self.reader.manifest().layout, var)?;
        let widths = crate::precision::widths_read(groups.as_deref(), level, es);
        let slab = &self.reader.manifest().slabs[b.slab];
        let index = self.reader.slab_index(slab)?;
        let id = (var_idx as u32, b.id.1, b.id.2);
        let n = b.len.iter().product::<u64>();
        // A bin whose values no comparison `pred` requires of `name` can pass holds no hit:
        // skipped without comparing its positions with the hits (at 50% selectivity on
        // ERSST x4, those comparisons were a fifth of a points query).
        let required = pred.required_on(name);
        let may_hold = |e: &crate::reader::BinEntry| {
            required.iter().all(|&(op, v)| op.coverage(e.count, e.min, e.max, e.count == e.len, v) != Coverage::Empty)
        };
        let needed: Vec<u32> = match index.bins_of(id)? {
            Some(list) => {
                list.iter().filter(|e| may_hold(e) && !e.positions.is_disjoint(hits)).map(|e| e.bin).collect()
            }
            None => vec![0],
        };
        let reads = self.reader.bin_reads(&index, slab, id, n, &widths, &|bin| needed.contains(&bin))?;
        let raw = self.decode_reads(b.slab, &index, id, &reads, &b.len, groups)?;
        if hits.max().is_some_and(|l| (l as usize + 1) * es > raw.len()) {
            return Err(Error::Corruption(format!("sub-chunk {id:?} of '{name}' is shorter than its index says")));
        }
        Ok(crate::points::picked(es, hits.iter().map(|l| (raw.as_slice(), l as usize))))
    }

    /// The values of `name` at the given flat indices (any order) into `out` (one element
    /// per index, little-endian), at precision `level` (see [`read_into_at`](crate::reader::StoreReader::read_into_at)).
    /// Only the sub-chunks — with level V, only the bins — holding those elements are read.
    pub fn gather(&self, name: &str, flat: &[u64], level: Option<usize>, out: &mut [u8]) -> Result<()> {
        let (var_idx, var) = self.reader.manifest().variable(name)?;
        let Some(chunking) = var.chunking.clone() else {
            return Err(Error::InvalidArgument(format!("'{name}' is a string variable: read it from the manifest")));
        };
        if level == Some(0) {
            return Err(Error::InvalidArgument("precision level must be at least 1".into()));
        }
        let es = var.dtype.size();
        if out.len() != flat.len() * es {
            return Err(Error::InvalidArgument(format!(
                "output buffer has {} bytes, {} needed",
                out.len(),
                flat.len() * es
            )));
        }
        let shape = self.reader.manifest().shape(var);
        let total: u64 = shape.iter().product();
        if let Some(&bad) = flat.iter().find(|&&f| f >= total) {
            return Err(Error::InvalidArgument(format!("index {bad} is outside '{name}' of shape {shape:?}")));
        }
        let groups = crate::precision::byte_groups(&self.reader.manifest().layout, var)?;
        let widths = crate::precision::widths_read(groups.as_deref(), level, es);
        let parts = self.reader.parts_of(var);
        let record = self.reader.manifest().is_record_var(var);
        // Group the wanted elements by sub-chunk: (slab, chunk, sub-chunk) -> (lengths,
        // (local, output) pairs). The loop reuses its buffers: it runs once per element.
        type Wanted = HashMap<(usize, u64, u32), (Vec<u64>, Vec<(u32, usize)>)>;
        let mut wanted: Wanted = HashMap::new();
        let sub_grid = subchunk_grid(&chunking.chunk, &chunking.subchunk);
        let nd = shape.len();
        let (mut coords, mut cc, mut sc, mut len, mut extent) =
            (vec![0; nd], vec![0; nd], vec![0; nd], vec![0; nd], shape.clone());
        let mut grids: HashMap<usize, Vec<u64>> = HashMap::new();
        let mut last: Option<(usize, u64, u64)> = None;
        for (i, &f) in flat.iter().enumerate() {
            let mut rest = f;
            for d in (0..nd).rev() {
                coords[d] = rest % shape[d];
                rest /= shape[d];
            }
            let slab_pos = if record {
                let hit = match last {
                    Some(l @ (_, start, count)) if coords[0] >= start && coords[0] < start + count => l,
                    _ => {
                        let Some(&found) =
                            parts.iter().find(|(_, start, count)| coords[0] >= *start && coords[0] < start + count)
                        else {
                            return Err(Error::Corruption(format!("no slab holds record {} of '{name}'", coords[0])));
                        };
                        last = Some(found);
                        found
                    }
                };
                coords[0] -= hit.1;
                extent[0] = hit.2;
                hit.0
            } else {
                parts.first().map_or(0, |p| p.0)
            };
            let grid = grids.entry(slab_pos).or_insert_with(|| chunk_grid(&extent, &chunking.chunk));
            let (mut local, mut key_chunk, mut key_sub) = (0u64, 0u64, 0u64);
            for d in 0..nd {
                cc[d] = coords[d] / chunking.chunk[d];
                let chunk_lo = cc[d] * chunking.chunk[d];
                let chunk_hi = (chunk_lo + chunking.chunk[d]).min(extent[d]);
                sc[d] = (coords[d] - chunk_lo) / chunking.subchunk[d];
                let lo = chunk_lo + sc[d] * chunking.subchunk[d];
                len[d] = (lo + chunking.subchunk[d]).min(chunk_hi) - lo;
                local = local * len[d] + (coords[d] - lo);
                key_chunk = key_chunk * grid[d] + cc[d];
                key_sub = key_sub * sub_grid[d] + sc[d];
            }
            let key = (slab_pos, key_chunk, key_sub as u32);
            wanted.entry(key).or_insert_with(|| (len.clone(), vec![])).1.push((local as u32, i));
        }
        let out_ptr = crate::reader::SendPtr::new(out.as_mut_ptr());
        let out_len = out.len();
        let jobs: Vec<_> = wanted.into_iter().collect();
        jobs.par_iter().try_for_each(|((slab_pos, chunk, sub), (len, picks))| -> Result<()> {
            let slab = &self.reader.manifest().slabs[*slab_pos];
            let index = self.reader.slab_index(slab)?;
            let id = (var_idx as u32, *chunk, *sub);
            let n = len.iter().product::<u64>();
            let needed: Vec<u32> = match index.bins_of(id)? {
                Some(list) => {
                    let mut locals: Vec<u32> = picks.iter().map(|p| p.0).collect();
                    locals.sort_unstable();
                    locals.dedup();
                    let locals = RoaringBitmap::from_sorted_iter(locals).unwrap_or_default();
                    list.iter().filter(|e| !e.positions.is_disjoint(&locals)).map(|e| e.bin).collect()
                }
                None => vec![0],
            };
            let reads = self.reader.bin_reads(&index, slab, id, n, &widths, &|b| needed.contains(&b))?;
            let raw = self.decode_reads(*slab_pos, &index, id, &reads, len, groups.clone())?;
            debug_assert!(picks.iter().all(|&(_, i)| (i + 1) * es <= out_len));
            if picks.iter().any(|&(l, _)| (l as usize + 1) * es > raw.len()) {
                return Err(Error::Corruption(format!("sub-chunk {id:?} of '{name}' is shorter than its index says")));
            }
            // SAFETY: every output index appears in exactly one job, and is in bounds.
            unsafe {
                match es {
                    1 => put_each::<1>(&raw, picks, out_ptr.get()),
                    2 => put_each::<2>(&raw, picks, out_ptr.get()),
                    4 => put_each::<4>(&raw, picks, out_ptr.get()),
                    8 => put_each::<8>(&raw, picks, out_ptr.get()),
                    _ => {
                        for &(l, i) in picks {
                            let v = &raw[l as usize * es..(l as usize + 1) * es];
                            std::ptr::copy_nonoverlapping(v.as_ptr(), out_ptr.get().add(i * es), es);
                        }
                    }
                }
            }
            Ok(())
        })
    }
}

/// Element `l` of `raw` (elements of W bytes) to element `i` of `out`, for each pick: a
/// fixed-size move each, where a run-time length took a call to memcpy per element.
///
/// # Safety
/// `out` must be valid for writes at every `i * W..(i + 1) * W` of `picks`, and no other
/// thread may touch those bytes meanwhile.
unsafe fn put_each<const W: usize>(raw: &[u8], picks: &[(u32, usize)], out: *mut u8) {
    let (values, _) = raw.as_chunks::<W>();
    for &(l, i) in picks {
        // SAFETY: the caller's promise; `[u8; W]` has alignment 1.
        unsafe { out.add(i * W).cast::<[u8; W]>().write(values[l as usize]) };
    }
}
