"""Value queries (layout level V) against full scans, DuckDB over Parquet and python-blosc2.

Inputs: ERSST ``sst`` (f32, 684x89x180, land as fill values) and ERSST x4 (the same field
four times along time, 175 MB: a larger input built from it). For each, the 99th and 90th
percentiles of the valid values give constraints ``sst > q`` selecting 1% and 10% of the
points. Region-only queries (the count, and the positions) are timed, warm (index files
loaded, data in the page cache), the best time of runs taking turns in a rotating order
(``common.interleaved``: 15 turns when the slowest takes under a second, a run under 0.1 s
repeated within a turn until it has taken 0.1 s), on:

- strata, the store written with ``layout="V-M-S"`` (16 equal-frequency bins), ``Dataset.query``;
- a NumPy full scan of the same store: read the whole variable, then ``np.count_nonzero`` /
  ``np.nonzero`` of the constraint; and the same scan of a store without V (``S``);
- DuckDB over a Parquet file of the flattened grid (one row per valid point: time, lat,
  lon, sst; zstd), ``SELECT count(*)`` / ``SELECT time, lat, lon ... WHERE sst > q``;
- python-blosc2 lazy expressions on an NDArray (fill as NaN): ``(a > q).sum()`` and
  ``np.nonzero((a > q)[:])``.

Every tool's answer is checked against NumPy. Also: index size as % of raw, and a layout x
access table (MLOC's Table VII): each layout order against a region read, a value query
and a reduced-precision read.

    python bench/bench_values.py     (release build: make build-release)
"""

from __future__ import annotations

import json
import time

import blosc2
import duckdb
import netCDF4
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from common import DATA, WORK, best, dir_size, fresh, git_rev, interleaved, machine

import strata

FILL = -999.0


def inputs():
    with netCDF4.Dataset(DATA / "ersst_v3b_1960-2016_concat.nc") as nc:
        nc.set_auto_maskandscale(False)
        sst = np.asarray(nc["sst"][...])
    yield "ERSST sst", sst
    yield "ERSST x4", np.concatenate([sst] * 4)


def write_store(path, arr, layout, **kw):
    fresh(path)
    strata.write_arrays(
        path,
        {"sst": (("time", "lat", "lon"), arr, {"_FillValue": np.float32(FILL)})},
        record_dim="time",
        layout=layout,
        codec="zstd:3" if "M" in layout else "shuffle+zstd:3",
        **kw,
    )
    return path


def index_bytes(path) -> int:
    return dir_size(path / "index")


