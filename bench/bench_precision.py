"""Reads at reduced precision (layout level M) against full-precision reads of the same store.

For the largest f32 variable of ERSST and the f64 depth field of NorKyst, and for two f64
versions of ERSST x4 (a larger input built from it: four consecutive copies along time) --
a plain cast, whose low four bytes are zero, and the field in kelvin computed in f64, whose
mantissa is fully used as in a double-precision simulation's output -- the
variable is stored with ``layout="M-S"``; we time reading the whole variable at each
precision level (best of 5, decoded-segment cache off), and report bytes read and the
speed-up over the full-precision read of the same store. Also: the same variable stored
without M (``S``, ``zstd:3``), for the cost of the split at full precision.

    python bench/bench_precision.py     (release build: make build-release)
"""

from __future__ import annotations

import json
import time

import netCDF4
import numpy as np
from common import DATA, WORK, fresh, git_rev, machine, report_header

import strata


def inputs():
    with netCDF4.Dataset(DATA / "ersst_v3b_1960-2016_concat.nc") as nc:
        nc.set_auto_maskandscale(False)
        sst = np.asarray(nc["sst"][...])
    with netCDF4.Dataset(DATA / "NorKyst-800m_ZDEPTHS_his_00_3Dsubset.nc") as nc:
        nc.set_auto_maskandscale(False)
        h = np.asarray(nc["h"][...])
    yield "ERSST sst (f32)", sst
    yield "NorKyst h (f64)", h[None] if h.ndim == 2 else h
    x4 = np.concatenate([sst] * 4)
    yield "ERSST x4 as f64", x4.astype("f8")
    # A cast leaves the low 4 bytes of every f64 zero, which flatters full-precision reads;
    # a field computed in double precision (as a simulation writes it) uses all 8 bytes.
    kelvin = np.where(x4 == x4.min(), -999.0, x4.astype("f8") + 273.15)
    yield "ERSST x4 in kelvin (f64 arithmetic)", kelvin


def timed_read(view, repeat=5) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        view[...]
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    WORK.mkdir(parents=True, exist_ok=True)
    rows = []
    for label, arr in inputs():
        dims = tuple(f"d{i}" for i in range(arr.ndim))
        plain = fresh(WORK / "prec_plain.strata")
        strata.write_arrays(plain, {"v": (dims, arr)}, record_dim=dims[0], codec="zstd:3")
        split = fresh(WORK / "prec_split.strata")
        strata.write_arrays(split, {"v": (dims, arr)}, record_dim=dims[0], layout="M-S")
        ds_plain = strata.open(plain, cache_bytes=0)
        ds = strata.open(split, cache_bytes=0)
        full = timed_read(ds["v"])
        before = ds.read_stats()["bytes_read"]
        ds["v"][...]
        full_bytes = ds.read_stats()["bytes_read"] - before
        row = {
            "input": label,
            "raw_bytes": arr.nbytes,
            "plain_s": timed_read(ds_plain["v"]),
            "full_s": full,
            "full_bytes": full_bytes,
            "levels": [],
        }
        for k, kept, bound in ds["v"].precision_levels[:-1]:
            view = ds["v"].at_precision(k)
            before = ds.read_stats()["bytes_read"]
            got = view[...]
            read = ds.read_stats()["bytes_read"] - before
            finite = np.isfinite(arr) & (arr != 0)
            rel = np.abs(got[finite].astype("f8") - arr[finite].astype("f8")) / np.abs(arr[finite].astype("f8"))
            row["levels"].append(
                {
                    "level": k,
                    "bytes_kept": kept,
                    "bound": bound,
                    "max_rel_error": float(rel.max(initial=0.0)),
                    "seconds": timed_read(view),
                    "bytes_read": read,
                }
            )
        rows.append(row)
        print(label, {lv["level"]: round(full / lv["seconds"], 2) for lv in row["levels"]}, flush=True)
    results = {"machine": machine(), "commit": git_rev(), "date": time.strftime("%Y-%m-%d"), "rows": rows}
    out = WORK.parent / "results"
    (out / "precision.json").write_text(json.dumps(results, indent=1))
    (out / "precision.md").write_text(report(results))
    print(report(results))


def report(results) -> str:
    lines = [
        *report_header(
            "Reduced-precision reads (layout level M)",
            "`python bench/bench_precision.py` (release build: `make build-release` first)",
            results,
        ),
        "Whole-variable reads, best of 5, decoded-segment cache off, both cores. The store is written with "
        "`layout='M-S'` (groups f32 2,1,1; f64 2,1,1,1,1,1,1; zstd:3 per group). Speed-up = full-precision "
        "read time of the same store / time at that level. `S, zstd:3` = the same data without the split.",
        "",
        "| input | raw MB | level | bytes of element | bytes read | time ms | speed-up vs full | worst rel. error "
        "(bound) |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in results["rows"]:
        mb = r["raw_bytes"] / 1e6
        lines.append(
            f"| {r['input']} | {mb:.0f} | S, zstd:3 | all | | {r['plain_s'] * 1e3:.1f} | "
            f"{r['full_s'] / r['plain_s']:.2f} | exact |"
        )
        lines.append(
            f"| {r['input']} | {mb:.0f} | full | all | {r['full_bytes'] / 1e6:.1f} MB | {r['full_s'] * 1e3:.1f} | "
            "1.00 | exact |"
        )
        for lv in r["levels"]:
            lines.append(
                f"| {r['input']} | {mb:.0f} | {lv['level']} | {lv['bytes_kept']} | {lv['bytes_read'] / 1e6:.1f} MB | "
                f"{lv['seconds'] * 1e3:.1f} | {r['full_s'] / lv['seconds']:.2f} | "
                f"{lv['max_rel_error']:.2e} ({lv['bound']:.1e}) |"
            )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
