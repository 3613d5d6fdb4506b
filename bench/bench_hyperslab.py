"""Stored size, ingest speed and random hyperslab read latency: strata against netCDF4,
HDF5+Blosc2, Zarr v3 and python-blosc2 on the same arrays, in one run.

    make bench                         # or: python bench/bench_hyperslab.py [--quick]

Writes bench/results/hyperslab.md and hyperslab.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import netCDF4
import numpy as np
from common import DATA, WORK, dir_size, fresh, git_rev, machine, median_latency, random_boxes
from peers import PEERS

import strata

FRACTIONS = {"0.1%": (0.001, 60), "1%": (0.01, 40), "10%": (0.1, 12)}


def load(name: str, var: str) -> np.ndarray:
    with netCDF4.Dataset(DATA / name) as nc:
        v = nc[var]
        v.set_auto_maskandscale(False)
        return np.ascontiguousarray(v[...])


def datasets(quick: bool):
    sst = load("ersst_v3b_1960-2016_concat.nc", "sst")
    yield "ERSST sst", "ersst_v3b_1960-2016_concat.nc: sst (684, 89, 180) f32, 31% NaN", sst
    yield (
        "TREFHT ensemble",
        "trefht_B06_8member_ensemble_1890-1999.nc: TREFHT (8, 110, 64, 128) f32",
        load("trefht_B06_8member_ensemble_1890-1999.nc", "TREFHT"),
    )
    if not quick:
        yield (
            "ERSST sst x4",
            "ERSST sst joined 4 times along time (2736, 89, 180) f32, 175 MB: a larger input built from real data",
            np.concatenate([sst] * 4),
        )


def auto_shapes(arr: np.ndarray):
    """strata's automatic chunk and sub-chunk shapes; every chunked peer gets the same."""
    probe = WORK / "probe.strata"
    fresh(probe)
    dims = tuple(f"d{i}" for i in range(arr.ndim))
    strata.write_arrays(probe, {"v": (dims, arr[:1])}, record_dim=dims[0])
    # Chunking is planned from the full record count, so plan on a dataset of the real length.
    fresh(probe)
    strata.write_arrays(probe, {"v": (dims, arr)}, record_dim=dims[0])
    var = strata.open(probe)["v"]
    return var.chunks, var.subchunks


def run(quick: bool) -> dict:
    WORK.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(42)
    results = {"machine": machine(), "commit": git_rev(), "date": time.strftime("%Y-%m-%d"), "datasets": []}
    for label, description, arr in datasets(quick):
        chunks, blocks = auto_shapes(arr)
        boxes = {k: random_boxes(arr.shape, f, n, rng) for k, (f, n) in FRACTIONS.items()}
        entry = {
            "label": label,
            "description": description,
            "raw_bytes": arr.nbytes,
            "chunks": chunks,
            "subchunks": blocks,
            "peers": [],
        }
        print(f"\n{label}: {arr.shape} {arr.dtype}, chunk {chunks}, sub-chunk {blocks}", flush=True)
        for peer in PEERS:
            path = fresh(WORK / (label.replace(" ", "_") + peer.suffix))
            t0 = time.perf_counter()
            peer.write(path, arr, chunks, blocks)
            ingest = time.perf_counter() - t0
            read = peer.open(path)
            for k, bx in boxes.items():  # correctness and warm-up
                got = np.asarray(read(bx[0]))
                if got.tobytes() != arr[bx[0]].tobytes():
                    sys.exit(f"{peer.name} returned wrong values for {k} box {bx[0]}")
            latency = {k: median_latency(read, bx) for k, bx in boxes.items()}
            row = {
                "peer": peer.name,
                "stored_bytes": dir_size(path),
                "ingest_s": ingest,
                "ingest_mb_s": arr.nbytes / 1e6 / ingest,
                "latency_s": latency,
            }
            entry["peers"].append(row)
            print(
                f"  {peer.name:<28} {row['stored_bytes'] / 1e6:8.1f} MB  ingest {row['ingest_mb_s']:7.1f} MB/s  "
                + "  ".join(f"{k} {v * 1e3:7.2f} ms" for k, v in latency.items()),
                flush=True,
            )
        results["datasets"].append(entry)
    return results


