//! A slab being built: its encoded segments and bin positions, held in memory until they
//! pass the spill threshold.

use crate::bins::BinSummary;
use crate::error::{Error, Result};
use crate::index_file::BinPositions;
use crate::index_frames::PackedPositions;
use crate::segment::SegmentKey;
use crate::spill::{Spill, Spilled};
use crate::storage::Storage;
use std::collections::BTreeSet;

pub(crate) struct PendingSegment {
    pub(crate) key: SegmentKey,
    pub(crate) codec: u8,
    pub(crate) bytes: Vec<u8>,
    pub(crate) raw_length: u64,
    pub(crate) count: u64,
    pub(crate) min: f64,
    pub(crate) max: f64,
    /// Where the bytes went when the slab spilled (`bytes` is then empty).
    pub(crate) spilled: Option<Spilled>,
}

impl PendingSegment {
    /// The encoded length, in memory or spilled.
    pub(crate) fn length(&self) -> u64 {
        self.spilled.map_or(self.bytes.len() as u64, |p| p.length)
    }
}

impl std::fmt::Debug for PendingSegment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PendingSegment({:?}, {} bytes)", self.key, self.bytes.len())
    }
}

/// One bin's positions in a slab being written (level V), serialized: in memory, or in the
/// slab's spill once it is large (a slab's positions are about a quarter of its values).
pub(crate) struct PendingBitmap {
    pub(crate) packed: PackedPositions,
    /// Number of positions (for the slab's bin counts).
    pub(crate) len: u64,
    pub(crate) spilled: Option<Spilled>,
}

impl PendingBitmap {
    pub(super) fn key(&self) -> (u32, u64, u32, u32) {
        let p = &self.packed;
        (p.var, p.chunk, p.subchunk, p.bin)
    }

    /// Its serialized length, in memory or spilled.
    pub(super) fn length(&self) -> usize {
        self.spilled.map_or(self.packed.bytes.len(), |p| p.length as usize)
    }

    /// The packed positions, read back from `spill` if they went there.
    pub(crate) fn take(self, storage: &dyn Storage, spill: Option<&Spill>) -> Result<PackedPositions> {
        match (self.spilled, spill) {
            (None, _) => Ok(self.packed),
            (Some(p), Some(spill)) => Ok(PackedPositions { bytes: spill.read(storage, p)?, ..self.packed }),
            (Some(_), None) => Err(Error::InvalidArgument("positions spilled without a spill file".into())),
        }
    }

    pub(crate) fn new(b: &BinPositions) -> PendingBitmap {
        PendingBitmap { packed: PackedPositions::pack(b), len: b.positions.len(), spilled: None }
    }
}

pub(crate) struct SlabBuilder {
    pub(crate) id: u64,
    pub(crate) records: Option<[u64; 2]>,
    pub(crate) segments: Vec<PendingSegment>,
    pub(crate) bitmaps: Vec<PendingBitmap>,
    pub(crate) bins: Vec<BinSummary>,
    pub(super) done: BTreeSet<usize>,
    /// Encoded bytes held in memory (the rest are in `spill`).
    held: u64,
    pub(crate) spill: Option<Spill>,
}

impl SlabBuilder {
    pub(crate) fn empty(id: u64, records: Option<[u64; 2]>) -> Self {
        Self::new(id, records)
    }

    pub(super) fn new(id: u64, records: Option<[u64; 2]>) -> Self {
        Self {
            id,
            records,
            segments: vec![],
            bitmaps: vec![],
            bins: vec![],
            done: BTreeSet::new(),
            held: 0,
            spill: None,
        }
    }

    pub(super) fn add(&mut self, part: EncodedPart) {
        self.held += part.segments.iter().map(|s| s.bytes.len() as u64).sum::<u64>();
        self.held += part.bitmaps.iter().map(|b| b.packed.bytes.len() as u64).sum::<u64>();
        self.segments.extend(part.segments);
        self.bitmaps.extend(part.bitmaps);
        // A variable written in pieces has one set of bins: its pieces' counts add up.
        if let Some(b) = part.bins {
            match self.bins.iter_mut().find(|a| a.var == b.var && a.boundaries == b.boundaries) {
                Some(a) => a.counts.iter_mut().zip(&b.counts).for_each(|(x, y)| *x += y),
                None => self.bins.push(b),
            }
        }
    }

    /// Moves the encoded bytes and positions held in memory to the spill file once they pass
    /// `limit`.
    pub(super) fn spill_if_large(&mut self, storage: &dyn Storage, limit: u64) -> Result<()> {
        if self.held < limit {
            return Ok(());
        }
        let id = self.id;
        let spill = self.spill.get_or_insert_with(|| Spill::new(id));
        spill.take(storage, &mut self.segments)?;
        spill.take(storage, &mut self.bitmaps)?;
        self.held = 0;
        Ok(())
    }
}

/// A bin of a sub-chunk: its number, positions (level V only), bytes and segment shape.
pub(super) type BinnedPart = (u32, Option<roaring::RoaringBitmap>, Vec<u8>, Vec<usize>);

/// One variable's share of a slab, encoded.
pub(super) struct EncodedPart {
    pub(super) segments: Vec<PendingSegment>,
    pub(super) bitmaps: Vec<PendingBitmap>,
    pub(super) bins: Option<BinSummary>,
}
