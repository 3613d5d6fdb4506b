"""Files indexed in place (``strata index``) against importing them and against reading the
file with netCDF4-python and NumPy.

Inputs: ERSST ``sst`` as shipped (NetCDF-4, contiguous, 44 MB) and ERSST x8 (the field eight
times along time, written by this script as a NetCDF-4 file chunked one record per chunk
with shuffle + deflate level 4, the way CF model output is usually written: 350 MB of
values). For each file:

- preparing it: ``strata index`` (a summary per chunk), ``strata index --binning`` (value
  bins with boundaries -1.5, 0, 10, 20, 25, 28, 30) and ``strata import`` (a copy, codec
  auto): seconds and bytes added beside the file;
- value counts, warm (the file in the page cache): ``sst > q99`` (1% of the valid points;
  its bound is not a bin boundary) and ``sst >= 28`` (a boundary), on the index, the binned
  index, the imported store, and netCDF4 + NumPy (read the variable, count);
- a region read, ``sst[0:120, 20:60, :]``, on the index against netCDF4 (each opened
  once: both keep their chunk caches, warm).

Times are the best of runs taking turns (``common.interleaved``); ratios are medians of the
per-turn ratios against netCDF4 + NumPy. Every answer is checked against NumPy.

    python bench/bench_in_place.py     (release build: make build-release)
"""

from __future__ import annotations

import json
import os
import shutil
import statistics

import netCDF4
import numpy as np
from common import DATA, ROOT, WORK, best, dir_size, git_rev, interleaved, machine, write_ersst_deflate

import strata

FILL = -999.0
EDGES = "-1.5,0,10,20,25,28,30"


def bench_file(label, path, out):
    base = path.with_name(path.stem)
    index, binned, store = (base.with_name(base.name + s) for s in (".idx", ".binned", ".imported"))
    for p in (index, binned, store):
        shutil.rmtree(p, ignore_errors=True)
    t_index, _ = best(lambda: strata.index_file(path, index), repeat=1)
    t_binned, _ = best(lambda: strata.index_file(path, binned, binning=EDGES), repeat=1)
    t_import, _ = best(lambda: strata.import_file(path, store), repeat=1)
    with netCDF4.Dataset(path) as nc:
        nc.set_auto_maskandscale(False)
        sst = np.asarray(nc["sst"][...])
    valid = sst != FILL
    q99 = float(np.quantile(sst[valid], 0.99))
    prep = {
        "file MB": os.path.getsize(path) / 1e6,
        "index s": t_index,
        "index kB": dir_size(index) / 1e3,
        "binned index s": t_binned,
        "binned index kB": dir_size(binned) / 1e3,
        "import s": t_import,
        "store MB": dir_size(store) / 1e6,
    }

    def numpy_count(where):
        def run():
            with netCDF4.Dataset(path) as nc:
                nc.set_auto_maskandscale(False)
                a = nc["sst"][...]
                return int(np.count_nonzero(where(a) & (a != FILL)))

        return run

    queries = {}
    for qname, text, where in [
        (f"sst > {q99:.2f} (1%)", f"sst > {q99!r}", lambda a: a > q99),
        ("sst >= 28 (a boundary)", "sst >= 28", lambda a: a >= 28),
    ]:
        want = int(np.count_nonzero(where(sst) & valid))
        dsets = {n: strata.open(p) for n, p in [("index", index), ("binned index", binned), ("imported", store)]}
        runs = {n: (lambda d=d, text=text: d.query(text, output="count")) for n, d in dsets.items()}
        runs["netCDF4 + NumPy"] = numpy_count(where)
        per_turn = {}
        times, answers = interleaved(runs, per_turn=per_turn)
        assert all(a == want for a in answers.values()), (qname, answers, want)
        ratios = {
            n: statistics.median(b / a for a, b in zip(per_turn[n], per_turn["netCDF4 + NumPy"], strict=True))
            for n in runs
            if n != "netCDF4 + NumPy"
        }
        read = {
            n: d.query(text, output="count", with_stats=True)[1]["explain"].splitlines()[-1] for n, d in dsets.items()
        }
        queries[qname] = {"ms": {n: t * 1e3 for n, t in times.items()}, "x netCDF4": ratios, "actual": read}

    region = (slice(0, 120), slice(20, 60), slice(None))
    ds = strata.open(index)

    # Both opened once, so both keep their chunk caches (strata's decoded segments, netCDF's
    # chunk cache) across runs.
    nc = netCDF4.Dataset(path)
    nc.set_auto_maskandscale(False)
    per_turn = {}
    runs = {"index": lambda: ds["sst"][region], "netCDF4": lambda: np.asarray(nc["sst"][region])}
    times, answers = interleaved(runs, per_turn=per_turn)
    nc.close()
    assert np.array_equal(answers["index"], sst[region]) and np.array_equal(answers["netCDF4"], sst[region])
    ratio = statistics.median(b / a for a, b in zip(per_turn["index"], per_turn["netCDF4"], strict=True))
    out[label] = {
        "prepare": prep,
        "queries": queries,
        "region ms": {k: v * 1e3 for k, v in times.items()},
        "region x": ratio,
    }


