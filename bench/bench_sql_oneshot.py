"""SQL one-shot, as a user types it: ``strata.sql(store, query)`` against
``duckdb.sql("... FROM read_parquet(...)")``, each call opening what it reads afresh.

bench_sql.py measures warm sessions (index loaded, sessions kept). A person at a prompt
does not keep a session: every call here opens the store (manifest, index) or the Parquet
file again, on the stores and Parquet files bench_sql.py builds (ERSST and ERSST x4, V-S,
16 bins). Queries: points (``SELECT time, lat, lon, sst ... WHERE sst > q``) at 1%, 20%, 50%
and 90%, and a count at 1%. Both tools take turns (``common.interleaved``: rotating order,
short calls repeated to 0.1 s); the figure is the median over turns of DuckDB's time over
strata's (above 1: strata faster). Answers are checked against each other (row count, sum
of sst). Files are in the page cache; the first call of each tool is not timed.

    python bench/bench_sql_oneshot.py     # about 3 minutes (release build: make build)
"""

from __future__ import annotations

import json
import statistics

import duckdb
import numpy as np
from bench_sql import FILL, build, inputs
from common import WORK, git_rev, interleaved, machine

import strata

QUERIES = (("points", 0.01), ("points", 0.2), ("points", 0.5), ("points", 0.9), ("count", 0.01))


def main() -> None:
    rows = []
    for label, sst, lat, lon, days in inputs():
        store, parquet = build(label, sst, lat, lon, days)
        vals = sst[sst != FILL]
        for kind, sel in QUERIES:
            q = float(np.quantile(vals, 1 - sel))
            cols = "time, lat, lon, sst" if kind == "points" else "count(*) AS n"
            ours = f"SELECT {cols} FROM ersst WHERE sst > {q!r}"
            theirs = f"SELECT {cols} FROM read_parquet('{parquet}') WHERE sst > {q!r}"
            runs = {
                "strata": lambda ours=ours, store=store: strata.sql(store, ours, table="ersst"),
                "duckdb": lambda theirs=theirs: duckdb.sql(theirs).to_arrow_table(),
            }
            for fn in runs.values():
                fn()
            turns: dict = {}
            times, answers = interleaved(runs, per_turn=turns)
            a, b = answers["strata"], answers["duckdb"]
            if kind == "points":
                assert a.num_rows == b.num_rows, (label, sel, a.num_rows, b.num_rows)
                s_a = float(np.sum(a.column("sst").to_numpy(), dtype="f8"))
                s_b = float(np.sum(b.column("sst").to_numpy(), dtype="f8"))
                assert abs(s_a - s_b) <= 1e-6 * abs(s_b), (label, sel)
                n = a.num_rows
            else:
                n = a.column(0)[0].as_py()
                assert n == b.column(0)[0].as_py(), (label, sel)
            row = {
                "input": label,
                "query": kind,
                "selectivity": sel,
                "rows": n,
                "strata_s": times["strata"],
                "duckdb_s": times["duckdb"],
                "duckdb_over_strata": statistics.median(
                    d / s for s, d in zip(turns["strata"], turns["duckdb"], strict=True)
                ),
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
    res = WORK.parent / "results"
    (res / "sql_oneshot.json").write_text(
        json.dumps({"machine": machine(), "commit": git_rev(), "rows": rows}, indent=1)
    )
    out = [
        "# SQL one-shot: strata.sql against duckdb.sql over Parquet",
        "",
        "Command: `python bench/bench_sql_oneshot.py`  ",
        f"Machine: {machine()}  ",
        f"Commit: {git_rev()}",
        "",
        "Each call opens the store or the Parquet file afresh (`strata.sql(store, query)`; "
        '`duckdb.sql("... FROM read_parquet(...)")` on DuckDB\'s default connection). Stores and '
        "Parquet as in bench_sql.py (V-S, 16 bins, shuffle+zstd:3; Parquet zstd). Times are best "
        "per tool; `DuckDB / strata` is the median over turns of the paired ratio (above 1: strata faster).",
        "",
        "| input | query | selectivity | rows | strata ms | DuckDB ms | DuckDB / strata |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        out.append(
            f"| {r['input']} | {r['query']} | {r['selectivity']:.0%} | {r['rows']} | {r['strata_s'] * 1e3:.1f} | "
            f"{r['duckdb_s'] * 1e3:.1f} | {r['duckdb_over_strata']:.2f} |"
        )
    out.append("")
    (res / "sql_oneshot.md").write_text("\n".join(out))
    print("\n".join(out))


if __name__ == "__main__":
    main()
