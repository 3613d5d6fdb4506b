//! Parallel writers (compressed PnetCDF's idea): N writers — threads, Dask tasks, MPI
//! ranks, C programs — each compress their own block; a coordinator gathers their segment
//! tables into one manifest. Offsets are exchanged, never data.
//!
//! The protocol, whatever carries the messages (docs/writing.md):
//!
//! 1. The coordinator is made with [`Coordinator::create`]; every writer with
//!    [`PartWriter::new`] from the same schema and options (with the `decomposition` the
//!    blocks meet at) and the coordinator's [`token`](Coordinator::token).
//! 2. Writers append records; when [`PartWriter::ready`] says a slab is complete (the same
//!    moment for all: they append the same records), each calls [`PartWriter::encode`] and
//!    sends the [`PartTable`] it returns (bytes, [`PartTable::to_bytes`]) to the coordinator.
//! 3. The coordinator's [`place`](Coordinator::place) takes every writer's table for the slab,
//!    writes the slab's index file and the data file's header, and answers each writer
//!    with a [`PartPlacement`]; each writer's [`write`](PartWriter::write) puts its bytes
//!    where told and makes them durable.
//! 4. Once every writer has written, [`Coordinator::commit`] publishes the version. A writer
//!    that fails makes the commit fail: no version names a slab some writer did not write.
//!
//! Placements: **dense** — one data file per slab in the store's global layout order
//! (offsets are assigned before anyone writes); **hybrid** — one data file per slab, each
//! writer writing at once into a slot reserved from the expected compressed fraction plus
//! padding, with what does not fit placed after the slots; **subfiles** — each writer holds a
//! range of records and writes its own data files, with no exchange until the commit.

mod coordinator;
mod part;
#[cfg(test)]
mod tests;

pub use coordinator::Coordinator;
pub use part::{PartOf, PartWriter};

use crate::error::{Error, Result};
use crate::index_file::{self, SlabIndexData};
use crate::manifest::FileEntry;
use serde::{Deserialize, Serialize};
use strata_codecs::CodecSpec;

/// Version of the messages' fields.
pub const MESSAGE_VERSION: u32 = 1;
const TABLE_MAGIC: &[u8; 8] = b"STRATAPT";

/// Where the writers' bytes go.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum Placement {
    Dense,
    /// Slots of `fraction × raw bytes × (1 + padding)`; `fraction` is the first slab's guess
    /// of the compressed size over the raw size (later slabs use the one observed).
    Hybrid {
        fraction: f64,
        padding: f64,
    },
    Subfiles,
}

impl Placement {
    pub fn parse(text: &str) -> Result<Self> {
        match text {
            "dense" => Ok(Placement::Dense),
            "hybrid" => Ok(Placement::Hybrid { fraction: 0.5, padding: 0.2 }),
            "subfiles" => Ok(Placement::Subfiles),
            other => Err(Error::InvalidArgument(format!(
                "unknown placement '{other}' (placements: dense, hybrid, subfiles)"
            ))),
        }
    }
}

/// The paths of slab `id`'s files in a parallel write (`token` is the write's, `writer`
/// names a writer's own data file under subfiles).
pub(crate) fn paths(id: u64, token: &str, writer: Option<u32>) -> (String, String) {
    let own = writer.map(|w| format!("-w{w}")).unwrap_or_default();
    (format!("data/s{id:06}-{token}{own}.sdat"), format!("index/s{id:06}-{token}.sidx"))
}

/// What one writer tells the coordinator about one slab: its segments, without their bytes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PartTable {
    pub version: u32,
    pub writer: u32,
    pub slab: u64,
    pub records: Option<[u64; 2]>,
    /// Per variable, the chains this writer's segments name by position (a plan is made
    /// by each writer from its own data) and its plan record.
    pub codecs: Vec<Vec<Vec<CodecSpec>>>,
    pub plans: Vec<Option<crate::manifest::RawJson>>,
    /// Hybrid: the writer's slot `[start, length]`; segments with an offset inside it are
    /// written already. Subfiles: the writer's own data file, written whole.
    pub slot: Option<[u64; 2]>,
    pub own_file: Option<FileEntry>,
    /// Segments (offset 0 when not yet placed), bin positions and bin counts.
    #[serde(skip)]
    pub index: SlabIndexData,
}

impl PartTable {
    /// The table as bytes (what MPI or a socket carries).
    pub fn to_bytes(&self) -> Vec<u8> {
        let head = serde_json::to_vec(self).unwrap_or_default();
        let mut out = TABLE_MAGIC.to_vec();
        out.extend_from_slice(&(head.len() as u64).to_le_bytes());
        out.extend_from_slice(&head);
        out.extend_from_slice(&index_file::encode(&self.index));
        out
    }

    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let bad = |why: &str| Error::InvalidArgument(format!("not a part table: {why}"));
        if bytes.len() < 16 || &bytes[..8] != TABLE_MAGIC {
            return Err(bad("bad magic"));
        }
        let n = u64::from_le_bytes(bytes[8..16].try_into().map_err(|_| bad("short"))?) as usize;
        let head = bytes.get(16..16usize.saturating_add(n)).ok_or_else(|| bad("short header"))?;
        let mut table: PartTable = serde_json::from_slice(head).map_err(|e| bad(&e.to_string()))?;
        if table.version != MESSAGE_VERSION {
            return Err(bad(&format!("message version {} (this build speaks {MESSAGE_VERSION})", table.version)));
        }
        table.index = index_file::decode(&bytes[16 + n..], "part table")?;
        Ok(table)
    }
}

/// The coordinator's answer to one writer: where its segments go.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PartPlacement {
    pub version: u32,
    pub slab: u64,
    /// The shared data file.
    pub data: String,
    /// The offset of each of the writer's segments, in its table's order.
    pub offsets: Vec<u64>,
    /// Hybrid: the compressed fraction observed, for the next slab's slots.
    pub fraction: f64,
}

impl PartPlacement {
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        serde_json::from_slice(bytes).map_err(|e| Error::InvalidArgument(format!("not a part placement: {e}")))
    }
}
