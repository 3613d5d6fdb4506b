//! Variables without the record dimension, written whole or in blocks of whole chunks into
//! the one static slab a new store has.

use super::{SlabBuilder, StoreWriter};
use crate::bins::Bins;
use crate::chunking::{piece_shape, DEFAULT_SLAB_BYTES};
use crate::error::{Error, Result};
use crate::grid::{chunk_grid, chunks_touched};
use std::collections::HashSet;

/// A static variable being written in blocks: the chunks written so far, and the bins its
/// first block resolved (one set of bins per variable and slab; None without level V).
#[derive(Debug)]
pub(super) struct StaticBlocks {
    pub(super) chunks: HashSet<u64>,
    bins: Option<Bins>,
}

impl StoreWriter {
    /// Writes a variable that does not have the record dimension: the whole array, C order,
    /// little-endian. Only when creating a store.
    pub fn put_static(&mut self, name: &str, data: &[u8]) -> Result<()> {
        let (idx, var) = self.draft.variable(name)?;
        if self.draft.is_record_var(var) {
            return Err(Error::InvalidArgument(format!("'{name}' has the record dimension: write it through slabs")));
        }
        if var.chunking.is_none() {
            return Err(Error::InvalidArgument(format!("'{name}' is a string variable, stored in the manifest")));
        }
        if self.static_blocks.contains_key(&idx) {
            return Err(Error::InvalidArgument(format!("'{name}' is being written in blocks (put_static_block)")));
        }
        let extent = self.draft.shape(var);
        let window = self.window(idx, &extent)?;
        if self.static_slab.as_ref().is_some_and(|s| !s.0.done.contains(&idx)) {
            self.resolve_plan(idx, &window.1, data)?;
        }
        let part = self.encode_part(idx, &extent, &window, data, self.bins_of(idx, data))?;
        let slab = self.static_slab_mut()?;
        if !slab.done.insert(idx) {
            return Err(Error::InvalidArgument(format!("'{name}' was already written")));
        }
        slab.add(part);
        self.spill_static()
    }

    /// Writes a block of a variable without the record dimension: `shape` elements from
    /// `origin` (C order, little-endian). A static variable larger than memory should hold is
    /// written this way, block by block in any order, each block made of whole chunks (it
    /// may stop at the variable's edge): [`static_piece`](Self::static_piece) gives such a
    /// shape. Its plan and bins come from the first block, as a record variable's come from
    /// its first slab. Only when creating a store.
    pub fn put_static_block(&mut self, name: &str, origin: &[u64], shape: &[u64], data: &[u8]) -> Result<()> {
        let (idx, var) = self.draft.variable(name)?;
        let bad = |why: String| Err(Error::InvalidArgument(format!("'{name}' {why}")));
        let Some(chunk) = var.chunking.as_ref().map(|c| c.chunk.clone()) else {
            return bad("is a string variable, stored in the manifest".into());
        };
        if self.draft.is_record_var(var) {
            return bad("has the record dimension: write it through slabs".into());
        }
        // A subfile writer's block is the whole domain (empty): it may write in blocks too.
        if self.block.as_ref().is_some_and(|b| !b.is_empty()) {
            return bad("is written whole by a parallel writer (its block, with put_static)".into());
        }
        let extent = self.draft.shape(var);
        if extent.is_empty() {
            return bad("is a scalar: write it with put_static".into());
        }
        if origin.len() != extent.len() || shape.len() != extent.len() {
            return bad(format!("has {} dimensions: a block gives an origin and a shape of as many", extent.len()));
        }
        for d in 0..extent.len() {
            let end = origin[d].saturating_add(shape[d]);
            let aligned = origin[d].is_multiple_of(chunk[d]) && (end.is_multiple_of(chunk[d]) || end == extent[d]);
            if shape[d] == 0 || end > extent[d] || !aligned {
                return bad(format!(
                    "is chunked by {chunk:?}: a block is whole chunks inside {extent:?}, not {shape:?} at {origin:?}"
                ));
            }
        }
        let expected = shape.iter().product::<u64>() * var.dtype.size() as u64;
        if data.len() as u64 != expected {
            return bad(format!("needs {expected} bytes for a block of shape {shape:?}, got {}", data.len()));
        }
        if self.static_slab_mut()?.done.contains(&idx) {
            return bad("was already written".into());
        }
        // The chunks the block covers, none of them written before.
        let grid = chunk_grid(&extent, &chunk);
        let covered = chunks_touched(origin, shape, &chunk, &grid);
        let state = self.static_blocks.get(&idx);
        if covered.iter().any(|c| state.is_some_and(|s| s.chunks.contains(c))) {
            return bad(format!("was already written in part of the block of shape {shape:?} at {origin:?}"));
        }
        let bins = match state {
            Some(s) => s.bins.clone(),
            None => {
                self.resolve_plan(idx, shape, data)?;
                self.bins_of(idx, data)
            }
        };
        let part = self.encode_part(idx, &extent, &(origin.to_vec(), shape.to_vec()), data, bins.clone())?;
        // Recorded once the block is encoded: a block refused leaves the variable as it was.
        let state = self.static_blocks.entry(idx).or_insert_with(|| StaticBlocks { chunks: HashSet::new(), bins });
        state.chunks.extend(covered);
        let complete = state.chunks.len() as u64 == grid.iter().product::<u64>();
        let slab = self.static_slab_mut()?;
        slab.add(part);
        if complete {
            slab.done.insert(idx);
            self.static_blocks.remove(&idx);
        }
        self.spill_static()
    }

    /// The block shape of [`put_static_block`](Self::put_static_block) for static variable
    /// `name`: whole chunks, about a slab's bytes, cut along the leading dimensions first
    /// (empty for a scalar or a string variable, written whole).
    pub fn static_piece(&self, name: &str) -> Result<Vec<u64>> {
        let (_, var) = self.draft.variable(name)?;
        let Some(c) = &var.chunking else { return Ok(vec![]) };
        Ok(piece_shape(&self.draft.shape(var), &c.chunk, var.dtype.size() as u64, DEFAULT_SLAB_BYTES))
    }

    fn static_slab_mut(&mut self) -> Result<&mut SlabBuilder> {
        self.static_slab
            .as_mut()
            .map(|s| &mut s.0)
            .ok_or_else(|| Error::InvalidArgument("static variables can only be written when creating a store".into()))
    }

    /// Spills the static slab's encoded bytes once they are many. A writer of a block does
    /// not: its coordinator places its parts from memory. A subfile writer (the whole
    /// domain: an empty block) writes its own data file from the spill as a store's writer does.
    fn spill_static(&mut self) -> Result<()> {
        if self.block.as_ref().is_some_and(|b| !b.is_empty()) {
            return Ok(());
        }
        let (storage, limit) = (self.store.storage().clone(), self.spill_at);
        self.static_slab_mut()?.spill_if_large(storage.as_ref(), limit)
    }
}