def value_queries(label, arr):
    rows = []
    valid = arr != FILL
    vals = arr[valid]
    v_store = write_store(WORK / "val_v.strata", arr, "V-M-S", bins=16)
    s_store = write_store(WORK / "val_s.strata", arr, "S")
    ds_v = strata.open(v_store, cache_bytes=0)
    ds_s = strata.open(s_store, cache_bytes=0)
    ds_v.query("sst > 0", output="count")  # loads the index files

    parquet = fresh(WORK / "val.parquet")
    t_idx, la_idx, lo_idx = np.nonzero(valid)
    table = pa.table({"time": t_idx.astype("i4"), "lat": la_idx.astype("i2"), "lon": lo_idx.astype("i2"), "sst": vals})
    pq.write_table(table, parquet, compression="zstd")
    con = duckdb.connect()
    con.execute("SET threads TO 2")

    b2 = blosc2.asarray(np.where(valid, arr, np.nan).astype("f4"), urlpath=None)
    raw = arr.nbytes
    for selectivity, pct in (("1%", 99), ("10%", 90)):
        q = float(np.percentile(vals, pct))
        ref = valid & (arr > q)
        ref_count = int(ref.sum())
        ref_pos = np.nonzero(ref)
        where = f"sst > {q!r}"

        def strata_count(where=where):
            return ds_v.query(where, output="count")

        def strata_pos(where=where):
            return ds_v.query(where, output="positions")

        def scan(ds, q=q, positions=False):
            a = ds["sst"][...]
            m = (a != FILL) & (a > q)
            return np.nonzero(m) if positions else int(np.count_nonzero(m))

        def duck(q=q, positions=False):
            # con.sql, not con.execute: DuckDB 2.0's DB-API result fetched the rows 1.6x slower.
            if positions:
                return con.sql(f"SELECT time, lat, lon FROM '{parquet}' WHERE sst > {q!r}").fetchnumpy()
            return con.sql(f"SELECT count(*) FROM '{parquet}' WHERE sst > {q!r}").fetchall()[0][0]

        def blosc(q=q, positions=False):
            e = b2 > q
            return np.nonzero(e[:]) if positions else int(e.sum())

        tools = [
            ("strata V-M-S query", lambda: strata_count(), lambda: strata_pos()),
            ("NumPy scan of the same store", lambda: scan(ds_v), lambda: scan(ds_v, positions=True)),
            ("NumPy scan of an S store", lambda: scan(ds_s), lambda: scan(ds_s, positions=True)),
            ("DuckDB over Parquet", lambda: duck(), lambda: duck(positions=True)),
            ("python-blosc2 lazy expr", lambda: blosc(), lambda: blosc(positions=True)),
        ]
        runs = {}
        for name, count_fn, pos_fn in tools:
            runs[(name, "count")] = count_fn
            runs[(name, "positions")] = pos_fn
        times, answers = interleaved(runs)
        timings = {}
        for name, _, _ in tools:
            n, pos = answers[(name, "count")], answers[(name, "positions")]
            assert n == ref_count, (name, n, ref_count)
            if isinstance(pos, dict):  # DuckDB: rows in any order
                got = np.sort(np.ravel_multi_index((pos["time"], pos["lat"], pos["lon"]), arr.shape))
                assert np.array_equal(got, np.ravel_multi_index(ref_pos, arr.shape)), name
            else:
                assert all(np.array_equal(a, b) for a, b in zip(pos, ref_pos, strict=True)), name
            timings[name] = (times[(name, "count")], times[(name, "positions")])
        _, stats = ds_v.query(where, output="count", with_stats=True)
        base = timings["strata V-M-S query"]
        for name, (tc, tp) in timings.items():
            rows.append(
                {
                    "input": label,
                    "raw_mb": raw / 1e6,
                    "selectivity": selectivity,
                    "points": ref_count,
                    "tool": name,
                    "count_ms": tc * 1e3,
                    "positions_ms": tp * 1e3,
                    "count_x": tc / base[0],
                    "positions_x": tp / base[1],
                    "stats": stats,
                }
            )
    sizes = {
        "raw": raw,
        "index_v": index_bytes(v_store),
        "index_s": index_bytes(s_store),
        "data_v": dir_size(v_store / "data"),
        "data_s": dir_size(s_store / "data"),
        "parquet": dir_size(parquet),
    }
    return rows, sizes


def layout_table(arr):
    """Each layout order against three access patterns on ERSST: a region (a 10x20x20 box),
    a value query (positions where sst > its 99th percentile) and a full read at precision 1."""
    valid = arr != FILL
    q = float(np.percentile(arr[valid], 99))
    rows = []
    for layout in ["S", "S-M", "M-S", "S-V", "V-S", "S-M-V", "S-V-M", "M-S-V", "M-V-S", "V-S-M", "V-M-S"]:
        path = write_store(WORK / "val_layout.strata", arr, layout, **({"bins": 16} if "V" in layout else {}))
        ds = strata.open(path, cache_bytes=0)
        ds.query("sst > 0", output="count")
        v = ds["sst"]
        t_region, _ = best(lambda v=v: v[300:310, 30:50, 60:80])
        t_value, _ = best(lambda ds=ds: ds.query(f"sst > {q!r}", output="positions"))
        p = v.at_precision(1) if "M" in layout else v
        t_prec, _ = best(lambda p=p: p[...], repeat=3)
        rows.append(
            {
                "layout": layout,
                "region_ms": t_region * 1e3,
                "value_ms": t_value * 1e3,
                "precision1_ms": t_prec * 1e3,
                "stored_mb": dir_size(path / "data") / 1e6,
                "index_pct": 100 * index_bytes(path) / arr.nbytes,
            }
        )
    return rows


