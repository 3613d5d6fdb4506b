//! The tables of a store: one per group of numeric variables on the same dimensions, with a
//! column per dimension (its 1-D coordinate, CF times as timestamps, or the index when the
//! dimension has no coordinate) and a column per variable (NULL where the value is NaN or a
//! fill value).

use crate::columns::{Aux, Column, Coord, CoordValues, TableInner};
pub use crate::columns::{AuxValues, Group, Planning};
use crate::exec::{ScanRequest, StrataScan};
use crate::pushdown::{self, Pushdown};
use crate::unpack::Unpack;
use async_trait::async_trait;
use datafusion::arrow::array::{ArrayRef, Int64Array, StringArray, TimestampMicrosecondArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::catalog::{Session, TableProvider};
use datafusion::common::Result as DfResult;
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown, TableType};
use datafusion::physical_plan::ExecutionPlan;
use std::sync::Arc;
use strata_core::area::{self, Area, CoordTest};
use strata_core::cftime::TimeUnits;
use strata_core::query::CmpOp;
use strata_core::{DType, DimSelection, Error, Result, StoreReader};

/// The variable groups of a store, the one named after the store first: among the groups
/// along the record dimension with a data variable (auxiliary ones — named by another
/// variable's `coordinates`, `bounds` or `cell_measures` — are not data), if any, the one
/// holding the most data (data variables times elements), then the one with most data
/// variables, then with most variables. A model's output puts its fields along time and
/// its grid and metadata beside them: counted by variables, CESM's table was its scalar
/// time series (`co2vmr`, `date`, ...) and ROMS's its grid metrics, not `PRECC` or `temp`.
pub fn groups(reader: &StoreReader) -> Vec<Group> {
    let m = reader.manifest();
    let auxiliary: std::collections::HashSet<&str> = m
        .variables
        .iter()
        .flat_map(|v| {
            ["coordinates", "bounds", "cell_measures"]
                .into_iter()
                .filter_map(move |a| v.string_attr(a))
                .flat_map(str::split_whitespace)
                .filter(|w| !w.ends_with(':'))
        })
        .collect();
    let mut out: Vec<Group> = Vec::new();
    for v in &m.variables {
        if v.is_coordinate() || v.chunking.is_none() || v.dims.is_empty() || v.dtype == DType::Char {
            continue;
        }
        match out.iter_mut().find(|g| g.dims == v.dims) {
            Some(g) => g.variables.push(v.name.clone()),
            None => out.push(Group { dims: v.dims.clone(), shape: m.shape(v), variables: vec![v.name.clone()] }),
        }
    }
    let record = m.record_dim.as_deref();
    out.sort_by_key(|g| {
        let data = g.variables.iter().filter(|v| !auxiliary.contains(v.as_str())).count();
        let along_records = data > 0 && record.is_some_and(|r| g.dims.first().map(String::as_str) == Some(r));
        let elements = g.shape.iter().map(|&n| u128::from(n)).product::<u128>();
        (
            std::cmp::Reverse(along_records),
            std::cmp::Reverse(data as u128 * elements),
            std::cmp::Reverse(data),
            std::cmp::Reverse(g.variables.len()),
        )
    });
    out
}

/// The Arrow type of a numeric element type (None for text).
pub fn arrow_type(dtype: DType) -> Option<DataType> {
    Some(match dtype {
        DType::I8 => DataType::Int8,
        DType::U8 => DataType::UInt8,
        DType::I16 => DataType::Int16,
        DType::U16 => DataType::UInt16,
        DType::I32 => DataType::Int32,
        DType::U32 => DataType::UInt32,
        DType::I64 => DataType::Int64,
        DType::U64 => DataType::UInt64,
        DType::F32 => DataType::Float32,
        DType::F64 => DataType::Float64,
        DType::Char | DType::String => return None,
    })
}

/// The column of dimension `dim` (length `len`): its 1-D coordinate's values, CF times as
/// timestamps (standard calendars), text labels as strings, or the index when there is no
/// coordinate. SQL's tables and the server's points both take their dimension columns from
/// here.
pub fn coordinate_column(reader: &StoreReader, dim: &str, len: u64) -> Result<(Field, ArrayRef)> {
    let c = read_coord(reader, dim, len)?;
    Ok((coord_field(dim, &c), c.array))
}

