"""Counts through a curvilinear area: the engine's mask pushdown against list-then-filter.

``python bench/bench_area.py`` (a minute; results in ``results/area.md``). CanESM5 ``siconc``
(time, j, i) on a tripolar ocean grid whose ``latitude(j, i)`` is 2-D, imported with layout
``V-S`` (16 equal-frequency bins). For each area (latitude >= 60, latitude <= -60, and a
longitude range across the dateline above 50N) and constraint:

- ``engine``: ``ds.query(where, sel={"latitude": (60, None)}, output="count")``: the area is
  the engine's mask (``strata_core::mask``), ANDed with each sub-chunk's region, so whole bins
  count from the index and sub-chunks outside the area are not read;
- ``list-then-filter``: what ``Dataset.query`` did before the mask reached the engine: the
  positions satisfying the constraint in the area's bounding box, filtered by the mask in
  NumPy (the area built once, outside the timing, as ``Dataset`` keeps the engine's);
- ``numpy``: the whole field read from the NetCDF file with netCDF4, mask and constraint in
  NumPy (the reference every answer is checked against);
- ``sql``: ``SELECT count(*) FROM siconc WHERE latitude >= 60 AND siconc > 15`` on one
  ``SqlSession``: the 2-D latitude is a column of the table and the comparison the same
  engine mask (an OR of longitudes, the dateline case, is filtered by DataFusion);
- ``sql join``: the route SQL had before, the coordinates' table joined on ``(j, i)``.

Ratios are medians of ratios paired by turn (``common.paired_ratio``).
"""

from __future__ import annotations

import json
import re
import sys

import netCDF4
import numpy as np
from common import DATA, WORK, fresh, git_rev, interleaved, machine, paired_ratio

import strata

SOURCE = DATA / "sic_SImon_CCCma-CanESM5_ssp245_r13i1p2f1_2020.nc"
OUT = WORK.parent / "results" / "area"
# (label, sel, constraint, the area in SQL)
CASES = [
    ("latitude >= 60", {"latitude": (60, None)}, "siconc > 15", "latitude >= 60"),
    ("latitude >= 60", {"latitude": (60, None)}, "siconc > 90", "latitude >= 60"),
    ("latitude <= -60", {"latitude": (None, -60)}, "siconc > 15", "latitude <= -60"),
    (
        "lat >= 50, lon 300..60 (dateline)",
        {"latitude": (50, None), "longitude": (300, 60)},
        "siconc > 15",
        "latitude >= 50 AND (longitude >= 300 OR longitude <= 60)",
    ),
]


def reference(src, sel, threshold):
    """The count by NumPy, reading the field from the NetCDF file."""
    with netCDF4.Dataset(src) as nc:
        nc.set_auto_mask(False)
        c = nc["siconc"][:]
        lat, lon = nc["latitude"][:], nc["longitude"][:]
    inside = np.ones(lat.shape, dtype=bool)
    lo, hi = sel.get("latitude", (None, None))
    inside &= (lat >= lo) if lo is not None else True
    inside &= (lat <= hi) if hi is not None else True
    if "longitude" in sel:
        w, e = sel["longitude"]
        inside &= (lon >= w) | (lon <= e)
    valid = c < 1e19
    return int(((c > threshold) & valid & inside[None]).sum())


def area_of(ds, sel):
    """The engine's area for ``sel`` and the region narrowed to it (built once per case,
    outside the timing, as ``Dataset`` keeps it)."""
    from strata import _core

    driver = ds["siconc"]
    ranges = sorted((name, *bounds) for name, bounds in sel.items())
    selected = _core.Area.build(ds._reader, list(driver.dims), list(driver.shape), ranges)
    starts, stops = selected.narrow([0] * len(driver.shape), list(driver.shape), [1] * len(driver.shape))[:2]
    isel = {d: slice(a, b) for d, a, b in zip(driver.dims, starts, stops, strict=True)}
    mask = selected.bits().reshape([driver.shape[a] for a in selected.axes])
    return isel, selected.axes, mask


def list_then_filter(ds, where, area):
    """The path before the mask reached the engine: the positions satisfying the constraint
    in the area's bounding box listed, then filtered by the area's mask in NumPy."""
    isel, axes, mask = area
    pos = ds.query(where, isel=isel, output="positions")
    return int(mask[tuple(pos[a] for a in axes)].sum())


