"""Random boxes from a store opened afresh for each box, as a user script or a service
answering one request does: strata's default import (codec auto, its own chunk shapes), and
the same import with each other shape rule, against python-blosc2 NDArray with its own
default chunking, on every numeric variable of at least 1 MB in ../shared/data.

    python bench/bench_boxes.py          # writes bench/results/boxes.md and boxes.json
"""

from __future__ import annotations

import statistics
import sys
import zlib

import blosc2
import numpy as np
from bench_import import BLOSC2_CPARAMS, variables, write_nc
from common import WORK, best, fresh, random_boxes, report_header, variable_fields, write_results

import strata

FRACTIONS = (0.001, 0.01)
# The default shape rule first, then those a user can choose for boxes and for maps.
RULES = ("auto", "cube", "proportional", "slices")
BOXES = 25
REPEATS = 3
# Maps (one index along every axis but the last two, all of those) and series at a point
# (all of the first axis, one index along the others): the reads the two rules trade.
SHAPED = 10


def maps_box(shape, rng) -> tuple:
    lead = max(len(shape) - 2, 1)
    return tuple(int(rng.integers(0, n)) if d < lead else slice(None) for d, n in enumerate(shape))


def series_box(shape, rng) -> tuple:
    return (slice(None), *(int(rng.integers(0, n)) for n in shape[1:]))


def main() -> None:
    WORK.mkdir(parents=True, exist_ok=True)
    rows = []
    for file, name, arr, dims in variables():
        src = fresh(WORK / "boxes_src.nc")
        write_nc(src, name, arr, dims)
        stores = {}
        for rule in RULES:
            stores[rule] = fresh(WORK / f"boxes_{rule}.strata")
            strata.import_file(src, stores[rule], shape_rule=rule)
        b2 = fresh(WORK / "boxes.b2nd")
        blosc2.asarray(
            arr,
            urlpath=str(b2),
            mode="w",
            cparams=BLOSC2_CPARAMS,
        )
        b2_array = blosc2.open(str(b2))
        row = {
            **variable_fields(file, name, arr),
            "blosc2_chunks": list(b2_array.chunks),
            "blosc2_blocks": list(b2_array.blocks),
        }
        for rule, store in stores.items():
            var = strata.open(store)[name]
            row[rule] = {
                "chunks": list(var.chunks),
                "subchunks": list(var.subchunks),
                "chain": (var.plan or {}).get("chosen"),
                "stored_bytes": strata.open(store).stats()[name]["stored_bytes"],
            }
        # Seeded by the variable, so every run (and every commit) reads the same boxes.
        rng = np.random.default_rng(zlib.crc32(name.encode()))
        reads = {f"{f:g}": random_boxes(arr.shape, f, BOXES, rng) for f in FRACTIONS}
        if arr.ndim >= 2:
            reads["map"] = [maps_box(arr.shape, rng) for _ in range(SHAPED)]
            reads["series"] = [series_box(arr.shape, rng) for _ in range(SHAPED)]
        for key, boxes in reads.items():
            times_of: dict = {who: [] for who in (*RULES, "blosc2")}
            for k, box in enumerate(boxes):
                runs = {
                    rule: lambda box=box, store=store, name=name: strata.open(store)[name][box]
                    for rule, store in stores.items()
                }
                runs["blosc2"] = lambda box=box, b2=b2: blosc2.open(str(b2))[box]
                times, answers = dict.fromkeys(runs, float("inf")), {}
                for r in range(REPEATS):
                    # Alternate who goes first: a drift in the machine's speed hits all.
                    for who in list(runs)[:: 1 if (k + r) % 2 == 0 else -1]:
                        t, answers[who] = best(runs[who], repeat=1)
                        times[who] = min(times[who], t)
                for rule in RULES:
                    if not np.array_equal(
                        np.asarray(answers[rule]), answers["blosc2"], equal_nan=arr.dtype.kind == "f"
                    ):
                        sys.exit(f"{file} {name} {box}: strata ({rule}) and blosc2 disagree")
                for who, t in times.items():
                    times_of[who].append(t)
            row["blosc2"] = {**row.get("blosc2", {}), key: statistics.median(times_of["blosc2"]) * 1e3}
            for rule in RULES:
                row[rule][key] = {
                    "ms": statistics.median(times_of[rule]) * 1e3,
                    # Per box, blosc2's time over strata's; the median over boxes.
                    "speed_vs_blosc2": statistics.median(
                        b / t for b, t in zip(times_of["blosc2"], times_of[rule], strict=True)
                    ),
                }
        rows.append(row)
        print(
            f"{file[:28]:28} {name[:16]:16} "
            + " ".join(
                f"{rule} {k}: {row[rule][k]['ms']:.3f} / {row['blosc2'][k]:.3f} ms = "
                f"{row[rule][k]['speed_vs_blosc2']:.2f}"
                for rule in RULES
                for k in (f"{f:g}" for f in FRACTIONS)
            ),
            flush=True,
        )
    print(write_results("boxes", rows, report)[-900:])


