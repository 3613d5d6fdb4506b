"""Random boxes from a store opened afresh for each box, as a user script or a service
answering one request does: strata's default import (codec auto, its own chunk shapes)
against python-blosc2 NDArray with its own default chunking, on every numeric variable of
at least 1 MB in ../shared/data.

    python bench/bench_boxes.py          # writes bench/results/boxes.md and boxes.json
"""

from __future__ import annotations

import statistics
import sys
import zlib

import blosc2
import numpy as np
from bench_import import BLOSC2_CPARAMS, variables, write_nc
from common import WORK, best, fresh, random_boxes, write_results

import strata

FRACTIONS = (0.001, 0.01)
BOXES = 25
REPEATS = 3


def main() -> None:
    WORK.mkdir(parents=True, exist_ok=True)
    rows = []
    for file, name, arr, dims in variables():
        src = fresh(WORK / "boxes_src.nc")
        write_nc(src, name, arr, dims)
        store = fresh(WORK / "boxes.strata")
        strata.import_file(src, store)
        b2 = fresh(WORK / "boxes.b2nd")
        blosc2.asarray(
            arr,
            urlpath=str(b2),
            mode="w",
            cparams=BLOSC2_CPARAMS,
        )
        var = strata.open(store)[name]
        b2_array = blosc2.open(str(b2))
        row = {
            "file": file,
            "variable": name,
            "dtype": str(arr.dtype),
            "shape": list(arr.shape),
            "raw_bytes": arr.nbytes,
            "strata_chunks": list(var.chunks),
            "strata_subchunks": list(var.subchunks),
            "strata_chain": (var.plan or {}).get("chosen"),
            "blosc2_chunks": list(b2_array.chunks),
            "blosc2_blocks": list(b2_array.blocks),
        }
        # Seeded by the variable, so every run (and every commit) reads the same boxes.
        rng = np.random.default_rng(zlib.crc32(name.encode()))
        for fraction in FRACTIONS:
            ratios, ts, tb = [], [], []
            for k, box in enumerate(random_boxes(arr.shape, fraction, BOXES, rng)):
                runs = {
                    "strata": lambda box=box, store=store, name=name: strata.open(store)[name][box],
                    "blosc2": lambda box=box, b2=b2: blosc2.open(str(b2))[box],
                }
                times, answers = dict.fromkeys(runs, float("inf")), {}
                for r in range(REPEATS):
                    # Alternate who goes first: a drift in the machine's speed hits both.
                    for who in list(runs)[:: 1 if (k + r) % 2 == 0 else -1]:
                        t, answers[who] = best(runs[who], repeat=1)
                        times[who] = min(times[who], t)
                if not np.array_equal(
                    np.asarray(answers["strata"]), answers["blosc2"], equal_nan=arr.dtype.kind == "f"
                ):
                    sys.exit(f"{file} {name} {box}: strata and blosc2 disagree")
                ratios.append(times["blosc2"] / times["strata"])
                ts.append(times["strata"])
                tb.append(times["blosc2"])
            key = f"{fraction:g}"
            row[key] = {
                "strata_ms": statistics.median(ts) * 1e3,
                "blosc2_ms": statistics.median(tb) * 1e3,
                "speed_vs_blosc2": statistics.median(ratios),
            }
        rows.append(row)
        print(
            f"{file[:28]:28} {name[:16]:16} "
            + " ".join(
                f"{k}: {row[k]['strata_ms']:.3f} / {row[k]['blosc2_ms']:.3f} ms = {row[k]['speed_vs_blosc2']:.2f}"
                for k in (f"{f:g}" for f in FRACTIONS)
            ),
            flush=True,
        )
    print(write_results("boxes", rows, report)[-900:])


def report(results) -> str:
    rows = results["rows"]
    keys = [f"{f:g}" for f in FRACTIONS]
    lines = [
        "# Random boxes, store opened per box: strata's default import against python-blosc2",
        "",
        "Command: `python bench/bench_boxes.py` (release build: `make build` first)  ",
        f"Machine: {results['machine']}  ",
        f"Commit: {results['commit']}, {results['date']}",
        "",
        "Every numeric variable of at least 1 MB in `../shared/data`. strata: the store "
        "`strata.import_file` makes with no options (codec auto, objective balanced, the "
        "automatic chunk and sub-chunk shapes). python-blosc2: `blosc2.asarray` of the same array "
        "with its own default chunks and blocks, zstd 5 + shuffle, both cores. Each of "
        f"{BOXES} random boxes per share (every axis the same share of its length, seeded by the "
        "variable's name) is read by opening the store and reading the box "
        "(`strata.open(store)[name][box]` against `blosc2.open(path)[box]`), "
        f"{REPEATS} times, the best counting; the files are in the page cache, no decoded "
        "chunk survives an open. Speed = blosc2's time / strata's per box, median over "
        "boxes (above 1: strata faster). Every box's answers are compared.",
        "",
        "| file | variable | type | shape | strata sub-chunk | blosc2 block | "
        + " | ".join(f"{float(k) * 100:g}% strata ms | blosc2 ms | speed" for k in keys)
        + " |",
        "|---|---|---|---|---|---|" + "---:|---:|---:|" * len(keys),
    ]
    for r in rows:
        cells = " | ".join(
            f"{r[k]['strata_ms']:.3f} | {r[k]['blosc2_ms']:.3f} | {r[k]['speed_vs_blosc2']:.2f}" for k in keys
        )
        lines.append(
            f"| {r['file']} | {r['variable']} | {r['dtype']} | {tuple(r['shape'])} | "
            f"{tuple(r['strata_subchunks'])} | {tuple(r['blosc2_blocks'])} | {cells} |"
        )
    lines.append("")
    for k in keys:
        speeds = [r[k]["speed_vs_blosc2"] for r in rows]
        lines.append(
            f"- {float(k) * 100:g}% boxes at least as fast as python-blosc2: "
            f"{sum(s >= 1 for s in speeds)} of {len(rows)} (median {statistics.median(speeds):.2f}, "
            f"worst {min(speeds):.2f})."
        )
    lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
