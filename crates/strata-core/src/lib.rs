//! strata's storage engine: the on-disk format (v1), the storage interface, chunk
//! geometry with Hilbert ordering, the segment index, the writer and the reader.
//!
//! The format is specified in `docs/format.md`; this crate is its reference implementation.

pub mod area;
pub mod bins;
mod bitset;
pub mod cache;
pub mod calibrate;
pub mod cftime;
pub mod chunking;
pub mod constraint;
mod data_file;
pub mod dtype;
pub mod error;
mod fastdiv;
pub mod gc;
pub mod grid;
mod hilbert;
pub mod histogram;
pub mod in_place;
pub mod index_file;
pub mod joined;
pub mod labels;
mod large;
pub mod manifest;
pub mod mask;
pub mod parallel;
pub mod planner;
pub mod points;
pub mod precision;
pub mod query;
pub mod reader;
pub mod sampling;
pub mod segment;
pub mod session;
pub mod storage;
pub mod store;
pub mod stream;
pub mod verify;
pub mod write_config;
pub mod writer;

pub use dtype::DType;
pub use error::{Error, ErrorKind, Result};
pub use manifest::Manifest;
pub use reader::{DimSelection, StoreReader};
pub use session::{Answer, Output, Query, Session};
pub use store::Store;
pub use writer::{StoreWriter, WriterOptions};