def main() -> None:
    WORK.mkdir(parents=True, exist_ok=True)
    all_rows, all_sizes, layout_rows = [], {}, []
    for label, arr in inputs():
        rows, sizes = value_queries(label, arr)
        all_rows += rows
        all_sizes[label] = sizes
        if label == "ERSST sst":
            layout_rows = layout_table(arr)
    (WORK.parent / "results").mkdir(exist_ok=True)
    out = WORK.parent / "results" / "values"
    out.with_suffix(".json").write_text(json.dumps({"queries": all_rows, "sizes": all_sizes, "layouts": layout_rows}))
    lines = [
        "# Value queries (layout level V)",
        "",
        "Command: `python bench/bench_values.py` (release build: `make build-release` first)  ",
        f"Machine: {machine()}  ",
        f"Commit: {git_rev()}, {time.strftime('%Y-%m-%d')}",
        "",
        "Region-only queries `sst > q` with q the 99th / 90th percentile of the valid values (1% / 10% of "
        "the points), warm (index loaded, files in the page cache), best of turns in a rotating order (a run "
        "under 0.1 s repeated within a turn until 0.1 s; `common.interleaved`), both cores, decoded-segment "
        "cache off. `count` returns the number of points, `positions` the index arrays (np.nonzero form; "
        "DuckDB returns the rows). Every answer is checked against NumPy. x = time / strata's time "
        "(higher: strata faster). strata store: `layout='V-M-S'`, 16 equal-frequency bins per slab, "
        "zstd:3 per byte group.",
        "",
        "| input | raw MB | selectivity | points | tool | count ms | x | positions ms | x |",
        "|---|---:|---:|---:|---|---:|---:|---:|---:|",
    ]
    for r in all_rows:
        lines.append(
            f"| {r['input']} | {r['raw_mb']:.0f} | {r['selectivity']} | {r['points']} | {r['tool']} | "
            f"{r['count_ms']:.1f} | {r['count_x']:.1f} | {r['positions_ms']:.1f} | {r['positions_x']:.1f} |"
        )
    lines += [
        "",
        "strata's work per query (sub-chunks touched; segments answered from the index alone, skipped, read):",
        "",
    ]
    seen = set()
    for r in all_rows:
        key = (r["input"], r["selectivity"])
        if key not in seen:
            seen.add(key)
            s = r["stats"]
            lines.append(
                f"- {r['input']} {r['selectivity']}: {s['subchunks']} sub-chunks, {s['full']} full, "
                f"{s['empty']} empty, {s['boundary']} boundary"
            )
    lines += [
        "",
        "## Sizes",
        "",
        "| input | raw MB | V-M-S data MB | V-M-S index MB | index % of raw | S data MB | S index MB | Parquet MB |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for label, s in all_sizes.items():
        lines.append(
            f"| {label} | {s['raw'] / 1e6:.1f} | {s['data_v'] / 1e6:.1f} | {s['index_v'] / 1e6:.2f} | "
            f"{100 * s['index_v'] / s['raw']:.1f} | {s['data_s'] / 1e6:.1f} | {s['index_s'] / 1e6:.2f} | "
            f"{s['parquet'] / 1e6:.1f} |"
        )
    lines += [
        "",
        "## Layout order x access pattern (ERSST sst, like MLOC's Table VII)",
        "",
        "Region: `sst[300:310, 30:50, 60:80]`; value: positions where sst > its 99th percentile; precision 1: "
        "the whole variable at precision level 1 (2 of 4 bytes; layouts without M read everything). "
        "Best of 5 (3 for the full reads), cache off.",
        "",
        "| layout | region ms | value query ms | precision-1 read ms | data MB | index % of raw |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in layout_rows:
        lines.append(
            f"| {r['layout']} | {r['region_ms']:.2f} | {r['value_ms']:.1f} | {r['precision1_ms']:.1f} | "
            f"{r['stored_mb']:.1f} | {r['index_pct']:.1f} |"
        )
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