def report(results) -> str:
    rows = results["rows"]
    keys = [f"{f:g}" for f in FRACTIONS]
    pct = {k: f"{float(k) * 100:g}%" for k in keys}
    others = RULES[1:]
    lines = [
        *report_header(
            "Random boxes, maps and series, store opened per read: strata's shape rules against python-blosc2",
            "`python bench/bench_boxes.py` (release build: `make build` first)",
            results,
        ),
        "Every numeric variable of at least 1 MB in `../shared/data`. strata: the store "
        "`strata.import_file` makes with no options (codec auto, objective balanced, the "
        "automatic chunk and sub-chunk shapes of the default `auto` rule: `cube`, or "
        "`proportional` where a cube would keep a short axis whole), and the same import "
        f"with each other shape rule ({', '.join(f'`{r}`' for r in others)}; docs/writing.md, "
        '"Chunk shapes"). python-blosc2: `blosc2.asarray` of the same array with its own default '
        f"chunks and blocks, zstd 5 + shuffle, both cores. Each of {BOXES} random boxes per share "
        "(every axis the same share of its length, seeded by the variable's name) is read by "
        "opening the store and reading the box (`strata.open(store)[name][box]` against "
        f"`blosc2.open(path)[box]`), {REPEATS} times, the best counting, the readers taking turns; "
        "the files are in the page cache, no decoded chunk survives an open. Speed = blosc2's time "
        "/ strata's per box, median over boxes (above 1: strata faster); the times are in "
        f"`boxes.json`. `size`: the store's bytes for the variable over the `{RULES[0]}` store's. Every "
        "read's answers are compared.",
        "",
        "| file | variable | type | shape | blosc2 block | "
        + " | ".join(f"blosc2 ms {pct[k]}" for k in keys)
        + f" | {RULES[0]} sub-chunk | "
        + " | ".join(f"speed {pct[k]}" for k in keys)
        + "".join(f" | {r} sub-chunk | size | " + " | ".join(f"speed {pct[k]}" for k in keys) for r in others)
        + " |",
        "|---|---|---|---|---|"
        + "---:|" * len(keys)
        + "---|"
        + "---:|" * len(keys)
        + ("---|---:|" + "---:|" * len(keys)) * len(others),
    ]
    for r in rows:
        cells = [f"{r['blosc2'][k]:.3f}" for k in keys]
        for rule in RULES:
            cells.append(str(tuple(r[rule]["subchunks"])))
            if rule != RULES[0]:
                cells.append(f"{r[rule]['stored_bytes'] / r[RULES[0]]['stored_bytes']:.3f}")
            cells += [f"{r[rule][k]['speed_vs_blosc2']:.2f}" for k in keys]
        lines.append(
            f"| {r['file']} | {r['variable']} | {r['dtype']} | {tuple(r['shape'])} | "
            f"{tuple(r['blosc2_blocks'])} | " + " | ".join(cells) + " |"
        )
    lines.append("")
    for rule in RULES:
        for k in keys:
            speeds = [r[rule][k]["speed_vs_blosc2"] for r in rows]
            lines.append(
                f"- `{rule}`: {pct[k]} boxes at least as fast as python-blosc2: "
                f"{sum(s >= 1 for s in speeds)} of {len(rows)} (median {statistics.median(speeds):.2f}, "
                f"worst {min(speeds):.2f})."
            )
    for rule in others:
        sizes = [r[rule]["stored_bytes"] / r[RULES[0]]["stored_bytes"] for r in rows]
        lines.append(
            f"- `{rule}` stores over `{RULES[0]}`'s: median {statistics.median(sizes):.3f}, "
            f"from {min(sizes):.3f} to {max(sizes):.3f}."
        )
    shaped = [r for r in rows if "map" in r[RULES[0]]]
    lines += [
        "",
        "## Maps and series: what the rules trade",
        "",
        f"On every variable of two or more dimensions, {SHAPED} maps (one index along every axis but "
        "the last two, all of those; a row of a 2-D variable) and as many series at a point (all "
        "of the first axis, one index along the others), timed as above. Median ms per read.",
        "",
        "| file | variable | shape | map: blosc2 ms | "
        + " | ".join(f"{r} ms" for r in RULES)
        + " | series: blosc2 ms | "
        + " | ".join(f"{r} ms" for r in RULES)
        + " |",
        "|---|---|---|" + "---:|" * (2 * (len(RULES) + 1)),
    ]
    for r in shaped:
        cells = " | ".join(
            f"{r['blosc2'][k]:.3f} | " + " | ".join(f"{r[rule][k]['ms']:.3f}" for rule in RULES)
            for k in ("map", "series")
        )
        lines.append(f"| {r['file']} | {r['variable']} | {tuple(r['shape'])} | {cells} |")
    lines.append("")
    for k, what in (("map", "Maps"), ("series", "Series")):
        beat = ", ".join(f"`{rule}` {sum(r[rule][k]['speed_vs_blosc2'] >= 1 for r in shaped)}" for rule in RULES)
        over = {rule: [r[rule][k]["ms"] / r[RULES[0]][k]["ms"] for r in shaped] for rule in others}
        ratios = "; ".join(
            f"`{rule}` over `{RULES[0]}`: median {statistics.median(x):.2f} (from {min(x):.2f} to {max(x):.2f})"
            for rule, x in over.items()
        )
        lines.append(f"- {what}: time {ratios}. As fast as python-blosc2 or faster, of {len(shaped)}: {beat}.")
    lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
