"""Small variables (16 KiB to 1 MiB): the default import, which stores each whole as one
sub-chunk when its plan finds that smaller, against the same planner held to 64 KiB
sub-chunks, for size (against netCDF4 zlib-4 + shuffle, which keeps such variables in one
chunk) and for what a read costs.

    python bench/bench_small.py          # writes bench/results/small.md and small.json
"""

from __future__ import annotations

import os
import statistics
import time

import numpy as np
from bench_import import variables, write_nc, zlib_bytes
from common import WORK, fresh, report_header, variable_fields, write_results

import strata

TURNS = 3
READS = 20
MIN_BYTES, MAX_BYTES = 16 << 10, 1 << 20
# The writer's 64 KiB sub-chunk target, given explicitly: explicit targets are never widened.
BLOCKS_CONFIG = "version = 1\nsubchunk_bytes = 65536\n"


def imported(src, name, store, config=None):
    """(seconds, stored bytes, chain, sub-chunk shape) of a default import of `src`."""
    old = os.environ.pop("STRATA_CONFIG", None)
    if config is not None:
        os.environ["STRATA_CONFIG"] = str(config)
    try:
        fresh(store)
        t0 = time.perf_counter()
        strata.import_file(src, store)
        seconds = time.perf_counter() - t0
    finally:
        os.environ.pop("STRATA_CONFIG", None)
        if old is not None:
            os.environ["STRATA_CONFIG"] = old
    ds = strata.open(store)
    plan = ds[name].plan
    return seconds, ds.stats()[name]["stored_bytes"], plan["chosen"] if plan else "shuffle+zstd:3", ds[name].subchunks


def read_times(store, name, arr, rng):
    """Median seconds to open the store and read one element at random (no decoded block
    survives an open), and to read the whole variable; every answer compared."""
    one = []
    for _ in range(READS):
        at = tuple(int(rng.integers(0, n)) for n in arr.shape)
        t0 = time.perf_counter()
        got = strata.open(store)[name][tuple(slice(i, i + 1) for i in at)]
        one.append(time.perf_counter() - t0)
        assert np.array_equal(np.asarray(got).ravel(), arr[at].ravel(), equal_nan=True), (name, at)
    whole = []
    for _ in range(5):
        t0 = time.perf_counter()
        got = strata.open(store)[name][...]
        whole.append(time.perf_counter() - t0)
    assert np.array_equal(np.asarray(got), arr, equal_nan=True), name
    return statistics.median(one), statistics.median(whole)


def main() -> None:
    WORK.mkdir(parents=True, exist_ok=True)
    config = WORK / "small_blocks.toml"
    config.write_text(BLOCKS_CONFIG)
    rng = np.random.default_rng(11)
    rows = []
    for file, name, arr, dims in variables(MIN_BYTES, MAX_BYTES):
        src = fresh(WORK / "small_src.nc")
        write_nc(src, name, arr, dims)
        zsrc = fresh(WORK / "small_zlib.nc")
        write_nc(zsrc, name, arr, dims, zlib=True, complevel=4, shuffle=True)
        zbytes = zlib_bytes(zsrc, name)
        default_store, blocks_store = WORK / "small_default.strata", WORK / "small_blocks.strata"
        import_pairs = []
        for turn in range(TURNS):
            # Alternate who goes first, so a drift in the machine's speed hits both.
            if turn % 2:
                tb, blocks_bytes, blocks_chain, blocks_sub = imported(src, name, blocks_store, config)
                td, default_bytes, default_chain, default_sub = imported(src, name, default_store)
            else:
                td, default_bytes, default_chain, default_sub = imported(src, name, default_store)
                tb, blocks_bytes, blocks_chain, blocks_sub = imported(src, name, blocks_store, config)
            import_pairs.append(td / tb)
        one_d, all_d = read_times(default_store, name, arr, rng)
        one_b, all_b = read_times(blocks_store, name, arr, rng)
        row = {
            **variable_fields(file, name, arr),
            "zlib_bytes": zbytes,
            "default_chain": default_chain,
            "default_subchunk": list(default_sub),
            "stored_whole": tuple(default_sub) == arr.shape,
            "default_vs_zlib": default_bytes / zbytes,
            "blocks_chain": blocks_chain,
            "blocks_subchunk": list(blocks_sub),
            "blocks_vs_zlib": blocks_bytes / zbytes,
            "import_time_ratio": statistics.median(import_pairs),
            "one_default_ms": one_d * 1e3,
            "one_blocks_ms": one_b * 1e3,
            "all_default_ms": all_d * 1e3,
            "all_blocks_ms": all_b * 1e3,
        }
        rows.append(row)
        print(
            f"{file[:28]:28} {name[:16]:16} default {row['default_vs_zlib']:.3f} (whole: {row['stored_whole']}) "
            f"blocks {row['blocks_vs_zlib']:.3f} one element "
            f"{row['one_default_ms']:.3f} / {row['one_blocks_ms']:.3f} ms",
            flush=True,
        )
    print(write_results("small", rows, report)[-1500:])