def main():
    WORK.mkdir(parents=True, exist_ok=True)
    work = WORK / "in_place"
    work.mkdir(exist_ok=True)
    ersst = work / "ersst.nc"
    if not ersst.exists():
        shutil.copyfile(DATA / "ersst_v3b_1960-2016_concat.nc", ersst)
    x8 = work / "ersst_x8.nc"
    if not x8.exists():
        write_ersst_deflate(x8, repeats=8)
    out = {}
    for label, path in [("ERSST (contiguous)", ersst), ("ERSST x8 (chunked, deflate)", x8)]:
        bench_file(label, path, out)
        print(label, json.dumps(out[label]["prepare"]), flush=True)
    lines = [
        "# Files indexed in place",
        "",
        f"`python bench/bench_in_place.py` at {git_rev()} on {machine()}.",
        "",
        "Preparing a file: indexing it in place, with value bins, or importing it (a copy).",
        "",
        "| file | file MB | index s | index kB | binned s | binned kB | import s | store MB |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for label, r in out.items():
        p = r["prepare"]
        lines.append(
            f"| {label} | {p['file MB']:.1f} | {p['index s']:.2f} | {p['index kB']:.0f} | {p['binned index s']:.2f} | "
            f"{p['binned index kB']:.0f} | {p['import s']:.2f} | {p['store MB']:.1f} |"
        )
    lines += [
        "",
        "Value counts, warm; ms (best of turns) and speed-up over netCDF4 + NumPy (median of per-turn ratios).",
        "",
        "| file | query | index | binned index | imported store | netCDF4 + NumPy |",
        "|---|---|---|---|---|---|",
    ]
    for label, r in out.items():
        for q, m in r["queries"].items():
            ms, x = m["ms"], m["x netCDF4"]
            lines.append(
                f"| {label} | `{q}` | {ms['index']:.1f} ({x['index']:.1f}x) | {ms['binned index']:.1f} "
                f"({x['binned index']:.1f}x) | {ms['imported']:.1f} ({x['imported']:.1f}x) | "
                f"{ms['netCDF4 + NumPy']:.1f} |"
            )
    lines += ["", "Region read `sst[0:120, 20:60, :]`: the index against netCDF4.", ""]
    for label, r in out.items():
        ms = r["region ms"]
        lines.append(f"- {label}: {ms['index']:.1f} ms against {ms['netCDF4']:.1f} ms ({r['region x']:.1f}x)")
    lines += ["", "What each query read (the EXPLAIN's last line):", ""]
    for label, r in out.items():
        for q, m in r["queries"].items():
            for n, a in m["actual"].items():
                lines.append(f"- {label}, `{q}`, {n}: {a}")
    results = ROOT / "bench" / "results"
    (results / "in_place.md").write_text("\n".join(lines) + "\n")
    (results / "in_place.json").write_text(json.dumps(out, indent=1) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
