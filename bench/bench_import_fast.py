"""What a quicker default import would cost: the balanced plan against the same plan kept
to chains without a pcodec stage or zstd at level 6 or more, on every numeric variable of
at least 1 MB in ../shared/data.

Balanced ranks chains by declared speeds, and declares pcodec's levels 5-6 at 200 MB/s per
4-byte element and zstd's levels 6-9 at 180; measured on a sample they encode at a third to
a half of that, as do the other chains, but these are the ones that then fall furthest
under balanced's floor (150 MB/s per core). This run asks what the default would store,
and how fast it would import against python-blosc2, without them: the "fast" chain is the
best ratio on the default plan's own sample among its other candidates, given to the
import.

    python bench/bench_import_fast.py     # writes bench/results/import_fast.md and .json
"""

from __future__ import annotations

import re
import statistics

from bench_import import TURNS, blosc2_write, copies, strata_import, variables
from common import WORK, report_header, write_results

import strata

# Any pcodec stage, zstd at level 6 or more.
SLOW = re.compile(r"pco:|zstd:([6-9]|1\d)")


def fast_chain(plan) -> str:
    """The best ratio on the plan's sample among its chains that are not SLOW."""
    fast = [s for s in plan["scores"] if not SLOW.search(s["chain"])]
    return max(fast, key=lambda s: s["ratio"])["chain"] if fast else "shuffle+zstd:3"


def main() -> None:
    WORK.mkdir(parents=True, exist_ok=True)
    rows = []
    for file, name, arr, dims in variables():
        src, zbytes = copies(name, arr, dims)
        _, _, plan = strata_import(src, name)
        chosen = plan["chosen"] if plan else "shuffle+zstd:3"
        fast = fast_chain(plan) if plan else chosen
        default_pairs, fast_pairs, stored, fast_stored = [], [], 0, 0
        for turn in range(TURNS):
            # Three writers, the first one moving each turn.
            order = ["b", "d", "f"][turn % 3 :] + ["b", "d", "f"][: turn % 3]
            t = {}
            for who in order:
                if who == "b":
                    t["b"], _ = blosc2_write(arr)
                elif who == "d":
                    t["d"], stored, _ = strata_import(src, name)
                else:
                    t["f"], fast_stored, _ = strata_import(src, name, codec=fast)
            default_pairs.append(t["b"] / t["d"])
            fast_pairs.append(t["b"] / t["f"])
        chains = [chosen] if fast == chosen else [chosen, fast]
        (measured,) = strata.analyze(src, [name], candidates=chains, samples=16, min_seconds=0.2)
        encode = {s.chain: s.measured_encode_mb_s for s in measured.scores}
        declared = {s["chain"]: s["encode_mb_s"] for s in (plan or {}).get("scores", [])}
        row = {
            "file": file,
            "variable": name,
            "dtype": str(arr.dtype),
            "raw_bytes": arr.nbytes,
            "chain": chosen,
            "fast_chain": fast,
            "declared_encode_mb_s": declared.get(chosen),
            "measured_encode_mb_s": encode.get(chosen),
            "fast_measured_encode_mb_s": encode.get(fast),
            "size_vs_zlib": stored / zbytes,
            "fast_size_vs_zlib": fast_stored / zbytes,
            "fast_size_vs_default": fast_stored / stored,
            "speed_vs_blosc2": statistics.median(default_pairs),
            "fast_speed_vs_blosc2": statistics.median(fast_pairs),
        }
        rows.append(row)
        print(
            f"{name[:18]:18} {chosen:32} {row['size_vs_zlib']:.3f} {row['speed_vs_blosc2']:.2f} | "
            f"{fast:30} {row['fast_size_vs_zlib']:.3f} {row['fast_speed_vs_blosc2']:.2f}",
            flush=True,
        )
    print(write_results("import_fast", rows, report)[-1500:])


def report(results) -> str:
    rows = results["rows"]
    lines = report_header(
        "A quicker default import: balanced without pcodec and zstd at level 6 or more",
        "`python bench/bench_import_fast.py` (release build: `make build` first)",
        results,
    )
    lines += [
        "",
        "Every numeric variable of at least 1 MB in `../shared/data`, alone in an uncompressed "
        "NetCDF-4 file (as `bench_import.py` writes it). `default`: `strata.import_file` with no "
        "options. `fast`: the same import with `codec=` the best chain on the default plan's "
        "own sample that has no pcodec stage and no zstd at level 6 or more (no planning, so "
        "no second look at the block shape either). Size: stored bytes over netCDF4 zlib 4 + "
        "shuffle's (above 1: larger). Speed: python-blosc2 (zstd 5 + shuffle, both cores) "
        "time over strata's, median of "
        f"{TURNS} turns, the order rotated each turn (above 1: strata faster). Encode MB/s: "
        "declared (what balanced ranks by) and measured by `strata.analyze` on one core, 16 "
        "sample blocks, 0.2 s.",
        "",
        "| variable | MB | default chain | declared encode | measured | size / zlib | speed vs blosc2 "
        "| fast chain | measured encode | size / zlib | size / default | speed vs blosc2 |",
        "|---|---:|---|---:|---:|---:|---:|---|---:|---:|---:|---:|",
    ]

    def num(x, f="{:.0f}"):
        return "" if x is None else f.format(x)

    for r in rows:
        lines.append(
            f"| {r['variable']} | {r['raw_bytes'] / 1e6:.1f} | `{r['chain']}` | {num(r['declared_encode_mb_s'])} "
            f"| {num(r['measured_encode_mb_s'])} | {r['size_vs_zlib']:.3f} | {r['speed_vs_blosc2']:.2f} "
            f"| `{r['fast_chain']}` | {num(r['fast_measured_encode_mb_s'])} | {r['fast_size_vs_zlib']:.3f} "
            f"| {r['fast_size_vs_default']:.3f} | {r['fast_speed_vs_blosc2']:.2f} |"
        )
    n = len(rows)

    def count(key, ok):
        return sum(1 for r in rows if ok(r[key]))

    changed = [r for r in rows if r["fast_chain"] != r["chain"]]
    grows = [r["fast_size_vs_default"] for r in changed]
    lines += [
        "",
        f"- Default: size at most netCDF4's on {count('size_vs_zlib', lambda x: x <= 1)} of {n}; "
        f"import at least blosc2's speed on {count('speed_vs_blosc2', lambda x: x >= 1)} of {n} "
        f"(median {statistics.median(r['speed_vs_blosc2'] for r in rows):.2f}).",
        f"- Fast: size at most netCDF4's on {count('fast_size_vs_zlib', lambda x: x <= 1)} of {n}; "
        f"import at least blosc2's speed on {count('fast_speed_vs_blosc2', lambda x: x >= 1)} of {n} "
        f"(median {statistics.median(r['fast_speed_vs_blosc2'] for r in rows):.2f}).",
        f"- The fast chain differs from the default on {len(changed)} of {n} variables"
        + (f", storing {min(grows):.3f}-{max(grows):.3f}x the default's bytes." if grows else "."),
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
