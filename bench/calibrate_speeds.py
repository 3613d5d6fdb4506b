"""Declared codec speeds against measured ones: every chain of a few families timed by
`strata.analyze` (one core, 8 sample blocks) on every numeric variable of at least 1 MB in
../shared/data, as a fraction of its family's first level. The analyzer's table
(docs/codecs.md, "Declared speeds") ranks chains by declared speeds; what matters there is
that a level declared slower than another measures slower by about as much, since
`balanced` tries the quickest first and keeps chains above its floors.

    python bench/calibrate_speeds.py      # writes bench/results/calibrate_speeds.md and .json
"""

from __future__ import annotations

import statistics

from bench_import import variables, write_nc
from common import WORK, fresh, report_header, write_results

import strata

# Each family: its first chain (the base), then the levels compared with it.
FAMILIES = {
    "pco": ["pco:6", "pco:4", "pco:8"],
    # A chain that takes differences along the last axis first turns pcodec's own delta
    # search off (`PcoBackend::delta_search`); along another axis it stays on.
    "pco, delta search": ["pco:6", "delta+pco:6", "delta:-1+delta:-2+pco:6", "delta:0+pco:6"],
    "zstd": [
        "shuffle+zstd:3",
        "shuffle+zstd:1",
        "shuffle+zstd:5",
        "shuffle+zstd:6",
        "shuffle+zstd:7",
        "shuffle+zstd:9",
    ],
    "bytecols": ["bytecols:3", "bytecols:1", "bytecols:4", "bytecols:9"],
    "delta, bytecols": ["delta:-1+delta:-2+bytecols:3", "delta:-1+delta:-2+bytecols:4"],
}
# pcodec works per number, byte codecs per byte: by element type, these against this one.
ACROSS_TYPES = (["pco:6", "delta+pco:6", "pco:8"], "shuffle+zstd:3")
MIN_SECONDS = 0.05


def main():
    chains = [c for fam in FAMILIES.values() for c in fam]
    rows = []
    for i, (file, name, arr, dims) in enumerate(variables()):
        src = fresh(WORK / "calibrate.nc")
        write_nc(src, name, arr, dims)
        (a,) = strata.analyze(src, [name], candidates=chains, min_seconds=MIN_SECONDS)
        measured = {s.chain: (s.encode_mb_s, s.measured_encode_mb_s) for s in a.scores}
        rows.append({"file": file, "variable": name, "dtype": str(arr.dtype), "speeds": measured})
        print(f"{i + 1:2d} {file} {name}", flush=True)
    summary = {}
    for members in FAMILIES.values():
        for c in members:
            have = [r["speeds"] for r in rows if c in r["speeds"] and members[0] in r["speeds"]]
            summary[c] = {
                "declared": statistics.median(s[c][0] / s[members[0]][0] for s in have),
                "measured": sorted(s[c][1] / s[members[0]][1] for s in have),
                "mb_s": statistics.median(s[c][1] for s in have),
            }
    chains, against = ACROSS_TYPES
    by_type = {}
    for dtype in sorted({r["dtype"] for r in rows}):
        have = [r["speeds"] for r in rows if r["dtype"] == dtype]
        by_type[dtype] = {
            c: {
                "declared": statistics.median(s[c][0] / s[against][0] for s in have),
                "measured": statistics.median(s[c][1] / s[against][1] for s in have),
                "variables": len(have),
            }
            for c in chains
        }
    print(write_results("calibrate_speeds", rows, report, summary=summary, by_type=by_type))


def report(results: dict) -> str:
    title = "Declared and measured encode speeds, per family"
    lines = [
        *report_header(title, "`python bench/calibrate_speeds.py`", results),
        "Every numeric variable of at least 1 MB in `../shared/data`; `strata.analyze` with these "
        f"chains as its candidates, 8 sample blocks, each timed for at least {MIN_SECONDS} s on one "
        "core. Per chain: its declared encode speed over its family's first chain's, and the same "
        "quotient measured, median over the variables (with the lowest and highest).",
        "",
        "| family | chain | declared / first | measured / first: median | min | max | measured MB/s (median) |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for fam, members in FAMILIES.items():
        for c in members:
            s = results["summary"][c]
            m = s["measured"]
            lines.append(
                f"| {fam} | `{c}` | {s['declared']:.2f} | {statistics.median(m):.2f} | {m[0]:.2f} | "
                f"{m[-1]:.2f} | {s['mb_s']:.0f} |"
            )
    chains, against = ACROSS_TYPES
    lines += [
        "",
        f"By element type, against `{against}` (median over the variables of that type):",
        "",
        "| type | variables | chain | declared / " + against + " | measured / " + against + " |",
        "|---|---:|---|---:|---:|",
    ]
    for dtype, per in results["by_type"].items():
        for c in chains:
            s = per[c]
            lines.append(f"| {dtype} | {s['variables']} | `{c}` | {s['declared']:.2f} | {s['measured']:.2f} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