/// The field of a dimension's column (nullable: SQL's columns all are), naming the calendar
/// of a time column whose timestamps are the calendar's labels.
fn coord_field(dim: &str, c: &Coord) -> Field {
    let field = Field::new(dim, c.array.data_type().clone(), true);
    match &c.calendar {
        Some(cal) => field.with_metadata([("calendar".to_string(), cal.clone())].into()),
        None => field,
    }
}

fn read_coord(reader: &StoreReader, dim: &str, len: u64) -> Result<Coord> {
    let m = reader.manifest();
    if let Some(labels) = m.coordinate(dim).and_then(|v| v.inline_strings.as_ref()).filter(|l| l.len() as u64 == len) {
        let array: ArrayRef = Arc::new(StringArray::from_iter_values(labels));
        return Ok(Coord { values: CoordValues::Text, array, calendar: None });
    }
    let Some(var) = m.coordinate(dim).filter(|v| v.chunking.is_some() && arrow_type(v.dtype).is_some()) else {
        let array: ArrayRef = Arc::new(Int64Array::from_iter_values(0..len as i64));
        return Ok(Coord { values: CoordValues::Index, array, calendar: None });
    };
    let raw = reader.read_whole(dim)?;
    let values = var.dtype.to_f64s(&raw);
    // CF times as timestamps: the instants where the dates are all timestamps' (proleptic
    // Gregorian), else the calendar's labels (a `noleap` model year, as `to_datetimeindex`
    // gives it: what a user reads and compares with '1920-03-01'), the calendar named in the
    // field's metadata; numeric when some date has no label (30 February of `360_day`).
    let time = var.string_attr("units").and_then(|u| TimeUnits::parse(u, var.string_attr("calendar")).ok());
    if let Some(t) = time {
        let (micros, calendar) = match t.all_unix_micros(&values) {
            Some(m) => (Some(m), None),
            // Labels differ from instants in the standard calendar too, before 1582.
            None => (t.all_label_micros(&values), Some(var.string_attr("calendar").unwrap_or("standard").to_string())),
        };
        if let Some(micros) = micros {
            let array: ArrayRef = Arc::new(TimestampMicrosecondArray::from(micros.clone()));
            return Ok(Coord { values: CoordValues::Time(micros), array, calendar });
        }
    }
    let array = crate::exec::column_array(var.dtype, raw, Some(&[]))?;
    Ok(Coord { values: CoordValues::Numeric(values), array, calendar: None })
}

impl TableInner {
    /// The values of the auxiliary column `aux[k]`, read on first use.
    pub(crate) fn aux_values(&self, k: usize) -> Result<&AuxValues> {
        let aux = self.aux.get(k).ok_or_else(|| Error::InvalidArgument(format!("no auxiliary column {k}")))?;
        if let Some(v) = aux.loaded.get() {
            return Ok(v);
        }
        let values = AuxValues::read(&self.reader, &self.group.dims, &aux.name)?;
        // Two scans reading it at once both get a value; either is the same.
        Ok(aux.loaded.get_or_init(|| values))
    }
}

/// One variable group of a store as a DataFusion table.
#[derive(Debug)]
pub struct StrataTable {
    pub(crate) inner: Arc<TableInner>,
}

impl StrataTable {
    pub fn new(reader: Arc<StoreReader>, group: Group, planning: Arc<Planning>) -> Result<Self> {
        let mut fields = Vec::new();
        let mut coords = Vec::new();
        let mut columns = Vec::new();
        let mut packed = std::collections::HashMap::new();
        for (d, (dim, &len)) in group.dims.iter().zip(&group.shape).enumerate() {
            let c = read_coord(&reader, dim, len)?;
            fields.push(coord_field(dim, &c));
            coords.push(c);
            columns.push(Column::Coord(d));
        }
        for name in &group.variables {
            if group.dims.contains(name) {
                continue;
            }
            let (_, v) = reader.manifest().variable(name)?;
            let Some(t) = arrow_type(v.dtype) else { continue };
            let t = match Unpack::of(reader.manifest(), name)? {
                Some(u) => {
                    packed.insert(name.clone(), u);
                    u.data_type()
                }
                None => t,
            };
            fields.push(Field::new(name, t, true));
            columns.push(Column::Var(name.clone()));
        }
        // The auxiliary coordinates the variables name, unless already a column (a mesh's
        // coordinates on the variables' own dimension are variables of the group); then any
        // latitude or longitude on some of the group's dimensions, which a mesh's output
        // may name nowhere (CESM's `lat(ncol)`, `lon(ncol)` beside `PRECC(time, ncol)`).
        let m = reader.manifest();
        let mut named: Vec<String> = Vec::new();
        for name in &group.variables {
            let (_, v) = m.variable(name)?;
            named.extend(area::auxiliary_coordinates(m, v));
        }
        named.extend(
            m.variables
                .iter()
                .filter(|c| area::is_latitude(c) || area::longitude_turn(c).is_some())
                .filter(|c| c.dims.len() < group.dims.len() && area::is_auxiliary(m, &group.dims, &c.name))
                .map(|c| c.name.clone()),
        );
        let mut aux = Vec::new();
        for c in named {
            if fields.iter().any(|f| f.name() == &c) {
                continue;
            }
            let (_, cv) = m.variable(&c)?;
            let Some(t) = arrow_type(cv.dtype) else { continue };
            fields.push(Field::new(&c, t, true));
            columns.push(Column::Aux(aux.len()));
            aux.push(Aux { name: c, loaded: std::sync::OnceLock::new() });
        }
        let schema = Arc::new(Schema::new(fields));
        Ok(StrataTable {
            inner: Arc::new(TableInner { reader, group, coords, aux, columns, schema, planning, packed }),
        })
    }
}

