//! SQL over strata stores through Apache DataFusion.
//!
//! Every group of numeric variables sharing dimensions is a table (see [`table`]): a row per
//! grid point, a column per dimension and per variable. Comparisons on coordinates become
//! index ranges and comparisons on variables become strata value constraints, answered from
//! the index or by a scan as the cost model chooses ([`strata_core::planner`]). Everything
//! else — aggregates, GROUP BY, ORDER BY, LIMIT, joins — is DataFusion's.

mod columns;
mod exec;
pub mod fuzzing;
mod names;
mod plans;
mod pushdown;
pub mod table;
mod unpack;
mod zeros;

pub use exec::column_array;

pub use datafusion;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::error::DataFusionError;
use datafusion::execution::context::SQLOptions;
use datafusion::execution::SendableRecordBatchStream;
use datafusion::prelude::{SessionConfig, SessionContext};
use futures::StreamExt;
use std::sync::Arc;
use strata_core::planner::CostModel;
use strata_core::query::Method;
use strata_core::session::Run;
use strata_core::{Error, ReaderCaches, Result, Session, Store, StoreReader};
use table::{Planning, StrataTable};

pub(crate) fn to_df(e: Error) -> DataFusionError {
    DataFusionError::External(Box::new(e))
}

/// A DataFusion error as a strata error: strata's own errors keep their kind; SQL that
/// does not parse or plan is an invalid argument.
pub fn from_df(e: DataFusionError) -> Error {
    if let DataFusionError::External(inner) = e.find_root() {
        if let Some(err) = inner.downcast_ref::<Error>() {
            return match err {
                Error::Io { path, source } => {
                    Error::Io { path: path.clone(), source: std::io::Error::new(source.kind(), source.to_string()) }
                }
                Error::Corruption(m) => Error::Corruption(m.clone()),
                Error::InvalidArgument(m) => Error::InvalidArgument(m.clone()),
                Error::Compatibility(m) => Error::Compatibility(m.clone()),
                Error::NotFound(m) => Error::NotFound(m.clone()),
                Error::Conflict(m) => Error::Conflict(m.clone()),
            };
        }
    }
    Error::InvalidArgument(format!("SQL: {}", e.find_root()))
}

/// The default table name of a store: its directory's name up to the first '.', made an
/// SQL identifier (`data/ersst.strata` -> `ersst`).
pub fn default_table_name(path: &str) -> String {
    let stem = store_stem(path);
    let mut name: String =
        stem.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '_' }).collect();
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        name.insert(0, 't');
    }
    name
}

/// The name of the store at `path` as its directory has it, up to the first dot.
fn store_stem(path: &str) -> String {
    let base = std::path::Path::new(path.trim_end_matches('/'))
        .file_name()
        .map(|s| s.to_string_lossy().to_string())
        .unwrap_or_default();
    base.split('.').next().unwrap_or_default().to_string()
}

/// The table DataFusion's planner did not find, as the query named it (its message gives
/// the name resolved in the default catalog and schema: `table 'datafusion.public.v' not
/// found`).
fn unknown_table(message: &str) -> Option<&str> {
    let rest = message.split("table '").nth(1)?;
    let (name, after) = rest.split_once('\'')?;
    after.starts_with(" not found").then(|| name.strip_prefix("datafusion.public.").unwrap_or(name))
}

/// Options of a SQL session.
#[derive(Debug, Clone, Default)]
pub struct SqlOptions {
    /// The engine's session whose cost model plans and learns from the scans.
    pub session: Arc<Session>,
    /// Force index or scan for every piece; None: the cost model chooses.
    pub force: Option<Method>,
    /// DataFusion partitions (default: the number of cores).
    pub target_partitions: Option<usize>,
    /// Bytes of decoded sub-chunks each store's reader keeps (default
    /// [`strata_core::cache::DEFAULT_CACHE_BYTES`]; 0 turns the cache off).
    pub cache_bytes: Option<u64>,
    /// Caches the stores' readers share with other readers of the process (a server's);
    /// None: each its own, of `cache_bytes`.
    pub caches: Option<ReaderCaches>,
}

/// A SQL session over one or more stores, with its own runtime.
pub struct SqlSession {
    ctx: SessionContext,
    runtime: Arc<tokio::runtime::Runtime>,
    planning: Arc<Planning>,
    /// Registered tables: (name, its variables comma-separated, all its columns: the
    /// dimensions' too, for the error that names the table a column is in).
    tables: Vec<(String, String, Vec<String>)>,
    columns: names::Columns,
    /// Physical plans of the queries run, by text, to run again.
    pub(crate) plans: plans::Plans,
}

impl std::fmt::Debug for SqlSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqlSession").field("tables", &self.tables).finish()
    }
}