def report(results) -> str:
    rows = results["rows"]
    lines = [
        *report_header(
            "Small variables: one sub-chunk when smaller, against 64 KiB sub-chunks",
            "`python bench/bench_small.py` (release build: `make build` first)",
            results,
        ),
        "Every numeric variable of 16 KiB to 1 MiB in `../shared/data`, written alone to an "
        "uncompressed NetCDF-4 file and imported with no options (codec auto, objective balanced): "
        "*default*: such a variable is stored as one sub-chunk when its plan, measuring on all of it "
        "its first look's choice in blocks and its best two chains whole, finds whole smaller by more "
        "than 0.5%; *blocks* is the same import with a layout file "
        "asking for 64 KiB sub-chunks (`subchunk_bytes = 65536`), the size every larger variable "
        "gets. Sizes against netCDF4 zlib 4 + shuffle with netCDF's default chunking (one chunk for "
        "these; HDF5's storage size of the variable). Import time: default / blocks, median of "
        f"{TURNS} paired turns (order alternated). Reads, the store opened for each (no decoded block "
        f"survives an open): one element at a random position (median of {READS}) and the whole "
        "variable (median of 5), every answer compared with the file's.",
        "",
        "| file | variable | type | shape | KiB | chain (default) | stored whole | size / netCDF4 (default) "
        "| chain (blocks) | size / netCDF4 (blocks) | import time default / blocks "
        "| one element ms (default / blocks) | whole variable ms (default / blocks) |",
        "|---|---|---|---|---:|---|---|---:|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['file']} | {r['variable']} | {r['dtype']} | {tuple(r['shape'])} | {r['raw_bytes'] / 1024:.0f} "
            f"| `{r['default_chain']}` | {'yes' if r['stored_whole'] else 'no'} | {r['default_vs_zlib']:.3f} "
            f"| `{r['blocks_chain']}` | {r['blocks_vs_zlib']:.3f} "
            f"| {r['import_time_ratio']:.2f} | {r['one_default_ms']:.3f} / {r['one_blocks_ms']:.3f} "
            f"| {r['all_default_ms']:.3f} / {r['all_blocks_ms']:.3f} |"
        )
    n = len(rows)
    default = [r["default_vs_zlib"] for r in rows]
    blocks = [r["blocks_vs_zlib"] for r in rows]
    gain = [d / b for d, b in zip(default, blocks, strict=True)]
    worst = max(rows, key=lambda r: r["default_vs_zlib"])
    whole = [r for r in rows if r["stored_whole"] and r["raw_bytes"] > 64 << 10]
    one = [r["one_default_ms"] / r["one_blocks_ms"] for r in whole]
    lines += [
        "",
        f"- Size at most netCDF4's: the default {sum(x <= 1 for x in default)} of {n} "
        f"(median {statistics.median(default):.3f}, worst {max(default):.3f}: {worst['file']} `{worst['variable']}`, "
        f"{worst['zlib_bytes']} bytes in netCDF4); blocks {sum(x <= 1 for x in blocks)} of {n} "
        f"(median {statistics.median(blocks):.3f}, worst {max(blocks):.3f}).",
        f"- The default over blocks, stored bytes: median {statistics.median(gain):.3f}, "
        f"from {min(gain):.3f} to {max(gain):.3f}.",
        f"- Stored whole: {len(whole)} of the {sum(r['raw_bytes'] > 64 << 10 for r in rows)} variables over "
        "64 KiB (smaller ones are one sub-chunk either way).",
        f"- Import time default / blocks: median {statistics.median(r['import_time_ratio'] for r in rows):.2f} "
        "(the second look compresses the variable three more times: the choice in blocks, the best two whole).",
        f"- One element, the store opened afresh, on the variables stored whole: default / blocks median "
        f"{statistics.median(one) if one else float('nan'):.2f}, at most "
        f"{max((r['one_default_ms'] for r in whole), default=float('nan')):.3f} ms.",
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
