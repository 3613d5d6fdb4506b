//! Codecs for strata segments.
//!
//! A segment's bytes pass through a [`CodecChain`]: zero or more [`Transform`]s (which
//! rearrange bytes without changing their number, e.g. byte shuffle) followed by exactly
//! one [`Backend`] (which compresses, e.g. zstd). Chains are described by [`CodecSpec`]s,
//! plain JSON-serialisable values, and built through the [`registry`] by name, so the
//! manifest records exactly what was used and a reader can rebuild it.

pub mod analyzer;
mod backend;
mod chain;
pub mod endian;
mod error;
mod fpc;
mod hdf5;
mod lossy;
pub mod plan;
pub mod reference;
pub mod registry;
mod shuffle;
mod spec;
mod sz;
mod transform;
mod zfp;

pub use backend::{Backend, ByteColumnsBackend, Lz4Backend, PcoBackend, RawBackend, ZstdBackend};
pub use chain::CodecChain;
pub use error::{CodecError, Result};
pub use fpc::FpcBackend;
pub use hdf5::{FillBackend, Hdf5Backend, Hdf5Filter};
pub use lossy::{holds_bound, BoundSpec};
pub use spec::{Capabilities, CodecSpec, ElementContext, ErrorBound, NumType, Speed};
pub use sz::SzBackend;
pub use transform::{BitRoundTransform, NeighbourOp, NeighbourTransform, ShuffleTransform, Transform};
pub use zfp::ZfpBackend;

/// Byte `b` of every `es`-byte element of `input` into the `b`-th plane of `out` (the
/// shuffle transform's kernel; level M's byte groups are these planes).
pub fn byte_planes(es: usize, input: &[u8], out: &mut [u8]) {
    shuffle::shuffle(es, input, out)
}
