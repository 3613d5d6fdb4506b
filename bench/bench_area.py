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
  NumPy;
- ``numpy``: the whole field read from the NetCDF file with netCDF4, mask and constraint in
  NumPy (the reference every answer is checked against).

Ratios are medians of ratios paired by turn (``common.paired_ratio``).
"""

from __future__ import annotations

import json
import sys

import netCDF4
import numpy as np
from common import DATA, WORK, fresh, git_rev, interleaved, machine, paired_ratio

import strata

SOURCE = DATA / "sic_SImon_CCCma-CanESM5_ssp245_r13i1p2f1_2020.nc"
OUT = WORK.parent / "results" / "area"
CASES = [
    ("latitude >= 60", {"latitude": (60, None)}, "siconc > 15"),
    ("latitude >= 60", {"latitude": (60, None)}, "siconc > 90"),
    ("latitude <= -60", {"latitude": (None, -60)}, "siconc > 15"),
    ("lat >= 50, lon 300..60 (dateline)", {"latitude": (50, None), "longitude": (300, 60)}, "siconc > 15"),
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


def list_then_filter(ds, where, sel):
    """The path before the mask reached the engine: the area's mask computed for the query,
    the positions satisfying the constraint in its bounding box listed, then filtered by the
    mask in NumPy."""
    from strata import _core

    driver = ds["siconc"]
    ranges = sorted((name, *bounds) for name, bounds in sel.items())
    selected = _core.Area.build(ds._reader, list(driver.dims), list(driver.shape), ranges)
    starts, stops = selected.narrow([0] * len(driver.shape), list(driver.shape), [1] * len(driver.shape))[:2]
    isel = {d: slice(a, b) for d, a, b in zip(driver.dims, starts, stops, strict=True)}
    pos = ds.query(where, isel=isel, output="positions")
    mask = selected.bits().reshape([driver.shape[a] for a in selected.axes])
    return int(mask[tuple(pos[a] for a in selected.axes)].sum())


def main() -> int:
    store = fresh(WORK / "siconc_area.strata")
    WORK.mkdir(parents=True, exist_ok=True)
    strata.import_file(SOURCE, store, layout="V-S", bins=16, progress=False)
    ds = strata.open(store, cache_bytes=0)
    rows = []
    for label, sel, where in CASES:
        threshold = float(where.split(">")[1])
        want = reference(SOURCE, sel, threshold)
        runs = {
            "engine": lambda where=where, sel=sel: ds.query(where, sel=sel, output="count"),
            "list-then-filter": lambda where=where, sel=sel: list_then_filter(ds, where, sel),
            "numpy": lambda sel=sel, threshold=threshold: reference(SOURCE, sel, threshold),
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
            }
        )
        print(
            f"{label:<36} {where:<12} count {want:>7}: engine {times['engine'] * 1e3:7.2f} ms, "
            f"{rows[-1]['vs_list_then_filter']:.1f}x list-then-filter, {rows[-1]['vs_numpy']:.1f}x numpy"
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
    OUT.with_suffix(".md").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
