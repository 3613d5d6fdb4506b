use crate::error::{CodecError, Result};
use crate::spec::{Capabilities, CodecSpec};
use std::cell::RefCell;

thread_local! {
    static DECOMPRESSOR: RefCell<Option<zstd::bulk::Decompressor<'static>>> =
        RefCell::new(zstd::bulk::Decompressor::new().ok());
}

/// The last stage of a chain: turns bytes into a compressed stream and back.
///
/// `decode` is told the exact decoded length (stored in the segment table) and must fail,
/// not pad or truncate, when the stream does not decode to exactly that many bytes.
pub trait Backend: Send + Sync + std::fmt::Debug {
    fn spec(&self) -> CodecSpec;
    fn capabilities(&self) -> Capabilities;
    fn encode(&self, input: &[u8], out: &mut Vec<u8>) -> Result<()>;
    fn decode(&self, input: &[u8], decoded_len: usize, out: &mut Vec<u8>) -> Result<()>;
}

/// Stores bytes as they are.
#[derive(Debug, Clone, Copy, Default)]
pub struct RawBackend;

impl Backend for RawBackend {
    fn spec(&self) -> CodecSpec {
        CodecSpec::new("raw")
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities { lossless: true, partial_decode: true }
    }

    fn encode(&self, input: &[u8], out: &mut Vec<u8>) -> Result<()> {
        out.clear();
        out.extend_from_slice(input);
        Ok(())
    }

    fn decode(&self, input: &[u8], decoded_len: usize, out: &mut Vec<u8>) -> Result<()> {
        if input.len() != decoded_len {
            return Err(CodecError::Corrupt {
                codec: "raw",
                detail: format!("{} bytes stored, {decoded_len} expected", input.len()),
            });
        }
        out.clear();
        out.extend_from_slice(input);
        Ok(())
    }
}

/// Zstandard at a fixed level (1..=22; negative levels are zstd's fast modes).
#[derive(Debug, Clone, Copy)]
pub struct ZstdBackend {
    pub level: i32,
}

impl ZstdBackend {
    pub const DEFAULT_LEVEL: i32 = 3;
}

impl Backend for ZstdBackend {
    fn spec(&self) -> CodecSpec {
        CodecSpec::new("zstd").with("level", self.level)
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities { lossless: true, partial_decode: false }
    }

    fn encode(&self, input: &[u8], out: &mut Vec<u8>) -> Result<()> {
        *out = zstd::bulk::compress(input, self.level)
            .map_err(|e| CodecError::Encode { codec: "zstd", detail: e.to_string() })?;
        Ok(())
    }

    fn decode(&self, input: &[u8], decoded_len: usize, out: &mut Vec<u8>) -> Result<()> {
        let corrupt = |detail: String| CodecError::Corrupt { codec: "zstd", detail };
        out.clear();
        // One spare byte lets us notice a stream that decodes to more than expected.
        out.resize(decoded_len + 1, 0);
        // A decompression context per thread: creating one per segment costs more than
        // decoding a small sub-chunk.
        let n = DECOMPRESSOR.with(|cell| match &mut *cell.borrow_mut() {
            Some(d) => d.decompress_to_buffer(input, &mut out[..]).map_err(|e| corrupt(e.to_string())),
            None => zstd::bulk::decompress_to_buffer(input, &mut out[..]).map_err(|e| corrupt(e.to_string())),
        })?;
        if n != decoded_len {
            return Err(corrupt(format!("decoded {n} bytes, {decoded_len} expected")));
        }
        out.truncate(decoded_len);
        Ok(())
    }
}
