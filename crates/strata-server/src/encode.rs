//! Record batches onto the wire: Arrow IPC stream, CSV or a JSON array of rows, each
//! written piece by piece (what a piece encodes is sent before the next is read).

use crate::ApiError;
use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use bytes::Bytes;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    Arrow,
    Csv,
    Json,
}

impl Format {
    pub fn parse(text: Option<&str>) -> Result<Format, ApiError> {
        match text.unwrap_or("arrow") {
            "arrow" | "arrows" | "ipc" => Ok(Format::Arrow),
            "csv" => Ok(Format::Csv),
            "json" => Ok(Format::Json),
            other => Err(ApiError::bad_request(format!("format must be arrow, csv or json, not '{other}'"))),
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            Format::Arrow => "application/vnd.apache.arrow.stream",
            Format::Csv => "text/csv; charset=utf-8",
            Format::Json => "application/json",
        }
    }
}

pub(crate) enum Encoder {
    Arrow(arrow::ipc::writer::StreamWriter<Vec<u8>>),
    /// CSV has no running writer to drain: each batch gets its own, the first with the header.
    Csv {
        header: bool,
    },
    Json(arrow::json::ArrayWriter<Vec<u8>>),
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
            Format::Csv => Encoder::Csv { header: true },
            Format::Json => Encoder::Json(arrow::json::ArrayWriter::new(Vec::new())),
        })
    }

    fn buffer(&mut self) -> Vec<u8> {
        match self {
            Encoder::Arrow(w) => std::mem::take(w.get_mut()),
            Encoder::Csv { .. } => Vec::new(),
            Encoder::Json(w) => std::mem::take(w.get_mut()),
        }
    }

    /// The bytes of `batch` (with whatever the format puts first, on the first call).
    pub fn write(&mut self, batch: &RecordBatch) -> Result<Bytes, ApiError> {
        match self {
            Encoder::Arrow(w) => w.write(batch).map_err(failed)?,
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
            Encoder::Csv { .. } => {}
            Encoder::Json(w) => w.finish().map_err(failed)?,
        }
        Ok(Bytes::from(self.buffer()))
    }
}