def main() -> int:
    store = fresh(WORK / "siconc_area.strata")
    WORK.mkdir(parents=True, exist_ok=True)
    strata.import_file(SOURCE, store, layout="V-S", bins=16, progress=False)
    ds = strata.open(store, cache_bytes=0)
    session = strata.SqlSession(store, cache_bytes=0)
    rows = []

    def joined(area):
        """The area on the joined coordinates' table."""
        return re.sub(r"(latitude|longitude)", r"g.\1", area)

    def sql(text):
        return session.execute(text).column(0)[0].as_py()

    for label, sel, where, area in CASES:
        threshold = float(where.split(">")[1])
        on_join = joined(area)
        box = area_of(ds, sel)
        want = reference(SOURCE, sel, threshold)
        runs = {
            "engine": lambda where=where, sel=sel: ds.query(where, sel=sel, output="count"),
            "list-then-filter": lambda where=where, box=box: list_then_filter(ds, where, box),
            "numpy": lambda sel=sel, threshold=threshold: reference(SOURCE, sel, threshold),
            "sql": lambda where=where, area=area: sql(f"SELECT count(*) FROM siconc_area WHERE {area} AND {where}"),
            "sql join": lambda where=where, area=on_join: sql(
                "SELECT count(*) FROM siconc_area t JOIN siconc_area_j_i g ON t.j = g.j AND t.i = g.i "
                f"WHERE {area} AND t.{where}"
            ),
        }
        per_turn: dict = {}
        times, answers = interleaved(runs, per_turn=per_turn)
        for name, got in answers.items():
            if got != want:
                print(f"{label} {where}: {name} counted {got}, NumPy {want}", file=sys.stderr)
                return 1
        rows.append(
            {
                "area": label,
                "constraint": where,
                "count": want,
                "ms": {k: v * 1e3 for k, v in times.items()},
                "vs_list_then_filter": paired_ratio(per_turn, "list-then-filter", "engine"),
                "vs_numpy": paired_ratio(per_turn, "numpy", "engine"),
                "sql_vs_join": paired_ratio(per_turn, "sql join", "sql"),
                "sql_vs_numpy": paired_ratio(per_turn, "numpy", "sql"),
                "sql_vs_engine": paired_ratio(per_turn, "engine", "sql"),
            }
        )
        print(
            f"{label:<36} {where:<12} count {want:>7}: engine {times['engine'] * 1e3:7.2f} ms, "
            f"{rows[-1]['vs_list_then_filter']:.1f}x list-then-filter, {rows[-1]['vs_numpy']:.1f}x numpy; "
            f"sql {times['sql'] * 1e3:7.2f} ms, {rows[-1]['sql_vs_join']:.1f}x join, "
            f"{rows[-1]['sql_vs_numpy']:.1f}x numpy"
        )
    results = {"machine": machine(), "commit": git_rev(), "rows": rows}
    OUT.with_suffix(".json").write_text(json.dumps(results, indent=2))
    lines = [
        "# Counts through a curvilinear area",
        "",
        f"`python bench/bench_area.py` — {results['machine']}, commit {results['commit']}, release build.",
        "CanESM5 `siconc` (12 x 291 x 360, f32), layout `V-S` with 16 bins; every count equals NumPy's.",
        "Speedups are medians of ratios paired by turn (the other method's time over the engine's).",
        "",
        "| area | constraint | count | engine ms | list-then-filter ms | numpy ms | vs list-then-filter | vs numpy |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        ms = r["ms"]
        lines.append(
            f"| {r['area']} | `{r['constraint']}` | {r['count']} | {ms['engine']:.2f} | "
            f"{ms['list-then-filter']:.2f} | {ms['numpy']:.2f} | {r['vs_list_then_filter']:.1f}x | "
            f"{r['vs_numpy']:.1f}x |"
        )
    lines += [
        "",
        "SQL, one `SqlSession`: `SELECT count(*) FROM siconc_area WHERE <area> AND <constraint>`, the 2-D",
        "latitude a column of the table and its comparison the engine's mask (the dateline case's OR",
        "of longitudes is DataFusion's filter), against the route SQL had before (the coordinates'",
        "table joined on `(j, i)`), NumPy, and `Dataset.query` (above). Every count equals NumPy's.",
        "",
        "| area | constraint | sql ms | join ms | vs join | vs numpy | engine / sql |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        ms = r["ms"]
        lines.append(
            f"| {r['area']} | `{r['constraint']}` | {ms['sql']:.2f} | {ms['sql join']:.2f} | "
            f"{r['sql_vs_join']:.1f}x | {r['sql_vs_numpy']:.1f}x | {r['sql_vs_engine']:.2f} |"
        )
    OUT.with_suffix(".md").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