impl SqlSession {
    /// Registers the stores `(path, name)`: the first variable group of each (see
    /// [`table::groups`]) as `name`
    /// (default: [`default_table_name`]), every group also as `name_dim1_dim2...`.
    pub fn open(stores: &[(String, Option<String>)], options: SqlOptions) -> Result<Self> {
        let mut config = SessionConfig::new().with_information_schema(true);
        if let Some(p) = options.target_partitions {
            config = config.with_target_partitions(p.max(1));
        }
        // Dynamic filters (a TopK's or an aggregate's bound, a join's keys) narrow the scans
        // that take them, and strata's do not; an aggregate's would also be carried, stale,
        // into a kept plan run again (see `plans`).
        let optimizer = &mut config.options_mut().optimizer;
        optimizer.enable_dynamic_filter_pushdown = false;
        optimizer.enable_topk_dynamic_filter_pushdown = false;
        optimizer.enable_join_dynamic_filter_pushdown = false;
        optimizer.enable_aggregate_dynamic_filter_pushdown = false;
        let ctx = SessionContext::new_with_config(config);
        ctx.add_analyzer_rule(Arc::new(zeros::SignedZeros));
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(options.target_partitions.unwrap_or(2).clamp(1, 8))
            .thread_name("strata-sql")
            .enable_all()
            .build()
            .map_err(|e| Error::io("tokio runtime", e))?;
        let planning = Arc::new(Planning::new(options.session, options.force));
        let mut tables: Vec<(String, String, Vec<String>)> = Vec::new();
        let mut columns = names::Columns::default();
        for (path, name) in stores {
            let caches = options.caches.clone().unwrap_or_else(|| {
                ReaderCaches::new(options.cache_bytes.unwrap_or(strata_core::cache::DEFAULT_CACHE_BYTES))
            });
            let reader = Arc::new(StoreReader::open_sharing(Store::local(path), None, caches)?);
            let groups = table::groups(&reader);
            if groups.is_empty() {
                return Err(table::no_tables(path));
            }
            let name = name.clone().unwrap_or_else(|| default_table_name(path));
            // The store's own name, quoted as a user writes it (`"sic_SImon_CCCma-CanESM5"`),
            // also names its first table.
            let own = (name == default_table_name(path)).then(|| store_stem(path)).filter(|s| *s != name);
            // Group tables in lower case, as SQL folds a name typed unquoted (a name copied
            // from `--tables`, `ersst_Time_lat` say, was not found); the dimensions' own case
            // only where two groups would fold to one name.
            let suffixes: Vec<String> = groups.iter().map(|g| g.name()).collect();
            let folds = |s: &String| suffixes.iter().filter(|o| o.to_lowercase() == s.to_lowercase()).count() == 1;
            for (i, g) in groups.into_iter().enumerate() {
                let provider = Arc::new(StrataTable::new(reader.clone(), g.clone(), planning.clone())?);
                let fields: Vec<String> = datafusion::catalog::TableProvider::schema(provider.as_ref())
                    .fields()
                    .iter()
                    .map(|f| f.name().clone())
                    .collect();
                fields.iter().for_each(|f| columns.add(f));
                let suffix = &suffixes[i];
                let suffix = if folds(suffix) { suffix.to_lowercase() } else { suffix.clone() };
                let mut names = vec![format!("{name}_{suffix}")];
                if i == 0 {
                    names.insert(0, name.clone());
                    names.extend(own.clone());
                }
                for n in names {
                    if tables.iter().any(|(t, ..)| *t == n) {
                        return Err(Error::InvalidArgument(format!("two tables would be named '{n}'")));
                    }
                    // A name as it is, not parsed (quotes, dots and case kept).
                    let reference = datafusion::common::TableReference::bare(n.as_str());
                    ctx.register_table(reference, provider.clone()).map_err(from_df)?;
                    tables.push((n, g.variables.join(","), fields.clone()));
                }
            }
        }
        Ok(SqlSession { ctx, runtime: Arc::new(runtime), planning, tables, columns, plans: plans::Plans::default() })
    }

    /// Registered tables: (name, its variables comma-separated).
    pub fn tables(&self) -> Vec<(String, String)> {
        self.tables.iter().map(|(n, v, _)| (n.clone(), v.clone())).collect()
    }

    /// Runs a query; its batches stream from the returned reader. Only queries run: DDL
    /// (`CREATE EXTERNAL TABLE`, `DROP`), DML (`INSERT`, `COPY ... TO` a file) and statements
    /// (`SET`, transactions) are refused as invalid arguments, so a session can be handed
    /// text from anyone without touching a file. The physical plan of a query is kept, by
    /// its text, and the same text runs it again without planning (the engine still plans
    /// each run's scans); see `plans` for what is never kept.
    pub fn execute(&self, sql: &str) -> Result<BatchStream> {
        let ctx = self.ctx.clone();
        let plans = &self.plans;
        let read_only = SQLOptions::new().with_allow_ddl(false).with_allow_dml(false).with_allow_statements(false);
        // The text as DataFusion is given it (column names resolved), for the errors too.
        let mut resolved = None;
        let stream = self.runtime.block_on(async {
            if let Some(plan) = plans.get(sql)? {
                return datafusion::physical_plan::execute_stream(plan, ctx.task_ctx());
            }
            let text = resolved.insert(self.columns.resolve(sql));
            let df = ctx.sql_with_options(text, read_only).await?;
            let task = Arc::new(df.task_ctx());
            let logical = df.logical_plan().clone();
            let plan = df.create_physical_plan().await?;
            plans.keep(sql, &logical, &plan);
            datafusion::physical_plan::execute_stream(plan, task)
        });
        let stream = stream.map_err(|e| {
            let text = resolved.unwrap_or_else(|| sql.to_string());
            self.with_quote_hint(self.with_table_hint(from_df(e)), &text)
        })?;
        Ok(BatchStream { schema: stream.schema(), stream, runtime: self.runtime.clone() })
    }

