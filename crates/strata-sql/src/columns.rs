//! What a table holds: its dimension group, its columns, each dimension's coordinate
//! values, and the planning its scans share. The table provider, the scan and the filter
//! pushdown all read these; none of them owns the others.

use datafusion::arrow::array::{ArrayRef, UInt64Array};
use datafusion::arrow::compute::take;
use datafusion::arrow::datatypes::SchemaRef;
use std::sync::{Arc, Mutex, OnceLock};
use strata_core::area::AuxCoord;
use strata_core::query::Method;
use strata_core::session::RunLog;
use strata_core::{Error, Result, StoreReader};

/// How a SQL session's scans choose their method (the engine's session), and what they
/// report.
#[derive(Debug)]
pub struct Planning {
    pub session: Arc<strata_core::Session>,
    /// A method forced for every piece (benchmarks and tests); None lets the model choose.
    pub force: Option<Method>,
    /// Pieces this SQL session ran.
    pub log: Mutex<RunLog>,
}

impl Planning {
    pub fn new(session: Arc<strata_core::Session>, force: Option<Method>) -> Self {
        Planning { session, force, log: Mutex::new(RunLog::default()) }
    }
}

/// What a dimension's column holds.
#[derive(Debug, Clone)]
pub(crate) enum CoordValues {
    /// No coordinate variable: the position along the dimension.
    Index,
    /// A numeric 1-D coordinate, compared as f64.
    Numeric(Vec<f64>),
    /// CF time decoded to microseconds since the epoch.
    Time(Vec<i64>),
    /// Text labels (an ensemble's member names), a string column.
    Text,
}

#[derive(Debug)]
pub(crate) struct Coord {
    pub values: CoordValues,
    /// The column's values along the dimension.
    pub array: ArrayRef,
    /// The CF calendar whose date labels a time column's timestamps carry, when they are
    /// labels rather than instants (see `TimeUnits::label_micros`).
    pub calendar: Option<String>,
}

/// An auxiliary coordinate of the table's variables (2-D lat/lon, a mesh's coordinates,
/// named by their CF `coordinates`): a column whose value at a row is the coordinate's at
/// that row's position. Comparisons with it become the engine's area mask.
#[derive(Debug)]
pub(crate) struct Aux {
    pub name: String,
    /// Read on first use: a query that never names it reads nothing.
    pub loaded: OnceLock<AuxValues>,
}

/// An auxiliary coordinate as a column: SQL's tables and the server's points take theirs
/// from here.
#[derive(Debug)]
pub struct AuxValues {
    /// The values as the engine tests them.
    pub coord: AuxCoord,
    /// The stored values (NULL where missing), row-major over the coordinate's own shape.
    pub array: ArrayRef,
}

impl AuxValues {
    /// Reads `name`, an auxiliary coordinate of variables on `dims`.
    pub fn read(reader: &StoreReader, dims: &[String], name: &str) -> Result<AuxValues> {
        let raw = AuxCoord::read_raw(reader, dims, name)?;
        let coord = AuxCoord::from_raw(reader.manifest(), dims, name, &raw)?;
        let (_, var) = reader.manifest().variable(name)?;
        let array = crate::exec::column_array(var.dtype, raw, Some(&var.missing_values()))?;
        Ok(AuxValues { coord, array })
    }

    /// Its values at the points `flat` (flat indices into the variables' `shape`).
    pub fn at(&self, shape: &[u64], flat: &[u64]) -> Result<ArrayRef> {
        let idx = UInt64Array::from(self.coord.indices(shape, flat)?);
        take(&self.array, &idx, None).map_err(|e| Error::InvalidArgument(format!("building a result batch: {e}")))
    }
}

/// A group of variables sharing dimensions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    pub dims: Vec<String>,
    pub shape: Vec<u64>,
    pub variables: Vec<String>,
}

impl Group {
    /// The group's table name: its dimensions joined by '_'.
    pub fn name(&self) -> String {
        self.dims.join("_")
    }
}

/// A column of a table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Column {
    /// The coordinate of dimension `d`.
    Coord(usize),
    /// A variable.
    Var(String),
    /// The auxiliary coordinate `aux[k]`.
    Aux(usize),
}

#[derive(Debug)]
pub(crate) struct TableInner {
    pub reader: Arc<StoreReader>,
    pub group: Group,
    pub coords: Vec<Coord>,
    pub aux: Vec<Aux>,
    pub columns: Vec<Column>,
    pub schema: SchemaRef,
    pub planning: Arc<Planning>,
    /// The packed variables' unpacking (see [`crate::unpack`]), by name.
    pub packed: std::collections::HashMap<String, crate::unpack::Unpack>,
}
