use crate::error::{CodecError, Result};
use crate::spec::{Capabilities, CodecSpec, NumType, Speed};
use std::cell::RefCell;

thread_local! {
    static DECOMPRESSOR: RefCell<Option<zstd::bulk::Decompressor<'static>>> =
        RefCell::new(zstd::bulk::Decompressor::new().ok());
    static COMPRESSOR: RefCell<Option<zstd::bulk::Compressor<'static>>> =
        RefCell::new(zstd::bulk::Compressor::new(3).ok());
}

/// Compresses `input` into one zstd frame at `level`, with a compression context per
/// thread: creating one per call (about 8% of a write's time) costs more than compressing a
/// small segment. The frame is the same as a fresh context makes.
pub(crate) fn zstd_compress(input: &[u8], level: i32) -> std::io::Result<Vec<u8>> {
    COMPRESSOR.with(|cell| match &mut *cell.borrow_mut() {
        Some(c) => {
            c.set_compression_level(level)?;
            c.compress(input)
        }
        None => zstd::bulk::compress(input, level),
    })
}

/// Decompresses one zstd frame that must hold exactly `out.len()` bytes into `out`,
/// straight into it: a frame holding more fails for want of room, one holding less
/// decodes short. (A spare byte of room in a buffer of its own, then copied, cost an
/// allocation, a zeroing and a copy of every decoded sub-chunk.) A decompression context
/// per thread: creating one per call costs more than decoding a small sub-chunk.
pub(crate) fn zstd_decompress_exact(input: &[u8], out: &mut [u8]) -> std::result::Result<(), String> {
    let want = out.len();
    let got = DECOMPRESSOR.with(|cell| match &mut *cell.borrow_mut() {
        Some(d) => d.decompress_to_buffer(input, out).map_err(|e| e.to_string()),
        None => zstd::bulk::decompress_to_buffer(input, out).map_err(|e| e.to_string()),
    })?;
    if got != want {
        return Err(format!("decoded {got} bytes, {want} expected"));
    }
    Ok(())
}

/// The last stage of a chain: turns bytes into a compressed stream and back.
///
/// `decode` is told the exact decoded length (stored in the segment table) and must fail,
/// not pad or truncate, when the stream does not decode to exactly that many bytes.
/// `shape` is the segment's shape (C order); byte-oriented backends ignore it, predictive
/// ones (`sz`, `zfp`, `fpc`) use it to find an element's neighbours.
pub trait Backend: Send + Sync + std::fmt::Debug {
    fn spec(&self) -> CodecSpec;
    fn capabilities(&self) -> Capabilities;
    /// Nominal throughput the planner ranks chains by (see [`Speed`]).
    fn speed(&self) -> Speed;
    fn encode(&self, input: &[u8], shape: &[usize], out: &mut Vec<u8>) -> Result<()>;
    fn decode(&self, input: &[u8], decoded_len: usize, shape: &[usize], out: &mut Vec<u8>) -> Result<()>;
}

/// Stores bytes as they are.
#[derive(Debug, Clone, Copy, Default)]
pub struct RawBackend;

impl Backend for RawBackend {
    fn spec(&self) -> CodecSpec {
        CodecSpec::new("raw")
    }

    fn speed(&self) -> Speed {
        Speed::new(50_000.0, 50_000.0)
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities { partial_decode: true, ..Capabilities::LOSSLESS }
    }

    fn encode(&self, input: &[u8], _shape: &[usize], out: &mut Vec<u8>) -> Result<()> {
        out.clear();
        out.extend_from_slice(input);
        Ok(())
    }