    /// How many queries' plans the session keeps to run again (see [`execute`](Self::execute)).
    pub fn plans_kept(&self) -> usize {
        self.plans.len()
    }

    /// A statement that does not parse and names a table unquoted whose name needs quotes
    /// (a store named `Nordic-4km_...`): the error says how to write it.
    fn with_quote_hint(&self, e: Error, sql: &str) -> Error {
        let Error::InvalidArgument(message) = &e else { return e };
        if !message.contains("ParserError") {
            return e;
        }
        let plain = |c: char| c.is_ascii_alphanumeric() || c == '_';
        let unquoted = self
            .tables
            .iter()
            .map(|(t, ..)| t.as_str())
            .find(|t| !t.chars().all(plain) && sql.match_indices(t).any(|(i, _)| !sql[..i].ends_with('"')));
        let Some(table) = unquoted else { return e };
        let safe = self.tables.iter().map(|(t, ..)| t.as_str()).find(|t| t.chars().all(plain)).unwrap_or("");
        Error::InvalidArgument(format!(
            "{message} (a table name such as {table} is written in double quotes, \"{table}\"; or use {safe})"
        ))
    }

    /// An unknown column that is a column of another table: the error names that table. An
    /// unknown table: the error names the table of a variable so named (`FROM sst`, where
    /// `sst` is a column of table `ersst`), else the tables there are.
    fn with_table_hint(&self, e: Error) -> Error {
        let Error::InvalidArgument(message) = &e else { return e };
        if let Some(table) = unknown_table(message) {
            // SQL folded the name if it was typed unquoted (`FROM T2`): the column may not.
            let column = self
                .tables
                .iter()
                .flat_map(|(.., cols)| cols)
                .find(|c| *c == table)
                .or_else(|| self.tables.iter().flat_map(|(.., cols)| cols).find(|c| c.to_lowercase() == table))
                .map_or(table, String::as_str);
            let (table, homes) = (column, self.homes(column));
            let hint = if homes.is_empty() {
                let names: Vec<&str> = self.tables.iter().map(|(t, ..)| t.as_str()).collect();
                format!("the tables are {}", names.join(", "))
            } else {
                format!("'{table}' is a column of table {}: SELECT {table} FROM {}", homes.join(", "), homes[0])
            };
            return Error::InvalidArgument(format!("{message} ({hint})"));
        }
        let Some(rest) = message.split("No field named ").nth(1) else { return e };
        let name: String = rest
            .trim_start_matches(['"', '`'])
            .chars()
            .take_while(|c| !c.is_whitespace() && !matches!(c, '"' | '`' | ','))
            .collect();
        let name = name.trim_end_matches('.');
        let column = name.rsplit('.').next().unwrap_or(name).trim_matches('"');
        let homes = self.homes(column);
        if homes.is_empty() {
            return e;
        }
        Error::InvalidArgument(format!("{message} ('{column}' is a column of table {})", homes.join(", ")))
    }

    /// The tables that have a column `column`.
    fn homes(&self, column: &str) -> Vec<&str> {
        self.tables.iter().filter(|(.., cols)| cols.iter().any(|c| c == column)).map(|(t, ..)| t.as_str()).collect()
    }

    /// Pieces run after the first `mark` (see [`pieces_run_count`](Self::pieces_run_count);
    /// 0: the most recent [`strata_core::session::RUNS_KEPT`]).
    pub fn pieces_run(&self, mark: u64) -> Vec<Run> {
        self.planning.log.lock().map(|l| l.since(mark)).unwrap_or_default()
    }

    /// How many pieces this session ran.
    pub fn pieces_run_count(&self) -> u64 {
        self.planning.log.lock().map(|l| l.total()).unwrap_or_default()
    }

    /// The cost model with the corrections learned from the queries run.
    pub fn cost_model(&self) -> CostModel {
        self.planning.session.model()
    }
}

/// The batches of a query, pulled one at a time (blocking).
pub struct BatchStream {
    schema: SchemaRef,
    stream: SendableRecordBatchStream,
    runtime: Arc<tokio::runtime::Runtime>,
}

impl std::fmt::Debug for BatchStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BatchStream").field("schema", &self.schema).finish()
    }
}

impl BatchStream {
    pub fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }
}

impl Iterator for BatchStream {
    type Item = Result<RecordBatch>;

    fn next(&mut self) -> Option<Self::Item> {
        let stream = &mut self.stream;
        self.runtime.block_on(stream.next()).map(|r| r.map_err(from_df))
    }
}
