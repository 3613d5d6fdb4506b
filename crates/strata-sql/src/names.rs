//! Column names as a user types them. SQL folds unquoted identifiers to lower case, but
//! model variables are named in capitals (WRF's `T2`, CESM's `TREFHT`): `WHERE T2 > 300`
//! looked for `t2` and failed. An unquoted identifier that names a column only in another
//! case is taken as that column, as DuckDB takes it; one that matches several columns in
//! different cases is left to the usual folding, and the error names the candidates.

use datafusion::sql::sqlparser::ast::{visit_expressions_mut, Expr, Ident};
use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::parser::Parser;
use std::collections::HashMap;
use std::ops::ControlFlow;

/// The columns of a session's tables, by their lower-case form.
#[derive(Debug, Default)]
pub(crate) struct Columns {
    /// The one spelling with that lower-case form; None when several differ in case.
    by_folded: HashMap<String, Option<String>>,
    /// Whether any column is spelled otherwise than folded: if none is, no query needs
    /// resolving, and its text is not parsed here before DataFusion parses it.
    cased: bool,
}

impl Columns {
    pub fn add(&mut self, name: &str) {
        let folded = name.to_lowercase();
        match self.by_folded.get(&folded) {
            Some(Some(seen)) if seen != name => {
                self.by_folded.insert(folded, None);
            }
            Some(_) => {}
            None => {
                self.cased |= folded != name;
                self.by_folded.insert(folded, Some(name.to_string()));
            }
        }
    }

    /// The spelling an unquoted `ident` stands for, when folding it would miss it.
    fn spelling(&self, ident: &Ident) -> Option<&str> {
        if ident.quote_style.is_some() {
            return None;
        }
        let folded = ident.value.to_lowercase();
        match self.by_folded.get(&folded) {
            Some(Some(exact)) if *exact != folded => Some(exact),
            _ => None,
        }
    }

    /// `sql` with each such identifier quoted as the column is spelled (in a compound name,
    /// the last part: the column, not its table). The text itself when nothing changes or
    /// it does not parse (DataFusion then reports the error).
    pub fn resolve(&self, sql: &str) -> String {
        if !self.cased {
            return sql.to_string();
        }
        let Ok(mut statements) = Parser::parse_sql(&GenericDialect {}, sql) else { return sql.to_string() };
        let mut changed = false;
        let mut fix = |ident: &mut Ident| {
            if let Some(exact) = self.spelling(ident) {
                *ident = Ident::with_quote('"', exact);
                changed = true;
            }
        };
        let _ = visit_expressions_mut(&mut statements, |e| {
            match e {
                Expr::Identifier(ident) => fix(ident),
                Expr::CompoundIdentifier(parts) => {
                    if let Some(last) = parts.last_mut() {
                        fix(last)
                    }
                }
                _ => {}
            }
            ControlFlow::<()>::Continue(())
        });
        if !changed {
            return sql.to_string();
        }
        statements.iter().map(|s| s.to_string()).collect::<Vec<_>>().join("; ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn columns(names: &[&str]) -> Columns {
        let mut c = Columns::default();
        for n in names {
            c.add(n);
        }
        c
    }

    #[test]
    fn capitalised_columns_are_found_unquoted() {
        let c = columns(&["Time", "T2", "lat", "sst", "U", "u"]);
        let got = c.resolve("SELECT Time, max(T2) AS hot FROM wrf WHERE T2 > 300 AND w.t2 < 400 GROUP BY Time");
        assert_eq!(
            got,
            "SELECT \"Time\", max(\"T2\") AS hot FROM wrf WHERE \"T2\" > 300 AND w.\"T2\" < 400 GROUP BY \"Time\""
        );
        // Lower-case names, quoted names and functions are left as written.
        for same in ["SELECT sst, lat FROM ersst WHERE sst > 28", "SELECT \"t2\" FROM x", "SELECT COUNT(*) FROM x"] {
            assert_eq!(c.resolve(same), same);
        }
        // `U` and `u` both exist: folding decides, as without this.
        assert_eq!(c.resolve("SELECT U FROM x"), "SELECT U FROM x");
        // Text that does not parse is left for DataFusion to report.
        assert_eq!(c.resolve("SELEC T2 FRM"), "SELEC T2 FRM");
    }

    #[test]
    fn lower_case_columns_leave_every_query_as_written() {
        let c = columns(&["time", "lat", "sst"]);
        assert!(!c.cased);
        for same in ["SELECT SST, Lat FROM ersst WHERE SST > 28", "SELEC T2 FRM"] {
            assert_eq!(c.resolve(same), same);
        }
        assert!(columns(&["time", "T2"]).cased);
    }
}