def report(results: dict, command: str) -> str:
    lines = [
        "# Hyperslab benchmark: strata vs netCDF4, HDF5+Blosc2, Zarr v3, python-blosc2",
        "",
        f"Command: `{command}`  ",
        f"Machine: {results['machine']}  ",
        f"Commit: {results['commit']}, {results['date']}",
        "",
        "Same array for every tool, written from memory; every chunked format uses strata's automatic "
        "sub-chunk shape as its chunk (the decode unit), python-blosc2 uses strata's chunk and sub-chunk "
        "as chunks and blocks. Compression: zstd level 5 with byte shuffle for the Blosc-based peers, "
        "zlib 4 + shuffle for netCDF4, shuffle + zstd 3 for strata. Latency: median wall time of reading "
        "random boxes that hold the given share of the elements (same boxes for every tool), files in "
        "the page cache, each result checked against NumPy. Ratios are peer / strata (above 1: strata "
        "is faster or smaller).",
        "",
    ]
    bars = []
    for ds in results["datasets"]:
        lines += [
            f"## {ds['label']}",
            "",
            ds["description"] + f"; chunk {tuple(ds['chunks'])}, sub-chunk {tuple(ds['subchunks'])}",
            "",
        ]
        lines.append("| tool | stored MB | compression ratio | ingest MB/s | 0.1% ms | 1% ms | 10% ms |")
        lines.append("|---|---:|---:|---:|---:|---:|---:|")
        for p in ds["peers"]:
            lat = p["latency_s"]
            lines.append(
                f"| {p['peer']} | {p['stored_bytes'] / 1e6:.1f} | {ds['raw_bytes'] / p['stored_bytes']:.2f} | "
                f"{p['ingest_mb_s']:.0f} | {lat['0.1%'] * 1e3:.3f} | {lat['1%'] * 1e3:.3f} | {lat['10%'] * 1e3:.2f} |"
            )
        s = ds["peers"][0]
        lines += [
            "",
            "Ratios peer / strata (latency and size: above 1 means strata is better; ingest: strata "
            "speed over the peer's):",
            "",
        ]
        lines.append("| tool | size | ingest speed-up | 0.1% | 1% | 10% |")
        lines.append("|---|---:|---:|---:|---:|---:|")
        for p in ds["peers"][1:]:
            lat, sl = p["latency_s"], s["latency_s"]
            lines.append(
                f"| {p['peer']} | {p['stored_bytes'] / s['stored_bytes']:.2f} | "
                f"{s['ingest_mb_s'] / p['ingest_mb_s']:.1f} | {lat['0.1%'] / sl['0.1%']:.2f} | "
                f"{lat['1%'] / sl['1%']:.2f} | {lat['10%'] / sl['10%']:.2f} |"
            )
        lines.append("")
        for k in ("0.1%", "1%"):
            fastest = min(p["latency_s"][k] for p in ds["peers"][1:])
            bars.append(
                (
                    f"{ds['label']}: read {k} no slower than the fastest peer",
                    s["latency_s"][k] <= fastest,
                    f"{s['latency_s'][k] * 1e3:.3f} ms vs {fastest * 1e3:.3f} ms",
                )
            )
        nc = next(p for p in ds["peers"] if p["peer"].startswith("netCDF4"))
        bars.append(
            (
                f"{ds['label']}: ingest at least 3x netCDF4-zlib",
                s["ingest_mb_s"] >= 3 * nc["ingest_mb_s"],
                f"{s['ingest_mb_s'] / nc['ingest_mb_s']:.1f}x",
            )
        )
    lines += ["## Bars (issue #2)", "", "| bar | met | figure |", "|---|---|---|"]
    lines += [f"| {b} | {'yes' if ok else '**no**'} | {fig} |" for b, ok, fig in bars]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="skip the large input")
    args = parser.parse_args()
    results = run(args.quick)
    command = "python bench/bench_hyperslab.py" + (" --quick" if args.quick else "")
    out = WORK.parent / "results"
    out.mkdir(exist_ok=True)
    (out / "hyperslab.json").write_text(json.dumps(results, indent=1, default=list))
    text = report(results, command)
    (out / "hyperslab.md").write_text(text)
    print("\n" + text[text.index("## Bars") :])


if __name__ == "__main__":
    main()
