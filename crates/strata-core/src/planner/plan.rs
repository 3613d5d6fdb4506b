//! A query's plan, slab by slab, and its EXPLAIN text.

use super::cost::Work;
use crate::query::Method;
use serde::Serialize;
use std::fmt;

/// The plan for one slab: both methods' work and time, and the choice.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SlabPlan {
    /// Position of the slab in the manifest.
    pub slab: usize,
    pub subchunks: u64,
    /// Estimated elements selected.
    pub selected: f64,
    pub index: Work,
    pub scan: Work,
    pub index_seconds: f64,
    pub scan_seconds: f64,
    pub choice: Method,
}

impl SlabPlan {
    /// Estimated seconds of this slab by `method`.
    pub fn seconds(&self, method: Method) -> f64 {
        match method {
            Method::Index => self.index_seconds,
            Method::Scan => self.scan_seconds,
        }
    }

    /// Estimated work of this slab by `method`.
    pub fn work(&self, method: Method) -> &Work {
        match method {
            Method::Index => &self.index,
            Method::Scan => &self.scan,
        }
    }
}

/// A query's plan, slab by slab.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QueryPlan {
    pub slabs: Vec<SlabPlan>,
    /// Set when the caller forced a method.
    pub forced: Option<Method>,
}

impl QueryPlan {
    /// The method for the slab at manifest position `slab` (index when it is not planned:
    /// the region does not touch it).
    pub fn method_for(&self, slab: usize) -> Method {
        self.slabs.iter().find(|p| p.slab == slab).map_or(Method::Index, |p| p.choice)
    }

    /// Estimated seconds of the chosen plan.
    pub fn seconds(&self) -> f64 {
        self.slabs.iter().map(|p| p.seconds(p.choice)).sum()
    }

    /// Estimated seconds if every slab used `method`.
    pub fn seconds_with(&self, method: Method) -> f64 {
        self.slabs.iter().map(|p| p.seconds(method)).sum()
    }

    /// Estimated work of the chosen plan.
    pub fn work(&self) -> Work {
        let mut w = Work::default();
        for p in &self.slabs {
            w.add(p.work(p.choice));
        }
        w
    }

    /// Estimated work if every slab used `method`.
    pub fn work_with(&self, method: Method) -> Work {
        let mut w = Work::default();
        for p in &self.slabs {
            w.add(p.work(method));
        }
        w
    }

    /// The method of a plan that runs one throughout (counts and positions; see
    /// `Session::plan`): the forced one, else the first slab's.
    pub fn method(&self) -> Method {
        self.forced.or_else(|| self.slabs.first().map(|s| s.choice)).unwrap_or(Method::Index)
    }

    /// The methods the plan runs, index before scan.
    pub fn methods(&self) -> Vec<Method> {
        let mut m: Vec<Method> = self.slabs.iter().map(|s| s.choice).collect();
        m.sort_by_key(|m| *m == Method::Scan);
        m.dedup();
        m
    }

    pub fn selected(&self) -> f64 {
        self.slabs.iter().map(|p| p.selected).sum()
    }
}

pub(crate) fn human_bytes(n: f64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut x = n;
    let mut u = 0;
    while x >= 1024.0 && u + 1 < UNITS.len() {
        x /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{x:.0} {}", UNITS[0])
    } else {
        format!("{x:.1} {}", UNITS[u])
    }
}

impl fmt::Display for QueryPlan {
    /// EXPLAIN: both methods' estimates per slab, the choice, and the total.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{:>5} {:>10} {:>13}  {:>14} {:>8} {:>10} {:>8}  {:>13} {:>8} {:>10} {:>8}  choice",
            "slab",
            "sub-chunks",
            "est. selected",
            "index: bytes",
            "segments",
            "decoded",
            "est. ms",
            "scan: bytes",
            "segments",
            "decoded",
            "est. ms"
        )?;
        for s in &self.slabs {
            let (i, sc) = (&s.index, &s.scan);
            writeln!(
                f,
                "{:>5} {:>10} {:>13.0}  {:>14} {:>8.0} {:>10.0} {:>8.2}  {:>13} {:>8.0} {:>10.0} {:>8.2}  {}",
                s.slab,
                s.subchunks,
                s.selected,
                human_bytes(i.bytes),
                i.segments,
                i.decoded,
                s.index_seconds * 1e3,
                human_bytes(sc.bytes),
                sc.segments,
                sc.decoded,
                s.scan_seconds * 1e3,
                s.choice.name()
            )?;
        }
        let chosen: Vec<&str> = self.methods().iter().map(|m| m.name()).collect();
        let work: Work = self.work();
        write!(
            f,
            "plan: {}{}, estimated {} read, {:.2} ms",
            if chosen.is_empty() { "nothing to read".to_string() } else { chosen.join("+") },
            if self.forced.is_some() { " (forced)" } else { "" },
            human_bytes(work.bytes),
            self.seconds() * 1e3
        )
    }
}