impl StrataTable {
    /// The area the auxiliary columns' tests select, with `region` narrowed to it; None
    /// without tests, or when every element of the narrowed region is in it.
    fn area(&self, tests: &[(usize, CmpOp, f64)], region: &mut [DimSelection]) -> Result<Option<Area>> {
        if tests.is_empty() {
            return Ok(None);
        }
        let inner = &self.inner;
        let mut pairs = Vec::with_capacity(tests.len());
        for &(k, op, v) in tests {
            pairs.push((&inner.aux_values(k)?.coord, CoordTest::Stored(op, v)));
        }
        let area = Area::new(&inner.group.shape, &pairs)?;
        Ok(area.narrow(region)?.then_some(area))
    }
}

#[async_trait]
impl TableProvider for StrataTable {
    fn schema(&self) -> SchemaRef {
        self.inner.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    fn supports_filters_pushdown(&self, filters: &[&Expr]) -> DfResult<Vec<TableProviderFilterPushDown>> {
        Ok(filters
            .iter()
            .map(|f| match pushdown::classify(&self.inner, f) {
                Some(Pushdown { exact: true, .. }) => TableProviderFilterPushDown::Exact,
                Some(_) => TableProviderFilterPushDown::Inexact,
                None => TableProviderFilterPushDown::Unsupported,
            })
            .collect())
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let inner = &self.inner;
        let nd = inner.group.dims.len();
        let mut region: Vec<(u64, u64)> = inner.group.shape.iter().map(|&n| (0, n)).collect();
        let mut constraints = Vec::new();
        let mut tests = Vec::new();
        for f in filters {
            let Some(p) = pushdown::classify(inner, f) else { continue };
            for (d, lo, hi) in p.ranges {
                region[d].0 = region[d].0.max(lo);
                region[d].1 = region[d].1.min(hi);
            }
            tests.extend(p.area);
            if let Some(pred) = p.predicate {
                constraints.push(pred);
            }
        }
        let predicate = match constraints.len() {
            0 => None,
            1 => constraints.pop(),
            _ => Some(strata_core::query::Predicate::And { args: constraints }),
        };
        let columns: Vec<Column> = match projection {
            Some(p) => p.iter().map(|&i| inner.columns[i].clone()).collect(),
            None => inner.columns.clone(),
        };
        let schema = match projection {
            Some(p) => Arc::new(inner.schema.project(p)?),
            None => inner.schema.clone(),
        };
        let mut region: Vec<DimSelection> = (0..nd)
            .map(|d| {
                let (lo, hi) = region[d];
                DimSelection { start: lo.min(hi), stop: hi, step: 1 }
            })
            .collect();
        let area = self.area(&tests, &mut region).map_err(crate::to_df)?;
        let request =
            ScanRequest::new(inner.clone(), region, predicate, area, columns, schema, limit).map_err(crate::to_df)?;
        let partitions = state.config().target_partitions().max(1);
        Ok(Arc::new(StrataScan::try_new(request, partitions).map_err(crate::to_df)?))
    }
}

/// The error for a store with no numeric variable on any dimension.
pub(crate) fn no_tables(path: &str) -> Error {
    Error::InvalidArgument(format!("store '{path}' has no numeric variables with dimensions: nothing to query"))
}
