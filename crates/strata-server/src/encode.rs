//! Record batches onto the wire: Arrow IPC stream, Parquet, CSV or a JSON array of rows,
//! each written piece by piece (what a piece encodes is sent before the next is read; a
//! Parquet piece is one row group, the footer comes last).

use crate::ApiError;
use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use bytes::Bytes;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    Arrow,
    Parquet,
    Csv,
    Json,
}

impl Format {
    pub fn parse(text: Option<&str>) -> Result<Format, ApiError> {
        match text.unwrap_or("arrow") {
            "arrow" | "arrows" | "ipc" => Ok(Format::Arrow),
            "parquet" => Ok(Format::Parquet),
            "csv" => Ok(Format::Csv),
            "json" => Ok(Format::Json),
            other => Err(ApiError::bad_request(format!("format must be arrow, parquet, csv or json, not '{other}'"))),
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            Format::Arrow => "application/vnd.apache.arrow.stream",
            Format::Parquet => "application/vnd.apache.parquet",
            Format::Csv => "text/csv; charset=utf-8",
            Format::Json => "application/json",
        }
    }
}

/// A byte sink the Parquet writer writes into and the server drains after each row group.
#[derive(Clone, Default)]
pub(crate) struct Shared(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Shared {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Shared {
    fn take(&self) -> Vec<u8> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

pub(crate) enum Encoder {
    Arrow(arrow::ipc::writer::StreamWriter<Vec<u8>>),
    Parquet(Box<parquet::arrow::ArrowWriter<Shared>>, Shared),
    /// CSV has no running writer to drain: each batch gets its own, the first with the header.
    Csv {
        header: bool,
    },
    Json(arrow::json::ArrayWriter<Vec<u8>>),
}

fn parquet_failed(e: parquet::errors::ParquetError) -> ApiError {
    ApiError::internal(format!("encoding a result as Parquet: {e}"))
}

fn failed(e: arrow::error::ArrowError) -> ApiError {
    ApiError::internal(format!("encoding a result: {e}"))
}

impl Encoder {
    pub fn new(format: Format, schema: &SchemaRef) -> Result<Encoder, ApiError> {
        Ok(match format {
            Format::Arrow => {
                Encoder::Arrow(arrow::ipc::writer::StreamWriter::try_new(Vec::new(), schema).map_err(failed)?)
            }
            Format::Parquet => {
                let sink = Shared::default();
                let props = parquet::file::properties::WriterProperties::builder()
                    .set_compression(parquet::basic::Compression::ZSTD(
                        parquet::basic::ZstdLevel::try_new(1).map_err(parquet_failed)?,
                    ))
                    .build();
                let w = parquet::arrow::ArrowWriter::try_new(sink.clone(), schema.clone(), Some(props))
                    .map_err(parquet_failed)?;
                Encoder::Parquet(Box::new(w), sink)
            }
            Format::Csv => Encoder::Csv { header: true },
            Format::Json => Encoder::Json(arrow::json::ArrayWriter::new(Vec::new())),
        })
    }

    fn buffer(&mut self) -> Vec<u8> {
        match self {
            Encoder::Arrow(w) => std::mem::take(w.get_mut()),
            Encoder::Parquet(_, sink) => sink.take(),
            Encoder::Csv { .. } => Vec::new(),
            Encoder::Json(w) => std::mem::take(w.get_mut()),
        }
    }

    /// The bytes of `batch` (with whatever the format puts first, on the first call).
    pub fn write(&mut self, batch: &RecordBatch) -> Result<Bytes, ApiError> {
        match self {
            Encoder::Arrow(w) => w.write(batch).map_err(failed)?,
            Encoder::Parquet(w, _) => {
                w.write(batch).map_err(parquet_failed)?;
                w.flush().map_err(parquet_failed)?;
            }
            Encoder::Csv { header } => {
                let mut w = arrow::csv::WriterBuilder::new().with_header(*header).build(Vec::new());
                w.write(batch).map_err(failed)?;
                *header = false;
                return Ok(Bytes::from(w.into_inner()));
            }
            Encoder::Json(w) => w.write(batch).map_err(failed)?,
        }
        Ok(Bytes::from(self.buffer()))
    }

    /// What ends the stream (and the schema, for an Arrow stream with no batch).
    pub fn finish(mut self) -> Result<Bytes, ApiError> {
        match &mut self {
            Encoder::Arrow(w) => w.finish().map_err(failed)?,
            Encoder::Parquet(w, _) => {
                w.finish().map_err(parquet_failed)?;
            }
            Encoder::Csv { .. } => {}
            Encoder::Json(w) => w.finish().map_err(failed)?,
        }
        Ok(Bytes::from(self.buffer()))
    }
}
