"""Reading overlapped with decoding: a dense read of 10% of ERSST x4 (a box in the middle)
through a read path slowed to a given bandwidth (0.5 ms per request, one shared link),
against the read alone and the decode alone, with the overlap on and off.

    python bench/bench_overlap.py         # writes bench/results/overlap.md and overlap.json

The measuring is done by the Rust example `read_overlap` (crates/strata-core/examples),
which this script builds and runs on a store it writes first.
"""

from __future__ import annotations

import json
import os
import subprocess
import time

import netCDF4
import numpy as np
from common import DATA, ROOT, WORK, fresh, git_rev, machine, report_header

import strata

BANDWIDTHS_MB_S = (50, 200, 400, 1000, 3000)
TURNS = 3


def build_store():
    with netCDF4.Dataset(DATA / "ersst_v3b_1960-2016_concat.nc") as nc:
        v = nc["sst"]
        v.set_auto_maskandscale(False)
        sst = v[...]
    store = fresh(WORK / "overlap_ersst_x4.strata")
    x4 = np.concatenate([sst] * 4)
    strata.write_arrays(store, {"sst": (("time", "lat", "lon"), x4)}, record_dim="time", codec="auto")
    return store


def main() -> None:
    WORK.mkdir(parents=True, exist_ok=True)
    store = build_store()
    target = os.environ.get("CARGO_TARGET_DIR", os.path.expanduser("~/.cache/strata/target"))
    subprocess.run(
        ["cargo", "build", "--release", "-q", "-p", "strata-core", "--example", "read_overlap"], cwd=ROOT, check=True
    )
    exe = os.path.join(target, "release", "examples", "read_overlap")
    runs = []
    for turn in range(TURNS):
        out = subprocess.run(
            [exe, str(store), "sst", "0.1", *map(str, BANDWIDTHS_MB_S)], capture_output=True, text=True, check=True
        ).stdout
        runs += [dict(json.loads(line), turn=turn) for line in out.splitlines() if line.strip()]
    results = {
        "machine": machine(),
        "commit": git_rev(),
        "date": time.strftime("%Y-%m-%d"),
        "chain": strata.open(store)["sst"].plan["chosen"],
        "runs": runs,
    }
    out = WORK.parent / "results"
    (out / "overlap.json").write_text(json.dumps(results, indent=1))
    (out / "overlap.md").write_text(report(results))
    print(report(results))


def report(results) -> str:
    import statistics

    lines = [
        *report_header(
            "Reading overlapped with decoding",
            "`python bench/bench_overlap.py` (builds and runs `cargo run --release -p strata-core "
            "--example read_overlap`)",
            results,
        ),
        'ERSST `sst` four times along time (175 MB, written by `write_arrays(codec="auto")`: '
        f"`{results['chain']}`); a dense read of a box in the middle holding 10% of the elements, "
        "no decoded-segment cache. The read path is the store's files behind a throttle: one link of "
        "the given bandwidth shared by all requests, plus 0.5 ms per request (a disk, NFS or an object "
        "store, on a machine whose files sit in memory). Read = fetching the box's segments through the "
        "throttle without decoding (`StoreReader::fetch_only`); decode = the same read from the page "
        "cache without the throttle; overlapped = the read through the throttle as strata does it (range "
        "reads stream in file order on I/O threads, at most two 2 MiB batches ahead, while the pool "
        "decodes each batch as its bytes arrive); sequential = the same with the overlap off (fetch "
        f"everything, then decode). Best of 3 per run; the medians of {TURNS} runs of the ratios.",
        "",
        "| link MB/s | stored MB read | read s | decode s | overlapped s | sequential s "
        "| overlapped / max(read, decode) | sequential / max(read, decode) |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    worst = 0.0
    for mb_s in sorted({r["mb_s"] for r in results["runs"]}):
        rs = [r for r in results["runs"] if r["mb_s"] == mb_s]

        def med(k, rs=rs):
            return statistics.median(r[k] for r in rs)

        worst = max(worst, med("overlapped_vs_max"))
        lines.append(
            f"| {mb_s:.0f} | {med('stored_bytes') / 1e6:.1f} | {med('read_s'):.3f} | {med('decode_s'):.3f} "
            f"| {med('overlapped_s'):.3f} | {med('sequential_s'):.3f} | {med('overlapped_vs_max'):.2f} "
            f"| {med('sequential_vs_max'):.2f} |"
        )
    lines += ["", f"Worst overlapped / max(read, decode): {worst:.2f} (bar: at most 1.2).", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