    fn decode(&self, input: &[u8], decoded_len: usize, _shape: &[usize], out: &mut Vec<u8>) -> Result<()> {
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

/// zstd's nominal encoding speed by level (decoding hardly depends on the level).
fn zstd_encode_mb_s(level: i32) -> f64 {
    match level {
        ..=0 => 2_000.0,
        1 => 900.0,
        // Medians of `strata analyze` over ../shared/data: level 4 encodes about as fast
        // as level 3 (726 against 862 MB/s; shuffled, 1,006 against 981); level 5, the
        // first lazy level, at a third of that (255). Shuffled, levels 6, 7 and 9 measure
        // 0.29, 0.23 and 0.18-0.21 of level 3's speed (bench/results/calibrate_speeds.md):
        // level 9 is under balanced's floor for variables streamed in blocks, and within
        // the lower one of a small variable stored whole, which needs it
        // (`analyzer::SMALL_MIN_ENCODE_MB_S`).
        2..=4 => 700.0,
        5 => 250.0,
        6 => 180.0,
        7..=8 => 160.0,
        9 => 140.0,
        10..=15 => 50.0,
        _ => 10.0,
    }
}

impl Backend for ZstdBackend {
    fn spec(&self) -> CodecSpec {
        CodecSpec::new("zstd").with("level", self.level)
    }

    fn speed(&self) -> Speed {
        Speed::new(zstd_encode_mb_s(self.level), 2_000.0)
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::LOSSLESS
    }

    fn encode(&self, input: &[u8], _shape: &[usize], out: &mut Vec<u8>) -> Result<()> {
        *out = zstd_compress(input, self.level)
            .map_err(|e| CodecError::Encode { codec: "zstd", detail: e.to_string() })?;
        Ok(())
    }

    fn decode(&self, input: &[u8], decoded_len: usize, _shape: &[usize], out: &mut Vec<u8>) -> Result<()> {
        out.clear();
        out.resize(decoded_len, 0);
        zstd_decompress_exact(input, out).map_err(|detail| CodecError::Corrupt { codec: "zstd", detail })
    }
}

/// LZ4 block format: the fastest decoder here, for the `speed` objective.
#[derive(Debug, Clone, Copy, Default)]
pub struct Lz4Backend;

impl Backend for Lz4Backend {
    fn spec(&self) -> CodecSpec {
        CodecSpec::new("lz4")
    }

    fn speed(&self) -> Speed {
        Speed::new(2_500.0, 5_000.0)
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::LOSSLESS
    }

    fn encode(&self, input: &[u8], _shape: &[usize], out: &mut Vec<u8>) -> Result<()> {
        *out = lz4_flex::block::compress(input);
        Ok(())
    }

    fn decode(&self, input: &[u8], decoded_len: usize, _shape: &[usize], out: &mut Vec<u8>) -> Result<()> {
        let corrupt = |detail: String| CodecError::Corrupt { codec: "lz4", detail };
        out.clear();
        out.resize(decoded_len, 0);
        let n = lz4_flex::block::decompress_into(input, out).map_err(|e| corrupt(e.to_string()))?;
        if n != decoded_len {
            return Err(corrupt(format!("decoded {n} bytes, {decoded_len} expected")));
        }
        Ok(())
    }
}

/// pcodec: a whole-value numeric codec (it models the numbers, not their bytes), often the
/// best ratio on smooth or quantized fields.
#[derive(Debug, Clone, Copy)]
pub struct PcoBackend {
    pub level: usize,
    pub dtype: NumType,
    /// Let pcodec search for a delta encoding of its own. A chain that already takes
    /// differences along the last axis (pcodec's order) turns it off: the search then finds
    /// nothing and cost up to a third of the encode (on the 7 such chains `balanced` picked in
    /// ../shared/data: same ratio, encode 1.27-1.51x faster). Elsewhere it is worth up to
    /// 58% of the ratio. An encoder's choice only: every stream decodes alike.
    pub delta_search: bool,
}

impl PcoBackend {
    pub const DEFAULT_LEVEL: usize = pco::DEFAULT_COMPRESSION_LEVEL;
}

/// How much faster pcodec encodes with its delta search off ([`PcoBackend::delta_search`]),
/// as declared: the median measured on the variables of `bench/calibrate_speeds.py`.
pub const PCO_NO_SEARCH_SPEEDUP: f64 = 1.28;

macro_rules! pco_dispatch {
    ($dtype:expr, $mac:ident) => {
        match $dtype {
            NumType::I8 => $mac!(i8),
            NumType::U8 => $mac!(u8),
            NumType::I16 => $mac!(i16),
            NumType::U16 => $mac!(u16),
            NumType::I32 => $mac!(i32),
            NumType::U32 => $mac!(u32),
            NumType::I64 => $mac!(i64),
            NumType::U64 => $mac!(u64),
            NumType::F32 => $mac!(f32),
            NumType::F64 => $mac!(f64),
        }
    };
}

impl Backend for PcoBackend {
    fn spec(&self) -> CodecSpec {
        CodecSpec::new("pco").with("level", self.level)
    }

    fn speed(&self) -> Speed {
        let encode = match self.level {
            0..=4 => 300.0,
            5..=6 => 200.0,
            7..=8 => 115.0,
            9..=10 => 60.0,
            _ => 45.0,
        };
        // The figures above are for 4-byte elements. pcodec decodes per number, its bytes
        // per second growing with the element size (int16 fields decode at about 700 MB/s);
        // it encodes at about the same bytes per second whatever the size: level 6 at 0.24
        // of shuffle+zstd:3's speed on 8-byte floats and 0.20-0.25 on 2-byte integers,
        // against 0.30-0.31 on 4-byte floats (bench/results/calibrate_speeds.md), where
        // scaled by the size it was declared 2.6x too fast on 8-byte floats.
        let es = self.dtype.size();
        let per_number = es as f64 / 4.0;
        let encode_by_size = match es {
            2 => 0.8,
            8 => 0.775,
            _ => per_number,
        };
        // Its own delta search is about a fifth of its encoding: a chain that turns it off (a
        // difference along the last axis first) measured a median 1.28x as fast as plain
        // pcodec, 0.99-1.75x, and one with the difference along another axis (the search
        // still on) 0.99x (bench/results/calibrate_speeds.md, "pco, delta search").
        let search = if self.delta_search { 1.0 } else { PCO_NO_SEARCH_SPEEDUP };
        Speed::new(encode * encode_by_size * search, 1_300.0 * per_number)
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::LOSSLESS
    }

    fn encode(&self, input: &[u8], _shape: &[usize], out: &mut Vec<u8>) -> Result<()> {
        // 8-bit types are rarely worth pcodec, but a chain chosen for a whole store must
        // still work on its byte and char variables.
        let mut config = pco::ChunkConfig::default().with_compression_level(self.level).with_enable_8_bit(true);
        if !self.delta_search {
            config.delta_spec = pco::DeltaSpec::NoOp;
        }
        let es = self.dtype.size();
        if !input.len().is_multiple_of(es) {
            return Err(CodecError::Encode { codec: "pco", detail: "input is not whole elements".into() });
        }
        macro_rules! enc {
            ($t:ty) => {{
                match bytemuck::try_cast_slice::<u8, $t>(input) {
                    Ok(values) if cfg!(target_endian = "little") => pco::standalone::simple_compress(values, &config),
                    _ => {
                        let values: Vec<$t> = input
                            .chunks_exact(es)
                            .map(|c| <$t>::from_le_bytes(c.try_into().unwrap_or_default()))
                            .collect();
                        pco::standalone::simple_compress(&values, &config)
                    }
                }
            }};
        }
        *out =
            pco_dispatch!(self.dtype, enc).map_err(|e| CodecError::Encode { codec: "pco", detail: e.to_string() })?;
        Ok(())
    }

    fn decode(&self, input: &[u8], decoded_len: usize, _shape: &[usize], out: &mut Vec<u8>) -> Result<()> {
        let corrupt = |detail: String| CodecError::Corrupt { codec: "pco", detail };
        let es = self.dtype.size();
        if !decoded_len.is_multiple_of(es) {
            return Err(corrupt(format!("{decoded_len} bytes is not whole elements of {es}")));
        }
        out.clear();
        out.resize(decoded_len, 0);
        macro_rules! dec {
            ($t:ty) => {{
                let n = decoded_len / es;
                let check = |progress: pco::Progress| {
                    if progress.n_processed != n || !progress.finished {
                        return Err(corrupt(format!("decoded {} elements, {n} expected", progress.n_processed)));
                    }
                    Ok(())
                };
                // Straight into the output when its bytes can be viewed as the element type
                // (always on little-endian machines with the allocator's usual alignment):
                // copying element by element cost a quarter of the decode.
                match bytemuck::try_cast_slice_mut::<u8, $t>(&mut out[..]) {
                    Ok(values) if cfg!(target_endian = "little") => check(
                        pco::standalone::simple_decompress_into(input, values).map_err(|e| corrupt(e.to_string()))?,
                    )?,
                    _ => {
                        let mut values = vec![<$t>::default(); n];
                        check(
                            pco::standalone::simple_decompress_into(input, &mut values)
                                .map_err(|e| corrupt(e.to_string()))?,
                        )?;
                        for (dst, v) in out.chunks_exact_mut(es).zip(values) {
                            dst.copy_from_slice(&v.to_le_bytes());
                        }
                    }
                }
            }};
        }
        pco_dispatch!(self.dtype, dec);
        Ok(())
    }
}

/// Byte columns (PStore's bwc, ISOBAR): byte `b` of every element forms column `b`; each
/// column is compressed with zstd on its own and kept only if that saves at least
/// `1 - RAW_THRESHOLD` of it, otherwise stored raw, so the near-random low mantissa bytes of
/// floats cost a copy, not a decompression.
///
/// Stream: `u8` column count C (the element size, plus one column for a tail of
/// `len % element_size` bytes if any), then C headers of `u8` mode (0 raw, 1 zstd) and
/// `u32` stored length, then the columns' bytes in order.
#[derive(Debug, Clone, Copy)]
pub struct ByteColumnsBackend {
    pub level: i32,
    pub element_size: usize,
}

impl ByteColumnsBackend {
    /// A column is stored raw unless zstd makes it smaller than this fraction of itself.
    pub const RAW_THRESHOLD: f64 = 0.95;
}

impl Backend for ByteColumnsBackend {
    fn spec(&self) -> CodecSpec {
        CodecSpec::new("bytecols").with("level", self.level)
    }

    fn speed(&self) -> Speed {
        // zstd on each byte column, one column at a time: level 4 takes about twice level 3's
        // time on float columns (a median 0.55 of its speed, bench/results/calibrate_speeds.md)
        // where on whole shuffled blocks the two run about as fast.
        let zstd = if self.level == 4 { 0.55 * zstd_encode_mb_s(3) } else { zstd_encode_mb_s(self.level) };
        Speed::new(0.7 * zstd, 3_000.0)
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::LOSSLESS
    }

    fn encode(&self, input: &[u8], _shape: &[usize], out: &mut Vec<u8>) -> Result<()> {
        let es = self.element_size.max(1);
        let n = input.len() / es;
        // Columns are the planes of a byte shuffle (a tail, if any, is its own column).
        let mut planes = vec![0u8; input.len()];
        crate::shuffle::shuffle(es, input, &mut planes);
        let mut columns: Vec<&[u8]> = (0..es).map(|b| &planes[b * n..(b + 1) * n]).collect();
        if input.len() > n * es {
            columns.push(&planes[n * es..]);
        }
        let mut header = vec![columns.len() as u8];
        let mut body = Vec::new();
        for col in columns {
            let packed = zstd_compress(col, self.level)
                .map_err(|e| CodecError::Encode { codec: "bytecols", detail: e.to_string() })?;
            let (mode, bytes) = if (packed.len() as f64) < Self::RAW_THRESHOLD * col.len() as f64 {
                (1u8, &packed[..])
            } else {
                (0u8, col)
            };
            header.push(mode);
            header.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
            body.extend_from_slice(bytes);
        }
        out.clear();
        out.extend_from_slice(&header);
        out.extend_from_slice(&body);
        Ok(())
    }

    fn decode(&self, input: &[u8], decoded_len: usize, _shape: &[usize], out: &mut Vec<u8>) -> Result<()> {
        let corrupt = |detail: String| CodecError::Corrupt { codec: "bytecols", detail };
        let es = self.element_size.max(1);
        let n = decoded_len / es;
        let tail = decoded_len - n * es;
        let expected_cols = es + usize::from(tail > 0);
        let count = *input.first().ok_or_else(|| corrupt("empty stream".into()))? as usize;
        if count != expected_cols {
            return Err(corrupt(format!("{count} columns, {expected_cols} expected")));
        }
        let header_len = 1 + 5 * count;
        if input.len() < header_len {
            return Err(corrupt("truncated header".into()));
        }
        // Columns are decoded into the planes of a byte shuffle, then unshuffled at once.
        let mut planes = vec![0u8; decoded_len];
        let mut pos = header_len;
        for c in 0..count {
            let h = &input[1 + 5 * c..1 + 5 * c + 5];
            let stored = u32::from_le_bytes([h[1], h[2], h[3], h[4]]) as usize;
            let bytes = input
                .get(pos..pos.checked_add(stored).ok_or_else(|| corrupt("length overflow".into()))?)
                .ok_or_else(|| corrupt(format!("column {c} runs past the end")))?;
            pos += stored;
            let (start, want) = if c < es { (c * n, n) } else { (n * es, tail) };
            let dst = &mut planes[start..start + want];
            match h[0] {
                0 if stored == want => dst.copy_from_slice(bytes),
                1 => zstd_decompress_exact(bytes, dst).map_err(|e| corrupt(format!("column {c}: {e}")))?,
                mode => return Err(corrupt(format!("column {c}: bad mode {mode} or length {stored}"))),
            }
        }
        if pos != input.len() {
            return Err(corrupt(format!("{} trailing bytes", input.len() - pos)));
        }
        out.clear();
        out.resize(decoded_len, 0);
        crate::shuffle::unshuffle(es, &planes, out);
        Ok(())
    }
}
