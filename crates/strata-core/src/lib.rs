//! strata's storage engine: the on-disk format (v1), the storage interface, chunk
//! geometry with Hilbert ordering, the segment index, the writer and the reader.
//!
//! The format is specified in `docs/format.md`; this crate is its reference implementation.
//!
//! What other crates use: a [`Store`] opened as a [`StoreReader`] (dense reads, statistics,
//! histograms) or written by a [`StoreWriter`] (whole slabs), a [`stream::StreamWriter`]
//! (records as produced) or the [`parallel`] coordinator; value queries through a
//! [`Session`] (a [`Query`] planned by a [`planner::Planner`], run by a
//! [`query::Executor`], answered as an [`Answer`]); constraints, areas and labels parsed
//! and resolved here ([`constraint`], [`area`], [`labels`], [`cftime`]); values in the
//! big-endian forms NetCDF files and DAP2 carry ([`wire`]). Helpers only the engine needs
//! (bit sets, fast division, Hilbert order, the data file's framing, large zeroed buffers)
//! and types reached only through the API (masks, segment keys, histograms) sit in private
//! modules.

pub mod area;
pub mod bins;
mod bitset;
pub mod cache;
pub mod calibrate;
pub mod cftime;
pub mod chunking;
pub mod constraint;
mod data_file;
pub mod decoding;
mod dtype;
mod error;
mod fastdiv;
mod fxhash;
pub mod gc;
pub mod grid;
mod hilbert;
mod histogram;
pub mod in_place;
pub mod index_file;
pub mod index_frames;
pub mod joined;
mod kept;
pub mod labels;
mod large;
pub mod manifest;
mod mask;
mod nontemporal;
pub mod parallel;
pub mod planner;
pub mod points;
pub mod precision;
pub mod query;
pub mod reader;
pub mod recycle;
pub mod sampling;
mod segment;
pub mod session;
mod spill;
pub mod storage;
pub mod store;
pub mod stream;
pub mod verify;
pub mod wire;
pub mod write_config;
pub mod writer;

pub use dtype::DType;
pub use error::{Error, ErrorKind, Result};
pub use histogram::Histogram;
pub use manifest::Manifest;
pub use mask::Mask;
pub use reader::{DimSelection, ReaderCaches, StoreReader};
pub use segment::{SegmentEntry, SegmentKey};
pub use session::{Answer, Output, Query, Session};
pub use store::Store;
pub use writer::{StoreWriter, WriterOptions};
